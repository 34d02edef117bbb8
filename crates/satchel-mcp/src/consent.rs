//! [`ClientConsent`]: the policy's "ask" put to the MCP client's user
//! through `elicitation/create` (protocol 2025-11-25), for clients that
//! declared they can ask; the answer is recorded as a REPL answer is.

use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::Peer;
use satchel_core::ToolCall;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer};

/// Asks the client's user before a call the policy holds back.
pub(crate) struct ClientConsent {
    peer: Peer<RoleServer>,
}

impl ClientConsent {
    /// Consent through `peer`, which declared the elicitation capability.
    pub(crate) fn new(peer: Peer<RoleServer>) -> ClientConsent {
        ClientConsent { peer }
    }
}

/// The question: what would run, and which rule holds it back.
fn question(call: &ToolCall, decision: &Decision) -> String {
    format!(
        "Satchel's policy asks before running {}.\n{}\nAccept to run it once; decline to refuse it.",
        satchel_tools::format::call_summary(&call.name, &call.input),
        decision.explanation()
    )
}

#[async_trait]
impl Consent for ClientConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question(call, decision),
            // Nothing to fill in: the answer is the action itself.
            requested_schema: ElicitationSchema::new(Default::default()),
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) => match result.action {
                ElicitationAction::Accept => ConsentAnswer::AllowOnce,
                ElicitationAction::Decline => ConsentAnswer::Deny {
                    reason: Some("the user declined it in the MCP client".to_owned()),
                },
                // Cancel, or an action newer than this server.
                _ => ConsentAnswer::Deny {
                    reason: Some("the user dismissed the question in the MCP client".to_owned()),
                },
            },
            // The client could not ask after all: nobody answered.
            Err(error) => {
                tracing::warn!(%error, "the MCP client could not ask its user");
                ConsentAnswer::Nobody
            }
        }
    }
}
