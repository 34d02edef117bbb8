//! The `fetch` section of agent.json: which non-public hosts may be
//! reached, and the limits of one fetch.

use std::time::Duration;

use serde::Deserialize;

use super::guard::Guard;
use satchel_tools::Settings;

/// How `fetch` fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchConfig {
    /// What may be reached beyond public addresses.
    pub guard: Guard,
    /// Time one fetch (redirects included) may take.
    pub timeout: Duration,
    /// Bytes of a body read at most; the rest is left out, with a note.
    pub max_bytes: usize,
    /// How long a fetched page is reused.
    pub cache_ttl: Duration,
}

impl Default for FetchConfig {
    fn default() -> FetchConfig {
        FetchConfig::from(FetchSettings::default())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct FetchSettings {
    allow_private: bool,
    allow_hosts: Vec<String>,
    timeout_ms: u64,
    max_bytes: usize,
    cache_ttl_secs: u64,
}

impl Default for FetchSettings {
    fn default() -> FetchSettings {
        FetchSettings {
            allow_private: false,
            allow_hosts: Vec::new(),
            timeout_ms: 30_000,
            max_bytes: 5 * 1024 * 1024,
            cache_ttl_secs: 15 * 60,
        }
    }
}

impl From<FetchSettings> for FetchConfig {
    fn from(settings: FetchSettings) -> FetchConfig {
        FetchConfig {
            guard: Guard {
                allow_private: settings.allow_private,
                allow_hosts: settings.allow_hosts,
            },
            timeout: Duration::from_millis(settings.timeout_ms.max(1)),
            max_bytes: settings.max_bytes.max(1),
            cache_ttl: Duration::from_secs(settings.cache_ttl_secs),
        }
    }
}

impl FetchConfig {
    /// Reads the `fetch` section; what cannot be understood is a warning.
    pub fn from_settings(settings: &Settings) -> (FetchConfig, Vec<String>) {
        let (section, warning) = settings.section::<FetchSettings>("fetch");
        (FetchConfig::from(section), warning.into_iter().collect())
    }
}
