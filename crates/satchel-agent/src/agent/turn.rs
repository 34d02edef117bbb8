//! [`Agent::statement`]: one user statement, run as a loop of turns until
//! the model answers without tools, the turn budget is spent, the model
//! fails or the user interrupts.
//!
//! The loop reads as its steps, each a method named for what it does:
//! [`begin_statement`](Agent::begin_statement) (record the statement,
//! plan the side requests), then per turn
//! [`start_turn`](Agent::start_turn) (configuration, provider and tools as
//! of now), [`prepare_within_threshold`](Agent::prepare_within_threshold),
//! [`ask_model`](Agent::ask_model), and either
//! [`stop_on_model_error`](Agent::stop_on_model_error),
//! [`end_without_tools`](Agent::end_without_tools), or
//! [`run_tools`](Agent::run_tools) and
//! [`send_results_next`](Agent::send_results_next); finally
//! [`end_statement`](Agent::end_statement). How each outcome is decided
//! (never an empty success, a cut-off answer kept but marked, a half tool
//! call never run) is here; what is written is `recording.rs`'s job.

use std::sync::Arc;
use std::time::Instant;

use satchel_core::{AssistantPart, Content, Message, ToolSpec};
use satchel_llm::{
    ConstrainedReplies, LlmError, PreparedRequest, Provider, Response, StopReason, ToolMode, Usage,
};
use satchel_store::{
    LogKind, NewLlmCall, NewLogEntry, NewRecords, NewStatement, Statement, StoreError,
};
use satchel_tools::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::answer::{Answer, Planned, cut_off_reply, read_answer};
use super::model::{calibrated_total, over_threshold, refuses_reply_schema, stream_answer};
use super::recording::{answer_step, history_rows, stop_reason_name};
use super::side_requests::{
    SidePlan, SidePrefix, SideResult, side_in_parallel, spawn_side_requests,
};
use super::streak::{Adjust, Failure, Streak, input_failure, reply_failure};
use super::tool_calls::{
    CallSetting, fit_results, native_results, prompted_results, room_for_results, text_trigger,
};
use super::{Agent, AgentError, Outcome, StatementReport};

mod failing;
use crate::history::{CallRecord, StatementRecord, TurnRecord, text_of};
use crate::telemetry::{self, ChatSpan, ContentPolicy};
use crate::{AgentEvent, EventSink, Feedback, Snapshot};

/// Marks an answer that was cut off, where it stops in the history.
const CUT_OFF_MARK: &str = "\n[answer cut off before the model finished]";

/// Stands for an answer with neither text nor a tool call in the history.
const EMPTY_ANSWER_MARK: &str = "[no answer: the model returned neither text nor a tool call]";

/// Rounds of summarising one request may take before it goes as it is.
const MAX_COMPACTIONS: usize = 2;

/// The least room a request must leave in the window for its answer;
/// a request that leaves less is refused before it is sent.
const MIN_ANSWER_ROOM: u64 = 128;

/// A statement in progress: what its turns share.
struct Run {
    /// The statement's row.
    statement: Statement,
    /// What the statement reports so far.
    report: StatementReport,
    /// Side requests that wait for the first answer.
    side_plan: Option<SidePlan>,
    /// Side requests under way.
    side: Option<JoinHandle<Vec<SideResult>>>,
    /// Whether side requests may go beside a main request.
    parallel: bool,
    /// The same failure in a row (no loops).
    streak: Streak,
    /// What the next turn does differently after a repeated failure.
    adjust: Adjust,
    /// The statement's `invoke_agent` span, parent of its other spans.
    otel: opentelemetry::Context,
    /// Whether spans carry content (`otel.logContent`), redacted.
    content: ContentPolicy,
    /// Times in a row a `Stop` hook sent the model back to work.
    stop_blocks: u32,
}

/// One turn's configuration, provider and tools, fixed as it starts.
struct Turn {
    /// 1-based.
    number: u32,
    max_turns: u32,
    /// The budget's last turn: tools are off.
    last: bool,
    /// No tools this turn: the last, or one that must answer after the
    /// same failure twice.
    tools_off: bool,
    /// The output limit for this turn, when it is not the configured one.
    max_output: Option<u32>,
    snapshot: Arc<Snapshot>,
    provider: Arc<dyn Provider>,
    registry: Arc<Registry>,
    specs: Arc<[ToolSpec]>,
    /// Tools go in the system prompt and calls come back in the reply's JSON.
    prompted: bool,
}

/// Whether the statement goes on after a turn.
enum After {
    NextTurn,
    Done,
}

impl Agent {
    /// Runs one user statement to its end.
    ///
    /// # Errors
    /// Only when nothing can be done or recorded: no usable model, or a
    /// store failure. A model that fails mid-way is
    /// [`Outcome::Failed`], an interruption [`Outcome::Cancelled`].
    pub async fn statement(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<StatementReport, AgentError> {
        self.reload_config(sink);
        self.ensure_conversation().await?;
        let hooked = self.prompt_hooks(text, cancel, sink).await;
        let context = hooked.as_ref().map_or(&[][..], Vec::as_slice);
        let mut run = self.begin_statement(text, context, cancel, sink).await?;
        if let Err(reason) = hooked {
            let message = format!("a UserPromptSubmit hook blocked this statement: {reason}");
            sink.emit(AgentEvent::Notice(message.clone()));
            self.fail_statement(&mut run, &message).await?;
            return self.end_statement(run, cancel, sink).await;
        }
        let mut number: u32 = 0;
        loop {
            number += 1;
            if number > 1 {
                self.reload_config(sink);
            }
            let turn = self.start_turn(number, &run.adjust).await?;
            match self.turn(&mut run, &turn, cancel, sink).await? {
                After::NextTurn => {}
                After::Done => break,
            }
        }
        self.end_statement(run, cancel, sink).await
    }

    /// Records the statement, its log entry and user message; starts the
    /// side requests now when they may go beside the first turn, else
    /// keeps them for after the first answer.
    async fn begin_statement(
        &mut self,
        text: &str,
        hook_context: &[String],
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<Run, AgentError> {
        self.reload_config(sink);
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot).await?;
        self.load_usage_samples(&provider).await?;
        let conversation_id = self.ensure_conversation().await?.id.clone();
        // What UserPromptSubmit and SessionStart hooks add joins the
        // user's message, as Claude Code gives it.
        let mut user_parts = vec![Content::Text { text: text.into() }];
        user_parts.extend(hook_context.iter().map(|context| Content::Text {
            text: format!("[hook context]\n{context}"),
        }));
        let user = Message::User {
            content: user_parts.clone(),
        };
        // The statement, its log entry and its message: one write.
        let recorded = self
            .store
            .append_records(NewRecords {
                statement: Some(NewStatement {
                    conversation_id: conversation_id.clone(),
                    objective: None,
                }),
                log_entries: vec![NewLogEntry::new(&conversation_id, LogKind::User, text)],
                messages: history_rows(&conversation_id, None, 1, &[user]),
                ..NewRecords::default()
            })
            .await?;
        let statement = recorded.statement.ok_or_else(|| StoreError::NotFound {
            kind: "statement",
            id: conversation_id.clone(),
        })?;
        let first = {
            let conversation = self.conversation_mut();
            conversation.transcript.statements.push(StatementRecord {
                seq: statement.seq,
                user: user_parts,
                turns: Vec::new(),
            });
            conversation.transcript.statements.len() == 1
        };
        let mut side_plan = snapshot
            .agent
            .side_requests
            .then(|| self.side_plan(text, first));
        let parallel = side_in_parallel(&snapshot.agent, provider.config());
        let otel = telemetry::start_statement(&conversation_id);
        self.otel = otel.clone();
        let content = ContentPolicy {
            log_content: telemetry::log_content(&snapshot.settings),
            redactor: snapshot.tools.runner.redactor.clone(),
        };
        let side = if parallel {
            side_plan.take().map(|plan| {
                spawn_side_requests(
                    plan.standalone(),
                    provider.clone(),
                    parallel,
                    cancel,
                    otel.clone(),
                )
            })
        } else {
            None
        };
        Ok(Run {
            report: StatementReport {
                outcome: Outcome::Answered,
                statement_id: statement.id.clone(),
                answer: String::new(),
                turns: 0,
                tool_calls: 0,
                usage: Usage::default(),
            },
            statement,
            side_plan,
            side,
            parallel,
            streak: Streak::default(),
            adjust: Adjust::None,
            otel,
            content,
            stop_blocks: 0,
        })
    }

    /// The configuration, provider and tools turn `number` runs with, as
    /// `adjust` changes them after a repeated failure.
    async fn start_turn(&mut self, number: u32, adjust: &Adjust) -> Result<Turn, AgentError> {
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot).await?;
        let max_turns = snapshot.agent.max_turns;
        let registry = self.tools.current();
        let specs = crate::tool_index::offer(
            &registry,
            &snapshot.agent.tool_index,
            &self.conversation_mut().loaded_tools,
            provider.config().context_window,
            provider.config().encoding,
            provider.config().edit_form(),
        )
        .specs;
        let specs = match adjust {
            Adjust::OnlyTools(names) => specs
                .iter()
                .filter(|spec| names.contains(&spec.name))
                .cloned()
                .collect(),
            _ => specs,
        };
        let prompted = provider.config().tool_mode() == ToolMode::Prompted;
        let last = number >= max_turns;
        Ok(Turn {
            number,
            max_turns,
            last,
            tools_off: last || *adjust == Adjust::AnswerOnly,
            max_output: match adjust {
                Adjust::MoreOutput(max) => Some(*max),
                _ => None,
            },
            snapshot,
            provider,
            registry,
            specs,
            prompted,
        })
    }

    /// One turn: ask, then end the statement or run the calls asked for.
    async fn turn(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<After, AgentError> {
        let prepared = self
            .prepare_within_threshold(turn, &run.statement.id, cancel, sink)
            .await?;
        let prepared = match self.fit_answer_room(turn, prepared)? {
            Ok(prepared) => prepared,
            Err(message) => {
                self.fail_statement(run, &message).await?;
                return Ok(After::Done);
            }
        };
        let estimate = prepared.estimate().clone();
        sink.emit(AgentEvent::TurnStarted {
            turn: turn.number,
            max_turns: turn.max_turns,
            estimate_tokens: estimate.total,
            context_window: estimate.context_window,
        });
        run.report.turns = turn.number;
        let (result, call) = self.ask_model(run, turn, &prepared, cancel, sink).await?;
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                self.store.record_llm_call(call).await?;
                self.stop_on_model_error(run, turn.number, &error).await?;
                return Ok(After::Done);
            }
        };
        if let Some(usage) = response.usage {
            add_usage(&mut run.report.usage, usage);
        }
        sink.emit(AgentEvent::TurnFinished {
            turn: turn.number,
            usage: response.usage,
        });
        let mut answer = read_answer(&response, turn.prompted, turn.tools_off, turn.number, sink);
        let constrained = turn.prompted && self.constrains_replies(&turn.provider);
        let failure = reply_failure(&response, &answer, turn.prompted, constrained);
        if turn.prompted
            && matches!(failure, Some(Failure::CutOff { .. }))
            && answer.calls.is_empty()
            && !turn.last
        {
            // Cut before its JSON closed, yet read as prose: not an answer.
            // The model is told, and the next turn goes as the streak says.
            let planned = cut_off_reply(turn.number);
            answer
                .parts
                .retain(|p| !matches!(p, AssistantPart::Text { .. }));
            answer
                .parts
                .push(AssistantPart::ToolCall(planned.call.clone()));
            answer.calls.push(planned);
        }
        let text = text_of(&answer.parts);
        let stop_blocked = if answer.calls.is_empty()
            && failure.is_none()
            && !turn.last
            && !text.trim().is_empty()
        {
            self.stop_hooks(&turn.snapshot, run.stop_blocks, cancel, sink)
                .await
        } else {
            None
        };
        if answer.calls.is_empty() && stop_blocked.is_none() {
            // The final answer is out: the server is free for the side
            // requests that waited (never between turns, where the next
            // turn would queue behind them on a one-slot server).
            self.start_side_requests_after_answer(run, turn, cancel);
        }
        let thinking = response.thinking();
        let gave_up = failure
            .as_ref()
            .is_some_and(|failure| run.streak.note(Some(failure.clone())) >= failure.give_up_at());
        // The call and the answer's log entries: one write, and when the
        // answer ends the statement, with its message too.
        let mut step = answer_step(&run.statement, call, &text, &thinking);
        if !answer.calls.is_empty() || stop_blocked.is_some() || gave_up {
            self.store.append_records(std::mem::take(&mut step)).await?;
        }
        if gave_up {
            self.give_up(run, turn, answer).await?;
            return Ok(After::Done);
        }
        if let Some(reason) = stop_blocked {
            run.stop_blocks += 1;
            self.go_on_after_stop_hook(run, turn, answer, &reason, sink)
                .await?;
            return Ok(After::NextTurn);
        }
        if answer.calls.is_empty() {
            self.end_without_tools(run, turn, answer, &response.stop_reason, step, sink)
                .await?;
            return Ok(After::Done);
        }
        let calls = self.answer_tool_searches(turn, std::mem::take(&mut answer.calls));
        let records = self
            .run_tools(run, turn, &calls, thinking, cancel, sink)
            .await?;
        let room = room_for_results(
            &estimate,
            self.calibration(),
            &response,
            turn.snapshot.agent.context_threshold,
        );
        let failure = match failure {
            Some(failure) => Some(failure),
            None => {
                let failure = input_failure(&records);
                run.streak.note(failure.clone());
                failure
            }
        };
        self.send_results_next(run, turn, answer, records, room, sink)
            .await?;
        if failure.is_some() {
            if self.after_failure(run, turn, &estimate, sink).await? {
                return Ok(After::Done);
            }
        } else {
            run.adjust = Adjust::None;
        }
        if cancel.is_cancelled() {
            run.report.outcome = Outcome::Cancelled;
            self.log(
                &run.statement.conversation_id,
                &run.statement.id,
                LogKind::Error,
                "interrupted by the user",
            )
            .await?;
            return Ok(After::Done);
        }
        Ok(After::NextTurn)
    }

    /// The turn's request, summarising old statements first (up to
    /// [`MAX_COMPACTIONS`] times) while it is past the threshold.
    async fn prepare_within_threshold(
        &mut self,
        turn: &Turn,
        statement_id: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<PreparedRequest, AgentError> {
        let Turn {
            snapshot,
            provider,
            specs,
            tools_off,
            max_output,
            ..
        } = turn;
        let mut prepared = self.prepare(snapshot, provider, specs, *tools_off, *max_output)?;
        for _ in 0..MAX_COMPACTIONS {
            if !over_threshold(
                prepared.estimate(),
                self.calibration(),
                snapshot.agent.context_threshold,
            ) {
                break;
            }
            self.pre_compact_hooks(snapshot, cancel, sink).await;
            if !self
                .compact(snapshot, provider, statement_id, cancel, sink)
                .await?
            {
                break;
            }
            prepared = self.prepare(snapshot, provider, specs, *tools_off, *max_output)?;
        }
        Ok(prepared)
    }

    /// `prepared` with its output limit lowered to the room the window has
    /// left, or the reason it cannot be sent: less than
    /// [`MIN_ANSWER_ROOM`] would be left for the answer (the server would
    /// refuse it, or Ollama cut it silently).
    fn fit_answer_room(
        &mut self,
        turn: &Turn,
        prepared: PreparedRequest,
    ) -> Result<Result<PreparedRequest, String>, AgentError> {
        let config = turn.provider.config();
        let window = u64::from(config.context_window);
        let prompt = calibrated_total(prepared.estimate(), self.calibration());
        let room = window.saturating_sub(prompt);
        if room < MIN_ANSWER_ROOM {
            return Ok(Err(format!(
                "the next request would not fit the model's context window: about {prompt} \
                 tokens of a {window}-token window ({}), even after summarising what could be; \
                 it was not sent. Start a new conversation, lower `toolResultMaxLength`, or give \
                 the server a larger context and set `llm.contextWindow` to it.",
                config.window_source
            )));
        }
        let max_output = turn.max_output.or(config.max_output_tokens);
        if max_output.is_some_and(|max| u64::from(max) > room) {
            let room = u32::try_from(room).unwrap_or(u32::MAX);
            return Ok(Ok(self.prepare(
                &turn.snapshot,
                &turn.provider,
                &turn.specs,
                turn.tools_off,
                Some(room),
            )?));
        }
        Ok(Ok(prepared))
    }

    /// Sends the turn's request and streams the answer, logging each retry
    /// the client made; returns the answer with its call's usage row, for
    /// the caller to write with the answer's rows. A prompted request whose
    /// reply schema the server refuses (`constrainedReplies: auto`) is sent
    /// again without it, once; the user is told, and the refused call is
    /// recorded at once.
    async fn ask_model(
        &mut self,
        run: &Run,
        turn: &Turn,
        prepared: &PreparedRequest,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<(Result<Response, LlmError>, NewLlmCall), AgentError> {
        let (conversation_id, statement_id) = (&run.statement.conversation_id, &run.statement.id);
        let provider = &turn.provider;
        let estimate = prepared.estimate().clone();
        let started = Instant::now();
        let mut retries = Vec::new();
        let mut chat = ChatSpan::start(&run.otel, provider.config(), "turn");
        let result = stream_answer(
            provider.as_ref(),
            prepared,
            !turn.prompted,
            cancel,
            sink,
            &mut retries,
            &mut chat,
        )
        .await;
        chat.end(&result, &run.content);
        let call = self.turn_call(
            provider,
            &estimate,
            started,
            &result,
            &run.statement,
            turn.number,
        );
        let (result, call) = match result {
            Err(error)
                if turn.prompted
                    && self.constrains_replies(provider)
                    && provider.config().constrained_replies == ConstrainedReplies::Auto
                    && refuses_reply_schema(&error) =>
            {
                // The server cannot enforce the schema: say so once and
                // send the same turn without it.
                self.store.record_llm_call(call).await?;
                self.schema_refused = true;
                let note = format!(
                    "the server refused the reply schema (`constrainedReplies: auto`); \
                     prompted replies go unconstrained from now on: {error}"
                );
                sink.emit(AgentEvent::Notice(note.clone()));
                self.log(conversation_id, statement_id, LogKind::Auxiliary, &note)
                    .await?;
                let prepared = self.prepare(
                    &turn.snapshot,
                    provider,
                    &turn.specs,
                    turn.tools_off,
                    turn.max_output,
                )?;
                let estimate = prepared.estimate().clone();
                let started = Instant::now();
                let mut chat = ChatSpan::start(&run.otel, provider.config(), "turn");
                let result = stream_answer(
                    provider.as_ref(),
                    &prepared,
                    false,
                    cancel,
                    sink,
                    &mut retries,
                    &mut chat,
                )
                .await;
                chat.end(&result, &run.content);
                let call = self.turn_call(
                    provider,
                    &estimate,
                    started,
                    &result,
                    &run.statement,
                    turn.number,
                );
                (result, call)
            }
            other => (other, call),
        };
        for retry in retries {
            self.log(conversation_id, statement_id, LogKind::Auxiliary, &retry)
                .await?;
        }
        Ok((result, call))
    }

    /// The final answer is in: the server is free for the side requests
    /// that waited (sequential timing: a local server may have one slot,
    /// and a turn queued behind them would delay the answer). They
    /// continue the request just sent, so a server's prompt cache serves
    /// them.
    fn start_side_requests_after_answer(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        cancel: &CancellationToken,
    ) {
        let Some(plan) = run.side_plan.take() else {
            return;
        };
        let prefix = SidePrefix {
            messages: self.turn_history(
                &turn.snapshot,
                &turn.provider,
                &turn.specs,
                turn.tools_off,
            ),
            tools: if turn.prompted || turn.tools_off {
                Arc::from([])
            } else {
                turn.specs.clone()
            },
        };
        run.side = Some(spawn_side_requests(
            plan.continuing(prefix),
            turn.provider.clone(),
            run.parallel,
            cancel,
            run.otel.clone(),
        ));
    }

    /// An answer without tool calls ends the statement: answered, failed
    /// when it is empty (never an empty success: the user is told, the
    /// model's next turn sees that nothing came), or out of turns when
    /// this was the budget's last turn.
    async fn end_without_tools(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        answer: Answer,
        stop_reason: &StopReason,
        step: NewRecords,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let (conversation_id, statement_id) = (&run.statement.conversation_id, &run.statement.id);
        let Answer {
            mut parts,
            raw_reply,
            tools_refused,
            ..
        } = answer;
        let text = text_of(&parts);
        let empty = text.trim().is_empty() && !tools_refused;
        // It asked for tools in the last turn and said nothing else.
        let only_asked_for_tools = text.trim().is_empty() && tools_refused;
        if empty {
            parts.push(AssistantPart::Text {
                text: EMPTY_ANSWER_MARK.into(),
            });
        } else {
            run.report.answer = text;
        }
        self.finish_turn_with(
            step,
            conversation_id,
            statement_id,
            turn.number,
            TurnRecord {
                assistant: parts,
                raw_reply,
                ..TurnRecord::default()
            },
        )
        .await?;
        if empty {
            let message = format!(
                "the model's answer was empty: no text and no tool call (stop reason: {})",
                stop_reason_name(stop_reason)
            );
            self.log(conversation_id, statement_id, LogKind::Error, &message)
                .await?;
            run.report.outcome = Outcome::Failed(message);
            return Ok(());
        }
        if only_asked_for_tools && !turn.last {
            let message = "the model asked for tools again when it was asked for the answer \
                           alone, after the same failure twice; nothing more was run"
                .to_owned();
            self.log(conversation_id, statement_id, LogKind::Error, &message)
                .await?;
            run.report.outcome = Outcome::Failed(message);
            return Ok(());
        }
        if turn.last && turn.number > 1 {
            run.report.outcome = Outcome::TurnLimit;
            let message = if only_asked_for_tools {
                format!(
                    "The turn budget ({}) ran out: the model asked for more tools in its last turn instead of answering; nothing more was run.",
                    turn.max_turns
                )
            } else {
                format!(
                    "The turn budget ({}) ran out: the model gave its last answer without tools.",
                    turn.max_turns
                )
            };
            sink.emit(AgentEvent::Notice(message.clone()));
            self.log(conversation_id, statement_id, LogKind::Auxiliary, &message)
                .await?;
        }
        Ok(())
    }

    /// A `Stop` hook blocked the stop: the answer is kept as a turn, and
    /// the hook's reason goes to the model as the user's next message.
    async fn go_on_after_stop_hook(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        answer: Answer,
        reason: &str,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let note = format!(
            "a Stop hook sent the model back to work ({} of at most {} in a row): {reason}",
            run.stop_blocks,
            super::hooks::MAX_STOP_BLOCKS
        );
        self.tell(run, &note, sink).await?;
        self.finish_turn(
            &run.statement.conversation_id,
            &run.statement.id,
            turn.number,
            TurnRecord {
                assistant: answer.parts,
                raw_reply: answer.raw_reply,
                sent_results: vec![Message::user(format!("Stop hook feedback: {reason}"))],
                ..TurnRecord::default()
            },
        )
        .await
    }

    /// Runs the turn's calls and records them; then collects the side
    /// requests, so the feedback block sees the objective they wrote.
    /// Answers the turn's `tool_search` calls from the registry when the
    /// turn offered it, loading what they found for later turns.
    fn answer_tool_searches(&mut self, turn: &Turn, calls: Vec<Planned>) -> Vec<Planned> {
        use crate::tool_index::{TOOL_SEARCH, search};
        if !turn.specs.iter().any(|spec| spec.name == TOOL_SEARCH) {
            return calls;
        }
        calls
            .into_iter()
            .map(|mut planned| {
                if planned.call.name == TOOL_SEARCH && planned.preset.is_none() {
                    let (output, loaded) = search(&turn.registry, &planned.call.input);
                    self.conversation_mut().loaded_tools.extend(loaded);
                    planned.preset = Some(output);
                }
                planned
            })
            .collect()
    }

    async fn run_tools(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        calls: &[Planned],
        thinking: String,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<Vec<CallRecord>, AgentError> {
        let trigger = text_trigger(&self.conversation_mut().transcript);
        let setting = CallSetting {
            registry: &turn.registry,
            snapshot: &turn.snapshot,
            conversation_id: &run.statement.conversation_id,
            trigger,
            reasoning: (!thinking.is_empty()).then_some(thinking),
            otel: &run.otel,
            content: &run.content,
        };
        let finished = self.run_calls(setting, calls, cancel, sink).await;
        let records = self
            .record_calls(&turn.registry, &run.statement.id, turn.number, finished)
            .await?;
        run.report.tool_calls += records.len() as u32;
        if let Some(handle) = run.side.take() {
            self.apply_side(handle, &run.statement.id, cancel, sink)
                .await?;
        }
        Ok(records)
    }

    /// The results as the next request carries them (the feedback block
    /// first, each cut to the `room` left), recorded with the turn.
    async fn send_results_next(
        &mut self,
        run: &Run,
        turn: &Turn,
        answer: Answer,
        records: Vec<CallRecord>,
        room: u64,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let conversation = self.conversation_mut();
        let feedback = Feedback {
            turn: turn.number,
            max_turns: turn.max_turns,
            goal: conversation.goal.as_deref(),
            objective: conversation.objective.as_deref(),
            tally: &conversation.tally,
            resources: &conversation.resources,
        }
        .render();
        let (outputs, notices) = fit_results(&records, room, turn.provider.config().encoding);
        for notice in notices {
            sink.emit(AgentEvent::Notice(notice));
        }
        let sent = if turn.prompted {
            prompted_results(&records, &outputs, &feedback)
        } else {
            native_results(&records, &outputs, &feedback)
        };
        self.finish_turn(
            &run.statement.conversation_id,
            &run.statement.id,
            turn.number,
            TurnRecord {
                assistant: answer.parts,
                calls: records,
                sent_results: sent,
                raw_reply: answer.raw_reply,
            },
        )
        .await
    }

    /// Side requests still under way are collected, unless the statement
    /// failed or was cancelled: the user was told why it stopped, and side
    /// requests to the same model would only repeat it.
    async fn end_statement(
        &mut self,
        mut run: Run,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<StatementReport, AgentError> {
        sink.emit(AgentEvent::AnswerComplete {
            outcome: run.report.outcome.clone(),
        });
        if let Some(handle) = run.side.take() {
            if matches!(run.report.outcome, Outcome::Cancelled | Outcome::Failed(_)) {
                handle.abort();
            } else {
                self.apply_side(handle, &run.statement.id, cancel, sink)
                    .await?;
            }
        }
        let failed = match &run.report.outcome {
            Outcome::Failed(message) => Some(message.as_str()),
            Outcome::Answered | Outcome::TurnLimit | Outcome::Cancelled => None,
        };
        telemetry::end_statement(&run.otel, run.report.turns, failed);
        Ok(run.report)
    }
}

fn add_usage(total: &mut Usage, usage: Usage) {
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    total.cache_read_tokens += usage.cache_read_tokens;
    total.cache_write_tokens += usage.cache_write_tokens;
}
