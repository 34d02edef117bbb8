//! Conversations of a [`Host`]: each an [`Agent`] over the host's store,
//! shared tools (MCP servers' included) and memory, with its own consent
//! channel, display style and hot-reloaded agent.json. Many run at once;
//! each statement takes its own event sink.

use std::sync::Arc;

use anyhow::Context as _;
use satchel_agent::{Agent, AgentDeps, HotConfig};
use satchel_store::AuditSource;
use satchel_tools::{Consent, Style};

use crate::host::{Host, config_paths, memory_config, refused};

/// How a conversation is opened.
pub struct ConversationOptions {
    /// Who is talking, for the audit trail.
    pub source: AuditSource,
    /// Which person, when the source serves many (`telegram:<user id>`),
    /// for the audit trail.
    pub caller: Option<String>,
    /// Whose memories this conversation's `memory` tool works on (a
    /// Telegram user's own); `None`: the configured `memory.namespace`.
    pub memory_namespace: Option<String>,
    /// Who answers the policy's "ask" for this conversation.
    pub consent: Arc<dyn Consent>,
    /// How tool uses and results are written for this conversation's reader.
    pub display: Style,
    /// `None`: a new conversation; `Some("")`: the latest; else an id or prefix.
    pub resume: Option<String>,
}

impl Host {
    /// Opens a conversation: a new one, or a stored one to go on with.
    /// The tools are the host's shared ones (started by the first
    /// conversation); the configuration is read again before each turn.
    pub async fn conversation(&self, options: ConversationOptions) -> anyhow::Result<Agent> {
        let store = self.store.records().await.map_err(anyhow::Error::msg)?;
        let tools = self.shared_tools().await?;
        let mut config = self.hot_config()?;
        // The memory service is not part of the agent's snapshot: hand it
        // each new `memory` section.
        let (memory, root, paths) = (self.memory.clone(), self.root.clone(), self.paths.clone());
        config.on_reload(Box::new(move |settings| {
            let (section, mut warnings) = memory_config(&root, settings, &paths);
            warnings.extend(memory.reconfigure(section));
            warnings
        }));
        let deps = AgentDeps {
            store,
            tools,
            config,
            consent: options.consent,
            source: options.source,
            caller: options.caller,
            memory_namespace: options.memory_namespace,
            working_dir: self.root.clone(),
            display: options.display,
            model_tape: self.model_tape.clone(),
            hooks: self.hook_setup(),
            context: self.project_context(),
        };
        Ok(match options.resume.as_deref() {
            None => Agent::new(deps),
            Some("") => Agent::resume(deps, None)
                .await
                .context("no conversation to resume yet")?,
            Some(id) => Agent::resume(deps, Some(id)).await?,
        })
    }

    /// agent.json (user, then project) watched for changes, its tools
    /// configuration completed as the host's own is; the warnings of the
    /// first reading were already logged when the host opened. A file that
    /// became unusable since is an error, as at start-up.
    pub fn hot_config(&self) -> anyhow::Result<HotConfig> {
        let paths = config_paths(&self.root, &self.paths);
        let (config, warnings) =
            HotConfig::load(paths, self.env.clone(), self.configure_tools()).map_err(refused)?;
        for warning in warnings.iter().filter(|w| !self.warnings.contains(w)) {
            tracing::warn!("{warning}");
        }
        Ok(config)
    }
}
