//! The provider-neutral conversation: [`Message`] and its parts.
//!
//! This is the LLM history as Satchel keeps it: exactly what is sent to the
//! model, turn by turn, before any provider's wire format is applied. How a
//! message becomes OpenAI or Anthropic JSON lives in `satchel-llm`; what the
//! user sees (the conversation log) is a different record.

use serde::{Deserialize, Serialize};

use crate::{Content, ToolCall, ToolOutput, ToolResults};

/// One message of the LLM history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions for the model. Providers with a single system prompt
    /// (Anthropic) join every system message into it, in order.
    System {
        /// The instructions.
        content: String,
    },
    /// What the person said: text, possibly with images.
    User {
        /// The parts, in order.
        content: Vec<Content>,
    },
    /// What the model answered: text, thinking, tool calls.
    Assistant {
        /// The parts, in the order the model produced them.
        content: Vec<AssistantPart>,
    },
    /// The outcome of one tool call, answering an assistant's [`AssistantPart::ToolCall`].
    Tool(ToolResult),
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Message {
        Message::System {
            content: text.into(),
        }
    }

    /// A user message made of one text part.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User {
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// An assistant message made of one text part.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message::Assistant {
            content: vec![AssistantPart::Text { text: text.into() }],
        }
    }

    /// The message that returns a tool's output to the model: its results,
    /// then its `response` note (when there is one) as a last text part.
    pub fn tool_result(call_id: impl Into<String>, output: &ToolOutput) -> Message {
        let content = match (&output.results, &output.response) {
            (results, None) => results.clone(),
            (ToolResults::Text(text), Some(note)) => ToolResults::Parts(vec![
                Content::Text { text: text.clone() },
                Content::Text { text: note.clone() },
            ]),
            (ToolResults::Parts(parts), Some(note)) => {
                let mut parts = parts.clone();
                parts.push(Content::Text { text: note.clone() });
                ToolResults::Parts(parts)
            }
        };
        Message::Tool(ToolResult {
            call_id: call_id.into(),
            content,
            is_error: output.is_error,
        })
    }
}

/// One part of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantPart {
    /// Text for the user.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning. Shown to the user; sent back to the
    /// model only within the tool loop that produced it (Anthropic requires
    /// it there), never in later turns.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature over the text, required to send it back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted; passed back like [`AssistantPart::Thinking`].
    RedactedThinking {
        /// The opaque data.
        data: String,
    },
    /// A request to run a tool. When the model's arguments were not valid
    /// JSON, `input` is a JSON string holding the raw text it sent.
    ToolCall(ToolCall),
}

/// A tool's outcome as the model reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// What the model gets back.
    pub content: ToolResults,
    /// True when the call failed.
    #[serde(default)]
    pub is_error: bool,
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::ErrorCode;

    #[test]
    fn messages_serialise_with_role_and_part_tags() {
        let messages = vec![
            Message::system("be brief"),
            Message::user("list files"),
            Message::Assistant {
                content: vec![
                    AssistantPart::Thinking {
                        thinking: "use bash".into(),
                        signature: Some("sig".into()),
                    },
                    AssistantPart::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: json!({"command": "ls"}),
                    }),
                ],
            },
            Message::tool_result(
                "c1",
                &ToolOutput::success(ToolResults::Text("a\nb".into()), "ran ls"),
            ),
        ];
        let value = serde_json::to_value(&messages).unwrap();
        assert_eq!(
            value,
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "use bash", "signature": "sig"},
                    {"type": "tool_call", "id": "c1", "name": "bash", "input": {"command": "ls"}},
                ]},
                {"role": "tool", "call_id": "c1", "content": "a\nb", "is_error": false},
            ])
        );
        assert_eq!(
            serde_json::from_value::<Vec<Message>>(value).unwrap(),
            messages
        );
    }

    #[test]
    fn tool_result_appends_the_note_for_the_model_and_keeps_the_error_flag() {
        let output = ToolOutput::error(ErrorCode::ToolTimeout, "stopped after 30 s")
            .with_response("try a shorter command");
        let Message::Tool(result) = Message::tool_result("c2", &output) else {
            panic!("not a tool message");
        };
        assert!(result.is_error);
        assert_eq!(
            result.content.to_text(),
            "{\"error\":\"stopped after 30 s\",\"error_code\":\"TOOL_TIMEOUT\"}\ntry a shorter command"
        );
    }
}
