//! Constrained replies: the JSON Schema every prompted-mode reply must
//! follow when the server can enforce one (`llm.constrainedReplies`), so a
//! small local model's reply always parses.
//!
//! A reply is either the final answer, `{"answer": "..."}`, or
//! `{"tool_calls": [{"tool": NAME, "params": {...}}, ...]}` where each
//! entry names a known tool and its `params` follow that tool's own input
//! schema. What does not live here: how the schema is written into a
//! request (the providers, by [`ReplyFormat`](crate::ReplyFormat)) and
//! reading the reply ([`parse_reply`](super::parse_reply), which knows the
//! `answer` object).

use satchel_core::ToolSpec;
use serde_json::{Value, json};

/// Added to the tools' instruction when replies are constrained: the shape
/// of a final answer, which unconstrained replies write as prose.
pub const ANSWER_INSTRUCTION: &str = "Every reply is one JSON object: the tool_calls object above, or {\"answer\": \"...\"} \
with your final answer.";

/// The instruction of a request whose reply must be the final answer (the
/// turn budget's last turn, tools off): the shape [`reply_schema`] of no
/// tools enforces.
pub const ANSWER_ONLY_INSTRUCTION: &str = "No tools are available now. Reply with one JSON object, {\"answer\": \"...\"}, \
holding your final answer from what you have.";

/// The schema of a reply that either answers or calls `tools`; with no
/// tools, the answer-only schema.
pub fn reply_schema(tools: &[ToolSpec]) -> Value {
    let answer = json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false,
    });
    if tools.is_empty() {
        return answer;
    }
    let calls: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    "tool": {"const": tool.name},
                    "params": grammar_safe(&tool.input_schema),
                },
                "required": ["tool", "params"],
                "additionalProperties": false,
            })
        })
        .collect();
    let call = if calls.len() == 1 {
        calls.into_iter().next().unwrap_or_default()
    } else {
        json!({"anyOf": calls})
    };
    json!({
        "oneOf": [
            answer,
            {
                "type": "object",
                "properties": {
                    "tool_calls": {"type": "array", "minItems": 1, "items": call},
                },
                "required": ["tool_calls"],
                "additionalProperties": false,
            },
        ],
    })
}

/// Keywords a server's grammar expands into a rule per unit (a length,
/// a count, a numeric range, a regular expression): llama.cpp's grammars
/// grow with them until sampling stalls or the server fails. The call is
/// validated against the tool's own schema after the reply is read, so
/// the bound still holds; the grammar need not carry it.
const COSTLY_BOUNDS: [&str; 7] = [
    "maxLength",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
];

/// `schema` without [`COSTLY_BOUNDS`] (and without lower bounds on
/// lengths and counts above 1), at every schema position: a property
/// *named* `pattern` stays.
fn grammar_safe(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = serde_json::Map::with_capacity(map.len());
    for (key, value) in map {
        let kept = match key.as_str() {
            bound if COSTLY_BOUNDS.contains(&bound) => continue,
            "minLength" | "minItems" if value.as_u64().is_some_and(|n| n > 1) => continue,
            "properties" | "$defs" | "definitions" | "patternProperties" => match value {
                Value::Object(named) => Value::Object(
                    named
                        .iter()
                        .map(|(name, schema)| (name.clone(), grammar_safe(schema)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                Value::Array(schemas) => Value::Array(schemas.iter().map(grammar_safe).collect()),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains" => {
                grammar_safe(value)
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), kept);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn spec(name: &str, schema: Value) -> ToolSpec {
        serde_json::from_value(json!({"name": name, "description": "d", "inputSchema": schema}))
            .unwrap()
    }

    #[test]
    fn the_schema_accepts_an_answer_or_calls_that_follow_each_tools_schema() {
        let tools = [
            spec(
                "bash",
                json!({"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}),
            ),
            spec("now", json!({"type": "object", "properties": {}})),
        ];
        let schema = reply_schema(&tools);
        let validator = jsonschema::validator_for(&schema).unwrap();
        for good in [
            json!({"answer": "done"}),
            json!({"tool_calls": [{"tool": "bash", "params": {"command": "ls"}}]}),
            json!({"tool_calls": [{"tool": "now", "params": {}},
                                  {"tool": "bash", "params": {"command": "pwd"}}]}),
        ] {
            assert!(validator.is_valid(&good), "{good}");
        }
        for bad in [
            json!({"answer": 3}),
            json!({"tool_calls": []}),
            json!({"tool_calls": [{"tool": "rm", "params": {}}]}),
            json!({"tool_calls": [{"tool": "bash", "params": {}}]}),
            json!({"answer": "x", "tool_calls": [{"tool": "now", "params": {}}]}),
            json!("prose"),
        ] {
            assert!(!validator.is_valid(&bad), "{bad}");
        }
        assert_eq!(reply_schema(&[])["required"], json!(["answer"]));
    }

    /// Reported: bounds in a tool's schema made llama-cpp-python's reply
    /// grammar stall, then fail. They are left to validation.
    #[test]
    fn costly_bounds_are_left_out_of_the_grammar_but_names_are_not() {
        let schema = json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "maxLength": 4096, "minLength": 1},
                "wait": {"type": "number", "minimum": 0, "maximum": 600},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"},
                         "minItems": 2, "maxItems": 50}
            },
            "required": ["pattern"]
        });
        assert_eq!(
            grammar_safe(&schema),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1},
                    "wait": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["pattern"]
            })
        );
        let reply = reply_schema(&[spec("grep", schema)]);
        assert!(!reply.to_string().contains("4096"), "{reply}");
    }
}
