//! The fixture tools: their names, descriptions and input schemas as
//! `tools/list` shows them, and which file serves each call. The names and
//! behaviours are the suite's ("Required server fixtures" in each
//! scenario's description).

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::wire::object;

/// Who serves a fixture tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Serves {
    /// [`super::content`]: a fixed result.
    Content,
    /// [`super::session`]: asks the client or notifies it during the call.
    Session,
    /// [`super::input_required`]: answers with `InputRequiredResult` first.
    InputRequired,
    /// [`super::tasks`]: runs as a task when the client takes tasks.
    Task,
    /// [`super::list_changed`]: changes Satchel's tool list.
    ToolChange,
    /// [`super::list_changed`]: changes the prompt list.
    PromptChange,
}

struct Fixture {
    name: &'static str,
    description: &'static str,
    serves: Serves,
    schema: fn() -> Value,
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn one_string(name: &'static str, description: &'static str, required: bool) -> Value {
    let required: &[&str] = if required { &[name] } else { &[] };
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": required,
    })
}

/// SEP-1613 and SEP-2106: the 2020-12 keywords `tools/list` must carry
/// through unchanged.
pub(super) fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            },
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

const CATALOGUE: &[Fixture] = &[
    Fixture {
        name: "test_simple_text",
        description: "Returns one text block.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_image_content",
        description: "Returns one image block (a 1x1 PNG).",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_audio_content",
        description: "Returns one audio block (a tiny WAV).",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_embedded_resource",
        description: "Returns one embedded text resource.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_multiple_content_types",
        description: "Returns text, an image and an embedded resource.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_error_handling",
        description: "Always fails with an isError result.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "json_schema_2020_12_tool",
        description: "Has an input schema using JSON Schema 2020-12 keywords (SEP-1613).",
        serves: Serves::Content,
        schema: json_schema_2020_12,
    },
    Fixture {
        name: "test_missing_capability",
        description: "Needs the client's sampling capability; -32021 without it.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_streaming_elicitation",
        description: "Answers on the request's stream, with progress when asked (SEP-2575).",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_logging_tool",
        description: "Logs only when the request's _meta sets a log level (SEP-2575).",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "test_custom_header",
        description: "Echoes `region`, which clients also send as the Mcp-Param-Region header \
                      (SEP-2243 x-mcp-header; the transport checks the two agree).",
        serves: Serves::Content,
        schema: || {
            json!({
                "type": "object",
                "properties": {
                    "region": {
                        "type": "string",
                        "description": "Any text; mirrored in the Mcp-Param-Region header.",
                        "x-mcp-header": "Region",
                    },
                },
                "required": ["region"],
            })
        },
    },
    Fixture {
        name: "test_reconnection",
        description: "Answers after a short pause (SEP-1699 polling). It does not close \
                      its stream: closing one is the transport's to do.",
        serves: Serves::Content,
        schema: no_arguments,
    },
    Fixture {
        name: "greet",
        description: "Returns `Hello, {name}!` at once; never a task.",
        serves: Serves::Content,
        schema: || one_string("name", "Who to greet.", true),
    },
    Fixture {
        name: "test_tool_with_logging",
        description: "Sends three log messages while it runs.",
        serves: Serves::Session,
        schema: no_arguments,
    },
    Fixture {
        name: "test_tool_with_progress",
        description: "Reports progress 0, 50 and 100 of 100 to the request's progress token.",
        serves: Serves::Session,
        schema: no_arguments,
    },
    Fixture {
        name: "test_sampling",
        description: "Asks the client's model (sampling/createMessage) and returns its answer.",
        serves: Serves::Session,
        schema: || one_string("prompt", "The prompt to send to the model.", true),
    },
    Fixture {
        name: "test_elicitation",
        description: "Asks the client's user (elicitation/create) and returns the answer.",
        serves: Serves::Session,
        schema: || one_string("message", "The message to show the user.", true),
    },
    Fixture {
        name: "test_elicitation_sep1034_defaults",
        description: "Elicits a form whose fields have defaults (SEP-1034).",
        serves: Serves::Session,
        schema: no_arguments,
    },
    Fixture {
        name: "test_elicitation_sep1330_enums",
        description: "Elicits a form with every kind of enum field (SEP-1330).",
        serves: Serves::Session,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_elicitation",
        description: "Asks for a name through InputRequiredResult (SEP-2322).",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_sampling",
        description: "Asks the client's model through InputRequiredResult.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_list_roots",
        description: "Asks for the client's roots through InputRequiredResult.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_request_state",
        description: "Round-trips a sealed requestState and checks it.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_multiple_inputs",
        description: "Asks for an elicitation, a sampling and the roots at once.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_multi_round",
        description: "Asks twice, carrying the first answer in requestState.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_tampered_state",
        description: "Refuses a requestState that fails its integrity check (-32602).",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "test_input_required_result_capabilities",
        description: "Asks only for what the client declared it can answer.",
        serves: Serves::InputRequired,
        schema: no_arguments,
    },
    Fixture {
        name: "slow_compute",
        description: "Sleeps `seconds` then returns; a task when the client takes tasks.",
        serves: Serves::Task,
        schema: || {
            json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "description": "How long to work."},
                    "label": {"type": "string", "description": "Echoed in the result."},
                },
            })
        },
    },
    Fixture {
        name: "failing_job",
        description: "Task only: ends with a tool error after about a second.",
        serves: Serves::Task,
        schema: no_arguments,
    },
    Fixture {
        name: "protocol_error_job",
        description: "Fails with a protocol error (a failed task when run as one).",
        serves: Serves::Task,
        schema: no_arguments,
    },
    Fixture {
        name: "confirm_delete",
        description: "Task only: asks the client to confirm, then completes.",
        serves: Serves::Task,
        schema: || one_string("filename", "The file to pretend to delete.", false),
    },
    Fixture {
        name: "multi_input",
        description: "Task only: asks two questions at once, completes when both are answered.",
        serves: Serves::Task,
        schema: no_arguments,
    },
    Fixture {
        name: "test_tool_with_task",
        description: "Task only: asks for a name (InputRequiredResult), then greets it in a task.",
        serves: Serves::Task,
        schema: no_arguments,
    },
    Fixture {
        name: "test_trigger_tool_change",
        description: "Adds or removes a tool in Satchel's registry (tools/list_changed).",
        serves: Serves::ToolChange,
        schema: no_arguments,
    },
    Fixture {
        name: "test_trigger_prompt_change",
        description: "Adds or removes a prompt (prompts/list_changed).",
        serves: Serves::PromptChange,
        schema: no_arguments,
    },
];

/// Who serves the fixture tool `name`, if it is one.
pub(super) fn find(name: &str) -> Option<Serves> {
    CATALOGUE
        .iter()
        .find(|fixture| fixture.name == name)
        .map(|fixture| fixture.serves)
}

/// The fixture tools as `tools/list` shows them.
pub(super) fn specs() -> Vec<Tool> {
    CATALOGUE.iter().map(spec).collect()
}

/// The fixture tool `name`, for the transport's SEP-2243 check of
/// `Mcp-Param-*` headers against the tool's `x-mcp-header` annotations.
pub(super) fn find_spec(name: &str) -> Option<Tool> {
    CATALOGUE
        .iter()
        .find(|fixture| fixture.name == name)
        .map(spec)
}

fn spec(fixture: &Fixture) -> Tool {
    Tool::new(
        fixture.name,
        fixture.description,
        Arc::new(object((fixture.schema)())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixture_has_one_name_and_an_object_schema() {
        let mut names: Vec<&str> = CATALOGUE.iter().map(|fixture| fixture.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len(), "duplicate fixture names");
        for tool in specs() {
            assert_eq!(
                tool.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                tool.name
            );
        }
        assert_eq!(find("slow_compute"), Some(Serves::Task));
        assert_eq!(find("bash"), None);
    }
}
