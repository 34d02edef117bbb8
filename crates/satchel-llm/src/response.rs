//! What comes back from a model: [`StreamEvent`]s as they arrive, the
//! assembled [`Response`], provider-reported [`Usage`], and tool calls whose
//! arguments are checked ([`AssembledToolCall`]).
//!
//! Both providers feed the same [`Assembler`], so a streamed answer and a
//! non-streamed one assemble into the same [`Response`].

use satchel_core::{AssistantPart, ErrorCode, Message, ToolCall, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tokens::TokenEstimate;

/// Token figures the provider reported for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every prompt token the provider counted, cached or not (OpenAI's
    /// `prompt_tokens`; Anthropic's `input_tokens` plus both cache figures).
    pub input_tokens: u64,
    /// Tokens generated, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic).
    pub cache_write_tokens: u64,
    /// Output tokens spent on reasoning, when the provider says.
    pub reasoning_tokens: Option<u64>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The answer is complete.
    EndTurn,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The answer hit the output-token limit.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The provider filtered the content.
    ContentFilter,
    /// The model refused.
    Refusal,
    /// Anthropic paused a long turn; send the history back to continue.
    PauseTurn,
    /// The stream was cut before the model finished (see
    /// [`LlmError::Interrupted`](crate::LlmError::Interrupted)).
    Interrupted,
    /// A reason this version of Satchel does not know.
    Other(String),
}

/// A tool call as the model sent it, with its arguments checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssembledToolCall {
    /// The call's id, used to match its result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: String,
    /// The parsed arguments when they are one JSON object (an empty text
    /// counts as `{}`); otherwise a JSON string holding `arguments`.
    pub input: Value,
    /// Why the arguments could not be used, when they could not.
    pub error: Option<String>,
}

impl AssembledToolCall {
    /// Checks `arguments` and builds the call.
    pub fn new(id: String, name: String, arguments: String) -> AssembledToolCall {
        let (input, error) = if arguments.trim().is_empty() {
            (Value::Object(Map::new()), None)
        } else {
            match serde_json::from_str::<Value>(&arguments) {
                Ok(Value::Object(object)) => (Value::Object(object), None),
                Ok(other) => (
                    Value::String(arguments.clone()),
                    Some(format!(
                        "the arguments are {}, not a JSON object",
                        json_kind(&other)
                    )),
                ),
                Err(error) => (
                    Value::String(arguments.clone()),
                    Some(format!("the arguments are not valid JSON ({error})")),
                ),
            }
        };
        AssembledToolCall {
            id,
            name,
            arguments,
            input,
            error,
        }
    }

    /// The call to run, or `None` when the arguments were unusable (send
    /// [`AssembledToolCall::invalid_params_output`] back instead).
    pub fn to_tool_call(&self) -> Option<ToolCall> {
        match self.error {
            None => Some(ToolCall {
                id: self.id.clone(),
                name: self.name.clone(),
                input: self.input.clone(),
            }),
            Some(_) => None,
        }
    }

    /// The `INVALID_PARAMS` output that tells the model its arguments were
    /// unusable and how to retry; `None` when they were fine.
    pub fn invalid_params_output(&self) -> Option<ToolOutput> {
        let error = self.error.as_ref()?;
        let shown = satchel_core::text::cut_with(&self.arguments, 200, "...");
        let mut details = Map::new();
        details.insert("arguments".into(), Value::String(shown));
        Some(
            ToolOutput::error_with(
                ErrorCode::InvalidParams,
                format!(
                    "the call to `{}` was not run: {error}. Call the tool again with arguments \
                     that are one JSON object matching its inputSchema.",
                    self.name
                ),
                details,
            )
            .with_user_message(format!(
                "the model sent malformed arguments to `{}` ({error}); it was asked to retry",
                self.name
            )),
        )
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One thing that happened while a model answered.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text (shown to the user, kept out of later turns).
    ThinkingDelta(String),
    /// The model began a tool call.
    ToolCallStarted {
        /// Position of the call among this answer's tool calls.
        index: usize,
        /// The call's id (may be empty until the provider sends it).
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's arguments.
    ToolCallDelta {
        /// Position of the call among this answer's tool calls.
        index: usize,
        /// The new text.
        arguments: String,
    },
    /// A tool call is complete, its arguments checked.
    ToolCallCompleted {
        /// Position of the call among this answer's tool calls.
        index: usize,
        /// The call.
        call: AssembledToolCall,
    },
    /// The provider reported (or updated) its token figures.
    Usage(Usage),
    /// An attempt failed before any content arrived and the same request
    /// is sent again after `delay`; nothing of the failed attempt was
    /// delivered.
    Retrying {
        /// The attempt that comes next (2 for the first retry).
        attempt: u32,
        /// The wait before it.
        delay: std::time::Duration,
        /// Why the last attempt failed.
        reason: String,
    },
    /// The answer is complete; always the last event of a successful call.
    Done(Box<Response>),
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The provider's id for the answer.
    pub id: Option<String>,
    /// The model that answered, as the provider names it.
    pub model: Option<String>,
    /// Text, thinking and tool calls, in the order they were produced.
    pub content: Vec<AssistantPart>,
    /// The tool calls, with their arguments checked.
    pub tool_calls: Vec<AssembledToolCall>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// What the provider reported, when it did.
    pub usage: Option<Usage>,
    /// What Satchel counted on the request's bytes, to store beside `usage`.
    pub estimate: TokenEstimate,
}

impl Response {
    /// The answer's text parts, joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|part| match part {
                AssistantPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The answer's reasoning, joined (for display).
    pub fn thinking(&self) -> String {
        self.content
            .iter()
            .filter_map(|part| match part {
                AssistantPart::Thinking { thinking, .. } => Some(thinking.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The answer as a history message.
    pub fn message(&self) -> Message {
        Message::Assistant {
            content: self.content.clone(),
        }
    }

    /// Estimated minus reported input tokens, when usage was reported:
    /// the estimate's error for this model.
    pub fn input_estimate_error(&self) -> Option<i64> {
        let usage = self.usage?;
        Some(self.estimate.total as i64 - usage.input_tokens as i64)
    }
}

/// Builds a [`Response`] from provider-neutral pieces and emits the
/// matching [`StreamEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    parts: Vec<Slot>,
    tools: Vec<ToolSlot>,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    pub(crate) id: Option<String>,
    pub(crate) model: Option<String>,
    /// True once any content (text, thinking, tool call) was emitted.
    pub(crate) delivered: bool,
    /// Deltas of text, thinking and tool arguments received (for a local
    /// server, about one token each): how far a cut-off answer got.
    pub(crate) pieces: u64,
    /// Tool calls whose `ToolCallStarted` was emitted.
    started: Vec<usize>,
}

#[derive(Debug)]
enum Slot {
    Text(String),
    Thinking { text: String, signature: String },
    Redacted(String),
    Tool(usize),
}

#[derive(Debug)]
struct ToolSlot {
    key: usize,
    id: String,
    name: String,
    arguments: String,
    done: Option<AssembledToolCall>,
}

impl Assembler {
    pub(crate) fn text(&mut self, delta: &str, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        match self.parts.last_mut() {
            Some(Slot::Text(text)) => text.push_str(delta),
            _ => self.parts.push(Slot::Text(delta.to_owned())),
        }
        self.delivered = true;
        self.pieces += 1;
        out.push(StreamEvent::TextDelta(delta.to_owned()));
    }

    /// Starts a new text part even if the last part is text (a new
    /// Anthropic content block).
    pub(crate) fn text_block(&mut self) {
        self.parts.push(Slot::Text(String::new()));
    }

    pub(crate) fn thinking(&mut self, delta: &str, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        match self.parts.last_mut() {
            Some(Slot::Thinking { text, .. }) => text.push_str(delta),
            _ => self.parts.push(Slot::Thinking {
                text: delta.to_owned(),
                signature: String::new(),
            }),
        }
        self.delivered = true;
        self.pieces += 1;
        out.push(StreamEvent::ThinkingDelta(delta.to_owned()));
    }

    /// Starts a new thinking part (a new Anthropic content block).
    pub(crate) fn thinking_block(&mut self) {
        self.parts.push(Slot::Thinking {
            text: String::new(),
            signature: String::new(),
        });
    }

    pub(crate) fn signature(&mut self, delta: &str) {
        match self.parts.last_mut() {
            Some(Slot::Thinking { signature, .. }) => signature.push_str(delta),
            _ => self.parts.push(Slot::Thinking {
                text: String::new(),
                signature: delta.to_owned(),
            }),
        }
    }

    pub(crate) fn redacted_thinking(&mut self, data: &str) {
        self.delivered = true;
        self.parts.push(Slot::Redacted(data.to_owned()));
    }

    /// A tool call begins, or more of its header arrives; `key` is the
    /// provider's index for it.
    pub(crate) fn tool_begin(
        &mut self,
        key: usize,
        id: Option<&str>,
        name: Option<&str>,
        out: &mut Vec<StreamEvent>,
    ) {
        let index = self.tool_index(key);
        let slot = &mut self.tools[index];
        if slot.id.is_empty()
            && let Some(id) = id
        {
            slot.id = id.to_owned();
        }
        if slot.name.is_empty()
            && let Some(name) = name
        {
            slot.name = name.to_owned();
        }
        if !slot.name.is_empty() && !slot.id.is_empty() && !self.delivered_tool(index) {
            self.mark_started(index, out);
        }
    }

    pub(crate) fn tool_arguments(&mut self, key: usize, delta: &str, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        let index = self.tool_index(key);
        if !self.delivered_tool(index) {
            self.mark_started(index, out);
        }
        self.tools[index].arguments.push_str(delta);
        self.pieces += 1;
        out.push(StreamEvent::ToolCallDelta {
            index,
            arguments: delta.to_owned(),
        });
    }

    /// The tool call under `key` is complete.
    pub(crate) fn tool_end(&mut self, key: usize, out: &mut Vec<StreamEvent>) {
        let Some(index) = self.tools.iter().position(|t| t.key == key) else {
            return;
        };
        if self.tools[index].done.is_some() {
            return;
        }
        if !self.delivered_tool(index) {
            self.mark_started(index, out);
        }
        let slot = &mut self.tools[index];
        if slot.id.is_empty() {
            slot.id = format!("call_{index}");
        }
        let call = AssembledToolCall::new(
            slot.id.clone(),
            slot.name.clone(),
            std::mem::take(&mut slot.arguments),
        );
        slot.done = Some(call.clone());
        out.push(StreamEvent::ToolCallCompleted { index, call });
    }

    /// Completes every tool call still open.
    pub(crate) fn tools_end(&mut self, out: &mut Vec<StreamEvent>) {
        let keys: Vec<usize> = self
            .tools
            .iter()
            .filter(|t| t.done.is_none())
            .map(|t| t.key)
            .collect();
        for key in keys {
            self.tool_end(key, out);
        }
    }

    pub(crate) fn set_usage(&mut self, usage: Usage, out: &mut Vec<StreamEvent>) {
        self.usage = Some(usage);
        out.push(StreamEvent::Usage(usage));
    }

    pub(crate) fn stop(&mut self, reason: StopReason) {
        self.stop = Some(reason);
    }

    pub(crate) fn has_stopped(&self) -> bool {
        self.stop.is_some()
    }

    /// The complete answer.
    pub(crate) fn finish(mut self, estimate: TokenEstimate) -> Response {
        let mut ignored = Vec::new();
        self.tools_end(&mut ignored);
        let stop = self.stop.take().unwrap_or(StopReason::EndTurn);
        self.build(stop, estimate)
    }

    /// What arrived before the stream was cut, without unfinished tool calls.
    pub(crate) fn partial(self, estimate: TokenEstimate) -> Response {
        self.build(StopReason::Interrupted, estimate)
    }

    fn build(self, stop_reason: StopReason, estimate: TokenEstimate) -> Response {
        let mut content = Vec::with_capacity(self.parts.len());
        let mut tool_calls = Vec::new();
        for slot in self.parts {
            match slot {
                Slot::Text(text) if text.is_empty() => {}
                Slot::Text(text) => content.push(AssistantPart::Text { text }),
                Slot::Thinking { text, signature } => content.push(AssistantPart::Thinking {
                    thinking: text,
                    signature: (!signature.is_empty()).then_some(signature),
                }),
                Slot::Redacted(data) => content.push(AssistantPart::RedactedThinking { data }),
                Slot::Tool(index) => {
                    if let Some(call) = self.tools.get(index).and_then(|t| t.done.clone()) {
                        content.push(AssistantPart::ToolCall(ToolCall {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            input: call.input.clone(),
                        }));
                        tool_calls.push(call);
                    }
                }
            }
        }
        Response {
            id: self.id,
            model: self.model,
            content,
            tool_calls,
            stop_reason,
            usage: self.usage,
            estimate,
        }
    }

    fn tool_index(&mut self, key: usize) -> usize {
        if let Some(index) = self.tools.iter().position(|t| t.key == key) {
            return index;
        }
        let index = self.tools.len();
        self.tools.push(ToolSlot {
            key,
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
            done: None,
        });
        self.parts.push(Slot::Tool(index));
        index
    }

    /// The key of the most recent tool call, for providers that omit it.
    pub(crate) fn last_tool_key(&self) -> Option<usize> {
        self.tools.last().map(|t| t.key)
    }

    /// The number of tool calls seen so far.
    pub(crate) fn tool_count(&self) -> usize {
        self.tools.len()
    }

    fn delivered_tool(&self, index: usize) -> bool {
        self.started.contains(&index)
    }

    fn mark_started(&mut self, index: usize, out: &mut Vec<StreamEvent>) {
        self.started.push(index);
        self.delivered = true;
        let slot = &self.tools[index];
        out.push(StreamEvent::ToolCallStarted {
            index,
            id: slot.id.clone(),
            name: slot.name.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_are_parsed_or_kept_raw_with_a_reason() {
        let ok = AssembledToolCall::new("c".into(), "bash".into(), r#"{"command":"ls"}"#.into());
        assert_eq!(ok.error, None);
        assert_eq!(ok.input, json!({"command": "ls"}));
        assert!(ok.invalid_params_output().is_none());

        let empty = AssembledToolCall::new("c".into(), "now".into(), String::new());
        assert_eq!(empty.input, json!({}));
        assert_eq!(empty.error, None);

        let broken = AssembledToolCall::new("c".into(), "bash".into(), r#"{"command": "ls"#.into());
        assert_eq!(broken.input, json!(r#"{"command": "ls"#));
        assert!(broken.to_tool_call().is_none());
        let output = broken.invalid_params_output().unwrap();
        assert!(output.is_error);
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
        let fields = output.results.structured().unwrap();
        assert_eq!(fields["error_code"], "INVALID_PARAMS");
        assert_eq!(fields["arguments"], r#"{"command": "ls"#);
        let message = fields["error"].as_str().unwrap();
        assert!(
            message.starts_with("the call to `bash` was not run: the arguments are not valid JSON (EOF while parsing"),
            "{message}"
        );
        assert!(message.ends_with("matching its inputSchema."), "{message}");

        let array = AssembledToolCall::new("c".into(), "bash".into(), "[1]".into());
        assert_eq!(
            array.error.as_deref(),
            Some("the arguments are an array, not a JSON object")
        );
    }
}
