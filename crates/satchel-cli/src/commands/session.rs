//! What `satchel chat`, `satchel run` and `satchel context` share: an
//! [`Agent`] wired to the project's store, tools (MCP servers' included)
//! and hot-reloaded agent.json.

use std::sync::Arc;

use anyhow::Context as _;
use satchel_agent::{Agent, AgentDeps, HotConfig};
use satchel_mcp::client::McpManager;
use satchel_store::{AuditSource, Store};
use satchel_tools::{Consent, LiveRegistry, Settings, Style};

use super::project::{Project, memory_config, refused};
use super::setup;
use crate::paths;

/// An agent and what must live as long as it does.
pub(crate) struct Session {
    pub(crate) agent: Agent,
    pub(crate) live: Arc<LiveRegistry>,
    /// The MCP servers whose tools are imported; stopped on drop.
    pub(crate) _servers: McpManager,
}

/// How the session is opened.
pub(crate) struct SessionOptions {
    pub(crate) source: AuditSource,
    pub(crate) consent: Arc<dyn Consent>,
    pub(crate) display: Style,
    /// `None`: a new conversation; `Some("")`: the latest; else an id or prefix.
    pub(crate) resume: Option<String>,
}

/// Opens the store and the tools and builds the agent.
pub(crate) async fn open(project: &Project, options: SessionOptions) -> anyhow::Result<Session> {
    let store = project
        .store
        .get()
        .await
        .map_err(|reason| anyhow::anyhow!(reason))?;
    let store: Arc<dyn Store> = Arc::new(store.clone());
    let live = Arc::new(project.tools(false).await?);
    live.spawn_watcher();
    let servers = setup::start_mcp_in_background(&live, &project.root);
    let mut config = hot_config(project)?;
    // The memory service is not part of the agent's snapshot: hand it
    // each new `memory` section.
    let (memory, root) = (project.memory.clone(), project.root.clone());
    config.on_reload(Box::new(move |settings| {
        let (section, mut warnings) = memory_config(&root, settings);
        warnings.extend(memory.reconfigure(section));
        warnings
    }));
    let deps = AgentDeps {
        store,
        tools: live.clone(),
        config,
        consent: options.consent,
        source: options.source,
        working_dir: project.root.clone(),
        display: options.display,
    };
    let agent = match options.resume.as_deref() {
        None => Agent::new(deps),
        Some("") => Agent::resume(deps, None)
            .await
            .context("no conversation to resume yet")?,
        Some(id) => Agent::resume(deps, Some(id)).await?,
    };
    Ok(Session {
        agent,
        live,
        _servers: servers,
    })
}

/// agent.json (user, then project) watched for changes; the warnings of
/// the first reading were already logged by [`Project::load`]. A file that
/// became unusable since is an error, as at start-up.
pub(crate) fn hot_config(project: &Project) -> anyhow::Result<HotConfig> {
    let paths = crate::trust::filter_project(
        &project.root,
        Settings::default_paths(&project.root, paths::user_config_dir().as_deref()),
    );
    let env = std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)))
        .collect();
    let (config, warnings) = HotConfig::load(paths, env).map_err(refused)?;
    for warning in warnings.iter().filter(|w| !project.warnings.contains(w)) {
        tracing::warn!("{warning}");
    }
    Ok(config)
}
