//! End-to-end: `satchel mcp serve` over stdio as the binary runs it: only
//! protocol on stdout, tool-list changes told, calls on the audit trail.

use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cli::{Sandbox, install_tool, reporting_tool, stdout_json};

/// Stdout of `mcp serve` carries the protocol and nothing else, even with
/// every log level on and a broken MCP server configured.
#[test]
fn mcp_serve_over_stdio_writes_only_protocol_to_stdout() {
    use std::io::{BufRead, BufReader, Write};
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"permissions": {"allow": ["bash"]}}"#);
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
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bash",
            "code",
            "conversation",
            "edit",
            "fetch",
            "glob",
            "grep",
            "memory",
            "process",
            "read",
            "search",
            "skill",
            "write"
        ]
    );

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
    assert_eq!(
        names,
        [
            "bash",
            "code",
            "conversation",
            "edit",
            "fetch",
            "fresh",
            "glob",
            "grep",
            "memory",
            "process",
            "read",
            "search",
            "skill",
            "write"
        ]
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `satchel mcp serve` over stdio in a sandbox, asked one request at a time.
struct StdioServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    next_id: u64,
}

impl StdioServer {
    /// Starts the server and completes the initialize handshake.
    fn start(sandbox: &Sandbox) -> StdioServer {
        use std::io::BufRead;
        let mut child = sandbox
            .command(&["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = StdioServer {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// Sends a request and returns its answer (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message: Value =
                serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// `bash` with `command`: the call's result.
    fn bash(&mut self, command: &str) -> Value {
        self.request(
            "tools/call",
            json!({"name": "bash", "arguments": {"command": command}}),
        )["result"]
            .clone()
    }

    /// Closes stdin; the server must exit cleanly.
    fn end(self) {
        let StdioServer {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn mcp_calls_are_on_the_audit_trail() {
    let sandbox = Sandbox::new();
    // Nobody can consent over MCP: bash runs because a rule allows it.
    sandbox.write_config(r#"{"permissions": {"allow": ["bash(echo *)"]}}"#);
    let mut server = StdioServer::start(&sandbox);
    let result = server.bash("echo audited");
    assert_eq!(
        result["structuredContent"]["stdout"], "audited\n",
        "{result}"
    );
    server.end();

    let rows = stdout_json(&sandbox.run(&["audit", "--json"]));
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(
        (row["source"].as_str(), row["tool"].as_str()),
        (Some("mcp"), Some("bash"))
    );
    assert_eq!(row["input"]["command"], "echo audited");
    assert_eq!(
        row["decision"], "allow by allow rule `bash(echo *)`",
        "{row}"
    );
}

/// A running server follows agent.json after many calls (once its loaders
/// watch the files rather than look at them each time): a deny rule
/// refuses the next call, and the allow rule again allows the one after.
#[test]
fn a_running_server_follows_agent_json_changed_between_calls() {
    let sandbox = Sandbox::new();
    let allow = r#"{"permissions": {"allow": ["bash(echo *)"]}}"#;
    sandbox.write_config(allow);
    let mut server = StdioServer::start(&sandbox);
    let mut echo = || server.bash("echo followed");
    for _ in 0..6 {
        let result = echo();
        assert_eq!(result["isError"], false, "{result}");
    }
    sandbox.write_config(r#"{"permissions": {"deny": ["bash(echo *)"]}}"#);
    let refused = echo();
    assert_eq!(refused["isError"], true, "a rule denies it now: {refused}");
    sandbox.write_config(allow);
    let allowed = echo();
    assert_eq!(allowed["isError"], false, "the rule is back: {allowed}");
    assert_eq!(allowed["structuredContent"]["stdout"], "followed\n");
    server.end();
}
