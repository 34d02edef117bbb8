//! Running one turn's tool calls and shaping their results for the model.
//!
//! The calls run in waves (`crate::schedule`: calls whose capabilities
//! conflict wait for each other), each through `satchel_tools::dispatch`
//! (validation, policy, consent, limits) after its start is on record, so
//! nothing runs that the record does not know. Their results then go back
//! to the model cut to the room left in the context window, the feedback
//! block before the first, natively or as one prompted-mode user message.
//! Recording the finished calls is `recording.rs`'s job.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::join_all;
use opentelemetry::context::FutureExt as _;
use satchel_core::text::char_prefix;
use satchel_core::{Content, ErrorCode, Message, ToolCall, ToolOutput, ToolResult, ToolResults};
use satchel_llm::prompted::{PromptedResult, format_results};
use satchel_llm::{Calibration, Response, Tape, TokenEstimate, count_tokens};
use satchel_store::{NewCallStart, Timestamp};
use satchel_tools::format::{generic_result, generic_use};
use satchel_tools::hooks::{Before, add_note};
use satchel_tools::{CallTrace, Consent, Registry, ToolContext, dispatch_with, not_recorded};
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::answer::Planned;
use super::hooks::HookContext;
use super::model::calibrated_total;
use crate::history::{CallRecord, Transcript};
use crate::telemetry::{self, ContentPolicy};
use crate::{AgentEvent, EventSink, Snapshot, waves};

/// A call that ran (or was refused), before it is recorded.
#[derive(Debug, Clone)]
pub(super) struct Finished {
    pub(super) call: ToolCall,
    pub(super) output: ToolOutput,
    pub(super) decision: Option<String>,
    pub(super) started_at: SystemTime,
    pub(super) duration: Duration,
    /// Its start's record, ended once the call's own record is written.
    pub(super) start: Option<String>,
}

/// What the calls of a turn run with, besides the calls.
pub(super) struct CallSetting<'a> {
    pub(super) registry: &'a Arc<Registry>,
    pub(super) snapshot: &'a Snapshot,
    pub(super) conversation_id: &'a str,
    /// The statement's text, for tools that keep traces.
    pub(super) trigger: Option<String>,
    /// The turn's thinking, for tools that keep traces.
    pub(super) reasoning: Option<String>,
    /// The statement's span, parent of each call's `execute_tool` span.
    pub(super) otel: &'a opentelemetry::Context,
    /// Whether call spans carry arguments and results.
    pub(super) content: &'a ContentPolicy,
}

impl Agent {
    /// Runs one turn's calls in conflict-free waves, in the order asked.
    pub(super) async fn run_calls(
        &self,
        setting: CallSetting<'_>,
        calls: &[Planned],
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Vec<Finished> {
        let CallSetting {
            registry,
            snapshot,
            conversation_id,
            trigger,
            reasoning,
            otel,
            content,
        } = setting;
        let capabilities: Vec<_> = calls
            .iter()
            .map(|planned| {
                planned
                    .preset
                    .is_none()
                    .then(|| {
                        registry
                            .get(&planned.call.name)
                            .map(|t| &t.spec().capabilities)
                    })
                    .flatten()
            })
            .collect();
        let mut finished: Vec<Option<Finished>> = vec![None; calls.len()];
        let hooks = self.hook_context(snapshot);
        for wave in waves(&capabilities) {
            let runs = wave.iter().map(|&index| {
                let call = &calls[index];
                let ctx = ToolContext {
                    cancel: cancel.child_token(),
                    conversation_id: Some(conversation_id.to_owned()),
                    session: None,
                    call_id: call.call.id.clone(),
                    working_dir: self.working_dir.clone(),
                    config: snapshot.tools.clone(),
                    trace: CallTrace {
                        session_id: None,
                        trigger_message: trigger.clone(),
                        reasoning: reasoning.clone(),
                    },
                    registry: Some(registry.clone()),
                    // Set by dispatch from the policy's mode.
                    confinement: satchel_tools::sandbox::Confinement::default(),
                    progress: None,
                    memory_namespace: self.memory_namespace.clone(),
                    background: false,
                    writable_roots: None,
                };
                self.run_one(registry, snapshot, call, ctx, sink, (&hooks, otel, content))
            });
            for (index, done) in wave.iter().zip(join_all(runs).await) {
                finished[*index] = Some(done);
            }
        }
        finished.into_iter().flatten().collect()
    }

    /// Runs one call (or gives it its preset output, or the cancellation
    /// error when the turn was interrupted first), telling `sink`.
    async fn run_one(
        &self,
        registry: &Registry,
        snapshot: &Snapshot,
        planned: &Planned,
        ctx: ToolContext,
        sink: &dyn EventSink,
        (hooks, otel, content): (&HookContext, &opentelemetry::Context, &ContentPolicy),
    ) -> Finished {
        let mut call = planned.call.clone();
        let span = telemetry::start_tool(otel, &call, content);
        let tool = registry.get(&call.name);
        sink.emit(AgentEvent::ToolStarted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            display: tool.map_or_else(
                || generic_use(&call.name, &call.input, self.display),
                |t| t.format_use(&call.input, self.display),
            ),
        });
        let started_at = SystemTime::now();
        let clock = Instant::now();
        let mut start = None;
        let (output, decision) = match planned.preset.clone() {
            Some(output) => (output, None),
            None if ctx.cancel.is_cancelled() => (
                ToolOutput::error(
                    ErrorCode::Cancelled,
                    "the user interrupted the turn before this call ran",
                ),
                None,
            ),
            None => {
                // Nothing runs that is not on record.
                let begun = self
                    .store
                    .begin_call(NewCallStart {
                        source: self.source,
                        caller: self.caller.clone(),
                        call: call.clone(),
                        conversation_id: ctx.conversation_id.clone(),
                        started_at: Timestamp::from_system_time(started_at),
                    })
                    .await;
                match begun {
                    Err(error) => (not_recorded(&error.to_string()), None),
                    Ok(id) => {
                        start = Some(id);
                        match self.model_tape.as_ref().filter(|t| t.replays_tools()) {
                            Some(tape) => replayed(tape, &call),
                            None => {
                                self.dispatch(
                                    registry,
                                    snapshot,
                                    &mut call,
                                    &ctx,
                                    sink,
                                    (hooks, &span),
                                )
                                .await
                            }
                        }
                    }
                }
            }
        };
        if let Some(tape) = &self.model_tape {
            tape.record_tool(&call, &output);
        }
        let duration = clock.elapsed();
        telemetry::end_tool(&span, &call, &output, duration, content);
        sink.emit(AgentEvent::ToolFinished {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            display: tool.map_or_else(
                || generic_result(&output, self.display),
                |t| t.format_result(&output, self.display),
            ),
            is_error: output.is_error,
            duration,
        });
        Finished {
            call,
            output,
            decision,
            started_at,
            duration,
            start,
        }
    }
    /// A call on record, run: its hooks before, the policy, consent and
    /// the tool, its hooks after. The output and the decision's label.
    async fn dispatch(
        &self,
        registry: &Registry,
        snapshot: &Snapshot,
        call: &mut ToolCall,
        ctx: &ToolContext,
        sink: &dyn EventSink,
        (hooks, span): (&HookContext, &opentelemetry::Context),
    ) -> (ToolOutput, Option<String>) {
        match self
            .pre_tool_hooks(hooks, registry, call, &ctx.cancel, sink)
            .await
        {
            Before::Refused(output, label) => (output, Some(label)),
            Before::Go(steer, hook_label, context) => {
                let notifying = self.notifying_consent(hooks);
                let consent: &dyn Consent = match &notifying {
                    Some(notifying) => notifying,
                    None => self.consent.as_ref(),
                };
                // Within the call's span: an MCP client call carries it on
                // as its parent.
                let dispatched =
                    dispatch_with(registry, &snapshot.policy, consent, call, ctx, &steer)
                        .with_context(span.clone())
                        .await;
                let label = match (dispatched.decision_label(), hook_label) {
                    (Some(label), Some(hook)) => Some(format!("{label} ({hook})")),
                    (label, hook) => label.or(hook),
                };
                let mut output = dispatched.output;
                add_note(&mut output, context.into_iter().collect());
                self.post_tool_hooks(hooks, registry, call, &mut output, &ctx.cancel, sink)
                    .await;
                (output, label)
            }
        }
    }
}

/// `--replay-tools`: the output the cassette holds for `call` (nothing
/// runs, no hook fires: the recorded output is the one they shaped), or an
/// error naming what is missing.
fn replayed(tape: &Tape, call: &ToolCall) -> (ToolOutput, Option<String>) {
    match tape.tool_output(call) {
        Ok(output) => (output, Some("replayed from the cassette".to_owned())),
        Err(message) => (ToolOutput::error(ErrorCode::ToolUnavailable, message), None),
    }
}

/// The text of the statement in progress, for tools that keep traces.
pub(super) fn text_trigger(transcript: &Transcript) -> Option<String> {
    transcript
        .statements
        .last()
        .map(|s| crate::history::user_text(&s.user))
}

/// Tokens (as Satchel counts them) the coming tool results may take before
/// the next request passes the threshold.
pub(super) fn room_for_results(
    estimate: &TokenEstimate,
    calibration: Option<Calibration>,
    response: &Response,
    threshold: f64,
) -> u64 {
    let budget = (threshold * estimate.context_window as f64) as u64;
    let answer = response.usage.map_or(0, |u| u.output_tokens);
    let room = budget.saturating_sub(calibrated_total(estimate, calibration) + answer);
    calibration.map_or(room, |c| (room as f64 / c.ratio) as u64)
}

/// The smallest share of the room a result is allowed before it is cut.
const MIN_RESULT_TOKENS: u64 = 256;

/// The outputs of a turn as they will be sent: each result too large for
/// the room left in the window cut, with a note saying so. Returns the
/// notices for the user too.
pub(super) fn fit_results(
    records: &[CallRecord],
    room: u64,
    encoding: satchel_llm::Encoding,
) -> (Vec<ToolOutput>, Vec<String>) {
    let share = (room / records.len().max(1) as u64).max(MIN_RESULT_TOKENS);
    let mut notices = Vec::new();
    let outputs = records
        .iter()
        .map(|record| {
            let mut output = record.output.clone();
            if let ToolResults::Text(text) = &output.results {
                let tokens = count_tokens(encoding, text);
                if tokens > share {
                    let keep_chars = (text.chars().count() as u64 * share / tokens) as usize;
                    let (kept, _) = char_prefix(text, keep_chars);
                    let note = format!(
                        "\n[Satchel cut this result to fit the context window: {} of {} characters kept. The whole result is stored; the call id is {}.]",
                        kept.chars().count(),
                        text.chars().count(),
                        record.call.id
                    );
                    notices.push(format!(
                        "the result of {} ({tokens} tokens) was cut to fit the context window",
                        record.call.name
                    ));
                    output.results = ToolResults::Text(format!("{kept}{note}"));
                }
            }
            output
        })
        .collect();
    (outputs, notices)
}

/// Native tool-result messages, the feedback block before the first.
pub(super) fn native_results(
    records: &[CallRecord],
    outputs: &[ToolOutput],
    feedback: &str,
) -> Vec<Message> {
    records
        .iter()
        .zip(outputs)
        .enumerate()
        .map(|(index, (record, output))| {
            let mut message = Message::tool_result(&record.call.id, output);
            if index == 0
                && let Message::Tool(ToolResult { content, .. }) = &mut message
            {
                *content = match std::mem::replace(content, ToolResults::Text(String::new())) {
                    ToolResults::Text(text) => ToolResults::Text(format!("{feedback}{text}")),
                    ToolResults::Parts(mut parts) => {
                        parts.insert(
                            0,
                            Content::Text {
                                text: feedback.to_owned(),
                            },
                        );
                        ToolResults::Parts(parts)
                    }
                };
            }
            message
        })
        .collect()
}

/// Prompted mode: one user message, the feedback block, then the results
/// as `{"tool": ..., "result": ...}` objects.
pub(super) fn prompted_results(
    records: &[CallRecord],
    outputs: &[ToolOutput],
    feedback: &str,
) -> Vec<Message> {
    let results: Vec<PromptedResult<'_>> = records
        .iter()
        .zip(outputs)
        .map(|(record, output)| {
            let tool = (!record.call.name.starts_with('(')).then_some(record.call.name.as_str());
            PromptedResult::new(tool, output)
        })
        .collect();
    vec![Message::user(format!(
        "{feedback}{}",
        format_results(&results)
    ))]
}

#[cfg(test)]
mod tests {
    use expect_test::expect;
    use serde_json::json;

    use super::*;

    fn record(id: &str, text: String) -> CallRecord {
        CallRecord {
            call: ToolCall {
                id: id.into(),
                name: "bash".into(),
                input: json!({"command": "cat big"}),
            },
            output: ToolOutput::success(ToolResults::Text(text), "ran"),
        }
    }

    #[test]
    fn a_result_too_big_for_the_room_left_is_cut_with_a_note() {
        let records = [
            record("small", "fine".into()),
            record("big", "word ".repeat(20_000)),
        ];
        let (outputs, notices) = fit_results(&records, 2_000, satchel_llm::Encoding::O200k);
        assert_eq!(outputs[0].results.to_text(), "fine");
        let cut = outputs[1].results.to_text();
        assert!(cut.len() < 10_000, "{} bytes", cut.len());
        let note = &cut[cut.rfind('\n').unwrap()..];
        expect![[r#"

            [Satchel cut this result to fit the context window: 4999 of 100000 characters kept. The whole result is stored; the call id is big.]"#]].assert_eq(note);
        expect![[r#"
            [
                "the result of bash (20001 tokens) was cut to fit the context window",
            ]
        "#]]
        .assert_debug_eq(&notices);
        // Stored outputs are untouched: only what is sent is cut.
        assert_eq!(records[1].output.results.to_text().len(), 100_000);
    }

    #[test]
    fn the_feedback_block_goes_before_the_first_result_only() {
        let records = [record("a", "one".into()), record("b", "two".into())];
        let outputs: Vec<ToolOutput> = records.iter().map(|r| r.output.clone()).collect();
        let native = native_results(&records, &outputs, "FEEDBACK\n");
        let texts: Vec<String> = native
            .iter()
            .map(|m| match m {
                Message::Tool(result) => result.content.to_text(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["FEEDBACK\none", "two"]);
        let prompted = prompted_results(&records, &outputs, "FEEDBACK\n");
        assert_eq!(prompted.len(), 1);
        let Message::User { content } = &prompted[0] else {
            panic!("not a user message")
        };
        expect![[r#"
            FEEDBACK
            [
            {"tool":"bash","result":"one"},
            {"tool":"bash","result":"two"}
            ]"#]]
        .assert_eq(&content[0].to_text());
    }
}
