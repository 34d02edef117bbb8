//! Running side requests: short model calls that write the conversation
//! goal, a statement's objective and the title (the prompts are
//! `crate::side`'s), plus the one-off summary `compaction.rs` asks for.
//!
//! They run on a task of their own so the loop does not wait for them:
//! beside the first turn when `sideRequestTiming` says parallel, else
//! after the final answer has arrived, one at a time, continuing the
//! request just sent (a server's prompt cache serves them). The loop
//! collects their results when it next looks ([`Agent::apply_side`]); a
//! statement that failed or was cancelled drops them.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use satchel_core::{Message, ToolSpec};
use satchel_llm::{ChatRequest, Mode, ModelConfig, Provider, collect};
use satchel_store::{LogKind, NewLlmCall, NewLogEntry, StoreError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::recording::llm_call_row;
use super::{Agent, AgentError};
use crate::config::{AgentConfig, SideTiming};
use crate::side::{SideKind, clean_answer, side_messages, side_note};
use crate::{AgentEvent, EventSink};

/// A side request's result, applied when the loop next looks.
pub(super) struct SideResult {
    kind: SideKind,
    pub(super) text: Result<String, String>,
    pub(super) call: NewLlmCall,
}

/// What a side request is written from.
pub(super) enum SideInput {
    /// Its own short prompt about this text (see [`side_messages`]).
    Standalone(String),
    /// The main request's messages and tools, then the task: the same
    /// prefix, which a server's prompt cache has just processed.
    Continuing(Arc<SidePrefix>),
}

/// The start of a main request that side requests continue.
pub(super) struct SidePrefix {
    pub(super) messages: Vec<Message>,
    pub(super) tools: Arc<[ToolSpec]>,
}

/// The side requests a statement needs, each with its own material.
pub(super) struct SidePlan(Vec<(SideKind, String)>);

impl SidePlan {
    /// Each as its own short request (beside the first turn).
    pub(super) fn standalone(self) -> Vec<(SideKind, SideInput)> {
        self.0
            .into_iter()
            .map(|(kind, material)| (kind, SideInput::Standalone(material)))
            .collect()
    }

    /// Each as a continuation of `prefix` (after the first answer).
    pub(super) fn continuing(self, prefix: SidePrefix) -> Vec<(SideKind, SideInput)> {
        let prefix = Arc::new(prefix);
        self.0
            .into_iter()
            .map(|(kind, _)| (kind, SideInput::Continuing(prefix.clone())))
            .collect()
    }
}

impl Agent {
    /// The side requests a statement needs: always its objective; the goal
    /// and title while the conversation has none.
    pub(super) fn side_plan(&mut self, text: &str, first: bool) -> SidePlan {
        let conversation = self.conversation_mut();
        let mut kinds = vec![SideKind::Objective];
        if conversation.goal.is_none() {
            kinds.push(SideKind::Goal);
        }
        if conversation.title.is_none() {
            kinds.push(SideKind::Title);
        }
        SidePlan(
            kinds
                .into_iter()
                .map(|kind| {
                    let material = match (kind, &conversation.goal) {
                        (SideKind::Objective, Some(goal)) if !first => {
                            format!(
                                "Conversation goal: {goal}\n\nThe user's latest message:\n{text}"
                            )
                        }
                        _ => text.to_owned(),
                    };
                    (kind, material)
                })
                .collect(),
        )
    }

    /// Waits for the side requests and records what they wrote.
    pub(super) async fn apply_side(
        &mut self,
        handle: JoinHandle<Vec<SideResult>>,
        statement_id: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let results = tokio::select! {
            joined = handle => joined.unwrap_or_default(),
            () = cancel.cancelled() => return Ok(()),
        };
        let conversation_id = self.conversation_mut().id.clone();
        for result in results {
            let mut call = result.call;
            call.conversation_id = Some(conversation_id.clone());
            call.statement_id = Some(statement_id.to_owned());
            self.record_call(call).await?;
            let text = match result.text {
                Ok(text) => text,
                Err(error) => {
                    sink.emit(AgentEvent::Notice(format!(
                        "the {} could not be written: {error}",
                        result.kind
                    )));
                    continue;
                }
            };
            let label = match result.kind {
                SideKind::Goal => "Goal",
                SideKind::Objective => "Objective",
                SideKind::Title => "Title",
                SideKind::Summary => "Summary",
            };
            match result.kind {
                SideKind::Goal => {
                    match self.store.set_goal(&conversation_id, text.clone()).await {
                        // The user set one meanwhile: theirs stands.
                        Err(StoreError::GoalAlreadySet { .. }) => continue,
                        other => other?,
                    }
                    self.conversation_mut().goal = Some(text.clone());
                }
                SideKind::Objective => {
                    self.store.set_objective(statement_id, text.clone()).await?;
                    self.conversation_mut().objective = Some(text.clone());
                }
                SideKind::Title => {
                    self.store.set_title(&conversation_id, text.clone()).await?;
                    self.conversation_mut().title = Some(text.clone());
                }
                SideKind::Summary => {}
            }
            let mut entry = NewLogEntry::new(
                &conversation_id,
                LogKind::Auxiliary,
                format!("{label}: {text}"),
            );
            entry.side_conversation = Some(result.kind.as_str().into());
            entry.statement_id = Some(statement_id.to_owned());
            self.store.append_log_entry(entry).await?;
            sink.emit(AgentEvent::Side {
                kind: result.kind,
                text,
            });
        }
        Ok(())
    }
}

/// Whether side requests go out beside the first turn (see [`SideTiming`]).
pub(super) fn side_in_parallel(config: &AgentConfig, model: &ModelConfig) -> bool {
    match config.side_request_timing {
        SideTiming::Parallel => true,
        SideTiming::Sequential => false,
        SideTiming::Auto => !model.is_private_endpoint(),
    }
}

/// Starts the side requests of `plan` on their own task: all at once when
/// `parallel`, else one after another (a server with one slot would cut
/// one off to serve the next).
pub(super) fn spawn_side_requests(
    plan: Vec<(SideKind, SideInput)>,
    provider: Arc<dyn Provider>,
    parallel: bool,
    cancel: &CancellationToken,
    otel: opentelemetry::Context,
) -> JoinHandle<Vec<SideResult>> {
    let cancel = cancel.child_token();
    tokio::spawn(async move {
        let requests = plan.into_iter().map(|(kind, input)| {
            side_request(provider.clone(), kind, input, cancel.clone(), &otel)
        });
        if parallel {
            return join_all(requests).await;
        }
        let mut results = Vec::new();
        for request in requests {
            results.push(request.await);
        }
        results
    })
}

/// Runs one side request and describes it for the usage table.
pub(super) async fn side_request(
    provider: Arc<dyn Provider>,
    kind: SideKind,
    input: SideInput,
    cancel: CancellationToken,
    otel: &opentelemetry::Context,
) -> SideResult {
    let (messages, tools) = match input {
        SideInput::Standalone(material) => (side_messages(kind, &material), Arc::from([])),
        SideInput::Continuing(prefix) => {
            let mut messages = prefix.messages.clone();
            messages.push(side_note(kind));
            (messages, prefix.tools.clone())
        }
    };
    let mut request = ChatRequest::new(&messages, &tools);
    // Never more than the main answers get (an eighth of a small window):
    // a summary as long as the statements it replaces would not help.
    let window_share = provider.config().context_window.div_euclid(8).max(64);
    request.max_output_tokens = Some(kind.max_output_tokens().min(window_share));
    let prepared = match provider.prepare(&request, Mode::Whole) {
        Ok(prepared) => prepared,
        Err(error) => {
            return SideResult {
                kind,
                text: Err(error.to_string()),
                call: NewLlmCall {
                    purpose: kind.as_str().into(),
                    provider: provider.config().provider.display_name().into(),
                    model: provider.config().model.clone(),
                    error: Some(error.to_string()),
                    ..NewLlmCall::default()
                },
            };
        }
    };
    let estimate = prepared.estimate().clone();
    let started = Instant::now();
    let chat = crate::telemetry::ChatSpan::start(otel, provider.config(), kind.as_str());
    let result = collect(provider.send(&prepared, cancel)).await;
    chat.end(&result, &crate::telemetry::ContentPolicy::default());
    let call = llm_call_row(&provider, kind.as_str(), &estimate, started, &result);
    let text = match result {
        Ok(response) => clean_answer(kind, &response.text())
            .ok_or_else(|| "the model answered with no text".to_owned()),
        Err(error) => Err(error.to_string()),
    };
    SideResult { kind, text, call }
}
