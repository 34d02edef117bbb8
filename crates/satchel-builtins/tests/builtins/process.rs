//! The `process` tool through the registry, as a model calls it: per-action
//! fields checked with errors that name the action and the field, ids of
//! another conversation not found, and `bash` `background: true` refusing
//! out-of-range input. The processes themselves are tested in
//! `satchel-exec` and end to end in `satchel-cli`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::sync::Arc;

use satchel_builtins::{BuiltinDeps, builtin_tools};
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_tools::{Registry, ToolContext, ToolsConfig};
use serde_json::{Value, json};

fn registry(deps: &BuiltinDeps) -> Registry {
    let mut registry = Registry::new();
    for tool in builtin_tools(deps) {
        registry.register_arc(tool).unwrap();
    }
    registry
}

fn ctx(dir: &std::path::Path, conversation: &str) -> ToolContext {
    let mut ctx = ToolContext::standalone("c", dir.to_path_buf(), Arc::new(ToolsConfig::default()));
    ctx.conversation_id = Some(conversation.to_owned());
    ctx
}

async fn call(registry: &Registry, ctx: &ToolContext, name: &str, input: Value) -> ToolOutput {
    let call = ToolCall {
        id: "t".into(),
        name: name.into(),
        input,
    };
    registry.call(&call, ctx).await
}

fn error_text(output: &ToolOutput) -> String {
    output
        .results
        .structured()
        .and_then(|v| v.get("error"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn each_action_says_what_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(&BuiltinDeps::default());
    let ctx = ctx(dir.path(), "c1");
    for (input, says) in [
        (
            json!({"action": "output"}),
            "action `output` requires `process_id`",
        ),
        (
            json!({"action": "kill"}),
            "action `kill` requires `process_id`",
        ),
        (
            json!({"action": "input", "process_id": "p1"}),
            "no background process `p1`",
        ),
        (json!({"action": "stop"}), "is not one of \"output\""),
        (
            json!({"action": "output", "process_id": "p1", "until": "("}),
            "no background process `p1`",
        ),
    ] {
        let output = call(&registry, &ctx, "process", input.clone()).await;
        assert!(output.is_error, "{input}");
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams), "{input}");
        assert!(
            error_text(&output).contains(says),
            "{input}: {}",
            error_text(&output)
        );
    }
    let listed = call(&registry, &ctx, "process", json!({"action": "list"})).await;
    assert!(!listed.is_error);
    assert_eq!(listed.results.structured().unwrap()["processes"], json!([]));
}

#[tokio::test]
async fn another_conversations_process_is_not_found_and_bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let deps = BuiltinDeps::default();
    let registry = registry(&deps);
    let mine = ctx(dir.path(), "c1");
    let theirs = ctx(dir.path(), "c2");
    let started = call(
        &registry,
        &mine,
        "bash",
        json!({"command": "echo ready; sleep 30", "background": true, "wait": 0.5, "sandbox": "none"}),
    )
    .await;
    assert!(!started.is_error, "{started:?}");
    let fields = started.results.structured().unwrap().clone();
    assert_eq!(fields["process_id"], "p1");
    assert_eq!(fields["output"], "ready\n");
    assert!(
        started
            .response
            .unwrap()
            .contains("Running in the background as p1")
    );

    let other = call(
        &registry,
        &theirs,
        "process",
        json!({"action": "kill", "process_id": "p1"}),
    )
    .await;
    assert!(error_text(&other).contains("no background process `p1` in this conversation"));

    for (input, says) in [
        (
            json!({"action": "output", "process_id": "p1", "until": "("}),
            "`until` is not a valid regex",
        ),
        (
            json!({"action": "output", "process_id": "p1", "until": "x".repeat(5000)}),
            "`until` is longer than 4096 bytes",
        ),
        (
            json!({"action": "output", "process_id": "p1", "wait": 601}),
            "give seconds from 0 to 600",
        ),
        (
            json!({"action": "input", "process_id": "p1"}),
            "action `input` requires `text`",
        ),
    ] {
        let output = call(&registry, &mine, "process", input.clone()).await;
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams), "{input}");
        assert!(
            error_text(&output).contains(says),
            "{input}: {}",
            error_text(&output)
        );
    }
    let tty_alone = call(
        &registry,
        &mine,
        "bash",
        json!({"command": "true", "tty": true}),
    )
    .await;
    assert!(error_text(&tty_alone).contains("`tty` needs `background: true`"));

    let killed = call(
        &registry,
        &mine,
        "process",
        json!({"action": "kill", "process_id": "p1"}),
    )
    .await;
    assert_eq!(
        killed.results.structured().unwrap()["state"],
        "killed by SIGTERM"
    );
    deps.processes.end_all().await;
}
