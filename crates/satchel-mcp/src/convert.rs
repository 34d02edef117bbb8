//! Conversions between Satchel's tool model and MCP's wire types, both
//! ways: a [`ToolSpec`] is served as an MCP `Tool`, a [`ToolOutput`] as a
//! `CallToolResult`, and the reverse for tools imported from MCP servers.
//!
//! What lives here: pure functions, no I/O. The field names already match
//! (Satchel's spec uses MCP's), so each conversion is field by field.

use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, Tool as McpTool, ToolAnnotations as McpAnnotations,
};
use satchel_core::portable::{SchemaConsumer, Unportable, schema_for};
use satchel_core::{Content, ErrorCode, ToolAnnotations, ToolOutput, ToolResults, ToolSpec};
use serde_json::{Map, Value, json};

/// Which form of a tool's input schema a client is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedSchema {
    /// The schema as written (2020-12, conditions included), which the
    /// 2026-07-28 revision (SEP-2106) has servers preserve.
    AsWritten,
    /// The form every MCP client keeps: no combinator or condition at the
    /// root (Claude Code drops such a tool, Codex CLI empties its
    /// conditions); see [`satchel_core::portable`].
    Portable,
}

/// A Satchel spec as an MCP tool: name, title, description, `inputSchema`
/// in the `form` asked for, `outputSchema` (only when it describes an
/// object, as MCP requires) and annotations. Satchel's `capabilities` have
/// no MCP field and stay home. A tool whose input has no portable form
/// (its root accepts more than objects) is an error, with why.
pub fn to_mcp_tool(spec: &ToolSpec, form: ServedSchema) -> Result<McpTool, Unportable> {
    let schema = match form {
        ServedSchema::AsWritten => std::borrow::Cow::Borrowed(&spec.input_schema),
        ServedSchema::Portable => schema_for(&spec.input_schema, SchemaConsumer::Mcp)?,
    };
    let input_schema = match schema.into_owned() {
        Value::Object(object) => object,
        // The registry only accepts object schemas; this is a fallback.
        _ => object_schema(),
    };
    let mut tool = McpTool::new_with_raw(
        spec.name.clone(),
        Some(spec.description.clone().into()),
        Arc::new(input_schema),
    );
    if let Some(title) = &spec.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(Value::Object(schema)) = &spec.output_schema
        && schema.get("type").and_then(Value::as_str) == Some("object")
    {
        tool = tool.with_raw_output_schema(Arc::new(schema.clone()));
    }
    if spec.annotations != ToolAnnotations::default() {
        let a = &spec.annotations;
        tool = tool.with_annotations(McpAnnotations::from_raw(
            None,
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        ));
    }
    Ok(tool)
}

/// An MCP tool as a Satchel spec under the name `name` (imported tools are
/// renamed `server__tool`); the server's own name stays in the description
/// only through the caller.
pub fn from_mcp_tool(tool: &McpTool, name: &str) -> ToolSpec {
    let annotations = tool
        .annotations
        .as_ref()
        .map(|a| ToolAnnotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
            long_running_hint: None,
        })
        .unwrap_or_default();
    let title = tool
        .title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()));
    ToolSpec {
        name: name.to_owned(),
        title,
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: Value::Object(tool.input_schema.as_ref().clone()),
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object(schema.as_ref().clone())),
        annotations,
        capabilities: Default::default(),
    }
}

/// A tool output as an MCP result: every part of the results as a content
/// block (text as text, images as images, JSON as its compact text), the
/// note for the model as one more text block, the JSON results as
/// `structuredContent` when they are an object, and `isError`.
pub fn to_call_tool_result(output: &ToolOutput) -> CallToolResult {
    let mut content: Vec<ContentBlock> = match &output.results {
        ToolResults::Text(text) => vec![ContentBlock::text(text.clone())],
        ToolResults::Parts(parts) => parts.iter().map(content_block).collect(),
    };
    if content.is_empty() {
        content.push(ContentBlock::text(String::new()));
    }
    if let Some(note) = &output.response {
        content.push(ContentBlock::text(note.clone()));
    }
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output
        .results
        .structured()
        .filter(|value| value.is_object())
        .cloned();
    result
}

fn content_block(part: &Content) -> ContentBlock {
    match part {
        Content::Text { text } => ContentBlock::text(text.clone()),
        Content::Image { mime_type, data } => ContentBlock::image(data.clone(), mime_type.clone()),
        Content::Json { json } => {
            passed_block(json).unwrap_or_else(|| ContentBlock::text(json.to_string()))
        }
    }
}

/// An MCP result as a Satchel output, with `user_message` for the person.
///
/// When the server sent `structuredContent`, that value is the results
/// (MCP asks servers to repeat it as text, so nothing is lost), followed
/// by any image or other non-text block, and any text that is not that
/// repetition becomes the note for the model.
/// Otherwise each content block becomes a part. An `isError` result keeps
/// an `error_code` the server put in its structured content, if it is one
/// of Satchel's.
pub fn from_call_tool_result(result: &CallToolResult, user_message: String) -> ToolOutput {
    let is_error = result.is_error.unwrap_or(false);
    let parts: Vec<Content> = result.content.iter().map(content_part).collect();
    let (results, response) = match &result.structured_content {
        Some(value) => {
            let repeated = [value.to_string(), pretty(value)];
            let other_text: Vec<String> = parts
                .iter()
                .filter_map(|part| match part {
                    Content::Text { text } if !repeated.contains(&text.trim().to_owned()) => {
                        Some(text.clone())
                    }
                    _ => None,
                })
                .collect();
            let note = (!other_text.is_empty()).then(|| other_text.join("\n"));
            // Images and other blocks beside the structured value are kept.
            let mut kept: Vec<Content> = parts
                .into_iter()
                .filter(|part| !matches!(part, Content::Text { .. }))
                .collect();
            let results = if kept.is_empty() {
                ToolResults::json(value.clone())
            } else {
                kept.insert(
                    0,
                    Content::Json {
                        json: value.clone(),
                    },
                );
                ToolResults::Parts(kept)
            };
            (results, note)
        }
        None => match parts.as_slice() {
            [Content::Text { text }] => (ToolResults::Text(text.clone()), None),
            _ => (ToolResults::Parts(parts), None),
        },
    };
    let code = if is_error {
        result
            .structured_content
            .as_ref()
            .and_then(|value| value.get("error_code"))
            .and_then(Value::as_str)
            .and_then(ErrorCode::parse)
    } else {
        None
    };
    ToolOutput {
        results,
        response,
        user_message,
        is_error,
        error_code: code,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

pub(crate) fn content_part(block: &ContentBlock) -> Content {
    match block {
        // Text with annotations or `_meta` is kept whole, so they reach the
        // caller (a model is shown its text, see `Content::to_text`).
        ContentBlock::Text(text) if text.annotations.is_some() || text.meta.is_some() => {
            Content::Json {
                json: serde_json::to_value(block).unwrap_or(Value::Null),
            }
        }
        ContentBlock::Text(text) => Content::Text {
            text: text.text.clone(),
        },
        ContentBlock::Image(image) => Content::Image {
            mime_type: image.mime_type.clone(),
            data: image.data.clone(),
        },
        // No provider Satchel speaks takes audio in tool results: the model
        // is told what was left out rather than nothing.
        ContentBlock::Audio(audio) => Content::Text {
            text: format!(
                "[{} audio from the tool, about {} bytes: left out, models here take no audio]",
                audio.mime_type,
                audio.data.len() / 4 * 3
            ),
        },
        // Embedded resources (text and blob), resource links and any block
        // Satchel has no part for reach the caller as the server sent them,
        // annotations and `_meta` included (`mcp serve` sends them on as
        // the same blocks; a model is shown a blob's description, see
        // `Content::to_text`).
        _ => Content::Json {
            json: serde_json::to_value(block).unwrap_or(Value::Null),
        },
    }
}

/// An MCP content block kept whole in a JSON part (see [`content_part`]):
/// the block again, for `mcp serve` to pass on unchanged.
fn passed_block(json: &Value) -> Option<ContentBlock> {
    match json.get("type").and_then(Value::as_str) {
        Some("resource" | "resource_link") => serde_json::from_value(json.clone()).ok(),
        Some("text") if json.get("annotations").is_some() || json.get("_meta").is_some() => {
            serde_json::from_value(json.clone()).ok()
        }
        _ => None,
    }
}

fn object_schema() -> JsonObject {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::{Capabilities, Resource};

    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "bash".into(),
            title: Some("Bash".into()),
            description: "Run a command".into(),
            input_schema: json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "$defs": {"a": {}}, "additionalProperties": false}),
            output_schema: Some(
                json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            ),
            annotations: ToolAnnotations {
                read_only_hint: Some(false),
                destructive_hint: Some(true),
                ..ToolAnnotations::default()
            },
            capabilities: Capabilities {
                reads: vec![Resource::FILES],
                writes: vec![],
            },
        }
    }

    #[test]
    fn spec_maps_field_by_field_and_back() {
        let tool = to_mcp_tool(&spec(), ServedSchema::AsWritten).unwrap();
        let wire = serde_json::to_value(&tool).unwrap();
        assert_eq!(
            wire,
            json!({
                "name": "bash",
                "title": "Bash",
                "description": "Run a command",
                "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "$defs": {"a": {}}, "additionalProperties": false},
                "outputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "annotations": {"readOnlyHint": false, "destructiveHint": true},
            })
        );
        let back = from_mcp_tool(&tool, "srv__bash");
        assert_eq!(
            back,
            ToolSpec {
                name: "srv__bash".into(),
                capabilities: Capabilities::default(),
                ..spec()
            }
        );
    }

    #[test]
    fn output_schemas_that_are_not_objects_are_not_served() {
        let mut spec = spec();
        spec.output_schema = Some(json!({"type": "array"}));
        spec.annotations = ToolAnnotations::default();
        let wire =
            serde_json::to_value(to_mcp_tool(&spec, ServedSchema::Portable).unwrap()).unwrap();
        assert_eq!(wire.get("outputSchema"), None);
        assert_eq!(wire.get("annotations"), None);
    }

    #[test]
    fn outputs_become_text_plus_structured_content() {
        let output = ToolOutput::success(ToolResults::json(json!({"x": 1})), "ran")
            .with_response("output truncated");
        let wire = serde_json::to_value(to_call_tool_result(&output)).unwrap();
        assert_eq!(
            wire,
            json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": "{\"x\":1}"}, {"type": "text", "text": "output truncated"}],
                "structuredContent": {"x": 1},
                "isError": false,
            })
        );
        let error = ToolOutput::error(ErrorCode::ToolTimeout, "too slow");
        let result = to_call_tool_result(&error);
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.structured_content,
            Some(json!({"error": "too slow", "error_code": "TOOL_TIMEOUT"}))
        );
        let text = to_call_tool_result(&ToolOutput::success(
            ToolResults::Parts(vec![
                Content::Text { text: "a".into() },
                Content::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            ]),
            "ok",
        ));
        assert_eq!(text.structured_content, None);
        assert_eq!(
            serde_json::to_value(&text.content).unwrap(),
            json!([{"type": "text", "text": "a"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
        );
    }

    #[test]
    fn results_come_back_from_structured_content_or_blocks() {
        let output =
            ToolOutput::error(ErrorCode::InvalidParams, "bad").with_response("see the schema");
        let back = from_call_tool_result(&to_call_tool_result(&output), "bad".into());
        assert_eq!(back, output);

        let plain = CallToolResult::success(vec![ContentBlock::text("Echo: hi")]);
        assert_eq!(
            from_call_tool_result(&plain, "echoed".into()),
            ToolOutput::success(ToolResults::Text("Echo: hi".into()), "echoed")
        );
    }
}
