//! The document a tool prints for `--schema`, turned into a [`ToolSpec`].

use std::time::Duration;

use satchel_core::{Capabilities, ToolAnnotations, ToolSpec};
use serde::Deserialize;
use serde_json::Value;

use crate::registry::compile_schema;

/// The `--schema` document as tools write it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaDocument {
    name: Option<String>,
    title: Option<String>,
    #[serde(default)]
    description: String,
    input_schema: Option<Value>,
    /// ikigai's (and OpenAI's) name for `inputSchema`.
    parameters: Option<Value>,
    output_schema: Option<Value>,
    #[serde(default)]
    annotations: ToolAnnotations,
    #[serde(default)]
    capabilities: Capabilities,
    /// The tool's own default timeout, in seconds.
    timeout: Option<f64>,
}

/// A parsed `--schema` document: the spec under the tool's file-derived
/// name, and the tool's own default timeout if it gave one.
pub(crate) struct ParsedSchema {
    pub(crate) spec: ToolSpec,
    pub(crate) timeout: Option<Duration>,
}

/// Parses `--schema` output for the tool named `name` (from its file name,
/// which wins over any `name` in the document). The input schema must be a
/// valid JSON Schema for an object, and so must the output schema if given.
pub fn parse_schema_document(name: &str, text: &str) -> Result<ToolSpec, String> {
    parse(name, text).map(|parsed| parsed.spec)
}

pub(crate) fn parse(name: &str, text: &str) -> Result<ParsedSchema, String> {
    let document: SchemaDocument = serde_json::from_str(text.trim()).map_err(|error| {
        let (head, _) = satchel_core::text::char_prefix(text.trim(), 120);
        format!("`--schema` did not print a JSON object ({error}); it printed: {head:?}")
    })?;
    if let Some(declared) = &document.name
        && declared != name
    {
        tracing::debug!(
            file_name = name,
            declared,
            "tool declares another name; the file name wins"
        );
    }
    let input_schema = match (document.input_schema, document.parameters) {
        (Some(schema), _) | (None, Some(schema)) => schema,
        (None, None) => return Err("the schema has neither `inputSchema` nor `parameters`".into()),
    };
    compile_schema(&input_schema).map_err(|reason| format!("invalid input schema: {reason}"))?;
    if let Some(output) = &document.output_schema {
        compile_schema(output).map_err(|reason| format!("invalid output schema: {reason}"))?;
    }
    let timeout = match document.timeout {
        Some(secs) if secs.is_finite() && secs > 0.0 => {
            Some(Duration::from_secs_f64(secs.min(24.0 * 3600.0)))
        }
        Some(secs) => {
            return Err(format!(
                "`timeout` must be a positive number of seconds, not {secs}"
            ));
        }
        None => None,
    };
    Ok(ParsedSchema {
        spec: ToolSpec {
            name: name.to_owned(),
            title: document.title,
            description: document.description,
            input_schema,
            output_schema: document.output_schema,
            annotations: document.annotations,
            capabilities: document.capabilities,
        },
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn ikigai_style_parameters_are_accepted() {
        let text = r#"{"name": "file_read", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}"#;
        let spec = parse_schema_document("file_read", text).unwrap();
        assert_eq!(spec.name, "file_read");
        assert_eq!(spec.description, "Read a file");
        assert_eq!(spec.input_schema["required"], json!(["file_path"]));
    }

    #[test]
    fn full_mcp_style_document_with_timeout() {
        let text = r#"{"title": "Weather", "description": "d", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true},
            "capabilities": {"reads": ["internet"]}, "timeout": 5}"#;
        let parsed = parse("weather", text).unwrap();
        assert_eq!(parsed.spec.annotations.read_only_hint, Some(true));
        assert_eq!(parsed.spec.capabilities.reads[0].as_str(), "internet");
        assert_eq!(parsed.timeout, Some(Duration::from_secs(5)));
    }

    #[test]
    fn broken_documents_say_why() {
        let cases = [
            ("not json", "`--schema` did not print a JSON object"),
            ("[1, 2]", "`--schema` did not print a JSON object"),
            (
                r#"{"description": "x"}"#,
                "neither `inputSchema` nor `parameters`",
            ),
            (
                r#"{"inputSchema": {"type": "string"}}"#,
                "invalid input schema: the schema's type must be \"object\"",
            ),
            (
                r#"{"inputSchema": {"type": "object", "properties": {"a": {"type": 7}}}}"#,
                "invalid input schema",
            ),
            (
                r#"{"inputSchema": {"type": "object"}, "outputSchema": 3}"#,
                "invalid output schema",
            ),
            (
                r#"{"inputSchema": {"type": "object"}, "timeout": -1}"#,
                "`timeout` must be a positive",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_schema_document("t", text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
