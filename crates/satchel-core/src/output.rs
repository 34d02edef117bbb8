//! A call to a tool and what comes back: [`ToolCall`], [`ToolOutput`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::ErrorCode;

/// One request from the model to run a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Id the model (or Satchel) gave the call; results are matched by it.
    pub id: String,
    /// Name of the tool to run.
    pub name: String,
    /// Arguments, validated against the tool's `inputSchema` before the run.
    pub input: Value,
}

/// The outcome of a tool call, split by reader.
///
/// `results` (and `response`) go to the model; `user_message` goes to the
/// person watching. Even a failed call has results: a JSON object with
/// `error` and `error_code` that tells the model what to do differently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// What the model gets back.
    pub results: ToolResults,
    /// A short note for the model that explains the results, e.g. where the
    /// full output of a truncated command was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// What Satchel did, told to the user.
    pub user_message: String,
    /// True when the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
}

impl ToolOutput {
    /// A successful output.
    pub fn success(results: ToolResults, user_message: impl Into<String>) -> ToolOutput {
        ToolOutput {
            results,
            response: None,
            user_message: user_message.into(),
            is_error: false,
            error_code: None,
        }
    }

    /// A failed output whose results are `{"error": message, "error_code": code}`.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> ToolOutput {
        ToolOutput::error_with(code, message, Map::new())
    }

    /// A failed output whose results carry extra fields beside `error` and
    /// `error_code` (e.g. the list of valid tool names).
    pub fn error_with(
        code: ErrorCode,
        message: impl Into<String>,
        details: Map<String, Value>,
    ) -> ToolOutput {
        let message = message.into();
        let mut body = Map::new();
        body.insert("error".into(), Value::String(message.clone()));
        body.insert("error_code".into(), json!(code));
        body.extend(details);
        ToolOutput {
            results: ToolResults::json(Value::Object(body)),
            response: None,
            user_message: message,
            is_error: true,
            error_code: Some(code),
        }
    }

    /// Replaces the note for the model.
    pub fn with_response(mut self, response: impl Into<String>) -> ToolOutput {
        self.response = Some(response.into());
        self
    }

    /// Replaces the message for the user.
    pub fn with_user_message(mut self, user_message: impl Into<String>) -> ToolOutput {
        self.user_message = user_message.into();
        self
    }
}

/// What a tool returns to the model: plain text or a list of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResults {
    /// Plain text (possibly serialised JSON).
    Text(String),
    /// Typed parts: text, images, JSON values.
    Parts(Vec<Content>),
}

impl ToolResults {
    /// Results made of one JSON value.
    pub fn json(value: Value) -> ToolResults {
        ToolResults::Parts(vec![Content::Json { json: value }])
    }

    /// The JSON value, when the results are exactly one JSON part; this is
    /// what MCP calls `structuredContent`.
    pub fn structured(&self) -> Option<&Value> {
        match self {
            ToolResults::Parts(parts) => match parts.as_slice() {
                [Content::Json { json }] => Some(json),
                _ => None,
            },
            ToolResults::Text(_) => None,
        }
    }

    /// The results as the text a model reads: text as is, JSON compact,
    /// images as a one-line placeholder; parts separated by newlines.
    pub fn to_text(&self) -> String {
        match self {
            ToolResults::Text(text) => text.clone(),
            ToolResults::Parts(parts) => parts
                .iter()
                .map(Content::to_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl From<String> for ToolResults {
    fn from(text: String) -> ToolResults {
        ToolResults::Text(text)
    }
}

/// One part of a tool's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// MIME type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// The image bytes in standard base64.
        data: String,
    },
    /// A JSON value.
    Json {
        /// The value.
        json: Value,
    },
}

impl Content {
    /// The part as text for a model.
    pub fn to_text(&self) -> String {
        match self {
            Content::Text { text } => text.clone(),
            // Where a request can carry only text (OpenAI's tool messages):
            // the model learns an image was there and left out.
            Content::Image { mime_type, data } => format!(
                "[{mime_type} image, about {} bytes: not shown, this request carries text only]",
                data.len() / 4 * 3
            ),
            Content::Json { json } => match Content::json_for_model(json) {
                std::borrow::Cow::Owned(Value::String(text)) => text,
                shown => shown.to_string(),
            },
        }
    }

    /// A JSON part's value as a model is shown it: an MCP embedded
    /// resource's binary blob replaced by what it was (the part itself
    /// keeps it, for callers that pass it on).
    pub fn json_for_model(json: &Value) -> std::borrow::Cow<'_, Value> {
        // An MCP text block kept whole for its annotations: its text.
        if json.get("type").and_then(Value::as_str) == Some("text")
            && let Some(text) = json.get("text").and_then(Value::as_str)
        {
            return std::borrow::Cow::Owned(Value::String(text.to_owned()));
        }
        match without_blob(json) {
            Some(described) => std::borrow::Cow::Owned(described),
            None => std::borrow::Cow::Borrowed(json),
        }
    }
}

/// An MCP embedded resource with a binary `blob`, the blob replaced by
/// what it was: a model reading text gets the resource's URI and type,
/// and why its bytes are not there. `None` for anything else.
fn without_blob(json: &Value) -> Option<Value> {
    if json.get("type").and_then(Value::as_str) != Some("resource") {
        return None;
    }
    let blob = json.get("resource")?.get("blob")?.as_str()?;
    let mime = json["resource"]
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("binary data");
    let mut described = json.clone();
    described["resource"]["blob"] = Value::String(format!(
        "[{mime}, about {} bytes: left out, this request carries text only]",
        blob.len() / 4 * 3
    ));
    Some(described)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn error_output_carries_code_message_and_details() {
        let mut details = Map::new();
        details.insert("available".into(), json!(["bash"]));
        let out = ToolOutput::error_with(ErrorCode::ToolNotFound, "no tool named `bsh`", details);
        assert!(out.is_error);
        assert_eq!(out.error_code, Some(ErrorCode::ToolNotFound));
        assert_eq!(
            out.results.structured(),
            Some(
                &json!({"error": "no tool named `bsh`", "error_code": "TOOL_NOT_FOUND", "available": ["bash"]})
            )
        );
    }

    #[test]
    fn a_resource_blob_is_described_to_a_model_and_kept_in_the_part() {
        let block = json!({"type": "resource", "resource": {"uri": "demo://b/1", "mimeType": "image/png", "blob": "AAAABBBB"}});
        let part = Content::Json {
            json: block.clone(),
        };
        let text = part.to_text();
        assert!(!text.contains("AAAABBBB"), "{text}");
        assert!(
            text.contains("image/png, about 6 bytes: left out"),
            "{text}"
        );
        assert!(text.contains("demo://b/1"), "{text}");
        assert_eq!(part, Content::Json { json: block });
        let annotated = json!({"type": "text", "text": "hi", "annotations": {"priority": 1.0}});
        assert_eq!(Content::Json { json: annotated }.to_text(), "hi");
        let plain = json!({"type": "resource", "resource": {"uri": "u", "text": "t"}});
        assert_eq!(
            Content::Json {
                json: plain.clone()
            }
            .to_text(),
            plain.to_string()
        );
    }

    #[test]
    fn results_serialise_as_string_or_typed_parts() {
        let text = ToolResults::Text("hi".into());
        assert_eq!(serde_json::to_value(&text).unwrap(), json!("hi"));
        let parts = ToolResults::Parts(vec![
            Content::Text { text: "a".into() },
            Content::Image {
                mime_type: "image/png".into(),
                data: "AAAA".into(),
            },
            Content::Json {
                json: json!({"k": 1}),
            },
        ]);
        let value = serde_json::to_value(&parts).unwrap();
        assert_eq!(
            value,
            json!([
                {"type": "text", "text": "a"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "json", "json": {"k": 1}},
            ])
        );
        assert_eq!(serde_json::from_value::<ToolResults>(value).unwrap(), parts);
        assert_eq!(
            parts.to_text(),
            "a\n[image/png image, about 3 bytes: not shown, this request carries text only]\n{\"k\":1}"
        );
        assert_eq!(parts.structured(), None);
    }
}
