//! End-to-end: the built `satchel` binary, run as a user would run it.
//!
//! Every run gets its own project and config directories, so a developer's
//! own `~/.config/satchel` never leaks into a test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests and benches fail loudly by design.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// One isolated place to run `satchel` in.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        Sandbox { dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
        command
            .args(args)
            .current_dir(self.project())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .env("SATCHEL_LIBEXEC_DIR", self.dir.path().join("libexec"))
            .env("TMPDIR", self.dir.path())
            .env_remove("RUST_LOG");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn write_config(&self, text: &str) {
        std::fs::write(self.project().join(".agents/agent.json"), text).unwrap();
    }
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn tools_list_shows_bash() {
    let output = Sandbox::new().run(&["tools", "list"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.starts_with("bash ") && line.contains("builtin")),
        "{text}"
    );

    let output = Sandbox::new().run(&["tools", "list", "--json"]);
    assert_eq!(stdout_json(&output)[0]["name"], "bash");
}

#[test]
fn tools_show_prints_the_spec() {
    let output = Sandbox::new().run(&["tools", "show", "bash"]);
    assert!(output.status.success());
    let spec = stdout_json(&output);
    assert_eq!(spec["name"], "bash");
    assert_eq!(spec["inputSchema"]["required"], json!(["command"]));
    assert_eq!(spec["annotations"]["destructiveHint"], true);

    let output = Sandbox::new().run(&["tools", "show", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no tool named `nope`; available tools: bash"));
}

#[test]
fn tools_call_prints_results_and_exits_zero() {
    let output = Sandbox::new().run(&["tools", "call", "bash", r#"{"command": "echo hello"}"#]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = stdout_json(&output);
    assert_eq!(results["stdout"], "hello\n");
    assert_eq!(results["exit_code"], 0);
}

#[test]
fn tools_call_reads_input_from_stdin() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_with_stdin(&["tools", "call", "bash"], r#"{"command": "pwd"}"#);
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = format!("{}\n", sandbox.project().canonicalize().unwrap().display());
    assert_eq!(stdout_json(&output)["stdout"], expected);
}

#[test]
fn tools_call_json_prints_the_whole_output() {
    let output = Sandbox::new().run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "exit 4"}"#,
        "--json",
    ]);
    assert!(output.status.success());
    let whole = stdout_json(&output);
    assert_eq!(whole["is_error"], false);
    assert_eq!(whole["results"][0]["type"], "json");
    assert_eq!(whole["results"][0]["json"]["exit_code"], 4);
    assert!(
        whole["user_message"]
            .as_str()
            .unwrap()
            .starts_with("ran `exit 4` in ")
    );
}

#[test]
fn failed_call_exits_one_with_a_structured_error() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "true", "timeout": 9999}"#,
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "INVALID_PARAMS");

    let output = sandbox.run(&["tools", "call", "bsh", "{}"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "TOOL_NOT_FOUND");
}

#[test]
fn input_that_is_not_json_is_a_usage_error() {
    let output = Sandbox::new().run(&["tools", "call", "bash", "{command: ls}"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the input is not valid JSON"),
        "{}",
        stderr(&output)
    );
    let output = Sandbox::new().run(&["tools", "call", "bash", "[1]"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn project_config_sets_output_limits() {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"exec": {"stdoutLimitBytes": 20, "spill": false}}"#);
    let output = sandbox.run(&["tools", "call", "bash", r#"{"command": "seq 1 1000"}"#]);
    let results = stdout_json(&output);
    assert_eq!(results["truncated"], true);
    assert_eq!(
        results["stdout"],
        "1\n2\n3\n4\n5\n\n[... 3873 bytes omitted ...]\n\n999\n1000\n"
    );
}

#[test]
fn invalid_config_warns_and_falls_back_to_defaults() {
    let sandbox = Sandbox::new();
    sandbox.write_config("{\n  \"exec\": oops\n}");
    let output = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "echo still works"}"#,
    ]);
    assert!(output.status.success());
    assert_eq!(stdout_json(&output)["stdout"], "still works\n");
    let warning = stderr(&output);
    assert!(warning.contains(".agents/agent.json:2:"), "{warning}");
}

#[test]
fn every_command_has_help_with_examples() {
    for args in [
        &["--help"][..],
        &["tools", "--help"],
        &["tools", "list", "--help"],
        &["tools", "show", "--help"],
        &["tools", "call", "--help"],
        &["tools", "refresh", "--help"],
        &["tools", "new", "--help"],
        &["mcp", "--help"],
        &["mcp", "serve", "--help"],
        &["mcp", "servers", "--help"],
    ] {
        let output = Sandbox::new().run(args);
        assert!(output.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("Examples:"),
            "{args:?} has no examples"
        );
    }
}

#[test]
fn human_output_formats_for_a_person() {
    let output = Sandbox::new().run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "echo hi"}"#,
        "--human",
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], ["$ echo hi", "hi"]);
    assert!(lines[2].starts_with("exit 0 · "), "{text}");
}

fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => true,
    }
}

fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn child_dies_when_satchel_is_killed() {
    let sandbox = Sandbox::new();
    let pid_file = sandbox.dir.path().join("pid");
    let command = json!({"command": format!("echo $$ > {}; exec sleep 1000", pid_file.display())})
        .to_string();
    let mut satchel = sandbox
        .command(&["tools", "call", "bash", &command])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid: i32 = wait_for(&pid_file).trim().parse().unwrap();
    satchel.kill().unwrap();
    satchel.wait().unwrap();
    let start = Instant::now();
    while !process_gone(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "child {pid} outlived satchel"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn interrupt_cancels_the_running_tool() {
    let sandbox = Sandbox::new();
    let pid_file = sandbox.dir.path().join("pid");
    let command =
        json!({"command": format!("echo $$ > {}; sleep 1000", pid_file.display())}).to_string();
    let satchel = sandbox
        .command(&["tools", "call", "bash", &command])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&pid_file);
    assert!(send_signal(satchel.id(), "INT"));
    let output = satchel.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "CANCELLED");
}

/// Sends a signal with the system's `kill` command.
fn send_signal(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap()
        .success()
}

fn install_tool(dir: &Path, file: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn reporting_tool(answer: &str) -> String {
    format!(
        "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo '{{\"description\": \"Says where it lives.\", \"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{\"from\": \"{answer}\"}}'\n"
    )
}

#[test]
fn tools_list_shows_where_each_tool_comes_from() {
    let sandbox = Sandbox::new();
    install_tool(
        &sandbox.project().join(".agents/tools"),
        "where-tool",
        &reporting_tool("project"),
    );
    install_tool(
        &sandbox.dir.path().join("config/satchel/tools"),
        "where-tool",
        &reporting_tool("user"),
    );
    install_tool(
        &sandbox.dir.path().join("libexec"),
        "sys-only",
        &reporting_tool("system"),
    );
    std::fs::write(
        sandbox.project().join(".agents/tools/notes.txt"),
        "not a tool",
    )
    .unwrap();

    let output = sandbox.run(&["tools", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {text}"))
            .to_owned()
    };
    assert!(
        line("where ").ends_with("project .agents/tools/where-tool"),
        "{text}"
    );
    assert!(line("sys_only ").contains("system "), "{text}");
    assert!(text.contains("shadowed by the project tool"), "{text}");
    assert!(text.contains("notes.txt: not executable"), "{text}");

    let output = sandbox.run(&["tools", "call", "where", "{}"]);
    assert_eq!(stdout_json(&output), json!({"from": "project"}));

    let listed = stdout_json(&sandbox.run(&["tools", "list", "--json"]));
    let tool = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "where")
        .unwrap();
    assert_eq!(tool["source"], "project");
}

#[test]
fn tools_new_writes_a_working_skeleton() {
    let sandbox = Sandbox::new();
    for (file, lang) in [("shout-tool", "bash"), ("count-chars", "python")] {
        let output = sandbox.run(&["tools", "new", file, "--lang", lang]);
        assert!(output.status.success(), "{lang}: {}", stderr(&output));
        assert!(sandbox.project().join(".agents/tools").join(file).exists());
    }
    let output = sandbox.run(&["tools", "call", "shout", r#"{"text": "hey"}"#]);
    assert_eq!(stdout_json(&output), json!({"text": "hey", "length": 3}));
    let output = sandbox.run(&["tools", "call", "count_chars", r#"{"text": "hey"}"#]);
    assert_eq!(stdout_json(&output), json!({"text": "hey", "length": 3}));

    let again = sandbox.run(&["tools", "new", "shout-tool"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists; pass --force"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn tools_refresh_asks_every_tool_again() {
    let sandbox = Sandbox::new();
    let tools = sandbox.project().join(".agents/tools");
    install_tool(&tools, "where", &reporting_tool("v1"));
    assert!(sandbox.run(&["tools", "list"]).status.success());
    // Same size and mtime would hide an edit from the cache; refresh does not care.
    let counter = sandbox.dir.path().join("probes");
    let body = format!(
        "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo x >> {}; echo '{{\"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{}}'\n",
        counter.display()
    );
    install_tool(&tools, "counted", &body);
    assert!(sandbox.run(&["tools", "list"]).status.success());
    assert!(sandbox.run(&["tools", "list"]).status.success());
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        1,
        "the cache should answer"
    );
    let output = sandbox.run(&["tools", "refresh"]);
    assert!(output.status.success());
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2
    );
}

#[test]
fn mcp_servers_without_configuration_says_where_to_add_them() {
    let output = Sandbox::new().run(&["mcp", "servers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("no MCP servers configured"), "{text}");
    let output = Sandbox::new().run(&["mcp", "servers", "--json"]);
    assert_eq!(stdout_json(&output), json!([]));
}

#[test]
fn mcp_serve_refuses_a_public_address_without_a_token() {
    let output = Sandbox::new().run(&["mcp", "serve", "--http", "0.0.0.0:0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a loopback address: give a bearer token"),
        "{}",
        stderr(&output)
    );
}

/// Stdout of `mcp serve` carries the protocol and nothing else, even with
/// every log level on and a broken MCP server configured.
#[test]
fn mcp_serve_over_stdio_writes_only_protocol_to_stdout() {
    use std::io::{BufRead, BufReader, Write};
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.project().join(".agents/mcp.json"),
        r#"{"mcpServers": {"broken": {"command": "/nonexistent/server"}}}"#,
    )
    .unwrap();
    let mut child = sandbox
        .command(&["-vvv", "mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash", "arguments": {"command": "echo via mcp"}}}),
    ];
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let line = lines.next().expect("stdout closed early").unwrap();
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if message.get("id").is_some() {
            answers.push(message);
        }
    }
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "satchel");
    assert_eq!(
        answers[1]["result"]["structuredContent"]["stdout"],
        "via mcp\n"
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
    for line in lines {
        let line = line.unwrap();
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    assert!(log.contains("/nonexistent/server"), "{log}");
}

/// A tool dropped into `.agents/tools` while `mcp serve` runs reaches the
/// client as `notifications/tools/list_changed`, then in `tools/list`.
#[test]
fn mcp_serve_tells_clients_when_external_tools_change() {
    use std::io::{BufRead, BufReader, Write};
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"externalTools": {"watchIntervalMs": 100}}"#);
    let mut child = sandbox
        .command(&["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (sender, messages) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let next = |what: &dyn Fn(&Value) -> bool| loop {
        let message = messages
            .recv_timeout(Duration::from_secs(30))
            .expect("no message from satchel");
        if what(&message) {
            return message;
        }
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    next(&|m| m["id"] == 1);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )
    .unwrap();
    let listed = next(&|m| m["id"] == 2);
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 1);

    install_tool(
        &sandbox.project().join(".agents/tools"),
        "fresh",
        &reporting_tool("project"),
    );
    next(&|m| m["method"] == "notifications/tools/list_changed");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    )
    .unwrap();
    let listed = next(&|m| m["id"] == 3);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bash", "fresh"]);
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
