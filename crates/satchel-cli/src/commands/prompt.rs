//! `satchel tools prompt`: what the configured model is shown for a set of
//! tools (the compact prompted text or the provider's native definitions)
//! and what it costs in tokens; `--compare` puts every form side by side,
//! with a prose description of the same tools as the baseline a person
//! would write.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use satchel_core::ToolSpec;
use satchel_core::edit_forms::is_native_form;
use satchel_core::portable::SchemaConsumer;
use satchel_llm::prompted::{ANSWER_INSTRUCTION, CALL_INSTRUCTION, render_tools, reply_schema};
use satchel_llm::{
    ConstrainedReplies, EditToolSetting, Encoding, LlmConfig, LlmError, ModelConfig, ProviderKind,
    ReplyFormat, ToolMode, count_tokens, native_tools_json, schema_consumer,
};
use serde_json::{Value, json};

use super::edit_costs::{self, edit_costs};
use crate::cli::{PromptArgs, PromptFormat};
use satchel_host::{Host, read_settings};

/// Prints the presentation of `tools` that `args` asks for.
pub(crate) fn run(
    tools: &[ToolSpec],
    args: &PromptArgs,
    project: &Host,
) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    let all = tools;
    if args.compare {
        // The table compares Satchel's own forms; the editing tools'
        // native forms are counted apart, below it.
        let tools: Vec<ToolSpec> = all
            .iter()
            .filter(|spec| !is_native_form(&spec.name))
            .cloned()
            .collect();
        let rows = compare(&tools);
        let costs = ENCODINGS.map(|encoding| edit_costs(all, SchemaConsumer::OpenAi, encoding));
        if args.json {
            let mut value = comparison_json(&tools, &rows);
            value["edit_forms"] = json!({
                ENCODINGS[0].as_str(): edit_costs::to_json(&costs[0]),
                ENCODINGS[1].as_str(): edit_costs::to_json(&costs[1]),
            });
            writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
        } else {
            write!(stdout, "{}", comparison_table(&tools, &rows))?;
            writeln!(
                stdout,
                "editing tools, each form (OpenAI tools JSON; the text editor is Anthropic's figure):"
            )?;
            for (encoding, costs) in ENCODINGS.iter().zip(&costs) {
                let parts: Vec<String> = costs
                    .iter()
                    .map(|cost| format!("{} {}", cost.form.as_str(), cost.tokens))
                    .collect();
                writeln!(stdout, "  {encoding}: {}", parts.join(", "))?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    let model = model_config(project)?;
    let form = model.edit_form();
    let tools: Vec<ToolSpec> = all
        .iter()
        .filter(|spec| form.offers(&spec.name))
        .cloned()
        .collect();
    let tools = tools.as_slice();
    let costs = edit_costs(all, schema_consumer(&model), model.encoding);
    let editing = edit_costs::describe(form, edit_setting(model.edit_tool), &costs);
    let mode = match args.format {
        Some(PromptFormat::Prompted) => ToolMode::Prompted,
        Some(PromptFormat::Native) => ToolMode::Native,
        None => model.tool_mode(),
    };
    // Prompted replies are constrained to a schema where the server can
    // enforce one; the prompt then also says how to answer.
    let constrained = (mode == ToolMode::Prompted)
        .then(|| model.reply_format())
        .flatten();
    let text = match (mode, constrained) {
        (ToolMode::Prompted, Some(_)) => format!("{}{ANSWER_INSTRUCTION}\n", render_tools(tools)),
        (ToolMode::Prompted, None) => render_tools(tools),
        (ToolMode::Native, _) => native_tools_json(schema_consumer(&model), tools)?,
    };
    let schema_bytes = constrained.map(|_| reply_schema(tools).to_string().len());
    let constrained_line = match (mode, constrained, schema_bytes) {
        (ToolMode::Native, ..) => String::new(),
        (ToolMode::Prompted, Some(format), Some(bytes)) => format!(
            "Replies constrained to the reply schema ({bytes} bytes, sent as {}; \
             `llm.constrainedReplies: {}`)\n",
            match format {
                ReplyFormat::JsonSchema => "response_format json_schema",
                ReplyFormat::JsonObject => "response_format json_object with a schema",
            },
            constrained_setting(model.constrained_replies)
        ),
        (ToolMode::Prompted, ..) if model.provider == ProviderKind::Anthropic => {
            "Replies not constrained: Anthropic's API takes no schema for free text\n".into()
        }
        (ToolMode::Prompted, ..) => {
            "Replies not constrained (`llm.constrainedReplies: off`)\n".into()
        }
    };
    let tokens = count_tokens(model.encoding, &text);
    let per_tool = per_tool(tokens, tools.len());
    if args.json {
        let value = json!({
            "format": mode.as_str(),
            "provider": model.provider,
            "model": model.model,
            "encoding": model.encoding.as_str(),
            "tools": tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>(),
            "tokens": tokens,
            "tokens_per_tool": per_tool,
            "text": text,
            "constrained_replies": constrained.map(|format| json!({
                "format": format.as_str(),
                "schema_bytes": schema_bytes,
            })),
            "edit_form": form.as_str(),
            "edit_forms": edit_costs::to_json(&costs),
        });
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        let text = text.trim_end();
        writeln!(
            stdout,
            "{text}\n\n{constrained_line}{tokens} tokens for {} tools ({per_tool:.0} per tool): {} for {} ({}), counted with {}\n{editing}",
            tools.len(),
            mode.as_str(),
            model.model,
            provider_name(model.provider),
            model.encoding,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The configured model. Nothing is sent, so a missing API key does not
/// matter here: the settings are resolved as if it were set.
fn model_config(project: &Host) -> anyhow::Result<ModelConfig> {
    let settings = read_settings(&project.root, &project.paths, &project.env)?;
    let (config, warning) = settings.section::<LlmConfig>("llm");
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    let mut env: HashMap<String, String> = settings.env.clone().into_iter().collect();
    match config.resolve(&env) {
        Err(LlmError::MissingApiKey { env_var, .. }) => {
            env.insert(env_var, "not-used".into());
            Ok(config.resolve(&env)?)
        }
        resolved => Ok(resolved?),
    }
}

fn edit_setting(setting: EditToolSetting) -> &'static str {
    match setting {
        EditToolSetting::Auto => "auto",
        EditToolSetting::Satchel => "satchel",
        EditToolSetting::Native => "native",
    }
}

fn constrained_setting(setting: ConstrainedReplies) -> &'static str {
    match setting {
        ConstrainedReplies::Auto => "auto",
        ConstrainedReplies::On => "on",
        ConstrainedReplies::Off => "off",
    }
}

fn provider_name(provider: ProviderKind) -> &'static str {
    match provider {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Anthropic => "anthropic",
    }
}

fn per_tool(tokens: u64, tools: usize) -> f64 {
    if tools == 0 {
        0.0
    } else {
        tokens as f64 / tools as f64
    }
}

/// One form of presenting the tools, counted with both tokenizers.
struct Row {
    form: &'static str,
    label: &'static str,
    cl100k: u64,
    o200k: u64,
}

const ENCODINGS: [Encoding; 2] = [Encoding::Cl100k, Encoding::O200k];

fn compare(tools: &[ToolSpec]) -> Vec<Row> {
    let compact = render_tools(tools);
    let forms: Vec<(&'static str, &'static str, String)> = vec![
        (
            "prompted",
            "prompted, compact (with instruction)",
            compact.clone(),
        ),
        (
            "prompted_tools_only",
            "  of which the tools",
            compact
                .strip_suffix(&format!("{CALL_INSTRUCTION}\n"))
                .unwrap_or(&compact)
                .to_owned(),
        ),
        (
            "native_openai",
            "native, OpenAI tools JSON",
            native_tools_json(SchemaConsumer::OpenAi, tools).unwrap_or_default(),
        ),
        (
            "native_anthropic",
            "native, Anthropic tools JSON",
            native_tools_json(SchemaConsumer::Anthropic, tools).unwrap_or_default(),
        ),
        (
            "native_gemini",
            "native, Gemini (OpenAI-compatible) tools JSON",
            native_tools_json(SchemaConsumer::Gemini, tools).unwrap_or_default(),
        ),
        ("prose", "prose description", prose(tools)),
        (
            "descriptions",
            "  the descriptions alone (all forms)",
            tools
                .iter()
                .map(|tool| tool.description.trim())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    ];
    forms
        .into_iter()
        .map(|(form, label, text)| Row {
            form,
            label,
            cl100k: count_tokens(Encoding::Cl100k, &text),
            o200k: count_tokens(Encoding::O200k, &text),
        })
        .collect()
}

fn comparison_table(tools: &[ToolSpec], rows: &[Row]) -> String {
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    let mut out = format!("{} tools: {}\n", tools.len(), names.join(", "));
    let _ = writeln!(
        out,
        "{:38}  {:>11}  {:>8}  {:>10}  {:>8}  {:>10}",
        "FORM",
        ENCODINGS[0].as_str(),
        "per tool",
        ENCODINGS[1].as_str(),
        "per tool",
        "vs compact"
    );
    let compact = rows.first().map_or(1, |row| row.cl100k.max(1));
    for row in rows {
        let _ = writeln!(
            out,
            "{:38}  {:>11}  {:>8.1}  {:>10}  {:>8.1}  {:>9.2}x",
            row.label,
            row.cl100k,
            per_tool(row.cl100k, tools.len()),
            row.o200k,
            per_tool(row.o200k, tools.len()),
            row.cl100k as f64 / compact as f64,
        );
    }
    if let (Some(compact), Some(native)) = (
        rows.first(),
        rows.iter()
            .filter(|row| row.form.starts_with("native"))
            .map(|row| row.cl100k)
            .min(),
    ) {
        // Per tool: the tools' own text; the one call instruction is paid
        // once per prompt, whatever the number of tools, and is shown above.
        let tools_only = rows
            .iter()
            .find(|row| row.form == "prompted_tools_only")
            .map_or(compact.cl100k, |row| row.cl100k);
        let average = per_tool(tools_only, tools.len());
        let _ = writeln!(
            out,
            "target: compact within 150 tokens per tool ({average:.1} without the one instruction: {}), no longer than native ({} vs {native}: {})",
            if average <= 150.0 { "met" } else { "missed" },
            compact.cl100k,
            if compact.cl100k <= native {
                "met"
            } else {
                "missed"
            },
        );
    }
    out
}

fn comparison_json(tools: &[ToolSpec], rows: &[Row]) -> Value {
    json!({
        "tools": tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>(),
        "rows": rows.iter().map(|row| json!({
            "form": row.form,
            "tokens": {"cl100k_base": row.cl100k, "o200k_base": row.o200k},
            "tokens_per_tool": {
                "cl100k_base": per_tool(row.cl100k, tools.len()),
                "o200k_base": per_tool(row.o200k, tools.len()),
            },
        })).collect::<Vec<_>>(),
    })
}

/// The tools described in plain sentences, as a person writing a system
/// prompt by hand might: the baseline the compact form is measured against.
fn prose(tools: &[ToolSpec]) -> String {
    let mut out = String::from("You have access to the following tools.\n\n");
    for tool in tools {
        let _ = write!(
            out,
            "The \"{}\" tool. {}",
            tool.name,
            tool.description.trim()
        );
        let schema = &tool.input_schema;
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match schema["properties"].as_object().filter(|p| !p.is_empty()) {
            None => out.push_str(" It takes no parameters."),
            Some(properties) => {
                out.push_str(" To use it, provide the following parameters.");
                for (name, property) in properties {
                    let _ = write!(
                        out,
                        " The \"{name}\" parameter is {} and is {}",
                        kind_phrase(property),
                        if required.contains(&name.as_str()) {
                            "required"
                        } else {
                            "optional"
                        }
                    );
                    if let Some(default) = property.get("default") {
                        let _ = write!(out, "; if you leave it out, it defaults to {default}");
                    }
                    out.push('.');
                    if let Some(description) = property["description"].as_str() {
                        let _ = write!(out, " {}.", description.trim_end_matches('.'));
                    }
                }
            }
        }
        if let Some(fields) = tool
            .output_schema
            .as_ref()
            .and_then(|schema| schema["properties"].as_object())
        {
            let names: Vec<&str> = fields.keys().map(String::as_str).collect();
            let _ = write!(
                out,
                " When it finishes, the tool returns an object containing the following fields: {}.",
                names.join(", ")
            );
        }
        out.push_str("\n\n");
    }
    out
}

/// `a string`, `one of "a", "b" or "c"`, `a list of strings`...
fn kind_phrase(schema: &Value) -> String {
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        return match values.split_last() {
            Some((last, rest)) if !rest.is_empty() => {
                format!("one of {} or {last}", rest.join(", "))
            }
            _ => format!("the value {}", values.join("")),
        };
    }
    let article = |name: &str| match name {
        "integer" | "object" | "array" => format!("an {name}"),
        other => format!("a {other}"),
    };
    match &schema["type"] {
        Value::String(name) if name == "array" => match schema["items"]["type"].as_str() {
            Some(item) => format!("a list of {item}s"),
            None => "a list".into(),
        },
        Value::String(name) => article(name),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .map(article)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any value".into(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn prose_reads_as_sentences() {
        let tool = ToolSpec {
            name: "search".into(),
            title: None,
            description: "Search the web.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for"},
                    "type": {"type": "string", "enum": ["web", "news"], "default": "web"},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["query"]
            }),
            output_schema: Some(
                json!({"type": "object", "properties": {"results": {}, "cached": {}}}),
            ),
            annotations: Default::default(),
            capabilities: Default::default(),
        };
        assert_eq!(
            prose(&[tool]),
            "You have access to the following tools.\n\n\
             The \"search\" tool. Search the web. To use it, provide the following parameters. \
             The \"query\" parameter is a string and is required. What to search for. \
             The \"type\" parameter is one of \"web\" or \"news\" and is optional; if you leave it out, it defaults to \"web\". \
             The \"tags\" parameter is a list of strings and is optional. \
             When it finishes, the tool returns an object containing the following fields: results, cached.\n\n"
        );
    }
}
