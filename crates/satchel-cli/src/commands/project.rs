//! The project as every command sees it: its settings, the tools'
//! configuration, the policy, and the tools themselves.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_memory::{MemoryConfig, MemorySettings};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::policy::Policy;
use satchel_tools::{LiveRegistry, Settings, ToolsConfig};

use crate::paths;

/// The project's tools directory, relative to the project.
pub(crate) const PROJECT_TOOLS: &str = ".agents/tools";

/// Configuration read once per command; problems are logged as warnings.
pub(crate) struct Project {
    /// The project directory (absolute).
    pub(crate) root: PathBuf,
    /// agent.json layers, merged, with the environment.
    pub(crate) settings: Settings,
    /// The database file, absolute; `None` when no location can be found
    /// (no `--db`, `SATCHEL_DB`, `XDG_DATA_HOME` or `HOME`).
    pub(crate) db: Option<PathBuf>,
    /// Limits for tools.
    pub(crate) tools_config: Arc<ToolsConfig>,
    /// Permission rules and rate limits.
    pub(crate) policy: Arc<Policy>,
    /// The `memory` section, with the model directory resolved.
    pub(crate) memory: MemoryConfig,
}

impl Project {
    /// Reads the agent.json layers for `root`.
    pub(crate) fn load(root: &Path, db: Option<PathBuf>) -> Project {
        let settings =
            Settings::load(&Settings::default_paths(
                root,
                paths::user_config_dir().as_deref(),
            ))
            .with_env(std::env::vars_os().filter_map(|(key, value)| {
                Some((key.into_string().ok()?, value.into_string().ok()?))
            }));
        let (tools_config, tools_warnings) = ToolsConfig::from_settings(&settings);
        let (policy, policy_warnings) = Policy::from_settings(&settings);
        let (memory_settings, memory_warning) = settings.section::<MemorySettings>("memory");
        let (mut memory, memory_warnings) = MemoryConfig::from_settings(memory_settings);
        memory.model_dir = match memory.model_dir.take() {
            // A relative model directory is relative to the project.
            Some(dir) => Some(root.join(dir)),
            None => paths::default_model_dir(),
        };
        for warning in settings
            .warnings
            .iter()
            .chain(&tools_warnings)
            .chain(&policy_warnings)
            .chain(memory_warning.iter())
            .chain(&memory_warnings)
        {
            tracing::warn!("{warning}");
        }
        Project {
            root: root.to_path_buf(),
            db,
            settings,
            tools_config: Arc::new(tools_config),
            policy: Arc::new(policy),
            memory,
        }
    }

    /// The three tools directories.
    pub(crate) fn tool_dirs(&self) -> ToolDirs {
        ToolDirs {
            project: Some(self.root.join(PROJECT_TOOLS)),
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
        let live =
            LiveRegistry::load(self.tool_dirs(), cache, self.tools_config.external.clone()).await?;
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
