//! Rules applied at every depth, for the consumers that need them: OpenAI's
//! `items` on every array, and Gemini's OpenAPI 3.0 subset.
//!
//! Gemini's function declarations take a documented subset of OpenAPI 3.0's
//! Schema object (ai.google.dev, `Schema`): the keywords in
//! [`GEMINI_KEYWORDS`], one `type`, `nullable` instead of a type list,
//! string-only `enum`, and a few formats. Everything else is rewritten to an
//! equivalent (`const` to a one-value `enum`, `oneOf` to `anyOf`, a local
//! `$ref` inlined, `exclusiveMinimum` to `minimum`) or dropped, which only
//! ever makes the schema accept more.

use serde_json::{Map, Value, json};

use super::combine::resolve_ref;
use super::quoted;

/// The keywords of Gemini's `Schema` object.
pub(super) const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// The formats Gemini documents (`enum` and `date-time` for strings, the
/// sizes of integers and numbers).
pub(super) const GEMINI_FORMATS: &[&str] =
    &["enum", "date-time", "int32", "int64", "float", "double"];

/// How deep `$ref`s are inlined before a recursive schema is cut to `{}`.
const MAX_REF_DEPTH: usize = 8;

/// Gives every array schema an `items` (`{}`: anything), as OpenAI requires.
pub(super) fn give_arrays_items(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return;
    };
    let is_array = match node.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "array"),
        _ => false,
    };
    if is_array && !node.contains_key("items") {
        node.insert("items".into(), json!({}));
    }
    for (key, value) in node.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(children) = value {
                    children.values_mut().for_each(give_arrays_items);
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(children) = value {
                    children.iter_mut().for_each(give_arrays_items);
                }
            }
            "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains" => {
                give_arrays_items(value);
            }
            _ => {}
        }
    }
}

/// `schema` in Gemini's subset; local `$ref`s resolved against `defs`.
pub(super) fn gemini(schema: &Value, defs: &Value) -> Value {
    gemini_at(schema, defs, 0)
}

fn gemini_at(schema: &Value, defs: &Value, depth: usize) -> Value {
    let Value::Object(node) = schema else {
        // `true` (anything) and `false` (nothing): the looser is anything.
        return json!({});
    };
    let mut node = node.clone();
    if let Some(Value::String(reference)) = node.remove("$ref") {
        match resolve_ref(&reference, defs) {
            Some(Value::Object(target)) if depth < MAX_REF_DEPTH => {
                for (key, value) in target {
                    node.entry(key.clone()).or_insert_with(|| value.clone());
                }
                return gemini_at(&Value::Object(node), defs, depth + 1);
            }
            _ => {}
        }
    }
    let mut out = Map::new();
    let mut notes: Vec<String> = Vec::new();
    let mut nullable = false;

    match node.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            nullable = kinds.iter().any(|kind| kind == "null");
            let others: Vec<&Value> = kinds.iter().filter(|kind| *kind != "null").collect();
            match others[..] {
                [] => {}
                [kind] => {
                    out.insert("type".into(), kind.clone());
                }
                _ => {
                    let branches: Vec<Value> =
                        others.iter().map(|kind| json!({"type": kind})).collect();
                    out.insert("anyOf".into(), Value::Array(branches));
                }
            }
        }
        _ => {}
    }

    // Values: `const` as a one-value enum, enums of strings only.
    let mut values: Option<Vec<Value>> = match (node.get("const"), node.get("enum")) {
        (Some(value), _) => Some(vec![value.clone()]),
        (None, Some(Value::Array(values))) => Some(values.clone()),
        _ => None,
    };
    if let Some(list) = &mut values {
        if list.iter().any(Value::is_null) {
            nullable = true;
            list.retain(|value| !value.is_null());
        }
        if list.iter().all(Value::is_string) && !list.is_empty() {
            out.insert("enum".into(), Value::Array(list.clone()));
            out.entry("type").or_insert_with(|| json!("string"));
        } else if !list.is_empty() {
            let shown: Vec<String> = list.iter().map(quoted).collect();
            notes.push(format!("One of: {}.", shown.join(", ")));
        }
    }

    // Alternatives: `anyOf`/`oneOf` as `anyOf`, a null branch as `nullable`.
    let mut alternatives = Vec::new();
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            for branch in branches {
                if branch.get("type") == Some(&json!("null")) {
                    nullable = true;
                } else {
                    alternatives.push(gemini_at(branch, defs, depth + 1));
                }
            }
        }
    }
    if alternatives.iter().any(|branch| branch == &json!({})) {
        alternatives.clear();
    }
    match alternatives.len() {
        0 => {}
        1 => {
            if let Some(Value::Object(only)) = alternatives.pop() {
                for (key, value) in only {
                    out.entry(key).or_insert(value);
                }
            }
        }
        _ => {
            out.insert("anyOf".into(), Value::Array(alternatives));
        }
    }
    // `allOf`: its first branch only (looser than all of them together).
    if let Some(Value::Array(branches)) = node.get("allOf")
        && let Some(first) = branches.first()
        && let Value::Object(first) = gemini_at(first, defs, depth + 1)
    {
        for (key, value) in first {
            out.entry(key).or_insert(value);
        }
    }

    if let Some(Value::Object(properties)) = node.get("properties") {
        let converted: Map<String, Value> = properties
            .iter()
            .map(|(name, child)| (name.clone(), gemini_at(child, defs, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = node.get("required") {
            let kept: Vec<&Value> = required
                .iter()
                .filter(|name| {
                    name.as_str()
                        .is_some_and(|name| converted.contains_key(name))
                })
                .collect();
            if !kept.is_empty() {
                out.insert("required".into(), json!(kept));
            }
        }
        out.insert("properties".into(), Value::Object(converted));
    }
    match node.get("items") {
        Some(items @ Value::Object(_)) => {
            out.insert("items".into(), gemini_at(items, defs, depth + 1));
        }
        Some(_) | None if out.get("type") == Some(&json!("array")) => {
            out.insert("items".into(), json!({}));
        }
        _ => {}
    }
    if let Some(format) = node.get("format").and_then(Value::as_str)
        && GEMINI_FORMATS.contains(&format)
    {
        out.insert("format".into(), json!(format));
    }
    for key in [
        "title",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "default",
        "propertyOrdering",
        "example",
    ] {
        if let Some(value) = node.get(key) {
            out.entry(key).or_insert_with(|| value.clone());
        }
    }
    for (exclusive, inclusive) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(bound) = node.get(exclusive).filter(|bound| bound.is_number()) {
            out.entry(inclusive).or_insert_with(|| bound.clone());
        }
    }
    if nullable
        && ["type", "enum", "anyOf"]
            .iter()
            .any(|key| out.contains_key(*key))
    {
        out.insert("nullable".into(), json!(true));
    }
    let description = node
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut text = description.to_owned();
    for note in notes {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&note);
    }
    if !text.is_empty() {
        out.insert("description".into(), json!(text));
    }
    Value::Object(out)
}
