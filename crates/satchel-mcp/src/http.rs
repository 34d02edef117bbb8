//! Streamable HTTP serving: rmcp's `StreamableHttpService` under `/mcp` in
//! an axum router, with the checks the MCP specification asks of a server
//! that may be reached from a browser, and the limits that keep it standing
//! whatever its clients do.
//!
//! - Loopback is the default; any other address needs a bearer token, or
//!   [`bind`] refuses to start ([`McpError::TokenRequired`]). With a token,
//!   every request must carry `Authorization: Bearer <token>` (401 otherwise).
//! - `Origin`: a request that carries one must come from localhost or
//!   loopback (any port, http or https) or from an origin allowed
//!   explicitly; others get 403 (the specification's DNS-rebinding guidance).
//! - `Host`: on loopback only loopback names are accepted (403 otherwise);
//!   off loopback any host is, since the token guards the door.
//! - [`HttpLimits`]: at most `max_sessions` live sessions (a new one takes
//!   the place of the idlest session that has no request in flight; when
//!   every session is busy, `initialize` gets 503); a session without
//!   requests for `session_idle` is closed (its id then gets 404, and the
//!   client initializes again); headers, then the body, must each arrive
//!   within `read_timeout` (the connection is closed, or 408); bodies over
//!   `max_body_bytes` get 413; at most `max_connections` connections are
//!   open (more wait in the kernel's accept queue).
//!
//! Memory is bounded by `max_sessions` times a session's cost (about 55 KiB
//! idle) plus `max_connections` times (`max_body_bytes`, twice while rmcp
//! parses it, plus hyper's buffers).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::server::{PerSession, WatchRoots};

use crate::McpError;

/// The path the MCP endpoint is served at.
pub const ENDPOINT: &str = "/mcp";

/// The header that names a session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Origins always allowed: pages served from this machine.
const LOCAL_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// The most connections a server accepts at once, whatever is asked (the
/// semaphore counts in `u32`).
const CONNECTION_CEILING: usize = 1 << 20;

/// How long shutdown waits for open connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Where and how to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The address to listen on; port 0 picks a free one.
    pub addr: SocketAddr,
    /// Bearer token every request must carry; required off loopback.
    pub token: Option<String>,
    /// Browser origins allowed besides localhost and loopback, e.g.
    /// `https://app.example.com` (a missing port means the scheme's default;
    /// `:*` allows any).
    pub allowed_origins: Vec<String>,
}

/// What HTTP clients may hold, so that no client (careless or hostile) can
/// grow the server's memory or keep its connections without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Most live sessions. Over it, `initialize` closes the idlest session
    /// without a request in flight (its client gets 404 and initializes
    /// again), or gets 503 when every session is busy.
    pub max_sessions: usize,
    /// A session without any request for this long is closed.
    pub session_idle: Duration,
    /// Most open connections; further ones wait to be accepted.
    pub max_connections: usize,
    /// A client must send a request's headers within this time (or the
    /// connection is closed; idle keep-alive connections too), then its
    /// body within this time again (or 408).
    pub read_timeout: Duration,
    /// Largest request body; larger ones get 413.
    pub max_body_bytes: usize,
}

impl HttpLimits {
    /// The defaults: 256 sessions idle for at most 30 minutes, 64
    /// connections, 10 seconds to send headers and body, 4 MiB bodies.
    pub const DEFAULT: HttpLimits = HttpLimits {
        max_sessions: 256,
        session_idle: Duration::from_secs(30 * 60),
        max_connections: 64,
        read_timeout: Duration::from_secs(10),
        max_body_bytes: 4 * 1024 * 1024,
    };
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits::DEFAULT
    }
}

/// A listener bound and checked, ready to serve `S` (a
/// [`SatchelServer`](crate::SatchelServer), or the conformance fixtures
/// around one).
pub struct BoundHttp<S> {
    listener: TcpListener,
    server: S,
    loopback: bool,
    token: Option<String>,
    origins: Vec<String>,
    limits: HttpLimits,
    shutdown: CancellationToken,
}

/// Checks `options` and binds the listener, with the default
/// [`HttpLimits`]; nothing is served until [`BoundHttp::serve`].
pub async fn bind<S>(
    server: S,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<BoundHttp<S>, McpError>
where
    S: PerSession,
{
    let loopback = options.addr.ip().is_loopback();
    let token = match &options.token {
        Some(token) if valid_token(token) => Some(token.clone()),
        Some(_) => return Err(McpError::InvalidToken),
        None if loopback => None,
        None => return Err(McpError::TokenRequired { addr: options.addr }),
    };
    let origins = allowed_origins(&options.allowed_origins)?;
    let listener = TcpListener::bind(options.addr)
        .await
        .map_err(|source| McpError::Bind {
            addr: options.addr,
            source,
        })?;
    Ok(BoundHttp {
        listener,
        server,
        loopback,
        token,
        origins,
        limits: HttpLimits::DEFAULT,
        shutdown,
    })
}

impl<S: PerSession> BoundHttp<S> {
    /// Serves within `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: HttpLimits) -> BoundHttp<S> {
        self.limits = limits;
        self
    }

    /// The address actually bound (the port, when 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, McpError> {
        self.listener.local_addr().map_err(|source| McpError::Bind {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })
    }

    /// The endpoint's router (token, body and session checks, then rmcp)
    /// and the sessions it keeps.
    fn router(&self) -> (Router, Arc<BoundedSessions>) {
        let limits = self.limits;
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_origins(self.origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(limits.max_body_bytes)
            .with_cancellation_token(self.shutdown.child_token());
        if !self.loopback {
            config = config.disable_allowed_hosts();
        }
        let sessions = Arc::new(BoundedSessions::new(limits.max_sessions));
        let server = self.server.clone();
        let service: StreamableHttpService<S, BoundedSessions> = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            sessions.clone(),
            config,
        );
        let gate = Arc::new(Gate {
            limits,
            sessions: sessions.clone(),
        });
        let mut router = Router::new()
            .nest_service(ENDPOINT, service)
            .layer(middleware::from_fn_with_state(gate, read_request));
        // Outermost: a request without the token costs no body read.
        if let Some(token) = &self.token {
            let expected: Arc<str> = format!("Bearer {token}").into();
            router = router.layer(middleware::from_fn_with_state(expected, require_token));
        }
        (router, sessions)
    }

    /// Serves until the shutdown token fires: HTTP/1.1, one task per
    /// connection, at most `max_connections` at once.
    ///
    /// # Caveats
    /// On shutdown, open sessions are closed and in-flight calls are
    /// cancelled with them (their process groups are stopped); open
    /// connections get a few seconds to finish their answers, then are
    /// dropped.
    pub async fn serve(self) -> Result<(), McpError> {
        let (router, sessions) = self.router();
        let BoundHttp {
            listener,
            limits,
            shutdown,
            ..
        } = self;
        let sweeper = tokio::spawn(expire_idle_sessions(
            sessions,
            limits.session_idle,
            shutdown.clone(),
        ));
        let max_connections = limits.max_connections.clamp(1, CONNECTION_CEILING);
        let permits = Arc::new(Semaphore::new(max_connections));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.read_timeout);
        let service = TowerToHyperService::new(router);

        loop {
            // A permit first: over the cap, connections wait in the kernel's
            // accept queue rather than in this process.
            let permit = tokio::select! {
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_closed) => break,
                },
                () = shutdown.cancelled() => break,
            };
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(error) => {
                        // Out of descriptors, or a connection reset before
                        // it was accepted: wait a little, go on.
                        tracing::debug!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = shutdown.cancelled() => break,
            };
            // Small answers go out at once.
            let _ = stream.set_nodelay(true);
            let connection = http.serve_connection(TokioIo::new(stream), service.clone());
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let mut connection = pin!(connection);
                let result = tokio::select! {
                    result = connection.as_mut() => result,
                    () = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                };
                if let Err(error) = result {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
            });
        }
        sweeper.abort();
        // Every permit back means every connection task has ended.
        let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(all)).await;
        Ok(())
    }
}

/// What [`read_request`] needs: the limits, and the sessions to tell
/// whether an `initialize` can be admitted.
struct Gate {
    limits: HttpLimits,
    sessions: Arc<BoundedSessions>,
}

/// Reads the whole body within the read timeout and the size limit (408 or
/// 413 otherwise), and answers an `initialize` that no session could make
/// room for with 503, before rmcp sees the request.
async fn read_request(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let max = gate.limits.max_body_bytes;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > u64::try_from(max).unwrap_or(u64::MAX)) {
        return body_too_large(max);
    }
    let (parts, body) = request.into_parts();
    let capacity = declared
        .and_then(|length| usize::try_from(length).ok())
        .unwrap_or(0)
        .min(max);
    let mut collected = Vec::with_capacity(capacity);
    let mut chunks = body.into_data_stream();
    let read = async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|error| BodyFault::Broken(error.to_string()))?;
            if chunk.len() > max.saturating_sub(collected.len()) {
                return Err(BodyFault::TooLarge);
            }
            collected.extend_from_slice(&chunk);
        }
        Ok(())
    };
    match tokio::time::timeout(gate.limits.read_timeout, read).await {
        Ok(Ok(())) => {}
        Ok(Err(BodyFault::TooLarge)) => return body_too_large(max),
        Ok(Err(BodyFault::Broken(error))) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                &format!("the request body could not be read: {error}"),
            );
        }
        Err(_elapsed) => {
            return closing(jsonrpc_error(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                &format!(
                    "the request body did not arrive within {:?}",
                    gate.limits.read_timeout
                ),
            ));
        }
    }
    if parts.method == Method::POST
        && !parts.headers.contains_key(SESSION_HEADER)
        && gate.sessions.is_full_and_busy()
        && is_initialize(&collected)
    {
        return jsonrpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            &SessionsError::Full {
                max: gate.sessions.max,
            }
            .to_string(),
        );
    }
    next.run(Request::from_parts(
        parts,
        Body::from(Bytes::from(collected)),
    ))
    .await
}

/// Why a request body was not read whole.
enum BodyFault {
    /// Over the limit.
    TooLarge,
    /// The connection failed mid-body.
    Broken(String),
}

/// Whether `body` is a JSON-RPC `initialize` request.
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
    }
    serde_json::from_slice::<Probe<'_>>(body).is_ok_and(|probe| probe.method == Some("initialize"))
}

/// 413, saying what the limit is.
fn body_too_large(max: usize) -> Response {
    closing(jsonrpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        -32600,
        &format!(
            "the request body is larger than this server's limit of {max} bytes (`mcp serve --max-body-bytes`)"
        ),
    ))
}

/// `response`, with the connection closed after it: the rest of the body
/// is left unread.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// An HTTP error whose body is a JSON-RPC error without an id, so MCP
/// clients can show its message.
fn jsonrpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Closes sessions idle for longer than `idle`, checking a few times per
/// `idle` (at least every 30 seconds), until `shutdown` fires.
async fn expire_idle_sessions(
    sessions: Arc<BoundedSessions>,
    idle: Duration,
    shutdown: CancellationToken,
) {
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closed_some = false;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        // The sessions closed a tick ago have wound down by now.
        if std::mem::take(&mut closed_some) {
            satchel_exec::give_back_freed_memory();
        }
        let expired = sessions.table().take_expired(Instant::now(), idle);
        closed_some = !expired.is_empty();
        for id in expired {
            tracing::debug!(session = %id, "closing an idle MCP session");
            if let Err(error) = sessions.inner.close_session(&id).await {
                tracing::debug!(session = %id, %error, "closing an idle session failed");
            }
        }
    }
}

/// rmcp's in-memory sessions, with their number capped and their activity
/// tracked so idle ones can be closed and the idlest one evicted.
///
/// rmcp's own idle timer is off: it counts only events inside the session,
/// so it would close a session whose client is waiting on a long call or
/// listening on its GET stream.
struct BoundedSessions {
    inner: LocalSessionManager,
    table: Arc<Mutex<SessionTable>>,
    max: usize,
}

impl BoundedSessions {
    fn new(max: usize) -> BoundedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = None;
        BoundedSessions {
            inner,
            table: Arc::default(),
            max,
        }
    }

    fn table(&self) -> MutexGuard<'_, SessionTable> {
        lock(&self.table)
    }

    /// Whether a new session would be refused now.
    fn is_full_and_busy(&self) -> bool {
        let table = self.table();
        table.live() >= self.max && table.idlest().is_none()
    }

    /// Marks `id` busy until the returned stream is dropped (the HTTP
    /// answer ended or its connection closed).
    fn busy_while<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static + use<S>
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        lock(&self.table).begin(id, Instant::now());
        let busy = Busy {
            table: self.table.clone(),
            id: id.clone(),
        };
        stream.map(move |message| {
            let _held = &busy;
            message
        })
    }
}

/// The lock, even if a thread panicked holding it (the table stays
/// consistent: every change is one step).
fn lock(table: &Mutex<SessionTable>) -> MutexGuard<'_, SessionTable> {
    table
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A request of a session in flight; dropping it ends the request.
struct Busy {
    table: Arc<Mutex<SessionTable>>,
    id: SessionId,
}

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.table).end(&self.id, Instant::now());
    }
}

/// Why [`BoundedSessions`] refused.
#[derive(Debug, thiserror::Error)]
enum SessionsError {
    /// Every one of `max` sessions has a request in flight.
    #[error(
        "this server's limit of {max} live MCP sessions is reached and every session has a request in flight: retry shortly, end sessions you no longer need (DELETE with Mcp-Session-Id), or raise the limit (`mcp serve --max-sessions`)"
    )]
    Full { max: usize },
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    /// rmcp's, counting the client's roots changes.
    type Transport = WatchRoots<<LocalSessionManager as SessionManager>::Transport>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let evicted = self.table().admit(self.max)?;
        let pending = Pending {
            table: self.table.clone(),
        };
        if let Some(id) = evicted {
            tracing::debug!(session = %id, max = self.max, "session limit reached: closing the idlest session");
            if let Err(error) = self.inner.close_session(&id).await {
                tracing::debug!(session = %id, %error, "closing an evicted session failed");
            }
        }
        let (id, transport) = self.inner.create_session().await?;
        let mut table = self.table();
        table.insert(id.clone(), Instant::now());
        drop(table);
        drop(pending);
        Ok((id, WatchRoots::new(transport)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.table().touch(id, Instant::now());
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.table().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.busy_while(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.table().touch(id, Instant::now());
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.busy_while(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.busy_while(id, stream))
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // No external store: an unknown session is the specification's 404.
        Ok(RestoreOutcome::NotSupported)
    }
}

/// A session slot reserved by [`SessionTable::admit`], given back when
/// dropped (the session is then in the table, or was never made).
struct Pending {
    table: Arc<Mutex<SessionTable>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut table = lock(&self.table);
        table.pending = table.pending.saturating_sub(1);
    }
}

/// Live sessions and when each was last used; times are given, so the
/// rules are tested without a clock.
#[derive(Debug, Default)]
struct SessionTable {
    sessions: HashMap<SessionId, Activity>,
    /// Slots reserved for sessions being created.
    pending: usize,
}

/// One session's use.
#[derive(Debug, Clone, Copy)]
struct Activity {
    /// When a request last arrived or ended.
    last: Instant,
    /// Requests whose answers are still open.
    busy: usize,
}

impl SessionTable {
    /// Sessions live or being created.
    fn live(&self) -> usize {
        self.sessions.len() + self.pending
    }

    /// Reserves a slot for a new session; at `max`, takes it from the
    /// idlest session without a request in flight and returns that one's
    /// id to close. Fails when every session is busy.
    fn admit(&mut self, max: usize) -> Result<Option<SessionId>, SessionsError> {
        let evicted = if self.live() >= max {
            let id = self.idlest().ok_or(SessionsError::Full { max })?;
            self.sessions.remove(&id);
            Some(id)
        } else {
            None
        };
        self.pending += 1;
        Ok(evicted)
    }

    fn insert(&mut self, id: SessionId, now: Instant) {
        self.sessions.insert(id, Activity { last: now, busy: 0 });
    }

    fn remove(&mut self, id: &SessionId) {
        self.sessions.remove(id);
    }

    fn touch(&mut self, id: &SessionId, now: Instant) {
        if let Some(activity) = self.sessions.get_mut(id) {
            activity.last = now;
        }
    }

    fn begin(&mut self, id: &SessionId, now: Instant) {
        if let Some(activity) = self.sessions.get_mut(id) {
            activity.last = now;
            activity.busy += 1;
        }
    }

    fn end(&mut self, id: &SessionId, now: Instant) {
        if let Some(activity) = self.sessions.get_mut(id) {
            activity.last = now;
            activity.busy = activity.busy.saturating_sub(1);
        }
    }

    /// The session without a request in flight that was used longest ago.
    fn idlest(&self) -> Option<SessionId> {
        self.sessions
            .iter()
            .filter(|(_, activity)| activity.busy == 0)
            .min_by_key(|(_, activity)| activity.last)
            .map(|(id, _)| id.clone())
    }

    /// Removes and returns the sessions unused for `idle` or longer.
    fn take_expired(&mut self, now: Instant, idle: Duration) -> Vec<SessionId> {
        let expired: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, activity)| {
                activity.busy == 0 && now.saturating_duration_since(activity.last) >= idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            self.sessions.remove(id);
        }
        expired
    }
}

/// Visible ASCII, no spaces: what fits in a header and survives copying.
fn valid_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// The local origins plus the user's, each checked for `scheme://host`.
fn allowed_origins(extra: &[String]) -> Result<Vec<String>, McpError> {
    let mut origins: Vec<String> = LOCAL_ORIGINS.iter().map(|o| (*o).to_owned()).collect();
    for origin in extra {
        let trimmed = origin.trim_end_matches('/');
        let valid = trimmed.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
        });
        if !valid {
            return Err(McpError::InvalidOrigin(origin.clone()));
        }
        origins.push(trimmed.to_owned());
    }
    Ok(origins)
}

/// 401 unless the request carries the expected `Authorization` header.
async fn require_token(State(expected): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if constant_time_eq(given, expected.as_bytes()) {
        return next.run(request).await;
    }
    let mut response = jsonrpc_error(
        StatusCode::UNAUTHORIZED,
        -32001,
        "missing or wrong bearer token",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"satchel\""),
    );
    response
}

/// Compares without leaking, through timing, how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(index).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"Bearer abc", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer ab", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abcd", b"Bearer abc"));
        assert!(!constant_time_eq(b"", b"Bearer abc"));
        assert!(valid_token("s3cr3t-token"));
        assert!(!valid_token(""));
        assert!(!valid_token("has space"));
    }

    fn id(name: &str) -> SessionId {
        name.into()
    }

    #[test]
    fn over_the_cap_the_idlest_session_without_a_request_makes_room() {
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        let mut table = SessionTable::default();
        for (n, name) in ["a", "b", "c"].into_iter().enumerate() {
            assert_eq!(table.admit(3).unwrap(), None);
            table.insert(id(name), at(n as u64));
            table.pending -= 1;
        }
        // `a` is the oldest but busy; `b` is the idlest of the others.
        table.begin(&id("a"), at(10));
        table.end(&id("a"), at(11));
        table.begin(&id("a"), at(12));
        assert_eq!(table.admit(3).unwrap(), Some(id("b")));
        assert_eq!(table.live(), 3);
        table.insert(id("d"), at(20));
        table.pending -= 1;
        table.begin(&id("c"), at(21));
        table.begin(&id("d"), at(22));
        let full = table.admit(3).unwrap_err().to_string();
        assert!(full.contains("limit of 3 live MCP sessions"), "{full}");
        assert!(full.contains("--max-sessions"), "{full}");
        table.end(&id("d"), at(30));
        assert_eq!(table.admit(3).unwrap(), Some(id("d")));
    }

    #[test]
    fn only_sessions_idle_for_the_whole_timeout_expire() {
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        let idle = Duration::from_millis(100);
        let mut table = SessionTable::default();
        table.insert(id("old"), at(0));
        table.insert(id("busy"), at(0));
        table.insert(id("touched"), at(0));
        table.begin(&id("busy"), at(1));
        table.touch(&id("touched"), at(50));
        assert_eq!(table.take_expired(at(99), idle), Vec::<SessionId>::new());
        assert_eq!(table.take_expired(at(120), idle), vec![id("old")]);
        assert_eq!(table.take_expired(at(1_000), idle), vec![id("touched")]);
        assert_eq!(table.live(), 1);
        table.end(&id("busy"), at(1_000));
        assert_eq!(table.take_expired(at(1_100), idle), vec![id("busy")]);
    }

    #[test]
    fn only_initialize_is_an_initialize() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
        ));
        assert!(!is_initialize(br#"[{"method":"initialize"}]"#));
        assert!(!is_initialize(b"not json"));
    }

    #[test]
    fn origins_must_be_scheme_and_host() {
        let origins = allowed_origins(&["https://app.example.com/".into()]).unwrap();
        assert_eq!(
            origins.last().map(String::as_str),
            Some("https://app.example.com")
        );
        assert!(allowed_origins(&["app.example.com".into()]).is_err());
        assert!(allowed_origins(&["https://app.example.com/path".into()]).is_err());
    }
}
