//! A scripted model behind the OpenAI Chat Completions wire format, on
//! 127.0.0.1: main turns answer from a script (text, thinking, tool calls
//! with their arguments split across many SSE chunks); side requests
//! (recognised by Satchel's side-request system prompt) answer by task.
//! Every request body is kept for the test to inspect.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// The side-request prompt's first words (satchel_agent::SIDE_PREFIX).
pub const SIDE_PREFIX: &str = "You write short notes about a conversation";

/// What the model says in one main turn.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A final answer.
    Text(String),
    /// Reasoning, then tool calls: `(name, raw arguments)`.
    ThinkThenCall(String, Vec<(String, String)>),
    /// Tool calls: `(name, raw arguments)`.
    Calls(Vec<(String, String)>),
    /// A main turn that goes wrong on the wire.
    Fault(Fault),
}

/// Ways a real server's answer goes wrong, for the fault tests.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The text, then `data: [DONE]` with no `finish_reason`: llama.cpp's
    /// server when another request interrupts the answer.
    DoneWithoutFinish(String),
    /// The text, then the connection drops.
    CutMidText(String),
    /// A tool call `(name, arguments)` whose arguments stop half-way, then
    /// the connection drops.
    CutMidArguments(String, String),
    /// The text and the finish reason's absence: all content, then the
    /// connection drops before the finishing chunk.
    CutBeforeFinish(String),
    /// The text, then silence for this long, then the connection closes.
    StallAfter(String, Duration),
    /// A plain HTTP response: status, headers, body.
    Status(u16, Vec<(&'static str, String)>, String),
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.into())
    }

    pub fn call(name: &str, args: Value) -> Reply {
        Reply::Calls(vec![(name.into(), args.to_string())])
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    main: Vec<Value>,
    side: Vec<Value>,
    /// `"main"` or `"side"` per request, in arrival order.
    order: Vec<&'static str>,
    calls: u32,
    /// Once the script is spent, main turns answer `echo: ` and the
    /// latest user message (many conversations at once, each its own).
    echo: bool,
    /// How long each main turn waits before answering.
    delay: Duration,
    /// How long each side request waits before answering.
    side_delay: Duration,
    /// Bodies are not kept (a benchmark's thousands of requests would
    /// count in its process's memory as if Satchel held them).
    forget_bodies: bool,
}

/// Serves `app` on 127.0.0.1 from a thread and runtime of its own, for
/// as long as the test process lives; its address.
pub fn serve_on_own_thread(app: Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

/// The running server.
#[derive(Clone)]
pub struct FakeModel {
    inner: Arc<Mutex<Inner>>,
    pub addr: SocketAddr,
}

impl FakeModel {
    /// Starts the server on its own thread and runtime.
    pub fn start(script: Vec<Reply>) -> FakeModel {
        FakeModel::start_with(script, Router::new())
    }

    /// Starts the server with `extra` routes beside the chat endpoint (an
    /// Ollama's `/api/show`, a server's `/props`).
    pub fn start_with(script: Vec<Reply>, extra: Router) -> FakeModel {
        let inner = Arc::new(Mutex::new(Inner {
            script: script.into(),
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(inner.clone())
            .merge(extra);
        let addr = serve_on_own_thread(app);
        FakeModel { inner, addr }
    }

    /// The base URL to configure (`llm.baseUrl`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answers main turns the script does not cover with `echo: ` and the
    /// latest user message, after `delay`.
    pub fn echo_when_exhausted(&self, delay: Duration) {
        let mut inner = self.inner.lock().unwrap();
        inner.echo = true;
        inner.delay = delay;
    }

    /// Keeps no request bodies from now on: [`FakeModel::main_requests`]
    /// and [`FakeModel::side_requests`] stay as they are.
    /// Makes every side request wait `delay` before it answers.
    pub fn delay_side_requests(&self, delay: Duration) {
        self.inner.lock().unwrap().side_delay = delay;
    }

    pub fn forget_bodies(&self) {
        self.inner.lock().unwrap().forget_bodies = true;
    }

    /// Adds replies to the script.
    pub fn push(&self, replies: Vec<Reply>) {
        self.inner.lock().unwrap().script.extend(replies);
    }

    /// Main-turn request bodies, in arrival order.
    pub fn main_requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().main.clone()
    }

    /// `"main"` or `"side"` for every request, in arrival order.
    pub fn order(&self) -> Vec<&'static str> {
        self.inner.lock().unwrap().order.clone()
    }

    /// Side-request bodies, in arrival order.
    pub fn side_requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().side.clone()
    }
}

/// The system prompt of a request body, joined.
pub fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The task of a side request, which has its own system prompt or
/// continues a main request with its task as the last message; `None` for
/// a main turn.
pub fn side_task(body: &Value) -> Option<String> {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let system = system_text(body);
    if system.starts_with(SIDE_PREFIX) {
        Some(system)
    } else if last.starts_with(SIDE_PREFIX) {
        Some(last.to_owned())
    } else {
        None
    }
}

/// The text of a request's latest user message.
pub fn last_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The contents of a request's tool messages, in order.
pub fn tool_contents(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

async fn answer(State(inner): State<Arc<Mutex<Inner>>>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap();
    if let Some(system) = side_task(&body) {
        let text = if system.contains("overall goal") {
            "GOAL: help the user with their files"
        } else if system.contains("latest message") {
            "OBJECTIVE: answer the latest message"
        } else if system.contains("title") {
            "Test conversation"
        } else {
            "SUMMARY-OF-OLD-TURNS: the user asked things"
        };
        let delay = {
            let mut inner = inner.lock().unwrap();
            if !inner.forget_bodies {
                inner.side.push(body.clone());
            }
            inner.order.push("side");
            inner.side_delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // About as many tokens as the request's bytes make.
        return whole(text, body.to_string().len() as u64 / 4);
    }
    let (reply, delay) = {
        let mut inner = inner.lock().unwrap();
        if !inner.forget_bodies {
            inner.main.push(body.clone());
        }
        inner.order.push("main");
        inner.calls += 1;
        let echo = inner.echo;
        let reply = inner.script.pop_front().unwrap_or_else(|| {
            if echo {
                Reply::Text(format!("echo: {}", last_user_text(&body)))
            } else {
                Reply::text("(script exhausted)")
            }
        });
        (reply, inner.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    stream(reply, body["stream"] == true)
}

fn whole(text: &str, prompt_tokens: u64) -> Response {
    let body = json!({
        "id": "side-1", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 8, "total_tokens": prompt_tokens + 8}
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let event = json!({
        "id": "chat-1", "object": "chat.completion.chunk", "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {event}\n\n")
}

fn stream(reply: Reply, streaming: bool) -> Response {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let (thinking, calls, text) = match reply {
        Reply::Text(text) => (None, Vec::new(), Some(text)),
        Reply::ThinkThenCall(thinking, calls) => (Some(thinking), calls, None),
        Reply::Calls(calls) => (None, calls, None),
        Reply::Fault(fault) => return faulty(fault),
    };
    if !streaming {
        return whole_turn(thinking, &calls, text);
    }
    if let Some(thinking) = thinking {
        events.push(chunk(json!({"reasoning_content": thinking}), None));
    }
    if let Some(text) = &text {
        for piece in text.as_bytes().chunks(7) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            events.push(chunk(json!({"content": piece}), None));
        }
    }
    for (index, (name, args)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": format!("call_{index}_{}", fastid()), "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        // Arguments in pieces of 5 characters, as real servers split them.
        let chars: Vec<char> = args.chars().collect();
        for piece in chars.chunks(5) {
            let piece: String = piece.iter().collect();
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), Some(finish)));
    events.push(format!(
        "data: {}\n\n",
        json!({"id": "chat-1", "object": "chat.completion.chunk", "model": "fake", "choices": [],
               "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}})
    ));
    events.push("data: [DONE]\n\n".into());
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(events.concat()))
        .unwrap()
}

fn fastid() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A main turn answered in one piece (`"stream": false`).
fn whole_turn(
    thinking: Option<String>,
    calls: &[(String, String)],
    text: Option<String>,
) -> Response {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, args))| {
            json!({"id": format!("call_{index}_{}", fastid()), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if let Some(thinking) = thinking {
        message["reasoning_content"] = json!(thinking);
    }
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let body = json!({
        "id": "chat-1", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The text as content chunks of 7 bytes, after the role chunk.
fn text_chunks(text: &str) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in text.as_bytes().chunks(7) {
        let piece = String::from_utf8_lossy(piece).into_owned();
        events.push(chunk(json!({"content": piece}), None));
    }
    events
}

/// An SSE response of `events`, then: the clean end, a dropped connection
/// (`cut`), or silence for `stall` before the end.
fn sse(events: Vec<String>, cut: bool, stall: Duration) -> Response {
    use futures_util::StreamExt;
    let head = futures_util::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, std::io::Error>(axum::body::Bytes::from(e))),
    );
    let tail = futures_util::stream::once(async move {
        if !stall.is_zero() {
            tokio::time::sleep(stall).await;
        }
        if cut {
            Err(std::io::Error::other("connection dropped by the fault"))
        } else {
            Ok(axum::body::Bytes::new())
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(head.chain(tail)))
        .unwrap()
}

/// How long a cut connection waits before dropping.
const CUT_PAUSE: Duration = Duration::from_millis(100);

fn faulty(fault: Fault) -> Response {
    match fault {
        Fault::DoneWithoutFinish(text) => {
            let mut events = text_chunks(&text);
            events.push("data: [DONE]\n\n".into());
            sse(events, false, Duration::ZERO)
        }
        // The pause lets what came before the cut reach the client.
        Fault::CutMidText(text) => sse(text_chunks(&text), true, CUT_PAUSE),
        Fault::CutBeforeFinish(text) => sse(text_chunks(&text), true, CUT_PAUSE),
        Fault::CutMidArguments(name, args) => {
            let mut events = vec![chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            )];
            let half: String = args.chars().take(args.chars().count() / 2).collect();
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": half}}]}),
                None,
            ));
            sse(events, true, CUT_PAUSE)
        }
        Fault::StallAfter(text, stall) => sse(text_chunks(&text), true, stall),
        Fault::Status(status, headers, body) => {
            let mut response = Response::builder().status(status);
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                response = response.header(header::CONTENT_TYPE, "application/json");
            }
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
    }
}
