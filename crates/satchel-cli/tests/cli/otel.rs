//! OpenTelemetry export end to end, judged by an OTLP receiver that decodes
//! what arrives with the `opentelemetry-proto` package from PyPI
//! (`support/otlp_receiver.py`): a scripted `satchel run` with one tool
//! call makes one trace (the statement's span its root, a `chat` span per
//! request with token usage, an `execute_tool bash` span) and the GenAI
//! metrics; `mcp serve` continues a trace whose `traceparent` came in
//! `_meta`; a collector that is down changes nothing about the run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply};
use crate::support::project::Project;

/// A running receiver; stopped when dropped.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

/// The Python that has `opentelemetry-proto`: `SATCHEL_TEST_OTLP_PYTHON`,
/// else the test peers' virtual environment.
fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("SATCHEL_TEST_OTLP_PYTHON") {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.peers/venv/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers.sh",
        path.display()
    );
    path
}

impl Receiver {
    fn start() -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let out = dir.path().join("received.jsonl");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/support/otlp_receiver.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(&port_file)
            .arg(&out)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
                panic!(
                    "the OTLP receiver exited with {status} (is opentelemetry-proto installed? \
                     run scripts/install-test-peers.sh): {err}"
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "receiver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Receiver {
            child,
            port,
            out,
            _dir: dir,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every record received so far.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn of_type(&self, kind: &str) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["type"] == kind)
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `command` exporting to `endpoint` with the standard variables.
fn exporting(command: &mut Command, endpoint: &str, protocol: &str) {
    command
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_METRICS_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-satchel-test=yes")
        .env("OTEL_SERVICE_NAME", "satchel-under-test");
}

fn project_for(model: &FakeModel) -> Project {
    Project::new(&json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                "maxRetries": 0, "requestTimeoutSecs": 20},
        "permissions": {"allow": ["bash"]},
    }))
}

fn run(project: &Project, endpoint: &str, protocol: &str) -> (Value, std::process::Output) {
    let mut command = project.command(&["run", "--json", "say hi with echo"]);
    exporting(&mut command, endpoint, protocol);
    let output = command.stdin(Stdio::null()).output().unwrap();
    let transcript =
        serde_json::from_str(&String::from_utf8_lossy(&output.stdout)).unwrap_or(Value::Null);
    (transcript, output)
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[test]
fn a_run_with_one_tool_call_exports_one_trace_with_the_genai_conventions() {
    for protocol in ["http/protobuf", "http/json"] {
        let receiver = Receiver::start();
        let model = FakeModel::start(vec![
            Reply::call("bash", json!({"command": "echo hi"})),
            Reply::text("Said hi."),
        ]);
        let project = project_for(&model);
        let (transcript, output) = run(&project, &receiver.endpoint(), protocol);
        assert!(
            output.status.success(),
            "{transcript}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The run flushes before it exits: everything is in.
        let spans = receiver.of_type("span");
        let ours: Vec<&Value> = spans
            .iter()
            .filter(|s| s["service"] == "satchel-under-test")
            .collect();
        assert!(
            !ours.is_empty(),
            "{protocol}: no spans: {:?}",
            receiver.records()
        );
        let traces: std::collections::BTreeSet<&str> = ours
            .iter()
            .map(|s| s["trace_id"].as_str().unwrap())
            .collect();
        assert_eq!(traces.len(), 1, "{protocol}: one trace: {ours:#?}");

        let roots: Vec<&&Value> = ours.iter().filter(|s| s["parent_span_id"] == "").collect();
        assert_eq!(roots.len(), 1, "{protocol}: {ours:#?}");
        let root = roots[0];
        assert_eq!(root["name"], "invoke_agent satchel");
        assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(
            attr(root, "gen_ai.conversation.id"),
            &transcript["conversation_id"]
        );
        let ids: std::collections::BTreeSet<&str> = ours
            .iter()
            .map(|s| s["span_id"].as_str().unwrap())
            .collect();
        for span in &ours {
            let parent = span["parent_span_id"].as_str().unwrap();
            assert!(parent.is_empty() || ids.contains(parent), "orphan: {span}");
        }

        let turns: Vec<&&Value> = ours
            .iter()
            .filter(|s| s["name"] == "chat gpt-4o" && attr(s, "satchel.request.purpose") == "turn")
            .collect();
        assert_eq!(
            turns.len(),
            2,
            "{protocol}: a chat span per request: {ours:#?}"
        );
        for chat in &turns {
            assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
            assert_eq!(chat["parent_span_id"], root["span_id"]);
            assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
            assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
            assert_eq!(attr(chat, "gen_ai.request.model"), "gpt-4o");
            assert!(
                attr(chat, "gen_ai.usage.input_tokens").as_i64().unwrap() > 0,
                "{chat}"
            );
            assert!(
                attr(chat, "gen_ai.usage.output_tokens").as_i64().unwrap() > 0,
                "{chat}"
            );
            assert!(
                attr(chat, "gen_ai.usage.cache_read.input_tokens").is_i64(),
                "{chat}"
            );
            assert!(
                attr(chat, "gen_ai.response.time_to_first_chunk").is_f64(),
                "{chat}"
            );
            assert_eq!(attr(chat, "server.address"), "127.0.0.1");
        }
        assert_eq!(
            attr(turns[0], "gen_ai.response.finish_reasons"),
            &json!(["tool_calls"])
        );
        assert_eq!(
            attr(turns[1], "gen_ai.response.finish_reasons"),
            &json!(["stop"])
        );

        let tools: Vec<&&Value> = ours
            .iter()
            .filter(|s| s["name"] == "execute_tool bash")
            .collect();
        assert_eq!(tools.len(), 1, "{protocol}: {ours:#?}");
        let tool = tools[0];
        assert_eq!(tool["parent_span_id"], root["span_id"]);
        assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(attr(tool, "gen_ai.tool.name"), "bash");
        assert_eq!(
            attr(tool, "gen_ai.tool.call.id"),
            &transcript["tool_calls"][0]["call_id"]
        );
        assert_eq!(attr(tool, "satchel.tool.outcome"), "ok");
        // Content stays out unless `otel.logContent` is set.
        assert!(attr(tool, "gen_ai.tool.call.arguments").is_null(), "{tool}");

        let metrics = receiver.of_type("metric");
        let names: std::collections::BTreeSet<&str> = metrics
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        for name in [
            "gen_ai.client.token.usage",
            "gen_ai.client.operation.duration",
            "satchel.tool.calls",
            "satchel.tool.duration",
        ] {
            assert!(names.contains(name), "{protocol}: no {name} in {names:?}");
        }
        let input = metrics
            .iter()
            .find(|m| {
                m["name"] == "gen_ai.client.token.usage"
                    && m["attributes"]["gen_ai.token.type"] == "input"
            })
            .unwrap();
        assert_eq!(input["unit"], "{token}");
        assert!(input["count"].as_i64().unwrap() >= 2, "{input}");
        let requests = receiver.of_type("request");
        assert!(
            requests
                .iter()
                .all(|r| r["headers"]["x-satchel-test"] == "yes")
        );
        assert!(
            requests
                .iter()
                .all(|r| r["json"] == (protocol == "http/json"))
        );
    }
}

#[test]
fn mcp_serve_continues_the_trace_whose_traceparent_came_in_meta() {
    let receiver = Receiver::start();
    let project = Project::new(&json!({"permissions": {"allow": ["bash"]}}));
    let mut command = project.command(&["mcp", "serve"]);
    exporting(&mut command, &receiver.endpoint(), "http/protobuf");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let mut stdin = child.stdin.take().unwrap();
    for request in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "echo traced"},
            "_meta": {"traceparent": format!("00-{trace}-{parent}-01")}}}),
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = loop {
        let line = lines.next().expect("stdout closed early").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(answer["result"]["structuredContent"]["stdout"], "traced\n");
    drop(stdin);
    assert!(child.wait().unwrap().success());

    let spans = receiver.of_type("span");
    let served: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "tools/call bash")
        .collect();
    assert_eq!(served.len(), 1, "{spans:#?}");
    let span = served[0];
    assert_eq!(span["trace_id"], trace);
    assert_eq!(span["parent_span_id"], parent);
    assert_eq!(span["kind"], "SPAN_KIND_SERVER");
    assert_eq!(attr(span, "mcp.method.name"), "tools/call");
    assert_eq!(attr(span, "gen_ai.tool.name"), "bash");
    assert_eq!(attr(span, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(span, "jsonrpc.request.id"), "2");
}

#[test]
fn a_collector_that_is_down_changes_nothing_about_the_run() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "echo hi"})),
        Reply::text("Said hi."),
    ]);
    let project = project_for(&model);
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (transcript, output) = run(
        &project,
        &format!("http://127.0.0.1:{port}"),
        "http/protobuf",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{transcript}\n{stderr}");
    assert_eq!(transcript["answer"], "Said hi.");
    assert_eq!(
        transcript["tool_calls"][0]["results"][0]["json"]["stdout"],
        "hi\n"
    );
    // Said once, with the count, not once per span.
    assert!(stderr.contains("cannot export to"), "{stderr}");
    assert!(
        stderr.contains("could not be exported and were dropped"),
        "{stderr}"
    );
}

/// A one-shot `tools call` flushes its span before it exits, as `run` does,
/// with its content when `otel.logContent` asks for it.
#[test]
fn a_one_shot_tool_call_exports_its_span() {
    let receiver = Receiver::start();
    let project = Project::new(&json!({"otel": {"logContent": true}}));
    let mut command = project.command(&["tools", "call", "bash", r#"{"command": "echo hi"}"#]);
    exporting(&mut command, &receiver.endpoint(), "http/protobuf");
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let spans = receiver.of_type("span");
    let tool: Vec<&Value> = spans
        .iter()
        .filter(|s| s["service"] == "satchel-under-test" && s["name"] == "execute_tool bash")
        .collect();
    assert_eq!(tool.len(), 1, "{:#?}", receiver.records());
    assert_eq!(attr(tool[0], "gen_ai.tool.name"), "bash");
    let arguments = attr(tool[0], "gen_ai.tool.call.arguments");
    assert!(
        arguments.as_str().is_some_and(|a| a.contains("echo hi")),
        "{arguments}"
    );
}
