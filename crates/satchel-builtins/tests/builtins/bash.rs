//! The bash tool through the registry, as a model would call it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests and benches fail loudly by design.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use satchel_builtins::builtin_registry;
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_exec::{OutputConfig, RunnerConfig, SpillConfig};
use satchel_tools::{Style, ToolContext, ToolsConfig};
use serde_json::{Value, json};

const TEST_BOUND: Duration = Duration::from_secs(60);

fn config(spill_dir: Option<&std::path::Path>) -> Arc<ToolsConfig> {
    Arc::new(ToolsConfig {
        runner: RunnerConfig {
            stdout: OutputConfig { limit_bytes: 64 },
            stderr: OutputConfig { limit_bytes: 32 },
            kill_grace: Duration::from_millis(200),
            spill: SpillConfig {
                dir: spill_dir.map(Into::into),
                ..SpillConfig::default()
            },
            ..RunnerConfig::default()
        },
        ..ToolsConfig::default()
    })
}

async fn bash_in(dir: &std::path::Path, input: Value, config: Arc<ToolsConfig>) -> ToolOutput {
    let registry = builtin_registry().unwrap();
    let ctx = ToolContext::standalone("call-1", dir.to_path_buf(), config);
    let call = ToolCall {
        id: "call-1".into(),
        name: "bash".into(),
        input,
    };
    tokio::time::timeout(TEST_BOUND, registry.call(&call, &ctx))
        .await
        .expect("bash call hung")
}

async fn bash(input: Value) -> ToolOutput {
    bash_in(&std::env::temp_dir(), input, config(None)).await
}

fn fields(output: &ToolOutput) -> &Value {
    output
        .results
        .structured()
        .expect("bash results are one JSON object")
}

#[tokio::test]
async fn output_has_the_documented_shape() {
    let out = bash(json!({"command": "echo hi; echo err >&2; exit 2"})).await;
    assert!(
        !out.is_error,
        "a non-zero exit is a result, not a tool failure"
    );
    let mut fields = fields(&out).clone();
    assert!(fields["duration_ms"].is_u64());
    fields["duration_ms"] = json!(0);
    assert_eq!(
        fields,
        json!({"stdout": "hi\n", "stderr": "err\n", "exit_code": 2, "truncated": false, "timed_out": false, "duration_ms": 0, "sandbox": "workspace"})
    );
    assert!(
        out.user_message
            .starts_with("ran `echo hi; echo err >&2; exit 2` in "),
        "{}",
        out.user_message
    );
    assert!(
        out.user_message.ends_with(", exit 2"),
        "{}",
        out.user_message
    );
    assert_eq!(out.response, None);
}

#[tokio::test]
async fn schema_invalid_inputs_are_rejected_before_running() {
    let cases = [
        (json!({}), "", "required"),
        (
            json!({"command": "true", "timeout": -1}),
            "/timeout",
            "minimum",
        ),
        (
            json!({"command": "true", "timeout": 601}),
            "/timeout",
            "maximum",
        ),
        (
            json!({"command": "true", "timeout": 1.5}),
            "/timeout",
            "type",
        ),
        (
            json!({"command": "true", "shell": "zsh"}),
            "",
            "additionalProperties",
        ),
        (json!({"command": ""}), "/command", "minLength"),
        (json!({"command": ["ls"]}), "/command", "type"),
    ];
    for (input, path, rule) in cases {
        let out = bash(input.clone()).await;
        assert_eq!(out.error_code, Some(ErrorCode::InvalidParams), "{input}");
        let violation = &fields(&out)["violations"][0];
        assert_eq!(
            (violation["path"].as_str(), violation["rule"].as_str()),
            (Some(path), Some(rule)),
            "{input}"
        );
    }
}

#[tokio::test]
async fn working_dir_is_resolved_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = bash_in(
        dir.path(),
        json!({"command": "pwd", "working_dir": "sub"}),
        config(None),
    )
    .await;
    let expected = format!(
        "{}\n",
        dir.path().join("sub").canonicalize().unwrap().display()
    );
    assert_eq!(fields(&out)["stdout"], expected);

    let out = bash_in(
        dir.path(),
        json!({"command": "pwd", "working_dir": "missing"}),
        config(None),
    )
    .await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));
    let message = fields(&out)["error"].as_str().unwrap();
    assert!(
        message.starts_with("working_dir `missing` does not exist (resolved to `"),
        "{message}"
    );
}

#[tokio::test]
async fn timeout_is_an_error_that_keeps_the_partial_output() {
    let out = bash(json!({"command": "echo partial; sleep 30", "timeout": 1})).await;
    assert!(out.is_error);
    assert_eq!(out.error_code, Some(ErrorCode::ToolTimeout));
    let fields = fields(&out);
    assert_eq!(fields["stdout"], "partial\n");
    assert_eq!(fields["timed_out"], true);
    assert_eq!(fields["error_code"], "TOOL_TIMEOUT");
    assert_eq!(fields["signal"], "SIGTERM");
    assert_eq!(fields["exit_code"], 143);
    assert!(
        out.response
            .as_deref()
            .unwrap()
            .contains("did not finish within 1 s")
    );
}

#[tokio::test]
async fn truncated_output_points_to_the_spill_file() {
    let spill = tempfile::tempdir().unwrap();
    let out = bash_in(
        &std::env::temp_dir(),
        json!({"command": "seq 1 5000"}),
        config(Some(spill.path())),
    )
    .await;
    let fields = fields(&out);
    assert_eq!(fields["truncated"], true);
    let stdout = fields["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("1\n2\n3\n"), "{stdout}");
    assert!(stdout.ends_with("4999\n5000\n"), "{stdout}");
    let response = out.response.expect("a truncation note");
    let path = response
        .split(" is in ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect(&response);
    let full = std::fs::read_to_string(path).unwrap();
    assert_eq!(full.lines().count(), 5000);
}

#[tokio::test]
async fn formatters_render_for_terminal_and_markdown() {
    let registry = builtin_registry().unwrap();
    let tool = registry.get("bash").unwrap();
    let input = json!({"command": "printf 'a\\n'; echo b >&2"});
    let out = bash(input.clone()).await;
    let mut out_fixed = out.clone();
    if let satchel_core::ToolResults::Parts(parts) = &mut out_fixed.results
        && let Some(satchel_core::Content::Json { json }) = parts.first_mut()
    {
        json["duration_ms"] = json!(4);
    }
    assert_eq!(
        tool.format_use(&input, Style::Terminal { color: false }),
        "$ printf 'a\\n'; echo b >&2"
    );
    assert_eq!(
        tool.format_result(&out_fixed, Style::Terminal { color: false }),
        "a\nb\nexit 0 · 4 ms"
    );
    assert_eq!(
        tool.format_result(&out_fixed, Style::Terminal { color: true }),
        "a\n\x1b[31mb\x1b[0m\n\x1b[2mexit 0 · 4 ms\x1b[0m"
    );
    assert_eq!(
        tool.format_use(&input, Style::Markdown),
        "```bash\nprintf 'a\\n'; echo b >&2\n```"
    );
    assert_eq!(
        tool.format_result(&out_fixed, Style::Markdown),
        "```text\na\n```\n\nstderr:\n```text\nb\n```\n\n*exit 0 · 4 ms*"
    );
}

#[test]
fn spec_is_truthful() {
    let registry = builtin_registry().unwrap();
    let spec = registry.get("bash").unwrap().spec();
    assert_eq!(spec.annotations.read_only_hint, Some(false));
    assert_eq!(spec.annotations.destructive_hint, Some(true));
    assert_eq!(spec.annotations.open_world_hint, Some(true));
    assert!(
        spec.capabilities
            .writes
            .contains(&satchel_core::Resource::FILES)
    );
    assert_eq!(spec.input_schema["required"], json!(["command"]));
}
