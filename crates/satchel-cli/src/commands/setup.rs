//! What several commands set up the same way: configuration, the live
//! registry, the MCP servers of mcp.json, and the interrupt signal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_mcp::McpManager;
use satchel_mcp::client::{ManagerOptions, McpConfig};
use satchel_tools::policy::{Mode, Policy, Rule, RuleKind};
use satchel_tools::{LiveRegistry, Settings, ToolsConfig};

use super::project::{read_settings, refused};
use crate::paths;

/// agent.json's layers merged (with the environment, for API keys named
/// in config); problems become warnings on stderr. A file that cannot be
/// used is an error (see [`read_settings`]).
pub(crate) fn load_config(project: &Path) -> anyhow::Result<Arc<ToolsConfig>> {
    let settings = read_settings(project)?;
    let (mut config, warnings) = ToolsConfig::from_settings(&settings);
    for warning in settings.warnings.iter().chain(&warnings) {
        tracing::warn!("{warning}");
    }
    config.runner.redactor = super::db::redactor(&settings);
    Ok(Arc::new(config))
}

/// [`load_config`] for a long-running server: the files are read again
/// only when one of them changed (size or modification time), so every
/// call sees the current configuration without paying for a reparse. A
/// change that cannot be used keeps the last good configuration.
pub(crate) fn config_loader(project: &Path) -> satchel_mcp::server::ConfigLoader {
    let what = ("tool settings", "using the defaults");
    reloading(project, config_paths(project), what, load_config, |_| {
        Arc::new(ToolsConfig::default())
    })
}

/// The policy for a long-running server, read again only when agent.json
/// changed. Rate-limit windows start afresh with a changed file. A change
/// that cannot be used (syntax error, invalid `permissions`, not a small
/// regular file) keeps the last good policy, never defaults.
pub(crate) fn policy_loader(project: &Path) -> satchel_mcp::server::PolicyLoader {
    reloading(
        project,
        config_paths(project),
        ("permission rules", "every call is refused"),
        |project| {
            let settings = read_settings(project)?;
            let (policy, warnings) = Policy::from_settings(&settings).map_err(refused)?;
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            Ok(Arc::new(policy))
        },
        |project| Arc::new(refuse_everything(project)),
    )
}

/// The agent.json layers of `project`, as [`read_settings`] reads them.
fn config_paths(project: &Path) -> Vec<PathBuf> {
    crate::trust::filter_project(
        project,
        Settings::default_paths(project, paths::user_config_dir().as_deref()),
    )
}

/// The policy when no configuration could ever be read (the files broke
/// between start-up and the first call): every call is refused.
fn refuse_everything(project: &Path) -> Policy {
    let origin = project.join(satchel_tools::config::PROJECT_CONFIG);
    Policy::new(
        Rule::parse(RuleKind::Deny, "*", Some(origin))
            .into_iter()
            .collect(),
        Mode::ReadOnly,
        Vec::new(),
        1,
        std::time::Duration::ZERO,
    )
}

/// `build(project)`, built again only when an agent.json layer changed
/// (size or modification time). When a build fails, the last good value
/// stays (the error is logged once per change); `fallback` serves only if
/// no build ever succeeded. `what` names the value and the fallback, for
/// the log.
fn reloading<T: Send + Sync + 'static>(
    project: &Path,
    paths: Vec<PathBuf>,
    what: (&'static str, &'static str),
    build: impl Fn(&Path) -> anyhow::Result<Arc<T>> + Send + Sync + 'static,
    fallback: impl Fn(&Path) -> Arc<T> + Send + Sync + 'static,
) -> Arc<dyn Fn() -> Arc<T> + Send + Sync> {
    type Key = Vec<Option<(u64, Option<std::time::SystemTime>)>>;
    let project = project.to_path_buf();
    let cache: std::sync::Mutex<Option<(Key, Arc<T>)>> = std::sync::Mutex::new(None);
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
        if let Some((known, value)) = &*cache
            && *known == key
        {
            return value.clone();
        }
        let value = match (build(&project), &*cache) {
            (Ok(value), _) => value,
            (Err(error), Some((_, last_good))) => {
                tracing::error!(
                    "NOT RELOADED: {error:#}\nthe last good {} stay in force",
                    what.0
                );
                last_good.clone()
            }
            (Err(error), None) => {
                tracing::error!("{error:#}\nno good {} were ever read: {}", what.0, what.1);
                fallback(&project)
            }
        };
        *cache = Some((key, value.clone()));
        value
    })
}

/// mcp.json's layers; problems become warnings on stderr.
pub(crate) fn load_mcp_config(project: &Path) -> McpConfig {
    let paths = crate::trust::filter_project(
        project,
        McpConfig::default_paths(project, paths::user_config_dir().as_deref()),
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(path: &Path) -> anyhow::Result<Arc<Policy>> {
        let settings = Settings::load(&[path.to_path_buf()])?;
        Ok(Arc::new(Policy::from_settings(&settings)?.0))
    }

    /// Issue #30: the MCP server re-reads agent.json as it changes; a
    /// broken permissions edit keeps the last good policy, never defaults.
    #[test]
    fn the_servers_policy_keeps_its_last_good_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, r#"{"permissions": {"deny": ["bash(rm *)"]}}"#).unwrap();
        let file = path.clone();
        let loader = reloading(
            dir.path(),
            vec![path.clone()],
            ("permission rules", "every call is refused"),
            move |_| policy(&file),
            |project| Arc::new(refuse_everything(project)),
        );
        let first = loader();
        assert_eq!(first.rules().len(), 1);
        assert!(Arc::ptr_eq(&first, &loader()), "unchanged: not rebuilt");

        std::fs::write(&path, r#"{"permissions": {"denny": ["bash(rm *)", "x"]}}"#).unwrap();
        assert!(Arc::ptr_eq(&first, &loader()), "the last good policy stays");

        std::fs::write(
            &path,
            r#"{"permissions": {"deny": ["bash(rm *)", "bash(dd *)"]}}"#,
        )
        .unwrap();
        assert_eq!(loader().rules().len(), 2, "a fixed file applies");
    }

    #[test]
    fn with_no_good_reading_ever_every_call_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.json");
        std::fs::write(&path, "{").unwrap();
        let file = path.clone();
        let loader = reloading(
            dir.path(),
            vec![path],
            ("permission rules", "every call is refused"),
            move |_| policy(&file),
            |project| Arc::new(refuse_everything(project)),
        );
        let registry = satchel_tools::builtin_registry().unwrap();
        for tool in ["bash", "memory", "search"] {
            let spec = registry.get(tool).unwrap().spec();
            let decision = loader().decide(spec, &serde_json::json!({"command": "ls"}));
            assert_eq!(
                decision.verdict,
                satchel_tools::policy::Verdict::Deny,
                "{tool}"
            );
        }
    }
}
