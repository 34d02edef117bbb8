//! The `search` tool: web and news search over SearXNG, Brave, Tavily and
//! DuckDuckGo, in a configured order with failover, normalised results,
//! and a cache so a repeated query costs nothing.
//!
//! Modules: `backend` (each service's wire format), `normalize` (text,
//! dates, URLs, duplicates), `config` (the `search` section and the
//! environment), `cache` (remembered answers).

mod backend;
mod cache;
mod config;
mod normalize;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use self::backend::BackendError;
pub use self::cache::{MemoryCache, SearchCache};
pub use self::config::SearchConfig;
use satchel_tools::format::{Style, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

/// Results returned when the input does not say.
const DEFAULT_MAX_RESULTS: usize = 5;
/// Most results a call may ask for.
const MAX_RESULTS: usize = 10;

/// Web pages or news articles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Web pages.
    #[default]
    Web,
    /// News articles.
    News,
}

/// One search result as the model gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    /// The page's title.
    pub title: String,
    /// Its URL, without tracking parameters.
    pub url: String,
    /// A plain-text excerpt.
    pub snippet: String,
    /// When it was published, ISO 8601, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

#[derive(Deserialize)]
struct SearchInput {
    query: String,
    #[serde(default, rename = "type")]
    kind: Kind,
    max_results: Option<usize>,
}

/// The search tool; keeps each backend's cool-down and the cache.
pub struct SearchTool {
    spec: ToolSpec,
    /// Built on the first search: loading the system's certificates costs
    /// every command that never searches otherwise.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    cache: Arc<dyn SearchCache>,
    cooling: Mutex<HashMap<&'static str, Instant>>,
}

impl SearchTool {
    /// The tool, caching answers in `cache`.
    pub fn new(cache: Arc<dyn SearchCache>) -> SearchTool {
        SearchTool {
            spec: spec(),
            client: std::sync::OnceLock::new(),
            cache,
            cooling: Mutex::default(),
        }
    }

    /// The HTTP client, built on first use. Fails only with a broken
    /// system certificate store; then searches fail one by one with a
    /// clear error instead of Satchel not starting.
    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                satchel_http::client_builder()
                    .map_err(|e| e.to_string())
                    .and_then(|b| b.build().map_err(|e| format!("cannot set up TLS: {e}")))
            })
            .as_ref()
            .map_err(|e| ToolError::new(ErrorCode::ToolUnavailable, e.clone()))
    }

    fn cooling_until(&self, backend: &'static str) -> Option<Instant> {
        let cooling = self
            .cooling
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cooling
            .get(backend)
            .copied()
            .filter(|until| *until > Instant::now())
    }

    fn cool_down(&self, backend: &'static str, period: Duration) {
        let mut cooling = self
            .cooling
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cooling.insert(backend, Instant::now() + period);
    }

    /// Searches with the first backend that answers, skipping those
    /// cooling down after a failure.
    async fn search(
        &self,
        config: &SearchConfig,
        query: &str,
        kind: Kind,
        max: usize,
    ) -> Result<Value, ToolError> {
        if config.backends.is_empty() {
            return Err(ToolError::new(
                ErrorCode::ToolUnavailable,
                config::NOT_CONFIGURED,
            ));
        }
        let key = format!(
            "{kind:?}\u{1f}{max}\u{1f}{}",
            query
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
        );
        if let Some(mut cached) = self.cache.get(&key) {
            cached["cached"] = json!(true);
            return Ok(cached);
        }
        let mut failures: Vec<(String, BackendError)> = Vec::new();
        let mut skipped = Vec::new();
        for backend in &config.backends {
            let name = backend.name();
            if !backend.supports(kind) {
                skipped.push(format!("{name} (no {kind:?} search)").to_lowercase());
                continue;
            }
            if let Some(until) = self.cooling_until(name) {
                skipped.push(format!(
                    "{name} (cooling down for {} s)",
                    until.saturating_duration_since(Instant::now()).as_secs()
                ));
                continue;
            }
            let client = self.client()?;
            match backend
                .search(client, query, kind, max, config.timeout)
                .await
            {
                Ok(raw) => {
                    let hits = normalize::normalise(raw, max, &jiff::Zoned::now());
                    let answer = json!({"results": hits, "backend": name, "cached": false});
                    self.cache.put(&key, answer.clone(), config.cache_ttl);
                    return Ok(answer);
                }
                Err(error) => {
                    let period = match &error {
                        BackendError::RateLimited {
                            retry_after: Some(wait),
                        } => (*wait).max(config.cooldown),
                        _ => config.cooldown,
                    };
                    tracing::info!(backend = name, %error, "search backend failed; trying the next");
                    self.cool_down(name, period);
                    failures.push((name.to_owned(), error));
                }
            }
        }
        Err(all_failed(failures, skipped))
    }
}

/// The error when no backend answered: the code says the common cause.
fn all_failed(failures: Vec<(String, BackendError)>, skipped: Vec<String>) -> ToolError {
    let code = if !failures.is_empty()
        && failures
            .iter()
            .all(|(_, e)| matches!(e, BackendError::RateLimited { .. }))
    {
        ErrorCode::RateLimited
    } else if !failures.is_empty()
        && failures
            .iter()
            .all(|(_, e)| matches!(e, BackendError::Timeout(_)))
    {
        ErrorCode::ToolTimeout
    } else {
        ErrorCode::ToolCrashed
    };
    let mut parts: Vec<String> = failures
        .iter()
        .map(|(name, error)| format!("{name}: {error}"))
        .collect();
    if !skipped.is_empty() {
        parts.push(format!("skipped: {}", skipped.join(", ")));
    }
    ToolError::new(
        code,
        format!(
            "no search backend answered ({}); try again later",
            parts.join("; ")
        ),
    )
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "search".into(),
        title: Some("Web search".into()),
        description:
            "Search the web or the news: up to max_results results with title, url, snippet and date."
                .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to search for"},
                "type": {"type": "string", "enum": ["web", "news"], "default": "web"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_MAX_RESULTS}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "results": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"}, "url": {"type": "string"},
                        "snippet": {"type": "string"}, "date": {"type": "string"}
                    },
                    "required": ["title", "url", "snippet"]
                }},
                "backend": {"type": "string", "description": "The service that answered"},
                "cached": {"type": "boolean"}
            },
            "required": ["results", "backend"]
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            long_running_hint: None,
        },
        capabilities: Capabilities { reads: vec![Resource::INTERNET], writes: vec![] },
    }
}

#[async_trait]
impl Tool for SearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: SearchInput = serde_json::from_value(input).map_err(|error| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("invalid search input: {error}"),
            )
        })?;
        let max = input
            .max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, MAX_RESULTS);
        let config = crate::search_config(&ctx.config);
        let answer = tokio::select! {
            answer = self.search(&config, &input.query, input.kind, max) => answer?,
            () = ctx.cancel.cancelled() => return Err(ToolError::new(ErrorCode::Cancelled, "the search was cancelled")),
        };
        let count = answer["results"].as_array().map_or(0, Vec::len);
        let via = answer["backend"].as_str().unwrap_or("?").to_owned();
        let cached = if answer["cached"] == json!(true) {
            ", cached"
        } else {
            ""
        };
        let user_message = format!(
            "searched {} for \"{}\": {count} results (via {via}{cached})",
            kind_word(input.kind),
            input.query
        );
        Ok(ToolOutput::success(ToolResults::json(answer), user_message))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let news = input.get("type").and_then(Value::as_str) == Some("news");
        let label = if news { "news search" } else { "search" };
        match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "2", label), paint(style, "1", query))
            }
            Style::Markdown => format!("{label}: **{query}**"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let Some(results) = output
            .results
            .structured()
            .and_then(|v| v.get("results"))
            .and_then(Value::as_array)
        else {
            return satchel_tools::format::generic_result(output, style);
        };
        let mut lines = Vec::new();
        for (index, hit) in results.iter().enumerate() {
            let field = |key: &str| hit.get(key).and_then(Value::as_str).unwrap_or_default();
            let date = hit
                .get("date")
                .and_then(Value::as_str)
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            match style {
                Style::Terminal { .. } => {
                    lines.push(format!(
                        "{}. {}{date}",
                        index + 1,
                        paint(style, "1", field("title"))
                    ));
                    lines.push(format!("   {}", paint(style, "4", field("url"))));
                    if !field("snippet").is_empty() {
                        lines.push(format!("   {}", paint(style, "2", field("snippet"))));
                    }
                }
                Style::Markdown => {
                    lines.push(format!(
                        "{}. [{}]({}){date}",
                        index + 1,
                        field("title"),
                        field("url")
                    ));
                    if !field("snippet").is_empty() {
                        lines.push(format!("   {}", field("snippet")));
                    }
                }
            }
        }
        if results.is_empty() {
            lines.push("no results".into());
        }
        lines.push(paint(style, "2", &output.user_message));
        lines.join("\n")
    }
}

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Web => "the web",
        Kind::News => "the news",
    }
}
