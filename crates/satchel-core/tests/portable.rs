//! The translation of tool schemas held to its promise on real schemas:
//! for every consumer, the translated schema keeps the consumer's rules,
//! compiles, and accepts every input the full schema accepts (looser,
//! never stricter).
//!
//! The corpus: every tool schema of the MCP servers in
//! `tests/data/mcp-tool-schemas.json` (captured from the real servers by
//! `scripts/capture-schema-corpus.sh`), Satchel's own action-based shapes,
//! and the shapes that break consumers (top-level `oneOf`/`anyOf`/`allOf`,
//! `$ref`/`$defs`, `if`/`then`, nullable unions, enums).

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use satchel_core::portable::{SchemaConsumer, rule_violations, schema_for};
use serde_json::{Map, Value, json};

/// The corpus: (where it comes from, the schema).
fn corpus() -> Vec<(String, Value)> {
    let captured: Value = serde_json::from_str(include_str!("data/mcp-tool-schemas.json")).unwrap();
    let mut all = Vec::new();
    for (server, tools) in captured["servers"].as_object().unwrap() {
        for tool in tools.as_array().unwrap() {
            all.push((
                format!("{server}/{}", tool["name"].as_str().unwrap()),
                tool["inputSchema"].clone(),
            ));
        }
    }
    for (name, schema) in shapes() {
        all.push((format!("shape/{name}"), schema));
    }
    all
}

/// The shapes that break consumers, as third parties write them.
fn shapes() -> Vec<(&'static str, Value)> {
    vec![
        (
            "satchel-memory-chain",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["store", "recall", "list", "forget"]},
                    "layer": {"type": "string", "enum": ["long", "short"]},
                    "content": {"type": "string", "minLength": 1},
                    "query": {"type": "string", "minLength": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "memory_id": {"type": "string", "minLength": 1}
                },
                "required": ["action"],
                "additionalProperties": false,
                "if": {"properties": {"action": {"const": "store"}}},
                "then": {"required": ["layer", "content"]},
                "else": {"if": {"properties": {"action": {"const": "recall"}}}, "then": {"required": ["query"]},
                         "else": {"if": {"properties": {"action": {"const": "forget"}}}, "then": {"required": ["memory_id"]}}}
            }),
        ),
        (
            "root-allOf-conditions",
            json!({
                "type": "object",
                "properties": {"action": {"enum": ["execute", "status"]}, "code": {"type": "string"}, "job_id": {"type": "string"}},
                "required": ["action"],
                "additionalProperties": false,
                "allOf": [
                    {"if": {"properties": {"action": {"const": "execute"}}}, "then": {"required": ["code"]}},
                    {"if": {"properties": {"action": {"const": "status"}}}, "then": {"required": ["job_id"]}}
                ]
            }),
        ),
        (
            "zod-discriminated-union",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"type": "string", "const": "file"}, "path": {"type": "string"}}, "required": ["kind", "path"], "additionalProperties": false},
                    {"type": "object", "properties": {"kind": {"type": "string", "const": "url"}, "url": {"type": "string"}, "depth": {"type": "integer"}}, "required": ["kind", "url"], "additionalProperties": false}
                ]
            }),
        ),
        (
            "at-least-one-field",
            json!({
                "type": "object",
                "required": ["project", "identifier"],
                "properties": {"project": {"type": "string"}, "identifier": {"type": "string"}, "title": {"type": "string"}, "priority": {"type": "integer"}},
                "anyOf": [{"required": ["title"]}, {"required": ["priority"]}]
            }),
        ),
        (
            "exactly-one-source",
            json!({
                "type": "object",
                "properties": {"yaml": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}, "dir": {"type": "string"}},
                "oneOf": [{"required": ["yaml"]}, {"required": ["files"]}, {"required": ["dir"]}]
            }),
        ),
        (
            "root-ref-defs",
            json!({
                "$ref": "#/$defs/Args",
                "$defs": {
                    "Args": {"type": "object", "properties": {"q": {"type": "string"}, "filter": {"$ref": "#/$defs/Filter"}}, "required": ["q"]},
                    "Filter": {"type": "object", "properties": {"lang": {"type": ["string", "null"]}, "since": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}}}
                }
            }),
        ),
        (
            "nullable-unions-and-enums",
            json!({
                "type": "object",
                "properties": {
                    "mode": {"const": "fast"},
                    "level": {"enum": [1, 2, 3]},
                    "color": {"enum": ["red", "green", null]},
                    "note": {"type": ["string", "null"]},
                    "tags": {"type": "array"},
                    "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                    "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    "meta": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "required": ["mode"],
                "additionalProperties": false
            }),
        ),
        (
            "allOf-of-refs",
            json!({
                "allOf": [{"$ref": "#/definitions/Base"}, {"type": "object", "properties": {"extra": {"type": "boolean"}}, "required": ["extra"]}],
                "definitions": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
            }),
        ),
        (
            "condition-with-constraints",
            json!({
                "type": "object",
                "properties": {"unit": {"enum": ["s", "ms"]}, "value": {"type": "number"}},
                "if": {"properties": {"unit": {"const": "s"}}, "required": ["unit"]},
                "then": {"properties": {"value": {"maximum": 600}}},
                "else": {"properties": {"value": {"maximum": 600000}}}
            }),
        ),
    ]
}

/// Candidate values for a schema, from its own words (const, enum,
/// default, examples) and its type; `$ref`s resolved against `document`.
fn candidates(schema: &Value, document: &Value, depth: usize) -> Vec<Value> {
    let Value::Object(node) = schema else {
        return vec![json!("x"), json!(1), Value::Null];
    };
    if depth > 4 {
        return vec![Value::Null, json!("x")];
    }
    if let Some(Value::String(reference)) = node.get("$ref")
        && let Some(target) = reference
            .strip_prefix('#')
            .and_then(|p| document.pointer(p))
    {
        return candidates(target, document, depth + 1);
    }
    let mut out = Vec::new();
    if let Some(value) = node.get("const") {
        out.push(value.clone());
    }
    if let Some(Value::Array(values)) = node.get("enum") {
        out.extend(values.iter().cloned());
    }
    for key in ["default", "examples"] {
        match node.get(key) {
            Some(Value::Array(values)) if key == "examples" => out.extend(values.iter().cloned()),
            Some(value) if key == "default" => out.push(value.clone()),
            _ => {}
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            for branch in branches {
                out.extend(candidates(branch, document, depth + 1));
            }
        }
    }
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ if out.is_empty() => vec!["string", "integer", "boolean", "null", "object"],
        _ => vec![],
    };
    for kind in types {
        match kind {
            "string" => out.extend([
                json!("x"),
                json!("2024-01-02T03:04:05Z"),
                json!("/tmp/a.txt"),
            ]),
            "integer" => out.extend([json!(1), json!(0), json!(42)]),
            "number" => out.extend([json!(0.5), json!(3)]),
            "boolean" => out.extend([json!(true), json!(false)]),
            "null" => out.push(Value::Null),
            "array" => {
                out.push(json!([]));
                if let Some(items) = node.get("items") {
                    let first = candidates(items, document, depth + 1).into_iter().next();
                    out.extend(first.map(|item| json!([item])));
                }
            }
            "object" => {
                let mut full = Map::new();
                if let Some(Value::Object(properties)) = node.get("properties") {
                    for (name, child) in properties {
                        if let Some(value) =
                            candidates(child, document, depth + 1).into_iter().next()
                        {
                            full.insert(name.clone(), value);
                        }
                    }
                }
                out.push(Value::Object(full));
                out.push(json!({}));
            }
            _ => {}
        }
    }
    out
}

/// Every property the root (and its alternatives) names, with candidates.
fn root_properties(schema: &Value) -> Vec<(String, Vec<Value>)> {
    let mut found: Vec<(String, Vec<Value>)> = Vec::new();
    let mut visit = |node: &Value| {
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(reference) => reference
                .strip_prefix('#')
                .and_then(|p| schema.pointer(p))
                .unwrap_or(node),
            None => node,
        };
        if let Some(Value::Object(properties)) = node.get("properties") {
            for (name, child) in properties {
                let values = candidates(child, schema, 0);
                match found.iter_mut().find(|(n, _)| n == name) {
                    Some((_, existing)) => existing.extend(values),
                    None => found.push((name.clone(), values)),
                }
            }
        }
    };
    visit(schema);
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            branches.iter().for_each(&mut visit);
        }
    }
    found
}

/// The input an index vector picks: for each property, leave it out (0)
/// or take its candidate number `i - 1`.
fn input_from(properties: &[(String, Vec<Value>)], picks: &[usize]) -> Value {
    let mut input = Map::new();
    for ((name, values), pick) in properties.iter().zip(picks) {
        if *pick > 0 && !values.is_empty() {
            input.insert(name.clone(), values[(pick - 1) % values.len()].clone());
        }
    }
    Value::Object(input)
}

/// Gemini's `nullable` read back as JSON Schema, so that a validator can
/// hold the Gemini form to the promise.
fn gemini_as_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(node) => {
            let mut out: Map<String, Value> = node
                .iter()
                .filter(|(key, _)| key.as_str() != "nullable")
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        "properties" => Value::Object(
                            value
                                .as_object()
                                .unwrap()
                                .iter()
                                .map(|(k, v)| (k.clone(), gemini_as_json_schema(v)))
                                .collect(),
                        ),
                        "items" => gemini_as_json_schema(value),
                        "anyOf" => Value::Array(
                            value
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(gemini_as_json_schema)
                                .collect(),
                        ),
                        _ => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect();
            if node.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::String(kind)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([kind, "null"]));
                }
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
                if let Some(Value::Array(branches)) = out.get_mut("anyOf") {
                    branches.push(json!({"type": "null"}));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn validator(schema: &Value, what: &str) -> jsonschema::Validator {
    jsonschema::validator_for(schema)
        .unwrap_or_else(|e| panic!("{what}: does not compile: {e}\n{schema:#}"))
}

#[test]
fn the_corpus_is_real() {
    let captured: Value = serde_json::from_str(include_str!("data/mcp-tool-schemas.json")).unwrap();
    let servers = captured["servers"].as_object().unwrap();
    assert!(servers.len() >= 5, "{:?}", servers.keys());
    let tools: usize = servers
        .values()
        .map(|tools| tools.as_array().unwrap().len())
        .sum();
    assert!(tools >= 40, "{tools} tools");
}

#[test]
fn every_translation_keeps_its_consumers_rules_and_compiles() {
    for (name, schema) in corpus() {
        for consumer in SchemaConsumer::ALL {
            let Ok(translated) = schema_for(&schema, consumer) else {
                panic!("{name} has no form for {consumer}");
            };
            assert_eq!(
                rule_violations(&translated, consumer),
                Vec::<String>::new(),
                "{name} for {consumer}: {translated:#}"
            );
            let as_json_schema = match consumer {
                SchemaConsumer::Gemini => gemini_as_json_schema(&translated),
                _ => translated.into_owned(),
            };
            validator(&as_json_schema, &name);
        }
    }
}

/// The promise: whatever the full schema accepts, every translation
/// accepts. Inputs come from each schema's own properties: each one left
/// out or given one of its candidate values, some chosen at random.
#[test]
fn a_translation_is_never_stricter_than_the_full_schema() {
    let mut with_valid_inputs = 0;
    let corpus = corpus();
    for (name, schema) in &corpus {
        let full = validator(schema, name);
        let forms: Vec<(SchemaConsumer, jsonschema::Validator)> = SchemaConsumer::ALL
            .into_iter()
            .map(|consumer| {
                let translated = schema_for(schema, consumer).unwrap();
                let as_json_schema = match consumer {
                    SchemaConsumer::Gemini => gemini_as_json_schema(&translated),
                    _ => translated.into_owned(),
                };
                (consumer, validator(&as_json_schema, name))
            })
            .collect();
        let properties = root_properties(schema);
        let accepted = std::cell::Cell::new(0usize);
        let check = |input: &Value| {
            if !full.is_valid(input) {
                return Ok(());
            }
            accepted.set(accepted.get() + 1);
            for (consumer, form) in &forms {
                if !form.is_valid(input) {
                    return Err(format!(
                        "{name}: {consumer} refuses {input} which the full schema accepts"
                    ));
                }
            }
            Ok(())
        };
        // Each property alone with each value, then all of them together.
        for (i, (_, values)) in properties.iter().enumerate() {
            for v in 1..=values.len() {
                let mut picks = vec![0; properties.len()];
                picks[i] = v;
                check(&input_from(&properties, &picks)).unwrap();
                let mut all = vec![1; properties.len()];
                all[i] = v;
                check(&input_from(&properties, &all)).unwrap();
            }
        }
        check(&json!({})).unwrap();
        let mut runner = TestRunner::new(Config {
            cases: 192,
            failure_persistence: None,
            ..Config::default()
        });
        let size = properties.len().max(1);
        let result = runner.run(&proptest::collection::vec(0usize..6, size), |picks| {
            check(&input_from(&properties, &picks)).map_err(TestCaseError::fail)
        });
        if let Err(error) = result {
            panic!("{error}");
        }
        if accepted.get() > 0 {
            with_valid_inputs += 1;
        }
    }
    // The promise was tested, not assumed: nearly every schema met inputs
    // it accepts.
    assert!(
        with_valid_inputs * 10 >= corpus.len() * 9,
        "only {with_valid_inputs} of {} schemas met an input they accept",
        corpus.len()
    );
}

/// The validator is still the full schema: what it refuses, the model's
/// translation may accept, but the call is still refused (the rule the
/// descriptions put in words is checked).
#[test]
fn the_looser_form_is_only_what_the_model_is_shown() {
    let schema = &shapes()[0].1;
    let full = validator(schema, "memory");
    let store_without_content = json!({"action": "store", "layer": "long"});
    assert!(!full.is_valid(&store_without_content));
    let sent = schema_for(schema, SchemaConsumer::Anthropic).unwrap();
    assert!(validator(&sent, "sent").is_valid(&store_without_content));
    assert_eq!(
        sent["properties"]["content"]["description"],
        "Required when `action` is `store`."
    );
}
