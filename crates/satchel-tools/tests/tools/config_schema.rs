//! Issue #22: `satchel config schema` is a JSON Schema editors can use;
//! every agent.json example in the README must validate against it, and
//! a mistake must not.

use satchel_tools::config_schema::agent_schema;
use serde_json::{Value, json};

/// The ```json blocks of the README that are agent.json (not mcp.json).
fn readme_examples() -> Vec<(usize, Value)> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let mut examples = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (number, line) in readme.lines().enumerate() {
        match (&mut block, line.trim_end()) {
            (None, "```json") => block = Some((number + 2, String::new())),
            (Some((start, text)), "```") => {
                let value: Value = serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("README.md:{start}: not JSON: {e}"));
                if value.get("mcpServers").is_none() {
                    examples.push((*start, value));
                }
                block = None;
            }
            (Some((_, text)), line) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    examples
}

#[test]
fn the_readmes_examples_validate_against_the_schema() {
    let validator = jsonschema::validator_for(agent_schema()).unwrap();
    let examples = readme_examples();
    assert!(examples.len() >= 8, "{} examples found", examples.len());
    for (line, example) in examples {
        let errors: Vec<String> = validator
            .iter_errors(&example)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "README.md:{line}: {errors:?}");
    }
}

#[test]
fn mistakes_do_not_validate() {
    let validator = jsonschema::validator_for(agent_schema()).unwrap();
    for wrong in [
        json!({"toolCalling": "prompted"}),
        json!({"llm": {"toolCalling": "sometimes"}}),
        json!({"maxTurns": "many"}),
        json!({"memory": {"recall": {"fusoin": "rrf"}}}),
        json!({"rateLimits": {"search": "often"}}),
    ] {
        assert!(!validator.is_valid(&wrong), "{wrong} validated");
    }
    assert!(
        validator.is_valid(
            &json!({"$schema": "./agent.schema.json", "llm": {"toolCalling": "prompted"}})
        )
    );
}
