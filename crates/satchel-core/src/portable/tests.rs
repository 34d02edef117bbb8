//! One test per rule of the translation; the corpus of real schemas and
//! the "never stricter" property are in `tests/portable.rs`.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{SchemaConsumer, Unportable, condition_at, rule_violations, schema_for};

fn translated(schema: &Value, consumer: SchemaConsumer) -> Value {
    let out = schema_for(schema, consumer).unwrap().into_owned();
    assert_eq!(
        rule_violations(&out, consumer),
        Vec::<String>::new(),
        "{out:#}"
    );
    out
}

#[test]
fn a_portable_schema_is_sent_as_it_is() {
    let schema = json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]});
    for consumer in SchemaConsumer::ALL {
        assert!(matches!(
            schema_for(&schema, consumer).unwrap(),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}

#[test]
fn a_missing_root_type_is_object() {
    let out = translated(
        &json!({"properties": {"a": {"type": "string"}}}),
        SchemaConsumer::Anthropic,
    );
    assert_eq!(out["type"], "object");
    let out = translated(&json!({}), SchemaConsumer::Anthropic);
    assert_eq!(out, json!({"type": "object", "properties": {}}));
}

#[test]
fn a_root_of_another_type_is_unportable() {
    let error = schema_for(&json!({"type": "string"}), SchemaConsumer::Anthropic).unwrap_err();
    assert_eq!(
        error,
        Unportable(r#"its input schema's root type is "string", not object"#.into())
    );
    assert!(schema_for(&json!([1]), SchemaConsumer::Mcp).is_err());
}

#[test]
fn root_conditions_become_words_on_the_fields_they_require() {
    let schema = json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["store", "recall", "list"]},
            "content": {"type": "string", "description": "What to remember"},
            "query": {"type": "string"}
        },
        "required": ["action"],
        "allOf": [
            {"if": {"properties": {"action": {"const": "store"}}}, "then": {"required": ["content"]}},
            {"if": {"properties": {"action": {"const": "recall"}}}, "then": {"required": ["query"]}},
            {"if": {"properties": {"action": {"enum": ["store", "recall"]}}}, "then": {"required": ["query"]}}
        ]
    });
    let out = translated(&schema, SchemaConsumer::Anthropic);
    assert_eq!(out.get("allOf"), None);
    assert_eq!(out["required"], json!(["action"]));
    assert_eq!(
        out["properties"]["content"]["description"],
        "What to remember. Required when `action` is `store`."
    );
    assert_eq!(
        out["properties"]["query"]["description"],
        "Required when `action` is `recall`. Required when `action` is `store` or `recall`."
    );
}

#[test]
fn an_if_else_chain_is_folded_the_same_way() {
    let schema = json!({
        "type": "object",
        "properties": {"action": {"enum": ["a", "b"]}, "x": {}, "y": {}},
        "required": ["action"],
        "if": {"properties": {"action": {"const": "a"}}},
        "then": {"required": ["x"]},
        "else": {"if": {"properties": {"action": {"const": "b"}}}, "then": {"required": ["y"]}}
    });
    let out = translated(&schema, SchemaConsumer::Mcp);
    assert_eq!(
        out["properties"]["x"]["description"],
        "Required when `action` is `a`."
    );
    assert_eq!(
        out["properties"]["y"]["description"],
        "Required when `action` is `b`."
    );
    assert_eq!(out.get("if"), None);
}

#[test]
fn a_condition_of_another_shape_is_written_out_on_the_input() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "if": {"properties": {"n": {"minimum": 10}}},
        "then": {"required": ["m"]},
        "not": {"required": ["z"]}
    });
    let out = translated(&schema, SchemaConsumer::Anthropic);
    let text = out["description"].as_str().unwrap();
    assert!(text.contains(r#"When the input matches {"properties":{"n":{"minimum":10}}}, it must also match {"required":["m"]}."#), "{text}");
    assert!(
        text.contains(r#"The input must not match {"required":["z"]}."#),
        "{text}"
    );
}

#[test]
fn root_all_of_is_merged() {
    let schema = json!({
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}, "a": {"minLength": 2}}, "required": ["b"]}
        ]
    });
    let out = translated(&schema, SchemaConsumer::Anthropic);
    assert_eq!(out["required"], json!(["a", "b"]));
    assert_eq!(out["properties"]["b"], json!({"type": "integer"}));
    assert_eq!(
        out["properties"]["a"],
        json!({"allOf": [{"type": "string"}, {"minLength": 2}]})
    );
}

#[test]
fn requirement_only_alternatives_become_a_sentence() {
    let schema = json!({
        "type": "object",
        "properties": {"url": {"type": "string"}, "path": {"type": "string"}},
        "anyOf": [{"required": ["url"]}, {"required": ["path"]}]
    });
    let out = translated(&schema, SchemaConsumer::Anthropic);
    assert_eq!(out.get("anyOf"), None);
    assert_eq!(out["description"], "Give at least one of: `url`; `path`.");
    assert_eq!(out.get("required"), None);

    let one_of = json!({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    assert_eq!(
        translated(&one_of, SchemaConsumer::Mcp)["description"],
        "Give exactly one of: `a`; `b`."
    );
}

#[test]
fn a_tagged_union_is_merged_with_its_tag_as_an_enum() {
    // What zod's discriminatedUnion serialises to.
    let schema = json!({
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "file"}, "path": {"type": "string"}}, "required": ["kind", "path"], "additionalProperties": false},
            {"type": "object", "properties": {"kind": {"const": "url"}, "url": {"type": "string"}}, "required": ["kind", "url"], "additionalProperties": false}
        ]
    });
    let out = translated(&schema, SchemaConsumer::Anthropic);
    assert_eq!(out["type"], "object");
    assert_eq!(out["properties"]["kind"], json!({"enum": ["file", "url"]}));
    assert_eq!(out["required"], json!(["kind"]));
    assert_eq!(out["additionalProperties"], false);
    assert_eq!(
        out["properties"]["path"]["description"],
        "Required when `kind` is `file`."
    );
}

#[test]
fn untagged_alternatives_list_their_forms() {
    let schema = json!({
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["b"]}
        ]
    });
    let out = translated(&schema, SchemaConsumer::OpenAi);
    assert_eq!(
        out["properties"]["a"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    assert_eq!(
        out["description"],
        "Input takes one of these forms: (1) with `a`; (2) with `b`."
    );
}

#[test]
fn alternatives_that_accept_non_objects_are_unportable_unless_the_root_says_object() {
    let loose = json!({"anyOf": [{"type": "string"}, {"type": "object"}]});
    assert!(schema_for(&loose, SchemaConsumer::Anthropic).is_err());
    let typed = json!({"type": "object", "anyOf": [{"type": "string"}, {"required": ["a"]}]});
    let out = translated(&typed, SchemaConsumer::Anthropic);
    assert_eq!(out["description"], "Give at least one of: `a`.");
}

#[test]
fn a_root_ref_is_inlined() {
    let schema = json!({"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}});
    let out = translated(&schema, SchemaConsumer::Anthropic);
    assert_eq!(out["required"], json!(["q"]));
    assert_eq!(out.get("$ref"), None);
}

#[test]
fn openai_gets_items_on_every_array() {
    let schema = json!({"type": "object", "properties": {"tags": {"type": "array"}, "deep": {"type": "object", "properties": {"more": {"type": ["array", "null"]}}}}});
    assert_eq!(
        rule_violations(&schema, SchemaConsumer::Anthropic),
        Vec::<String>::new()
    );
    let out = translated(&schema, SchemaConsumer::OpenAi);
    assert_eq!(out["properties"]["tags"]["items"], json!({}));
    assert_eq!(
        out["properties"]["deep"]["properties"]["more"]["items"],
        json!({})
    );
}

#[test]
fn gemini_gets_its_subset() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "mode": {"const": "fast"},
            "level": {"enum": [1, 2, 3], "description": "How hard"},
            "note": {"type": ["string", "null"], "format": "uri"},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
            "count": {"type": "integer", "exclusiveMinimum": 0},
            "item": {"$ref": "#/$defs/Item"},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        },
        "required": ["mode", "ghost"],
        "additionalProperties": false,
        "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": false}}
    });
    let out = translated(&schema, SchemaConsumer::Gemini);
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["fast"]},
                "level": {"description": "How hard One of: `1`, `2`, `3`."},
                "note": {"type": "string", "nullable": true},
                "when": {"type": "string", "format": "date-time", "nullable": true},
                "count": {"type": "integer", "minimum": 0},
                "item": {"type": "object", "properties": {"id": {"type": "string"}}},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["mode"]
        })
    );
}

#[test]
fn conditions_are_named_by_the_path_a_validator_reports() {
    let schema = json!({
        "type": "object",
        "allOf": [{"if": {"properties": {"action": {"const": "store"}}}, "then": {"required": ["content"]}}],
        "if": {"properties": {"action": {"const": "a"}}},
        "then": {},
        "else": {"if": {"properties": {"action": {"enum": ["b", "c"]}}}, "then": {"required": ["y"]}, "else": {"required": ["z"]}}
    });
    assert_eq!(
        condition_at(&schema, "/allOf/0/then/required").as_deref(),
        Some("when `action` is `store`")
    );
    assert_eq!(
        condition_at(&schema, "/else/then/required").as_deref(),
        Some("when `action` is `b` or `c`")
    );
    assert_eq!(
        condition_at(&schema, "/else/else/required").as_deref(),
        Some("unless `action` is `b` or `c`")
    );
    assert_eq!(condition_at(&schema, "/properties/x/minimum"), None);
}

#[test]
fn consumers_are_named_for_the_command_line() {
    for consumer in SchemaConsumer::ALL {
        assert_eq!(SchemaConsumer::from_name(consumer.name()), Some(consumer));
    }
    assert_eq!(SchemaConsumer::from_name("cohere"), None);
}
