//! Both wire formats against a local server on 127.0.0.1 that speaks them
//! as documented: streaming and not, tool calls, usage, every error the
//! user can meet, and the invariant that the bytes received are exactly
//! the bytes the estimate counted.
//!
//! `shared` holds each behaviour the formats share, written once and run
//! against both providers (the [`both!`] macro); `openai` and `anthropic`
//! what only one format has; `wire` builds each server's replies.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

/// A behaviour written once as `async fn name(kind) { ... }`, run as one
/// test per provider: `name::openai` and `name::anthropic`.
macro_rules! both {
    ($(#[doc = $doc:literal])* async fn $name:ident($kind:ident) $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use pretty_assertions::assert_eq;
            use satchel_llm::ProviderKind;

            use super::*;

            async fn check($kind: ProviderKind) $body

            #[tokio::test]
            async fn openai() {
                check(ProviderKind::OpenAi).await
            }

            #[tokio::test]
            async fn anthropic() {
                check(ProviderKind::Anthropic).await
            }
        }
    };
}

mod anthropic;
mod incomplete;
mod openai;
mod prompted;
mod server;
mod server_info;
mod shared;
mod wire;

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use satchel_core::ToolSpec;
use satchel_llm::{
    ChatRequest, LlmConfig, LlmError, Mode, ModelConfig, PreparedRequest, Provider, ProviderKind,
    Response, Section, StreamEvent, connect, count_tokens,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::server::Server;

/// Outer bound on every call, so a hang fails the test instead of stalling it.
pub(crate) const BOUND: Duration = Duration::from_secs(30);

/// An environment map (tests never touch the process environment).
pub(crate) fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The base URL [`provider`] gives a provider of `kind` at `server`.
pub(crate) fn base_url(kind: ProviderKind, server: &Server) -> String {
    match kind {
        ProviderKind::OpenAi => server.url("/v1"),
        ProviderKind::Anthropic => server.url(""),
    }
}

/// `error`'s message with the server's base URL (which holds a random
/// port) written `<url>`, for snapshots.
pub(crate) fn shown(error: &LlmError, server: &Server, kind: ProviderKind) -> String {
    error.to_string().replace(&base_url(kind, server), "<url>")
}

/// A provider of `kind` pointed at `server`, with fast retries.
pub(crate) fn provider(
    kind: ProviderKind,
    server: &Server,
    tweak: impl FnOnce(&mut LlmConfig),
) -> std::sync::Arc<dyn Provider> {
    let (model, key_var) = match kind {
        ProviderKind::OpenAi => ("gpt-4o", "OPENAI_API_KEY"),
        ProviderKind::Anthropic => ("claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    };
    let mut config = LlmConfig {
        provider: Some(kind),
        base_url: Some(base_url(kind, server)),
        model: Some(model.into()),
        max_retries: Some(2),
        retry_base_delay_ms: Some(10),
        retry_max_delay_ms: Some(5_000),
        request_timeout_secs: Some(10),
        ..LlmConfig::default()
    };
    tweak(&mut config);
    let resolved: ModelConfig = config.resolve(&env(&[(key_var, "test-key-123")])).unwrap();
    connect(resolved).unwrap()
}

/// The result of one call: every event, and the outcome.
pub(crate) struct Outcome {
    pub(crate) prepared: PreparedRequest,
    pub(crate) events: Vec<StreamEvent>,
    pub(crate) result: Result<Response, LlmError>,
}

impl Outcome {
    pub(crate) fn response(&self) -> &Response {
        match &self.result {
            Ok(response) => response,
            Err(error) => panic!("call failed: {error}"),
        }
    }

    pub(crate) fn error(&self) -> &LlmError {
        match &self.result {
            Ok(response) => panic!("call succeeded: {response:?}"),
            Err(error) => error,
        }
    }

    /// The concatenated text deltas.
    pub(crate) fn streamed_text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Prepares `request` in `mode`, sends it, and gathers what comes back.
pub(crate) async fn call(
    provider: &dyn Provider,
    request: &ChatRequest<'_>,
    mode: Mode,
) -> Outcome {
    call_with(provider, request, mode, CancellationToken::new()).await
}

pub(crate) async fn call_with(
    provider: &dyn Provider,
    request: &ChatRequest<'_>,
    mode: Mode,
    cancel: CancellationToken,
) -> Outcome {
    let prepared = provider.prepare(request, mode).unwrap();
    let mut stream = provider.send(&prepared, cancel);
    let mut events = Vec::new();
    let result = tokio::time::timeout(BOUND, async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamEvent::Done(response)) => {
                    events.push(StreamEvent::Done(response.clone()));
                    return Ok(*response);
                }
                Ok(event) => events.push(event),
                Err(error) => return Err(error),
            }
        }
        panic!("stream ended without Done or an error");
    })
    .await
    .expect("call hung");
    Outcome {
        prepared,
        events,
        result,
    }
}

/// The server received exactly `prepared.body` on every attempt, and the
/// estimate is the token count of those bytes, split into sections that
/// add up.
pub(crate) fn assert_sent_exactly(server: &Server, prepared: &PreparedRequest) {
    let requests = server.requests();
    assert!(!requests.is_empty(), "no request reached the server");
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert!(
            request.body == prepared.body.as_ref(),
            "the server received other bytes than the prepared body"
        );
    }
    let estimate = &prepared.estimate();
    let received = std::str::from_utf8(&requests[0].body).unwrap();
    if estimate.images == 0 {
        assert_eq!(estimate.total, count_tokens(estimate.encoding, received));
    }
    assert_eq!(
        Section::ALL
            .iter()
            .map(|s| estimate.section(*s))
            .sum::<u64>(),
        estimate.total
    );
    assert_eq!(estimate.body_bytes, requests[0].body.len() as u64);
}

/// A realistic tool spec.
pub(crate) fn bash_spec() -> ToolSpec {
    serde_json::from_value(json!({
        "name": "bash",
        "description": "Run a shell command and return its output.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 600}
            },
            "required": ["command"]
        }
    }))
    .unwrap()
}

/// A second tool, for parallel calls.
pub(crate) fn read_spec() -> ToolSpec {
    serde_json::from_value(json!({
        "name": "read_file",
        "description": "Read a text file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    }))
    .unwrap()
}

/// A port where nothing listens.
pub(crate) async fn closed_port() -> ClosedPort {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    ClosedPort {
        _socket: socket,
        port,
    }
}

/// A port bound and never listened on, held for as long as the test keeps
/// it: connections are refused, and no other test's server can be given
/// the port meanwhile (a port merely found free once could be).
pub(crate) struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    pub(crate) port: u16,
}
