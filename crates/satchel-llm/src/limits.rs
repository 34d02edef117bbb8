//! Where a model's limits come from ([`LimitSource`]) and the ones Satchel
//! derives when nothing gives them: the largest answer to ask for
//! ([`derived_output_limit`]), so that a rambling local model stops within
//! seconds instead of when its context is full.
//!
//! Precedence, for the context window and the output limit alike: what
//! agent.json configures, then what the server itself reports
//! ([`crate::server_info`]), then the built-in table ([`crate::model_info`]),
//! then the documented guess for a model nobody knows.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a limit (the context window, the output limit) came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum LimitSource {
    /// agent.json (`llm.contextWindow`, `llm.maxOutputTokens`).
    Configured,
    /// The server's own report; the detail names the endpoint read
    /// (e.g. `llama.cpp GET /props`).
    Server(String),
    /// The built-in table of known model families.
    Table,
    /// Derived from the window (the output limit only).
    Derived,
    /// A guess for a model that neither the table nor the server knows.
    Guessed,
}

impl fmt::Display for LimitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitSource::Configured => f.write_str("configured in agent.json"),
            LimitSource::Server(endpoint) => write!(f, "reported by the server ({endpoint})"),
            LimitSource::Table => f.write_str("Satchel's table of known models"),
            LimitSource::Derived => f.write_str("derived from the window"),
            LimitSource::Guessed => f.write_str(
                "guessed: neither the server nor Satchel's table knows this model; \
                 set llm.contextWindow",
            ),
        }
    }
}

/// The share of the window a derived output limit may take: one eighth, so
/// a request at the compaction threshold (80 % by default) still has room
/// for its answer.
pub(crate) const OUTPUT_SHARE_DIVISOR: u32 = 8;

/// The smallest derived output limit: enough for a short answer or a tool
/// call even in a tiny window.
pub(crate) const MIN_DERIVED_OUTPUT: u32 = 256;

/// The largest answer to ask for when none is configured: an eighth of
/// `window` (at least `MIN_DERIVED_OUTPUT`), and never more than the
/// model's own limit (`model_max`, from the server or the table).
pub fn derived_output_limit(window: u32, model_max: u32) -> u32 {
    (window / OUTPUT_SHARE_DIVISOR)
        .max(MIN_DERIVED_OUTPUT)
        .min(model_max.max(1))
        .min(window.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_limit_is_an_eighth_of_the_window_within_the_models_own() {
        assert_eq!(derived_output_limit(8_192, 4_096), 1_024);
        assert_eq!(derived_output_limit(128_000, 16_384), 16_000);
        assert_eq!(derived_output_limit(1_047_576, 32_768), 32_768);
        assert_eq!(derived_output_limit(1_024, 4_096), 256);
        assert_eq!(derived_output_limit(200, 4_096), 200);
    }

    #[test]
    fn each_source_says_where_the_figure_came_from() {
        assert_eq!(
            LimitSource::Server("llama.cpp GET /props".into()).to_string(),
            "reported by the server (llama.cpp GET /props)"
        );
        assert!(
            LimitSource::Guessed
                .to_string()
                .contains("llm.contextWindow")
        );
    }
}
