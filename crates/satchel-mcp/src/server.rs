//! [`SatchelServer`]: Satchel's tools served to MCP clients.
//!
//! An `rmcp` `ServerHandler` over a [`LiveRegistry`]: `tools/list` reads
//! the current snapshot, `tools/call` goes through [`observed_dispatch`]
//! (lookup, validation, policy with nobody to consent, limits, the run,
//! then the audit hook with the decision) and comes
//! back as a `CallToolResult`. Every failure, an unknown tool and invalid
//! arguments included, is an `isError` result, never a protocol error, so
//! the model can read it and try again. When the registry changes, clients
//! get `notifications/tools/list_changed`: sessions that began with
//! `initialize` through the peer, newer stateless ones through
//! `subscriptions/listen`.
//!
//! What does not live here: transports (stdio in [`serve_stdio`], HTTP in
//! [`crate::http`]) and storage (the observer is the hook).

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::FutureExt;
use opentelemetry::context::FutureExt as _;
use rmcp::ErrorData;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestMethod,
    CompleteRequestParams, CompleteResult, GetTaskParams, GetTaskResult, Implementation,
    InputRequiredResult, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesRequestMethod, ListResourcesRequestMethod, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestMethod,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::task_manager::TaskManager;
use satchel_core::{ErrorCode, ToolCall};
use satchel_tools::policy::{Policy, Verdict};

use crate::resources::RecordResources;
use satchel_tools::progress::{ProgressSink, ProgressUpdate};
use satchel_tools::{
    CallObserver, CallSource, Consent, LiveRegistry, NonInteractive, ToolContext, ToolsConfig,
    observed_dispatch,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::consent::{Answered, ClientConsent, StateSeal};
use crate::convert::{ServedSchema, to_call_tool_result, to_mcp_tool};

mod roots;
mod session;
mod stdio;
mod subscriptions;
mod tasks;

pub(crate) use roots::WatchRoots;
pub use session::{PerSession, SessionEnd};
pub use stdio::serve_stdio;

use subscriptions::{SessionSubscriptions, Watched};

/// How often a legacy session's notifier checks that its client is still there.
const PEER_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The listens accepted and not started: how many, and the oldest tool
/// generation among them.
#[derive(Debug, Default)]
struct PendingListens {
    count: usize,
    oldest: Option<u64>,
}

impl PendingListens {
    fn accept(&mut self, generation: u64) {
        self.count += 1;
        self.oldest = Some(self.oldest.map_or(generation, |g| g.min(generation)));
    }

    /// The generation a starting listen compares against. A listen whose
    /// acknowledgement failed never starts: until the count drops to zero
    /// the others compare against an older generation, which costs at most
    /// an extra notice.
    fn start(&mut self) -> Option<u64> {
        let oldest = self.oldest;
        self.count = self.count.saturating_sub(1);
        if self.count == 0 {
            self.oldest = None;
        }
        oldest
    }
}

/// The lock, even if a thread panicked holding it (every change is one step).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads the tools' configuration as of now (agent.json may change between calls).
pub type ConfigLoader = Arc<dyn Fn() -> Arc<ToolsConfig> + Send + Sync>;

/// Gives the policy in force (read again when agent.json changes).
pub type PolicyLoader = Arc<dyn Fn() -> Arc<Policy> + Send + Sync>;

/// What a server needs besides its tools.
#[derive(Clone)]
pub struct ServerOptions {
    /// How clients reach this server, recorded with each call: `mcp-stdio`, `mcp-http`.
    pub channel: String,
    /// Directory relative paths in tool inputs are resolved against.
    pub working_dir: PathBuf,
    /// The tools' configuration, read at each call.
    pub config: ConfigLoader,
    /// The permission rules and limits, read at each call. Nobody can
    /// consent here: what policy would ask about is refused.
    pub policy: PolicyLoader,
    /// Told about every call, when set: the audit trail's hook.
    pub observer: Option<Arc<dyn CallObserver>>,
    /// The record as resources, when set (the `resources` capability is
    /// declared only then).
    pub resources: Option<Arc<dyn RecordResources>>,
    /// Runs when a session closes, with its key: ends its processes.
    pub on_session_end: Option<SessionEnd>,
}

/// Satchel's tools as an MCP server; cheap to clone (one per HTTP session).
#[derive(Clone)]
pub struct SatchelServer {
    inner: Arc<Inner>,
    /// This session's key and end (one per HTTP session; stdio has one).
    session: Arc<session::Slot>,
}

struct Inner {
    live: Arc<LiveRegistry>,
    options: ServerOptions,
    calls: AtomicU64,
    /// Calls run as tasks (the 2026-07-28 tasks extension), shared by every
    /// session so a stateless client can poll from any request.
    tasks: TaskManager,
    /// Seals the consent questions put to stateless clients.
    seal: Option<StateSeal>,
    /// Resources the 2025-11-25 sessions subscribed to.
    subscriptions: Arc<SessionSubscriptions>,
    /// The listens accepted and not started yet: rmcp acknowledges a
    /// subscription before `listen` runs, and a change in between must
    /// still be announced.
    listens_accepted: Mutex<PendingListens>,
    /// When recent tasks were created (kept while rmcp may keep them).
    task_starts: Mutex<VecDeque<std::time::Instant>>,
}

impl SatchelServer {
    /// A server over `live`'s tools.
    pub fn new(live: Arc<LiveRegistry>, options: ServerOptions) -> SatchelServer {
        let session = session::Slot::new(options.on_session_end.clone());
        SatchelServer {
            session,
            inner: Arc::new(Inner {
                live,
                options,
                calls: AtomicU64::new(0),
                tasks: TaskManager::new(),
                seal: StateSeal::new(),
                subscriptions: Arc::default(),
                listens_accepted: Mutex::default(),
                task_starts: Mutex::default(),
            }),
        }
    }

    /// The tools served, kept current.
    pub fn live(&self) -> &Arc<LiveRegistry> {
        &self.inner.live
    }

    /// The tasks this server runs (`tasks/get`, `tasks/update` and
    /// `tasks/cancel` answer from it), for handlers that wrap this server
    /// and start tasks of their own.
    pub fn tasks(&self) -> &TaskManager {
        &self.inner.tasks
    }

    /// Runs one call the way `tools/call` does, cancelled by `cancel`.
    ///
    /// A panic anywhere in the call (dispatch catches the tool's and the
    /// checks'; this catches the rest, the audit observer included) is
    /// this call's `TOOL_CRASHED` error: the session and every other one
    /// keep being served.
    async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        from: CallFrom,
    ) -> satchel_core::ToolOutput {
        let call = self.call_unguarded(name, arguments, from);
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(output) => output,
            Err(panic) => {
                let reason = panic
                    .downcast_ref::<&str>()
                    .map(|text| (*text).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic with a non-text payload".to_owned());
                tracing::error!(tool = %name, %reason, "an MCP tool call panicked");
                satchel_core::ToolOutput::error(
                    ErrorCode::ToolCrashed,
                    format!(
                        "the call to `{name}` failed inside Satchel: {reason}. This is a bug in Satchel, not in your input; try another approach."
                    ),
                )
            }
        }
    }

    async fn call_unguarded(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        from: CallFrom,
    ) -> satchel_core::ToolOutput {
        let CallFrom {
            cancel,
            peer,
            progress,
            consent,
            call_id,
            background,
            roots,
        } = from;
        let inner = &self.inner;
        let number = inner.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let registry = inner.live.current();
        let ctx = ToolContext {
            cancel,
            conversation_id: None,
            session: self.session.key(),
            call_id: call_id.unwrap_or_else(|| format!("mcp-{}-{number}", std::process::id())),
            working_dir: inner.options.working_dir.clone(),
            config: (inner.options.config)(),
            trace: satchel_tools::CallTrace::default(),
            registry: Some(registry.clone()),
            // Set by dispatch from the policy's mode.
            confinement: satchel_tools::sandbox::Confinement::default(),
            progress,
            memory_namespace: None,
            background,
            writable_roots: roots,
        };
        let call = ToolCall {
            id: ctx.call_id.clone(),
            name: name.to_owned(),
            input: Value::Object(arguments.unwrap_or_default()),
        };
        let source = CallSource {
            channel: inner.options.channel.clone(),
            peer,
        };
        let policy = (inner.options.policy)();
        observed_dispatch(
            &registry,
            &policy,
            consent.as_ref(),
            &call,
            &ctx,
            &source,
            inner.options.observer.as_ref(),
        )
        .await
    }
}

/// The client as it names itself (in `initialize`, or in a stateless
/// request's `_meta`), e.g. `claude-code 1.0.3`.
fn peer_name(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .client_info()
        .map(|info| format!("{} {}", info.name, info.version))
}

/// Whether the request speaks 2026-07-28 or later, where a server asks
/// through `input_required` results rather than requests of its own.
fn asks_inline(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// MCP clients known to drop (Claude Code) or empty (Codex CLI) a tool
/// whose input schema has a combinator or a condition at its root, by the
/// name they give in `clientInfo`.
const LOSSY_CLIENTS: &[&str] = &["claude-code", "codex-mcp-client"];

/// The form of the tools' input schemas this client is served: as written
/// from 2026-07-28 on (SEP-2106 has servers preserve 2020-12 keywords, and
/// such a client translates for its own model), except to the clients known
/// to lose them; the portable form to every older client.
fn served_schema(context: &RequestContext<RoleServer>) -> ServedSchema {
    let lossy = context
        .client_info()
        .is_some_and(|info| LOSSY_CLIENTS.contains(&info.name.as_str()));
    if asks_inline(context) && !lossy {
        ServedSchema::AsWritten
    } else {
        ServedSchema::Portable
    }
}

/// How "ask" is answered for one call, or the question to send first.
enum ConsentRoute {
    /// Dispatch with this consent.
    Dispatch(Arc<dyn Consent>),
    /// Answer with this question; the retry brings the answer.
    Ask(InputRequiredResult),
}

impl ServerHandler for SatchelServer {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)]
        // Logging is deprecated in the newest revision, still asked for by older clients.
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_tasks()
            .build();
        if self.inner.options.resources.is_some() {
            let mut resources = rmcp::model::ResourcesCapability::default();
            resources.subscribe = Some(true);
            resources.list_changed = Some(true);
            capabilities.resources = Some(resources);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("satchel", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Satchel's tools: every call is validated against the tool's inputSchema, runs \
                 within Satchel's process limits, and reports failures as isError results with \
                 a stable error_code and a message saying what to change.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let registry = self.inner.live.current();
        let form = served_schema(&context);
        // The editing tools' model-native forms are for Satchel's own
        // requests; an MCP client gets `edit` and `write`.
        let tools = registry
            .specs()
            .filter(|spec| !satchel_core::edit_forms::is_native_form(&spec.name))
            .filter_map(|spec| match to_mcp_tool(spec, form) {
                Ok(tool) => Some(tool),
                Err(why) => {
                    tracing::warn!("tool `{}` is not served over MCP: {why}", spec.name);
                    None
                }
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        let Some(record) = &self.inner.options.resources else {
            return Err(ErrorData::method_not_found::<ListResourcesRequestMethod>());
        };
        let entries = record
            .list()
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(
            entries
                .into_iter()
                .map(|entry| {
                    let mut resource = rmcp::model::Resource::new(entry.uri, entry.name)
                        .with_description(entry.description);
                    resource.mime_type = Some(entry.mime_type);
                    resource
                })
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        let Some(record) = &self.inner.options.resources else {
            return Err(ErrorData::method_not_found::<
                ListResourceTemplatesRequestMethod,
            >());
        };
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            record
                .templates()
                .into_iter()
                .map(|entry| {
                    let mut template =
                        rmcp::model::ResourceTemplate::new(entry.uri_template, entry.name);
                    template.description = Some(entry.description);
                    template.mime_type = Some(entry.mime_type);
                    template
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let not_found = || {
            ErrorData::resource_not_found(
                format!("no resource at `{uri}`; resources/templates/list shows what exists"),
                Some(serde_json::json!({"uri": uri})),
            )
        };
        let Some(record) = &self.inner.options.resources else {
            return Err(not_found());
        };
        match record.read(&uri).await {
            Ok(Some(body)) => {
                let contents = rmcp::model::ResourceContents::text(body.text, uri.clone())
                    .with_mime_type(body.mime_type);
                Ok(rmcp::model::ReadResourceResponse::Complete(
                    rmcp::model::ReadResourceResult::new(vec![contents]),
                ))
            }
            Ok(None) => Err(not_found()),
            Err(reason) => Err(ErrorData::internal_error(reason, None)),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let peer = peer_name(&context);
        let capabilities = context.client_capabilities().unwrap_or_default();
        let can_ask = capabilities.elicitation.is_some();
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        // A long call for a client that takes tasks runs as one, while
        // the server holds fewer than its limit of tasks (past it, the call
        // is answered in the request, like any other).
        if capabilities.supports_tasks()
            && self
                .inner
                .live
                .current()
                .get(&name)
                .is_some_and(|tool| tool.runs_long(&input))
            && self.admit_task()
        {
            let task = self.start_task(tasks::TaskCall {
                name,
                arguments: request.arguments,
                peer,
                can_ask,
                roots: roots::client_roots(&context, &self.session.roots).await,
            });
            return Ok(CallToolResponse::Task(task));
        }
        let consent = match self.consent_route(&request, &name, input, &context, can_ask)? {
            ConsentRoute::Dispatch(consent) => consent,
            ConsentRoute::Ask(question) => return Ok(CallToolResponse::InputRequired(question)),
        };
        // A client that sent a progress token hears how the call goes.
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressToClient::start(context.peer.clone(), token));
        // `ct` fires on the client's `notifications/cancelled`; the tool's
        // runner then stops its process group.
        let from = CallFrom {
            cancel: context.ct.clone(),
            peer,
            progress,
            consent,
            call_id: None,
            background: false,
            roots: roots::client_roots(&context, &self.session.roots).await,
        };
        let otel = crate::telemetry::start_server(
            &context.meta,
            &name,
            context.id.to_string(),
            session_id(&context),
        );
        let output = self
            .call(&name, request.arguments, from)
            .with_context(otel.clone())
            .await;
        let error = output.is_error.then(|| {
            output
                .error_code
                .as_ref()
                .map_or_else(|| "tool_error".to_owned(), ToString::to_string)
        });
        crate::telemetry::end(&otel, error.as_deref());
        Ok(to_call_tool_result(&output).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.inner
            .tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.tasks.cancel_task(&request.task_id)
    }

    #[allow(deprecated)] // resources/subscribe is what 2025-11-25 sessions use.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(record) = &self.inner.options.resources else {
            return Err(ErrorData::method_not_found::<SubscribeRequestMethod>());
        };
        self.inner
            .subscriptions
            .subscribe(&context.peer, record.clone(), request.uri)
            .await
            .map_err(|reason| ErrorData::invalid_params(reason, None))
    }

    #[allow(deprecated)] // resources/unsubscribe is what 2025-11-25 sessions use.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.inner.options.resources.is_none() {
            return Err(ErrorData::method_not_found::<UnsubscribeRequestMethod>());
        }
        self.inner
            .subscriptions
            .unsubscribe(&context.peer, &request.uri)
            .await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        // No prompts are served, and none declared.
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        // Nothing served takes completions, and none are declared.
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }

    #[allow(deprecated)] // Logging left the newest revision; older clients still set it.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Satchel sends no log notifications; the level is accepted so
        // clients that set it keep working.
        tracing::debug!(level = ?request.level, "client set the logging level");
        Ok(())
    }

    /// The session begins with the answer to `initialize`, not with the
    /// `initialized` notification: rmcp handles that notification in a
    /// task of its own, and a client's first call (sent right after it)
    /// could otherwise run before it, outside the session, and start a
    /// process the session's next call cannot see.
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        self.session.begin();
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A session that began with `initialize` gets list changes through
        // its peer until the client goes away.
        let mut changes = self.inner.live.subscribe();
        changes.mark_unchanged();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(PEER_CHECK_INTERVAL) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::builder().tools_list_changed().build();
        if self.inner.options.resources.is_some() {
            accepted.resources_list_changed = Some(true);
            // Each watched resource is read every poll: a few per stream.
            accepted.resource_subscriptions =
                requested.resource_subscriptions.as_ref().map(|uris| {
                    uris.iter()
                        .take(subscriptions::MAX_WATCHED)
                        .cloned()
                        .collect()
                });
        }
        let generation = *self.inner.live.subscribe().borrow();
        lock(&self.inner.listens_accepted).accept(generation);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let accepted = context.accepted().clone();
        let sink = context.sink();
        let mut changes = self.inner.live.subscribe();
        let now = *changes.borrow_and_update();
        // The oldest generation among the listens accepted and not yet
        // started: never later than this one's acceptance, so no change is
        // missed (at worst one is announced twice).
        let seen = lock(&self.inner.listens_accepted).start().unwrap_or(now);
        let tools = accepted.tools_list_changed == Some(true);
        if tools
            && now != seen
            && let Err(error) = sink.notify_tool_list_changed().await
        {
            tracing::debug!(%error, "subscription closed");
            return Ok(());
        }
        let record = self.inner.options.resources.clone();
        let mut watched = Watched::default();
        let mut list = None;
        if let Some(record) = &record {
            for uri in accepted.resource_subscriptions.clone().unwrap_or_default() {
                watched.add(record.as_ref(), uri).await;
            }
            if accepted.resources_list_changed == Some(true) {
                list = record.list_fingerprint().await.ok();
            }
        }
        let polls = record.is_some() && (!watched.is_empty() || list.is_some());
        let mut ticks = tokio::time::interval(subscriptions::POLL_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed(), if tools => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if let Err(error) = sink.notify_tool_list_changed().await {
                        tracing::debug!(%error, "subscription closed");
                        return Ok(());
                    }
                }
                _ = ticks.tick(), if polls => {
                    let Some(record) = &record else { continue };
                    let mut sent = Ok(());
                    for uri in watched.changed(record.as_ref()).await {
                        sent = sent.and(sink.notify_resource_updated(uri).await);
                    }
                    if list.is_some() {
                        let now = record.list_fingerprint().await.ok();
                        if now.is_some() && now != list {
                            list = now;
                            sent = sent.and(sink.notify_resource_list_changed().await);
                        }
                    }
                    if let Err(error) = sent {
                        tracing::debug!(%error, "subscription closed");
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// The client's MCP session over streamable HTTP (`Mcp-Session-Id`);
/// `None` over stdio, where the connection is the session.
fn session_id(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

impl SatchelServer {
    /// Who answers if the policy says "ask": the answer a stateless
    /// client's retry carries, a question to send it first, the client's
    /// user mid-call (a session with elicitation), or nobody.
    fn consent_route(
        &self,
        request: &CallToolRequestParams,
        name: &str,
        input: Value,
        context: &RequestContext<RoleServer>,
        can_ask: bool,
    ) -> Result<ConsentRoute, ErrorData> {
        if !asks_inline(context) {
            return Ok(ConsentRoute::Dispatch(if can_ask {
                Arc::new(ClientConsent::new(context.peer.clone()))
            } else {
                Arc::new(NonInteractive)
            }));
        }
        let Some(seal) = &self.inner.seal else {
            return Ok(ConsentRoute::Dispatch(Arc::new(NonInteractive)));
        };
        let call = ToolCall {
            id: String::new(),
            name: name.to_owned(),
            input,
        };
        if let Some(state) = &request.request_state {
            let answer = seal
                .answer(&call, state, request.input_responses.as_ref())
                .map_err(|reason| ErrorData::invalid_params(reason, None))?;
            if let Some(answer) = answer {
                return Ok(ConsentRoute::Dispatch(Arc::new(Answered(answer))));
            }
        }
        if !can_ask {
            return Ok(ConsentRoute::Dispatch(Arc::new(NonInteractive)));
        }
        // Ask first only what the policy would ask about; dispatch judges
        // everything again (and reports a bad call) when it runs.
        let registry = self.inner.live.current();
        let policy = (self.inner.options.policy)();
        if let Ok(tool) = registry.check(&call.name, &call.input) {
            let decision = policy.decide(tool.spec(), &call.input);
            if decision.verdict == Verdict::Ask
                && decision.beyond_limits_output().is_none()
                && let Some(question) = seal.input_required(&call, &decision)
            {
                return Ok(ConsentRoute::Ask(question));
            }
        }
        Ok(ConsentRoute::Dispatch(Arc::new(NonInteractive)))
    }
}

/// Who a call comes from, and what that client can take: its
/// cancellation, its name, where its progress goes, who answers "ask".
struct CallFrom {
    cancel: CancellationToken,
    peer: Option<String>,
    progress: Option<Arc<dyn ProgressSink>>,
    consent: Arc<dyn Consent>,
    /// The call's id, when the caller names it (a task's).
    call_id: Option<String>,
    /// Whether the call runs in the background (a task).
    background: bool,
    /// The client's roots, when it declared them: the call's writable
    /// paths.
    roots: Option<Arc<[PathBuf]>>,
}

impl CallFrom {
    /// A call nobody watches: no progress, nobody to consent.
    #[cfg(test)]
    fn unattended(cancel: CancellationToken) -> CallFrom {
        CallFrom {
            cancel,
            peer: None,
            progress: None,
            consent: Arc::new(NonInteractive),
            call_id: None,
            background: false,
            roots: None,
        }
    }
}

/// Progress reports of one call, sent to the client as
/// `notifications/progress` with its token, in order, by one task that
/// ends with the call.
#[derive(Debug)]
struct ProgressToClient(tokio::sync::mpsc::UnboundedSender<ProgressUpdate>);

impl ProgressToClient {
    fn start(
        peer: rmcp::Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
    ) -> Arc<dyn ProgressSink> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressUpdate>();
        tokio::spawn(async move {
            while let Some(update) = rx.recv().await {
                let mut param =
                    rmcp::model::ProgressNotificationParam::new(token.clone(), update.progress);
                param.total = update.total;
                param.message = Some(update.message);
                if peer.notify_progress(param).await.is_err() {
                    break;
                }
            }
        });
        Arc::new(ProgressToClient(tx))
    }
}

impl ProgressSink for ProgressToClient {
    fn report(&self, update: ProgressUpdate) {
        // The client left: nothing to tell.
        let _ = self.0.send(update);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use std::time::SystemTime;

    use async_trait::async_trait;
    use satchel_core::ToolOutput;
    use satchel_tools::external::{SpecCache, ToolDirs};
    use satchel_tools::policy::Mode;
    use satchel_tools::{ExternalConfig, ToolsConfig};
    use serde_json::json;

    use super::*;

    /// An audit hook with a bug: it panics on calls whose input says `boom`.
    struct PanickingObserver;

    #[async_trait]
    impl CallObserver for PanickingObserver {
        async fn on_call(
            &self,
            _source: &CallSource,
            call: &ToolCall,
            _output: &ToolOutput,
            _decision: Option<&str>,
            _started: SystemTime,
            _finished: SystemTime,
        ) -> bool {
            assert!(!call.input.to_string().contains("boom"), "observer bug");
            true
        }
    }

    #[test]
    fn a_listen_compares_against_the_oldest_acceptance_not_started() {
        let mut pending = PendingListens::default();
        pending.accept(5);
        pending.accept(3);
        assert_eq!(pending.start(), Some(3));
        assert_eq!(pending.start(), Some(3));
        // All started: the next one begins afresh.
        pending.accept(7);
        assert_eq!(pending.start(), Some(7));
        assert_eq!(pending.start(), None);
    }

    #[tokio::test]
    async fn a_panic_in_one_call_is_its_error_and_the_next_call_runs() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = ToolDirs {
            project: None,
            user: None,
            system: None,
        };
        let live = LiveRegistry::load_with(
            satchel_builtins::builtin_tools(&satchel_builtins::BuiltinDeps::default()),
            dirs,
            SpecCache::in_memory(),
            ExternalConfig::default(),
        )
        .await
        .unwrap();
        let policy = Arc::new(Policy::new(
            Vec::new(),
            Mode::Trust,
            Vec::new(),
            4,
            Duration::from_secs(10),
        ));
        let server = SatchelServer::new(
            Arc::new(live),
            ServerOptions {
                channel: "mcp-test".into(),
                working_dir: dir.path().to_path_buf(),
                config: Arc::new(|| Arc::new(ToolsConfig::default())),
                policy: Arc::new(move || policy.clone()),
                observer: Some(Arc::new(PanickingObserver)),
                resources: None,
                on_session_end: None,
            },
        );
        let arguments = |command: &str| json!({"command": command}).as_object().cloned();
        let crashed = server
            .call(
                "bash",
                arguments("echo boom"),
                CallFrom::unattended(CancellationToken::new()),
            )
            .await;
        assert!(crashed.is_error);
        let text = serde_json::to_string(&crashed).unwrap();
        assert!(text.contains("TOOL_CRASHED"), "{text}");
        assert!(text.contains("observer bug"), "{text}");

        let fine = server
            .call(
                "bash",
                arguments("echo ok"),
                CallFrom::unattended(CancellationToken::new()),
            )
            .await;
        assert!(!fine.is_error, "{fine:?}");
    }
}
