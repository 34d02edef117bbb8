//! The `code` section of agent.json.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::runtime::RuntimeKind;
use satchel_tools::Settings;

/// Variables a program inherits from Satchel's environment, besides the
/// configured ones: enough to find programs and print text, nothing secret.
const PASSED_THROUGH: [&str; 6] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE"];

/// `PATH` for programs when Satchel's own is unknown.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How the `code` tool runs programs.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeConfig {
    /// JavaScript runtime to prefer (`bun`, `deno`, `node`); found in order otherwise.
    pub js_runtime: Option<RuntimeKind>,
    /// Explicit runtime executables by name (`bun`, `deno`, `node`, `python3`, `bash`).
    pub runtimes: BTreeMap<String, PathBuf>,
    /// Kept from older files and ignored: the policy's mode decides whether
    /// programs run sandboxed (everything but `trust`), since only the mode
    /// is what the policy judges by.
    pub sandbox: bool,
    /// Let programs open network connections.
    pub network: bool,
    /// The environment programs get: the allow-list and configured variables.
    pub env: Vec<(String, String)>,
    /// `PATH` used to find runtimes.
    pub search_path: String,
    /// Largest `timeout_ms` a call may ask for.
    pub max_timeout: Duration,
    /// What writes code for `generate`.
    pub generator: Option<GeneratorConfig>,
}

/// The configured code generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeneratorConfig {
    /// The configured model, in a side conversation.
    Model,
    /// An external coding agent's command line (`{prompt}` is replaced).
    Command {
        /// The command and its arguments.
        argv: Vec<String>,
        /// How long a job may run.
        timeout: Duration,
    },
}

impl Default for CodeConfig {
    fn default() -> CodeConfig {
        CodeConfig {
            js_runtime: None,
            runtimes: BTreeMap::new(),
            sandbox: true,
            network: false,
            env: vec![("PATH".into(), DEFAULT_PATH.into())],
            search_path: DEFAULT_PATH.into(),
            max_timeout: Duration::from_secs(600),
            generator: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct CodeSettings {
    js_runtime: Option<String>,
    runtimes: BTreeMap<String, PathBuf>,
    sandbox: bool,
    network: bool,
    env: BTreeMap<String, String>,
    pass_env: Vec<String>,
    max_timeout_ms: u64,
    generator: Option<GeneratorSettings>,
}

impl Default for CodeSettings {
    fn default() -> CodeSettings {
        CodeSettings {
            js_runtime: None,
            runtimes: BTreeMap::new(),
            sandbox: true,
            network: false,
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            max_timeout_ms: 600_000,
            generator: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GeneratorSettings {
    /// `"model"`.
    Named(String),
    /// `{"command": [...], "timeoutSecs": 600}`.
    Command {
        command: Vec<String>,
        #[serde(default, rename = "timeoutSecs")]
        timeout_secs: Option<u64>,
    },
}

impl CodeConfig {
    /// Reads the `code` section; Satchel's environment comes from
    /// `settings.env` (the allow-list and `passEnv` names only).
    pub fn from_settings(settings: &Settings) -> (CodeConfig, Vec<String>) {
        let (section, warning) = settings.section::<CodeSettings>("code");
        let mut warnings: Vec<String> = warning.into_iter().collect();
        let js_runtime = section.js_runtime.as_deref().and_then(|name| {
            let kind = RuntimeKind::parse(name)
                .filter(|k| matches!(k, RuntimeKind::Bun | RuntimeKind::Deno | RuntimeKind::Node));
            if kind.is_none() {
                warnings.push(format!(
                    "code.jsRuntime `{name}` is not bun, deno or node; finding one instead"
                ));
            }
            kind
        });
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for name in PASSED_THROUGH
            .iter()
            .copied()
            .chain(section.pass_env.iter().map(String::as_str))
        {
            if let Some(value) = settings.env.get(name) {
                env.insert(name.to_owned(), value.clone());
            }
        }
        env.entry("PATH".into())
            .or_insert_with(|| DEFAULT_PATH.into());
        env.extend(section.env);
        let search_path = env
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| DEFAULT_PATH.into());
        let generator = match section.generator {
            None => None,
            Some(GeneratorSettings::Named(name)) if name == "model" => Some(GeneratorConfig::Model),
            Some(GeneratorSettings::Named(other)) => {
                warnings.push(format!(
                    "code.generator `{other}` is neither \"model\" nor {{\"command\": [...]}}"
                ));
                None
            }
            Some(GeneratorSettings::Command {
                command,
                timeout_secs,
            }) if !command.is_empty() => Some(GeneratorConfig::Command {
                argv: command,
                timeout: Duration::from_secs(timeout_secs.unwrap_or(600)),
            }),
            Some(GeneratorSettings::Command { .. }) => {
                warnings.push("code.generator.command is empty".into());
                None
            }
        };
        if !section.sandbox {
            warnings.push(
                "code.sandbox: false is ignored: the mode decides (programs run unsandboxed only when \
                 permissions.mode is \"trust\")"
                    .into(),
            );
        }
        let config = CodeConfig {
            js_runtime,
            runtimes: section.runtimes,
            sandbox: section.sandbox,
            network: section.network,
            env: env.into_iter().collect(),
            search_path,
            max_timeout: Duration::from_millis(section.max_timeout_ms.max(100)),
            generator,
        };
        (config, warnings)
    }
}
