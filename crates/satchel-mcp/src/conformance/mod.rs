//! Conformance fixture mode: a diagnostic server for the official MCP
//! conformance suite (`@modelcontextprotocol/conformance`), not for use
//! with real clients.
//!
//! The suite calls fixtures by name (`test_simple_text`, `test://static-text`,
//! `test_simple_prompt`, `slow_compute`...) that no real server has.
//! [`ConformanceServer`] wraps a [`SatchelServer`] and serves those fixtures
//! beside it, so every scenario runs through Satchel's real transports,
//! dispatch and list-changed machinery. What it does not own (Satchel's
//! tools, its `satchel://` resources, `tasks/*`, logging) goes to the inner
//! server unchanged.
//!
//! One file per job: [`tools`] (the fixture catalogue and who serves each),
//! [`content`] (fixed results), [`session`] (server-to-client requests and
//! notifications during a call, for sessions that began with `initialize`),
//! [`input_required`] (multi round-trip requests, SEP-2322), [`tasks`] (the
//! tasks extension, SEP-2663), [`list_changed`] (the mutation hooks),
//! [`prompts`], [`resources`].

mod content;
mod input_required;
mod list_changed;
mod prompts;
mod resources;
mod session;
mod tasks;
mod tools;
mod wire;

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::ServerHandler;
#[allow(deprecated)] // Logging left the newest revision; 2025-11-25 sessions still set it.
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, PromptsCapability, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, TASKS_EXTENSION_ID, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};

use crate::server::SatchelServer;
use tools::Serves;

pub use list_changed::GROUP;

/// [`SatchelServer`] plus the conformance suite's fixtures. Cheap to clone
/// (one per HTTP session); every clone shares the fixtures' state.
#[derive(Clone)]
pub struct ConformanceServer {
    inner: SatchelServer,
    fixtures: Arc<Fixtures>,
}

/// State the fixtures keep across requests and sessions.
struct Fixtures {
    /// Seals the `requestState` of multi round-trip fixtures.
    request_state: input_required::StateSeal,
    prompts: prompts::PromptBoard,
    resources: resources::Subscriptions,
    tool_toggle: list_changed::ToolToggle,
}

impl ConformanceServer {
    /// The fixtures around `inner`.
    ///
    /// # Errors
    /// When no key can be drawn for sealing `requestState` (no
    /// `/dev/urandom`).
    pub fn new(inner: SatchelServer) -> std::io::Result<ConformanceServer> {
        Ok(ConformanceServer {
            inner,
            fixtures: Arc::new(Fixtures {
                request_state: input_required::StateSeal::random()?,
                prompts: prompts::PromptBoard::default(),
                resources: resources::Subscriptions::default(),
                tool_toggle: list_changed::ToolToggle::default(),
            }),
        })
    }
}

/// `Ok` with an empty default when the inner server does not implement
/// a list at all (`-32601`): the pair still serves the fixtures' part.
fn or_empty<T: Default>(answer: Result<T, ErrorData>) -> Result<T, ErrorData> {
    match answer {
        Err(error) if error.code == ErrorCode::METHOD_NOT_FOUND => Ok(T::default()),
        other => other,
    }
}

impl crate::server::PerSession for ConformanceServer {
    fn for_new_session(&self) -> Self {
        ConformanceServer {
            inner: self.inner.for_new_session(),
            fixtures: self.fixtures.clone(),
        }
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = self.inner.get_info();
        let capabilities = &mut info.capabilities;
        // What the fixtures add to what the inner server declares.
        capabilities.prompts = Some({
            let mut prompts = PromptsCapability::default();
            prompts.list_changed = Some(true);
            prompts
        });
        capabilities.resources = Some({
            // Subscribable; the fixture list itself never changes.
            let mut resources = capabilities.resources.clone().unwrap_or_default();
            resources.subscribe = Some(true);
            resources
        });
        capabilities.completions = Some(Default::default());
        #[allow(deprecated)] // The logging fixtures serve 2025-11-25 sessions.
        {
            capabilities.logging = Some(Default::default());
        }
        // The task fixtures run on the inner server's task manager.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .entry(TASKS_EXTENSION_ID.to_owned())
            .or_default();
        info.instructions = Some(
            "Satchel in conformance fixture mode: a diagnostic server serving the MCP \
             conformance suite's fixture tools, resources and prompts beside Satchel's own \
             tools. Not for real clients."
                .into(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut listed = or_empty(self.inner.list_tools(request, context).await)?;
        // A fixture takes the calls to its name: list it, not the tool it hides.
        listed
            .tools
            .retain(|tool| tools::find(&tool.name).is_none());
        listed.tools.extend(tools::specs());
        Ok(listed)
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        tools::find_spec(name).or_else(|| self.inner.get_tool(name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(serves) = tools::find(&request.name) else {
            return self.inner.call_tool(request, context).await;
        };
        match serves {
            Serves::Content => content::call(request, &context).await,
            Serves::Session => session::call(request, &context).await,
            Serves::InputRequired => {
                input_required::call(&self.fixtures.request_state, request, &context)
            }
            Serves::Task => tasks::call(self.inner.tasks(), request, &context).await,
            Serves::ToolChange => self.fixtures.tool_toggle.flip(self.inner.live()),
            Serves::PromptChange => Ok(self.fixtures.prompts.flip()),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut listed = or_empty(self.inner.list_prompts(request, context).await)?;
        listed.prompts.extend(self.fixtures.prompts.specs());
        Ok(listed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if self.fixtures.prompts.serves(&request.name) {
            return prompts::get(&request);
        }
        let name = request.name.clone();
        match self.inner.get_prompt(request, context).await {
            // The pair declares prompts: an unknown one is a bad name, not
            // a missing method.
            Err(error) if error.code == ErrorCode::METHOD_NOT_FOUND => Err(
                ErrorData::invalid_params(format!("no prompt named `{name}`"), None),
            ),
            other => other,
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Ok(prompts::complete(&request))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut listed = or_empty(self.inner.list_resources(request, context).await)?;
        listed.resources.extend(resources::listed());
        Ok(listed)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut listed = or_empty(self.inner.list_resource_templates(request, context).await)?;
        listed.resource_templates.extend(resources::templates());
        Ok(listed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if resources::owns(&request.uri) {
            return resources::read(&request.uri);
        }
        self.inner.read_resource(request, context).await
    }

    #[allow(deprecated)] // resources/subscribe serves 2025-11-25 sessions.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if resources::owns(&request.uri) {
            return self.fixtures.resources.subscribe(&request.uri);
        }
        self.inner.subscribe(request, context).await
    }

    #[allow(deprecated)] // resources/unsubscribe serves 2025-11-25 sessions.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if resources::owns(&request.uri) {
            self.fixtures.resources.unsubscribe(&request.uri);
            return Ok(());
        }
        self.inner.unsubscribe(request, context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = self
            .inner
            .accepted_subscription_filter(requested)
            .unwrap_or_default();
        accepted.prompts_list_changed = Some(true);
        self.fixtures.prompts.note_accepted();
        accepted.resource_subscriptions = Some(resources::subscribable(requested, &accepted));
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // Prompt changes go out from a loop of our own, beside the inner
        // server's loop (which owns the context) for the rest.
        let accepted = context.accepted();
        let _prompt_changes = (accepted.prompts_list_changed == Some(true))
            .then(|| self.fixtures.prompts.forward_to(context.sink().clone()));
        let inner_has_work = accepted.tools_list_changed == Some(true)
            || accepted.resources_list_changed == Some(true)
            || accepted
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|uri| !resources::owns(uri)));
        if inner_has_work {
            self.inner.listen(context).await
        } else {
            // The inner loop would end the stream at the first tool change
            // it may not send; a prompts-only stream lives until cancelled.
            context.cancelled().await;
            Ok(())
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.fixtures.prompts.notify_peer(context.peer.clone());
        self.inner.on_initialized(context).await;
    }

    #[allow(deprecated)] // Logging left the newest revision; older clients still set it.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.set_level(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.inner.get_task(request, context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.update_task(request, context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.cancel_task(request, context).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.inner.on_custom_request(request, context).await
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.inner.on_cancelled(notification, context).await;
    }

    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.inner.on_progress(notification, context).await;
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        self.inner
            .on_custom_notification(notification, context)
            .await;
    }
}
