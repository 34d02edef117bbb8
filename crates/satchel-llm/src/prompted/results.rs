//! Tool results going back to a model in prompted mode
//! ([`format_results`]): `{"tool": "NAME", "result": ...}` for each call,
//! `{"tool": "NAME", "error": {...}}` for a failed one, one line per call,
//! several calls as a JSON array in the order they were asked for.
//!
//! Results that are JSON (a JSON part, or text that parses as an object or
//! an array) are embedded as JSON, other text as a string, images as their
//! one-line placeholder. A tool's `response` note travels as `"note"`. The
//! text goes into the next user message; the feedback block and any
//! truncation are the loop's business.

use satchel_core::{Content, ToolOutput, ToolResults};
use serde_json::{Map, Value};

/// One call's outcome, as the model will read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromptedResult<'a> {
    /// The tool's name; `None` for a reply whose call object could not be
    /// read (written as `"tool": null`).
    pub tool: Option<&'a str>,
    /// What the model gets back.
    pub results: &'a ToolResults,
    /// The tool's note on the results, if any.
    pub response: Option<&'a str>,
    /// True when the call failed: the results go under `"error"`.
    pub is_error: bool,
}

impl<'a> PromptedResult<'a> {
    /// The model's view of `output`, a call of `tool`.
    pub fn new(tool: Option<&'a str>, output: &'a ToolOutput) -> PromptedResult<'a> {
        PromptedResult {
            tool,
            results: &output.results,
            response: output.response.as_deref(),
            is_error: output.is_error,
        }
    }
}

/// The text that carries `results` back to the model: one object for one
/// call, a JSON array (one object per line) for several. Deterministic.
pub fn format_results(results: &[PromptedResult<'_>]) -> String {
    let lines: Vec<String> = results.iter().map(entry).collect();
    match lines.as_slice() {
        [] => "[]".into(),
        [one] => one.clone(),
        _ => format!("[\n{}\n]", lines.join(",\n")),
    }
}

fn entry(result: &PromptedResult<'_>) -> String {
    let mut map = Map::new();
    map.insert(
        "tool".into(),
        result
            .tool
            .map_or(Value::Null, |tool| Value::String(tool.into())),
    );
    let key = if result.is_error { "error" } else { "result" };
    map.insert(key.into(), value_of(result.results));
    if let Some(note) = result.response {
        map.insert("note".into(), Value::String(note.into()));
    }
    Value::Object(map).to_string()
}

/// The results as one JSON value.
fn value_of(results: &ToolResults) -> Value {
    match results {
        ToolResults::Text(text) => text_value(text),
        ToolResults::Parts(parts) => {
            let mut values: Vec<Value> = parts.iter().map(part_value).collect();
            if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            }
        }
    }
}

fn part_value(part: &Content) -> Value {
    match part {
        Content::Text { text } => text_value(text),
        Content::Json { json } => Content::json_for_model(json).into_owned(),
        Content::Image { .. } => Value::String(part.to_text()),
    }
}

/// Text that is a JSON object or array is embedded as JSON.
fn text_value(text: &str) -> Value {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '['])
        && let Ok(value) = serde_json::from_str::<Value>(text)
    {
        return value;
    }
    Value::String(text.into())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::ErrorCode;
    use serde_json::json;

    use super::*;

    #[test]
    fn one_result_is_one_object() {
        let output = ToolOutput::success(
            ToolResults::json(json!({"stdout": "a\n", "exit_code": 0})),
            "ran ls",
        );
        assert_eq!(
            format_results(&[PromptedResult::new(Some("bash"), &output)]),
            r#"{"tool":"bash","result":{"stdout":"a\n","exit_code":0}}"#
        );
    }

    #[test]
    fn several_results_are_an_array_in_order_with_errors_and_notes() {
        let ok = ToolOutput::success(ToolResults::Text("{\"n\": 3}".into()), "")
            .with_response("output truncated; full text at /tmp/x");
        let failed = ToolOutput::error(ErrorCode::ToolNotFound, "no tool named `bsh`");
        let plain = ToolOutput::success(ToolResults::Text("just text".into()), "");
        let parts = ToolOutput::success(
            ToolResults::Parts(vec![
                Content::Text {
                    text: "caption".into(),
                },
                Content::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            ]),
            "",
        );
        let text = format_results(&[
            PromptedResult::new(Some("bash"), &ok),
            PromptedResult::new(Some("bsh"), &failed),
            PromptedResult::new(None, &failed),
            PromptedResult::new(Some("echo"), &plain),
            PromptedResult::new(Some("shot"), &parts),
        ]);
        let image = Content::Image {
            mime_type: "image/png".into(),
            data: "AAAA".into(),
        }
        .to_text();
        assert_eq!(
            text,
            format!(
                "[\n\
                 {{\"tool\":\"bash\",\"result\":{{\"n\":3}},\"note\":\"output truncated; full text at /tmp/x\"}},\n\
                 {{\"tool\":\"bsh\",\"error\":{{\"error\":\"no tool named `bsh`\",\"error_code\":\"TOOL_NOT_FOUND\"}}}},\n\
                 {{\"tool\":null,\"error\":{{\"error\":\"no tool named `bsh`\",\"error_code\":\"TOOL_NOT_FOUND\"}}}},\n\
                 {{\"tool\":\"echo\",\"result\":\"just text\"}},\n\
                 {{\"tool\":\"shot\",\"result\":[\"caption\",{}]}}\n\
                 ]",
                serde_json::to_string(&image).unwrap()
            )
        );
        // Every line but the brackets is one JSON object; the whole is one array.
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.as_array().map(Vec::len), Some(5));
    }
}
