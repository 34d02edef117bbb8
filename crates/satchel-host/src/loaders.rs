//! Configuration for long-running servers, read again as it changes
//! ([`config_loader`], [`policy_loader`]), and the MCP servers of mcp.json
//! whose tools a host imports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_mcp::McpManager;
use satchel_mcp::client::{ManagerOptions, McpConfig};
use satchel_tools::policy::{Mode, Policy, Rule, RuleKind};
use satchel_tools::{LiveRegistry, ToolsConfig};

use crate::file_watch::FileWatch;
use crate::host::{Host, config_paths, read_settings, refused};

/// The tools' configuration as `host` reads it now: agent.json's layers
/// merged (with the environment, for API keys named in config), completed
/// by [`Host::configure_tools`]; problems become warnings. A file that
/// cannot be used is an error (see [`read_settings`]).
fn load_config(host: &Host) -> anyhow::Result<Arc<ToolsConfig>> {
    let settings = read_settings(&host.root, &host.paths, &host.env)?;
    let (mut config, mut warnings) = ToolsConfig::from_settings(&settings);
    warnings.extend(host.configure_tools()(&settings, &mut config));
    for warning in settings.warnings.iter().chain(&warnings) {
        tracing::warn!("{warning}");
    }
    Ok(Arc::new(config))
}

/// The tools' configuration for a long-running server: the files are read
/// again only when one of them changed (size or modification time), so
/// every call sees the current configuration without paying for a
/// reparse. A change that cannot be used keeps the last good configuration.
pub fn config_loader(host: &Arc<Host>) -> satchel_mcp::server::ConfigLoader {
    let what = ("tool settings", "using the defaults");
    let reader = host.clone();
    reloading(
        &host.root,
        config_paths(&host.root, &host.paths),
        what,
        move |_| load_config(&reader),
        |_| Arc::new(ToolsConfig::default()),
    )
}

/// The policy for a long-running server, read again only when agent.json
/// changed. Rate-limit windows start afresh with a changed file. A change
/// that cannot be used (syntax error, invalid `permissions`, not a small
/// regular file) keeps the last good policy, never defaults.
pub fn policy_loader(host: &Arc<Host>) -> satchel_mcp::server::PolicyLoader {
    let reader = host.clone();
    reloading(
        &host.root,
        config_paths(&host.root, &host.paths),
        ("permission rules", "every call is refused"),
        move |_| {
            let settings = read_settings(&reader.root, &reader.paths, &reader.env)?;
            let (policy, warnings) = Policy::from_settings(&settings).map_err(refused)?;
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            Ok(Arc::new(policy))
        },
        |project| Arc::new(refuse_everything(project)),
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
/// (size or modification time, looked at only when the kernel says a
/// file may have changed: [`FileWatch`]). When a build fails, the last
/// good value stays (the error is logged once per change); `fallback`
/// serves only if no build ever succeeded. `what` names the value and the
/// fallback, for the log.
pub(crate) fn reloading<T: Send + Sync + 'static>(
    project: &Path,
    paths: Vec<PathBuf>,
    what: (&'static str, &'static str),
    build: impl Fn(&Path) -> anyhow::Result<Arc<T>> + Send + Sync + 'static,
    fallback: impl Fn(&Path) -> Arc<T> + Send + Sync + 'static,
) -> Arc<dyn Fn() -> Arc<T> + Send + Sync> {
    type Key = Vec<Option<(u64, Option<std::time::SystemTime>)>>;
    let project = project.to_path_buf();
    // The watch and the value last built, under one lock.
    let state = std::sync::Mutex::new((FileWatch::new(paths.clone()), None::<(Key, Arc<T>)>));
    Arc::new(move || {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        let (watch, cache) = &mut *state;
        if !watch.may_have_changed()
            && let Some((_, value)) = &*cache
        {
            return value.clone();
        }
        let key: Key = paths
            .iter()
            .map(|path| {
                std::fs::metadata(path)
                    .ok()
                    .map(|meta| (meta.len(), meta.modified().ok()))
            })
            .collect();
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

/// mcp.json's layers (the project's only when it is trusted); problems
/// become warnings.
pub fn load_mcp_config(host: &Host) -> McpConfig {
    let paths = crate::trust::filter_project(
        &host.root,
        McpConfig::default_paths(&host.root, host.paths.config.as_deref()),
    );
    let env = &host.env;
    let config = McpConfig::load(&paths, &host.root, &|name| env.get(name).cloned())
        .with_token_dir(
            host.paths
                .data
                .as_ref()
                .map(|dir| dir.join(satchel_mcp::client::oauth::store::DIR_NAME)),
        );
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    config
}

impl Host {
    /// The tools every conversation of this host shares (built-in,
    /// external, and the MCP servers' of mcp.json, which join as they come
    /// up), watched for changes: built and started on first use.
    pub async fn shared_tools(&self) -> anyhow::Result<Arc<LiveRegistry>> {
        let (live, _) = self
            .shared
            .get_or_try_init(|| async {
                let live = Arc::new(self.tools(false).await?);
                live.spawn_watcher();
                let servers = start_mcp_in_background(&live, self);
                anyhow::Ok((live, servers))
            })
            .await?;
        Ok(live.clone())
    }
}

/// Starts mcp.json's servers and waits for each to come up or fail; a
/// server that fails is a warning (logged by the manager), never an error.
pub async fn start_mcp_servers(live: &Arc<LiveRegistry>, host: &Host) -> McpManager {
    let manager = start_mcp_in_background(live, host);
    manager.ready().await;
    manager
}

/// Starts mcp.json's servers without waiting; their tools join `live` as
/// they come up.
pub fn start_mcp_in_background(live: &Arc<LiveRegistry>, host: &Host) -> McpManager {
    let options = ManagerOptions {
        roots: mcp_roots(host),
        ..ManagerOptions::default()
    };
    let manager = McpManager::start(live.clone(), load_mcp_config(host), options);
    // Servers hear of a change of the writable paths when agent.json changes.
    let reader = (host.root.clone(), host.paths.clone(), host.env.clone());
    let roots = reloading(
        &host.root,
        config_paths(&host.root, &host.paths),
        ("MCP roots", "the project alone"),
        move |_| Ok(Arc::new(roots_from(&reader.0, &reader.1, &reader.2))),
        |project| Arc::new(vec![project.to_path_buf()]),
    );
    manager.follow_roots(move || roots().as_ref().clone(), ROOTS_CHECK);
    manager
}

/// How often agent.json is looked at (its size and time) for new roots.
const ROOTS_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The roots MCP servers are given: the project, then the sandbox's
/// writable paths (agent.json's `exec.writable`; its warnings are the
/// tool settings' to give).
fn mcp_roots(host: &Host) -> Vec<std::path::PathBuf> {
    roots_from(&host.root, &host.paths, &host.env)
}

fn roots_from(
    root: &Path,
    paths: &crate::HostPaths,
    env: &std::collections::BTreeMap<String, String>,
) -> Vec<PathBuf> {
    let mut roots = vec![root.to_path_buf()];
    if let Ok(settings) = read_settings(root, paths, env) {
        let (config, _) = ToolsConfig::from_settings(&settings);
        for path in config.sandbox.writable {
            if !roots.contains(&path) {
                roots.push(path);
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use satchel_tools::Settings;

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
        let registry = satchel_builtins::builtin_registry().unwrap();
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
