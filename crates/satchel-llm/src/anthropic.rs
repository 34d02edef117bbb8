//! Anthropic Messages (`POST {baseUrl}/v1/messages`, `anthropic-version:
//! 2023-06-01`).
//!
//! Wire types are private to this module. Notes on the mapping:
//! - system messages are joined (blank line between) into the top-level
//!   `system` prompt;
//! - consecutive tool results become one user message of `tool_result`
//!   blocks (the API wants every result of a turn's calls together), with
//!   `is_error` when the call failed;
//! - thinking and redacted-thinking blocks are sent back only for the
//!   assistant messages after the last user message (the current tool
//!   loop, where the API requires them, signature included); older ones
//!   are left out, as are thinking parts without a signature (which came
//!   from another provider);
//! - a tool call whose arguments were malformed is sent with `{}` as input:
//!   the API accepts only objects, and the tool result that answers it
//!   quotes the raw arguments.

use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use satchel_core::edit_forms::{TEXT_EDITOR, TEXT_EDITOR_TOKENS, TEXT_EDITOR_TYPE};
use satchel_core::portable::{SchemaConsumer, schema_for};
use satchel_core::{AssistantPart, Content, Message, ToolResult, ToolResults, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::LlmError;
use crate::config::{ANTHROPIC_DEFAULT_MAX_OUTPUT, ModelConfig};
use crate::http::{DecodeError, Decoder, EventStream, Transport, clip};
use crate::models::model_info;
use crate::provider::Provider;
use crate::request::{BodyWriter, ChatRequest, Mode, PreparedRequest, ToolChoice, size_hint};
use crate::response::{Assembler, StopReason, StreamEvent, Usage};
use crate::sections::Section;
use crate::sse::SseEvent;

/// The API version Satchel speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Anthropic Messages API.
pub struct AnthropicProvider {
    transport: Arc<Transport>,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("config", &self.transport.config)
            .finish()
    }
}

impl AnthropicProvider {
    /// A provider for `config` (whose `provider` should be `anthropic`).
    pub fn new(config: ModelConfig) -> Result<AnthropicProvider, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(key.expose()).map_err(|_| LlmError::Config {
                message: format!(
                    "the API key in ${} contains characters a header cannot carry",
                    key.env_var
                ),
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        let hint = format!(
            "; model names look like `claude-sonnet-4-5` (requests go to {})",
            messages_url(&config.base_url)
        );
        let transport = Transport::new(config, headers, hint, || {
            Box::new(AnthropicDecoder::default())
        })?;
        Ok(AnthropicProvider {
            transport: Arc::new(transport),
        })
    }
}

fn messages_url(base_url: &str) -> String {
    if base_url.ends_with("/v1") {
        format!("{base_url}/messages")
    } else {
        format!("{base_url}/v1/messages")
    }
}

impl Provider for AnthropicProvider {
    fn config(&self) -> &ModelConfig {
        &self.transport.config
    }

    fn prepare(&self, request: &ChatRequest<'_>, mode: Mode) -> Result<PreparedRequest, LlmError> {
        let config = &self.transport.config;
        let max_tokens = request
            .max_output_tokens
            .or(config.max_output_tokens)
            .unwrap_or_else(|| {
                model_info(&config.model)
                    .max_output_tokens
                    .min(ANTHROPIC_DEFAULT_MAX_OUTPUT)
            });
        let mut w = BodyWriter::new(size_hint(request));
        w.raw("{");
        w.key("model", true);
        w.json(&config.model)?;
        w.key("max_tokens", false);
        w.json(&max_tokens)?;
        // The tools before the system prompt and the messages: every request
        // over the same tools then starts with the same bytes, which
        // `count_cache` counts once. (The API reads tools, system, messages
        // in that order whatever the order of the keys.)
        if !request.tools.is_empty() {
            w.key("tools", false);
            write_tools(&mut w, request.tools)?;
            let disable_parallel = !request.parallel_tool_calls;
            let choice = match request.tool_choice {
                ToolChoice::Auto if disable_parallel => {
                    Some(serde_json::json!({"type": "auto", "disable_parallel_tool_use": true}))
                }
                ToolChoice::Auto => None,
                ToolChoice::None => Some(serde_json::json!({"type": "none"})),
                ToolChoice::Required => Some(
                    serde_json::json!({"type": "any", "disable_parallel_tool_use": disable_parallel}),
                ),
                ToolChoice::Tool(name) => Some(serde_json::json!({
                    "type": "tool", "name": name, "disable_parallel_tool_use": disable_parallel
                })),
            };
            if let Some(choice) = choice {
                w.key("tool_choice", false);
                w.json(&choice)?;
            }
        }

        let system: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::System { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        if !system.is_empty() {
            w.key("system", false);
            w.enter(Section::System);
            w.json(&system.join("\n\n"))?;
            w.enter(Section::Framing);
        }

        w.key("messages", false);
        w.raw("[");
        write_messages(&mut w, request.messages)?;
        w.enter(Section::Framing);
        w.raw("]");

        if let Some(budget) = config.thinking_budget_tokens {
            w.key("thinking", false);
            w.json(&serde_json::json!({"type": "enabled", "budget_tokens": budget}))?;
        }
        if let Some(temperature) = config.temperature {
            w.key("temperature", false);
            w.json(&temperature)?;
        }
        if mode == Mode::Stream {
            w.key("stream", false);
            w.raw("true");
        }
        w.raw("}");
        Ok(w.finish(
            config,
            messages_url(&config.base_url),
            mode,
            Some(max_tokens),
        ))
    }

    fn send(&self, prepared: &PreparedRequest, cancel: CancellationToken) -> EventStream {
        self.transport.send(prepared, cancel)
    }
}

/// The `tools` array: name, description and input schema per tool, each
/// schema in the form the Messages API accepts (no combinator at its root:
/// one such tool would fail the whole request). A tool with no such form
/// is left out; it was named in a warning when it was imported. The text
/// editor is declared by its type, as Claude models are trained on it.
pub(crate) fn write_tools(w: &mut BodyWriter, tools: &[ToolSpec]) -> Result<(), LlmError> {
    w.raw("[");
    let mut first = true;
    for tool in tools {
        if tool.name == TEXT_EDITOR {
            if !first {
                w.enter(Section::Framing);
                w.raw(",");
            }
            first = false;
            w.enter(Section::Tools);
            w.declared(
                &serde_json::json!({"type": TEXT_EDITOR_TYPE, "name": TEXT_EDITOR}),
                TEXT_EDITOR_TOKENS,
            )?;
            continue;
        }
        let input_schema = match schema_for(&tool.input_schema, SchemaConsumer::Anthropic) {
            Ok(schema) => schema,
            Err(why) => {
                tracing::debug!(tool = %tool.name, "left out of the request: {why}");
                continue;
            }
        };
        if !first {
            w.enter(Section::Framing);
            w.raw(",");
        }
        first = false;
        w.enter(Section::Tools);
        w.json(&WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &input_schema,
        })?;
    }
    w.enter(Section::Framing);
    w.raw("]");
    Ok(())
}

fn write_messages(w: &mut BodyWriter, messages: &[Message]) -> Result<(), LlmError> {
    // Thinking is kept only after the last user message: the current tool loop.
    let loop_start = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .map_or(0, |i| i + 1);
    let mut first = true;
    let mut separator = |w: &mut BodyWriter| {
        if !first {
            w.enter(Section::Framing);
            w.raw(",");
        }
        first = false;
    };
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::System { .. } => {}
            Message::User { content } => {
                separator(w);
                w.enter(Section::Messages);
                w.raw("{\"role\":\"user\",\"content\":");
                match content.as_slice() {
                    [Content::Text { text }] => w.json(text)?,
                    parts => write_blocks(w, parts)?,
                }
                w.raw("}");
            }
            Message::Assistant { content } => {
                let keep_thinking = i >= loop_start;
                let blocks: Vec<AssistantBlock<'_>> = content
                    .iter()
                    .filter_map(|part| AssistantBlock::of(part, keep_thinking))
                    .collect();
                if !blocks.is_empty() {
                    separator(w);
                    w.enter(Section::Messages);
                    w.json(&WireAssistant {
                        role: "assistant",
                        content: blocks,
                    })?;
                }
            }
            Message::Tool(_) => {
                separator(w);
                w.enter(Section::ToolResults);
                w.raw("{\"role\":\"user\",\"content\":[");
                let mut n = 0;
                while let Some(Message::Tool(result)) = messages.get(i) {
                    if n > 0 {
                        w.raw(",");
                    }
                    write_tool_result(w, result)?;
                    n += 1;
                    i += 1;
                }
                w.raw("]}");
                continue;
            }
        }
        i += 1;
    }
    Ok(())
}

fn write_tool_result(w: &mut BodyWriter, result: &ToolResult) -> Result<(), LlmError> {
    w.raw("{\"type\":\"tool_result\",\"tool_use_id\":");
    w.json(&result.call_id)?;
    w.raw(",\"content\":");
    match &result.content {
        ToolResults::Text(text) => w.json(text)?,
        ToolResults::Parts(parts) => write_blocks(w, parts)?,
    }
    if result.is_error {
        w.raw(",\"is_error\":true");
    }
    w.raw("}");
    Ok(())
}

/// `[...]` of text and image blocks; JSON parts become text.
fn write_blocks(w: &mut BodyWriter, parts: &[Content]) -> Result<(), LlmError> {
    w.raw("[");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            w.raw(",");
        }
        match part {
            Content::Text { text } => w.json(&TextBlock { kind: "text", text })?,
            Content::Json { .. } => w.json(&TextBlock {
                kind: "text",
                text: &part.to_text(),
            })?,
            Content::Image { mime_type, data } => {
                w.raw("{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":");
                w.json(mime_type)?;
                w.raw(",\"data\":");
                w.image_string("", data)?;
                w.raw("}}");
            }
        }
    }
    w.raw("]");
    Ok(())
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct WireAssistant<'a> {
    role: &'static str,
    content: Vec<AssistantBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AssistantBlock<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
}

static EMPTY_INPUT: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| Value::Object(Map::new()));

impl<'a> AssistantBlock<'a> {
    fn of(part: &'a AssistantPart, keep_thinking: bool) -> Option<AssistantBlock<'a>> {
        match part {
            AssistantPart::Text { text } if text.is_empty() => None,
            AssistantPart::Text { text } => Some(AssistantBlock::Text { text }),
            AssistantPart::Thinking {
                thinking,
                signature: Some(signature),
            } if keep_thinking => Some(AssistantBlock::Thinking {
                thinking,
                signature,
            }),
            AssistantPart::Thinking { .. } => None,
            AssistantPart::RedactedThinking { data } if keep_thinking => {
                Some(AssistantBlock::RedactedThinking { data })
            }
            AssistantPart::RedactedThinking { .. } => None,
            AssistantPart::ToolCall(call) => Some(AssistantBlock::ToolUse {
                id: &call.id,
                name: &call.name,
                input: if call.input.is_object() {
                    &call.input
                } else {
                    &EMPTY_INPUT
                },
            }),
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: &'a Value,
}

// ---- Responses ----

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: WireMessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct WireMessage {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    content: Vec<WireBlock>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct WireMessageDelta {
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WholeBody {
    Message(WireMessage),
    Error { error: WireError },
}

#[derive(Default)]
struct AnthropicDecoder {
    /// Figures so far: `message_start` has the input, `message_delta` the output.
    usage: WireUsage,
    /// Content block indexes that are tool calls.
    tool_blocks: Vec<usize>,
    /// `message_stop` arrived (or the message was read whole).
    message_stop: bool,
}

impl AnthropicDecoder {
    fn usage(&mut self, usage: WireUsage, asm: &mut Assembler, out: &mut Vec<StreamEvent>) {
        let merged = WireUsage {
            input_tokens: usage.input_tokens.or(self.usage.input_tokens),
            output_tokens: usage.output_tokens.or(self.usage.output_tokens),
            cache_creation_input_tokens: usage
                .cache_creation_input_tokens
                .or(self.usage.cache_creation_input_tokens),
            cache_read_input_tokens: usage
                .cache_read_input_tokens
                .or(self.usage.cache_read_input_tokens),
        };
        self.usage = merged;
        let cache_write = merged.cache_creation_input_tokens.unwrap_or(0);
        let cache_read = merged.cache_read_input_tokens.unwrap_or(0);
        asm.set_usage(
            Usage {
                input_tokens: merged.input_tokens.unwrap_or(0) + cache_write + cache_read,
                output_tokens: merged.output_tokens.unwrap_or(0),
                cache_read_tokens: cache_read,
                cache_write_tokens: cache_write,
                reasoning_tokens: None,
            },
            out,
        );
    }

    fn block_start(
        &mut self,
        index: usize,
        block: WireBlock,
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) {
        match block {
            WireBlock::Text { text } => {
                asm.text_block();
                asm.text(&text, out);
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                asm.thinking_block();
                asm.thinking(&thinking, out);
                if !signature.is_empty() {
                    asm.signature(&signature);
                }
            }
            WireBlock::RedactedThinking { data } => asm.redacted_thinking(&data),
            WireBlock::ToolUse { id, name, input } => {
                self.tool_blocks.push(index);
                asm.tool_begin(index, Some(&id), Some(&name), out);
                // Streams start with `{}` and send the input as deltas; a
                // whole message carries it here.
                if input.as_object().is_some_and(|o| !o.is_empty()) {
                    asm.tool_arguments(index, &input.to_string(), out);
                }
            }
            WireBlock::Unknown => {}
        }
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

impl Decoder for AnthropicDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, DecodeError> {
        let wire: WireEvent = serde_json::from_str(&event.data).map_err(|error| {
            DecodeError::Invalid(format!(
                "{error} in `{}` event `{}`",
                event.event,
                clip(&event.data)
            ))
        })?;
        match wire {
            WireEvent::MessageStart { message } => {
                asm.id = message.id;
                asm.model = message.model;
                if let Some(usage) = message.usage {
                    self.usage(usage, asm, out);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, content_block, asm, out),
            WireEvent::ContentBlockDelta { index, delta } => match delta {
                WireDelta::TextDelta { text } => asm.text(&text, out),
                WireDelta::ThinkingDelta { thinking } => asm.thinking(&thinking, out),
                WireDelta::SignatureDelta { signature } => asm.signature(&signature),
                WireDelta::InputJsonDelta { partial_json } => {
                    asm.tool_arguments(index, &partial_json, out)
                }
                WireDelta::Unknown => {}
            },
            WireEvent::ContentBlockStop { index } => {
                if self.tool_blocks.contains(&index) {
                    asm.tool_end(index, out);
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    asm.stop(stop_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.usage(usage, asm, out);
                }
            }
            WireEvent::MessageStop => {
                self.message_stop = true;
                return Ok(true);
            }
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                return Err(DecodeError::Provider {
                    kind: error.kind,
                    message: error.message,
                });
            }
        }
        Ok(false)
    }

    fn missing_end(&self, asm: &Assembler) -> Option<&'static str> {
        if !asm.has_stopped() {
            Some("no `message_delta` carried a `stop_reason`")
        } else if !self.message_stop {
            Some("no `message_stop` event came")
        } else {
            None
        }
    }

    fn whole(
        &mut self,
        body: &[u8],
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        let whole: WholeBody = serde_json::from_slice(body).map_err(|error| {
            DecodeError::Invalid(format!(
                "{error} in response `{}`",
                clip(&String::from_utf8_lossy(body))
            ))
        })?;
        let message = match whole {
            WholeBody::Message(message) => message,
            WholeBody::Error { error } => {
                return Err(DecodeError::Provider {
                    kind: error.kind,
                    message: error.message,
                });
            }
        };
        self.message_stop = true;
        asm.id = message.id;
        asm.model = message.model;
        for (index, block) in message.content.into_iter().enumerate() {
            self.block_start(index, block, asm, out);
        }
        asm.tools_end(out);
        if let Some(reason) = message.stop_reason {
            asm.stop(stop_reason(&reason));
        }
        if let Some(usage) = message.usage {
            self.usage(usage, asm, out);
        }
        Ok(())
    }
}
