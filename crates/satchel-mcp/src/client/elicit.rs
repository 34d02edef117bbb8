//! Questions a server puts to the user (`elicitation/create`): answered by
//! whoever the front end puts in the [`AskerSlot`] (the REPL asks at its
//! prompt), refused with the reason when nobody can answer (`satchel run`,
//! `mcp serve`, a bot), never answered in silence.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::Value;

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// Sent, with the values asked for (an object).
    Accept(Value),
    /// Refused.
    Decline,
    /// Dismissed without an answer.
    Cancel,
}

/// One question from a server.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The server's name in mcp.json.
    pub server: String,
    /// What the server says.
    pub message: String,
    /// The JSON Schema of the values wanted (form mode), an object of
    /// flat properties.
    pub schema: Option<Value>,
    /// The page to open (URL mode).
    pub url: Option<String>,
}

/// Whoever can answer servers' questions.
#[async_trait]
pub trait ElicitationAsker: Send + Sync {
    /// Asks the person; one question at a time.
    async fn ask(&self, question: Question) -> Elicited;
}

/// The asker in force, set by a front end after the servers started.
pub type AskerSlot = Arc<RwLock<Option<Arc<dyn ElicitationAsker>>>>;

/// Answers a server's `elicitation/create` through `slot`.
pub(crate) async fn answer(
    slot: &AskerSlot,
    server: &str,
    request: ElicitRequestParams,
) -> Result<ElicitResult, ErrorData> {
    let asker = slot.read().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(asker) = asker else {
        return Err(ErrorData::invalid_request(
            "Satchel has no person to ask here (it runs non-interactively: `satchel run`, \
             `mcp serve`, a bot); the request was not shown to anyone",
            None,
        ));
    };
    let question = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => Question {
            server: server.to_owned(),
            message,
            schema: serde_json::to_value(requested_schema).ok(),
            url: None,
        },
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => Question {
            server: server.to_owned(),
            message,
            schema: None,
            url: Some(url),
        },
        // A mode newer than this client.
        #[allow(unreachable_patterns)]
        _ => {
            return Err(ErrorData::invalid_params(
                "Satchel cannot show this kind of request",
                None,
            ));
        }
    };
    Ok(match asker.ask(question).await {
        Elicited::Accept(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(content)
        }
        Elicited::Decline => ElicitResult::new(ElicitationAction::Decline),
        Elicited::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    })
}
