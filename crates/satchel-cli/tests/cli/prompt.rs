//! End-to-end: `satchel tools prompt`: what a model is shown of the tools,
//! compact or native, and the comparison table.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cli::{Sandbox, stderr, stdout_json};

#[test]
fn tools_prompt_shows_the_compact_text_with_its_token_count() {
    let sandbox = Sandbox::new();
    // gemma3 has no native tool calling, so `auto` means prompted.
    sandbox.write_config(r#"{"llm": {"model": "gemma3:27b"}}"#);
    let output = sandbox.run(&["tools", "prompt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("## Tools\n\n### bash\n"), "{text}");
    assert!(
        text.contains("- `command` (string, required): The bash command to execute\n"),
        "{text}"
    );
    assert!(text.contains("### search\n"), "{text}");
    assert!(
        text.contains("\"tool_calls\": [{\"tool\": \"NAME\""),
        "{text}"
    );
    // The local Ollama (the default endpoint) takes a `json_schema`.
    assert!(
        text.contains("\nReplies constrained to the reply schema (")
            && text
                .contains("sent as response_format json_schema; `llm.constrainedReplies: auto`)"),
        "{text}"
    );
    assert!(
        text.contains(r#"or {"answer": "..."} with your final answer."#),
        "{text}"
    );
    let last = text.lines().find(|l| l.contains(" tokens for ")).unwrap();
    assert!(
        last.contains("tokens for 13 tools")
            && last.contains("prompted for gemma3:27b (openai), counted with cl100k_base"),
        "{last}"
    );

    // --json carries the same text and the count of exactly that text.
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--json"]));
    assert_eq!(value["format"], "prompted");
    assert_eq!(value["encoding"], "cl100k_base");
    assert_eq!(
        value["tools"],
        json!([
            "bash",
            "code",
            "conversation",
            "edit",
            "fetch",
            "glob",
            "grep",
            "memory",
            "process",
            "read",
            "search",
            "skill",
            "write"
        ])
    );
    let tokens = value["tokens"].as_u64().unwrap();
    assert!(
        last.starts_with(&format!("{tokens} tokens")),
        "{last} vs {tokens}"
    );
    assert!(text.starts_with(value["text"].as_str().unwrap().trim_end()));
    assert_eq!(value["constrained_replies"]["format"], "jsonSchema");
    assert!(
        value["constrained_replies"]["schema_bytes"]
            .as_u64()
            .unwrap()
            > 1_000
    );

    sandbox.write_config(r#"{"llm": {"model": "gemma3:27b", "constrainedReplies": "off"}}"#);
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--json"]));
    assert_eq!(value["constrained_replies"], Value::Null);
    assert!(!value["text"].as_str().unwrap().contains(r#"{"answer""#));
}

#[test]
fn tools_prompt_native_is_the_providers_tool_json() {
    let sandbox = Sandbox::new();
    // An Anthropic model without a key: nothing is sent, so nothing is missing.
    sandbox.write_config(r#"{"llm": {"model": "claude-sonnet-4-5", "toolCalling": "auto"}}"#);
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--json"]));
    assert_eq!(value["format"], "native");
    assert_eq!(value["provider"], "anthropic");
    let tools: Value = serde_json::from_str(value["text"].as_str().unwrap()).unwrap();
    assert_eq!(tools[0]["name"], "bash");
    assert_eq!(tools[0]["input_schema"]["required"], json!(["command"]));
    // A Claude model gets Anthropic's text editor in place of edit and
    // write, declared by type; each form's cost is shown.
    assert_eq!(value["edit_form"], "str_replace_based_edit_tool");
    let tools = tools.as_array().unwrap();
    assert!(
        tools.contains(
            &json!({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"})
        )
    );
    assert!(
        !tools
            .iter()
            .any(|t| t["name"] == "edit" || t["name"] == "write")
    );
    let costs = &value["edit_forms"];
    assert_eq!(costs["str_replace_based_edit_tool"], 700);
    assert!(costs["satchel"].as_u64().unwrap() > costs["apply_patch"].as_u64().unwrap());

    // The OpenAI shape, and an explicit --format over the configured mode.
    sandbox.write_config(
        r#"{"llm": {"baseUrl": "http://127.0.0.1:9/v1", "model": "qwen3:8b", "toolCalling": "prompted"}}"#,
    );
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--format", "native", "--json"]));
    assert_eq!(value["format"], "native");
    let tools: Value = serde_json::from_str(value["text"].as_str().unwrap()).unwrap();
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "bash");
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--json"]));
    assert_eq!(
        value["format"], "prompted",
        "toolCalling: prompted is honoured"
    );
}

#[test]
fn tools_prompt_includes_external_tools_unless_builtin() {
    let sandbox = Sandbox::new();
    let tools = sandbox.project().join(".agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let script = tools.join("greet");
    std::fs::write(
        &script,
        "#!/bin/sh\nif [ \"$1\" = --schema ]; then echo '{\"name\": \"greet\", \"description\": \"Say hello.\", \"inputSchema\": {\"type\": \"object\", \"properties\": {\"who\": {\"type\": \"string\"}}, \"required\": [\"who\"]}}'; exit 0; fi\necho '{}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--format", "prompted", "--json"]));
    assert_eq!(
        value["tools"],
        json!([
            "bash",
            "code",
            "conversation",
            "edit",
            "fetch",
            "glob",
            "greet",
            "grep",
            "memory",
            "process",
            "read",
            "search",
            "skill",
            "write"
        ])
    );
    assert!(
        value["text"]
            .as_str()
            .unwrap()
            .contains("### greet\nSay hello.\nParameters:\n- `who` (string, required)\n")
    );
    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--builtin", "--json"]));
    assert_eq!(
        value["tools"],
        json!([
            "bash",
            "code",
            "conversation",
            "memory",
            "search",
            "read",
            "write",
            "edit",
            "glob",
            "grep",
            "fetch",
            "process",
            "skill"
        ])
    );
}

/// The issue's benchmark as a regression guard: the compact form of the
/// built-in tools is no longer than either native form. (Its 150-per-tool
/// target is printed, not asserted: the built-in descriptions alone take
/// about 80 tokens per tool.)
#[test]
fn tools_prompt_compare_prints_the_table() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["tools", "prompt", "--compare", "--builtin"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    for label in [
        "13 tools: bash, code, conversation, memory, search, read, write, edit, glob, grep, fetch, process, skill",
        "prompted, compact (with instruction)",
        "native, OpenAI tools JSON",
        "native, Anthropic tools JSON",
        "prose description",
        "target: compact within 150 tokens per tool",
        "editing tools, each form",
        "str_replace_based_edit_tool 700",
    ] {
        assert!(table.contains(label), "{label} missing:\n{table}");
    }

    let value = stdout_json(&sandbox.run(&["tools", "prompt", "--compare", "--builtin", "--json"]));
    let tokens = |form: &str| {
        value["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["form"] == form)
            .unwrap()["tokens"]["cl100k_base"]
            .as_u64()
            .unwrap()
    };
    let compact = tokens("prompted");
    assert!(tokens("prompted_tools_only") < compact);
    assert!(compact <= tokens("native_openai"), "{value:#}");
    assert!(compact <= tokens("native_anthropic"), "{value:#}");
    assert!(compact < tokens("prose"), "{value:#}");
}

/// The token vocabularies are built by the first count on a machine and
/// cached in `$XDG_CACHE_HOME/satchel/tokens`; later processes read them
/// from there and count exactly the same, and a damaged file is built
/// again rather than trusted.
#[test]
fn the_first_count_caches_the_vocabularies_and_later_counts_are_the_same() {
    let sandbox = Sandbox::new();
    let tokens = sandbox.dir.path().join("cache/satchel/tokens");
    let compare = || {
        let output = sandbox.run(&["tools", "prompt", "--compare", "--builtin", "--json"]);
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let cached = || {
        let mut files: Vec<(String, u64)> = std::fs::read_dir(&tokens)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                (name, entry.metadata().unwrap().len())
            })
            .collect();
        files.sort();
        files
    };

    // A command that counts nothing builds and writes nothing.
    let listed = sandbox.run(&["tools", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(!tokens.exists(), "tools list wrote {}", tokens.display());

    let cold = compare();
    let files = cached();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[0].0.starts_with("cl100k_base-") && files[0].0.ends_with(".bpe"));
    assert!(files[1].0.starts_with("o200k_base-") && files[1].0.ends_with(".bpe"));
    assert_eq!(compare(), cold, "counted differently from the cache");
    assert_eq!(cached(), files);

    for (name, len) in &files {
        let path = tokens.join(name);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..*len as usize / 2]).unwrap();
    }
    assert_eq!(compare(), cold, "counted differently after rebuilding");
    assert_eq!(
        cached(),
        files,
        "the damaged files were not rewritten whole"
    );
}
