//! A scripted Anthropic Messages API on 127.0.0.1 that logs every request
//! and refuses what the real API is documented and observed to refuse in
//! tool definitions, with the real error: a tool whose `input_schema` has
//! `oneOf`, `allOf` or `anyOf` at its root, or is not an object schema, or
//! a tool name outside `^[a-zA-Z0-9_-]{1,64}$`. The real API cannot run
//! here; this plays only its answers and its refusals (no model).
//!
//! Replies stream as the API streams them (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`), or come whole when
//! the request does not stream; `count_tokens` answers too (Claude Code
//! asks it).

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Text, then `end_turn`.
    Text(String),
    /// One tool call, then `tool_use`.
    ToolUse(String, Value),
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Answer>,
    requests: Vec<Value>,
    refused: Vec<String>,
}

/// The running server; it lives as long as the test process.
pub struct FakeAnthropic {
    inner: Arc<Mutex<Inner>>,
    addr: SocketAddr,
}

impl FakeAnthropic {
    /// Starts the server on its own thread; unscripted requests get `ok`.
    pub fn start(script: Vec<Answer>) -> FakeAnthropic {
        let inner = Arc::new(Mutex::new(Inner {
            script: script.into(),
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .with_state(inner.clone());
        let addr = crate::fake_model::serve_on_own_thread(app);
        FakeAnthropic { inner, addr }
    }

    /// The API root to configure (`llm.baseUrl`, `ANTHROPIC_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every `/v1/messages` request body, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The refusals sent, as the API words them.
    pub fn refused(&self) -> Vec<String> {
        self.inner.lock().unwrap().refused.clone()
    }
}

/// What the real API refuses in `tools`, with its message.
pub fn refusal(tools: &[Value]) -> Option<String> {
    for (i, tool) in tools.iter().enumerate() {
        // Server tools (`type` other than custom) carry no schema.
        if tool.get("type").is_some_and(|kind| kind != "custom") {
            continue;
        }
        let name = tool["name"].as_str().unwrap_or_default();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Some(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            ));
        }
        let schema = &tool["input_schema"];
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Some(format!(
                "tools.{i}.custom.input_schema.type: Field required"
            ));
        }
        if ["oneOf", "allOf", "anyOf"]
            .iter()
            .any(|key| schema.get(*key).is_some())
        {
            return Some(format!(
                "tools.{i}.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"
            ));
        }
    }
    None
}

async fn count_tokens(axum::Json(body): axum::Json<Value>) -> Response {
    json_response(
        StatusCode::OK,
        json!({"input_tokens": body.to_string().len() / 4}),
    )
}

async fn messages(
    State(inner): State<Arc<Mutex<Inner>>>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let answer = {
        let mut inner = inner.lock().unwrap();
        inner.requests.push(body.clone());
        if let Some(message) = refusal(&tools) {
            inner.refused.push(message.clone());
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            );
        }
        inner
            .script
            .pop_front()
            .unwrap_or_else(|| Answer::Text("ok".into()))
    };
    let model = body["model"].as_str().unwrap_or("claude").to_owned();
    let (block, stop) = match &answer {
        Answer::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Answer::ToolUse(name, input) => (
            json!({"type": "tool_use", "id": format!("toolu_{}", next_id()), "name": name, "input": input}),
            "tool_use",
        ),
    };
    let usage = json!({"input_tokens": body.to_string().len() / 4, "output_tokens": 12});
    if body["stream"] != true {
        return json_response(
            StatusCode::OK,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}),
        );
    }
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}}),
    )];
    match &answer {
        Answer::Text(text) => {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ));
        }
        Answer::ToolUse(..) => {
            let mut start = block.clone();
            start["input"] = json!({});
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": start}),
            ));
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            ));
        }
    }
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 12}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(events.concat()))
        .unwrap()
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn json_response(status: StatusCode, body: Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
