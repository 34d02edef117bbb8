//! Hooks end to end (issue #41): hooks written for Claude Code
//! (`tests/hooks/`), used unchanged from a project's
//! `.claude/settings.json`, against a scripted model: a guard that blocks
//! by exit code 2, a JSON deny, an `ask` answered in the REPL, an
//! `updatedInput` judged again by the policy and not erased by a silent
//! second hook, PostToolUse and UserPromptSubmit context, a Stop hook that
//! blocks once, an MCP tool matched by `mcp__server__.*`, a hook killed at
//! its timeout; a cloned project's hook never run until approved (and
//! again after it changed); a sandboxed hook that cannot write outside the
//! project or read secrets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply, last_user_text, tool_contents};
use crate::peers_dir::peer;
use crate::support::project::{Project, merge};

/// The held-out Claude Code hooks.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hooks")
}

/// `"$CLAUDE_PROJECT_DIR"/.claude/hooks/NAME`, as Claude Code users write it.
fn hook(name: &str) -> Value {
    json!({"type": "command", "command": format!("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/{name}")})
}

/// A project whose agent.json points at `model` (merged with `extra`),
/// with the fixtures in `.claude/hooks/` and `hooks` in
/// `.claude/settings.json`.
fn project_with(model: &FakeModel, hooks: Value, extra: Value) -> Project {
    let mut config = json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o", "maxRetries": 0},
        "permissions": {"allow": ["bash"]},
        "sideRequests": false
    });
    merge(&mut config, extra);
    let project = Project::new(&config);
    let dir = project.path("project/.claude/hooks");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sh") {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    write_hooks(&project, hooks);
    project
}

fn write_hooks(project: &Project, hooks: Value) {
    std::fs::write(
        project.path("project/.claude/settings.json"),
        serde_json::to_string_pretty(&json!({ "hooks": hooks })).unwrap(),
    )
    .unwrap();
}

/// `project_with`, every hook approved by `satchel hooks trust`.
fn approved(model: &FakeModel, hooks: Value, extra: Value) -> Project {
    let project = project_with(model, hooks, extra);
    let output = project.satchel(&["hooks", "trust"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    project
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(project: &Project, prompt: &str) -> (Value, Output) {
    project.run(prompt, None)
}

fn results(transcript: &Value) -> Vec<Value> {
    transcript["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The audit rows of hook runs: `(tool, decision)`.
fn hook_audit(project: &Project) -> Vec<(String, String)> {
    let output = project.satchel(&["audit", "--json", "--limit", "200"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let rows: Value = serde_json::from_slice(&output.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .filter(|row| {
            row["tool"]
                .as_str()
                .unwrap_or_default()
                .starts_with("hook:")
        })
        .map(|row| {
            (
                row["tool"].as_str().unwrap().to_owned(),
                row["decision"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_guard_blocks_rm_rf_by_exit_2_and_the_model_gets_the_reason() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "rm -rf build && touch ran.txt"})),
        Reply::text("I will delete the files one by one."),
    ]);
    let project = approved(
        &model,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [hook("block-rm-rf.sh")]}]}),
        json!({}),
    );
    let (transcript, output) = run(&project, "clean the build");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(!project.path("project/ran.txt").exists(), "the command ran");
    let sent = tool_contents(&model.main_requests()[1]);
    assert!(
        sent[0].contains("PERMISSION_DENIED")
            && sent[0].contains("'rm -rf' is not allowed in this repository"),
        "{sent:?}"
    );
    assert_eq!(results(&transcript).len(), 1);
    let audit = hook_audit(&project);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].0, "hook:PreToolUse");
    assert!(audit[0].1.starts_with("exit 2; deny: Blocked"), "{audit:?}");
}

#[test]
fn a_json_deny_refuses_and_other_commands_run() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "cat .env"})),
        Reply::call("bash", json!({"command": "echo fine"})),
        Reply::text("Done."),
    ]);
    let project = approved(
        &model,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [hook("protect-env.sh")]}]}),
        json!({}),
    );
    std::fs::write(project.path("project/.env"), "TOKEN=abc\n").unwrap();
    let (_, output) = run(&project, "look around");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let requests = model.main_requests();
    let first = tool_contents(&requests[1]);
    assert!(
        first[0].contains("Reading .env files is not allowed") && !first[0].contains("TOKEN"),
        "{first:?}"
    );
    let second = tool_contents(&requests[2]);
    assert!(second[1].contains("fine"), "{second:?}");
}

#[test]
fn updated_input_is_judged_again_and_a_silent_second_hook_keeps_it() {
    let hooks = json!({"PreToolUse": [
        {"matcher": "Bash", "hooks": [hook("use-python3.sh")]},
        {"matcher": "Bash|Write", "hooks": [hook("log-commands.sh")]}
    ]});
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "python -c 'print(6*7)'"})),
        Reply::text("It is 42."),
    ]);
    let project = approved(&model, hooks.clone(), json!({}));
    let (transcript, output) = run(&project, "compute");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let sent = tool_contents(&model.main_requests()[1]);
    assert!(
        sent[0].contains("42"),
        "the rewritten command did not run: {sent:?}"
    );
    assert_eq!(
        results(&transcript)[0]["input"]["command"],
        "python3 -c 'print(6*7)'"
    );
    // The silent hook ran too, and saw the model's command.
    let log = std::fs::read_to_string(project.path("project/.claude/commands.log")).unwrap();
    assert_eq!(log, "python -c 'print(6*7)'\n");

    // A deny rule refuses the rewritten command, whatever the hook allowed.
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "python -c 'print(6*7)'"})),
        Reply::text("Refused."),
    ]);
    let project = approved(
        &model,
        hooks,
        json!({"permissions": {"deny": ["bash(python3 *)"]}}),
    );
    let (_, output) = run(&project, "compute");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let sent = tool_contents(&model.main_requests()[1]);
    assert!(
        sent[0].contains("PERMISSION_DENIED") && sent[0].contains("python3"),
        "{sent:?}"
    );
}

#[test]
fn post_tool_use_and_user_prompt_submit_context_reach_the_model() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "echo formatted"})),
        Reply::text("Done."),
    ]);
    let project = approved(
        &model,
        json!({
            "PostToolUse": [{"matcher": "Bash", "hooks": [hook("after-edit-context.sh")]}],
            "UserPromptSubmit": [{"hooks": [hook("sprint-context.sh")]}]
        }),
        json!({}),
    );
    let (_, output) = run(&project, "format the code");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let requests = model.main_requests();
    let first = serde_json::to_string(&requests[0]["messages"]).unwrap();
    assert!(first.contains("Current sprint: Apollo"), "{first}");
    let sent = tool_contents(&requests[1]);
    assert!(
        sent[0].contains("formatted")
            && sent[0].contains("Formatter checked the files after Bash: 0 files changed."),
        "{sent:?}"
    );
}

#[test]
fn a_stop_hook_blocks_once_then_lets_go() {
    let model = FakeModel::start(vec![
        Reply::text("All done."),
        Reply::call("bash", json!({"command": "echo tests pass"})),
        Reply::text("Tests pass; done."),
    ]);
    let project = approved(
        &model,
        json!({"Stop": [{"hooks": [hook("tests-before-stop.sh")]}]}),
        json!({}),
    );
    let (transcript, output) = run(&project, "finish the task");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(transcript["answer"], "Tests pass; done.");
    let requests = model.main_requests();
    assert_eq!(requests.len(), 3);
    assert!(
        last_user_text(&requests[1]).contains("Run the test suite before you finish."),
        "{}",
        last_user_text(&requests[1])
    );
}

#[test]
fn a_stop_hook_that_always_blocks_is_obeyed_eight_times_in_a_row() {
    let model = FakeModel::start((0..10).map(|i| Reply::text(&format!("done {i}"))).collect());
    let project = approved(
        &model,
        json!({"Stop": [{"hooks": [{"type": "command",
            "command": "echo '{\"decision\": \"block\", \"reason\": \"not yet\"}'"}]}]}),
        json!({"maxTurns": 20}),
    );
    let (transcript, output) = run(&project, "finish");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(model.main_requests().len(), 9);
    assert_eq!(transcript["answer"], "done 8");
}

#[test]
fn an_mcp_tool_is_matched_by_mcp_server_pattern() {
    let model = FakeModel::start(vec![
        Reply::call("everything__echo", json!({"message": "hi"})),
        Reply::call("bash", json!({"command": "echo plain"})),
        Reply::text("Echoed."),
    ]);
    let project = approved(
        &model,
        json!({"PreToolUse": [{"matcher": "mcp__everything__.*", "hooks": [hook("log-mcp.sh")]}]}),
        json!({"permissions": {"allow": ["bash", "everything__echo"]}}),
    );
    std::fs::write(
        project.path("project/.agents/mcp.json"),
        json!({"mcpServers": {"everything": {
            "command": peer("node_modules/.bin/mcp-server-everything"), "args": ["stdio"]}}})
        .to_string(),
    )
    .unwrap();
    let (_, output) = run(&project, "echo something");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let log = std::fs::read_to_string(project.path("project/.claude/mcp.log")).unwrap();
    assert_eq!(log, "mcp__everything__echo\n");
}

#[test]
fn a_hook_that_hangs_is_killed_at_its_timeout_and_the_call_goes_on() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "echo went-on"})),
        Reply::text("Done."),
    ]);
    let project = approved(
        &model,
        json!({"PreToolUse": [{"hooks": [{"type": "command",
            "command": "sleep 47.3; echo never", "timeout": 1}]}]}),
        json!({}),
    );
    let started = Instant::now();
    let (_, output) = run(&project, "go");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(
        text(&output.stderr).contains("killed with its process group"),
        "{}",
        text(&output.stderr)
    );
    let sent = tool_contents(&model.main_requests()[1]);
    assert!(sent[0].contains("went-on"), "{sent:?}");
    let left = Command::new("pgrep")
        .args(["-f", "sleep 47.3"])
        .output()
        .unwrap();
    assert!(
        !left.status.success(),
        "the hook's sleep survived its timeout"
    );
    let audit = hook_audit(&project);
    assert!(
        audit[0].1.starts_with("killed at its 1 s deadline"),
        "{audit:?}"
    );
}

#[test]
fn a_cloned_projects_hook_runs_only_once_approved_and_asks_again_when_changed() {
    let model = FakeModel::start(vec![]);
    model.echo_when_exhausted(Duration::ZERO);
    let marker = |n: u32| {
        json!({"UserPromptSubmit": [{"hooks": [{"type": "command",
        "command": format!("touch \"$CLAUDE_PROJECT_DIR\"/ran-{n}")}]}]})
    };
    let project = project_with(&model, marker(1), json!({}));

    let (_, output) = run(&project, "hello");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !project.path("project/ran-1").exists(),
        "an unapproved hook ran"
    );
    assert!(
        text(&output.stderr).contains("hook skipped"),
        "{}",
        text(&output.stderr)
    );
    let listed = project.satchel(&["hooks", "list"]);
    assert!(
        text(&listed.stdout).contains("NOT APPROVED"),
        "{}",
        text(&listed.stdout)
    );

    let trusted = project.satchel(&["hooks", "trust"]);
    assert!(
        text(&trusted.stdout).contains("approved"),
        "{}",
        text(&trusted.stdout)
    );
    let (_, output) = run(&project, "hello again");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        project.path("project/ran-1").exists(),
        "the approved hook did not run"
    );

    write_hooks(&project, marker(2));
    let (_, output) = run(&project, "and again");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !project.path("project/ran-2").exists(),
        "a changed hook ran unapproved"
    );
    let audit = hook_audit(&project);
    assert!(
        audit
            .iter()
            .filter(|(_, d)| d.starts_with("skipped"))
            .count()
            == 2,
        "{audit:?}"
    );
}

#[test]
fn a_project_hook_in_the_sandbox_cannot_write_outside_the_project_or_read_secrets() {
    let outside = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![]);
    model.echo_when_exhausted(Duration::ZERO);
    let project = approved(
        &model,
        json!({"UserPromptSubmit": [{"hooks": [{"type": "command", "command": format!(
            "echo escaped > {}/escaped.txt; echo \"key=$HOOK_TEST_API_KEY\" > \"$CLAUDE_PROJECT_DIR\"/seen.txt",
            outside.path().display())}]}]}),
        json!({}),
    );
    let output = project
        .command(&["run", "--json", "hello"])
        .env("HOOK_TEST_API_KEY", "sk-very-secret-value")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !outside.path().join("escaped.txt").exists(),
        "the hook wrote outside the project"
    );
    let seen = std::fs::read_to_string(project.path("project/seen.txt")).unwrap();
    assert_eq!(seen, "key=\n");
}

#[test]
fn the_repl_asks_to_approve_a_hook_and_asks_consent_when_a_hook_says_ask() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "git push origin main || true"})),
        Reply::text("Pushed."),
    ]);
    let project = project_with(
        &model,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [hook("confirm-push.sh")]}]}),
        json!({}),
    );
    let mut command = project.command(&["chat"]);
    command.env("TERM", "xterm");
    let mut repl = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    repl.exp_string("Approve this hook? [y/N]").unwrap();
    repl.send_line("y").unwrap();
    repl.exp_string("/help for commands").unwrap();
    repl.send_line("push it").unwrap();
    repl.exp_string("Pushing changes leaves this machine.")
        .unwrap();
    repl.exp_string("Allow?").unwrap();
    repl.send_line("n not now").unwrap();
    repl.exp_string("Pushed.").unwrap();
    repl.send_line("/exit").unwrap();
    repl.exp_eof().unwrap();
    let sent = tool_contents(&model.main_requests()[1]);
    assert!(
        sent[0].contains("PERMISSION_DENIED") && sent[0].contains("not now"),
        "{sent:?}"
    );
}

/// One `tools/call` of `bash` through `satchel mcp serve` over stdio: the
/// call's result.
fn mcp_serve_call(project: &Project, command: &str) -> (Value, String) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut child = project
        .command(&["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for request in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash", "arguments": {"command": command}}}),
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = loop {
        let line = lines.next().expect("stdout closed early").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message["result"].clone();
        }
    };
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    (answer, log)
}

/// Calls made outside a conversation fire the same hooks: `tools call` and
/// `mcp serve` skip an unapproved project hook (and say so), and once it is
/// approved its guard refuses `rm -rf` for both, with the reason for the
/// caller; each run is on the audit trail.
#[test]
fn tools_call_and_mcp_serve_fire_approved_hooks_only() {
    let model = FakeModel::start(Vec::new());
    let project = project_with(
        &model,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [hook("block-rm-rf.sh")]}]}),
        json!({}),
    );
    let call = |file: &str| {
        let input = json!({"command": format!("rm -rf build && touch {file}")});
        project.satchel(&["tools", "call", "bash", &input.to_string()])
    };

    // Not approved: skipped, said, and the command ran.
    let output = call("unguarded.txt");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(project.path("project/unguarded.txt").exists());
    assert!(
        text(&output.stderr).contains("hook skipped"),
        "{}",
        text(&output.stderr)
    );
    let (answer, log) = mcp_serve_call(&project, "rm -rf build && touch served.txt");
    assert_eq!(answer["isError"], false, "{answer}");
    assert!(project.path("project/served.txt").exists());
    assert!(log.contains("hook skipped"), "{log}");

    // Approved: the guard refuses both, and nothing runs.
    let trusted = project.satchel(&["hooks", "trust"]);
    assert!(trusted.status.success(), "{}", text(&trusted.stderr));
    let output = call("guarded.txt");
    assert!(!output.status.success());
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        said.contains("'rm -rf' is not allowed in this repository"),
        "{said}"
    );
    assert!(!project.path("project/guarded.txt").exists());
    let (answer, _) = mcp_serve_call(&project, "rm -rf build && touch served-guarded.txt");
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(
        answer.to_string().contains("'rm -rf' is not allowed"),
        "{answer}"
    );
    assert!(!project.path("project/served-guarded.txt").exists());

    let audit = hook_audit(&project);
    assert_eq!(
        audit
            .iter()
            .filter(|(tool, decision)| tool == "hook:PreToolUse"
                && decision.starts_with("exit 2; deny: Blocked"))
            .count(),
        2,
        "{audit:?}"
    );
    assert_eq!(
        audit
            .iter()
            .filter(|(_, decision)| decision.starts_with("skipped: not approved"))
            .count(),
        2,
        "{audit:?}"
    );
}
