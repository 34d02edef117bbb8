//! Configuration: `agent.json` files layered over built-in defaults.
//!
//! The project's `.agents/agent.json` wins over the user's
//! `$XDG_CONFIG_HOME/satchel/agent.json`, which wins over defaults; objects
//! merge key by key. A missing file or key means defaults. A file that is
//! not valid JSON, or a section of the wrong shape, gives a warning naming
//! the file and line, and defaults: bad config never stops Satchel.
//!
//! Paths are passed in, never read from the environment here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use satchel_exec::{OutputConfig, RunnerConfig, SpillConfig};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The project's config file, relative to the project root.
pub const PROJECT_CONFIG: &str = ".agents/agent.json";

/// Merged configuration and what went wrong reading it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// The merged JSON object.
    pub value: Map<String, Value>,
    /// Files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Each file's own object, lowest precedence first: for settings that
    /// add up across files (permission rules) rather than override.
    pub layers: Vec<(PathBuf, Map<String, Value>)>,
    /// Problems found, each naming its file (and line, for syntax errors).
    pub warnings: Vec<String>,
    /// The environment variables settings may refer to (API keys named in
    /// config); given by the caller, never read here.
    pub env: BTreeMap<String, String>,
}

impl Settings {
    /// The config files for a project, lowest precedence first: the user's
    /// (under `user_config_dir`, e.g. `$XDG_CONFIG_HOME/satchel`), then the
    /// project's.
    pub fn default_paths(project_dir: &Path, user_config_dir: Option<&Path>) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = user_config_dir
            .map(|dir| dir.join("agent.json"))
            .into_iter()
            .collect();
        paths.push(project_dir.join(PROJECT_CONFIG));
        paths
    }

    /// Reads and merges `paths`, later ones winning.
    pub fn load(paths: &[PathBuf]) -> Settings {
        let mut settings = Settings::default();
        for path in paths {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => {
                    settings.warnings.push(format!(
                        "{}: cannot read: {error}; using defaults",
                        path.display()
                    ));
                    continue;
                }
            };
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(object)) => {
                    settings.layers.push((path.clone(), object.clone()));
                    merge(&mut settings.value, object);
                    settings.sources.push(path.clone());
                }
                Ok(_) => settings.warnings.push(format!(
                    "{}: must hold a JSON object; ignored",
                    path.display()
                )),
                Err(error) => settings.warnings.push(format!(
                    "{}:{}:{}: invalid JSON ({error}); ignoring this file",
                    path.display(),
                    error.line(),
                    error.column()
                )),
            }
        }
        settings
    }

    /// Settings made of already-parsed files (lowest precedence first), for
    /// callers that keep each file's last good object (hot reload).
    pub fn from_layers(layers: Vec<(PathBuf, Map<String, Value>)>) -> Settings {
        let mut settings = Settings::default();
        for (path, object) in layers {
            merge(&mut settings.value, object.clone());
            settings.sources.push(path.clone());
            settings.layers.push((path, object));
        }
        settings
    }

    /// Adds the environment variables settings may refer to.
    pub fn with_env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Settings {
        self.env.extend(vars);
        self
    }

    /// Deserialises the section under `key`; a missing section is the
    /// default, a malformed one is the default plus a warning.
    pub fn section<T: DeserializeOwned + Default>(&self, key: &str) -> (T, Option<String>) {
        let Some(value) = self.value.get(key) else {
            return (T::default(), None);
        };
        match T::deserialize(value) {
            Ok(section) => (section, None),
            Err(error) => {
                let files = self
                    .sources
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    T::default(),
                    Some(format!(
                        "`{key}` in {files}: {error}; using defaults for `{key}`"
                    )),
                )
            }
        }
    }
}

fn merge(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(base_child)), Value::Object(over_child)) => {
                merge(base_child, over_child)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The default of `toolResultMaxLength`.
pub const DEFAULT_TOOL_RESULT_MAX_LENGTH: usize = 500;

/// The top-level `toolResultMaxLength` key: characters of a past tool
/// result the model reads (in the history's summaries and the
/// `conversation` tool's timeline). A value that is not a non-negative
/// integer is the default plus a warning.
pub fn tool_result_max_length(settings: &Settings) -> (usize, Option<String>) {
    let Some(value) = settings.value.get("toolResultMaxLength") else {
        return (DEFAULT_TOOL_RESULT_MAX_LENGTH, None);
    };
    match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
        Some(length) => (length, None),
        None => {
            let files = settings
                .sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            (
                DEFAULT_TOOL_RESULT_MAX_LENGTH,
                Some(format!(
                    "`toolResultMaxLength` in {files}: expected a non-negative integer, found {value}; using the default ({DEFAULT_TOOL_RESULT_MAX_LENGTH})"
                )),
            )
        }
    }
}

/// What tools need from configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsConfig {
    /// Limits for every child process (bash, external tools).
    pub runner: RunnerConfig,
    /// Discovery and calls of external tools.
    pub external: ExternalConfig,
    /// Search backends and their limits.
    pub search: crate::search::SearchConfig,
    /// How the `code` tool runs programs.
    pub code: crate::code::CodeConfig,
    /// Characters of a past tool result the model reads
    /// (`toolResultMaxLength`); the `conversation` tool cuts with it.
    pub tool_result_max_length: usize,
}

impl Default for ToolsConfig {
    fn default() -> ToolsConfig {
        ToolsConfig {
            runner: RunnerConfig::default(),
            external: ExternalConfig::default(),
            search: crate::search::SearchConfig::default(),
            code: crate::code::CodeConfig::default(),
            tool_result_max_length: DEFAULT_TOOL_RESULT_MAX_LENGTH,
        }
    }
}

impl ToolsConfig {
    /// Builds the tools' configuration; warnings say what was ignored.
    pub fn from_settings(settings: &Settings) -> (ToolsConfig, Vec<String>) {
        let (exec, exec_warning) = settings.section::<ExecSettings>("exec");
        let (external, external_warning) = settings.section::<ExternalSettings>("externalTools");
        let (search, search_warnings) =
            crate::search::SearchConfig::from_settings(settings, &settings.env);
        let (code, code_warnings) = crate::code::CodeConfig::from_settings(settings);
        let (tool_result_max_length, length_warning) = tool_result_max_length(settings);
        let config = ToolsConfig {
            runner: exec.into_runner(),
            external: external.into_config(),
            search,
            code,
            tool_result_max_length,
        };
        let mut warnings: Vec<String> = exec_warning
            .into_iter()
            .chain(external_warning)
            .chain(length_warning)
            .collect();
        warnings.extend(search_warnings);
        warnings.extend(code_warnings);
        (config, warnings)
    }
}

/// Limits for discovering and calling external tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalConfig {
    /// Time limit of a call when the tool declares none.
    pub timeout: Duration,
    /// Upper bound on any call's time limit, whatever the tool declares.
    pub max_timeout: Duration,
    /// Time a tool gets to answer `--schema`; a tool that takes longer is skipped.
    pub schema_timeout: Duration,
    /// Largest `--schema` document accepted.
    pub max_schema_bytes: usize,
    /// Largest stdout of a call: results are JSON and cannot be cut, so
    /// larger output is an `INVALID_OUTPUT` error (kept in a spill file).
    pub max_output_bytes: usize,
    /// `--schema` probes run at once during discovery.
    pub probe_concurrency: usize,
    /// How often long-running processes look for changed tool directories.
    pub watch_interval: Duration,
}

impl Default for ExternalConfig {
    fn default() -> ExternalConfig {
        ExternalSettings::default().into_config()
    }
}

/// The `externalTools` section of agent.json.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct ExternalSettings {
    timeout_secs: u64,
    max_timeout_secs: u64,
    schema_timeout_ms: u64,
    max_schema_bytes: usize,
    max_output_bytes: usize,
    probe_concurrency: usize,
    watch_interval_ms: u64,
}

impl Default for ExternalSettings {
    fn default() -> ExternalSettings {
        ExternalSettings {
            timeout_secs: 30,
            max_timeout_secs: 600,
            schema_timeout_ms: 3000,
            max_schema_bytes: 256 * 1024,
            max_output_bytes: 1024 * 1024,
            probe_concurrency: 16,
            watch_interval_ms: 2000,
        }
    }
}

impl ExternalSettings {
    fn into_config(self) -> ExternalConfig {
        ExternalConfig {
            timeout: Duration::from_secs(self.timeout_secs.max(1)),
            max_timeout: Duration::from_secs(self.max_timeout_secs.max(1)),
            schema_timeout: Duration::from_millis(self.schema_timeout_ms.max(1)),
            max_schema_bytes: self.max_schema_bytes,
            max_output_bytes: self.max_output_bytes,
            probe_concurrency: self.probe_concurrency.max(1),
            watch_interval: Duration::from_millis(self.watch_interval_ms.max(100)),
        }
    }
}

/// The `exec` section of agent.json.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct ExecSettings {
    stdout_limit_bytes: usize,
    stderr_limit_bytes: usize,
    kill_grace_ms: u64,
    drain_timeout_ms: u64,
    kill_background: bool,
    strip_ansi: bool,
    collapse_carriage_returns: bool,
    spill: bool,
    spill_dir: Option<PathBuf>,
    spill_max_file_bytes: u64,
    spill_max_total_bytes: u64,
    spill_max_age_hours: u64,
}

impl Default for ExecSettings {
    fn default() -> ExecSettings {
        let runner = RunnerConfig::default();
        ExecSettings {
            stdout_limit_bytes: runner.stdout.limit_bytes,
            stderr_limit_bytes: runner.stderr.limit_bytes,
            kill_grace_ms: duration_ms(runner.kill_grace),
            drain_timeout_ms: duration_ms(runner.drain_timeout),
            kill_background: runner.kill_background,
            strip_ansi: runner.strip_ansi,
            collapse_carriage_returns: runner.collapse_carriage_returns,
            spill: runner.spill.dir.is_some(),
            spill_dir: None,
            spill_max_file_bytes: runner.spill.max_file_bytes,
            spill_max_total_bytes: runner.spill.max_total_bytes,
            spill_max_age_hours: runner.spill.max_age.as_secs() / 3600,
        }
    }
}

impl ExecSettings {
    fn into_runner(self) -> RunnerConfig {
        let default_dir = SpillConfig::default().dir;
        RunnerConfig {
            stdout: OutputConfig {
                limit_bytes: self.stdout_limit_bytes,
            },
            stderr: OutputConfig {
                limit_bytes: self.stderr_limit_bytes,
            },
            kill_grace: Duration::from_millis(self.kill_grace_ms),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
            kill_background: self.kill_background,
            strip_ansi: self.strip_ansi,
            collapse_carriage_returns: self.collapse_carriage_returns,
            spill: SpillConfig {
                dir: if self.spill {
                    self.spill_dir.or(default_dir)
                } else {
                    None
                },
                max_file_bytes: self.spill_max_file_bytes,
                max_total_bytes: self.spill_max_total_bytes,
                max_age: Duration::from_secs(self.spill_max_age_hours * 3600),
            },
        }
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn missing_files_mean_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::load(&Settings::default_paths(dir.path(), Some(dir.path())));
        assert_eq!(settings, Settings::default());
        let (config, warnings) = ToolsConfig::from_settings(&settings);
        assert_eq!(config, ToolsConfig::default());
        assert!(warnings.is_empty());
    }

    #[test]
    fn project_wins_over_user_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user.json",
            r#"{"exec": {"stdoutLimitBytes": 100, "stderrLimitBytes": 50}}"#,
        );
        let project = write(
            dir.path(),
            "project.json",
            r#"{"exec": {"stdoutLimitBytes": 200}}"#,
        );
        let settings = Settings::load(&[user, project]);
        let (config, warnings) = ToolsConfig::from_settings(&settings);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(config.runner.stdout.limit_bytes, 200);
        assert_eq!(config.runner.stderr.limit_bytes, 50);
    }

    #[test]
    fn invalid_json_is_a_warning_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let good = write(
            dir.path(),
            "user.json",
            r#"{"exec": {"stdoutLimitBytes": 100}}"#,
        );
        let bad = write(
            dir.path(),
            "agent.json",
            "{\n  \"exec\": {\n    \"stdoutLimitBytes\": 1,,\n  }\n}",
        );
        let settings = Settings::load(&[good, bad.clone()]);
        assert_eq!(settings.warnings.len(), 1);
        let warning = &settings.warnings[0];
        assert!(
            warning.starts_with(&format!("{}:3:", bad.display())),
            "{warning}"
        );
        // The good file still counts.
        assert_eq!(
            ToolsConfig::from_settings(&settings)
                .0
                .runner
                .stdout
                .limit_bytes,
            100
        );
    }

    #[test]
    fn malformed_section_falls_back_to_defaults_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "agent.json", r#"{"exec": {"stdoutLimt": 5}}"#);
        let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[path]));
        assert_eq!(config, ToolsConfig::default());
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("unknown field `stdoutLimt`"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn tool_result_max_length_is_a_top_level_key() {
        let dir = tempfile::tempdir().unwrap();
        let set = write(dir.path(), "set.json", r#"{"toolResultMaxLength": 80}"#);
        let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[set]));
        assert_eq!(config.tool_result_max_length, 80);
        assert!(warnings.is_empty(), "{warnings:?}");
        let bad = write(dir.path(), "bad.json", r#"{"toolResultMaxLength": "long"}"#);
        let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[bad]));
        assert_eq!(
            config.tool_result_max_length,
            DEFAULT_TOOL_RESULT_MAX_LENGTH
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("toolResultMaxLength"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn spill_can_be_switched_off_or_moved() {
        let dir = tempfile::tempdir().unwrap();
        let off = write(dir.path(), "off.json", r#"{"exec": {"spill": false}}"#);
        assert_eq!(
            ToolsConfig::from_settings(&Settings::load(&[off]))
                .0
                .runner
                .spill
                .dir,
            None
        );
        let moved = write(
            dir.path(),
            "moved.json",
            r#"{"exec": {"spillDir": "/var/tmp/x"}}"#,
        );
        let dir = ToolsConfig::from_settings(&Settings::load(&[moved]))
            .0
            .runner
            .spill
            .dir;
        assert_eq!(dir, Some(PathBuf::from("/var/tmp/x")));
    }
}
