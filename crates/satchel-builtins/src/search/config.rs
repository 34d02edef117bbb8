//! The `search` section of agent.json, with API keys read from the
//! environment variables it names (never from the file, never logged).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::backend::Backend;
use satchel_tools::Settings;

/// The message when no backend is usable; says exactly what to set.
pub(crate) const NOT_CONFIGURED: &str = "search is not configured: set SEARXNG_URL (a SearXNG instance with JSON output \
     enabled), BRAVE_API_KEY or TAVILY_API_KEY in the environment, or list backends in .agents/agent.json, e.g. \
     \"search\": {\"backends\": [\"duckduckgo\"]}";

/// Backends in order, and how long to wait, cool down and cache.
#[derive(Clone, PartialEq)]
pub struct SearchConfig {
    pub(crate) backends: Vec<Backend>,
    /// Time a backend gets to answer.
    pub timeout: Duration,
    /// How long a failed backend is skipped.
    pub cooldown: Duration,
    /// How long an answer is reused.
    pub cache_ttl: Duration,
}

impl fmt::Debug for SearchConfig {
    /// Names and URLs only: keys never reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchConfig")
            .field("backends", &self.backend_names())
            .field("timeout", &self.timeout)
            .field("cooldown", &self.cooldown)
            .field("cache_ttl", &self.cache_ttl)
            .finish()
    }
}

impl Default for SearchConfig {
    fn default() -> SearchConfig {
        let settings = SearchSettings::default();
        SearchConfig {
            backends: Vec::new(),
            timeout: Duration::from_millis(settings.timeout_ms),
            cooldown: Duration::from_secs(settings.cooldown_secs),
            cache_ttl: Duration::from_secs(settings.cache_ttl_secs),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct SearchSettings {
    backends: Option<Vec<String>>,
    searxng: Endpoint,
    brave: Endpoint,
    tavily: Endpoint,
    duckduckgo: Endpoint,
    timeout_ms: u64,
    cooldown_secs: u64,
    cache_ttl_secs: u64,
}

impl Default for SearchSettings {
    fn default() -> SearchSettings {
        SearchSettings {
            backends: None,
            searxng: Endpoint::default(),
            brave: Endpoint::default(),
            tavily: Endpoint::default(),
            duckduckgo: Endpoint::default(),
            timeout_ms: 10_000,
            cooldown_secs: 60,
            cache_ttl_secs: 3600,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct Endpoint {
    base_url: Option<String>,
    api_key_env: Option<String>,
}

impl SearchConfig {
    /// Names of the usable backends, in order.
    pub fn backend_names(&self) -> Vec<&'static str> {
        self.backends.iter().map(Backend::name).collect()
    }

    /// Reads the `search` section; keys come from `env`. Without a
    /// `backends` list, every backend the environment enables is used:
    /// SearXNG (`SEARXNG_URL`), then Brave (`BRAVE_API_KEY`), then Tavily
    /// (`TAVILY_API_KEY`). DuckDuckGo is only used when listed.
    pub fn from_settings(
        settings: &Settings,
        env: &BTreeMap<String, String>,
    ) -> (SearchConfig, Vec<String>) {
        let (section, warning) = settings.section::<SearchSettings>("search");
        let mut warnings: Vec<String> = warning.into_iter().collect();
        let var = |name: &str| {
            env.get(name)
                .filter(|value| !value.trim().is_empty())
                .cloned()
        };
        let key = |endpoint: &Endpoint, default: &str| {
            let name = endpoint
                .api_key_env
                .clone()
                .unwrap_or_else(|| default.to_owned());
            (var(&name), name)
        };
        let listed = section.backends.is_some();
        let names = section
            .backends
            .clone()
            .unwrap_or_else(|| vec!["searxng".into(), "brave".into(), "tavily".into()]);
        let mut backends = Vec::new();
        for name in names {
            let backend = match name.as_str() {
                "searxng" => {
                    match section
                        .searxng
                        .base_url
                        .clone()
                        .or_else(|| var("SEARXNG_URL"))
                    {
                        Some(base_url) => Some(Backend::Searxng { base_url }),
                        None => {
                            if listed {
                                warnings.push("search: searxng is listed but has no URL; set search.searxng.baseUrl or SEARXNG_URL".into());
                            }
                            None
                        }
                    }
                }
                "brave" => match key(&section.brave, "BRAVE_API_KEY") {
                    (Some(api_key), _) => Some(Backend::Brave {
                        base_url: section
                            .brave
                            .base_url
                            .clone()
                            .unwrap_or_else(|| "https://api.search.brave.com".into()),
                        api_key,
                    }),
                    (None, variable) => {
                        if listed {
                            warnings.push(format!(
                                "search: brave is listed but ${variable} is not set"
                            ));
                        }
                        None
                    }
                },
                "tavily" => match key(&section.tavily, "TAVILY_API_KEY") {
                    (Some(api_key), _) => Some(Backend::Tavily {
                        base_url: section
                            .tavily
                            .base_url
                            .clone()
                            .unwrap_or_else(|| "https://api.tavily.com".into()),
                        api_key,
                    }),
                    (None, variable) => {
                        if listed {
                            warnings.push(format!(
                                "search: tavily is listed but ${variable} is not set"
                            ));
                        }
                        None
                    }
                },
                "duckduckgo" => Some(Backend::DuckDuckGo {
                    base_url: section
                        .duckduckgo
                        .base_url
                        .clone()
                        .unwrap_or_else(|| "https://html.duckduckgo.com".into()),
                }),
                other => {
                    warnings.push(format!(
                        "search: unknown backend `{other}` (searxng, brave, tavily, duckduckgo)"
                    ));
                    None
                }
            };
            backends.extend(backend);
        }
        let config = SearchConfig {
            backends,
            timeout: Duration::from_millis(section.timeout_ms.max(1)),
            cooldown: Duration::from_secs(section.cooldown_secs),
            cache_ttl: Duration::from_secs(section.cache_ttl_secs),
        };
        (config, warnings)
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
