//! [`McpManager`]: starts every configured MCP server, keeps each one's
//! state, imports their tools into the [`LiveRegistry`], restarts a server
//! that crashes (with backoff, up to a limit), and shuts them all down in
//! order.
//!
//! One supervisor task per server owns its connection. A stdio server
//! that fails to start is marked failed and Satchel goes on without it; a
//! stdio server that crashes keeps its tools listed while it restarts
//! (calls fail fast meanwhile) and loses them if it cannot come back.
//!
//! A remote server is a network away: one that is not up yet is tried
//! again with backoff until it is (its tools join when it answers), and
//! one that drops is reconnected for as long as Satchel runs, its tools
//! listed meanwhile (calls fail fast, saying it is reconnecting).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::Tool as RemoteTool;

use satchel_core::portable::{SchemaConsumer, schema_for};
use satchel_tools::{LiveRegistry, Tool};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{McpConfig, ServerConfig, TransportConfig};
use super::connection::{Connection, Events, RootsSlot};
use super::describe;
use super::elicit::{AskerSlot, ElicitationAsker};
use super::link::{ImportedTool, Link, ServerState, ServerStatus};
use super::naming;
use super::offers::{Offers, OffersTool};
use super::sample::{Sampler, SamplerSlot};
use super::tool::{GROUP, McpTool};
use crate::convert::from_mcp_tool;

/// How long a remote connection must hold for its failures in a row to
/// start afresh.
const REMOTE_STABLE_AFTER: Duration = Duration::from_secs(2);

/// How long a connection under suspicion has to answer.
const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// When and how often a crashed server is started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts in a row before the server is marked failed.
    pub max_attempts: u32,
    /// Wait before the first restart; doubled each time after.
    pub initial_backoff: Duration,
    /// Longest wait between restarts.
    pub max_backoff: Duration,
    /// A server up this long has its count of restarts in a row reset.
    pub stable_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            stable_after: Duration::from_secs(60),
        }
    }
}

/// How the manager runs its servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerOptions {
    /// Restarts after crashes.
    pub restart: RestartPolicy,
    /// Each step of a stdio server's shutdown (exit after stdin closes,
    /// after SIGTERM) gets this long.
    pub shutdown_grace: Duration,
    /// The directories servers are told they may work in (MCP roots): the
    /// project and the writable paths.
    pub roots: Vec<PathBuf>,
}

impl Default for ManagerOptions {
    fn default() -> ManagerOptions {
        ManagerOptions {
            restart: RestartPolicy::default(),
            shutdown_grace: Duration::from_secs(2),
            roots: Vec::new(),
        }
    }
}

struct Shared {
    live: Arc<LiveRegistry>,
    options: ManagerOptions,
    links: Arc<Vec<Arc<Link>>>,
    /// Each running server's tools as it listed them.
    imported: Mutex<BTreeMap<String, Vec<RemoteTool>>>,
    shutdown: CancellationToken,
    /// Who answers servers' questions (none until a front end says).
    asker: AskerSlot,
    /// The roots servers are given.
    roots: RootsSlot,
    /// Who answers servers' sampling requests (none until a front end says).
    sampler: SamplerSlot,
}

/// The MCP servers of a configuration, started and supervised.
pub struct McpManager {
    shared: Arc<Shared>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl McpManager {
    /// Starts every server of `config` in the background; their tools join
    /// `live` as each one comes up. Returns at once: see [`McpManager::ready`].
    ///
    /// # Caveats
    /// Must be called inside a Tokio runtime. Dropping the manager asks
    /// the supervisors to shut their servers down; call
    /// [`McpManager::shutdown`] to wait for that. A server left running
    /// when the runtime stops is killed with its process group.
    pub fn start(
        live: Arc<LiveRegistry>,
        config: McpConfig,
        options: ManagerOptions,
    ) -> McpManager {
        let links: Arc<Vec<Arc<Link>>> = Arc::new(
            config
                .servers
                .into_values()
                .map(|server| Arc::new(Link::new(server)))
                .collect(),
        );
        let roots: RootsSlot = Arc::new(std::sync::RwLock::new(options.roots.clone()));
        let shared = Arc::new(Shared {
            live,
            options,
            roots,
            links,
            imported: Mutex::new(BTreeMap::new()),
            shutdown: CancellationToken::new(),
            asker: AskerSlot::default(),
            sampler: SamplerSlot::default(),
        });
        let mut tasks = Vec::new();
        for link in shared.links.iter() {
            if let Some(problem) = &link.config.problem {
                link.set_state(ServerState::Failed {
                    reason: problem.clone(),
                });
                continue;
            }
            tasks.push(tokio::spawn(supervise(shared.clone(), link.clone())));
        }
        McpManager {
            shared,
            tasks: Mutex::new(tasks),
        }
    }

    /// Who answers the servers' questions from now on (`None`: nobody;
    /// they are refused with the reason).
    pub fn set_asker(&self, asker: Option<Arc<dyn ElicitationAsker>>) {
        *self.shared.asker.write().unwrap_or_else(|p| p.into_inner()) = asker;
    }

    /// Who answers the servers' sampling requests from now on (`None`:
    /// nobody; they are refused with the reason).
    pub fn set_sampler(&self, sampler: Option<Arc<dyn Sampler>>) {
        *self
            .shared
            .sampler
            .write()
            .unwrap_or_else(|p| p.into_inner()) = sampler;
    }

    /// Changes the roots servers are given, and tells every running
    /// server (`notifications/roots/list_changed`).
    pub async fn set_roots(&self, roots: Vec<PathBuf>) {
        self.shared.set_roots(roots).await;
    }

    /// Asks `source` for the roots every `every` (it should be cheap: the
    /// host's answers from a cache of agent.json) and tells the running
    /// servers when they change, until shutdown.
    pub fn follow_roots(
        &self,
        source: impl Fn() -> Vec<PathBuf> + Send + Sync + 'static,
        every: Duration,
    ) {
        let shared = self.shared.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => shared.set_roots(source()).await,
                    () = shared.shutdown.cancelled() => return,
                }
            }
        });
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
    }

    /// The resources and prompts of the running servers.
    pub fn offers(&self) -> Offers {
        Offers::new(self.shared.links.clone())
    }

    /// Waits until every server has finished its first start, running or failed.
    pub async fn ready(&self) {
        for link in self.shared.links.iter() {
            let mut state = link.state.subscribe();
            let _ = state
                .wait_for(|state| !matches!(state, ServerState::Starting))
                .await;
        }
    }

    /// Every server's state, tools and last error, by name.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.shared
            .links
            .iter()
            .map(|link| link.status().clone())
            .collect()
    }

    /// Shuts every server down in order (see the module docs) and removes
    /// their tools from the registry.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
        self.shared
            .imported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.shared.publish();
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl Shared {
    /// Changes the roots and tells every running server, when they differ.
    async fn set_roots(&self, roots: Vec<PathBuf>) {
        {
            let mut slot = self.roots.write().unwrap_or_else(|p| p.into_inner());
            if *slot == roots {
                return;
            }
            *slot = roots;
        }
        for link in self.links.iter() {
            if let Some(peer) = link.peer()
                && let Err(error) = peer.notify_roots_list_changed().await
            {
                tracing::debug!(server = %link.config.name, "roots change not told: {}", describe::service(&error));
            }
        }
    }

    /// Records `link`'s tools (`None` removes them) and republishes.
    fn set_tools(&self, link: &Link, tools: Option<Vec<RemoteTool>>) {
        {
            let mut imported = self.imported.lock().unwrap_or_else(|p| p.into_inner());
            match tools {
                Some(tools) => imported.insert(link.config.name.clone(), tools),
                None => imported.remove(&link.config.name),
            };
        }
        self.publish();
    }

    /// Names every imported tool and hands the lot to the registry; notes
    /// what was renamed or rejected on each server's status.
    fn publish(&self) {
        let imported = self.imported.lock().unwrap_or_else(|p| p.into_inner());
        let pairs = imported.iter().flat_map(|(server, tools)| {
            tools
                .iter()
                .map(move |t| (server.as_str(), t.name.as_ref()))
        });
        let assigned = naming::assign(pairs, &Default::default());
        let remote_tools = imported.values().flat_map(|tools| tools.iter());
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut per_server: BTreeMap<&str, (Vec<ImportedTool>, Vec<String>)> = BTreeMap::new();
        for (names, remote) in assigned.iter().zip(remote_tools) {
            let Some(link) = self.links.iter().find(|l| l.config.name == names.server) else {
                continue;
            };
            let spec = from_mcp_tool(remote, &names.local);
            // Repaired for each model API on the way out; a schema with no
            // form they accept is left out of their requests: say so once.
            let unportable = schema_for(&spec.input_schema, SchemaConsumer::Anthropic).err();
            if let Some(why) = &unportable {
                tracing::warn!(
                    "MCP server `{}`: tool `{}` is left out of model requests: {why}",
                    names.server,
                    names.remote
                );
            }
            tools.push(Arc::new(McpTool::new(
                spec,
                names.remote.clone(),
                link.clone(),
            )));
            let entry = per_server.entry(names.server.as_str()).or_default();
            entry.0.push(ImportedTool {
                name: names.local.clone(),
                remote: names.remote.clone(),
            });
            entry.1.extend(names.note.clone());
            if let Some(why) = unportable {
                entry.1.push(format!(
                    "`{}` is not offered to models: {why}",
                    names.remote
                ));
            }
        }
        // Resources and prompts reach the model through two tools of their
        // own, while a running server declares them.
        let offers = Offers::new(self.links.clone());
        if offers.any(false) {
            tools.push(Arc::new(OffersTool::resources(offers.clone())));
        }
        if offers.any(true) {
            tools.push(Arc::new(OffersTool::prompts(offers)));
        }
        let rejected = match self.live.set_extra_tools(GROUP, tools) {
            Ok(_) => self.live.rejected(),
            Err(error) => {
                tracing::warn!(%error, "cannot update the registry with MCP tools");
                return;
            }
        };
        for link in self.links.iter() {
            let (mut listed, mut notes) = per_server
                .remove(link.config.name.as_str())
                .unwrap_or_default();
            for rejection in rejected.iter().filter(|r| r.group == GROUP) {
                if listed.iter().any(|t| t.name == rejection.name) {
                    notes.push(format!(
                        "`{}` not imported: {}",
                        rejection.name, rejection.reason
                    ));
                    listed.retain(|t| t.name != rejection.name);
                }
            }
            for note in &notes {
                tracing::warn!(server = %link.config.name, "{note}");
            }
            let mut status = link.status();
            status.tools = listed;
            status.notes = notes;
        }
    }
}

/// Starts the server and lists its tools within its startup timeout.
async fn open(
    config: &ServerConfig,
    events: Events,
) -> Result<(Connection, Vec<RemoteTool>), String> {
    let attempt = async {
        let connection = Connection::open(config, events).await?;
        match connection.peer.list_all_tools().await {
            Ok(tools) => Ok((connection, tools)),
            Err(error) => {
                let reason = format!("`tools/list` failed: {}", describe::service(&error));
                connection.shutdown(Duration::from_millis(500)).await;
                Err(reason)
            }
        }
    };
    tokio::time::timeout(config.startup_timeout, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "did not start and list its tools within {} s",
                config.startup_timeout.as_secs_f64()
            ))
        })
}

/// One server's life: start, import, watch, restart, stop.
async fn supervise(shared: Arc<Shared>, link: Arc<Link>) {
    let policy = shared.options.restart.clone();
    let grace = shared.options.shutdown_grace;
    let mut failures: u32 = 0;
    let mut ever_running = false;
    let remote = matches!(link.config.transport, TransportConfig::Http { .. });
    loop {
        let (tools_changed, mut tools_changed_rx) = mpsc::channel(1);
        let events = Events {
            server: link.config.name.clone(),
            tools_changed,
            asker: shared.asker.clone(),
            roots: shared.roots.clone(),
            sampler: shared.sampler.clone(),
        };
        let opened = tokio::select! {
            opened = open(&link.config, events) => opened,
            () = shared.shutdown.cancelled() => {
                link.set_state(ServerState::Stopped);
                return;
            }
        };
        let reason = match opened {
            // A remote server that needs a login cannot get one by being
            // tried again: it waits, tools gone, until someone logs in.
            Err(reason) if reason.starts_with(super::oauth::NEEDS_LOGIN) => {
                shared.set_tools(&link, None);
                link.set_state(ServerState::not_started(reason));
                return;
            }
            Err(reason) if !ever_running && !remote => {
                link.set_state(ServerState::Failed { reason });
                return;
            }
            Err(reason) => reason,
            Ok((mut connection, tools)) => {
                ever_running = true;
                let peer = connection.peer.clone();
                link.set_connection(Some(peer.clone()), connection.pid());
                shared.set_tools(&link, Some(tools));
                link.set_state(ServerState::Running);
                let up_since = Instant::now();
                // Only losses found on this connection count.
                let mut lost = link.lost.subscribe();
                lost.mark_unchanged();
                let ended = loop {
                    tokio::select! {
                        reason = connection.closed() => break Some(reason),
                        Ok(()) = lost.changed() => {
                            // A call failed on the way: the connection is
                            // kept if the server still answers.
                            let check = link.config.startup_timeout.min(HEALTH_CHECK_TIMEOUT);
                            match tokio::time::timeout(check, peer.list_all_tools()).await {
                                Ok(Ok(tools)) => shared.set_tools(&link, Some(tools)),
                                Ok(Err(error)) if !remote => {
                                    // A stdio server that went away says how it ended.
                                    let how = tokio::time::timeout(Duration::from_secs(1), connection.closed()).await;
                                    break Some(how.unwrap_or_else(|_| format!("the server went away ({})", describe::service(&error))));
                                }
                                Ok(Err(error)) => break Some(format!("the server went away ({})", describe::service(&error))),
                                Err(_) => break Some(format!("the server did not answer within {} s", check.as_secs_f64())),
                            }
                        }
                        () = shared.shutdown.cancelled() => break None,
                        Some(()) = tools_changed_rx.recv() => {
                            match tokio::time::timeout(link.config.startup_timeout, peer.list_all_tools()).await {
                                Ok(Ok(tools)) => shared.set_tools(&link, Some(tools)),
                                Ok(Err(error)) => tracing::warn!(server = %link.config.name, "re-listing tools failed: {}", describe::service(&error)),
                                Err(_) => tracing::warn!(server = %link.config.name, "re-listing tools timed out"),
                            }
                        }
                    }
                };
                link.set_connection(None, None);
                if remote || ended.is_none() {
                    connection.shutdown(grace).await;
                } else {
                    // A stdio server that ended has nothing left to say:
                    // what is left of its group goes, without waiting.
                    connection.discard(grace).await;
                }
                let Some(reason) = ended else {
                    link.set_state(ServerState::Stopped);
                    return;
                };
                link.status().restarts += 1;
                // A stdio server's restarts count until it stays up a while
                // (a crash loop must not spin); a remote server's failures
                // start afresh once a connection held a few seconds (one
                // that accepts and drops at once still backs off).
                let stable = if remote {
                    REMOTE_STABLE_AFTER
                } else {
                    policy.stable_after
                };
                if up_since.elapsed() >= stable {
                    failures = 0;
                }
                reason
            }
        };
        failures = failures.saturating_add(1);
        if failures > policy.max_attempts && !remote {
            shared.set_tools(&link, None);
            link.set_state(ServerState::Failed {
                reason: format!(
                    "gave up after {} restarts in a row; last: {reason}",
                    policy.max_attempts
                ),
            });
            return;
        }
        link.set_state(ServerState::Restarting {
            attempt: failures,
            reason,
        });
        // A stdio server that crashed once is started again at once; one
        // that keeps crashing waits, longer each time. A remote server
        // always waits: it may be coming back on its own.
        let backoff = if !remote && failures == 1 {
            Duration::ZERO
        } else {
            let doublings = failures.saturating_sub(if remote { 1 } else { 2 });
            policy
                .initial_backoff
                .saturating_mul(1 << doublings.min(16))
                .min(policy.max_backoff)
        };
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shared.shutdown.cancelled() => {
                link.set_state(ServerState::Stopped);
                return;
            }
        }
    }
}
