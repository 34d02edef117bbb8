//! Tool schemas in the form each consumer accepts (issue #45): what
//! `satchel run` sends the Anthropic Messages API (a scripted server that
//! refuses what the real API refuses, with its words), what
//! `satchel tools show --for` prints, and the validation error of a field
//! required for one action.

use serde_json::{Value, json};

use crate::support::fake_anthropic::{Answer, FakeAnthropic, refusal};
use crate::support::project::Project;

/// An external tool with a tagged union at its root, as zod serialises
/// `z.discriminatedUnion`: the shape the Anthropic API refuses.
const TAGGED_TOOL: &str = r#"#!/bin/sh
if [ "$1" = --schema ]; then
cat <<'JSON'
{"description": "Open a file or a URL",
 "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "oneOf": [
   {"type": "object", "properties": {"kind": {"const": "file"}, "path": {"type": "string"}}, "required": ["kind", "path"], "additionalProperties": false},
   {"type": "object", "properties": {"kind": {"const": "url"}, "url": {"type": "string"}}, "required": ["kind", "url"], "additionalProperties": false}]}}
JSON
exit 0
fi
cat
"#;

fn project_with_tagged_tool(config: &Value) -> Project {
    let project = Project::new(config);
    let tools = project.path("project/.agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let path = tools.join("open");
    std::fs::write(&path, TAGGED_TOOL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    project
}

/// Reported: with `provider: anthropic` every request carried `code`,
/// `memory` and `conversation` with an `allOf` at the root of their
/// `input_schema`, which the real API refuses as a whole.
#[test]
fn the_scripted_api_refuses_what_the_real_one_refuses() {
    let tool = |schema: Value| json!([{"name": "memory", "input_schema": schema}]);
    let refused = refusal(
        tool(json!({"type": "object", "allOf": [{}]}))
            .as_array()
            .unwrap(),
    );
    assert_eq!(
        refused.as_deref(),
        Some(
            "tools.0.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"
        )
    );
    assert!(
        refusal(
            tool(json!({"oneOf": [{"type": "object"}]}))
                .as_array()
                .unwrap()
        )
        .is_some()
    );
    assert!(
        refusal(
            tool(json!({"type": "object", "if": {}}))
                .as_array()
                .unwrap()
        )
        .is_none()
    );
}

#[test]
fn satchel_run_sends_anthropic_no_schema_it_would_refuse() {
    let model = FakeAnthropic::start(vec![
        Answer::ToolUse("bash".into(), json!({"command": "echo from-the-tool"})),
        Answer::Text("All done.".into()),
    ]);
    let project = project_with_tagged_tool(&json!({
        "llm": {"provider": "anthropic", "baseUrl": model.base_url(), "model": "claude-sonnet-4-5",
                "toolCalling": "native", "maxRetries": 0, "requestTimeoutSecs": 20},
        "permissions": {"allow": ["bash"]}
    }));
    let output = project
        .command(&["run", "--json", "run echo, then say done"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(model.refused(), Vec::<String>::new(), "{stderr}");
    assert!(output.status.success(), "{stderr}");
    let transcript: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        transcript.to_string().contains("All done."),
        "{transcript:#}"
    );

    let requests = model.requests();
    assert!(requests.len() >= 2, "{requests:#?}");
    for request in &requests {
        let tools = request["tools"].as_array().unwrap();
        assert_eq!(refusal(tools), None);
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        for name in ["bash", "code", "memory", "search", "conversation", "open"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        for tool in tools {
            let schema = &tool["input_schema"];
            for key in ["oneOf", "allOf", "anyOf", "if", "then", "else"] {
                assert_eq!(schema.get(key), None, "{}: {schema:#}", tool["name"]);
            }
        }
        let memory = tools.iter().find(|t| t["name"] == "memory").unwrap();
        assert!(
            memory["input_schema"]["properties"]["content"]["description"]
                .as_str()
                .unwrap()
                .contains("Required when `action` is `store`."),
            "{memory:#}"
        );
        // The imported tagged union: repaired, not dropped.
        let open = tools.iter().find(|t| t["name"] == "open").unwrap();
        assert_eq!(
            open["input_schema"]["properties"]["kind"]["enum"],
            json!(["file", "url"])
        );
        assert_eq!(open["input_schema"]["required"], json!(["kind"]));
    }
}

#[test]
fn tools_show_for_prints_what_each_consumer_gets() {
    let project = project_with_tagged_tool(&json!({}));
    let show = |args: &[&str]| {
        let output = project.satchel(args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let spec: Value = serde_json::from_slice(&output.stdout).unwrap();
        (spec, String::from_utf8_lossy(&output.stderr).into_owned())
    };
    // As written: the conditions the validator checks.
    let (written, _) = show(&["tools", "show", "memory"]);
    assert!(written["inputSchema"].get("if").is_some(), "{written:#}");
    for consumer in ["anthropic", "openai", "gemini", "mcp"] {
        let (spec, stderr) = show(&["tools", "show", "memory", "--for", consumer]);
        let schema = &spec["inputSchema"];
        assert_eq!(schema.get("if"), None, "{consumer}: {schema:#}");
        assert_eq!(schema["type"], "object");
        assert!(
            stderr.contains(&format!("translated for {consumer}: `if` at the root")),
            "{stderr}"
        );
    }
    let (gemini, _) = show(&["tools", "show", "open", "--for", "gemini"]);
    let schema = gemini["inputSchema"].to_string();
    for refused in ["$schema", "additionalProperties", "const", "oneOf"] {
        assert!(!schema.contains(refused), "{refused} in {schema}");
    }
    // Nothing to repair: the spec as it is, and nothing said.
    let (bash, stderr) = show(&["tools", "show", "bash", "--for", "anthropic"]);
    assert_eq!(bash["inputSchema"]["required"], json!(["command"]));
    assert_eq!(stderr, "");
}

/// The translation is what the model reads; the call is still checked
/// against the full schema, and the error names the action and the field.
#[test]
fn a_field_required_for_one_action_is_named_with_the_action() {
    let project = Project::new(&json!({}));
    let output = project.satchel(&[
        "tools",
        "call",
        "conversation",
        r#"{"action": "search"}"#,
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = result.to_string();
    assert!(
        text.contains(r#"\"query\" is a required property when `action` is `search`"#),
        "{text}"
    );
}

/// Reported: Claude Code 2.1 dropped `code`, `memory` and `conversation`
/// from `satchel mcp serve` ("Skipping tool ... top-level allOf, which the
/// Anthropic API does not accept"). Claude Code itself, headless, with a
/// scripted Messages API as its model: its first request must offer every
/// tool Satchel publishes, the tagged union of an external tool included,
/// each in a form the API accepts.
#[test]
fn claude_code_offers_its_model_every_tool_satchel_serves() {
    let claude = crate::peers_dir::peer("claude-code/node_modules/.bin/claude");
    let model = FakeAnthropic::start(vec![Answer::Text("hello from the script".into())]);
    let project = project_with_tagged_tool(&json!({}));
    let served: Vec<String> = {
        let output = project.satchel(&["tools", "list", "--json"]);
        let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(served.len() >= 6, "{served:?}");
    let config = json!({"mcpServers": {"satchel": {
        "command": env!("CARGO_BIN_EXE_satchel"),
        "args": ["-C", project.path("project"), "mcp", "serve"],
        "env": {
            "XDG_DATA_HOME": project.path("data"), "XDG_CONFIG_HOME": project.path("config"),
            "XDG_CACHE_HOME": project.path("cache"), "SATCHEL_TRUST_PROJECT": "1",
            "SATCHEL_MODEL_FETCH": "never", "SATCHEL_LIBEXEC_DIR": project.path("libexec")
        }
    }}});
    let config_path = project.path("claude-mcp.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let home = project.path("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let output = std::process::Command::new(claude)
        .args(["-p", "say hello", "--strict-mcp-config", "--mcp-config"])
        .arg(&config_path)
        .current_dir(project.path("project"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "sk-test")
        // Every tool in the request itself, not deferred behind ToolSearch;
        // wait for the MCP server (a debug build starts slowly).
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("MCP_CONNECTION_NONBLOCKING", "false")
        .env("MCP_CONNECT_TIMEOUT_MS", "60000")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("hello from the script"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(model.refused(), Vec::<String>::new());
    let requests = model.requests();
    let main = requests
        .iter()
        .find(|request| {
            request["tools"]
                .as_array()
                .is_some_and(|tools| tools.len() > 1)
        })
        .unwrap_or_else(|| panic!("no request with tools: {requests:#?}"));
    let tools = main["tools"].as_array().unwrap();
    let offered: Vec<&str> = tools
        .iter()
        .filter_map(|tool| tool["name"].as_str()?.strip_prefix("mcp__satchel__"))
        .collect();
    // The editing tools' model-native forms are not served over MCP.
    for name in served
        .iter()
        .filter(|name| !satchel_core::edit_forms::is_native_form(name))
    {
        assert!(
            offered.contains(&name.as_str()),
            "{name} not offered: {offered:?}"
        );
    }
    assert_eq!(refusal(tools), None);
}
