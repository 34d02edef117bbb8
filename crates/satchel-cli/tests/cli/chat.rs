//! End-to-end: the `satchel chat` REPL driven through a pseudo-terminal
//! against a scripted model: a statement with a tool call shown, Ctrl-C
//! during a long `sleep` (the turn stops, the process dies, the REPL
//! stays), consent asked and refused with a reason the model is told,
//! agent.json changed between two statements, `/context`, and `/exit`.

use std::process::Command;
use std::time::Duration;

use crate::fake_model::{FakeModel, Reply, tool_contents};
use serde_json::json;

fn config(model: &FakeModel, tool_result_max_length: u32) -> String {
    json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o", "maxRetries": 0},
        "permissions": {"allow": ["bash"], "ask": ["bash(rm *)"]},
        "toolResultMaxLength": tool_result_max_length,
        // Side requests beside the first turn, as for a hosted API: the
        // history below lists them before the answer.
        "sideRequestTiming": "parallel",
    })
    .to_string()
}

#[test]
fn the_repl_runs_statements_cancels_asks_reloads_and_exits() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "echo listing-ok"})),
        Reply::text("Listed them."),
        Reply::call("bash", json!({"command": "sleep 31.7"})),
        Reply::call("bash", json!({"command": "rm -f nothing.txt"})),
        Reply::text("Understood."),
        Reply::text("Fine."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".agents")).unwrap();
    let config_file = project.join(".agents/agent.json");
    std::fs::write(&config_file, config(&model, 500)).unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
    command
        .arg("chat")
        .current_dir(&project)
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        // Its own project: trusted (tests/trust.rs checks the untrusted path).
        .env("SATCHEL_TRUST_PROJECT", "1")
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("SATCHEL_MODEL_FETCH", "never")
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("TMPDIR", dir.path())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .env_remove("SATCHEL_DB")
        .env_remove("SATCHEL_MODEL")
        .env_remove("RUST_LOG");
    let mut repl = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    // Issue #22: the banner said `model the default model`; it names the
    // model, the endpoint and the mode.
    repl.exp_string(&format!("model gpt-4o at {}", model.base_url()))
        .unwrap();
    repl.exp_string("(native tool calling). /help for commands")
        .unwrap();

    // A statement: the tool call is shown, then the answer.
    repl.send_line("list the files").unwrap();
    repl.exp_string("echo listing-ok").unwrap();
    repl.exp_string("Listed them.").unwrap();

    // Ctrl-C during a long sleep stops the turn and its process.
    repl.send_line("wait a while").unwrap();
    repl.exp_string("sleep 31.7").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    repl.send_control('c').unwrap();
    repl.exp_string("interrupted.").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let left = Command::new("pgrep")
        .args(["-f", "sleep 31.7"])
        .output()
        .unwrap();
    assert!(!left.status.success(), "the sleep survived Ctrl-C");

    // Consent: asked at the prompt, refused with a reason.
    repl.send_line("remove the file").unwrap();
    repl.exp_string("Allow?").unwrap();
    repl.send_line("n not today").unwrap();
    repl.exp_string("Understood.").unwrap();
    let requests = model.main_requests();
    let refused = tool_contents(&requests[4]);
    assert!(
        refused[0].contains("PERMISSION_DENIED") && refused[0].contains("not today"),
        "{refused:?}"
    );

    // agent.json changes between statements: the next one uses it.
    std::fs::write(&config_file, config(&model, 5)).unwrap();
    repl.send_line("and again").unwrap();
    repl.exp_string("Fine.").unwrap();
    let requests = model.main_requests();
    let history = requests[5]["messages"].as_array().unwrap();
    let summary = history
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|text| text.contains("echo listing-ok"))
        .unwrap();
    assert!(
        summary.contains("[Tool: bash(command=\"echo listing-ok\")] → {\"std... [truncated]"),
        "{summary}"
    );

    repl.send_line("/context").unwrap();
    repl.exp_string("Next request to gpt-4o").unwrap();
    repl.exp_string("tool definitions").unwrap();
    repl.send_line("/exit").unwrap();
    repl.exp_eof().unwrap();
}

/// `/history` shows the timeline through the tools' formatters, and the
/// `conversation` tool cuts results with the `toolResultMaxLength` of the
/// moment: agent.json changed between two statements of one REPL applies
/// to the next call without a restart.
#[test]
fn history_and_the_conversation_tool_follow_agent_json() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "seq 1 30"})),
        Reply::text("Counted."),
        Reply::call("conversation", json!({"action": "timeline"})),
        Reply::text("Read it."),
        Reply::call("conversation", json!({"action": "timeline"})),
        Reply::text("Read it again."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".agents")).unwrap();
    let config_file = project.join(".agents/agent.json");
    std::fs::write(&config_file, config(&model, 40)).unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
    command
        .arg("chat")
        .current_dir(&project)
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        // Its own project: trusted (tests/trust.rs checks the untrusted path).
        .env("SATCHEL_TRUST_PROJECT", "1")
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("SATCHEL_MODEL_FETCH", "never")
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("TMPDIR", dir.path())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .env_remove("SATCHEL_DB")
        .env_remove("SATCHEL_MODEL")
        .env_remove("RUST_LOG");
    let mut repl = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    repl.exp_string("/help for commands").unwrap();
    repl.send_line("/history").unwrap();
    repl.exp_string("nothing yet").unwrap();
    repl.send_line("count to thirty").unwrap();
    repl.exp_string("Counted.").unwrap();

    // The user's message, the call, objective, goal and title, the answer.
    repl.send_line("/history 5").unwrap();
    repl.exp_string("(the last 5 of 6 events").unwrap();
    repl.exp_string("#2").unwrap();
    repl.exp_string("$ seq 1 30").unwrap();
    repl.exp_string("#6").unwrap();
    repl.exp_string("Counted.").unwrap();

    repl.send_line("what did you run?").unwrap();
    repl.exp_string("Read it.").unwrap();
    std::fs::write(&config_file, config(&model, 5)).unwrap();
    repl.send_line("and now?").unwrap();
    repl.exp_string("Read it again.").unwrap();

    let requests = model.main_requests();
    let event = |request: usize| {
        let results = tool_contents(&requests[request]);
        let text = results.last().unwrap();
        let value: serde_json::Value =
            serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        value["events"][1]["result"].as_str().unwrap().to_owned()
    };
    let whole: String = (1..=30).map(|n| format!("{n}\\n")).collect();
    let stdout = format!("{{\"stdout\":\"{whole}");
    let cut = |chars: usize| {
        format!(
            "{}... [truncated]",
            stdout.chars().take(chars).collect::<String>()
        )
    };
    assert_eq!(event(3), cut(40));
    assert_eq!(event(5), cut(5));

    repl.send_line("/exit").unwrap();
    repl.exp_eof().unwrap();
}
