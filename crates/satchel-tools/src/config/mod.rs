//! Configuration: `agent.json` files layered over built-in defaults.
//!
//! The project's `.agents/agent.json` wins over the user's
//! `$XDG_CONFIG_HOME/satchel/agent.json`, which wins over defaults; objects
//! merge key by key. A missing file or key means defaults.
//!
//! Configuration fails closed where it guards something: a file that is not
//! a regular file of at most [`MAX_CONFIG_BYTES`], is not valid JSON, or
//! whose `permissions` section has an unknown key, a value of the wrong
//! type or a rule that does not parse is a [`ConfigError`] (file, line,
//! column), never defaults: its deny rules cannot be known. Elsewhere an
//! unknown key or a value of the wrong type is a warning naming the file,
//! line and key, and the rest of its section still applies.
//!
//! Paths are passed in, never read from the environment here.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use satchel_exec::{OutputConfig, RunnerConfig, SpillConfig};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub(crate) mod layer;
pub(crate) mod locate;

pub use crate::hints::{json_type, nearest};
pub use layer::{ConfigError, Layer};
use locate::value_at;
pub use locate::{JsonStep, dotted};

/// The project's config file, relative to the project root.
pub const PROJECT_CONFIG: &str = ".agents/agent.json";

/// The largest config file read (1 MiB); a larger one is refused unread.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The top-level keys of agent.json, each read by its owner: the loop's
/// keys (`satchel-agent`), sections of tools, policy, model, memory and
/// redaction. Any other top-level key is a warning.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "$schema",
    "maxTurns",
    "contextThreshold",
    "keepRecentStatements",
    "recentToolTurns",
    "recentReasoningTurns",
    "systemPrompt",
    "sideRequests",
    "sideRequestTiming",
    "toolIndex",
    "toolResultMaxLength",
    "exec",
    "externalTools",
    "search",
    "code",
    "fetch",
    "llm",
    "memory",
    "redaction",
    "otel",
    "telegram",
    "permissions",
    "rateLimits",
    "maxConcurrentProcesses",
    "processWaitMs",
    "hooks",
];

/// Whether a project path (an agent.json layer, a tools directory) may be
/// read now: the host's workspace trust, asked at every read and reload,
/// so a `.agents/` that appears or changes after start-up is not loaded
/// behind the user's back. Without a gate everything is admitted.
static GATE: OnceLock<fn(&Path) -> bool> = OnceLock::new();

/// Sets the gate, once per process.
pub fn set_gate(gate: fn(&Path) -> bool) {
    let _ = GATE.set(gate);
}

/// Whether the gate admits `path`.
pub fn admitted(path: &Path) -> bool {
    GATE.get().is_none_or(|gate| gate(path))
}

/// The layer the command line puts on top of every agent.json (`--mode`,
/// `--allow`, `--deny`), for the whole process.
static COMMAND_LINE: OnceLock<Layer> = OnceLock::new();

/// What names the command-line layer in messages.
pub const COMMAND_LINE_SOURCE: &str = "(command line)";

/// Adds `object` on top of every agent.json this process reads, checked
/// like a file (an invalid rule is an error). Set once; later calls are
/// ignored.
pub fn set_command_line(object: Map<String, Value>) -> Result<(), ConfigError> {
    let text =
        serde_json::to_string_pretty(&Value::Object(object)).unwrap_or_else(|_| "{}".to_owned());
    let layer = Layer::parse(Path::new(COMMAND_LINE_SOURCE), text)?;
    let _ = COMMAND_LINE.set(layer);
    Ok(())
}

/// Adds `rules` to `permissions.allow` in the agent.json at `path`
/// (made if missing), keeping everything else; rules already there are
/// not added twice. Written whole to a temporary file and renamed, so a
/// reader never sees half a file.
pub fn add_allow_rules(path: &Path, rules: &[String]) -> Result<(), String> {
    let mut object = match read_config_file(path).map_err(|e| e.to_string())? {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(object)) => object,
            Ok(_) => return Err(format!("{} does not hold a JSON object", path.display())),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        },
    };
    let permissions = object
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(permissions) = permissions else {
        return Err(format!(
            "{}: `permissions` is not an object",
            path.display()
        ));
    };
    let allow = permissions
        .entry("allow")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(allow) = allow else {
        return Err(format!(
            "{}: `permissions.allow` is not a list",
            path.display()
        ));
    };
    for rule in rules {
        if !allow.iter().any(|r| r.as_str() == Some(rule)) {
            allow.push(Value::String(rule.clone()));
        }
    }
    let text = serde_json::to_string_pretty(&Value::Object(object)).map_err(|e| e.to_string())?;
    write_atomically(path, format!("{text}\n").as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes `bytes` to `path` whole or not at all: a temporary file (mode
/// 0600) in the same directory, made if missing, renamed over it, so a
/// reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.persist(path).map(drop).map_err(|e| e.error)
}

/// Reads a config file: `Ok(None)` when nothing is there. Anything but a
/// regular file of at most [`MAX_CONFIG_BYTES`] is refused before it is
/// opened (a FIFO would block, `/dev/zero` would never end), and the read
/// itself is bounded, so a file that grows meanwhile is refused too.
pub fn read_config_file(path: &Path) -> Result<Option<String>, ConfigError> {
    use std::os::unix::fs::FileTypeExt as _;
    let refuse = |reason: String| ConfigError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return match std::fs::symlink_metadata(path) {
                // A symlink to nothing: the user meant some file.
                Ok(_) => Err(refuse(
                    "a symbolic link to a file that does not exist".into(),
                )),
                Err(_) => Ok(None),
            };
        }
        Err(error) => return Err(refuse(format!("cannot read it: {error}"))),
    };
    let kind = meta.file_type();
    let not_regular = if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else if !kind.is_file() {
        Some("not a regular file")
    } else {
        None
    };
    if let Some(what) = not_regular {
        return Err(refuse(format!(
            "it is {what}; a config file must be a regular file"
        )));
    }
    let too_large = |size: u64| {
        refuse(format!(
            "it is {size} bytes, over the {MAX_CONFIG_BYTES}-byte limit for a config file"
        ))
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(too_large(meta.len()));
    }
    // Non-blocking, in case the path became a FIFO since: then the open
    // returns at once and the type check below refuses it.
    let file = {
        use std::os::unix::fs::OpenOptionsExt as _;
        let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nonblock)
            .open(path)
            .map_err(|error| refuse(format!("cannot open it: {error}")))?
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(refuse("it stopped being a regular file while read".into())),
        Err(error) => return Err(refuse(format!("cannot read it: {error}"))),
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| refuse(format!("cannot read it: {error}")))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|error| refuse(format!("it is not UTF-8 text ({error})")))
}

impl Layer {
    /// Parses a file's text: it must be a JSON object whose `permissions`
    /// section (if any) is valid; anything else is an error, as the file's
    /// permissions cannot be known. (Here rather than in `layer.rs`, which
    /// `policy` imports: it calls `policy`'s check of `permissions`.)
    pub fn parse(path: &Path, text: String) -> Result<Layer, ConfigError> {
        let object = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(object)) => object,
            Ok(other) => {
                return Err(ConfigError::Syntax {
                    path: path.to_path_buf(),
                    line: 1,
                    column: 1,
                    message: format!(
                        "agent.json must hold a JSON object, not {}",
                        json_type(&other)
                    ),
                });
            }
            Err(error) => {
                let suffix = format!(" at line {} column {}", error.line(), error.column());
                let full = error.to_string();
                return Err(ConfigError::Syntax {
                    path: path.to_path_buf(),
                    line: error.line(),
                    column: error.column(),
                    message: format!(
                        "invalid JSON: {}",
                        full.strip_suffix(&suffix).unwrap_or(&full)
                    ),
                });
            }
        };
        let layer = Layer {
            path: path.to_path_buf(),
            object,
            text: Some(Arc::from(text)),
        };
        crate::policy::permissions::Permissions::from_layer(&layer)?;
        Ok(layer)
    }
}

/// Merged configuration and what went wrong reading it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// The merged JSON object.
    pub value: Map<String, Value>,
    /// Files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Each file as read, lowest precedence first: for settings that add
    /// up across files (permission rules) rather than override, and for
    /// the line numbers of warnings.
    pub layers: Vec<Layer>,
    /// Problems that did not stop the reading (unknown top-level keys),
    /// each naming its file, line and key.
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

    /// Reads and merges `paths`, later ones winning; missing files are
    /// skipped. A file that cannot be read or parsed, or whose
    /// `permissions` are invalid, is an error: nothing is merged.
    pub fn load(paths: &[PathBuf]) -> Result<Settings, ConfigError> {
        let mut layers = Vec::new();
        for path in paths {
            if let Some(text) = read_config_file(path)? {
                layers.push(Layer::parse(path, text)?);
            }
        }
        Ok(Settings::from_parsed(layers))
    }

    /// Settings made of already-parsed objects (lowest precedence first),
    /// without their text (warnings then give no line numbers).
    pub fn from_layers(layers: Vec<(PathBuf, Map<String, Value>)>) -> Settings {
        Settings::from_parsed(
            layers
                .into_iter()
                .map(|(path, object)| Layer {
                    path,
                    object,
                    text: None,
                })
                .collect(),
        )
    }

    /// Settings made of files already read (lowest precedence first), for
    /// callers that keep each file's last good version (hot reload).
    pub fn from_parsed(layers: Vec<Layer>) -> Settings {
        let mut settings = Settings::default();
        let command_line = COMMAND_LINE.get().cloned();
        let admitted_layers = layers.into_iter().filter(|layer| admitted(&layer.path));
        for layer in admitted_layers.chain(command_line) {
            for key in layer.object.keys() {
                if TOP_LEVEL_KEYS.contains(&key.as_str()) {
                    continue;
                }
                let hint = crate::config_schema::suggest("", key)
                    .map(|near| format!(" (did you mean `{near}`?)"))
                    .unwrap_or_default();
                settings.warnings.push(format!(
                    "{}: `{key}` is not a key Satchel reads{hint}; ignored",
                    layer.describe(&[JsonStep::key(key)])
                ));
            }
            merge(&mut settings.value, layer.object.clone());
            settings.sources.push(layer.path.clone());
            settings.layers.push(layer);
        }
        settings
    }

    /// Adds the environment variables settings may refer to.
    pub fn with_env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Settings {
        self.env.extend(vars);
        self
    }

    /// Where the value at `path` (in the merged object) was written: the
    /// last file that sets it, as `file:line:column`; every file when none
    /// does.
    pub fn describe(&self, path: &[JsonStep]) -> String {
        let layer = self.layers.iter().rev().find(|layer| {
            let (first, rest) = match path.split_first() {
                Some((JsonStep::Key(first), rest)) => (first, rest),
                _ => return false,
            };
            layer
                .object
                .get(first)
                .and_then(|value| value_at(value, rest))
                .is_some()
        });
        match layer {
            Some(layer) => layer.describe(path),
            None => self
                .sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Deserialises the section under `key`; a missing section is the
    /// default. An unknown key or a value of the wrong type inside it is
    /// left out with a warning (file, line, key) and the rest of the
    /// section applies; a section that still does not fit is the default
    /// plus a warning. The warnings come joined, one per line.
    pub fn section<T: DeserializeOwned + Default>(&self, key: &str) -> (T, Option<String>) {
        /// Keys left out before the whole section is given up.
        const MAX_LEFT_OUT: usize = 32;
        let Some(value) = self.value.get(key) else {
            return (T::default(), None);
        };
        let mut value = value.clone();
        let mut warnings = Vec::new();
        let joined = |warnings: Vec<String>| (!warnings.is_empty()).then(|| warnings.join("\n"));
        for _ in 0..=MAX_LEFT_OUT {
            let error = match serde_path_to_error::deserialize::<_, T>(&value) {
                Ok(section) => return (section, joined(warnings)),
                Err(error) => error,
            };
            let inner: Vec<JsonStep> = error
                .path()
                .iter()
                .filter_map(|segment| match segment {
                    serde_path_to_error::Segment::Map { key } => Some(JsonStep::Key(key.clone())),
                    serde_path_to_error::Segment::Seq { index } => Some(JsonStep::Index(*index)),
                    serde_path_to_error::Segment::Enum { .. }
                    | serde_path_to_error::Segment::Unknown => None,
                })
                .collect();
            let mut full = vec![JsonStep::key(key)];
            full.extend(inner.iter().cloned());
            let location = self.describe(&full);
            let message = explain(&full, error.into_inner().to_string());
            if !inner.is_empty() && remove_at(&mut value, &inner) {
                warnings.push(format!(
                    "{location}: `{}`: {message}; ignored, the rest of `{key}` applies",
                    dotted(&full)
                ));
                continue;
            }
            warnings.push(format!(
                "{location}: `{key}`: {message}; using defaults for `{key}`"
            ));
            break;
        }
        (T::default(), joined(warnings))
    }
}

/// serde's message for a section's key, with the nearest known key in
/// place of serde's list when the key is unknown: `unknown field
/// `stdoutLimt` (did you mean `exec.stdoutLimitBytes`?)`.
fn explain(full: &[JsonStep], message: String) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message;
    };
    let Some((unknown, _)) = rest.split_once('`') else {
        return message;
    };
    let parent: Vec<JsonStep> = full
        .iter()
        .take(full.len().saturating_sub(1))
        .cloned()
        .collect();
    match crate::config_schema::suggest(&dotted(&parent), unknown) {
        Some(near) => format!("unknown field `{unknown}` (did you mean `{near}`?)"),
        None => message,
    }
}

/// Removes what `path` points at from `value`; false when it is not there.
fn remove_at(value: &mut Value, path: &[JsonStep]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    let parent = parent.iter().try_fold(value, |value, step| match step {
        JsonStep::Key(key) => value.get_mut(key),
        JsonStep::Index(index) => value.get_mut(index),
    });
    match (parent, last) {
        (Some(Value::Object(map)), JsonStep::Key(key)) => map.shift_remove(key).is_some(),
        (Some(Value::Array(list)), JsonStep::Index(index)) if *index < list.len() => {
            list.remove(*index);
            true
        }
        _ => false,
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
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// Limits for every child process (bash, external tools).
    pub runner: RunnerConfig,
    /// The sandbox of commands (`exec.writable`, `network`, `passEnv`,
    /// `limits`).
    pub sandbox: crate::sandbox::SandboxConfig,
    /// Discovery and calls of external tools.
    pub external: ExternalConfig,
    /// Sections of tools defined outside this crate (the built-ins'
    /// `search` and `code`), set by the crate that parses them.
    pub sections: crate::ToolSections,
    /// Characters of a past tool result the model reads
    /// (`toolResultMaxLength`); the `conversation` tool cuts with it.
    pub tool_result_max_length: usize,
}

impl Default for ToolsConfig {
    fn default() -> ToolsConfig {
        ToolsConfig {
            runner: RunnerConfig::default(),
            sandbox: crate::sandbox::SandboxConfig::default(),
            external: ExternalConfig::default(),
            sections: crate::ToolSections::default(),
            tool_result_max_length: DEFAULT_TOOL_RESULT_MAX_LENGTH,
        }
    }
}

impl ToolsConfig {
    /// This configuration with `section` set (see [`ToolSections`](crate::ToolSections)).
    pub fn with_section<T: crate::Section>(mut self, section: T) -> ToolsConfig {
        self.sections.insert(section);
        self
    }

    /// Builds the runtime's part of the tools' configuration (the
    /// built-ins add their [`sections`](ToolsConfig::sections) with
    /// `satchel_builtins::configure`); warnings say what was ignored.
    pub fn from_settings(settings: &Settings) -> (ToolsConfig, Vec<String>) {
        let (exec, exec_warning) = settings.section::<ExecSettings>("exec");
        let (external, external_warning) = settings.section::<ExternalSettings>("externalTools");
        let (tool_result_max_length, length_warning) = tool_result_max_length(settings);
        let config = ToolsConfig {
            sandbox: exec.sandbox(&settings.env),
            runner: exec.into_runner(),
            external: external.into_config(),
            sections: crate::ToolSections::default(),
            tool_result_max_length,
        };
        let warnings: Vec<String> = exec_warning
            .into_iter()
            .chain(external_warning)
            .chain(length_warning)
            .collect();
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
    /// Bytes of any tool's text result the model gets; 0: no cut.
    result_limit_bytes: usize,
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
    /// Writable paths besides the project, for sandboxed commands.
    writable: Vec<PathBuf>,
    /// Network for sandboxed commands in `workspace` mode.
    network: bool,
    /// Secret-named variables passed into sandboxed commands anyway.
    pass_env: Vec<String>,
    /// Resource limits of sandboxed commands.
    limits: LimitSettings,
    /// Most live background processes per conversation.
    max_background: usize,
    /// Ports of a conversation's namespace forwarded to the machine's loopback.
    forward_ports: Vec<u16>,
}

/// `exec.limits`: each absent key keeps its default, `null` removes the
/// limit.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct LimitSettings {
    memory_mb: Option<u64>,
    processes: Option<u32>,
    cpu_secs: Option<u64>,
    file_size_mb: Option<u64>,
}

const MIB: u64 = 1024 * 1024;

impl Default for LimitSettings {
    fn default() -> LimitSettings {
        let limits = satchel_exec::Limits::default();
        LimitSettings {
            memory_mb: limits.memory_bytes.map(|b| b / MIB),
            processes: limits.processes,
            cpu_secs: limits.cpu_secs,
            file_size_mb: limits.file_size_bytes.map(|b| b / MIB),
        }
    }
}

impl LimitSettings {
    fn into_limits(self) -> satchel_exec::Limits {
        satchel_exec::Limits {
            memory_bytes: self.memory_mb.map(|mb| mb.saturating_mul(MIB)),
            processes: self.processes,
            cpu_secs: self.cpu_secs,
            file_size_bytes: self.file_size_mb.map(|mb| mb.saturating_mul(MIB)),
        }
    }
}

impl Default for ExecSettings {
    fn default() -> ExecSettings {
        let runner = RunnerConfig::default();
        ExecSettings {
            stdout_limit_bytes: runner.stdout.limit_bytes,
            stderr_limit_bytes: runner.stderr.limit_bytes,
            result_limit_bytes: runner.result.limit_bytes,
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
            writable: Vec::new(),
            network: false,
            pass_env: Vec::new(),
            limits: LimitSettings::default(),
            max_background: runner.max_background,
            forward_ports: Vec::new(),
        }
    }
}

impl ExecSettings {
    /// The sandbox section; `~/` in `writable` is the `HOME` of `env`
    /// (left as it is without one, and so relative to the project).
    fn sandbox(&self, env: &BTreeMap<String, String>) -> crate::sandbox::SandboxConfig {
        let home = env.get("HOME").map(PathBuf::from);
        crate::sandbox::SandboxConfig {
            writable: self
                .writable
                .iter()
                .map(|path| match (path.strip_prefix("~"), &home) {
                    (Ok(rest), Some(home)) => home.join(rest),
                    _ => path.clone(),
                })
                .collect(),
            network: self.network,
            pass_env: self.pass_env.clone(),
            limits: self.limits.clone().into_limits(),
        }
    }

    fn into_runner(self) -> RunnerConfig {
        let default_dir = SpillConfig::default().dir;
        RunnerConfig {
            stdout: OutputConfig {
                limit_bytes: self.stdout_limit_bytes,
            },
            stderr: OutputConfig {
                limit_bytes: self.stderr_limit_bytes,
            },
            result: OutputConfig {
                limit_bytes: self.result_limit_bytes,
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
            // Set by the host from the environment and `redaction`.
            redactor: satchel_core::redact::Redactor::none(),
            max_background: self.max_background,
            forward_ports: self.forward_ports,
        }
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
