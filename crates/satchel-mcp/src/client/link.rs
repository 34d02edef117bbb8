//! [`Link`]: what an imported server's tools, the manager and the
//! supervisor share about one server (its connection while it runs, its
//! state, its status for `satchel mcp servers`), so a tool reaches its
//! server without depending on the manager that started it.

use std::sync::{Mutex, RwLock};

use rmcp::service::{Peer, RoleClient};
use serde::Serialize;
use tokio::sync::watch;

use super::config::ServerConfig;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerState {
    /// Starting for the first time.
    Starting,
    /// Connected; its tools are imported.
    Running,
    /// Crashed; waiting to start again.
    Restarting {
        /// Restarts in a row so far.
        attempt: u32,
        /// What happened.
        reason: String,
    },
    /// A remote server that wants an OAuth login nobody has done (or
    /// whose tokens can no longer be refreshed): not retried until
    /// `satchel mcp login NAME`.
    NeedsLogin {
        /// What to do.
        reason: String,
    },
    /// Did not start, or crashed too often; its tools are gone.
    Failed {
        /// Why.
        reason: String,
    },
    /// Shut down.
    Stopped,
}

impl ServerState {
    /// The state a server that could not (re)start is left in: needing
    /// login when that is why, failed otherwise.
    pub(crate) fn not_started(reason: String) -> ServerState {
        if reason.starts_with(super::oauth::NEEDS_LOGIN) {
            ServerState::NeedsLogin { reason }
        } else {
            ServerState::Failed { reason }
        }
    }

    /// The state's name: `starting`, `running`, `restarting`,
    /// `needs-login`, `failed`, `stopped`.
    pub fn label(&self) -> &'static str {
        match self {
            ServerState::NeedsLogin { .. } => "needs-login",
            ServerState::Starting => "starting",
            ServerState::Running => "running",
            ServerState::Restarting { .. } => "restarting",
            ServerState::Failed { .. } => "failed",
            ServerState::Stopped => "stopped",
        }
    }
}

/// One imported tool's names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportedTool {
    /// The name in Satchel's registry.
    pub name: String,
    /// The name on the server.
    pub remote: String,
}

/// A server as `satchel mcp servers` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// The command line or URL.
    pub transport: String,
    /// Where it is in its life.
    #[serde(flatten)]
    pub state: ServerState,
    /// Its tools in Satchel's registry.
    pub tools: Vec<ImportedTool>,
    /// The last thing that went wrong, if anything did.
    pub last_error: Option<String>,
    /// Restarts after crashes so far.
    pub restarts: u32,
    /// Renamed or rejected tools, and why.
    pub notes: Vec<String>,
    /// The process id of a stdio server that is running.
    pub pid: Option<i32>,
}

/// What tools, the manager and the supervisor share about one server.
pub(crate) struct Link {
    pub(crate) config: ServerConfig,
    /// The connection, with its number (each new connection counts one up).
    peer: RwLock<Option<(Peer<RoleClient>, u64)>>,
    connections: std::sync::atomic::AtomicU64,
    status: Mutex<ServerStatus>,
    pub(super) state: watch::Sender<ServerState>,
    /// Told when a call finds the connection gone: a remote server that
    /// went away closes no pipe, so its supervisor learns it from a call.
    pub(super) lost: watch::Sender<u64>,
    /// The current connection's number (`None` while there is none), so
    /// a call in flight on a connection that ended ends with it.
    current: watch::Sender<Option<u64>>,
}

impl Link {
    pub(super) fn new(config: ServerConfig) -> Link {
        let status = ServerStatus {
            name: config.name.clone(),
            transport: config.transport.describe(),
            state: ServerState::Starting,
            tools: Vec::new(),
            last_error: None,
            restarts: 0,
            notes: Vec::new(),
            pid: None,
        };
        Link {
            config,
            peer: RwLock::new(None),
            connections: std::sync::atomic::AtomicU64::new(0),
            status: Mutex::new(status),
            state: watch::Sender::new(ServerState::Starting),
            lost: watch::Sender::new(0),
            current: watch::Sender::new(None),
        }
    }

    /// Resolves once connection number `connection` is no longer the
    /// server's connection (it ended, or another replaced it).
    pub(crate) async fn ended(&self, connection: u64) {
        let mut current = self.current.subscribe();
        let _ = current.wait_for(|now| *now != Some(connection)).await;
    }

    /// A call through connection number `connection` failed on the way:
    /// the supervisor checks that connection (a failure seen late, on a
    /// connection already replaced, is ignored).
    pub(crate) fn connection_lost(&self, connection: u64) {
        let current = self
            .peer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, number)| *number);
        if current == Some(connection) {
            self.lost.send_modify(|count| *count += 1);
        }
    }

    /// The connection to call through, while the server is running.
    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer_and_number().map(|(peer, _)| peer)
    }

    /// The connection and its number, for [`Link::connection_lost`].
    pub(crate) fn peer_and_number(&self) -> Option<(Peer<RoleClient>, u64)> {
        self.peer.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The state in a few words, for error messages.
    pub(crate) fn state_summary(&self) -> String {
        match &*self.state.borrow() {
            ServerState::Restarting { attempt, reason } => {
                format!("restarting, attempt {attempt}, after: {reason}")
            }
            ServerState::Failed { reason } | ServerState::NeedsLogin { reason } => {
                format!("failed: {reason}")
            }
            other => other.label().to_owned(),
        }
    }

    pub(super) fn status(&self) -> std::sync::MutexGuard<'_, ServerStatus> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_state(&self, state: ServerState) {
        match &state {
            ServerState::Failed { reason }
            | ServerState::Restarting { reason, .. }
            | ServerState::NeedsLogin { reason } => {
                tracing::warn!(server = %self.config.name, state = state.label(), "MCP server: {reason}");
            }
            ServerState::Running => {
                tracing::info!(server = %self.config.name, "MCP server running")
            }
            ServerState::Starting | ServerState::Stopped => {}
        }
        {
            let mut status = self.status();
            status.state = state.clone();
            if let ServerState::Failed { reason }
            | ServerState::Restarting { reason, .. }
            | ServerState::NeedsLogin { reason } = &state
            {
                status.last_error = Some(reason.clone());
            }
        }
        self.state.send_replace(state);
    }

    pub(super) fn set_connection(&self, peer: Option<Peer<RoleClient>>, pid: Option<i32>) {
        let numbered = peer.map(|peer| {
            let number = self
                .connections
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            (peer, number)
        });
        let number = numbered.as_ref().map(|(_, number)| *number);
        *self.peer.write().unwrap_or_else(|p| p.into_inner()) = numbered;
        self.current.send_replace(number);
        self.status().pid = pid;
    }
}
