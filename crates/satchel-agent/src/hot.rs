//! [`HotConfig`]: agent.json read again whenever it changes, so the next
//! turn runs with the new values and no restart.
//!
//! Each file's last good object is kept: a file saved with a syntax error
//! gives a warning that names the file and position, and the session goes
//! on with what that file said before (or defaults, at start-up).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use satchel_llm::LlmConfig;
use satchel_tools::policy::Policy;
use satchel_tools::{Settings, ToolsConfig};
use serde_json::{Map, Value};

use crate::AgentConfig;

/// Everything configuration decides, as of one reading.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The merged files.
    pub settings: Settings,
    /// The loop's settings.
    pub agent: AgentConfig,
    /// The tools' settings.
    pub tools: Arc<ToolsConfig>,
    /// Permission rules and rate limits.
    pub policy: Arc<Policy>,
    /// The `llm` section.
    pub llm: LlmConfig,
    /// Increases by one with every reload that changed something.
    pub generation: u64,
}

impl Snapshot {
    /// Builds every section from `settings`; returns what was ignored.
    pub fn from_settings(settings: Settings, generation: u64) -> (Snapshot, Vec<String>) {
        let mut warnings = settings.warnings.clone();
        let (agent, agent_warnings) = AgentConfig::from_settings(&settings);
        let (tools, tools_warnings) = ToolsConfig::from_settings(&settings);
        let (policy, policy_warnings) = Policy::from_settings(&settings);
        let (llm, llm_warning) = settings.section::<LlmConfig>("llm");
        warnings.extend(agent_warnings);
        warnings.extend(tools_warnings);
        warnings.extend(policy_warnings);
        warnings.extend(llm_warning);
        (
            Snapshot {
                settings,
                agent,
                tools: Arc::new(tools),
                policy: Arc::new(policy),
                llm,
                generation,
            },
            warnings,
        )
    }
}

/// What a file held when it was last read.
#[derive(Debug, Clone, PartialEq)]
enum FileState {
    Missing,
    Read(String),
}

/// Told the new settings after a reload that changed something; returns
/// warnings about them. For parts configured outside the snapshot (the
/// `memory` section lives in a service the agent does not own).
pub type ReloadListener = Box<dyn Fn(&Settings) -> Vec<String> + Send + Sync>;

/// Configuration files watched by content: every [`HotConfig::refresh`]
/// reads them (they are small) and rebuilds the snapshot when any changed.
pub struct HotConfig {
    paths: Vec<PathBuf>,
    env: BTreeMap<String, String>,
    seen: Vec<Option<FileState>>,
    good: Vec<Option<Map<String, Value>>>,
    current: Arc<Snapshot>,
    listeners: Vec<ReloadListener>,
}

impl std::fmt::Debug for HotConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HotConfig")
            .field("paths", &self.paths)
            .field("generation", &self.current.generation)
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

impl HotConfig {
    /// Reads `paths` (lowest precedence first); `env` holds the variables
    /// settings may name (API keys). Returns the warnings of the reading.
    pub fn load(paths: Vec<PathBuf>, env: BTreeMap<String, String>) -> (HotConfig, Vec<String>) {
        let count = paths.len();
        let mut hot = HotConfig {
            paths,
            env,
            seen: vec![None; count],
            good: vec![None; count],
            current: Arc::new(Snapshot::from_settings(Settings::default(), 0).0),
            listeners: Vec::new(),
        };
        let warnings = hot.refresh().unwrap_or_default();
        (hot, warnings)
    }

    /// Calls `listener` with the settings after every reload that changes
    /// them (not with the settings read so far).
    pub fn on_reload(&mut self, listener: ReloadListener) {
        self.listeners.push(listener);
    }

    /// The configuration in force.
    pub fn current(&self) -> Arc<Snapshot> {
        self.current.clone()
    }

    /// Reads the files again; when one changed, rebuilds the snapshot and
    /// returns its warnings (`Some(vec![])` for a clean reload). `None`
    /// when nothing changed.
    pub fn refresh(&mut self) -> Option<Vec<String>> {
        let mut changed = false;
        let mut warnings = Vec::new();
        for (index, path) in self.paths.iter().enumerate() {
            let state = match std::fs::read_to_string(path) {
                Ok(text) => FileState::Read(text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => FileState::Missing,
                Err(error) => {
                    // Unreadable now: keep what it said before.
                    warnings.push(format!(
                        "{}: cannot read: {error}; keeping its last good values",
                        path.display()
                    ));
                    continue;
                }
            };
            if self.seen[index].as_ref() == Some(&state) {
                continue;
            }
            changed = true;
            match &state {
                FileState::Missing => self.good[index] = None,
                FileState::Read(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(object)) => self.good[index] = Some(object),
                    Ok(_) => warnings.push(format!(
                        "{}: must hold a JSON object; {}",
                        path.display(),
                        self.fallback(index)
                    )),
                    Err(error) => warnings.push(format!(
                        "{}:{}:{}: invalid JSON ({error}); {}",
                        path.display(),
                        error.line(),
                        error.column(),
                        self.fallback(index)
                    )),
                },
            }
            self.seen[index] = Some(state);
        }
        if !changed {
            return if warnings.is_empty() {
                None
            } else {
                Some(warnings)
            };
        }
        let layers = self
            .paths
            .iter()
            .zip(&self.good)
            .filter_map(|(path, object)| Some((path.clone(), object.clone()?)))
            .collect();
        let settings = Settings::from_layers(layers).with_env(self.env.clone());
        let (snapshot, section_warnings) =
            Snapshot::from_settings(settings, self.current.generation + 1);
        warnings.extend(section_warnings);
        for listener in &self.listeners {
            warnings.extend(listener(&snapshot.settings));
        }
        self.current = Arc::new(snapshot);
        Some(warnings)
    }

    fn fallback(&self, index: usize) -> &'static str {
        if self.good[index].is_some() {
            "keeping its last good values"
        } else {
            "using defaults for it"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_seen_and_a_broken_file_keeps_the_last_good_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, r#"{"maxTurns": 7}"#).unwrap();
        let (mut hot, warnings) = HotConfig::load(vec![path.clone()], BTreeMap::new());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(hot.current().agent.max_turns, 7);
        assert!(hot.refresh().is_none(), "nothing changed");

        std::fs::write(&path, r#"{"maxTurns": 3, "toolResultMaxLength": 40}"#).unwrap();
        assert_eq!(hot.refresh(), Some(vec![]));
        assert_eq!(hot.current().agent.max_turns, 3);
        assert_eq!(hot.current().agent.tool_result_max_length, 40);

        std::fs::write(&path, "{\"maxTurns\": 9,\n  oops}").unwrap();
        let warnings = hot.refresh().unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("agent.json:2:") && warnings[0].contains("last good"),
            "{warnings:?}"
        );
        assert_eq!(hot.current().agent.max_turns, 3);

        std::fs::remove_file(&path).unwrap();
        assert_eq!(hot.refresh(), Some(vec![]));
        assert_eq!(hot.current().agent, AgentConfig::default());
    }

    #[test]
    fn listeners_hear_each_changed_reading_and_add_their_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, r#"{"memory": {"recall": {"bm25K1": 1.0}}}"#).unwrap();
        let (mut hot, _) = HotConfig::load(vec![path.clone()], BTreeMap::new());
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&heard);
        hot.on_reload(Box::new(move |settings| {
            let memory = settings.value.get("memory").cloned();
            log.lock().unwrap().push(memory);
            vec!["memory: noted".to_owned()]
        }));
        assert!(hot.refresh().is_none(), "nothing changed, nothing heard");
        assert!(heard.lock().unwrap().is_empty());

        std::fs::write(&path, r#"{"memory": {"recall": {"bm25K1": 1.5}}}"#).unwrap();
        assert_eq!(hot.refresh(), Some(vec!["memory: noted".to_owned()]));
        let heard = heard.lock().unwrap();
        assert_eq!(heard.len(), 1);
        assert_eq!(heard[0].as_ref().unwrap()["recall"]["bm25K1"], 1.5);
    }

    #[test]
    fn a_broken_file_at_start_up_means_defaults_and_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, "{").unwrap();
        let (hot, warnings) = HotConfig::load(vec![path], BTreeMap::new());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("using defaults"), "{warnings:?}");
        assert_eq!(hot.current().agent, AgentConfig::default());
    }
}
