//! The compact presentation of tools for a system prompt
//! ([`render_tools`]), generated from each [`ToolSpec`]:
//!
//! ```text
//! ### bash
//! Run a bash command non-interactively: no stdin, no terminal, so prompts ...
//! Parameters:
//! - `command` (string, required): The bash command to execute
//! - `timeout` (integer, optional, default: 30): Command timeout in seconds
//! Returns: `stdout`, `stderr`, `exit_code`, `truncated`, ...
//! ```
//!
//! Types are written compactly: `"web" | "news"` for an enum or a const,
//! `integer | null` for a list of types or `anyOf`/`oneOf`, `array of
//! string`, `{title: string, date?: string}` for an object (optional
//! properties marked `?`, nested at most [`INLINE_DEPTH`] deep, deeper ones
//! are `object`), local `$ref`s (`#/...`) followed. Bounds (`minimum`,
//! `minLength`...), formats and conditional requirements (`allOf`/`if`) are
//! left out: the description should say what matters, and validation
//! tells the model the rest on its first mistake. The output is
//! deterministic: properties in the schema's order, nothing else varies.

use satchel_core::ToolSpec;
use serde_json::{Map, Value};

/// Object types are spelled out inline this many levels deep.
pub const INLINE_DEPTH: usize = 2;

/// How `$ref` chains are followed at most (a loop in a schema stops here).
const MAX_REFS: usize = 8;

/// The instruction that follows the tools: how to call them and how
/// results come back.
pub const CALL_INSTRUCTION: &str = "To call tools, reply with a JSON object \
{\"reasoning\": \"...\", \"tool_calls\": [{\"tool\": \"NAME\", \"params\": {...}}]}; \
results come back as {\"tool\": \"NAME\", \"result\": {...}}. \
A reply without tool_calls is your final answer.";

/// Every tool in the compact shape, then [`CALL_INSTRUCTION`]: the text a
/// system prompt carries in prompted mode.
pub fn render_tools(tools: &[ToolSpec]) -> String {
    let mut out = String::from("## Tools\n\n");
    for tool in tools {
        out.push_str(&render_tool(tool));
        out.push('\n');
    }
    out.push_str(CALL_INSTRUCTION);
    out.push('\n');
    out
}

/// One tool in the compact shape: `### name`, the description, its
/// parameters and what it returns; ends with a newline.
pub fn render_tool(spec: &ToolSpec) -> String {
    let mut out = format!("### {}\n", spec.name);
    let description = spec.description.trim();
    if !description.is_empty() {
        out.push_str(description);
        out.push('\n');
    }
    let root = &spec.input_schema;
    let input = resolve(root, root);
    let properties = input
        .get("properties")
        .and_then(Value::as_object)
        .filter(|properties| !properties.is_empty());
    match properties {
        None => out.push_str("Parameters: none\n"),
        Some(properties) => {
            out.push_str("Parameters:\n");
            let required = required(input);
            for (name, schema) in properties {
                out.push_str(&parameter(
                    root,
                    name,
                    schema,
                    required.contains(&name.as_str()),
                ));
            }
        }
    }
    if let Some(returns) = spec.output_schema.as_ref().and_then(returns) {
        out.push_str("Returns: ");
        out.push_str(&returns);
        out.push('\n');
    }
    out
}

/// `- `name` (type, required|optional, default: D): description`.
fn parameter(root: &Value, name: &str, schema: &Value, required: bool) -> String {
    let schema = resolve(root, schema);
    let mut line = format!(
        "- `{name}` ({}, {}",
        type_text(root, schema, 0),
        if required { "required" } else { "optional" }
    );
    if let Some(default) = schema.get("default") {
        line.push_str(", default: ");
        line.push_str(&default.to_string());
    }
    line.push(')');
    if let Some(description) = description(schema) {
        line.push_str(": ");
        line.push_str(&description);
    }
    line.push('\n');
    line
}

/// The `Returns:` text: the properties of an object (objects and arrays of
/// objects with their fields), else the type; `None` when it says nothing.
fn returns(schema: &Value) -> Option<String> {
    let schema = resolve(schema, schema);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        let text = type_text(schema, schema, 0);
        return (text != "any" && text != "object").then_some(text);
    };
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let property = resolve(schema, property);
            let items = property.get("items").map(|items| resolve(schema, items));
            match (fields_of(property), items.and_then(fields_of)) {
                (Some(fields), _) => format!("`{name}` {{{fields}}}"),
                (None, Some(fields)) => format!("`{name}` (array of {{{fields}}})"),
                (None, None) => format!("`{name}`"),
            }
        })
        .collect();
    (!fields.is_empty()).then(|| fields.join(", "))
}

/// `a, b, c` for an object schema with properties.
fn fields_of(schema: &Value) -> Option<String> {
    let properties = schema.get("properties")?.as_object()?;
    (!properties.is_empty()).then(|| {
        properties
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// A schema's type, written compactly (see the module header).
fn type_text(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = resolve(root, schema);
    let Some(object) = schema.as_object() else {
        return "any".into();
    };
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = object.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = object.get(key).and_then(Value::as_array) {
            return union(options.iter().map(|option| type_text(root, option, depth)));
        }
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ if object.contains_key("properties") => vec!["object"],
        _ if object.contains_key("items") => vec!["array"],
        _ => Vec::new(),
    };
    if types.is_empty() {
        return "any".into();
    }
    union(types.into_iter().map(|name| match name {
        "array" => match object.get("items") {
            Some(items) => {
                let item = type_text(root, items, depth + 1);
                if item.contains(" | ") {
                    format!("array of ({item})")
                } else {
                    format!("array of {item}")
                }
            }
            None => "array".into(),
        },
        "object" => inline_object(root, object, depth).unwrap_or_else(|| "object".into()),
        other => other.into(),
    }))
}

/// `{a: string, b?: integer}`, when the object has properties and is
/// shallow enough.
fn inline_object(root: &Value, object: &Map<String, Value>, depth: usize) -> Option<String> {
    if depth >= INLINE_DEPTH {
        return None;
    }
    let properties = object.get("properties")?.as_object()?;
    if properties.is_empty() {
        return None;
    }
    let required = required_of(object);
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, schema)| {
            let mark = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{mark}: {}", type_text(root, schema, depth + 1))
        })
        .collect();
    Some(format!("{{{}}}", fields.join(", ")))
}

fn union(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for part in parts {
        if !seen.contains(&part) {
            seen.push(part);
        }
    }
    seen.join(" | ")
}

fn required(schema: &Value) -> Vec<&str> {
    schema.as_object().map(required_of).unwrap_or_default()
}

fn required_of(object: &Map<String, Value>) -> Vec<&str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A description on one line (runs of whitespace become one space).
fn description(schema: &Value) -> Option<String> {
    let text = schema.get("description")?.as_str()?;
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then_some(line)
}

/// `schema`, or what its local `$ref` (`#/...`) points to in `root`.
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_REFS {
        let Some(pointer) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.strip_prefix('#'))
        else {
            break;
        };
        match root.pointer(pointer) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn spec(name: &str, description: &str, input: Value, output: Option<Value>) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: input,
            output_schema: output,
            annotations: Default::default(),
            capabilities: Default::default(),
        }
    }

    #[test]
    fn the_issue_example_renders_as_given() {
        let bash = spec(
            "bash",
            "Execute bash commands with output capture and error handling.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "description": "The bash command to execute"},
                    "timeout": {"type": "integer", "minimum": 1, "default": 30, "description": "Command timeout in seconds"}
                },
                "required": ["command"]
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "stdout": {"type": "string"}, "stderr": {"type": "string"},
                    "exit_code": {"type": ["integer", "null"]}, "truncated": {"type": "boolean"}
                }
            })),
        );
        assert_eq!(
            render_tool(&bash),
            "### bash\n\
             Execute bash commands with output capture and error handling.\n\
             Parameters:\n\
             - `command` (string, required): The bash command to execute\n\
             - `timeout` (integer, optional, default: 30): Command timeout in seconds\n\
             Returns: `stdout`, `stderr`, `exit_code`, `truncated`\n"
        );
    }

    #[test]
    fn enums_arrays_nested_objects_and_refs_are_compact() {
        let tool = spec(
            "deploy",
            "  Deploy a service.\n",
            json!({
                "type": "object",
                "$defs": {"env": {"type": "string", "enum": ["staging", "production"]}},
                "properties": {
                    "target": {"$ref": "#/$defs/env"},
                    "mode": {"const": "fast"},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels,\n  one per item"},
                    "ports": {"type": "array", "items": {"type": ["integer", "string"]}},
                    "limits": {
                        "type": "object",
                        "properties": {
                            "cpu": {"type": "number"},
                            "memory": {"type": "object", "properties": {"max": {"type": "integer"}, "unit": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["max"]},
                            "deep": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}}
                        },
                        "required": ["cpu"]
                    },
                    "meta": {"type": "object"},
                    "anything": {},
                    "dry_run": {"type": "boolean", "default": false}
                },
                "required": ["target", "tags"]
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "checks": {"type": "array", "items": {"type": "object", "properties": {"name": {}, "ok": {}}}},
                    "timing": {"type": "object", "properties": {"total_ms": {}}}
                }
            })),
        );
        assert_eq!(
            render_tool(&tool),
            "### deploy\n\
             Deploy a service.\n\
             Parameters:\n\
             - `target` (\"staging\" | \"production\", required)\n\
             - `mode` (\"fast\", optional)\n\
             - `tags` (array of string, required): Labels, one per item\n\
             - `ports` (array of (integer | string), optional)\n\
             - `limits` ({cpu: number, memory?: {max: integer, unit?: string | null}, deep?: {a?: object}}, optional)\n\
             - `meta` (object, optional)\n\
             - `anything` (any, optional)\n\
             - `dry_run` (boolean, optional, default: false)\n\
             Returns: `url`, `checks` (array of {name, ok}), `timing` {total_ms}\n"
        );
    }

    #[test]
    fn no_parameters_and_no_output_schema() {
        let tool = spec("now", "", json!({"type": "object", "properties": {}}), None);
        assert_eq!(render_tool(&tool), "### now\nParameters: none\n");
        let text = spec(
            "echo",
            "Echo.",
            json!({"type": "object"}),
            Some(json!({"type": "string"})),
        );
        assert_eq!(
            render_tool(&text),
            "### echo\nEcho.\nParameters: none\nReturns: string\n"
        );
        let opaque = spec("x", "X.", json!({}), Some(json!({"type": "object"})));
        assert_eq!(render_tool(&opaque), "### x\nX.\nParameters: none\n");
    }

    #[test]
    fn a_ref_loop_stops() {
        let tool = spec(
            "loop",
            "L.",
            json!({"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}),
            None,
        );
        assert_eq!(
            render_tool(&tool),
            "### loop\nL.\nParameters:\n- `a` (any, optional)\n"
        );
    }

    #[test]
    fn the_whole_prompt_ends_with_the_instruction_and_is_deterministic() {
        let tools = [
            spec(
                "a",
                "First.",
                json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}),
                None,
            ),
            spec("b", "Second.", json!({"type": "object"}), None),
        ];
        let text = render_tools(&tools);
        assert_eq!(
            text,
            format!(
                "## Tools\n\n### a\nFirst.\nParameters:\n- `x` (string, required)\n\n### b\nSecond.\nParameters: none\n\n{CALL_INSTRUCTION}\n"
            )
        );
        assert_eq!(render_tools(&tools), text);
    }
}
