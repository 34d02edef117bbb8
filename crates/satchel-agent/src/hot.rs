//! [`HotConfig`]: agent.json read again whenever it changes, so the next
//! turn runs with the new values and no restart.
//!
//! Each file's last good version is kept: a file saved with a syntax
//! error, invalid `permissions` or that is no longer a small regular file
//! gives a loud warning that names the file and position, and the session
//! goes on with what that file said before, its permission rules included
//! (never defaults, never fewer rules). At start-up the same problems are
//! an error: there is no good version to keep.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use satchel_llm::LlmConfig;
use satchel_tools::config::{ConfigError, Layer, read_config_file};
use satchel_tools::hooks::HookSet;
use satchel_tools::policy::Policy;
use satchel_tools::{Settings, ToolsConfig};

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
    /// The hooks of every agent.json layer (`hooks`).
    pub hooks: Arc<HookSet>,
    /// Increases by one with every reload that changed something.
    pub generation: u64,
}

/// Completes a freshly read [`ToolsConfig`]: the sections of tools the
/// runtime does not know (the built-ins'), and what the host adds (the
/// redactor, its runtimes' directory); returns what was wrong. The host
/// passes the same function it builds its own tools configuration with,
/// so a reload never drops part of it.
pub type ConfigureTools = Arc<dyn Fn(&Settings, &mut ToolsConfig) -> Vec<String> + Send + Sync>;

/// A [`ConfigureTools`] that adds nothing: tools with no sections of their own.
pub fn no_tool_sections() -> ConfigureTools {
    Arc::new(|_, _| Vec::new())
}

impl Snapshot {
    /// Builds every section from `settings`; returns what was ignored.
    /// Invalid `permissions` is an error (see [`Policy::from_settings`]).
    pub fn from_settings(
        settings: Settings,
        generation: u64,
        configure: &ConfigureTools,
    ) -> Result<(Snapshot, Vec<String>), ConfigError> {
        let mut warnings = settings.warnings.clone();
        let (policy, policy_warnings) = Policy::from_settings(&settings)?;
        let (agent, agent_warnings) = AgentConfig::from_settings(&settings);
        let (mut tools, mut tools_warnings) = ToolsConfig::from_settings(&settings);
        tools_warnings.extend(configure(&settings, &mut tools));
        let (llm, llm_warning) = settings.section::<LlmConfig>("llm");
        let (hooks, hook_warnings) = HookSet::from_settings(&settings);
        warnings.extend(hook_warnings);
        warnings.extend(agent_warnings);
        warnings.extend(tools_warnings);
        warnings.extend(policy_warnings);
        warnings.extend(llm_warning);
        Ok((
            Snapshot {
                settings,
                agent,
                tools: Arc::new(tools),
                policy: Arc::new(policy),
                llm,
                hooks: Arc::new(hooks),
                generation,
            },
            warnings,
        ))
    }
}

/// What a file held when it was last read.
#[derive(Debug, Clone, PartialEq)]
enum FileState {
    Missing,
    Read(String),
    /// Refused unread, with the reason (warned about once).
    Refused(ConfigError),
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
    good: Vec<Option<Layer>>,
    current: Arc<Snapshot>,
    configure: ConfigureTools,
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
    /// settings may name (API keys). Returns the warnings of the reading; a
    /// file that cannot be used (see [`Settings::load`]) is an error, as
    /// there is no earlier version of it to keep. `configure` adds the
    /// tool sections the runtime does not know, at every reading.
    pub fn load(
        paths: Vec<PathBuf>,
        env: BTreeMap<String, String>,
        configure: ConfigureTools,
    ) -> Result<(HotConfig, Vec<String>), ConfigError> {
        let mut seen = Vec::with_capacity(paths.len());
        let mut good = Vec::with_capacity(paths.len());
        for path in &paths {
            match read_config_file(path)? {
                None => {
                    seen.push(Some(FileState::Missing));
                    good.push(None);
                }
                Some(text) => {
                    good.push(Some(Layer::parse(path, text.clone())?));
                    seen.push(Some(FileState::Read(text)));
                }
            }
        }
        let settings =
            Settings::from_parsed(good.iter().flatten().cloned().collect()).with_env(env.clone());
        let (snapshot, warnings) = Snapshot::from_settings(settings, 1, &configure)?;
        let hot = HotConfig {
            paths,
            env,
            seen,
            good,
            current: Arc::new(snapshot),
            configure,
            listeners: Vec::new(),
        };
        Ok((hot, warnings))
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
    /// when nothing changed. A file that cannot be used keeps its last good
    /// version, permission rules included, and the warning says so.
    pub fn refresh(&mut self) -> Option<Vec<String>> {
        let mut changed = false;
        let mut warnings = Vec::new();
        for (index, path) in self.paths.iter().enumerate() {
            let state = match read_config_file(path) {
                Ok(Some(text)) => FileState::Read(text),
                Ok(None) => FileState::Missing,
                Err(error) => FileState::Refused(error),
            };
            if self.seen[index].as_ref() == Some(&state) {
                continue;
            }
            match &state {
                FileState::Refused(error) => {
                    warnings.push(not_applied(error, self.good[index].is_some()))
                }
                FileState::Missing => {
                    changed = true;
                    self.good[index] = None;
                }
                FileState::Read(text) => match Layer::parse(path, text.clone()) {
                    Ok(layer) => {
                        changed = true;
                        self.good[index] = Some(layer);
                    }
                    Err(error) => warnings.push(not_applied(&error, self.good[index].is_some())),
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
        let layers = self.good.iter().flatten().cloned().collect();
        let settings = Settings::from_parsed(layers).with_env(self.env.clone());
        let (snapshot, section_warnings) =
            match Snapshot::from_settings(settings, self.current.generation + 1, &self.configure) {
                Ok(built) => built,
                Err(error) => {
                    // Cannot happen with layers that parsed; kept safe anyway.
                    warnings.push(not_applied(&error, true));
                    return Some(warnings);
                }
            };
        warnings.extend(section_warnings);
        for listener in &self.listeners {
            warnings.extend(listener(&snapshot.settings));
        }
        self.current = Arc::new(snapshot);
        Some(warnings)
    }
}

/// The loud warning for a file whose new version is refused.
fn not_applied(error: &ConfigError, had_good: bool) -> String {
    let kept = if had_good {
        "its last good version stays in force, permission rules included"
    } else {
        "it is left out, as before"
    };
    format!(
        "NOT RELOADED: {error}\n{} was not applied; {kept}. Fix it to apply changes.",
        error.path().display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_seen_and_a_broken_file_keeps_the_last_good_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, r#"{"maxTurns": 7}"#).unwrap();
        let (mut hot, warnings) =
            HotConfig::load(vec![path.clone()], BTreeMap::new(), no_tool_sections()).unwrap();
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
        assert!(hot.refresh().is_none(), "told once, not at every turn");
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
        let (mut hot, _) =
            HotConfig::load(vec![path.clone()], BTreeMap::new(), no_tool_sections()).unwrap();
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

    /// Issue #30: a file that cannot be read in full at start-up is an
    /// error (it used to mean defaults and a warning, deny rules gone).
    #[test]
    fn a_broken_file_at_start_up_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, "{").unwrap();
        let error =
            HotConfig::load(vec![path.clone()], BTreeMap::new(), no_tool_sections()).unwrap_err();
        assert!(
            error.to_string().contains("agent.json:1:1: invalid JSON"),
            "{error}"
        );
        std::fs::write(&path, r#"{"permissions": {"denny": ["bash"]}}"#).unwrap();
        let error = HotConfig::load(vec![path], BTreeMap::new(), no_tool_sections()).unwrap_err();
        assert!(
            error.to_string().contains("did you mean `deny`?"),
            "{error}"
        );
    }

    /// Issue #30: a permissions edit that does not parse, while running,
    /// keeps the last good rules (never defaults, never fewer rules) and
    /// says so; fixing the file applies it.
    #[test]
    fn a_broken_permissions_edit_keeps_the_last_good_rules() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.json");
        let path = dir.path().join("agent.json");
        std::fs::write(&user, r#"{"permissions": {"allow": ["bash(ls*)"]}}"#).unwrap();
        std::fs::write(
            &path,
            r#"{"maxTurns": 4, "permissions": {"deny": ["bash(rm *)"], "mode": "readonly"}}"#,
        )
        .unwrap();
        let (mut hot, warnings) = HotConfig::load(
            vec![user, path.clone()],
            BTreeMap::new(),
            no_tool_sections(),
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let rules = |hot: &HotConfig| {
            let snapshot = hot.current();
            let texts: Vec<String> = snapshot
                .policy
                .rules()
                .iter()
                .map(|rule| format!("{} {}", rule.kind, rule.text))
                .collect();
            (texts, snapshot.policy.mode().to_string())
        };
        let good = (
            vec!["deny bash(rm *)".to_owned(), "allow bash(ls*)".to_owned()],
            "readonly".to_owned(),
        );
        assert_eq!(rules(&hot), good);

        for broken in [
            r#"{"maxTurns": 9, "permissions": {"denny": ["bash(rm *)"]}}"#,
            r#"{"maxTurns": 9, "permissions": {"deny": "bash(rm *)"}}"#,
            r#"{"maxTurns": 9, "permissions": {"deny": ["bash(rm *"]}}"#,
            "{\"maxTurns\": 9, \"permissions\": {\"deny\": [\"bash(rm *)\",]}}",
        ] {
            std::fs::write(&path, broken).unwrap();
            let warnings = hot.refresh().unwrap();
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].starts_with("NOT RELOADED: ")
                    && warnings[0].contains("agent.json:1:")
                    && warnings[0].contains("permission rules included"),
                "{warnings:?}"
            );
            assert_eq!(rules(&hot), good, "{broken}");
            assert_eq!(hot.current().agent.max_turns, 4, "the whole file is kept");
        }

        // Replaced by a directory: refused unread, rules kept.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let warnings = hot.refresh().unwrap();
        assert!(warnings[0].contains("directory"), "{warnings:?}");
        assert_eq!(rules(&hot), good);
        std::fs::remove_dir(&path).unwrap();

        std::fs::write(
            &path,
            r#"{"permissions": {"deny": ["bash(rm *)", "bash(dd *)"]}}"#,
        )
        .unwrap();
        assert_eq!(hot.refresh(), Some(vec![]));
        assert_eq!(rules(&hot).0.len(), 3);
        assert_eq!(rules(&hot).1, "workspace");
    }

    /// FACTS (2026-11-25): an unknown key under `llm` used to drop the
    /// whole block (`baseUrl` and `model` included) after one warning.
    #[test]
    fn an_unknown_llm_key_is_a_warning_that_keeps_the_rest_of_llm() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(
            &path,
            "{\"llm\": {\"model\": \"m1\", \"baseUrl\": \"http://127.0.0.1:9/v1\",\n  \"constrainedRepliez\": true}}",
        )
        .unwrap();
        let (hot, warnings) =
            HotConfig::load(vec![path], BTreeMap::new(), no_tool_sections()).unwrap();
        assert_eq!(hot.current().llm.model.as_deref(), Some("m1"));
        assert_eq!(
            hot.current().llm.base_url.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("agent.json:2:3: `llm.constrainedRepliez`: unknown field"),
            "{warnings:?}"
        );
    }
}
