//! The cassette file: JSON lines, readable and diffable. The first line
//! says what the file is (`{"satchel_cassette": 1}`); then one line per
//! model request in the order the requests were sent (`seq`), one
//! `server` line per server and model whose limits were asked, and one
//! `tool` line per tool call that ran (its call and its output, for
//! `--replay-tools`):
//!
//! ```json
//! {"satchel_cassette":1}
//! {"kind":"server","model":"gpt-4o","info":null}
//! {"kind":"tool","call":{"id":"call_1","name":"bash","input":{"command":"ls"}},"output":{...}}
//! {"seq":1,"request":{"method":"POST","url":"http://127.0.0.1:8080/v1/chat/completions","headers":{"accept":"text/event-stream","content-type":"application/json"},"body":{"model":"gpt-4o","messages":[...]}},"response":{"status":200,"headers":{"content-type":"text/event-stream"},"events":["data: {...}","data: [DONE]",""]}}
//! ```
//!
//! Headers that carry credentials (`authorization`, `x-api-key`, cookies,
//! any name with `key`, `token`, `secret` or `auth`) are never written;
//! bodies and header values pass through the redactor first.

use std::io::Write;
use std::path::Path;

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use satchel_core::redact::Redactor;
use satchel_core::{ToolCall, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CassetteError;
use crate::server_report::ServerInfo;

/// The version of the format this code writes and reads.
const VERSION: u64 = 1;

/// The `kind` of a server line.
pub(super) const SERVER: &str = "server";

/// The `kind` of a tool line.
pub(super) const TOOL: &str = "tool";

/// The first line.
pub(super) fn header() -> Value {
    serde_json::json!({ "satchel_cassette": VERSION })
}

/// One model request and the response read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interaction {
    /// 1-based order in which the requests were sent.
    pub seq: u64,
    /// What was posted.
    pub request: RecordedRequest,
    /// What came back.
    pub response: RecordedResponse,
}

/// A request as posted, less credentials.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Always `POST` today.
    pub method: String,
    /// The endpoint.
    pub url: String,
    /// Headers, credentials left out, values redacted.
    pub headers: serde_json::Map<String, Value>,
    /// The JSON body, redacted.
    pub body: Value,
}

/// A response as read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedResponse {
    /// The HTTP status.
    pub status: u16,
    /// Headers, credentials left out.
    pub headers: serde_json::Map<String, Value>,
    /// A server-sent-event body, split at its blank lines (joined with
    /// `"\n\n"` it is the body as read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    /// Any other body, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// True when the body was not read to its end (the call was cut).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

/// What a server said about a model when it was asked its limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerLine {
    /// Always `server`.
    pub kind: String,
    /// The model asked about.
    pub model: String,
    /// The answer; `null` when the server told nothing.
    pub info: Option<ServerInfo>,
}

/// A tool call that ran while recording, and its output (redacted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolLine {
    /// Always `tool`.
    pub kind: String,
    /// The call as the model made it (after any hook rewrote its input).
    pub call: ToolCall,
    /// What the call gave back, as the model got it.
    pub output: ToolOutput,
}

/// A cassette's lines by kind.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) interactions: Vec<Interaction>,
    pub(super) servers: Vec<ServerLine>,
    pub(super) tools: Vec<ToolLine>,
}

/// True for a header name that may carry a credential.
fn is_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "session"]
        .iter()
        .any(|part| name.contains(part))
}

/// True for a header about the transfer, not the answer: a replayed body
/// is whole and decoded, whatever the recorded one was sent as.
fn is_transfer(name: &str) -> bool {
    matches!(
        name,
        "content-length" | "transfer-encoding" | "content-encoding" | "connection" | "keep-alive"
    )
}

fn kept_headers(headers: &HeaderMap, redactor: &Redactor) -> serde_json::Map<String, Value> {
    let mut kept = serde_json::Map::new();
    for (name, value) in headers {
        if is_credential(name.as_str()) || is_transfer(name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        kept.insert(
            name.as_str().to_owned(),
            Value::String(redactor.redact_str(&value).into_owned()),
        );
    }
    kept
}

impl RecordedRequest {
    /// The request as it is written: credentials out, body redacted.
    pub(super) fn new(
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        redactor: &Redactor,
    ) -> RecordedRequest {
        let mut body = serde_json::from_slice::<Value>(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        redactor.redact_json(&mut body);
        RecordedRequest {
            method: "POST".to_owned(),
            url: url.to_owned(),
            headers: kept_headers(headers, redactor),
            body,
        }
    }

    /// The URL's path (`/v1/chat/completions`): requests are matched on it,
    /// not on the host and port, which differ between runs of a local
    /// server.
    pub fn path(&self) -> &str {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, rest)| rest);
        rest.find('/').map_or("/", |at| &rest[at..])
    }
}

impl RecordedResponse {
    /// A response whose body is not read yet.
    pub(super) fn new(status: u16, headers: &HeaderMap) -> RecordedResponse {
        RecordedResponse {
            status,
            headers: kept_headers(headers, &Redactor::none()),
            events: None,
            body: None,
            cut: false,
        }
    }

    /// Sets the body as read, redacted.
    pub(super) fn set_body(&mut self, body: &[u8], cut: bool, redactor: &Redactor) {
        let text = String::from_utf8_lossy(body);
        let text = redactor.redact_str(&text);
        let is_sse = self
            .headers
            .get(CONTENT_TYPE.as_str())
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.starts_with("text/event-stream"));
        if is_sse {
            self.events = Some(text.split("\n\n").map(str::to_owned).collect());
        } else {
            self.body = Some(text.into_owned());
        }
        self.cut = cut;
    }

    /// The response to hand to the decoders, as the server sent it.
    pub(super) fn to_response(&self) -> Result<reqwest::Response, String> {
        let body = match (&self.events, &self.body) {
            (Some(events), _) => events.join("\n\n"),
            (None, Some(body)) => body.clone(),
            (None, None) => String::new(),
        };
        let mut builder = http::Response::builder().status(self.status);
        for (name, value) in &self.headers {
            if let Some(value) = value.as_str() {
                builder = builder.header(name.as_str(), value);
            }
        }
        builder
            .body(reqwest::Body::from(body))
            .map(reqwest::Response::from)
            .map_err(|error| error.to_string())
    }
}

/// Writes `line` as one JSON line.
pub(super) fn write_line<T: Serialize>(out: &mut impl Write, line: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

/// The interactions (in `seq` order) and server lines of a cassette.
pub(super) fn parse(path: &Path, text: &str) -> Result<Parsed, CassetteError> {
    let invalid = |line: usize, message: String| CassetteError::Invalid {
        path: path.to_owned(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, first)) => {
            let value: Value =
                serde_json::from_str(first).map_err(|e| invalid(1, format!("not JSON: {e}")))?;
            match value["satchel_cassette"].as_u64() {
                Some(VERSION) => {}
                Some(other) => {
                    return Err(invalid(
                        1,
                        format!("format version {other}; this Satchel reads {VERSION}"),
                    ));
                }
                None => {
                    return Err(invalid(
                        1,
                        "not a Satchel cassette (no `satchel_cassette` header)".to_owned(),
                    ));
                }
            }
        }
        None => return Err(invalid(1, "the file is empty".to_owned())),
    }
    let mut parsed = Parsed::default();
    for (index, line) in lines {
        let value: Value =
            serde_json::from_str(line).map_err(|e| invalid(index + 1, format!("not JSON: {e}")))?;
        if value["kind"] == SERVER {
            parsed.servers.push(
                serde_json::from_value(value)
                    .map_err(|e| invalid(index + 1, format!("not a server line: {e}")))?,
            );
        } else if value["kind"] == TOOL {
            parsed.tools.push(
                serde_json::from_value(value)
                    .map_err(|e| invalid(index + 1, format!("not a tool line: {e}")))?,
            );
        } else {
            parsed.interactions.push(
                serde_json::from_value(value)
                    .map_err(|e| invalid(index + 1, format!("not an interaction: {e}")))?,
            );
        }
    }
    parsed.interactions.sort_by_key(|i: &Interaction| i.seq);
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn credentials_are_left_out_and_secrets_redacted() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer sk-abc"));
        headers.insert("x-api-key", HeaderValue::from_static("sk-abc"));
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        let redactor = Redactor::new([("OPENAI_API_KEY".into(), "sk-secret-123".into())], 4);
        let body = br#"{"messages":[{"role":"user","content":"my key is sk-secret-123"}]}"#;
        let request =
            RecordedRequest::new("http://h:1/v1/chat/completions", &headers, body, &redactor);
        let line = serde_json::to_string(&request).unwrap_or_default();
        assert!(!line.contains("sk-abc"), "{line}");
        assert!(!line.contains("sk-secret-123"), "{line}");
        assert!(line.contains("anthropic-version"), "{line}");
        assert_eq!(request.path(), "/v1/chat/completions");
    }

    #[test]
    fn an_event_stream_comes_back_byte_for_byte() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        let mut response = RecordedResponse::new(200, &headers);
        let body = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        response.set_body(body.as_bytes(), false, &Redactor::none());
        assert_eq!(response.events.as_ref().map(Vec::len), Some(3));
        let joined = response
            .events
            .as_ref()
            .map(|e| e.join("\n\n"))
            .unwrap_or_default();
        assert_eq!(joined, body);
    }
}
