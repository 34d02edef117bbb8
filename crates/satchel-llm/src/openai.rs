//! OpenAI Chat Completions (`POST {baseUrl}/chat/completions`), the format
//! OpenAI, Ollama, vLLM, llama.cpp's server, OpenRouter and LiteLLM speak.
//!
//! Wire types are private to this module. Notes on the mapping:
//! - thinking parts are never sent (the format has no place for them);
//!   reasoning that servers stream as `reasoning_content` (vLLM, DeepSeek)
//!   or `reasoning` (Ollama, OpenRouter) is shown as thinking;
//! - a tool result's `is_error` travels in its content (Satchel's error
//!   results are `{"error", "error_code"}` objects): the format has no flag;
//! - images in tool results become a text placeholder (tool messages are
//!   text only); images in user messages are sent as data URLs;
//! - the largest answer is `max_completion_tokens` for api.openai.com (its
//!   reasoning models refuse `max_tokens`) and `max_tokens` elsewhere;
//! - `parallel_tool_calls` is sent only to turn parallel calls off, since
//!   some servers and models reject the field;
//! - to Ollama, every request carries `options.num_ctx` (the window Satchel
//!   counts against, [`ModelConfig::num_ctx`]): without it Ollama runs with
//!   its own small default and cuts a longer prompt silently.

use std::borrow::Cow;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use satchel_core::portable::{SchemaConsumer, schema_for};
use satchel_core::{AssistantPart, Content, Message, ToolResults, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::LlmError;
use crate::config::{ModelConfig, OPENAI_URL, ReplyFormat};
use crate::consumer::schema_consumer;
use crate::http::{DecodeError, Decoder, EventStream, Transport, clip};
use crate::provider::Provider;
use crate::request::{BodyWriter, ChatRequest, Mode, PreparedRequest, ToolChoice, size_hint};
use crate::response::{Assembler, StopReason, StreamEvent, Usage};
use crate::sections::Section;
use crate::sse::SseEvent;

/// A Chat Completions server.
pub struct OpenAiProvider {
    transport: Arc<Transport>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("config", &self.transport.config)
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider for `config` (whose `provider` should be `openai`).
    pub fn new(config: ModelConfig) -> Result<OpenAiProvider, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    LlmError::Config {
                        message: format!(
                            "the API key in ${} contains characters a header cannot carry",
                            key.env_var
                        ),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let ollama = config.default_endpoint || config.base_url.contains(":11434");
        let hint = if ollama {
            format!(
                "; with Ollama, run `ollama pull {}` first (requests go to {}/chat/completions)",
                config.model, config.base_url
            )
        } else {
            format!(
                "; or `llm.baseUrl` is not the API root (requests go to {}/chat/completions)",
                config.base_url
            )
        };
        let transport = Transport::new(config, headers, hint, || Box::new(OpenAiDecoder))?;
        Ok(OpenAiProvider {
            transport: Arc::new(transport),
        })
    }
}

impl Provider for OpenAiProvider {
    fn config(&self) -> &ModelConfig {
        &self.transport.config
    }

    fn prepare(&self, request: &ChatRequest<'_>, mode: Mode) -> Result<PreparedRequest, LlmError> {
        let config = &self.transport.config;
        let mut w = BodyWriter::new(size_hint(request));
        w.raw("{");
        w.key("model", true);
        w.json(&config.model)?;
        // The tools before the messages: every request over the same tools
        // then starts with the same bytes, which `count_cache` counts once
        // (the order of an object's keys means nothing to the server).
        if !request.tools.is_empty() {
            w.key("tools", false);
            write_tools(&mut w, request.tools, schema_consumer(self.config()))?;
            match request.tool_choice {
                ToolChoice::Auto => {}
                ToolChoice::None => {
                    w.key("tool_choice", false);
                    w.raw("\"none\"");
                }
                ToolChoice::Required => {
                    w.key("tool_choice", false);
                    w.raw("\"required\"");
                }
                ToolChoice::Tool(name) => {
                    w.key("tool_choice", false);
                    w.json(&serde_json::json!({"type": "function", "function": {"name": name}}))?;
                }
            }
            if !request.parallel_tool_calls {
                w.key("parallel_tool_calls", false);
                w.raw("false");
            }
        }
        w.key("messages", false);
        w.raw("[");
        for (i, message) in request.messages.iter().enumerate() {
            if i > 0 {
                w.enter(Section::Framing);
                w.raw(",");
            }
            write_message(&mut w, message)?;
        }
        w.enter(Section::Framing);
        w.raw("]");
        let max_output = request.max_output_tokens.or(config.max_output_tokens);
        if let Some(max) = max_output {
            let field = if config.base_url.starts_with(OPENAI_URL) {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            w.key(field, false);
            w.json(&max)?;
        }
        if let Some(num_ctx) = config.num_ctx {
            w.enter(Section::Framing);
            w.key("options", false);
            w.json(&serde_json::json!({"num_ctx": num_ctx}))?;
        }
        if let Some(temperature) = config.temperature {
            w.key("temperature", false);
            w.json(&temperature)?;
        }
        if let Some(effort) = &config.reasoning_effort {
            w.key("reasoning_effort", false);
            w.json(effort)?;
        }
        if let (Some(schema), Some(format)) = (request.reply_schema, config.reply_format()) {
            // Not prompt text: the server compiles it into a grammar.
            w.enter(Section::Framing);
            w.key("response_format", false);
            match format {
                ReplyFormat::JsonSchema => w.json(&serde_json::json!({
                    "type": "json_schema",
                    "json_schema": {"name": "reply", "schema": schema},
                }))?,
                ReplyFormat::JsonObject => w.json(&serde_json::json!({
                    "type": "json_object",
                    "schema": schema,
                }))?,
            }
        }
        if mode == Mode::Stream {
            w.key("stream", false);
            w.raw("true,\"stream_options\":{\"include_usage\":true}");
        }
        w.raw("}");
        let url = format!("{}/chat/completions", config.base_url);
        Ok(w.finish(config, url, mode, max_output))
    }

    fn send(&self, prepared: &PreparedRequest, cancel: CancellationToken) -> EventStream {
        self.transport.send(prepared, cancel)
    }
}

/// The `tools` array: one function definition per tool, each schema in
/// the form `consumer` accepts (OpenAI's or Gemini's subset). A tool with
/// no such form is left out; it was named in a warning when imported.
pub(crate) fn write_tools(
    w: &mut BodyWriter,
    tools: &[ToolSpec],
    consumer: SchemaConsumer,
) -> Result<(), LlmError> {
    w.raw("[");
    let mut first = true;
    for tool in tools {
        let parameters = match schema_for(&tool.input_schema, consumer) {
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
        w.json(&WireTool::new(tool, &parameters))?;
    }
    w.enter(Section::Framing);
    w.raw("]");
    Ok(())
}

fn write_message(w: &mut BodyWriter, message: &Message) -> Result<(), LlmError> {
    match message {
        Message::System { content } => {
            w.enter(Section::System);
            w.json(&TextMessage {
                role: "system",
                content,
            })
        }
        Message::User { content } => {
            w.enter(Section::Messages);
            if content
                .iter()
                .all(|part| !matches!(part, Content::Image { .. }))
            {
                let text = match content.as_slice() {
                    [Content::Text { text }] => Cow::Borrowed(text.as_str()),
                    parts => Cow::Owned(
                        parts
                            .iter()
                            .map(Content::to_text)
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ),
                };
                return w.json(&TextMessage {
                    role: "user",
                    content: &text,
                });
            }
            w.raw("{\"role\":\"user\",\"content\":[");
            for (i, part) in content.iter().enumerate() {
                if i > 0 {
                    w.raw(",");
                }
                match part {
                    Content::Image { mime_type, data } => {
                        w.raw("{\"type\":\"image_url\",\"image_url\":{\"url\":");
                        w.image_string(&format!("data:{mime_type};base64,"), data)?;
                        w.raw("}}");
                    }
                    other => w.json(&TextPart {
                        kind: "text",
                        text: &other.to_text(),
                    })?,
                }
            }
            w.raw("]}");
            Ok(())
        }
        Message::Assistant { content } => {
            w.enter(Section::Messages);
            let mut text = String::new();
            let mut tool_calls = Vec::new();
            for part in content {
                match part {
                    AssistantPart::Text { text: t } => text.push_str(t),
                    AssistantPart::ToolCall(call) => tool_calls.push(WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunction {
                            name: &call.name,
                            arguments: match &call.input {
                                // Malformed arguments are sent back as the model wrote them.
                                Value::String(raw) => Cow::Borrowed(raw),
                                input => Cow::Owned(input.to_string()),
                            },
                        },
                    }),
                    AssistantPart::Thinking { .. } | AssistantPart::RedactedThinking { .. } => {}
                }
            }
            w.json(&AssistantMessage {
                role: "assistant",
                content: (!text.is_empty() || tool_calls.is_empty()).then_some(text),
                tool_calls,
            })
        }
        Message::Tool(result) => {
            w.enter(Section::ToolResults);
            let content = match &result.content {
                ToolResults::Text(text) => Cow::Borrowed(text.as_str()),
                parts => Cow::Owned(parts.to_text()),
            };
            w.json(&ToolMessage {
                role: "tool",
                tool_call_id: &result.call_id,
                content,
            })
        }
    }
}

#[derive(Serialize)]
struct TextMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct AssistantMessage<'a> {
    role: &'static str,
    content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct ToolMessage<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolDefinition<'a>,
}

#[derive(Serialize)]
struct WireToolDefinition<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireTool<'a> {
    /// `spec` as a function definition with `parameters` as its schema.
    fn new(spec: &'a ToolSpec, parameters: &'a Value) -> WireTool<'a> {
        WireTool {
            kind: "function",
            function: WireToolDefinition {
                name: &spec.name,
                description: &spec.description,
                parameters,
            },
        }
    }
}

// ---- Responses ----

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: u32,
    delta: Option<Delta>,
    /// Present in whole responses instead of `delta`.
    message: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    /// A string per the format; some servers send an object.
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    message: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<Value>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Usage {
        Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cache_read_tokens: usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
            reasoning_tokens: usage
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens),
        }
    }
}

#[derive(Default)]
struct OpenAiDecoder;

impl OpenAiDecoder {
    fn chunk(
        &mut self,
        chunk: Chunk,
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        if let Some(error) = chunk.error {
            let kind = error
                .kind
                .or_else(|| {
                    error
                        .code
                        .map(|c| c.as_str().map_or(c.to_string(), str::to_owned))
                })
                .unwrap_or_else(|| "error".into());
            return Err(DecodeError::Provider {
                kind,
                message: error.message.unwrap_or_default(),
            });
        }
        if asm.id.is_none() {
            asm.id = chunk.id;
        }
        if asm.model.is_none() {
            asm.model = chunk.model;
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta.or(choice.message) {
                self.delta(delta, asm, out);
            }
            if let Some(reason) = choice.finish_reason {
                asm.tools_end(out);
                asm.stop(match reason.as_str() {
                    "stop" if asm.tool_count() > 0 => StopReason::ToolUse,
                    "stop" => StopReason::EndTurn,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    "length" => StopReason::MaxTokens,
                    "content_filter" => StopReason::ContentFilter,
                    other => StopReason::Other(other.to_owned()),
                });
            }
        }
        if let Some(usage) = chunk.usage {
            asm.set_usage(usage.into(), out);
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta, asm: &mut Assembler, out: &mut Vec<StreamEvent>) {
        if let Some(thinking) = delta.reasoning_content.or(delta.reasoning) {
            asm.thinking(&thinking, out);
        }
        if let Some(text) = delta.content {
            asm.text(&text, out);
        }
        if let Some(refusal) = delta.refusal {
            asm.text(&refusal, out);
        }
        for call in delta.tool_calls.unwrap_or_default() {
            // Servers that omit `index` send each call whole, or its
            // header once: a new id means a new call.
            let key = match call.index {
                Some(index) => index,
                None if call.id.is_some() => asm.tool_count(),
                None => asm.last_tool_key().unwrap_or(0),
            };
            let (name, arguments) = match call.function {
                Some(function) => (function.name, function.arguments),
                None => (None, None),
            };
            asm.tool_begin(key, call.id.as_deref(), name.as_deref(), out);
            match arguments {
                Some(Value::String(text)) => asm.tool_arguments(key, &text, out),
                Some(Value::Null) | None => {}
                Some(value) => asm.tool_arguments(key, &value.to_string(), out),
            }
        }
    }
}

impl Decoder for OpenAiDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, DecodeError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|error| DecodeError::Invalid(format!("{error} in chunk `{}`", clip(data))))?;
        self.chunk(chunk, asm, out)?;
        Ok(false)
    }

    fn missing_end(&self, asm: &Assembler) -> Option<&'static str> {
        (!asm.has_stopped()).then_some("no choice carried a `finish_reason`")
    }

    fn whole(
        &mut self,
        body: &[u8],
        asm: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        let chunk: Chunk = serde_json::from_slice(body).map_err(|error| {
            DecodeError::Invalid(format!(
                "{error} in response `{}`",
                clip(&String::from_utf8_lossy(body))
            ))
        })?;
        if chunk.error.is_none() && chunk.choices.is_empty() {
            return Err(DecodeError::Invalid("the response has no `choices`".into()));
        }
        self.chunk(chunk, asm, out)
    }
}
