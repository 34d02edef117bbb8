//! End to end: the file tools through `satchel tools call` (the
//! boundaries of each mode, protected paths, path rules) and through
//! `satchel run` with a scripted model (the stale-file rule across a
//! `bash` change, and the feedback block's exact `Resources:` line).

use std::process::{Output, Stdio};

use crate::fake_model::{FakeModel, Reply, tool_contents};
use crate::support::project::Project;
use serde_json::{Value, json};

/// A project whose temporary directory is a sibling of the project (so
/// `outside`, another sibling, is neither).
fn project(config: &Value) -> Project {
    let project = Project::new(config);
    std::fs::create_dir_all(project.path("tmp")).unwrap();
    std::fs::create_dir_all(project.path("outside")).unwrap();
    project
}

fn call(project: &Project, tool: &str, input: Value) -> (Value, Output) {
    let output = project
        .command(&["tools", "call", tool, &input.to_string()])
        .env("TMPDIR", project.path("tmp"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // Structured results (and errors) print as JSON, text as it is.
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let value = serde_json::from_str(&stdout).unwrap_or(Value::String(stdout));
    (value, output)
}

fn error_code(output: &Value) -> &str {
    output["error_code"].as_str().unwrap_or_default()
}

#[test]
fn tools_call_writes_only_inside_the_project_in_workspace_and_nowhere_in_readonly() {
    let project = project(&json!({}));
    let outside = project.path("outside");
    std::os::unix::fs::symlink(&outside, project.path("project/planted")).unwrap();
    std::fs::create_dir_all(project.path("project/.git/hooks")).unwrap();
    for target in [
        outside.join("abs.txt").display().to_string(),
        "../outside/dotdot.txt".to_owned(),
        "planted/through-link.txt".to_owned(),
        ".agents/agent.json".to_owned(),
        ".git/hooks/pre-commit".to_owned(),
    ] {
        let (out, status) = call(
            &project,
            "write",
            json!({"file_path": target, "content": "x"}),
        );
        assert_eq!(error_code(&out), "PERMISSION_DENIED", "{target}: {out}");
        assert!(!status.status.success());
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let agent_json = std::fs::read_to_string(project.path("project/.agents/agent.json")).unwrap();
    assert_eq!(agent_json, "{}");

    let (out, status) = call(
        &project,
        "write",
        json!({"file_path": "src/new.txt", "content": "hello\nworld\n"}),
    );
    assert!(status.status.success(), "{out}");
    assert_eq!(out["created"], true, "{out}");
    let (out, _) = call(
        &project,
        "edit",
        json!({"file_path": "src/new.txt", "old_string": "world", "new_string": "there"}),
    );
    assert_eq!(out["replacements"], 1, "{out}");
    assert_eq!(
        std::fs::read_to_string(project.path("project/src/new.txt")).unwrap(),
        "hello\nthere\n"
    );

    project.write_config(&json!({"permissions": {"mode": "readonly", "deny": ["read(*.env)"]}}));
    for (tool, input) in [
        (
            "write",
            json!({"file_path": "src/other.txt", "content": "x"}),
        ),
        (
            "edit",
            json!({"file_path": "src/new.txt", "old_string": "there", "new_string": "x"}),
        ),
    ] {
        let (out, _) = call(&project, tool, input);
        assert_eq!(error_code(&out), "PERMISSION_DENIED", "{tool}: {out}");
    }
    assert!(!project.path("project/src/other.txt").exists());
    let (out, _) = call(&project, "read", json!({"file_path": "src/new.txt"}));
    assert!(
        out.as_str().unwrap_or_default().contains("     2\tthere"),
        "{out}"
    );
    std::fs::write(project.path("project/prod.env"), "TOKEN=1\n").unwrap();
    let (out, _) = call(&project, "read", json!({"file_path": "./prod.env"}));
    assert_eq!(error_code(&out), "PERMISSION_DENIED", "{out}");
    assert!(
        out["error"].as_str().unwrap().contains("read(*.env)"),
        "{out}"
    );
}

/// A read, then a command that changes the file, then an edit: refused
/// as stale; read again, the edit goes through. The feedback block
/// counts the file once, read and modified.
#[test]
fn an_edit_after_a_command_changed_the_file_is_refused_until_it_is_read_again() {
    let model = FakeModel::start(vec![
        Reply::call("read", json!({"file_path": "notes.txt"})),
        Reply::call("bash", json!({"command": "echo changed >> notes.txt"})),
        Reply::call(
            "edit",
            json!({"file_path": "notes.txt", "old_string": "first", "new_string": "1st"}),
        ),
        Reply::call("read", json!({"file_path": "./notes.txt"})),
        Reply::call(
            "edit",
            json!({"file_path": "notes.txt", "old_string": "first", "new_string": "1st"}),
        ),
        Reply::text("done"),
    ]);
    let project = project(&json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                 "maxRetries": 0, "requestTimeoutSecs": 20}
    }));
    std::fs::write(project.path("project/notes.txt"), "first\nsecond\n").unwrap();
    let output = project
        .command(&["run", "--json", "tidy the notes"])
        .env("TMPDIR", project.path("tmp"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = model.main_requests();
    let stale = tool_contents(&requests[3]).concat();
    assert!(stale.contains("changed on disk"), "{stale}");
    assert!(stale.contains("INVALID_PARAMS"), "{stale}");
    let done = tool_contents(&requests[5]).concat();
    assert!(done.contains("\"replacements\":1"), "{done}");
    assert!(
        done.contains("Resources: 1 file read, 1 modified"),
        "{done}"
    );
    assert_eq!(
        std::fs::read_to_string(project.path("project/notes.txt")).unwrap(),
        "1st\nsecond\nchanged\n"
    );
}
