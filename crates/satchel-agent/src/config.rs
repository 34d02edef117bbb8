//! The loop's own settings: the top-level keys of agent.json that shape a
//! statement (`maxTurns`, `toolResultMaxLength`, `contextThreshold`...).
//!
//! Tools, policy and the model have their own sections, read by their
//! crates; [`crate::HotConfig`] reads them all together.

use satchel_tools::Settings;
use satchel_tools::config::{DEFAULT_TOOL_RESULT_MAX_LENGTH, tool_result_max_length};
use serde::Deserialize;
use serde_json::Value;

/// How the loop runs a statement.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// LLM calls one statement may make; the last one has tools disabled.
    pub max_turns: u32,
    /// Characters of a tool result kept in past turns' summaries.
    pub tool_result_max_length: usize,
    /// The current statement's latest turns whose results are sent whole
    /// (`recentToolTurns`; 0: all); see [`crate::history::Shape`].
    pub recent_tool_turns: usize,
    /// The current statement's latest turns whose text and thinking are
    /// sent (`recentReasoningTurns`; 0: all); see [`crate::history::Shape`].
    pub recent_reasoning_turns: usize,
    /// Share of the context window past which old turns are summarised.
    pub context_threshold: f64,
    /// Past statements always kept whole when older ones are summarised.
    pub keep_recent_statements: usize,
    /// Instructions placed first in every request; `None` for the default.
    pub system_prompt: Option<String>,
    /// Whether goal, objective and title are written by side requests.
    pub side_requests: bool,
    /// When side requests are sent, relative to the main answer.
    pub side_request_timing: SideTiming,
    /// When imported tools are indexed rather than sent whole (`toolIndex`).
    pub tool_index: crate::tool_index::IndexConfig,
}

/// When side requests (goal, objective, title) are sent: `sideRequestTiming`
/// in agent.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SideTiming {
    /// `parallel` for hosted APIs, `sequential` for servers on this
    /// machine or a private network (llama.cpp, Ollama), which often serve
    /// one request at a time.
    #[default]
    Auto,
    /// Beside the first turn: the soonest results, but a server with one
    /// slot either queues the main answer behind them or cuts it off.
    Parallel,
    /// Never while a main request is in flight: after the first turn's
    /// answer has arrived (while its tools run, or after the final answer),
    /// so the main answer's first token never waits for them.
    Sequential,
}

/// The default of `recentToolTurns`: measured by `satchel bench history`
/// (bench/history-results.md).
pub const DEFAULT_RECENT_TOOL_TURNS: usize = 10;

/// The default of `recentReasoningTurns`, measured the same way.
pub(crate) const DEFAULT_RECENT_REASONING_TURNS: usize = 2;

/// The built-in system prompt.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a capable assistant working in the user's project through tools. \
Use tools when they help; read their results carefully; keep going until the task is done, \
then answer briefly. Each batch of tool results starts with a feedback block: the turn budget, \
the conversation goal, the current objective and what the tools have done so far.";

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            max_turns: 25,
            tool_result_max_length: DEFAULT_TOOL_RESULT_MAX_LENGTH,
            recent_tool_turns: DEFAULT_RECENT_TOOL_TURNS,
            recent_reasoning_turns: DEFAULT_RECENT_REASONING_TURNS,
            context_threshold: 0.8,
            keep_recent_statements: 2,
            system_prompt: None,
            side_requests: true,
            side_request_timing: SideTiming::Auto,
            tool_index: crate::tool_index::IndexConfig::default(),
        }
    }
}

/// The keys as written in agent.json; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AgentSettings {
    max_turns: Option<u32>,
    context_threshold: Option<f64>,
    keep_recent_statements: Option<usize>,
    recent_tool_turns: Option<usize>,
    recent_reasoning_turns: Option<usize>,
    system_prompt: Option<String>,
    side_requests: Option<bool>,
    side_request_timing: Option<SideTiming>,
}

/// `toolIndex`: `share` in [0, 1] and `alwaysLoad` server names; a bad
/// value keeps its default, with a warning.
fn tool_index(
    value: &Value,
    files: &str,
    warnings: &mut Vec<String>,
) -> crate::tool_index::IndexConfig {
    let mut index = crate::tool_index::IndexConfig::default();
    match value.get("share").map(Value::as_f64) {
        None => {}
        Some(Some(share)) if (0.0..=1.0).contains(&share) => index.share = share,
        Some(_) => warnings.push(format!(
            "`toolIndex.share` in {files} must be a number in [0, 1]; using {}",
            index.share
        )),
    }
    match value.get("alwaysLoad") {
        None => {}
        Some(Value::Array(servers)) if servers.iter().all(Value::is_string) => {
            index.always_load = servers
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        Some(_) => warnings.push(format!(
            "`toolIndex.alwaysLoad` in {files} must be a list of MCP server names; ignored"
        )),
    }
    index
}

impl AgentConfig {
    /// How the history keeps older turns, from `toolResultMaxLength`,
    /// `recentToolTurns` and `recentReasoningTurns`.
    pub fn history_shape(&self) -> crate::history::Shape {
        crate::history::Shape {
            result_chars: self.tool_result_max_length,
            recent_turns: self.recent_tool_turns,
            reasoning_turns: self.recent_reasoning_turns,
        }
    }

    /// Reads the loop's keys from `settings`; a key of the wrong type or out
    /// of range is ignored with a warning (its default applies).
    pub fn from_settings(settings: &Settings) -> (AgentConfig, Vec<String>) {
        let mut config = AgentConfig::default();
        let mut warnings = Vec::new();
        let files = || {
            settings
                .sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Key by key, so one bad value does not reset the others.
        let mut parsed = AgentSettings::default();
        for key in [
            "maxTurns",
            "contextThreshold",
            "keepRecentStatements",
            "recentToolTurns",
            "recentReasoningTurns",
            "systemPrompt",
            "sideRequests",
            "sideRequestTiming",
        ] {
            let Some(value) = settings.value.get(key) else {
                continue;
            };
            let one = Value::Object([(key.to_owned(), value.clone())].into_iter().collect());
            match serde_json::from_value::<AgentSettings>(one) {
                Ok(single) => {
                    parsed.max_turns = parsed.max_turns.or(single.max_turns);
                    parsed.context_threshold =
                        parsed.context_threshold.or(single.context_threshold);
                    parsed.keep_recent_statements = parsed
                        .keep_recent_statements
                        .or(single.keep_recent_statements);
                    parsed.recent_tool_turns =
                        parsed.recent_tool_turns.or(single.recent_tool_turns);
                    parsed.recent_reasoning_turns = parsed
                        .recent_reasoning_turns
                        .or(single.recent_reasoning_turns);
                    parsed.system_prompt = parsed.system_prompt.or(single.system_prompt);
                    parsed.side_requests = parsed.side_requests.or(single.side_requests);
                    parsed.side_request_timing =
                        parsed.side_request_timing.or(single.side_request_timing);
                }
                Err(error) => warnings.push(format!(
                    "{}: `{key}`: {error}; using the default",
                    settings.describe(&[satchel_tools::config::JsonStep::key(key)])
                )),
            }
        }
        if let Some(turns) = parsed.max_turns {
            if turns == 0 {
                warnings.push(format!(
                    "`maxTurns` in {} must be at least 1; using 1",
                    files()
                ));
            }
            config.max_turns = turns.max(1);
        }
        // Read by the tools' configuration too (the `conversation` tool
        // cuts with it), which reports a bad value; one warning is enough.
        config.tool_result_max_length = tool_result_max_length(settings).0;
        if let Some(threshold) = parsed.context_threshold {
            if threshold > 0.0 && threshold <= 1.0 {
                config.context_threshold = threshold;
            } else {
                warnings.push(format!(
                    "`contextThreshold` in {} must be in (0, 1]; using {}",
                    files(),
                    config.context_threshold
                ));
            }
        }
        if let Some(keep) = parsed.keep_recent_statements {
            config.keep_recent_statements = keep;
        }
        if let Some(turns) = parsed.recent_tool_turns {
            config.recent_tool_turns = turns;
        }
        if let Some(turns) = parsed.recent_reasoning_turns {
            config.recent_reasoning_turns = turns;
        }
        config.system_prompt = parsed.system_prompt;
        if let Some(side) = parsed.side_requests {
            config.side_requests = side;
        }
        if let Some(timing) = parsed.side_request_timing {
            config.side_request_timing = timing;
        }
        if let Some(index) = settings.value.get("toolIndex") {
            config.tool_index = tool_index(index, &files(), &mut warnings);
        }
        (config, warnings)
    }

    /// The system prompt in force.
    pub fn system_prompt(&self) -> &str {
        self.system_prompt
            .as_deref()
            .unwrap_or(DEFAULT_SYSTEM_PROMPT)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(value: Value) -> Settings {
        let Value::Object(object) = value else {
            panic!("not an object")
        };
        Settings::from_layers(vec![("agent.json".into(), object)])
    }

    #[test]
    fn missing_keys_are_defaults() {
        let (config, warnings) = AgentConfig::from_settings(&Settings::default());
        assert_eq!(config, AgentConfig::default());
        assert!(warnings.is_empty());
    }

    #[test]
    fn one_bad_key_keeps_the_others() {
        let (config, warnings) = AgentConfig::from_settings(&settings(json!({
            "maxTurns": "many",
            "toolResultMaxLength": 80,
            "contextThreshold": 3.0,
        })));
        assert_eq!(config.max_turns, 25);
        assert_eq!(config.tool_result_max_length, 80);
        assert_eq!(config.context_threshold, 0.8);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("maxTurns") && warnings[0].contains("agent.json"));
    }
}
