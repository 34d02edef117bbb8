//! One live connection to an MCP server: the rmcp client service over a
//! child's pipes or streamable HTTP (with OAuth, see [`Remote`]), and how
//! it ends.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{Fuse, FusedFuture};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningServiceCancellationToken};
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::config::{ServerConfig, TransportConfig};
use super::oauth::{Authorizer, Interaction, TokenStore};
use super::process::{ServerProcess, describe_exit};
use super::remote::{Remote, RemoteConfig};

/// What Satchel's client does with what a server sends on its own.
#[derive(Clone)]
pub(crate) struct Events {
    pub(crate) server: String,
    /// Told when the server's tool list changed.
    pub(crate) tools_changed: mpsc::Sender<()>,
    /// Who answers the server's questions, when anyone can.
    pub(crate) asker: super::elicit::AskerSlot,
    /// The directories the server may work in, for `roots/list`.
    pub(crate) roots: RootsSlot,
    /// Who answers the server's sampling requests, when anyone can.
    pub(crate) sampler: super::sample::SamplerSlot,
}

/// The roots every server is given, shared with the manager, which may
/// change them.
pub(crate) type RootsSlot = std::sync::Arc<std::sync::RwLock<Vec<std::path::PathBuf>>>;

/// `paths` as MCP roots: `file://` URIs named after their last component.
#[allow(deprecated)] // Roots left the newest revision (SEP-2577); older servers ask.
fn roots_of(paths: &[std::path::PathBuf]) -> rmcp::model::ListRootsResult {
    let roots = paths
        .iter()
        .filter_map(|path| {
            let uri = url::Url::from_directory_path(path).ok()?;
            let mut root = rmcp::model::Root::new(uri.as_str().trim_end_matches('/'));
            root.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            Some(root)
        })
        .collect();
    rmcp::model::ListRootsResult::new(roots)
}

impl ClientHandler for Events {
    fn get_info(&self) -> ClientConfig {
        // Form questions are declared always: where nobody can answer, the
        // server is told so, with the reason, rather than left guessing.
        let mut elicitation = rmcp::model::ElicitationCapability::new();
        elicitation.form = Some(Default::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        // The project and the writable paths, told again when they change.
        let mut roots = rmcp::model::RootsCapabilities::default();
        roots.list_changed = Some(true);
        capabilities.roots = Some(roots);
        // Sampling too: answered where a person agrees (the REPL), refused
        // with the reason elsewhere.
        capabilities.sampling = Some(Default::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("satchel", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        super::elicit::answer(&self.asker, &self.server, request).await
    }

    #[allow(deprecated)] // Sampling left the newest revision; older servers ask.
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        super::sample::answer(&self.sampler, &self.server, params).await
    }

    #[allow(deprecated)] // Roots left the newest revision; older servers ask.
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let paths = self.roots.read().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(roots_of(&paths))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Full means a re-list is already due.
        let _ = self.tools_changed.try_send(());
    }

    #[allow(deprecated)] // Logging left the newest revision; older servers still send it.
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, level = ?params.level, "{}", params.data);
    }
}

/// A started server: its peer for requests, and what ends it.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    cancel: RunningServiceCancellationToken,
    /// Fused: [`Connection::closed`] may see it end and be asked again.
    service: Fuse<JoinHandle<()>>,
    abort: tokio::task::AbortHandle,
    process: Option<ServerProcess>,
}

impl Connection {
    /// Starts the server and completes the MCP handshake.
    pub(crate) async fn open(config: &ServerConfig, events: Events) -> Result<Connection, String> {
        match &config.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let (mut process, pipes) =
                    ServerProcess::spawn(&config.name, command, args, env, cwd)
                        .map_err(|error| format!("cannot start `{command}`: {error}"))?;
                let served = tokio::select! {
                    served = events.serve((pipes.stdout, pipes.stdin)) => served,
                    status = process.wait() => {
                        let how = status.map_or_else(|e| e.to_string(), describe_exit);
                        return Err(with_stderr(format!("the server {how} during the handshake"), &process));
                    }
                };
                match served {
                    Ok(running) => Ok(Connection::from_running(running, Some(process))),
                    Err(error) => {
                        // A server that exited says how; let it finish
                        // writing its last words.
                        let exited =
                            tokio::time::timeout(Duration::from_millis(500), process.wait()).await;
                        let message = match exited {
                            Ok(Ok(status)) => {
                                format!("the server {} during the handshake", describe_exit(status))
                            }
                            _ => format!(
                                "the MCP handshake failed: {}",
                                super::describe::initialize(&error)
                            ),
                        };
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Err(with_stderr(message, &process))
                    }
                }
            }
            TransportConfig::Http {
                url,
                headers,
                lifecycle,
                oauth,
            } => {
                let remote_config = RemoteConfig {
                    url: url.clone(),
                    headers: headers.clone(),
                    lifecycle: *lifecycle,
                };
                // In the background nobody can log in: a server that wants
                // authorization Satchel lacks is reported as needing
                // `satchel mcp login`, with stored tokens used (and
                // refreshed) otherwise.
                let authorizer = match &oauth.token_dir {
                    Some(dir) => Some(
                        Authorizer::new(
                            url,
                            &config.name,
                            oauth.options(),
                            TokenStore::file(dir, url),
                            Interaction::Never,
                        )
                        .map_err(|e| e.to_string())?,
                    ),
                    None => None,
                };
                let remote = Remote::connect(events, &remote_config, authorizer)
                    .await
                    .map_err(|error| error.to_string())?;
                // A server may let the handshake through and want a token
                // for its tools: find out here, where it can be said so.
                if let Err(error) = remote
                    .with_auth(|peer| async move { peer.list_tools(None).await })
                    .await
                {
                    let reason = error.to_string();
                    remote.close().await;
                    return Err(reason);
                }
                Ok(Connection::from_running(remote.into_running(), None))
            }
        }
    }

    fn from_running(
        running: rmcp::service::RunningService<RoleClient, Events>,
        process: Option<ServerProcess>,
    ) -> Connection {
        let peer = running.peer().clone();
        let cancel = running.cancellation_token();
        let service = tokio::spawn(async move {
            let _ = running.waiting().await;
        });
        let abort = service.abort_handle();
        let service = service.fuse();
        Connection {
            peer,
            cancel,
            service,
            abort,
            process,
        }
    }

    /// The server's process id, for a stdio server.
    pub(crate) fn pid(&self) -> Option<i32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// Resolves when the connection ends on its own, with what happened: a
    /// stdio server's process exited (even if a helper it started still
    /// holds its stdout open) or closed its stdout, or an HTTP connection
    /// ended.
    pub(crate) async fn closed(&mut self) -> String {
        let Connection {
            service, process, ..
        } = self;
        let Some(process) = process else {
            let _ = (&mut *service).await;
            return "the connection closed".to_owned();
        };
        let status = tokio::select! {
            _ = &mut *service => {
                tokio::time::timeout(Duration::from_millis(500), process.wait()).await.ok()
            }
            status = process.wait() => Some(status),
        };
        let how = match status {
            Some(Ok(status)) => describe_exit(status),
            Some(Err(error)) => format!("could not be waited for ({error})"),
            None => "closed its stdout".to_owned(),
        };
        // Let it finish writing its last words.
        tokio::time::sleep(Duration::from_millis(50)).await;
        with_stderr(format!("the server {how}"), process)
    }

    /// Ends a connection whose stdio server already exited: the service
    /// stops at once, and what is left of the server's group is stopped
    /// as [`ServerProcess::stop`] does (at once when nothing is).
    pub(crate) async fn discard(mut self, grace: Duration) {
        self.cancel.cancel();
        self.abort.abort();
        if let Some(process) = &mut self.process {
            process.stop(grace).await;
        }
    }

    /// Shuts down in order: the transport closes (a stdio server's stdin
    /// closes), then the process gets `grace` to exit, then SIGTERM, then
    /// SIGKILL (see [`ServerProcess::stop`]).
    pub(crate) async fn shutdown(mut self, grace: Duration) {
        self.cancel.cancel();
        if !self.service.is_terminated() {
            let _ = tokio::time::timeout(grace, &mut self.service).await;
        }
        if let Some(process) = &mut self.process {
            process.stop(grace).await;
        }
    }
}

/// `message` plus the tail of the server's stderr, when it wrote any.
fn with_stderr(message: String, process: &ServerProcess) -> String {
    let tail = process.stderr_tail();
    if tail.is_empty() {
        message
    } else {
        format!("{message}; stderr: {tail}")
    }
}
