//! The policy's "ask" put to the MCP client's user, in each way a client
//! can take a question; the answer is recorded as a REPL answer is.
//!
//! - [`ClientConsent`]: a session (2025-11-25) whose client declared
//!   elicitation gets an `elicitation/create` request mid-call.
//! - [`input_required`] and [`Answered`]: a stateless request (2026-07-28)
//!   whose client declared elicitation gets an `input_required` result with
//!   the question and a sealed `requestState`; the retry carries the answer.
//! - [`TaskConsent`]: a call running as a task puts the question in the
//!   task (`input_required` status) and waits for `tasks/update`.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use rmcp::service::Peer;
use rmcp::task_manager::TaskContext;
use satchel_core::ToolCall;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key the consent question has in `inputRequests`.
pub(crate) const CONSENT_KEY: &str = "satchel-consent";

/// How long a question's `requestState` stays valid.
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

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

/// The elicitation that asks `question`: nothing to fill in, the answer
/// is the action itself.
fn elicitation(question: String) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question,
        requested_schema: ElicitationSchema::new(Default::default()),
    }
}

/// What the user's action means for the call.
fn answer_of(action: &ElicitationAction) -> ConsentAnswer {
    match action {
        ElicitationAction::Accept => ConsentAnswer::AllowOnce,
        ElicitationAction::Decline => ConsentAnswer::Deny {
            reason: Some("the user declined it in the MCP client".to_owned()),
        },
        // Cancel, or an action newer than this server.
        _ => ConsentAnswer::Deny {
            reason: Some("the user dismissed the question in the MCP client".to_owned()),
        },
    }
}

/// The answer in a client's `ElicitResult`, when it is one.
fn answer_in(response: &Value) -> Option<ConsentAnswer> {
    serde_json::from_value::<ElicitResult>(response.clone())
        .ok()
        .map(|result| answer_of(&result.action))
}

#[async_trait]
impl Consent for ClientConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        match self
            .peer
            .create_elicitation(elicitation(question(call, decision)))
            .await
        {
            Ok(result) => answer_of(&result.action),
            // The client could not ask after all: nobody answered.
            Err(error) => {
                tracing::warn!(%error, "the MCP client could not ask its user");
                ConsentAnswer::Nobody
            }
        }
    }
}

/// What a consent question's `requestState` holds: the call it is about,
/// so an answer cannot be carried over to another call.
#[derive(Serialize, Deserialize)]
struct AskedAbout {
    tool: String,
    arguments: Value,
    /// Makes each question's answer good for one call: a state seen
    /// answered before is refused.
    nonce: String,
}

/// The seal on consent questions' `requestState`: a key made at start, so
/// a question outlives neither the process nor [`STATE_TTL`]; and the
/// questions already answered, so an answer is good for one call.
pub(crate) struct StateSeal {
    codec: RequestStateCodec,
    /// Nonces answered, with when they may be forgotten (their state has
    /// expired by then).
    answered: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// What every refused `requestState` is told: one message, so a client
/// learns nothing of why (forged, expired, replayed, another call's).
const REFUSED_STATE: &str = "requestState is not valid for this call (it may have expired or been used): call again without it";

/// Random hex for keys and nonces; `None` when the system gives none.
fn random_hex(bytes: usize) -> Option<String> {
    use std::io::Read as _;
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buffer))
        .ok()?;
    Some(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

impl StateSeal {
    /// A seal with a fresh random key; `None` when the system gives none
    /// (then stateless clients cannot be asked, and "ask" refuses).
    pub(crate) fn new() -> Option<StateSeal> {
        let Some(key) = random_hex(32) else {
            tracing::warn!(
                "no random key for requestState: stateless clients cannot be asked for consent"
            );
            return None;
        };
        let codec = RequestStateCodec::try_new(key.into_bytes()).ok()?;
        Some(StateSeal {
            codec,
            answered: Default::default(),
        })
    }

    /// The `input_required` result that asks about `call`.
    pub(crate) fn input_required(
        &self,
        call: &ToolCall,
        decision: &Decision,
    ) -> Option<InputRequiredResult> {
        let about = AskedAbout {
            tool: call.name.clone(),
            arguments: call.input.clone(),
            nonce: random_hex(16)?,
        };
        let state = self
            .codec
            .seal_json_with(&about, &SealOptions::new().ttl(STATE_TTL))
            .ok()?;
        let mut requests = InputRequests::new();
        requests.insert(
            CONSENT_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(elicitation(question(call, decision)))),
        );
        Some(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// The user's answer to the question `state` sealed, when `state` is
    /// this server's, unexpired, about this very call, and `responses`
    /// answers it. `Err` says why the state is refused; `Ok(None)`: no
    /// answer yet (ask again).
    pub(crate) fn answer(
        &self,
        call: &ToolCall,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Option<ConsentAnswer>, String> {
        let about: AskedAbout = self
            .codec
            .open_json(state)
            .map_err(|_| REFUSED_STATE.to_owned())?;
        if about.tool != call.name || about.arguments != call.input {
            return Err(REFUSED_STATE.to_owned());
        }
        let answer = responses
            .and_then(|responses| responses.get(CONSENT_KEY))
            .and_then(answer_in);
        if answer.is_some() {
            let now = std::time::Instant::now();
            let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
            answered.retain(|_, forget_at| *forget_at > now);
            if answered.insert(about.nonce, now + STATE_TTL).is_some() {
                return Err(REFUSED_STATE.to_owned());
            }
        }
        Ok(answer)
    }
}

/// An answer the client already gave (on a retry): "ask" gets it.
pub(crate) struct Answered(pub(crate) ConsentAnswer);

#[async_trait]
impl Consent for Answered {
    async fn ask(&self, _call: &ToolCall, _decision: &Decision) -> ConsentAnswer {
        self.0.clone()
    }
}

/// Asks through the task a call runs in: the task shows `input_required`
/// with the question until the client answers with `tasks/update`.
pub(crate) struct TaskConsent {
    task: TaskContext,
    /// Whether the client declared it can ask its user.
    can_ask: bool,
}

impl TaskConsent {
    pub(crate) fn shared(task: TaskContext, can_ask: bool) -> Arc<dyn Consent> {
        Arc::new(TaskConsent { task, can_ask })
    }
}

#[async_trait]
impl Consent for TaskConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        if !self.can_ask {
            return ConsentAnswer::Nobody;
        }
        // A task cancelled before its question was put never gets an
        // answer: the cancellation is the answer.
        if self.task.is_cancel_requested() {
            return ConsentAnswer::Cancel;
        }
        let request =
            InputRequest::Elicitation(ElicitRequest::new(elicitation(question(call, decision))));
        let answered = tokio::select! {
            answered = self.task.request_input(CONSENT_KEY, request) => answered,
            () = self.task.cancelled() => return ConsentAnswer::Cancel,
        };
        match answered {
            Ok(response) => answer_in(&response).unwrap_or(ConsentAnswer::Deny {
                reason: Some("the client's answer was not an elicitation result".to_owned()),
            }),
            // Cancelled while waiting, or the question could not be put.
            Err(_) => ConsentAnswer::Cancel,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use satchel_tools::policy::{Mode, Policy};
    use serde_json::json;

    use super::*;

    fn call(command: &str) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: "bash".into(),
            input: json!({"command": command}),
        }
    }

    fn decision() -> Decision {
        let policy = Policy::new(
            vec![
                satchel_tools::policy::Rule::parse(
                    satchel_tools::policy::RuleKind::Ask,
                    "bash(rm *)",
                    None,
                )
                .unwrap(),
            ],
            Mode::Trust,
            Vec::new(),
            4,
            std::time::Duration::from_secs(10),
        );
        let spec = satchel_core::ToolSpec {
            name: "bash".into(),
            title: None,
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: Default::default(),
            capabilities: Default::default(),
        };
        policy.decide(&spec, &json!({"command": "rm x"}))
    }

    #[test]
    fn an_answer_counts_only_for_the_call_it_was_asked_about() {
        let seal = StateSeal::new().unwrap();
        let asked = seal.input_required(&call("rm x"), &decision()).unwrap();
        let state = asked.request_state.unwrap();
        let question = serde_json::to_value(&asked.input_requests).unwrap();
        assert!(
            question.to_string().contains("rm x"),
            "the question shows the command: {question}"
        );

        let mut responses = InputResponses::new();
        responses.insert(CONSENT_KEY.into(), json!({"action": "accept"}));
        assert_eq!(
            seal.answer(&call("rm x"), &state, Some(&responses)),
            Ok(Some(ConsentAnswer::AllowOnce))
        );
        // An answered question cannot be answered again (a replay).
        assert_eq!(
            seal.answer(&call("rm x"), &state, Some(&responses)),
            Err(REFUSED_STATE.to_owned())
        );
        let asked = seal.input_required(&call("rm x"), &decision()).unwrap();
        let state = asked.request_state.unwrap();
        responses.insert(CONSENT_KEY.into(), json!({"action": "decline"}));
        assert!(matches!(
            seal.answer(&call("rm x"), &state, Some(&responses)),
            Ok(Some(ConsentAnswer::Deny { .. }))
        ));
        // No answer yet: ask again.
        assert_eq!(seal.answer(&call("rm x"), &state, None), Ok(None));
        // The same state for another command, a forged one, another server's.
        assert!(
            seal.answer(&call("rm -rf /"), &state, Some(&responses))
                .is_err()
        );
        assert!(
            seal.answer(&call("rm x"), "forged", Some(&responses))
                .is_err()
        );
        let other = StateSeal::new().unwrap();
        assert!(
            other
                .answer(&call("rm x"), &state, Some(&responses))
                .is_err()
        );
    }
}
