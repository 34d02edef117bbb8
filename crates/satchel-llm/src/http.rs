//! The request driver both providers share: one HTTP client, retries with
//! backoff, timeouts, cancellation, status-to-error mapping, and the loop
//! that feeds server-sent events (or a whole JSON body) to a provider's
//! [`Decoder`].
//!
//! The driver is a future owned by the [`EventStream`] it feeds: nothing is
//! spawned, so dropping the stream drops the HTTP response and closes the
//! connection at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::LlmError;
use crate::config::{ModelConfig, RetryPolicy};
use crate::error::is_overload_kind;
use crate::request::{Mode, PreparedRequest};
use crate::response::{Assembler, Response, StreamEvent};
use crate::sse::{self, SseError, SseEvent};

/// The events of one model call, ending with [`StreamEvent::Done`] or an error.
///
/// # Caveats
/// Dropping the stream aborts the request at once (the connection is
/// closed); cancelling its token does the same and yields
/// [`LlmError::Cancelled`]. After a retried failure that came before any
/// content, a [`StreamEvent::Usage`] may be repeated by the next attempt.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// Largest error body read for a message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// What a provider's decoder reports besides events.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// The provider said something went wrong (an `error` event or object).
    Provider { kind: String, message: String },
    /// The data is not the documented format.
    Invalid(String),
}

/// The start of `text` (300 characters), for a [`DecodeError`]'s message.
pub(crate) fn clip(text: &str) -> String {
    satchel_core::text::cut_with(text, 300, "...")
}

/// Turns a provider's wire events into assembler calls.
pub(crate) trait Decoder: Send {
    /// Handles one SSE event; `Ok(true)` when it was the stream's last.
    fn event(
        &mut self,
        event: &SseEvent,
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, DecodeError>;

    /// What is missing for the provider to have said the answer is
    /// finished, or `None` when it said so. An answer that ends without
    /// that word is incomplete, however it ended.
    fn missing_end(&self, asm: &Assembler) -> Option<&'static str>;

    /// Decodes a whole (non-streamed) JSON response.
    fn whole(
        &mut self,
        body: &[u8],
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError>;
}

/// An HTTP client bound to one model configuration. Not `Debug`: its
/// headers hold the API key.
pub(crate) struct Transport {
    pub(crate) client: reqwest::Client,
    pub(crate) config: ModelConfig,
    headers: HeaderMap,
    /// Appended to a 404's message.
    not_found_hint: String,
    new_decoder: fn() -> Box<dyn Decoder>,
}

impl Transport {
    /// A client with rustls (ring) and the platform's certificate verifier.
    pub(crate) fn new(
        config: ModelConfig,
        mut headers: HeaderMap,
        not_found_hint: String,
        new_decoder: fn() -> Box<dyn Decoder>,
    ) -> Result<Transport, LlmError> {
        let config_error = |what: &str, error: &dyn std::fmt::Display| LlmError::Config {
            message: format!("{what}: {error}"),
        };
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| config_error(&format!("`llm.headers` name `{name}`"), &e))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| config_error(&format!("`llm.headers` value for `{name}`"), &e))?;
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));

        let client = satchel_http::client_builder()
            .map_err(|e| config_error("TLS setup", &e))?
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| config_error("HTTP client", &e))?;
        Ok(Transport {
            client,
            config,
            headers,
            not_found_hint,
            new_decoder,
        })
    }

    /// Sends `prepared` and streams the answer.
    pub(crate) fn send(
        self: &Arc<Self>,
        prepared: &PreparedRequest,
        cancel: CancellationToken,
    ) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let run = Run {
            transport: Arc::clone(self),
            prepared: prepared.clone(),
            cancel,
            tx,
        };
        Box::pin(Driven {
            future: Some(Box::pin(run.drive())),
            rx,
        })
    }
}

/// A stream fed by a future it owns.
struct Driven {
    future: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    rx: mpsc::UnboundedReceiver<Result<StreamEvent, LlmError>>,
}

impl Stream for Driven {
    type Item = Result<StreamEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Ok(item) = self.rx.try_recv() {
            return Poll::Ready(Some(item));
        }
        if let Some(future) = self.future.as_mut()
            && future.as_mut().poll(cx).is_ready()
        {
            self.future = None;
        }
        match self.rx.try_recv() {
            Ok(item) => Poll::Ready(Some(item)),
            Err(_) if self.future.is_none() => Poll::Ready(None),
            Err(_) => Poll::Pending,
        }
    }
}

/// Drains `stream` to its final [`Response`].
///
/// # Caveats
/// Dropping the future drops the stream, which aborts the request.
pub async fn collect(mut stream: EventStream) -> Result<Response, LlmError> {
    while let Some(item) = stream.next().await {
        if let StreamEvent::Done(response) = item? {
            return Ok(*response);
        }
    }
    // A driver always ends with `Done` or an error; only a stream that was
    // stopped from outside ends otherwise.
    Err(LlmError::Cancelled)
}

/// One failed attempt.
#[derive(Debug)]
struct Failure {
    error: LlmError,
    retry: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn of(error: LlmError) -> Failure {
        Failure {
            retry: error.is_retryable(),
            error,
            retry_after: None,
        }
    }
}

/// Why the body of a stream stopped before its end.
#[derive(Debug)]
enum Stopped {
    /// The request timeout ran out between chunks, or the call was cancelled.
    Guard(Failure),
    /// The connection failed.
    Connection(reqwest::Error),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Guard(failure) => failure.error.fmt(f),
            Stopped::Connection(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for Stopped {}

struct Run {
    transport: Arc<Transport>,
    prepared: PreparedRequest,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Result<StreamEvent, LlmError>>,
}

impl Run {
    async fn drive(self) {
        if let Err(error) = self.attempts().await {
            let _ = self.tx.send(Err(error));
        }
    }

    async fn attempts(&self) -> Result<(), LlmError> {
        let policy = self.transport.config.retry;
        let mut attempt = 1u32;
        loop {
            let failure = match self.attempt().await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            if !failure.retry || attempt > policy.max_retries {
                return Err(with_attempts(failure.error, attempt));
            }
            let delay = match failure.retry_after {
                Some(wait) if wait > policy.max_delay => {
                    return Err(with_attempts(failure.error, attempt));
                }
                Some(wait) => wait,
                None => backoff(&policy, attempt),
            };
            // The caller records each retry (the log says one happened and
            // why); with -v it is also traced here.
            tracing::info!(
                attempt,
                delay_ms = delay.as_millis() as u64,
                "model request failed, retrying: {}",
                failure.error
            );
            let _ = self.tx.send(Ok(StreamEvent::Retrying {
                attempt: attempt + 1,
                delay,
                reason: failure.error.to_string(),
            }));
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(LlmError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    /// Awaits `future` within the request timeout, or until cancelled.
    async fn guarded<F: Future>(
        &self,
        what: &'static str,
        future: F,
    ) -> Result<F::Output, Failure> {
        let limit = self.transport.config.request_timeout;
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Failure::of(LlmError::Cancelled)),
            result = tokio::time::timeout(limit, future) => result.map_err(|_| {
                Failure::of(LlmError::Timeout {
                    url: self.transport.config.base_url.clone(),
                    after: limit,
                    what,
                })
            }),
        }
    }

    fn emit(&self, events: &mut Vec<StreamEvent>) {
        for event in events.drain(..) {
            let _ = self.tx.send(Ok(event));
        }
    }

    async fn attempt(&self) -> Result<(), Failure> {
        let transport = &self.transport;
        let accept = match self.prepared.mode {
            Mode::Stream => "text/event-stream",
            Mode::Whole => "application/json",
        };
        let mut headers = transport.headers.clone();
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        let (url, body) = (&self.prepared.url, &self.prepared.body);
        let tape = transport.config.tape.as_ref();
        let response = match tape {
            // Replay: the recorded answer, or a loud failure; no network.
            Some(tape) if tape.is_replay() => tape
                .answer(url, &headers, body)
                .map_err(|message| Failure::of(LlmError::Cassette { message }))?,
            _ => {
                let request = transport
                    .client
                    .post(url)
                    .headers(headers.clone())
                    .body(body.clone());
                let response = self
                    .guarded("waiting for the response", request.send())
                    .await?
                    .map_err(|error| Failure::of(self.transport_error(&error)))?;
                match tape {
                    Some(tape) => tape.tee(url, &headers, body, response),
                    None => response,
                }
            }
        };

        let status = response.status();
        if !status.is_success() {
            let retry_after = satchel_http::retry_after(response.headers(), SystemTime::now());
            let body = self
                .guarded("reading an error response", read_limited(response))
                .await?;
            let (error, retry) = status_error(transport, status, &body, retry_after);
            return Err(Failure {
                error,
                retry,
                retry_after,
            });
        }

        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut asm = Assembler::default();
        let mut decoder = (transport.new_decoder)();
        let mut out = Vec::new();

        if self.prepared.mode == Mode::Whole || !is_sse {
            // Also taken when a server ignores `"stream": true` and answers in one piece.
            let body = self
                .guarded("reading the response", response.bytes())
                .await?
                .map_err(|error| Failure::of(self.transport_error(&error)))?;
            if let Err(error) = decoder.whole(&body, &mut asm, &mut out) {
                return Err(self.decode_failure(error, asm));
            }
            if let Some(missing) = decoder.missing_end(&asm) {
                // Nothing was emitted yet: the same request may be sent again.
                return Err(Failure::of(
                    self.incomplete(format!("the response was read whole, but {missing}")),
                ));
            }
            self.emit(&mut out);
            let done = asm.finish(self.prepared.estimate().clone());
            let _ = self.tx.send(Ok(StreamEvent::Done(Box::new(done))));
            return Ok(());
        }

        // The request timeout bounds the wait for each chunk of the body,
        // so comments (keep-alives) count as signs of life.
        let chunks =
            futures_util::stream::unfold(response.bytes_stream(), |mut chunks| async move {
                let chunk = match self
                    .guarded("waiting for the next part of the stream", chunks.next())
                    .await
                {
                    Ok(None) => return None,
                    Ok(Some(Ok(chunk))) => Ok(chunk),
                    Ok(Some(Err(error))) => Err(Stopped::Connection(error)),
                    Err(failure) => Err(Stopped::Guard(failure)),
                };
                Some((chunk, chunks))
            });
        let mut events = std::pin::pin!(sse::events(chunks));
        let mut finished = false;
        while !finished {
            let event = match events.next().await {
                None => break,
                Some(Ok(event)) => event,
                Some(Err(SseError::Body(Stopped::Guard(failure))))
                    if matches!(failure.error, LlmError::Cancelled) =>
                {
                    return Err(failure);
                }
                Some(Err(SseError::Body(Stopped::Guard(failure)))) => {
                    return Err(self.cut(asm, failure.error.to_string(), failure.error));
                }
                Some(Err(SseError::Body(Stopped::Connection(error)))) => {
                    let reason = format!(
                        "the connection failed after {} streamed part(s) of the answer: {}",
                        asm.pieces,
                        error_chain(&error)
                    );
                    let error = self.incomplete(reason.clone());
                    return Err(self.cut(asm, reason, error));
                }
                Some(Err(SseError::Invalid(detail))) => {
                    return Err(self.decode_failure(DecodeError::Invalid(detail), asm));
                }
            };
            match decoder.event(&event, &mut asm, &mut out) {
                Ok(done) => finished = done,
                Err(error) => {
                    self.emit(&mut out);
                    return Err(self.decode_failure(error, asm));
                }
            }
            self.emit(&mut out);
        }
        match decoder.missing_end(&asm) {
            None => {
                let done = asm.finish(self.prepared.estimate().clone());
                let _ = self.tx.send(Ok(StreamEvent::Done(Box::new(done))));
                Ok(())
            }
            Some(missing) => {
                let reason = unfinished_reason(finished, asm.pieces, missing);
                let error = self.incomplete(reason.clone());
                Err(self.cut(asm, reason, error))
            }
        }
    }

    fn incomplete(&self, reason: String) -> LlmError {
        LlmError::Incomplete {
            url: self.transport.config.base_url.clone(),
            reason,
        }
    }

    /// A stream stopped early: the partial answer when content had been
    /// delivered (never retried: the caller has shown it), else `error`,
    /// retried with the same request.
    fn cut(&self, asm: Assembler, reason: String, error: LlmError) -> Failure {
        if asm.delivered {
            Failure {
                error: self.interrupted(reason, asm),
                retry: false,
                retry_after: None,
            }
        } else {
            Failure {
                error,
                retry: true,
                retry_after: None,
            }
        }
    }

    fn interrupted(&self, reason: String, asm: Assembler) -> LlmError {
        LlmError::Interrupted {
            url: self.transport.config.base_url.clone(),
            reason,
            partial: Box::new(asm.partial(self.prepared.estimate().clone())),
        }
    }

    /// A decoder's complaint: retried only when nothing was delivered and
    /// the provider says it is busy; after content, the partial answer.
    fn decode_failure(&self, error: DecodeError, asm: Assembler) -> Failure {
        let url = self.transport.config.base_url.clone();
        let (error, retry) = match error {
            DecodeError::Provider { kind, message } => {
                let retry = is_overload_kind(&kind);
                (LlmError::Provider { url, kind, message }, retry)
            }
            DecodeError::Invalid(detail) => (LlmError::InvalidResponse { url, detail }, false),
        };
        if asm.delivered {
            Failure {
                error: self.interrupted(error.to_string(), asm),
                retry: false,
                retry_after: None,
            }
        } else {
            Failure {
                error,
                retry,
                retry_after: None,
            }
        }
    }

    fn transport_error(&self, error: &reqwest::Error) -> LlmError {
        let config = &self.transport.config;
        if error.is_timeout() {
            return LlmError::Timeout {
                url: config.base_url.clone(),
                after: config.connect_timeout,
                what: "connecting",
            };
        }
        if error.is_connect() {
            return LlmError::Connect {
                url: config.base_url.clone(),
                default_endpoint: config.default_endpoint,
                detail: error_chain(error),
            };
        }
        // Connected, then the server closed or broke the connection before
        // its answer began.
        self.incomplete(format!(
            "the server closed the connection before answering: {}",
            error_chain(error)
        ))
    }
}

/// Says how a stream that the provider never called finished came to an
/// end, and how far the answer had got.
fn unfinished_reason(end_marker: bool, pieces: u64, missing: &str) -> String {
    let ended = if end_marker {
        "the server ended the stream"
    } else {
        "the connection closed"
    };
    if pieces == 0 {
        format!("{ended} before any answer, and {missing}")
    } else {
        format!(
            "{ended} after {pieces} streamed part(s) of the answer without saying it was \
             finished ({missing}); another request to the same server may have interrupted it"
        )
    }
}

/// The error and its causes, innermost last, without repeats.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if parts.last().is_none_or(|last| !last.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

async fn read_limited(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_LIMIT {
            body.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    body
}

/// The error for a non-2xx status, and whether to retry it.
fn status_error(
    transport: &Transport,
    status: StatusCode,
    body: &[u8],
    retry_after: Option<Duration>,
) -> (LlmError, bool) {
    let config = &transport.config;
    let url = config.base_url.clone();
    let message = error_message(status, body);
    match status.as_u16() {
        401 | 403 => (
            LlmError::Unauthorized {
                status: status.as_u16(),
                key_env: config.api_key.as_ref().map(|key| key.env_var.clone()),
                url,
                message,
            },
            false,
        ),
        404 => (
            LlmError::ModelNotFound {
                model: config.model.clone(),
                url,
                message,
                hint: transport.not_found_hint.clone(),
            },
            false,
        ),
        429 => (
            LlmError::RateLimited {
                url,
                attempts: 1,
                retry_after,
                message,
            },
            true,
        ),
        408 | 409 | 500..=599 => (
            LlmError::Server {
                url,
                status: status.as_u16(),
                attempts: 1,
                message,
            },
            true,
        ),
        _ => (
            LlmError::Rejected {
                url,
                status: status.as_u16(),
                message,
            },
            false,
        ),
    }
}

/// The provider's own words from an error body: `error.message` (OpenAI,
/// Anthropic), `error` as a string (Ollama), or the text itself.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let error = &value["error"];
        if let Some(message) = error["message"].as_str().or_else(|| error.as_str()) {
            return message.to_owned();
        }
        if let Some(message) = value["message"].as_str() {
            return message.to_owned();
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return status
            .canonical_reason()
            .unwrap_or("no reason given")
            .to_owned();
    }
    satchel_core::text::cut_with(text, 500, "...")
}

fn with_attempts(error: LlmError, attempts: u32) -> LlmError {
    match error {
        LlmError::RateLimited {
            url,
            retry_after,
            message,
            ..
        } => LlmError::RateLimited {
            url,
            attempts,
            retry_after,
            message,
        },
        LlmError::Server {
            url,
            status,
            message,
            ..
        } => LlmError::Server {
            url,
            status,
            attempts,
            message,
        },
        other => other,
    }
}

/// Exponential backoff with jitter: `base × 2^(attempt-1)`, capped at
/// `max_delay`, then scaled by a random factor in [0.5, 1.0).
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exponent = attempt.saturating_sub(1).min(20);
    let delay = policy
        .base_delay
        .saturating_mul(1u32 << exponent)
        .min(policy.max_delay);
    delay.mul_f64(0.5 + fastrand::f64() * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_stays_under_the_cap() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        for _ in 0..100 {
            let first = backoff(&policy, 1);
            assert!((50..=100).contains(&first.as_millis()), "{first:?}");
            let third = backoff(&policy, 3);
            assert!((200..=400).contains(&third.as_millis()), "{third:?}");
            assert!(backoff(&policy, 30) <= Duration::from_secs(1));
        }
    }

    #[test]
    fn error_messages_come_from_the_provider_body() {
        let openai =
            br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(
            error_message(StatusCode::UNAUTHORIZED, openai),
            "Incorrect API key provided"
        );
        let ollama = br#"{"error":"model \"x\" not found, try pulling it first"}"#;
        assert_eq!(
            error_message(StatusCode::NOT_FOUND, ollama),
            "model \"x\" not found, try pulling it first"
        );
        assert_eq!(error_message(StatusCode::BAD_GATEWAY, b""), "Bad Gateway");
    }
}
