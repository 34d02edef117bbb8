//! [`McpTool`]: a tool of an MCP server, as a Satchel [`Tool`].
//!
//! The registry has validated the input against the server's
//! `inputSchema` before `run`; the call goes to whichever connection the
//! server has now (it may have been restarted), with a timeout that
//! progress notifications reset, and comes back as an output. Every
//! failure on the way (server down, timeout, protocol error) is a
//! structured error the model can act on.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientRequest, ErrorCode as RpcCode,
    Request, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use satchel_core::{ErrorCode, ToolOutput, ToolSpec};
use satchel_tools::{Tool, ToolContext, ToolError, ToolSource};
use serde_json::Value;

use super::describe;
use super::link::Link;
use crate::convert::from_call_tool_result;

/// The group imported tools are registered under in the `LiveRegistry`.
pub const GROUP: &str = "mcp";

/// One tool of one MCP server, under its local `server__tool` name.
pub struct McpTool {
    spec: ToolSpec,
    remote: String,
    link: Arc<Link>,
}

impl McpTool {
    pub(crate) fn new(spec: ToolSpec, remote: String, link: Arc<Link>) -> McpTool {
        McpTool { spec, remote, link }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.link.config.name
    }

    /// The tool's name on the server.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: GROUP.into(),
            origin: self.link.config.name.clone(),
        }
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let server = &self.link.config.name;
        let Some((peer, connection)) = self.link.peer_and_number() else {
            return Err(ToolError::new(
                ErrorCode::ToolCrashed,
                format!(
                    "MCP server `{server}` is not running ({}); try again shortly or use another tool",
                    self.link.state_summary()
                ),
            ));
        };
        let arguments = match input {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let mut params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let (otel, meta) = crate::telemetry::start_client(server, &self.remote);
        params.meta = meta;
        let result = self.call(params, ctx, (peer, connection)).await;
        let error = result
            .as_ref()
            .err()
            .map(|e| e.code.to_string())
            .or_else(|| {
                result
                    .as_ref()
                    .ok()
                    .filter(|output| output.is_error)
                    .map(|_| "tool_error".to_owned())
            });
        crate::telemetry::end(&otel, error.as_deref());
        result
    }
}

impl McpTool {
    /// Sends one `tools/call` and reads its answer.
    async fn call(
        &self,
        params: CallToolRequestParams,
        ctx: &ToolContext,
        (peer, connection): (rmcp::Peer<rmcp::RoleClient>, u64),
    ) -> Result<ToolOutput, ToolError> {
        let server = &self.link.config.name;
        let config = &self.link.config;
        let timeout = config
            .tool_timeouts
            .get(&self.remote)
            .copied()
            .unwrap_or(config.call_timeout);
        let options = PeerRequestOptions::with_timeout(timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(ctx.config.external.max_timeout.max(timeout));
        let started = Instant::now();
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(Request::new(params)),
                options,
            )
            .await
            .map_err(|error| self.service_error(error, connection))?;
        let id = handle.id.clone();
        // A connection that ends (a stdio server that exited, a remote
        // one found gone) ends the call with it, whatever rmcp makes of
        // its pending request.
        let response = tokio::select! {
            response = handle.await_response() => response,
            () = self.link.ended(connection) => Err(ServiceError::TransportClosed),
            () = ctx.cancel.cancelled() => {
                let notice = CancelledNotificationParam::new(Some(id), Some("cancelled by the caller".into()));
                let _ = peer.notify_cancelled(notice).await;
                return Err(ToolError::new(
                    ErrorCode::Cancelled,
                    format!("call to `{}` was cancelled", self.spec.name),
                ));
            }
        };
        let elapsed = started.elapsed().as_millis();
        match response {
            Ok(ServerResult::CallToolResult(result)) => Ok(from_call_tool_result(
                &result,
                format!(
                    "called `{}` on MCP server `{server}` in {elapsed} ms",
                    self.remote
                ),
            )),
            Ok(_) => Err(ToolError::new(
                ErrorCode::InvalidOutput,
                format!(
                    "MCP server `{server}` answered `{}` with something other than a tool result (it asked for input or made a task, which Satchel does not support)",
                    self.remote
                ),
            )),
            Err(error) => Err(self.service_error(error, connection)),
        }
    }
}

impl McpTool {
    /// The error for a call whose server went away while it ran: its
    /// effect is unknown.
    fn went_away(&self, how: &str) -> ToolError {
        ToolError::new(
            ErrorCode::ToolCrashed,
            format!(
                "MCP server `{}` went away during `{}` ({how}), so whether the call took effect is unknown: check before repeating anything it changes. Satchel is reconnecting; try again shortly or use another tool",
                self.link.config.name, self.remote
            ),
        )
    }

    /// The model-facing error for a failed request.
    fn service_error(&self, error: ServiceError, connection: u64) -> ToolError {
        let server = &self.link.config.name;
        let remote = &self.remote;
        match error {
            ServiceError::Timeout { timeout } => ToolError::new(
                ErrorCode::ToolTimeout,
                format!(
                    "MCP server `{server}` did not answer `{remote}` within {} s and sent no progress; the request was cancelled",
                    timeout.as_secs_f64()
                ),
            ),
            ServiceError::McpError(data) => {
                let code = if data.code == RpcCode::INVALID_PARAMS {
                    ErrorCode::InvalidParams
                } else if data.code == RpcCode::METHOD_NOT_FOUND {
                    ErrorCode::ToolNotFound
                } else {
                    ErrorCode::ToolCrashed
                };
                ToolError::new(
                    code,
                    format!(
                        "MCP server `{server}` refused `{remote}`: {} (JSON-RPC error {})",
                        data.message, data.code.0
                    ),
                )
            }
            ServiceError::TransportClosed => {
                // The supervisor checks the connection, and reconnects if
                // the server is gone (one failed request may not mean that).
                self.link.connection_lost(connection);
                self.went_away("the connection ended before it answered")
            }
            ServiceError::TransportSend(error) if !describe::unreached(&error) => {
                self.link.connection_lost(connection);
                self.went_away(&describe::transport(&error))
            }
            ServiceError::TransportSend(error) => {
                self.link.connection_lost(connection);
                ToolError::new(
                    ErrorCode::ToolCrashed,
                    format!(
                        "cannot reach MCP server `{server}` to call `{remote}` ({}), so the call was not made. Satchel is checking the connection and reconnects if the server is gone; try again shortly or use another tool",
                        describe::transport(&error)
                    ),
                )
            }
            other => ToolError::new(
                ErrorCode::ToolCrashed,
                format!(
                    "calling `{remote}` on MCP server `{server}` failed: {}",
                    describe::service(&other)
                ),
            ),
        }
    }
}
