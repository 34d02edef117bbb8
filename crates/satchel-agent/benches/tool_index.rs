//! Many tools, few tokens: the tokens of the tool definitions a request
//! carries with 200 imported MCP tools (plus Satchel's five built-ins),
//! sent whole and indexed (nothing loaded, then 5 loaded), measured on the
//! exact request body each provider format builds; and what choosing the
//! tools costs per turn, next to building the request.
//!
//! The imported tools are generated deterministically with the shape of
//! real MCP servers' tools (a two- or three-sentence description, three to
//! six described parameters, a required list).
//!
//! Run with `cargo bench -p satchel-agent --bench tool_index`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // A bench fails loudly and prints its table.

use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use satchel_agent::tool_index::{IndexConfig, offer};
use satchel_core::edit_forms::EditForm;
use satchel_core::{Message, ToolOutput, ToolResults, ToolSpec};
use satchel_llm::{ChatRequest, LlmConfig, Mode, ProviderKind, Section, connect};
use satchel_tools::{Registry, Tool, ToolContext, ToolError, ToolSource};
use serde_json::{Value, json};

/// An imported tool: only its spec and its server matter here.
struct Imported {
    spec: ToolSpec,
    server: String,
}

#[async_trait]
impl Tool for Imported {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: "mcp".into(),
            origin: self.server.clone(),
        }
    }

    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::success(ToolResults::Text(String::new()), ""))
    }
}

const VERBS: [&str; 8] = [
    "list", "get", "create", "update", "delete", "search", "merge", "export",
];
const NOUNS: [&str; 10] = [
    "issues",
    "pull_requests",
    "branches",
    "commits",
    "releases",
    "labels",
    "comments",
    "workflows",
    "deployments",
    "reviews",
];
const PARAMS: [(&str, &str, &str); 6] = [
    (
        "owner",
        "string",
        "The account that owns the repository, a user or an organisation.",
    ),
    (
        "repo",
        "string",
        "The repository's name, without the owner.",
    ),
    (
        "state",
        "string",
        "Which items to include: open, closed or all. Defaults to open.",
    ),
    (
        "per_page",
        "integer",
        "How many results per page, at most 100.",
    ),
    (
        "page",
        "integer",
        "The page of results to return, starting at 1.",
    ),
    (
        "query",
        "string",
        "Free text matched against titles and bodies, with GitHub's search qualifiers.",
    ),
];

/// 200 tools across 5 servers.
fn imported() -> Vec<Imported> {
    (0..200)
        .map(|i| {
            let verb = VERBS[i % VERBS.len()];
            let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
            let server = format!("server{}", i % 5);
            let name = format!("{server}__{verb}_{noun}_{i}");
            let count = 3 + i % 4;
            let properties: serde_json::Map<String, Value> = PARAMS[..count]
                .iter()
                .map(|(key, kind, description)| {
                    (
                        (*key).to_owned(),
                        json!({"type": kind, "description": description}),
                    )
                })
                .collect();
            Imported {
                spec: ToolSpec {
                    name,
                    title: None,
                    description: format!(
                        "{verb} the {noun} of a repository. Results are paginated and sorted by \
                         last update, newest first. Requires read access to the repository{}.",
                        if i % 3 == 0 {
                            "; writes need a token with the repo scope"
                        } else {
                            ""
                        }
                    ),
                    input_schema: json!({
                        "type": "object",
                        "properties": properties,
                        "required": ["owner", "repo"],
                    }),
                    output_schema: None,
                    annotations: Default::default(),
                    capabilities: Default::default(),
                },
                server,
            }
        })
        .collect()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    for tool in satchel_builtins::builtin_tools(&satchel_builtins::BuiltinDeps::default()) {
        registry.register_builtin(tool).unwrap();
    }
    for tool in imported() {
        registry.register_arc(Arc::new(tool)).unwrap();
    }
    registry
}

fn main() {
    let registry = registry();
    let history = vec![
        Message::system("You are a capable assistant."),
        Message::user("Which of my open pull requests have failing checks?"),
    ];
    let env: HashMap<String, String> = HashMap::new();
    println!();
    println!("tool definitions in one request: 5 built-ins + 200 imported MCP tools");
    println!(
        "| format    | offer                    | tools sent | tool tokens | request tokens | ratio to whole | offer µs (p50) | build µs (p50) |"
    );
    println!(
        "|-----------|--------------------------|-----------:|------------:|---------------:|---------------:|---------------:|---------------:|"
    );
    for (kind, base, model) in [
        (ProviderKind::OpenAi, "http://127.0.0.1:9/v1", "gpt-4.1"),
        (
            ProviderKind::Anthropic,
            "http://127.0.0.1:9",
            "claude-sonnet-4-5",
        ),
    ] {
        let config = LlmConfig {
            provider: Some(kind),
            base_url: Some(base.into()),
            model: Some(model.into()),
            ..LlmConfig::default()
        }
        .resolve(&env)
        .unwrap();
        let window = config.context_window;
        let encoding = config.encoding;
        let provider = connect(config).unwrap();
        let loaded: BTreeSet<String> = imported()
            .iter()
            .take(5)
            .map(|tool| tool.spec.name.clone())
            .collect();
        let cases = [
            (
                "whole (share 1)",
                IndexConfig {
                    share: 1.0,
                    always_load: vec![],
                },
                BTreeSet::new(),
            ),
            (
                "indexed, none loaded",
                IndexConfig {
                    share: 0.0,
                    always_load: vec![],
                },
                BTreeSet::new(),
            ),
            (
                "indexed, 5 loaded",
                IndexConfig {
                    share: 0.0,
                    always_load: vec![],
                },
                loaded,
            ),
        ];
        let mut whole_tokens = 0;
        for (label, index, loaded) in cases {
            let offered = offer(
                &registry,
                &index,
                &loaded,
                window,
                encoding,
                EditForm::Satchel,
            );
            let request = ChatRequest::new(&history, &offered.specs);
            let prepared = provider.prepare(&request, Mode::Stream).unwrap();
            let estimate = prepared.estimate();
            let tools = estimate.section(Section::Tools);
            if whole_tokens == 0 {
                whole_tokens = tools;
            }
            let offer_time = p50(|| {
                black_box(offer(
                    &registry,
                    &index,
                    &loaded,
                    window,
                    encoding,
                    EditForm::Satchel,
                ));
            });
            let build_time = p50(|| {
                black_box(provider.prepare(&request, Mode::Stream).unwrap());
            });
            println!(
                "| {:<9} | {:<24} | {:>10} | {:>11} | {:>14} | {:>14.3} | {:>14.0} | {:>14.0} |",
                format!("{kind:?}"),
                label,
                offered.specs.len(),
                tools,
                estimate.total,
                tools as f64 / whole_tokens as f64,
                offer_time.as_secs_f64() * 1e6,
                build_time.as_secs_f64() * 1e6,
            );
        }
    }
}

/// The median of 30 runs of `f`, after 3 warm-up runs.
fn p50(mut f: impl FnMut()) -> Duration {
    for _ in 0..3 {
        f();
    }
    let mut times: Vec<Duration> = (0..30)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}
