//! End to end: the editing tools in the form each model was trained on
//! (`llm.editTool`). A Claude model on the Anthropic API is declared
//! Anthropic's text editor (by type, no schema) and edits through it; an
//! OpenAI coding model gets `apply_patch`; `editTool: satchel` keeps
//! `edit` and `write`. Policy rules on paths hold for every form.

use std::process::Stdio;

use crate::fake_model::{FakeModel, Reply, tool_contents};
use crate::support::fake_anthropic::{Answer, FakeAnthropic, refusal};
use crate::support::project::Project;
use serde_json::{Value, json};

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|tool| {
            tool["name"]
                .as_str()
                .or_else(|| tool["function"]["name"].as_str())
        })
        .map(str::to_owned)
        .collect()
}

fn run(project: &Project, prompt: &str) -> std::process::Output {
    project
        .command(&["run", "--json", prompt])
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_claude_model_edits_through_anthropics_text_editor() {
    let model = FakeAnthropic::start(vec![
        Answer::ToolUse(
            "str_replace_based_edit_tool".into(),
            json!({"command": "str_replace", "path": "notes.txt", "old_str": "first", "new_str": "1st"}),
        ),
        Answer::ToolUse(
            "str_replace_based_edit_tool".into(),
            json!({"command": "create", "path": ".env.local", "file_text": "SECRET=1\n"}),
        ),
        Answer::Text("Done.".into()),
    ]);
    let project = Project::new(&json!({
        "llm": {"provider": "anthropic", "baseUrl": model.base_url(), "model": "claude-sonnet-4-5",
                "maxRetries": 0, "requestTimeoutSecs": 20},
        "permissions": {"deny": ["write(.env*)"]}
    }));
    std::fs::write(project.path("project/notes.txt"), "first\r\nsecond\r\n").unwrap();
    let output = run(&project, "tidy the notes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(model.refused(), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(project.path("project/notes.txt")).unwrap(),
        "1st\r\nsecond\r\n"
    );
    // `create` is judged as `write` of its path: the deny rule holds.
    assert!(!project.path("project/.env.local").exists());

    let requests = model.requests();
    let tools = requests[0]["tools"].as_array().unwrap();
    assert!(
        tools.contains(
            &json!({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"})
        ),
        "{tools:#?}"
    );
    let offered = names(tools);
    assert!(offered.contains(&"read".to_owned()), "{offered:?}");
    for absent in ["edit", "write", "apply_patch"] {
        assert!(
            !offered.contains(&absent.to_owned()),
            "{absent} offered: {offered:?}"
        );
    }
    assert_eq!(refusal(tools), None);
    let denied = requests[2]["messages"].to_string();
    assert!(denied.contains("write(.env*)"), "{denied}");
}

#[test]
fn edit_tool_satchel_keeps_edit_and_write_for_claude() {
    let model = FakeAnthropic::start(vec![Answer::Text("Hi.".into())]);
    let project = Project::new(&json!({
        "llm": {"provider": "anthropic", "baseUrl": model.base_url(), "model": "claude-sonnet-4-5",
                "maxRetries": 0, "requestTimeoutSecs": 20, "editTool": "satchel"}
    }));
    let output = run(&project, "hello");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = model.requests();
    let offered = names(requests[0]["tools"].as_array().unwrap());
    for present in ["edit", "write", "read"] {
        assert!(offered.contains(&present.to_owned()), "{offered:?}");
    }
    for absent in ["str_replace_based_edit_tool", "apply_patch"] {
        assert!(!offered.contains(&absent.to_owned()), "{offered:?}");
    }
}

#[test]
fn an_openai_coding_model_edits_with_apply_patch() {
    let patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n first\n-second\n+2nd\n\
                 *** Add File: docs/new.md\n+# New\n*** End Patch";
    let model = FakeModel::start(vec![
        Reply::call("apply_patch", json!({ "input": patch })),
        Reply::text("patched"),
    ]);
    let project = Project::new(&json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-5-mini",
                "maxRetries": 0, "requestTimeoutSecs": 20}
    }));
    std::fs::write(project.path("project/notes.txt"), "first\nsecond\n").unwrap();
    let output = run(&project, "rename the second note");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(project.path("project/notes.txt")).unwrap(),
        "first\n2nd\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.path("project/docs/new.md")).unwrap(),
        "# New\n"
    );
    let requests = model.main_requests();
    let offered = names(requests[0]["tools"].as_array().unwrap());
    assert!(offered.contains(&"apply_patch".to_owned()), "{offered:?}");
    for absent in ["edit", "write", "str_replace_based_edit_tool"] {
        assert!(!offered.contains(&absent.to_owned()), "{offered:?}");
    }
    let result = tool_contents(&requests[1]).concat();
    assert!(
        result.contains("M notes.txt") && result.contains("A docs/new.md"),
        "{result}"
    );
    assert!(result.contains("Resources: 2 files modified"), "{result}");
}
