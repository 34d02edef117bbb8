//! What several commands set up the same way: configuration, the live
//! registry, the MCP servers of mcp.json, and the interrupt signal.

use std::path::Path;
use std::sync::Arc;

use satchel_mcp::McpManager;
use satchel_mcp::client::{ManagerOptions, McpConfig};
use satchel_tools::{LiveRegistry, Settings, ToolsConfig};

use super::project::read_settings;
use crate::paths;

/// agent.json's layers merged (with the environment, for API keys named
/// in config); problems become warnings on stderr.
pub(crate) fn load_config(project: &Path) -> Arc<ToolsConfig> {
    let settings = read_settings(project);
    let (config, warnings) = ToolsConfig::from_settings(&settings);
    for warning in settings.warnings.iter().chain(&warnings) {
        tracing::warn!("{warning}");
    }
    Arc::new(config)
}

/// [`load_config`] for a long-running server: the files are read again
/// only when one of them changed (size or modification time), so every
/// call sees the current configuration without paying for a reparse.
pub(crate) fn config_loader(project: &Path) -> satchel_mcp::server::ConfigLoader {
    type Key = Vec<Option<(u64, Option<std::time::SystemTime>)>>;
    let paths = Settings::default_paths(project, paths::user_config_dir().as_deref());
    let project = project.to_path_buf();
    let cache: std::sync::Mutex<Option<(Key, Arc<ToolsConfig>)>> = std::sync::Mutex::new(None);
    Arc::new(move || {
        let key: Key = paths
            .iter()
            .map(|path| {
                std::fs::metadata(path)
                    .ok()
                    .map(|meta| (meta.len(), meta.modified().ok()))
            })
            .collect();
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((known, config)) = &*cache
            && *known == key
        {
            return config.clone();
        }
        let config = load_config(&project);
        *cache = Some((key, config.clone()));
        config
    })
}

/// mcp.json's layers; problems become warnings on stderr.
pub(crate) fn load_mcp_config(project: &Path) -> McpConfig {
    let paths = McpConfig::default_paths(project, paths::user_config_dir().as_deref());
    let config = McpConfig::load(&paths, project, &|name| std::env::var(name).ok());
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    config
}

/// Starts mcp.json's servers and waits for each to come up or fail; a
/// server that fails is a warning (logged by the manager), never an error.
pub(crate) async fn start_mcp_servers(live: &Arc<LiveRegistry>, project: &Path) -> McpManager {
    let manager = start_mcp_in_background(live, project);
    manager.ready().await;
    manager
}

/// Starts mcp.json's servers without waiting; their tools join `live` as
/// they come up.
pub(crate) fn start_mcp_in_background(live: &Arc<LiveRegistry>, project: &Path) -> McpManager {
    McpManager::start(
        live.clone(),
        load_mcp_config(project),
        ManagerOptions::default(),
    )
}

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn wait_for_interrupt() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}
