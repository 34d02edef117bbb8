//! An MCP session is to `satchel mcp serve` what a conversation is to
//! `chat`, driven by the official Python SDK client: the stale-file rule
//! holds within a stdio session, and an HTTP session's background
//! processes are its own and end when it closes, while the server and its
//! other sessions go on. What is left is checked on the machine (`/proc`).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::background::{free_port, mark, none_left, processes_with, project_env, trusted_project};
use crate::peers_dir::peer;
use crate::support::mcp_http::spawn_http;

#[test]
fn an_mcp_session_owns_its_file_reads_and_its_processes() {
    let project = trusted_project();
    let (mut server, url) = spawn_http(project.command(&["mcp", "serve", "--http", "127.0.0.1:0"]));
    // A number no other process sleeps for: the process to look for.
    let seconds = format!("9{}", mark());
    let sleeping = format!("sleep {seconds}");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_sessions.py");
    let output = Command::new(peer("venv/bin/python"))
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(project.path("project"))
        .arg(project_env(&project).to_string())
        .args([&url, &seconds])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let still_serving = server.try_wait().unwrap().is_none();
    let left = none_left(&sleeping);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        output.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();

    // The stale-file rule, within the stdio session.
    assert_eq!(report["read"]["is_error"], false, "{report}");
    let stale = &report["stale_edit"];
    assert_eq!(stale["is_error"], true, "{report}");
    assert!(
        stale["text"].as_str().unwrap().contains("changed on disk"),
        "{report}"
    );
    let blind = &report["blind_write"];
    assert_eq!(blind["is_error"], true, "{report}");
    assert!(
        blind["text"]
            .as_str()
            .unwrap()
            .contains("has not been read"),
        "{report}"
    );
    assert_eq!(report["fresh_edit"]["is_error"], false, "{report}");
    assert_eq!(report["notes_after"], "alpha\nBETA\ngamma\n");
    assert_eq!(report["other_after"], "not read\n");

    // Processes per HTTP session.
    assert_eq!(report["started"]["is_error"], false, "{report}");
    let first = report["first_list"]["text"].as_str().unwrap();
    assert!(first.contains(&sleeping), "{report}");
    let second = report["second_list"]["text"].as_str().unwrap();
    assert!(!second.contains(&sleeping), "{report}");
    assert_eq!(report["second_after"]["is_error"], false, "{report}");
    assert!(still_serving, "the server stopped with the session");
    assert!(
        left.is_empty(),
        "the closed session's process still runs: {left:?} (all: {:?})",
        processes_with("sleep")
    );
}

#[test]
fn a_forwarded_port_reaches_a_background_server_in_the_sandbox_and_nothing_else_does() {
    let forwarded = free_port();
    let other = free_port();
    let project = crate::support::project::Project::new(&serde_json::json!({
        "permissions": {"mode": "workspace", "allow": ["bash", "process"]},
        "exec": {"forwardPorts": [forwarded], "killGraceMs": 500}
    }));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_forward.py");
    let output = Command::new(peer("venv/bin/python"))
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(project.path("project"))
        .arg(project_env(&project).to_string())
        .args([forwarded.to_string(), other.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let start = report["forwarded_start"]["text"].as_str().unwrap();
    assert!(
        start.contains(&format!("forwarded to http://127.0.0.1:{forwarded}")),
        "{report}"
    );
    assert!(
        !report["other_start"]["text"]
            .as_str()
            .unwrap()
            .contains("forwarded"),
        "{report}"
    );
    assert_eq!(
        report["forwarded_serving"]["structured"]["matched"], true,
        "{report}"
    );
    assert_eq!(report["get_forwarded"]["status"], 200, "{report}");
    // The other server listens only inside: nothing on the machine's port.
    assert!(report["get_other"]["error"].is_string(), "{report}");
    assert!(report["get_after_kill"]["error"].is_string(), "{report}");
    // The session is over: the forward is closed and no server is left.
    std::net::TcpListener::bind(("127.0.0.1", forwarded))
        .expect("the forwarded port is free again");
    assert!(none_left(&format!("http.server {forwarded}")).is_empty());
    assert!(none_left(&format!("http.server {other}")).is_empty());
}
