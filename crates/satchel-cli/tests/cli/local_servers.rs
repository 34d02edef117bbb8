//! Local model servers as a new user meets them: llama.cpp's own
//! `llama-server` (one slot) serving SmolLM2-135M, with Satchel's defaults.
//! The window comes from the server (`/props`) unless agent.json sets one;
//! a conversation past that window is summarised instead of refused by the
//! server; the same failure three times ends the statement (exit 1) instead
//! of spending the turn budget; without a configured output limit the
//! answer stops within the derived one; the budget's last prompted turn
//! carries the answer-only schema and answers. Ollama does not install
//! here: a scripted Ollama-compatible server plays its `/api/show` and
//! checks the `num_ctx` every request must carry.
//!
//! What was sent to the real server is read through [`Tap`], a forwarder
//! that keeps each request body and passes the bytes on unchanged.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply};
use crate::support::model_server::{MODEL, ModelServer};
use crate::support::project::{Project, merge};

/// A project for a server at `base_url`: defaults but for the model, a
/// fixed temperature and `extra`.
fn project(base_url: &str, extra: Value) -> Project {
    let mut config = json!({
        "llm": {"provider": "openai", "baseUrl": base_url, "model": MODEL,
                "temperature": 0, "requestTimeoutSecs": 120},
        "permissions": {"allow": ["bash"]}
    });
    merge(&mut config, extra);
    Project::new(&config)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The transcript's usage rows with this purpose.
fn usage<'a>(transcript: &'a Value, purpose: &str) -> Vec<&'a Value> {
    transcript["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["purpose"] == purpose)
        .collect()
}

/// `satchel doctor --json`'s model check.
fn doctor_model(project: &Project) -> Value {
    let output = project.satchel(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "model")
        .cloned()
        .unwrap_or_else(|| panic!("no model check: {report}"))
}

/// A forwarder in front of a real server: every request's body is kept,
/// the bytes both ways pass unchanged (one request per connection).
struct Tap {
    port: u16,
    bodies: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Tap {
    fn start(upstream: u16) -> Tap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || forward(client, upstream, &kept));
            }
        });
        Tap { port, bodies }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The chat requests' bodies, in order.
    fn chat_requests(&self) -> Vec<Value> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.ends_with("/chat/completions"))
            .map(|(_, body)| body.clone())
            .collect()
    }
}

/// Reads one request from `client`, keeps its body, sends it upstream with
/// `Connection: close`, and copies the answer back until upstream closes.
fn forward(client: TcpStream, upstream: u16, kept: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    let mut path = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if path.is_empty() {
            path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") {
            continue;
        }
        if line == "\r\n" {
            head.push_str("Connection: close\r\n\r\n");
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    kept.lock()
        .unwrap()
        .push((path, serde_json::from_slice(&body).unwrap_or(Value::Null)));
    let mut server = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
    server.write_all(head.as_bytes()).unwrap();
    server.write_all(&body).unwrap();
    let mut client = client;
    let _ = std::io::copy(&mut server, &mut client);
}

/// The window comes from llama-server's `/props` (8,192 here, where the
/// table would guess 32,768 for an unknown model), and the output limit is
/// derived from it; a configured window wins over the server's.
#[test]
fn the_window_is_read_from_llama_server_and_a_configured_one_wins() {
    let server = ModelServer::llama_server(8192);
    // Two turns at most: the statement below is about the window, and a
    // small model that keeps calling tools would otherwise take minutes.
    let asked = project(&server.base_url(), json!({"maxTurns": 2}));
    let check = doctor_model(&asked);
    let details = check["details"].to_string();
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("8192 token window"),
        "{check}"
    );
    assert!(
        details.contains("reported by the server (llama.cpp GET /props)"),
        "{check}"
    );
    assert!(
        details.contains("up to 1024 tokens, derived from the window"),
        "{check}"
    );
    let configured = project(&server.base_url(), json!({"llm": {"contextWindow": 6000}}));
    let check = doctor_model(&configured);
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("6000 token window"),
        "{check}"
    );
    assert!(
        check["details"]
            .to_string()
            .contains("configured in agent.json"),
        "{check}"
    );
    // Every request of a statement is counted against the server's window,
    // and `satchel context` says where the figure came from.
    let (transcript, output) = asked.run("say hello", None);
    // Answered, failed, or out of its two turns: the window is the point.
    assert!(
        output.status.code().is_some_and(|c| matches!(c, 0 | 1 | 3)),
        "{}",
        stderr(&output)
    );
    for row in transcript["usage"].as_array().unwrap() {
        assert_eq!(row["context_window"], 8192, "{row}");
    }
    let output = asked.satchel(&["context", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["context_window"], 8192, "{report}");
    assert_eq!(
        report["window_source"],
        json!({"kind": "server", "detail": "llama.cpp GET /props"})
    );
    assert_eq!(report["max_output_tokens"], 1024);
}

/// llama-cpp-python's server reports no window: the guess stays, said to
/// be one, and a configured window is used as it is.
#[test]
fn llama_cpp_python_reports_no_window_so_the_guess_says_so_and_configuration_wins() {
    let server = ModelServer::start();
    let guessed = project(&server.base_url(), json!({}));
    let check = doctor_model(&guessed);
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("32768 token window"),
        "{check}"
    );
    assert!(check["details"].to_string().contains("guessed"), "{check}");
    let configured = project(&server.base_url(), json!({"llm": {"contextWindow": 8192}}));
    let check = doctor_model(&configured);
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("8192 token window"),
        "{check}"
    );
    assert!(
        check["details"].to_string().contains("up to 1024 tokens"),
        "{check}"
    );
}

/// The report's case: `maxOutputTokens` so small that every reply is cut
/// before its JSON closes. The second cut changes the next request (the
/// answer alone), the third ends the statement: exit 1, the reason on
/// stderr, in under 10 requests.
#[test]
fn a_reply_cut_three_times_ends_the_statement_with_the_reason_in_under_10_requests() {
    let server = ModelServer::llama_server(8192);
    let tap = Tap::start(server.port());
    let project = project(
        &tap.base_url(),
        json!({"sideRequests": false,
               "llm": {"toolCalling": "prompted", "constrainedReplies": "on",
                       "maxOutputTokens": 4}}),
    );
    let (transcript, output) = project.run("Name a colour.", None);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cut off at the output limit 3 times in a row"),
        "{stderr}"
    );
    assert!(stderr.contains("llm.maxOutputTokens"), "{stderr}");
    assert_eq!(usage(&transcript, "turn").len(), 3, "{transcript}");
    let requests = tap.chat_requests();
    assert!(requests.len() < 10, "{} requests", requests.len());
    // The third turn asked for the answer alone.
    let third = requests[2]["response_format"]["schema"].to_string();
    assert!(
        third.contains("answer") && !third.contains("tool_calls"),
        "{third}"
    );
}

/// No output limit configured: the derived one (an eighth of the server's
/// window) is sent, and a request for something endless stops there.
#[test]
fn without_a_configured_output_limit_the_answer_stops_within_the_derived_one() {
    let server = ModelServer::llama_server(8192);
    let tap = Tap::start(server.port());
    let project = project(
        &tap.base_url(),
        json!({"sideRequests": false, "maxTurns": 1, "llm": {"toolCalling": "native"}}),
    );
    let (transcript, output) = project.run(
        "Count from one to ten thousand in words, one number per line, and do not stop.",
        None,
    );
    assert!(
        output.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        stderr(&output)
    );
    for request in tap.chat_requests() {
        assert_eq!(request["max_tokens"], 1024, "{request}");
    }
    for turn in usage(&transcript, "turn") {
        assert!(turn["output_tokens"].as_u64().unwrap() <= 1024, "{turn}");
    }
}

/// With the server's window at 2,048, statements that each paste a long
/// text grow the conversation past it: old statements are summarised and
/// no request is refused by the server. (Prompted mode: llama-server leaves
/// the native tools of a template without tool support out of the prompt,
/// which the calibration cannot tell from a tokenizer difference.)
#[test]
fn a_conversation_past_the_servers_window_is_summarised_not_refused() {
    let server = ModelServer::llama_server(2048);
    let project = project(
        &server.base_url(),
        json!({"sideRequests": false, "maxTurns": 1, "keepRecentStatements": 1,
               "llm": {"toolCalling": "prompted", "maxOutputTokens": 40}}),
    );
    let paragraph = "The river ran past the mill and the mill wheel turned all day long. ";
    let mut conversation: Option<String> = None;
    let mut summaries = 0;
    for n in 0..6 {
        let prompt = format!("Text {n}: {} Say ok.", paragraph.repeat(25));
        let (transcript, output) = project.run(&prompt, conversation.as_deref());
        let stderr = stderr(&output);
        assert!(
            !stderr.contains("exceeds the available context size"),
            "{stderr}"
        );
        assert!(!stderr.contains("400"), "{stderr}");
        for row in transcript["usage"].as_array().unwrap() {
            assert!(row["error"].is_null(), "{row}");
        }
        summaries += usage(&transcript, "summary").len();
        conversation = transcript["conversation_id"].as_str().map(str::to_owned);
    }
    assert!(summaries > 0, "nothing was summarised");
}

/// Issue 45's case: prompted mode with constrained replies on llama-server,
/// a statement that runs out of turns. Every request carries a reply
/// schema; the last (tools off) carries the answer-only one, and the
/// statement ends with an answer.
#[test]
fn every_prompted_request_is_constrained_and_the_last_turn_answers() {
    let server = ModelServer::llama_server(8192);
    let tap = Tap::start(server.port());
    let project = project(
        &tap.base_url(),
        json!({"sideRequests": false, "maxTurns": 2,
               "llm": {"toolCalling": "prompted", "constrainedReplies": "on",
                       "maxOutputTokens": 200}}),
    );
    let (transcript, output) = project.run(
        "Use the bash tool to list the files here, then tell me what they are.",
        None,
    );
    let requests = tap.chat_requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(
            request["response_format"]["schema"].is_object(),
            "{request}"
        );
    }
    let turns = usage(&transcript, "turn");
    if turns.len() == 2 {
        // It ran out of turns: the last request asked for the answer alone.
        let last = requests.last().unwrap()["response_format"]["schema"].clone();
        assert_eq!(last["required"], json!(["answer"]), "{last}");
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    } else {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    let answer = transcript["answer"].as_str().unwrap_or_default();
    assert!(!answer.trim().is_empty(), "no answer: {transcript}");
    assert!(!answer.contains("tool_calls"), "{answer}");
}

/// A scripted Ollama-compatible server (Ollama does not install here): its
/// `/api/show` gives the model's context and a `num_ctx` parameter;
/// Satchel counts against that figure and sends it as `options.num_ctx`
/// with every request, side requests included.
#[test]
fn ollama_gets_num_ctx_with_every_request_and_the_window_from_api_show() {
    let show = json!({
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "parameters": "num_ctx 16384\nstop \"<|eot_id|>\"",
        "capabilities": ["completion", "tools"]
    });
    let extra = axum::Router::new()
        .route(
            "/api/show",
            axum::routing::post(move || {
                let show = show.clone();
                async move { axum::Json(show) }
            }),
        )
        .route(
            "/api/ps",
            axum::routing::get(|| async { axum::Json(json!({"models": []})) }),
        )
        .route(
            "/v1/models",
            axum::routing::get(|| async {
                axum::Json(json!({"object": "list", "data": [{"id": "llama3.2"}]}))
            }),
        );
    let model = FakeModel::start_with(vec![Reply::text("Blue.")], extra);
    let project = project(
        &model.base_url(),
        json!({"llm": {"model": "llama3.2", "toolCalling": "native"}}),
    );
    let (transcript, output) = project.run("Name a colour.", None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests: Vec<Value> = model
        .main_requests()
        .into_iter()
        .chain(model.side_requests())
        .collect();
    assert!(requests.len() >= 2);
    for request in &requests {
        assert_eq!(request["options"], json!({"num_ctx": 16384}), "{request}");
    }
    // The answer's limit is derived from that window (an eighth).
    assert_eq!(model.main_requests()[0]["max_tokens"], 2048);
    for row in transcript["usage"].as_array().unwrap() {
        assert_eq!(row["context_window"], 16384, "{row}");
    }
    let check = doctor_model(&project);
    assert!(
        check["details"].to_string().contains("num_ctx 16384"),
        "{check}"
    );
    assert!(
        check["details"]
            .to_string()
            .contains("Ollama POST /api/show, num_ctx parameter"),
        "{check}"
    );
}
