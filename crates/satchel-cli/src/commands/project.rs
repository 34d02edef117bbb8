//! The project as every command sees it: its settings, the tools'
//! configuration, the policy, the database and memory (both opened on
//! first use), and the tools themselves.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_memory::{MemoryConfig, MemorySettings, Summarizer};
use satchel_tools::code::{CodeGenerator, GeneratorConfig, JobTracker};
use satchel_tools::config::ConfigError;
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::policy::Policy;
use satchel_tools::{BuiltinDeps, LiveRegistry, Settings, ToolsConfig, builtin_tools};

use super::db::{self, LazyStore};
use super::memory::LazyMemory;
use super::model::{self, ModelGenerator, ModelSummarizer};
use crate::paths;

/// The project's tools directory, relative to the project.
pub(crate) const PROJECT_TOOLS: &str = ".agents/tools";

/// Configuration read once per command; problems are logged as warnings,
/// except those that stop the command (see [`read_settings`]).
pub(crate) struct Project {
    /// The project directory (absolute).
    pub(crate) root: PathBuf,
    /// The database file, absolute; `None` when no location can be found
    /// (no `--db`, `SATCHEL_DB`, `XDG_DATA_HOME` or `HOME`).
    pub(crate) db: Option<PathBuf>,
    /// Limits for tools.
    pub(crate) tools_config: Arc<ToolsConfig>,
    /// Permission rules and rate limits.
    pub(crate) policy: Arc<Policy>,
    /// The database, opened when something first records.
    pub(crate) store: Arc<LazyStore>,
    /// The model that writes code for `generate` jobs, when the config asks
    /// for one and it can be set up.
    pub(crate) model_generator: Option<Arc<dyn CodeGenerator>>,
    /// Background jobs the `code` tool started in this process.
    pub(crate) code_jobs: JobTracker,
    /// What was wrong with the configuration (already logged).
    pub(crate) warnings: Vec<String>,
    /// The `memory` tool's memory (the `memory` section, with the model
    /// directory resolved), opened over `store` when first used.
    pub(crate) memory: Arc<LazyMemory>,
}

impl Project {
    /// Reads the agent.json layers for `root`; fails when one cannot be
    /// used (see [`read_settings`]).
    pub(crate) fn load(root: &Path, db: Option<PathBuf>) -> anyhow::Result<Project> {
        let settings = read_settings(root)?;
        let (policy, policy_warnings) = Policy::from_settings(&settings).map_err(refused)?;
        let (mut tools_config, tools_warnings) = ToolsConfig::from_settings(&settings);
        let (memory, memory_warnings) = memory_config(root, &settings);
        let redactor = db::redactor(&settings);
        crate::set_log_redactor(redactor.clone());
        // Children's output is redacted as it arrives, before it is cut,
        // spilled or shown to anyone.
        tools_config.runner.redactor = redactor.clone();
        // Runtimes `satchel doctor --fix` installed are found after PATH's.
        if let Some(bin) = paths::js_runtime_dir().map(|dir| dir.join("node_modules/.bin"))
            && bin.is_dir()
        {
            let search = &mut tools_config.code.search_path;
            search.push(':');
            search.push_str(&bin.display().to_string());
        }
        let warnings: Vec<String> = settings
            .warnings
            .iter()
            .chain(&tools_warnings)
            .chain(&policy_warnings)
            .chain(&memory_warnings)
            .cloned()
            .collect();
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        let model_generator = match tools_config.code.generator {
            Some(GeneratorConfig::Model) => match model::provider(&settings) {
                Ok(provider) => {
                    Some(Arc::new(ModelGenerator { provider }) as Arc<dyn CodeGenerator>)
                }
                Err(reason) => {
                    tracing::warn!(
                        "code.generator is \"model\" but no model can be used: {reason}"
                    );
                    None
                }
            },
            _ => None,
        };
        let store = Arc::new(LazyStore::new(db.clone(), redactor));
        Ok(Project {
            root: root.to_path_buf(),
            model_generator,
            code_jobs: JobTracker::default(),
            warnings,
            store: store.clone(),
            memory: Arc::new(LazyMemory::new(
                store,
                memory,
                Some(Arc::new(ModelSummarizer::new(settings)) as Arc<dyn Summarizer>),
            )),
            db,
            tools_config: Arc::new(tools_config),
            policy: Arc::new(policy),
        })
    }

    /// The three tools directories.
    pub(crate) fn tool_dirs(&self) -> ToolDirs {
        ToolDirs {
            project: crate::trust::is_trusted(&self.root).then(|| self.root.join(PROJECT_TOOLS)),
            user: paths::user_config_dir().map(|dir| dir.join("tools")),
            system: paths::system_tools_dir(),
        }
    }

    /// Built-in and external tools; with `reprobe`, every external tool is
    /// asked for its spec again instead of trusting the cache.
    pub(crate) async fn tools(&self, reprobe: bool) -> anyhow::Result<LiveRegistry> {
        let cache = match paths::user_cache_dir() {
            Some(dir) => SpecCache::persistent(dir.join("tool-specs.json")),
            None => SpecCache::in_memory(),
        };
        let deps = BuiltinDeps {
            code_store: Some(self.store.clone()),
            model_generator: self.model_generator.clone(),
            code_jobs: self.code_jobs.clone(),
            memory: Some(self.memory.clone()),
            records: Some(self.store.clone()),
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
    pub(crate) fn display_path(&self, path: &Path) -> String {
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
pub(crate) fn read_settings(root: &Path) -> anyhow::Result<Settings> {
    crate::trust::warn_if_untrusted(root);
    let settings = Settings::load(&crate::trust::filter_project(
        root,
        Settings::default_paths(root, paths::user_config_dir().as_deref()),
    ))
    .map_err(refused)?;
    Ok(settings.with_env(
        std::env::vars_os()
            .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?))),
    ))
}

/// The command's error for configuration that cannot be used.
pub(crate) fn refused(error: ConfigError) -> anyhow::Error {
    anyhow::anyhow!(
        "configuration refused: {error}\nnothing was run: fix {} (its permissions cannot be known otherwise)",
        error.path().display()
    )
}

/// The `memory` section of `settings`, with the model directory resolved
/// (relative to the project `root`), and what was wrong with the section.
pub(crate) fn memory_config(root: &Path, settings: &Settings) -> (MemoryConfig, Vec<String>) {
    let (memory_settings, section_warning) = settings.section::<MemorySettings>("memory");
    let (mut memory, mut warnings) = MemoryConfig::from_settings(memory_settings);
    memory.model_dir = match memory.model_dir.take() {
        Some(dir) => Some(root.join(dir)),
        None => paths::default_model_dir(),
    };
    warnings.splice(0..0, section_warning);
    (memory, warnings)
}
