//! Many tools, few tokens: when the tools imported from MCP servers would
//! take more than `toolIndex.share` of the context window, the model is
//! sent the other tools whole, a one-line index of the imported ones inside
//! `tool_search`'s description, and the full definitions only of those it
//! loaded with `tool_search` in this conversation.
//!
//! `tool_search` is the loop's own: answered from the registry snapshot
//! without running anything (so it needs no policy and starts no process),
//! recorded like any call. Calling an indexed tool that was never loaded
//! still works: dispatch validates it against its schema as always.

use std::collections::BTreeSet;
use std::sync::Arc;

use satchel_core::edit_forms::EditForm;
use satchel_core::{ErrorCode, ToolAnnotations, ToolOutput, ToolResults, ToolSpec};
use satchel_llm::{Encoding, count_tokens};
use satchel_tools::{Registry, ToolSource};
use serde_json::{Value, json};

/// The loop's tool that loads indexed definitions.
pub const TOOL_SEARCH: &str = "tool_search";

/// The registry group MCP imports are registered under.
const MCP_GROUP: &str = "mcp";

/// Most definitions one search returns.
const MAX_RESULTS: usize = 8;

/// Characters of a tool's description kept in its index line.
const INDEX_LINE_CHARS: usize = 90;

/// `toolIndex` in agent.json.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexConfig {
    /// Share of the context window imported tools' definitions may take
    /// before they are indexed instead (0 indexes them always, 1 never).
    pub share: f64,
    /// Servers whose tools are always sent whole.
    pub always_load: Vec<String>,
}

impl Default for IndexConfig {
    fn default() -> IndexConfig {
        IndexConfig {
            share: 0.1,
            always_load: Vec::new(),
        }
    }
}

/// The tools one request offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// What the request carries: shared with the registry when it is
    /// every tool of the edit form ([`Registry::offered_specs`]).
    pub specs: Arc<[ToolSpec]>,
    /// How many imported tools are in the index rather than whole.
    pub indexed: usize,
}

/// Whether `tool` is an imported tool the index may hold back.
fn indexable(source: &ToolSource, config: &IndexConfig) -> bool {
    matches!(source, ToolSource::Extra { group, origin }
        if group == MCP_GROUP && !config.always_load.iter().any(|server| server == origin))
}

/// The tools to send: everything, or the index and what was loaded; of
/// the editing tools, only those of `edit_form`.
pub fn offer(
    registry: &Registry,
    config: &IndexConfig,
    loaded: &BTreeSet<String>,
    context_window: u32,
    encoding: Encoding,
    edit_form: EditForm,
) -> Offer {
    // Specs are not cloned for the common offer (every tool, shared by the
    // registry) and cloned once otherwise: their schemas are deep JSON,
    // and every turn of every conversation builds an offer.
    let mut whole = Vec::new();
    let mut held = Vec::new();
    for tool in registry
        .names()
        .filter(|name| edit_form.offers(name))
        .filter_map(|name| registry.get(name))
    {
        if indexable(&tool.source(), config) {
            held.push(tool.spec());
        } else {
            whole.push(tool.spec());
        }
    }
    let cost: u64 = held
        .iter()
        .map(|spec| count_tokens(encoding, &definition(spec).to_string()))
        .sum();
    let budget = config.share.clamp(0.0, 1.0) * f64::from(context_window);
    if held.is_empty() || (cost as f64) <= budget {
        return Offer {
            specs: registry.offered_specs(edit_form),
            indexed: 0,
        };
    }
    let mut whole: Vec<ToolSpec> = whole.into_iter().cloned().collect();
    let mut index = Vec::new();
    for spec in held {
        if loaded.contains(&spec.name) {
            whole.push(spec.clone());
        } else {
            index.push(index_line(spec));
        }
    }
    let indexed = index.len();
    whole.push(search_spec(&index));
    Offer {
        specs: whole.into(),
        indexed,
    }
}

/// `name: the first sentence of its description`, cut short.
fn index_line(spec: &ToolSpec) -> String {
    let first = spec
        .description
        .split_terminator(['\n', '.'])
        .next()
        .unwrap_or_default()
        .trim();
    let (cut, shortened) = satchel_core::text::char_prefix(first, INDEX_LINE_CHARS);
    if shortened {
        format!("{}: {cut}…", spec.name)
    } else {
        format!("{}: {cut}", spec.name)
    }
}

/// A definition as a request carries it.
fn definition(spec: &ToolSpec) -> Value {
    json!({"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema})
}

/// `tool_search`, with the index in its description.
fn search_spec(index: &[String]) -> ToolSpec {
    ToolSpec {
        name: TOOL_SEARCH.into(),
        title: Some("Tool search".into()),
        description: format!(
            "Load the full definitions of more tools before calling them. These tools exist \
             but only their names are listed here, to save room:\n{}\n\nGive `names` to load \
             those tools, or `query` (keywords) to find them; then call them as usual.",
            index.join("\n")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords to look for in names and descriptions"},
                "names": {"type": "array", "items": {"type": "string"}, "description": "Exact tool names to load"},
            },
            "additionalProperties": false,
        }),
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            ..ToolAnnotations::default()
        },
        capabilities: Default::default(),
    }
}

/// Answers a `tool_search` call from `registry`: the definitions found,
/// whose names are then loaded for the rest of the conversation.
pub fn search(registry: &Registry, input: &Value) -> (ToolOutput, Vec<String>) {
    let names: Vec<&str> = input
        .get("names")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let words: Vec<String> = input
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    if names.is_empty() && words.is_empty() {
        return (
            ToolOutput::error(
                ErrorCode::InvalidParams,
                "give `names` (tools from the list in tool_search's description) or a `query` of keywords",
            ),
            Vec::new(),
        );
    }
    let mut scored: Vec<(usize, &ToolSpec)> = registry
        .specs()
        .filter(|spec| spec.name != TOOL_SEARCH)
        .filter_map(|spec| {
            if names.contains(&spec.name.as_str()) {
                return Some((usize::MAX, spec));
            }
            let haystack = format!("{} {}", spec.name, spec.description).to_lowercase();
            let hits = words
                .iter()
                .filter(|w| haystack.contains(w.as_str()))
                .count();
            (hits > 0).then_some((hits, spec))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let more = scored.len().saturating_sub(MAX_RESULTS);
    let found: Vec<&ToolSpec> = scored
        .into_iter()
        .take(MAX_RESULTS)
        .map(|(_, s)| s)
        .collect();
    let unknown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !found.iter().any(|spec| spec.name == *name))
        .collect();
    let loaded: Vec<String> = found.iter().map(|spec| spec.name.clone()).collect();
    let results = json!({
        "tools": found.iter().map(|spec| definition(spec)).collect::<Vec<_>>(),
        "more": more,
        "unknown": unknown,
    });
    let message = if loaded.is_empty() {
        "found no tool".to_owned()
    } else {
        format!("loaded {}", loaded.join(", "))
    };
    let mut output = ToolOutput::success(ToolResults::json(results), message);
    if loaded.is_empty() {
        output = output.with_response(
            "No tool matched: try other keywords, or names from tool_search's description.",
        );
    }
    (output, loaded)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use std::sync::Arc;

    use async_trait::async_trait;
    use satchel_tools::{Tool, ToolContext, ToolError};

    use super::*;

    /// A tool as an MCP import registers it (a built-in without a server).
    struct Imported {
        spec: ToolSpec,
        server: &'static str,
    }

    #[async_trait]
    impl Tool for Imported {
        fn spec(&self) -> &ToolSpec {
            &self.spec
        }

        fn source(&self) -> ToolSource {
            if self.server.is_empty() {
                return ToolSource::Builtin;
            }
            ToolSource::Extra {
                group: MCP_GROUP.into(),
                origin: self.server.into(),
            }
        }

        async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::success(ToolResults::Text("ok".into()), "ok"))
        }
    }

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: json!({"type": "object", "properties": {"text": {"type": "string", "description": "what to work on, at length"}}}),
            output_schema: None,
            annotations: ToolAnnotations::default(),
            capabilities: Default::default(),
        }
    }

    /// `bash`, plus 40 tools of `github` and 2 of `notes`.
    fn registry() -> Registry {
        let mut registry = Registry::new();
        registry
            .register_arc(Arc::new(Imported {
                spec: spec("bash", "Run a command."),
                server: "",
            }))
            .unwrap();
        let mut tools: Vec<(String, &'static str)> = (0..40)
            .map(|i| (format!("github__tool_{i:02}"), "github"))
            .collect();
        tools.push(("notes__add".into(), "notes"));
        tools.push(("notes__find".into(), "notes"));
        for (name, server) in tools {
            let description =
                format!("Does {name} things with the repository. Long details follow.");
            registry
                .register_arc(Arc::new(Imported {
                    spec: spec(&name, &description),
                    server,
                }))
                .unwrap();
        }
        registry
    }

    fn names(offer: &Offer) -> Vec<&str> {
        offer.specs.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn imported_tools_are_indexed_only_past_their_share_of_the_window() {
        let registry = registry();
        let loaded = BTreeSet::new();
        // A huge window: everything goes whole.
        let all = offer(
            &registry,
            &IndexConfig::default(),
            &loaded,
            10_000_000,
            Encoding::O200k,
            EditForm::Satchel,
        );
        assert_eq!(all.indexed, 0);
        assert_eq!(all.specs.len(), registry.len());
        // A small one: the imports are held back, `tool_search` lists them.
        let small = offer(
            &registry,
            &IndexConfig::default(),
            &loaded,
            8_192,
            Encoding::O200k,
            EditForm::Satchel,
        );
        assert_eq!(small.indexed, 42);
        assert_eq!(names(&small), ["bash", TOOL_SEARCH]);
        let index = &small.specs[1].description;
        assert!(
            index.contains("github__tool_07: Does github__tool_07 things with the repository\n"),
            "{index}"
        );
        assert!(!index.contains("Long details"), "{index}");
    }

    #[test]
    fn loaded_and_always_loaded_tools_go_whole() {
        let registry = registry();
        let config = IndexConfig {
            share: 0.0,
            always_load: vec!["notes".into()],
        };
        let loaded: BTreeSet<String> = ["github__tool_03".to_owned()].into();
        let offered = offer(
            &registry,
            &config,
            &loaded,
            8_192,
            Encoding::O200k,
            EditForm::Satchel,
        );
        assert_eq!(offered.indexed, 39);
        let mut offered_names = names(&offered);
        offered_names.sort_unstable();
        assert_eq!(
            offered_names,
            [
                "bash",
                "github__tool_03",
                "notes__add",
                "notes__find",
                TOOL_SEARCH
            ]
        );
    }

    #[test]
    fn a_search_returns_definitions_by_name_or_keyword() {
        let registry = registry();
        let (output, loaded) = search(&registry, &json!({"names": ["github__tool_05", "nope"]}));
        assert!(!output.is_error);
        assert_eq!(loaded, ["github__tool_05"]);
        let results = output.results.structured().unwrap();
        assert_eq!(results["tools"][0]["name"], "github__tool_05");
        assert_eq!(results["tools"][0]["inputSchema"]["type"], "object");
        assert_eq!(results["unknown"], json!(["nope"]));

        let (output, loaded) = search(&registry, &json!({"query": "notes__FIND"}));
        assert_eq!(loaded, ["notes__find"], "{output:?}");
        let (output, loaded) = search(&registry, &json!({"query": "repository"}));
        assert_eq!(loaded.len(), MAX_RESULTS);
        assert_eq!(
            output.results.structured().unwrap()["more"],
            42 - MAX_RESULTS
        );

        let (output, loaded) = search(&registry, &json!({}));
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
        assert!(loaded.is_empty());
    }
}
