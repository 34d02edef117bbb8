//! A provider-neutral request ([`ChatRequest`]) and its serialised form
//! ([`PreparedRequest`]): the exact bytes that are sent, with the token
//! estimate counted on them.
//!
//! The body is written once, by one [`BodyWriter`] per request, which marks
//! where each section (system prompt, tool definitions, messages, tool
//! results) starts, so the estimate can attribute every token without a
//! second serialisation.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use satchel_core::{Message, ToolSpec};
use serde::Serialize;

use crate::LlmError;
use crate::config::{ModelConfig, ProviderKind};
use crate::encoding::Encoding;
use crate::sections::{Section, Span, Spans};
use crate::tokens::{TokenEstimate, estimate, estimate_cached};

/// What the model may do with the tools it is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// One call to a model, before any wire format is applied.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The history, oldest first; system messages become the system prompt.
    pub messages: &'a [Message],
    /// Tools the model may call.
    pub tools: &'a [ToolSpec],
    /// Whether and which tools must be called.
    pub tool_choice: &'a ToolChoice,
    /// Whether the model may ask for several tool calls in one answer.
    pub parallel_tool_calls: bool,
    /// Overrides the configured largest answer for this call.
    pub max_output_tokens: Option<u32>,
    /// A JSON Schema the answer's text must follow (prompted mode's reply
    /// schema), written as the configured [`ReplyFormat`](crate::ReplyFormat);
    /// providers without one ignore it.
    pub reply_schema: Option<&'a serde_json::Value>,
}

impl<'a> ChatRequest<'a> {
    /// A request with automatic tool choice and parallel calls allowed.
    pub fn new(messages: &'a [Message], tools: &'a [ToolSpec]) -> ChatRequest<'a> {
        ChatRequest {
            messages,
            tools,
            tool_choice: &ToolChoice::Auto,
            parallel_tool_calls: true,
            max_output_tokens: None,
            reply_schema: None,
        }
    }
}

/// Whether the answer comes as a stream of events or in one piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Server-sent events, delivered as they arrive.
    Stream,
    /// One JSON response.
    Whole,
}

/// A request serialised once: the body that will be sent, byte for byte,
/// and the token estimate counted on exactly those bytes.
///
/// The estimate is computed on first use of [`PreparedRequest::estimate`]
/// and cached (clones made after that share the figure). Sending does not
/// wait for it: the driver counts when it assembles the answer, so a long
/// history does not delay the first token.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    /// The wire format.
    pub provider: ProviderKind,
    /// The model asked.
    pub model: String,
    /// The endpoint the body is posted to.
    pub url: String,
    /// Stream or whole.
    pub mode: Mode,
    /// The JSON body.
    pub body: Bytes,
    counting: Counting,
}

/// What the estimate needs besides the body.
#[derive(Debug, Clone)]
struct Counting {
    spans: Arc<Spans>,
    encoding: Encoding,
    context_window: u64,
    max_output_tokens: Option<u64>,
    estimate: OnceLock<TokenEstimate>,
}

impl PreparedRequest {
    /// Input tokens, counted on `body` with the model's tokenizer and
    /// attributed to sections; computed once, then cached.
    pub fn estimate(&self) -> &TokenEstimate {
        let counting = &self.counting;
        counting.estimate.get_or_init(|| {
            estimate_cached(
                counting.encoding,
                &self.body,
                &counting.spans,
                counting.context_window,
                counting.max_output_tokens,
            )
        })
    }

    /// Counts the body from scratch, ignoring what was counted before:
    /// the same figure as [`PreparedRequest::estimate`], at full cost
    /// (for benchmarks and checks).
    pub fn count_fresh(&self) -> TokenEstimate {
        let counting = &self.counting;
        estimate(
            counting.encoding,
            &self.body,
            &counting.spans,
            counting.context_window,
            counting.max_output_tokens,
        )
    }

    /// The body as text (it is always UTF-8 JSON).
    pub fn body_text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or_default()
    }
}

/// Writes a JSON body and marks where each section starts.
pub(crate) struct BodyWriter {
    buf: Vec<u8>,
    spans: Spans,
    section: Section,
}

impl BodyWriter {
    pub(crate) fn new(capacity: usize) -> BodyWriter {
        BodyWriter {
            buf: Vec::with_capacity(capacity),
            spans: Spans::default(),
            section: Section::Framing,
        }
    }

    /// Bytes written from now on belong to `section`.
    pub(crate) fn enter(&mut self, section: Section) {
        self.section = section;
        self.spans.mark(self.buf.len(), Span::Text(section));
    }

    /// Writes JSON punctuation or a literal fragment as is.
    pub(crate) fn raw(&mut self, fragment: &str) {
        self.buf.extend_from_slice(fragment.as_bytes());
    }

    /// Writes `value` as JSON.
    pub(crate) fn json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), LlmError> {
        serde_json::to_writer(&mut self.buf, value).map_err(|error| LlmError::Config {
            message: format!("cannot serialise the request: {error}"),
        })
    }

    /// Writes `"key":` (with a leading comma unless `first`).
    pub(crate) fn key(&mut self, key: &str, first: bool) {
        if !first {
            self.buf.push(b',');
        }
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// Writes a JSON string `prefix` + `data` where `data` is base64 image
    /// data: marked so the estimate counts it as one image, not as text.
    pub(crate) fn image_string(&mut self, prefix: &str, data: &str) -> Result<(), LlmError> {
        let escaped_prefix = serde_json::to_string(prefix).map_err(|error| LlmError::Config {
            message: format!("cannot serialise the request: {error}"),
        })?;
        // The prefix without its closing quote.
        self.raw(&escaped_prefix[..escaped_prefix.len() - 1]);
        let section = self.section;
        self.spans.mark(self.buf.len(), Span::Image(section));
        if data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
        {
            self.raw(data);
        } else {
            let escaped = serde_json::to_string(data).map_err(|error| LlmError::Config {
                message: format!("cannot serialise the request: {error}"),
            })?;
            self.raw(&escaped[1..escaped.len() - 1]);
        }
        self.spans.mark(self.buf.len(), Span::Text(section));
        self.raw("\"");
        Ok(())
    }

    /// Writes `value` (a server-defined tool's declaration) as JSON that
    /// the estimate counts as the `tokens` the API adds for it.
    pub(crate) fn declared<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        tokens: u64,
    ) -> Result<(), LlmError> {
        let section = self.section;
        self.spans
            .mark(self.buf.len(), Span::Declared(section, tokens));
        self.json(value)?;
        self.spans.mark(self.buf.len(), Span::Text(section));
        Ok(())
    }

    /// What was written, as text (everything written is UTF-8 JSON).
    pub(crate) fn into_text(self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }

    /// Packs the body with what its estimate needs.
    pub(crate) fn finish(
        self,
        config: &ModelConfig,
        url: String,
        mode: Mode,
        max_output_tokens: Option<u32>,
    ) -> PreparedRequest {
        PreparedRequest {
            provider: config.provider,
            model: config.model.clone(),
            url,
            mode,
            body: Bytes::from(self.buf),
            counting: Counting {
                spans: Arc::new(self.spans),
                encoding: config.encoding,
                context_window: u64::from(config.context_window),
                max_output_tokens: max_output_tokens.map(u64::from),
                estimate: OnceLock::new(),
            },
        }
    }
}

/// A size hint for the body of `request`, so the buffer rarely regrows.
pub(crate) fn size_hint(request: &ChatRequest<'_>) -> usize {
    4096 + request.messages.len() * 256 + request.tools.len() * 1024
}
