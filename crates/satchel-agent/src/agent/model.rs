//! Talking to the model for a turn: the provider for the configuration in
//! force (connected again when agent.json changes), the request as sent
//! (system prompt, tools natively or rendered into the prompt, the reply
//! schema), streaming the answer into events, and the calibration that
//! says how the model's own tokenizer compares with Satchel's count.
//!
//! Kept apart from the loop so that the one place that decides what bytes
//! go to the model is small enough to read whole: `context.rs` and the
//! side requests build on the same history this file does.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use satchel_core::{AssistantPart, Message, ToolSpec};
use satchel_llm::prompted;
use satchel_llm::{
    Calibration, ChatRequest, LlmError, Mode, PreparedRequest, Provider, Response, StopReason,
    StreamEvent, TokenEstimate, ToolChoice, ToolMode, model_info,
};
use tokio_util::sync::CancellationToken;

use super::repetition::looping_early;
use super::{Agent, AgentError};
use crate::history::Phase;
use crate::{AgentEvent, EventSink, Snapshot};

impl Agent {
    /// The provider for `snapshot`, connected again when the config changed,
    /// with the limits its server reports (asked once per endpoint and
    /// model, see [`satchel_llm::ask_server`]).
    pub(super) async fn provider(
        &mut self,
        snapshot: &Snapshot,
    ) -> Result<Arc<dyn Provider>, AgentError> {
        if let Some((generation, provider)) = &self.provider
            && *generation == snapshot.generation
        {
            return Ok(provider.clone());
        }
        let env: HashMap<String, String> = snapshot
            .settings
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut resolved = snapshot.llm.resolve(&env);
        if let (Some(tape), Err(LlmError::MissingApiKey { env_var, .. })) =
            (&self.model_tape, &resolved)
            && tape.is_replay()
        {
            // A replay sends nothing: it needs no key (CI has none).
            let mut env = env.clone();
            env.insert(env_var.clone(), "replay-needs-no-key".to_owned());
            resolved = snapshot.llm.resolve(&env);
        }
        let mut config = resolved?;
        config.tape = self.model_tape.clone();
        let config = satchel_llm::ask_server(config).await;
        let provider = satchel_llm::connect(config)?;
        self.provider = Some((snapshot.generation, provider.clone()));
        self.schema_refused = false;
        self.usage_samples = None;
        Ok(provider)
    }

    /// Reads the latest usage of the current model from the store, once per
    /// model, when its tokenizer is not embedded.
    pub(super) async fn load_usage_samples(
        &mut self,
        provider: &Arc<dyn Provider>,
    ) -> Result<(), AgentError> {
        let model = &provider.config().model;
        if self.usage_samples.is_some() || model_info(model).exact_tokenizer {
            return Ok(());
        }
        let samples = self
            .store
            .usage_samples(model, Calibration::WINDOW)
            .await?
            .into_iter()
            .map(|s| (s.estimate_tokens, s.input_tokens))
            .collect();
        self.usage_samples = Some(samples);
        Ok(())
    }

    /// The current model's calibration, when it has one.
    pub(super) fn calibration(&self) -> Option<Calibration> {
        Calibration::from_pairs(self.usage_samples.as_ref()?.iter().copied())
    }

    /// A turn's request, ready to send. A turn with `tools_off` (the
    /// budget's last, or one that must answer) goes without tools; in
    /// prompted mode with constrained replies it carries the answer-only
    /// schema, so its reply is an answer. `max_output` overrides the
    /// configured output limit for this request.
    pub(super) fn prepare(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        specs: &[ToolSpec],
        tools_off: bool,
        max_output: Option<u32>,
    ) -> Result<PreparedRequest, AgentError> {
        let prompted = provider.config().tool_mode() == ToolMode::Prompted;
        let schema = (prompted && self.constrains_replies(provider)).then(|| {
            if tools_off {
                prompted::reply_schema(&[])
            } else {
                prompted::reply_schema(specs)
            }
        });
        let history = self.turn_history(snapshot, provider, specs, tools_off);
        let native_specs = if prompted { &[][..] } else { specs };
        let mut request = ChatRequest::new(&history, native_specs);
        let none = ToolChoice::None;
        if tools_off && !prompted {
            request.tool_choice = &none;
        }
        request.reply_schema = schema.as_ref();
        request.max_output_tokens = max_output;
        let mode = if provider.config().stream {
            Mode::Stream
        } else {
            Mode::Whole
        };
        Ok(provider.prepare(&request, mode)?)
    }

    /// The messages of a turn's request as sent: the system prompt (with
    /// the tools in prompted mode, or the answer's shape when tools are off
    /// and replies constrained), past statements compact, this one native.
    pub(super) fn turn_history(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        specs: &[ToolSpec],
        tools_off: bool,
    ) -> Vec<Message> {
        let prompted = provider.config().tool_mode() == ToolMode::Prompted;
        let constrained = prompted && self.constrains_replies(provider);
        let base = self
            .context
            .read()
            .system_prompt(snapshot.agent.system_prompt());
        let system = match (prompted, tools_off) {
            (true, false) if constrained => format!(
                "{}\n\n{}{}\n",
                base,
                prompted::render_tools(specs),
                prompted::ANSWER_INSTRUCTION
            ),
            (true, false) => format!("{}\n\n{}", base, prompted::render_tools(specs)),
            (true, true) if constrained => {
                format!("{}\n\n{}\n", base, prompted::ANSWER_ONLY_INSTRUCTION)
            }
            _ => base,
        };
        self.conversation_mut().transcript.history(
            &system,
            snapshot.agent.history_shape(),
            Phase::InStatement,
        )
    }

    /// Whether prompted replies carry the reply schema now.
    pub(super) fn constrains_replies(&self, provider: &Arc<dyn Provider>) -> bool {
        provider.config().reply_format().is_some() && !self.schema_refused
    }
}

/// Streams one answer, passing text and thinking to `sink`; each retry of
/// the request, and a reply stopped because it repeated itself, is told to
/// `sink` and described in `retries`, for the log.
pub(super) async fn stream_answer(
    provider: &dyn Provider,
    prepared: &PreparedRequest,
    stream_text: bool,
    cancel: &CancellationToken,
    sink: &dyn EventSink,
    retries: &mut Vec<String>,
    chat: &mut crate::telemetry::ChatSpan,
) -> Result<Response, LlmError> {
    // Its own token, so a reply caught in a loop can be stopped alone.
    let request = cancel.child_token();
    let mut events = provider.send(prepared, request.clone());
    let mut text = String::new();
    let mut judged = 0;
    while let Some(event) = events.next().await {
        let event = event?;
        if !matches!(event, StreamEvent::Retrying { .. }) {
            chat.chunk();
        }
        match event {
            StreamEvent::TextDelta(delta) => {
                text.push_str(&delta);
                if stream_text {
                    sink.emit(AgentEvent::TextDelta(delta));
                }
                // Judged every half kilobyte: the check reads the reply's end.
                if text.len() >= judged + 512 {
                    judged = text.len();
                    if looping_early(&text) {
                        request.cancel();
                        let note = format!(
                            "the reply was stopped after {} bytes: it was repeating itself",
                            text.len()
                        );
                        sink.emit(AgentEvent::Notice(note.clone()));
                        retries.push(note);
                        return Ok(stopped_reply(prepared, text));
                    }
                }
            }
            StreamEvent::ThinkingDelta(text) => sink.emit(AgentEvent::ThinkingDelta(text)),
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
            } => {
                let note = format!(
                    "the model request is sent again (attempt {attempt}, after {:.1} s): {reason}",
                    delay.as_secs_f64()
                );
                sink.emit(AgentEvent::Notice(note.clone()));
                retries.push(note);
            }
            StreamEvent::Done(response) => return Ok(*response),
            _ => {}
        }
    }
    Err(if cancel.is_cancelled() {
        LlmError::Cancelled
    } else {
        LlmError::InvalidResponse {
            url: prepared.url.clone(),
            detail: "the answer ended without its last event".into(),
        }
    })
}

/// A reply stopped by Satchel while it was repeating itself: its text so
/// far, read as cut off at the output limit (which it would have reached),
/// with no usage (the server reported none).
fn stopped_reply(prepared: &PreparedRequest, text: String) -> Response {
    Response {
        id: None,
        model: None,
        content: vec![AssistantPart::Text { text }],
        tool_calls: Vec::new(),
        stop_reason: StopReason::MaxTokens,
        usage: None,
        estimate: prepared.estimate().clone(),
    }
}

/// True when `error` is a server refusing a request's `response_format`.
pub(super) fn refuses_reply_schema(error: &LlmError) -> bool {
    let message = match error {
        LlmError::Rejected { message, .. } | LlmError::Server { message, .. } => message,
        _ => return false,
    };
    let message = message.to_ascii_lowercase();
    [
        "response_format",
        "json_schema",
        "json_object",
        "grammar",
        "schema",
    ]
    .iter()
    .any(|word| message.contains(word))
}

/// The estimate as the model's own tokenizer would count it: calibrated
/// when the model has a calibration, else the count itself.
pub(super) fn calibrated_total(estimate: &TokenEstimate, calibration: Option<Calibration>) -> u64 {
    calibration.map_or(estimate.total, |c| c.apply(estimate.total))
}

/// Whether a request of `estimate` is past `threshold` of the window.
pub(super) fn over_threshold(
    estimate: &TokenEstimate,
    calibration: Option<Calibration>,
    threshold: f64,
) -> bool {
    estimate.context_window > 0
        && calibrated_total(estimate, calibration) as f64
            > threshold * estimate.context_window as f64
}
