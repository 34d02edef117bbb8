//! What each consumer refuses or mangles, as a checker: the empty list
//! means the schema can be sent as it is. [`schema_for`](super::schema_for)
//! uses it to skip the copy, and the tests hold every translation to it.

use serde_json::{Map, Value};

use super::SchemaConsumer;
use super::subset::{GEMINI_FORMATS, GEMINI_KEYWORDS};

/// The rules `schema` breaks for `consumer`, each in words with where.
pub fn rule_violations(schema: &Value, consumer: SchemaConsumer) -> Vec<String> {
    let mut found = Vec::new();
    let Value::Object(root) = schema else {
        found.push("the input schema is not an object schema".to_owned());
        return found;
    };
    root_rules(root, &mut found);
    match consumer {
        SchemaConsumer::OpenAi => walk(schema, "", &mut |node, path| {
            if says_array(node) && !node.contains_key("items") {
                found.push(format!(
                    "an array schema without `items` at {}",
                    shown(path)
                ));
            }
        }),
        SchemaConsumer::Gemini => walk(schema, "", &mut |node, path| {
            gemini_rules(node, path, &mut found)
        }),
        SchemaConsumer::Anthropic | SchemaConsumer::Mcp => {}
    }
    found
}

/// The root rules every consumer shares: an object schema, typed `object`,
/// and no combinator or condition there (Anthropic refuses the first, Codex
/// empties the second).
fn root_rules(root: &Map<String, Value>, found: &mut Vec<String>) {
    if root.get("type").and_then(Value::as_str) != Some("object") {
        found.push("the root's `type` is not `object`".to_owned());
    }
    for key in [
        "oneOf", "allOf", "anyOf", "$ref", "if", "then", "else", "not",
    ] {
        if root.contains_key(key) {
            found.push(format!("`{key}` at the root"));
        }
    }
}

fn says_array(node: &Map<String, Value>) -> bool {
    match node.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "array"),
        _ => false,
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "the root" } else { path }
}

fn gemini_rules(node: &Map<String, Value>, path: &str, found: &mut Vec<String>) {
    for key in node.keys() {
        if !GEMINI_KEYWORDS.contains(&key.as_str()) {
            found.push(format!(
                "`{key}` at {} is outside Gemini's subset",
                shown(path)
            ));
        }
    }
    if node.get("type").is_some_and(|kind| !kind.is_string()) {
        found.push(format!("a list of types at {}", shown(path)));
    }
    if let Some(Value::Array(values)) = node.get("enum")
        && values.iter().any(|value| !value.is_string())
    {
        found.push(format!(
            "an enum of values that are not strings at {}",
            shown(path)
        ));
    }
    if let Some(format) = node.get("format").and_then(Value::as_str)
        && !GEMINI_FORMATS.contains(&format)
    {
        found.push(format!("the format `{format}` at {}", shown(path)));
    }
    if let (Some(Value::Array(required)), properties) =
        (node.get("required"), node.get("properties"))
    {
        for name in required.iter().filter_map(Value::as_str) {
            if properties.and_then(|p| p.get(name)).is_none() {
                found.push(format!(
                    "`{name}` required but not a property at {}",
                    shown(path)
                ));
            }
        }
    }
}

/// Calls `visit` on every object subschema of `schema`, with its JSON
/// Pointer (the root's is empty).
pub(super) fn walk(schema: &Value, path: &str, visit: &mut dyn FnMut(&Map<String, Value>, &str)) {
    let Value::Object(node) = schema else {
        return;
    };
    visit(node, path);
    for (key, value) in node {
        let here = format!("{path}/{key}");
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(children) = value {
                    for (name, child) in children {
                        walk(child, &format!("{here}/{name}"), visit);
                    }
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(children) = value {
                    for (i, child) in children.iter().enumerate() {
                        walk(child, &format!("{here}/{i}"), visit);
                    }
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems" => match value {
                Value::Array(children) => {
                    for (i, child) in children.iter().enumerate() {
                        walk(child, &format!("{here}/{i}"), visit);
                    }
                }
                child => walk(child, &here, visit),
            },
            _ => {}
        }
    }
}
