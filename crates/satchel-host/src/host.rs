//! [`Host`]: a project opened once (its settings, the tools'
//! configuration, the policy, the database and memory, both opened on
//! first use, and the tools themselves), shared by every conversation and
//! command of the process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_builtins::code::{CodeConfig, CodeGenerator, GeneratorConfig, JobTracker};
use satchel_builtins::{BuiltinDeps, builtin_tools};
use satchel_mcp::McpManager;
use satchel_memory::{MemoryConfig, MemorySettings, Summarizer};
use satchel_tools::config::ConfigError;
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::policy::Policy;
use satchel_tools::{LiveRegistry, Settings, ToolsConfig};

use crate::memory::LazyMemory;
use crate::model::{self, ModelGenerator, ModelSummarizer};
use crate::store::{self, LazyStore};
use crate::{HostPaths, trust};
use satchel_memory::ModelFetcher;

/// The project's tools directory, relative to the project.
pub const PROJECT_TOOLS: &str = ".agents/tools";

/// How a host is opened: everything it would otherwise read from the
/// process (the binary fills it in; tests choose every part).
#[derive(Clone, Default)]
pub struct HostOptions {
    /// The project directory (absolute).
    pub root: PathBuf,
    /// The database file; `None` when no location is known.
    pub db: Option<PathBuf>,
    /// The user's directories.
    pub paths: HostPaths,
    /// The process environment, for the variables settings may name (API
    /// keys, search keys, secrets to redact). Never read by the host itself.
    pub env: BTreeMap<String, String>,
    /// Fetches the embedding model on first use when it is missing;
    /// `None` never fetches.
    pub fetcher: Option<Arc<dyn ModelFetcher>>,
}

/// A project opened once, for every conversation and command of the
/// process. Problems with the configuration are logged as warnings, except
/// those that stop the opening (see [`Host::open`]).
pub struct Host {
    /// The project directory (absolute).
    pub root: PathBuf,
    /// The database file, absolute; `None` when no location can be found
    /// (no `--db`, `SATCHEL_DB`, `XDG_DATA_HOME` or `HOME`).
    pub db: Option<PathBuf>,
    /// Limits for tools.
    pub tools_config: Arc<ToolsConfig>,
    /// Permission rules and rate limits.
    pub policy: Arc<Policy>,
    /// The database, opened when something first records.
    pub store: Arc<LazyStore>,
    /// The model that writes code for `generate` jobs, when the config asks
    /// for one and it can be set up.
    pub model_generator: Option<Arc<dyn CodeGenerator>>,
    /// Background jobs the `code` tool started in this process.
    pub code_jobs: JobTracker,
    /// What each conversation's model last saw of each file (the file
    /// tools' stale-file rule), shared by every registry this host builds.
    pub file_stamps: Arc<satchel_builtins::files::FileStamps>,
    /// The background processes of every conversation (`bash` with
    /// `background: true`), ended with their conversation and by
    /// [`Host::close`]; recorded under `data/processes` so that the next
    /// host ends those a killed Satchel left.
    pub processes: Arc<satchel_exec::background::ProcessTable>,
    /// What was wrong with the configuration ([`Host::log_warnings`] logs it).
    pub warnings: Vec<String>,
    /// The `memory` tool's memory (the `memory` section, with the model
    /// directory resolved), opened over `store` when first used.
    pub memory: Arc<LazyMemory>,
    /// The user's directories.
    pub paths: HostPaths,
    /// The process environment, as the binary passed it.
    pub env: BTreeMap<String, String>,
    /// The redactor of this host's records, logs and children's output.
    pub redactor: satchel_store::Redactor,
    /// The OpenTelemetry exporters, when `OTEL_*` or `otel` turned them on;
    /// [`Host::close`] sends what they hold.
    pub telemetry: Option<crate::otel::Telemetry>,
    /// Where conversations record their model traffic or replay it from
    /// (`satchel run --record/--replay`); `None`: the network.
    pub model_tape: Option<satchel_llm::Tape>,
    /// The tools conversations share, with the MCP servers whose tools
    /// they import: started by the first conversation.
    pub(crate) shared: tokio::sync::OnceCell<(Arc<LiveRegistry>, McpManager)>,
}

impl Host {
    /// Reads the agent.json layers for `options.root`; fails when one
    /// cannot be used (see [`read_settings`]).
    pub fn open(options: HostOptions) -> anyhow::Result<Host> {
        let HostOptions {
            root,
            db,
            paths,
            env,
            fetcher,
        } = options;
        let root = root.as_path();
        // Before anything is read: a project's `.agents/` is read only
        // while trusted, at start-up and at every reload.
        trust::init(paths.trust_store());
        let settings = read_settings(root, &paths, &env)?;
        let (policy, policy_warnings) = Policy::from_settings(&settings).map_err(refused)?;
        let configure = tools_configurer(&paths, &env);
        let (mut tools_config, mut tools_warnings) = ToolsConfig::from_settings(&settings);
        tools_warnings.extend(configure(&settings, &mut tools_config));
        let (memory, memory_warnings) = memory_config(root, &settings, &paths);
        let redactor = store::redactor(&settings, &env);
        let mut warnings: Vec<String> = settings
            .warnings
            .iter()
            .chain(&tools_warnings)
            .chain(&policy_warnings)
            .chain(&memory_warnings)
            .cloned()
            .collect();
        let telemetry = match crate::otel::config(&settings, &env) {
            Ok(None) => None,
            Ok(Some(config)) => crate::otel::Telemetry::install(&config)
                .map_err(|warning| warnings.push(warning))
                .ok(),
            Err(warning) => {
                warnings.push(warning);
                None
            }
        };
        let code = tools_config.sections.get::<CodeConfig>();
        let model_generator = match code.and_then(|code| code.generator.as_ref()) {
            Some(GeneratorConfig::Model) => match model::provider(&settings) {
                Ok(provider) => {
                    Some(Arc::new(ModelGenerator { provider }) as Arc<dyn CodeGenerator>)
                }
                Err(reason) => {
                    warnings.push(format!(
                        "code.generator is \"model\" but no model can be used: {reason}"
                    ));
                    None
                }
            },
            _ => None,
        };
        let store = Arc::new(LazyStore::new(db.clone(), redactor.clone()).with_env(&env));
        let process_records = paths.data.as_ref().map(|dir| dir.join("processes"));
        if let Some(dir) = &process_records {
            let ended = satchel_exec::background::sweep_orphans(dir);
            if ended > 0 {
                warnings.push(format!(
                    "ended {ended} background processes left running by a Satchel that was killed"
                ));
            }
        }
        Ok(Host {
            processes: Arc::new(satchel_exec::background::ProcessTable::new(process_records)),
            root: root.to_path_buf(),
            model_generator,
            code_jobs: JobTracker::default(),
            file_stamps: Arc::default(),
            warnings,
            store: store.clone(),
            memory: Arc::new(LazyMemory::new(
                store,
                memory,
                Some(Arc::new(ModelSummarizer::new(settings)) as Arc<dyn Summarizer>),
                fetcher,
            )),
            db,
            tools_config: Arc::new(tools_config),
            policy: Arc::new(policy),
            paths,
            env,
            redactor,
            telemetry,
            model_tape: None,
            shared: tokio::sync::OnceCell::new(),
        })
    }

    /// The three tools directories.
    pub fn tool_dirs(&self) -> ToolDirs {
        ToolDirs {
            project: trust::is_trusted(&self.root).then(|| self.root.join(PROJECT_TOOLS)),
            user: self.paths.user_tools(),
            system: self.paths.system_tools.clone(),
        }
    }

    /// Logs what was wrong with the configuration. Not done by
    /// [`Host::open`], so that the caller can first make its log redact
    /// what [`Host::redactor`] does.
    pub fn log_warnings(&self) {
        for warning in &self.warnings {
            tracing::warn!("{warning}");
        }
    }

    /// Completes a freshly read [`ToolsConfig`] as this host does: see
    /// [`tools_configurer`].
    pub fn configure_tools(&self) -> satchel_agent::ConfigureTools {
        tools_configurer(&self.paths, &self.env)
    }

    /// Who answers the MCP servers' questions (`elicitation/create`): the
    /// REPL sets its prompt; elsewhere nobody does and they are refused.
    pub fn set_mcp_asker(&self, asker: Option<Arc<dyn satchel_mcp::client::ElicitationAsker>>) {
        if let Some((_, servers)) = self.shared.get() {
            servers.set_asker(asker);
        }
    }

    /// Who may let the configured model answer the MCP servers' sampling
    /// requests: the REPL passes its prompt; elsewhere nobody does and
    /// they are refused with the reason. A project whose settings cannot
    /// be read gets no sampler (requests are refused).
    pub fn set_mcp_sampling_consent(
        &self,
        consent: Option<Arc<dyn crate::sampling::SamplingConsent>>,
    ) {
        let Some((_, servers)) = self.shared.get() else {
            return;
        };
        let sampler = consent.and_then(|consent| {
            let settings = read_settings(&self.root, &self.paths, &self.env).ok()?;
            let sampler: Arc<dyn satchel_mcp::client::Sampler> =
                Arc::new(crate::sampling::ModelSampler::new(settings, consent));
            Some(sampler)
        });
        servers.set_sampler(sampler);
    }

    /// The resources and prompts the MCP servers of the shared tools offer
    /// (`None` before [`Host::shared_tools`]).
    pub fn mcp_offers(&self) -> Option<satchel_mcp::client::Offers> {
        self.shared.get().map(|(_, servers)| servers.offers())
    }

    /// Waits until each MCP server of the shared tools has come up or
    /// failed (nothing to wait for before [`Host::shared_tools`]).
    pub async fn wait_for_mcp_servers(&self) {
        if let Some((_, servers)) = self.shared.get() {
            servers.ready().await;
        }
    }

    /// Stops the MCP servers the shared tools import, if they were started
    /// (their tools stay listed, and fail fast, until the host is dropped).
    pub async fn stop_mcp_servers(&self) {
        if let Some((_, servers)) = self.shared.get() {
            servers.shutdown().await;
        }
    }

    /// Ends what this host started: ends the background processes, stops
    /// the MCP servers, waits for
    /// memory's background backfill, and closes the database once its
    /// queued writes are in (the `code` tool's jobs are the caller's).
    pub async fn close(&self) {
        self.processes.end_all().await;
        self.stop_mcp_servers().await;
        self.memory.finish_backfill().await;
        self.store.close().await;
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown().await;
        }
    }

    /// Built-in and external tools; with `reprobe`, every external tool is
    /// asked for its spec again instead of trusting the cache.
    pub async fn tools(&self, reprobe: bool) -> anyhow::Result<LiveRegistry> {
        let cache = match &self.paths.cache {
            Some(dir) => SpecCache::persistent(dir.join("tool-specs.json")),
            None => SpecCache::in_memory(),
        };
        let deps = BuiltinDeps {
            code_store: Some(self.store.clone()),
            model_generator: self.model_generator.clone(),
            code_jobs: self.code_jobs.clone(),
            memory: Some(self.memory.clone()),
            records: Some(self.store.clone()),
            file_stamps: self.file_stamps.clone(),
            processes: self.processes.clone(),
            skills: self.skill_dirs(),
        };
        let live = LiveRegistry::load_with(
            builtin_tools(&deps),
            self.tool_dirs(),
            cache,
            self.tools_config.external.clone(),
        )
        .await?;
        if reprobe {
            live.refresh(true).await?;
        }
        Ok(live)
    }

    /// A path shown relative to the project when it is inside it.
    pub fn display_path(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The agent.json layers for `root` (user, then project), with the
/// environment variables settings may name (API keys are never in files).
/// A layer that is not a small regular file, is not JSON or has invalid
/// `permissions` is an error: Satchel does not run without knowing every
/// deny rule.
pub fn read_settings(
    root: &Path,
    paths: &HostPaths,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Settings> {
    trust::warn_if_untrusted(root);
    let settings = Settings::load(&config_paths(root, paths)).map_err(refused)?;
    Ok(settings.with_env(env.clone()))
}

/// The agent.json layers of `root` that may be read: the user's, and the
/// project's when it is trusted.
pub fn config_paths(root: &Path, paths: &HostPaths) -> Vec<PathBuf> {
    trust::filter_project(root, Settings::default_paths(root, paths.config.as_deref()))
}

/// The one function that completes a [`ToolsConfig`] read from settings,
/// for the host's own configuration and every reload of a conversation's:
/// the built-ins' sections, the redactor of children's output (redacted as
/// it arrives, before it is cut, spilled or shown to anyone), and the
/// runtimes `satchel doctor --fix` installed (found after `PATH`'s).
pub fn tools_configurer(
    paths: &HostPaths,
    env: &BTreeMap<String, String>,
) -> satchel_agent::ConfigureTools {
    let runtime_bin = paths
        .js_runtime_dir()
        .map(|dir| dir.join("node_modules/.bin"));
    let env = env.clone();
    Arc::new(move |settings, config| {
        let warnings = satchel_builtins::configure(settings, config);
        config.runner.redactor = store::redactor_quietly(settings, &env);
        if let Some(bin) = runtime_bin.as_ref().filter(|bin| bin.is_dir())
            && let Some(code) = config.sections.get::<CodeConfig>()
        {
            let mut code = code.clone();
            code.search_path.push(':');
            code.search_path.push_str(&bin.display().to_string());
            config.sections.insert(code);
        }
        warnings
    })
}

/// The command's error for configuration that cannot be used.
pub fn refused(error: ConfigError) -> anyhow::Error {
    anyhow::anyhow!(
        "configuration refused: {error}\nnothing was run: fix {} (its permissions cannot be known otherwise)",
        error.path().display()
    )
}

/// The `memory` section of `settings`, with the model directory resolved
/// (relative to the project `root`), and what was wrong with the section.
pub fn memory_config(
    root: &Path,
    settings: &Settings,
    paths: &HostPaths,
) -> (MemoryConfig, Vec<String>) {
    let (memory_settings, section_warning) = settings.section::<MemorySettings>("memory");
    let (mut memory, mut warnings) = MemoryConfig::from_settings(memory_settings);
    memory.model_dir = match memory.model_dir.take() {
        Some(dir) => Some(root.join(dir)),
        None => paths.default_model_dir(),
    };
    warnings.splice(0..0, section_warning);
    (memory, warnings)
}
