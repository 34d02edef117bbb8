//! The registry's contract: every problem becomes an actionable error
//! output, nothing reaches the caller as a panic or a Rust error.

use std::sync::Arc;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use satchel_core::{ErrorCode, ToolCall, ToolOutput, ToolResults, ToolSpec};
use satchel_tools::{Registry, RegistryError, Tool, ToolContext, ToolError, ToolsConfig};
use serde_json::{Value, json};

/// A tool that echoes, fails or panics on request.
struct Echo {
    spec: ToolSpec,
}

impl Echo {
    fn new(name: &str, schema: Value) -> Echo {
        Echo {
            spec: ToolSpec {
                name: name.into(),
                title: None,
                description: "echo".into(),
                input_schema: schema,
                output_schema: None,
                annotations: Default::default(),
                capabilities: Default::default(),
            },
        }
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match input.get("mode").and_then(Value::as_str) {
            Some("panic") => panic!("deliberate panic"),
            Some("fail") => Err(ToolError::new(
                ErrorCode::InvalidOutput,
                "deliberate failure",
            )),
            _ => Ok(ToolOutput::success(ToolResults::json(input), "echoed")),
        }
    }
}

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "mode": {"enum": ["ok", "fail", "panic"]},
            "count": {"type": "integer", "minimum": 0, "maximum": 10}
        },
        "required": ["text"],
        "additionalProperties": false
    })
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Echo::new("echo", echo_schema())).unwrap();
    registry
        .register(Echo::new("other", json!({"type": "object"})))
        .unwrap();
    registry
}

fn ctx() -> ToolContext {
    ToolContext::standalone(
        "call-1",
        std::env::temp_dir(),
        Arc::new(ToolsConfig::default()),
    )
}

async fn call(registry: &Registry, name: &str, input: Value) -> ToolOutput {
    registry
        .call(
            &ToolCall {
                id: "call-1".into(),
                name: name.into(),
                input,
            },
            &ctx(),
        )
        .await
}

fn error_body(output: &ToolOutput) -> &Value {
    assert!(output.is_error, "expected an error output, got {output:?}");
    output
        .results
        .structured()
        .expect("error results are one JSON object")
}

#[tokio::test]
async fn valid_call_runs() {
    let out = call(&registry(), "echo", json!({"text": "hi", "count": 2})).await;
    assert!(!out.is_error);
    assert_eq!(
        out.results.structured(),
        Some(&json!({"text": "hi", "count": 2}))
    );
}

#[tokio::test]
async fn unknown_tool_lists_the_names() {
    let out = call(&registry(), "ecko", json!({})).await;
    assert_eq!(
        error_body(&out),
        &json!({
            "error": "no tool named `ecko`; available tools: echo, other",
            "error_code": "TOOL_NOT_FOUND",
            "available_tools": ["echo", "other"],
        })
    );
    assert_eq!(out.error_code, Some(ErrorCode::ToolNotFound));
}

#[tokio::test]
async fn missing_required_property_names_it() {
    let out = call(&registry(), "echo", json!({})).await;
    let body = error_body(&out);
    assert_eq!(body["error_code"], "INVALID_PARAMS");
    assert_eq!(
        body["violations"],
        json!([{"path": "", "rule": "required", "message": "\"text\" is a required property"}])
    );
    assert_eq!(
        body["error"],
        "invalid input for tool `echo`: at input root: \"text\" is a required property (required). \
         Fix the input to match the tool's inputSchema and call it again."
    );
}

#[tokio::test]
async fn out_of_range_and_wrong_type_give_path_and_rule() {
    let out = call(&registry(), "echo", json!({"text": 5, "count": -1})).await;
    let violations = &error_body(&out)["violations"];
    assert_eq!(
        violations,
        &json!([
            {"path": "/count", "rule": "minimum", "message": "-1 is less than the minimum of 0"},
            {"path": "/text", "rule": "type", "message": "5 is not of type \"string\""},
        ])
    );
}

#[tokio::test]
async fn extra_property_is_rejected() {
    let out = call(&registry(), "echo", json!({"text": "x", "colour": "red"})).await;
    let violations = &error_body(&out)["violations"];
    assert_eq!(violations[0]["rule"], "additionalProperties");
    assert!(
        violations[0]["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{violations}"
    );
}

#[tokio::test]
async fn tool_error_becomes_an_error_output() {
    let out = call(&registry(), "echo", json!({"text": "x", "mode": "fail"})).await;
    assert_eq!(
        error_body(&out),
        &json!({"error": "deliberate failure", "error_code": "INVALID_OUTPUT"})
    );
}

#[tokio::test]
async fn panic_inside_a_tool_is_contained() {
    let out = call(&registry(), "echo", json!({"text": "x", "mode": "panic"})).await;
    let body = error_body(&out);
    assert_eq!(body["error_code"], "TOOL_CRASHED");
    assert!(
        body["error"].as_str().unwrap().contains("deliberate panic"),
        "{body}"
    );
    // The registry is still usable afterwards.
    assert!(
        !call(&registry(), "echo", json!({"text": "after"}))
            .await
            .is_error
    );
}

#[tokio::test]
async fn cancelled_context_does_not_run() {
    let context = ctx();
    context.cancel.cancel();
    let call = ToolCall {
        id: "c".into(),
        name: "echo".into(),
        input: json!({"text": "x"}),
    };
    let out = registry().call(&call, &context).await;
    assert_eq!(out.error_code, Some(ErrorCode::Cancelled));
}

#[test]
fn registration_rejects_bad_names_duplicates_and_schemas() {
    let mut registry = registry();
    assert!(matches!(
        registry.register(Echo::new("echo", echo_schema())),
        Err(RegistryError::Duplicate(name)) if name == "echo"
    ));
    assert!(matches!(
        registry.register(Echo::new("bad name", echo_schema())),
        Err(RegistryError::InvalidName(_))
    ));
    for schema in [
        json!("not an object"),
        json!({"type": "string"}),
        json!({"type": "object", "properties": {"x": {"type": 5}}}),
        json!({"type": "object", "properties": {"x": {"minimum": "zero"}}}),
    ] {
        let result = registry.register(Echo::new("fresh", schema.clone()));
        assert!(
            matches!(result, Err(RegistryError::InvalidSchema { .. })),
            "{schema} was accepted"
        );
    }
}

#[test]
fn offered_specs_are_made_once_per_edit_form_and_again_after_a_registration() {
    use satchel_core::edit_forms::EditForm;
    let mut registry = registry();
    registry
        .register(Echo::new("apply_patch", json!({"type": "object"})))
        .unwrap();
    let names = |specs: &[ToolSpec]| specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    let satchel = registry.offered_specs(EditForm::Satchel);
    assert_eq!(names(&satchel), ["echo", "other"]);
    let patch = registry.offered_specs(EditForm::ApplyPatch);
    assert_eq!(names(&patch), ["apply_patch", "echo", "other"]);
    // Shared, not copied, on every later turn.
    assert!(Arc::ptr_eq(
        &satchel,
        &registry.offered_specs(EditForm::Satchel)
    ));
    assert!(Arc::ptr_eq(
        &patch,
        &registry.offered_specs(EditForm::ApplyPatch)
    ));
    registry
        .register(Echo::new("another", json!({"type": "object"})))
        .unwrap();
    let after = registry.offered_specs(EditForm::Satchel);
    assert_eq!(names(&after), ["another", "echo", "other"]);
}

#[test]
fn remote_refs_are_never_fetched() {
    let mut registry = Registry::new();
    let schema =
        json!({"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}});
    let error = registry.register(Echo::new("remote", schema)).unwrap_err();
    assert!(
        matches!(error, RegistryError::InvalidSchema { .. }),
        "{error}"
    );
}

#[test]
fn registry_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Registry>();
}
