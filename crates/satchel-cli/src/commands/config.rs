//! `satchel config show|schema`: the effective configuration with where
//! each value came from, and the JSON Schema of agent.json.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::ExitCode;

use satchel_llm::LlmConfig;
use satchel_tools::Settings;
use satchel_tools::config_schema::{AGENT_SCHEMA, agent_schema};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{ConfigCommand, Origin};
use satchel_host::{Host, read_settings};

/// One effective value and where it came from.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    /// The dotted key path (`llm.model`), or a name of Satchel's own
    /// (`db`, `project`) for values that are not in agent.json.
    pub(crate) key: String,
    /// The value.
    pub(crate) value: Value,
    /// `default`, `user file`, `project file`, `environment` or `flag`.
    pub(crate) source: &'static str,
    /// The file, variable or flag that set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<String>,
}

pub(crate) async fn run(
    command: ConfigCommand,
    project: &Host,
    origin: &Origin,
) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match command {
        ConfigCommand::Schema => {
            writeln!(stdout, "{}", AGENT_SCHEMA.trim_end())?;
        }
        ConfigCommand::Show(args) => {
            let settings = read_settings(&project.root, &project.paths, &project.env)?;
            let entries = effective(&settings, project, origin);
            if args.json {
                let value = json!({
                    "files": settings.sources,
                    "values": entries,
                    "warnings": project.warnings,
                });
                writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                let files: Vec<String> = settings
                    .sources
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                if files.is_empty() {
                    writeln!(stdout, "# no agent.json read: every value is a default")?;
                } else {
                    writeln!(stdout, "# read: {}", files.join(", "))?;
                }
                let width = entries.iter().map(|e| e.key.len()).max().unwrap_or(0);
                for entry in &entries {
                    let from = entry
                        .from
                        .as_deref()
                        .map(|f| format!(" ({f})"))
                        .unwrap_or_default();
                    writeln!(
                        stdout,
                        "{:width$}  {}  # {}{from}",
                        entry.key, entry.value, entry.source
                    )?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every value Satchel uses that agent.json, the environment or a flag
/// can set, with its source: defaults from the schema, then the user's
/// file, the project's, the environment and the flags, later ones winning
/// as they do when Satchel reads them.
pub(crate) fn effective(settings: &Settings, project: &Host, origin: &Origin) -> Vec<Entry> {
    let mut values: BTreeMap<String, Entry> = BTreeMap::new();
    defaults(agent_schema(), "", &mut values);
    let project_file = project.root.join(satchel_tools::config::PROJECT_CONFIG);
    for layer in &settings.layers {
        let source = if layer.path == project_file {
            "project file"
        } else {
            "user file"
        };
        let mut leaves = Vec::new();
        flatten(&Value::Object(layer.object.clone()), "", &mut leaves);
        for (key, value) in leaves {
            values.insert(
                key.clone(),
                Entry {
                    key,
                    value,
                    source,
                    from: Some(layer.path.display().to_string()),
                },
            );
        }
    }
    let env = &settings.env;
    let mut from_env = |key: &str, var: &str, wins_over_files: bool| {
        let Some(value) = env.get(var).filter(|v| !v.trim().is_empty()) else {
            return;
        };
        let set_in_file = values
            .get(key)
            .is_some_and(|e| matches!(e.source, "user file" | "project file"));
        if wins_over_files || !set_in_file {
            values.insert(
                key.to_owned(),
                Entry {
                    key: key.to_owned(),
                    value: json!(value),
                    source: "environment",
                    from: Some(var.to_owned()),
                },
            );
        }
    };
    from_env("llm.model", "SATCHEL_MODEL", true);
    from_env("llm.baseUrl", "OPENAI_BASE_URL", false);
    from_env("search.searxng.baseUrl", "SEARXNG_URL", false);
    // What the model section resolves to (defaults depend on the
    // environment: a key for a hosted API, else a local server).
    let (llm, _) = settings.section::<LlmConfig>("llm");
    let vars: HashMap<String, String> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Ok(model) = llm.resolve(&vars) {
        for (key, value) in [
            ("llm.provider", json!(model.provider)),
            ("llm.baseUrl", json!(model.base_url)),
            ("llm.model", json!(model.model)),
            ("llm.toolCalling", json!(model.tool_mode())),
            ("llm.contextWindow", json!(model.context_window)),
        ] {
            values.entry(key.to_owned()).or_insert(Entry {
                key: key.to_owned(),
                value,
                source: "default",
                from: None,
            });
        }
    }
    let search = satchel_builtins::search_config(&project.tools_config);
    if !values.contains_key("search.backends") {
        values.insert(
            "search.backends".into(),
            Entry {
                key: "search.backends".into(),
                value: json!(search.backend_names()),
                source: if search.backend_names().is_empty() {
                    "default"
                } else {
                    "environment"
                },
                from: (!search.backend_names().is_empty())
                    .then(|| "SEARXNG_URL, BRAVE_API_KEY, TAVILY_API_KEY".to_owned()),
            },
        );
    }
    if !values.contains_key("memory.modelDir") {
        values.insert(
            "memory.modelDir".into(),
            Entry {
                key: "memory.modelDir".into(),
                value: json!(project.memory.config().model_dir),
                source: "default",
                from: Some("$XDG_DATA_HOME/satchel/models".into()),
            },
        );
    }
    let mut entries: Vec<Entry> = values.into_values().collect();
    entries.push(Entry {
        key: "project".into(),
        value: json!(project.root),
        source: if origin.project_flag {
            "flag"
        } else {
            "default"
        },
        from: origin.project_flag.then(|| "-C".to_owned()),
    });
    let (source, from) = match (&origin.db_flag, &project.db) {
        (Some(true), _) => ("flag", Some("--db".to_owned())),
        (Some(false), _) => ("environment", Some("SATCHEL_DB".to_owned())),
        (None, _) => (
            "default",
            Some("$XDG_DATA_HOME/satchel/satchel.db".to_owned()),
        ),
    };
    entries.push(Entry {
        key: "db".into(),
        // A URL is shown without its password.
        value: json!(
            project
                .db
                .as_ref()
                .map(|db| match super::db::location(db.as_os_str()) {
                    Ok(location) => location.display(),
                    // Unreadable: it may still hold a password.
                    Err(_) if satchel_store::StoreLocation::is_url(db.as_os_str()) => {
                        "postgres://… (not a URL Satchel can read)".to_owned()
                    }
                    Err(_) => db.display().to_string(),
                })
        ),
        source,
        from,
    });
    entries
}

/// The schema's defaults, by dotted key.
fn defaults(schema: &Value, prefix: &str, out: &mut BTreeMap<String, Entry>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, child) in properties {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if let Some(value) = child.get("default") {
            out.insert(
                path.clone(),
                Entry {
                    key: path.clone(),
                    value: value.clone(),
                    source: "default",
                    from: None,
                },
            );
        }
        defaults(child, &path, out);
    }
}

/// Leaves of a JSON value by dotted key; lists are leaves.
fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() || prefix.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(child, &path, out);
            }
        }
        other => out.push((prefix.to_owned(), other.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_dotted_and_lists_are_whole() {
        let mut out = Vec::new();
        flatten(
            &json!({"llm": {"model": "m", "headers": {}}, "search": {"backends": ["a"]}}),
            "",
            &mut out,
        );
        let mut keys: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["llm.headers", "llm.model", "search.backends"]);
    }
}
