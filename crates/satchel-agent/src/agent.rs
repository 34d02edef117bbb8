//! [`Agent`]: one conversation, run statement by statement.
//!
//! A statement is a loop of turns: build the history, count it on the
//! exact request bytes (summarising old statements past the threshold),
//! stream the model's answer, run the tool calls it asked for (in waves,
//! see [`crate::schedule`]), prepend the feedback block to their results,
//! record everything, and go on until the model answers without tools or
//! the turn budget is spent. Goal, objective and title are written by side
//! requests that run beside the first turn.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::future::join_all;
use satchel_core::{
    AssistantPart, Content, ErrorCode, Message, ToolCall, ToolOutput, ToolResult, ToolResults,
    ToolSpec,
};
use satchel_llm::prompted::{self, PromptedResult, ReplyOutcome, format_results, parse_reply};
use satchel_llm::{
    AssembledToolCall, Calibration, ChatRequest, ConstrainedReplies, LlmError, Mode, ModelConfig,
    PreparedRequest, Provider, Response, StopReason, StreamEvent, TokenEstimate, ToolChoice,
    ToolMode, Usage, collect, count_tokens, model_info,
};
use satchel_store::{
    AuditSource, LogKind, NewCallStart, NewConversation, NewLlmCall, NewLlmMessage, NewLogEntry,
    NewStatement, NewToolCall, Statement, Store, StoreError, Timestamp,
};
use satchel_tools::format::{generic_result, generic_use};
use satchel_tools::{
    CallTrace, Consent, LiveRegistry, Registry, Style, ToolContext, dispatch, not_recorded,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{AgentConfig, SideTiming};
use crate::history::{
    CallRecord, Compaction, Phase, StatementRecord, Transcript, TurnRecord, text_of,
};
use crate::resume::load_transcript;
use crate::side::{SideKind, clean_answer, side_messages, side_note};
use crate::summary::tool_call_line;
use crate::{AgentEvent, EventSink, Feedback, HotConfig, Resources, Snapshot, ToolTally, waves};

/// Role under which a summary of older statements is stored in the history.
pub const SUMMARY_ROLE: &str = "summary";

/// Key of a stored assistant message that holds a prompted-mode reply as
/// the model wrote it (the message's parts are its reading).
pub const PROMPTED_REPLY_KEY: &str = "prompted_reply";

/// What the loop needs from its host.
pub struct AgentDeps {
    /// Where everything is recorded.
    pub store: Arc<dyn Store>,
    /// The tools, refreshed when their directories change.
    pub tools: Arc<LiveRegistry>,
    /// agent.json, read again before every turn.
    pub config: HotConfig,
    /// Who answers when policy says "ask".
    pub consent: Arc<dyn Consent>,
    /// Recorded on audit rows: `repl` or `run`.
    pub source: AuditSource,
    /// Where tools resolve relative paths.
    pub working_dir: PathBuf,
    /// How tool calls are formatted in events.
    pub display: Style,
}

/// Why an [`Agent`] could not go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The store failed; nothing half-written was kept.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// No model can be used with this configuration.
    #[error("{0}")]
    Model(#[from] LlmError),
    /// No conversation matches.
    #[error("no conversation matches `{0}`")]
    NotFound(String),
    /// Several conversations match a prefix.
    #[error("`{0}` matches several conversations; give more of the id")]
    Ambiguous(String),
}

/// How a statement ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model answered without asking for more tools.
    Answered,
    /// The turn budget ran out; the model answered in a last turn without tools.
    TurnLimit,
    /// The user interrupted it.
    Cancelled,
    /// The model could not be reached or failed; the message says why.
    Failed(String),
}

/// What a statement did.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementReport {
    /// How it ended.
    pub outcome: Outcome,
    /// The statement's id in the store.
    pub statement_id: String,
    /// The final answer's text (the last turn's).
    pub answer: String,
    /// Model calls made for it (side requests excluded).
    pub turns: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Reported usage summed over its turns.
    pub usage: Usage,
}

/// The breakdown of the next request, for `/context` and `satchel context`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextReport {
    /// The model it would go to.
    pub model: String,
    /// Tokens per section, counted on the request's bytes.
    pub estimate: TokenEstimate,
    /// Of the message tokens, those of past turns' `[Tool: ...]` lines.
    pub tool_summary_tokens: u64,
    /// Messages in the history.
    pub messages: usize,
    /// Statements in the conversation.
    pub statements: usize,
    /// Statements folded into the summary.
    pub summarised_through: Option<u32>,
    /// The share of the window past which old turns are summarised.
    pub threshold: f64,
    /// How the model's own tokenizer compares with the estimate, learned
    /// from reported usage; `None` when the tokenizer is embedded or no
    /// call has reported usage yet.
    pub calibration: Option<Calibration>,
}

impl ContextReport {
    /// The total as the model's own tokenizer would count it.
    pub fn calibrated_total(&self) -> u64 {
        calibrated_total(&self.estimate, self.calibration)
    }
}

/// One conversation as the loop knows it.
#[derive(Debug, Clone, Default)]
struct Conversation {
    id: String,
    goal: Option<String>,
    title: Option<String>,
    objective: Option<String>,
    transcript: Transcript,
    tally: ToolTally,
    resources: Resources,
}

/// A side request's result, applied when the loop next looks.
struct SideResult {
    kind: SideKind,
    text: Result<String, String>,
    call: NewLlmCall,
}

/// The agent loop over one conversation.
pub struct Agent {
    store: Arc<dyn Store>,
    tools: Arc<LiveRegistry>,
    config: HotConfig,
    consent: Arc<dyn Consent>,
    source: AuditSource,
    working_dir: PathBuf,
    display: Style,
    provider: Option<(u64, Arc<dyn Provider>)>,
    /// The server refused the reply schema (`constrainedReplies: auto`):
    /// prompted replies go unconstrained until the model settings change.
    schema_refused: bool,
    /// `(estimate, reported)` input tokens of the latest calls to the
    /// current model, newest first, when its tokenizer is not embedded;
    /// `None` until loaded from the store.
    usage_samples: Option<VecDeque<(u64, u64)>>,
    conversation: Option<Conversation>,
}

impl Agent {
    /// An agent that starts a new conversation with its first statement.
    pub fn new(deps: AgentDeps) -> Agent {
        Agent {
            store: deps.store,
            tools: deps.tools,
            config: deps.config,
            consent: deps.consent,
            source: deps.source,
            working_dir: deps.working_dir,
            display: deps.display,
            provider: None,
            schema_refused: false,
            usage_samples: None,
            conversation: None,
        }
    }

    /// An agent that goes on with the stored conversation whose id is or
    /// starts with `id` (`None`: the most recently updated one).
    pub async fn resume(deps: AgentDeps, id: Option<&str>) -> Result<Agent, AgentError> {
        let mut agent = Agent::new(deps);
        let conversation = match id {
            None => agent
                .store
                .latest_conversation()
                .await?
                .ok_or_else(|| AgentError::NotFound("(latest)".into()))?,
            Some(id) => match agent.store.conversation(id).await? {
                Some(found) => found,
                None => {
                    let mut found = agent.store.find_conversations(id, 2).await?;
                    match found.len() {
                        0 => return Err(AgentError::NotFound(id.into())),
                        1 => found.remove(0),
                        _ => return Err(AgentError::Ambiguous(id.into())),
                    }
                }
            },
        };
        let registry = agent.tools.current();
        let loaded = load_transcript(agent.store.as_ref(), &conversation.id, &registry).await?;
        agent.conversation = Some(Conversation {
            id: conversation.id,
            goal: conversation.goal,
            title: conversation.title,
            objective: loaded.objective,
            transcript: loaded.transcript,
            tally: loaded.tally,
            resources: loaded.resources,
        });
        Ok(agent)
    }

    /// The conversation's id, once it exists.
    pub fn conversation_id(&self) -> Option<&str> {
        self.conversation.as_ref().map(|c| c.id.as_str())
    }

    /// The conversation's title, once written.
    pub fn title(&self) -> Option<&str> {
        self.conversation.as_ref()?.title.as_deref()
    }

    /// The conversation goal, once set.
    pub fn goal(&self) -> Option<&str> {
        self.conversation.as_ref()?.goal.as_deref()
    }

    /// The configuration in force (after the last reload).
    pub fn config(&self) -> Arc<Snapshot> {
        self.config.current()
    }

    /// The tools.
    pub fn tools(&self) -> &Arc<LiveRegistry> {
        &self.tools
    }

    /// Leaves the current conversation; the next statement starts a new one.
    pub fn new_conversation(&mut self) {
        self.conversation = None;
    }

    /// Sets the conversation goal (the user's `/goal`), replacing a
    /// generated one.
    pub async fn set_goal(&mut self, goal: String) -> Result<(), AgentError> {
        let conversation = self.ensure_conversation().await?;
        let id = conversation.id.clone();
        self.store.replace_goal(&id, goal.clone()).await?;
        let mut entry = NewLogEntry::new(
            &id,
            LogKind::Auxiliary,
            format!("Goal (set by the user): {goal}"),
        );
        entry.side_conversation = Some("goal".into());
        self.store.append_log_entry(entry).await?;
        if let Some(conversation) = self.conversation.as_mut() {
            conversation.goal = Some(goal);
        }
        Ok(())
    }

    /// Sets the conversation title (the user's `/new TITLE`).
    pub async fn set_title(&mut self, title: String) -> Result<(), AgentError> {
        let id = self.ensure_conversation().await?.id.clone();
        self.store.set_title(&id, title.clone()).await?;
        self.conversation_mut().title = Some(title);
        Ok(())
    }

    /// Reads agent.json again if it changed; tells `sink` what changed or
    /// what is wrong with it.
    pub fn reload_config(&mut self, sink: &dyn EventSink) {
        if let Some(warnings) = self.config.refresh() {
            let generation = self.config.current().generation;
            if generation > 1 && warnings.is_empty() {
                sink.emit(AgentEvent::Notice("configuration reloaded".into()));
            }
            for warning in warnings {
                sink.emit(AgentEvent::Notice(format!("config: {warning}")));
            }
        }
    }

    /// The breakdown of the request the next statement would start with
    /// (without its user message).
    pub async fn context_report(&mut self) -> Result<ContextReport, AgentError> {
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot)?;
        self.load_usage_samples(&provider).await?;
        let calibration = self.calibration();
        let registry = self.tools.current();
        let specs: Vec<ToolSpec> = registry.specs().cloned().collect();
        let mut empty = Conversation::default();
        let conversation = match self.conversation.as_mut() {
            Some(conversation) => conversation,
            None => &mut empty,
        };
        let history = conversation.transcript.history(
            snapshot.agent.system_prompt(),
            snapshot.agent.tool_result_max_length,
            Phase::Idle,
        );
        let request = ChatRequest::new(&history, &specs);
        let prepared = provider.prepare(&request, Mode::Stream)?;
        let encoding = provider.config().encoding;
        let through = conversation
            .transcript
            .compaction
            .as_ref()
            .map_or(0, |c| c.through);
        let tool_summary_tokens = conversation
            .transcript
            .statements
            .iter()
            .filter(|s| s.seq > through)
            .flat_map(|s| &s.turns)
            .flat_map(|t| &t.calls)
            .map(|record| {
                count_tokens(
                    encoding,
                    &tool_call_line(
                        &record.call,
                        &record.output,
                        snapshot.agent.tool_result_max_length,
                    ),
                )
            })
            .sum();
        Ok(ContextReport {
            model: provider.config().model.clone(),
            estimate: prepared.estimate().clone(),
            tool_summary_tokens,
            messages: history.len(),
            statements: conversation.transcript.statements.len(),
            summarised_through: conversation
                .transcript
                .compaction
                .as_ref()
                .map(|c| c.through),
            threshold: snapshot.agent.context_threshold,
            calibration,
        })
    }

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
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot)?;
        self.load_usage_samples(&provider).await?;
        let conversation_id = self.ensure_conversation().await?.id.clone();
        let statement = self
            .store
            .add_statement(NewStatement {
                conversation_id: conversation_id.clone(),
                objective: None,
            })
            .await?;
        let mut entry = NewLogEntry::new(&conversation_id, LogKind::User, text);
        entry.statement_id = Some(statement.id.clone());
        self.store.append_log_entry(entry).await?;
        let user = Message::user(text);
        self.record_messages(
            &conversation_id,
            &statement.id,
            1,
            std::slice::from_ref(&user),
        )
        .await?;
        let first = {
            let conversation = self.conversation_mut();
            conversation.transcript.statements.push(StatementRecord {
                seq: statement.seq,
                user: vec![Content::Text { text: text.into() }],
                turns: Vec::new(),
            });
            conversation.transcript.statements.len() == 1
        };
        let mut side_plan = snapshot
            .agent
            .side_requests
            .then(|| self.side_plan(text, first));
        let mut side = None;
        let parallel = side_in_parallel(&snapshot.agent, provider.config());
        if parallel {
            side = side_plan.take().map(|plan| {
                spawn_side_requests(plan.standalone(), provider.clone(), parallel, cancel)
            });
        }

        let mut report = StatementReport {
            outcome: Outcome::Answered,
            statement_id: statement.id.clone(),
            answer: String::new(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
        };
        let mut turn: u32 = 0;
        loop {
            turn += 1;
            if turn > 1 {
                self.reload_config(sink);
            }
            let snapshot = self.config.current();
            let provider = self.provider(&snapshot)?;
            let max_turns = snapshot.agent.max_turns;
            let last = turn >= max_turns;
            let registry = self.tools.current();
            let specs: Vec<ToolSpec> = registry.specs().cloned().collect();
            let mut prepared = self.prepare(&snapshot, &provider, &specs, last)?;
            for _ in 0..2 {
                if !over_threshold(
                    prepared.estimate(),
                    self.calibration(),
                    snapshot.agent.context_threshold,
                ) {
                    break;
                }
                if !self
                    .compact(&snapshot, &provider, &statement.id, cancel, sink)
                    .await?
                {
                    break;
                }
                prepared = self.prepare(&snapshot, &provider, &specs, last)?;
            }
            let estimate = prepared.estimate().clone();
            sink.emit(AgentEvent::TurnStarted {
                turn,
                max_turns,
                estimate_tokens: estimate.total,
                context_window: estimate.context_window,
            });
            report.turns = turn;
            let started = Instant::now();
            let prompted = provider.config().tool_mode() == ToolMode::Prompted;
            let mut retries = Vec::new();
            let result = stream_answer(
                provider.as_ref(),
                &prepared,
                !prompted,
                cancel,
                sink,
                &mut retries,
            )
            .await;
            self.record_turn_call(&provider, &estimate, started, &result, &statement, turn)
                .await?;
            let result = match result {
                Err(error)
                    if prompted
                        && self.constrains_replies(&provider)
                        && provider.config().constrained_replies == ConstrainedReplies::Auto
                        && refuses_reply_schema(&error) =>
                {
                    // The server cannot enforce the schema: say so once and
                    // send the same turn without it.
                    self.schema_refused = true;
                    let note = format!(
                        "the server refused the reply schema (`constrainedReplies: auto`); \
                         prompted replies go unconstrained from now on: {error}"
                    );
                    sink.emit(AgentEvent::Notice(note.clone()));
                    self.log(&conversation_id, &statement.id, LogKind::Auxiliary, &note)
                        .await?;
                    let prepared = self.prepare(&snapshot, &provider, &specs, last)?;
                    let estimate = prepared.estimate().clone();
                    let started = Instant::now();
                    let result = stream_answer(
                        provider.as_ref(),
                        &prepared,
                        false,
                        cancel,
                        sink,
                        &mut retries,
                    )
                    .await;
                    self.record_turn_call(&provider, &estimate, started, &result, &statement, turn)
                        .await?;
                    result
                }
                other => other,
            };
            for retry in retries {
                self.log(&conversation_id, &statement.id, LogKind::Auxiliary, &retry)
                    .await?;
            }
            let response = match result {
                Ok(response) => response,
                Err(error) => {
                    let outcome = match &error {
                        LlmError::Cancelled => Outcome::Cancelled,
                        other => Outcome::Failed(other.to_string()),
                    };
                    if let Some(partial) = error.partial_response() {
                        // Keep what arrived, marked, without its unfinished calls.
                        let mut parts: Vec<AssistantPart> = partial
                            .content
                            .iter()
                            .filter(|p| !matches!(p, AssistantPart::ToolCall(_)))
                            .cloned()
                            .collect();
                        parts.push(AssistantPart::Text {
                            text: CUT_OFF_MARK.into(),
                        });
                        report.answer = partial.text();
                        self.finish_turn(
                            &conversation_id,
                            &statement.id,
                            turn,
                            TurnRecord {
                                assistant: parts,
                                ..TurnRecord::default()
                            },
                        )
                        .await?;
                    }
                    let message = match &outcome {
                        Outcome::Cancelled => "interrupted by the user".to_owned(),
                        _ => error.to_string(),
                    };
                    let mut entry = NewLogEntry::new(&conversation_id, LogKind::Error, message);
                    entry.statement_id = Some(statement.id.clone());
                    self.store.append_log_entry(entry).await?;
                    report.outcome = outcome;
                    break;
                }
            };
            if let Some(plan) = side_plan.take() {
                // The first answer is in: the server is free for them, and
                // they run while its tools do (or after the final answer).
                // They continue the request just sent, so a server's prompt
                // cache serves them and the next turn alike.
                let prompted = provider.config().tool_mode() == ToolMode::Prompted;
                let prefix = SidePrefix {
                    messages: self.turn_history(&snapshot, &provider, &specs, last),
                    tools: if prompted || last {
                        Vec::new()
                    } else {
                        specs.clone()
                    },
                };
                side = Some(spawn_side_requests(
                    plan.continuing(prefix),
                    provider.clone(),
                    parallel,
                    cancel,
                ));
            }
            if let Some(usage) = response.usage {
                add_usage(&mut report.usage, usage);
            }
            sink.emit(AgentEvent::TurnFinished {
                turn,
                usage: response.usage,
            });
            let (mut parts, mut calls, raw_reply) = if prompted {
                let raw = response.text();
                let cut_at_limit = response.stop_reason == StopReason::MaxTokens;
                let (parts, calls) = prompted_turn(&raw, turn, cut_at_limit);
                let prose = text_of(&parts);
                if !prose.is_empty() {
                    sink.emit(AgentEvent::TextDelta(prose));
                }
                (parts, calls, Some(raw))
            } else {
                let calls = response.tool_calls.iter().map(Planned::native).collect();
                (response.content.clone(), calls, None)
            };
            let tools_refused = last && !calls.is_empty();
            if tools_refused {
                // Tools were disabled: calls asked anyway are not run, and
                // are left out so no call goes without a result.
                parts.retain(|p| !matches!(p, AssistantPart::ToolCall(_)));
                calls.clear();
                sink.emit(AgentEvent::Notice(
                    "the model asked for tools in its last turn; they were not run".into(),
                ));
            }
            let text = text_of(&parts);
            let thinking = response.thinking();
            self.log_answer(&conversation_id, &statement.id, &text, &thinking)
                .await?;
            if calls.is_empty() {
                // Never an empty success: the user is told, the model's
                // next turn sees that nothing came.
                let empty = text.trim().is_empty() && !tools_refused;
                if empty {
                    parts.push(AssistantPart::Text {
                        text: EMPTY_ANSWER_MARK.into(),
                    });
                } else {
                    report.answer = text;
                }
                self.finish_turn(
                    &conversation_id,
                    &statement.id,
                    turn,
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
                        stop_reason_name(&response.stop_reason)
                    );
                    self.log(&conversation_id, &statement.id, LogKind::Error, &message)
                        .await?;
                    report.outcome = Outcome::Failed(message);
                    break;
                }
                if last && turn > 1 {
                    report.outcome = Outcome::TurnLimit;
                    let message = format!(
                        "The turn budget ({max_turns}) ran out: the model gave its last answer without tools."
                    );
                    sink.emit(AgentEvent::Notice(message.clone()));
                    let mut entry = NewLogEntry::new(&conversation_id, LogKind::Auxiliary, message);
                    entry.statement_id = Some(statement.id.clone());
                    self.store.append_log_entry(entry).await?;
                }
                break;
            }

            let trigger = text_trigger(&self.conversation_mut().transcript);
            let records = self
                .run_tools(
                    &registry,
                    &snapshot,
                    &calls,
                    trigger,
                    (!thinking.is_empty()).then_some(thinking),
                    &statement.id,
                    turn,
                    cancel,
                    sink,
                )
                .await?;
            report.tool_calls += records.len() as u32;
            if let Some(handle) = side.take() {
                self.apply_side(handle, &statement.id, cancel, sink).await?;
            }
            let conversation = self.conversation_mut();
            let feedback = Feedback {
                turn,
                max_turns,
                goal: conversation.goal.as_deref(),
                objective: conversation.objective.as_deref(),
                tally: &conversation.tally,
                resources: &conversation.resources,
            }
            .render();
            let room = room_for_results(
                &estimate,
                self.calibration(),
                &response,
                snapshot.agent.context_threshold,
            );
            let (outputs, notices) = fit_results(&records, room, provider.config().encoding);
            for notice in notices {
                sink.emit(AgentEvent::Notice(notice));
            }
            let sent = if prompted {
                prompted_results(&records, &outputs, &feedback)
            } else {
                native_results(&records, &outputs, &feedback)
            };
            self.finish_turn(
                &conversation_id,
                &statement.id,
                turn,
                TurnRecord {
                    assistant: parts,
                    calls: records,
                    sent_results: sent,
                    raw_reply,
                },
            )
            .await?;
            if cancel.is_cancelled() {
                report.outcome = Outcome::Cancelled;
                let mut entry =
                    NewLogEntry::new(&conversation_id, LogKind::Error, "interrupted by the user");
                entry.statement_id = Some(statement.id.clone());
                self.store.append_log_entry(entry).await?;
                break;
            }
        }
        if let Some(handle) = side.take() {
            if matches!(report.outcome, Outcome::Cancelled | Outcome::Failed(_)) {
                // The user was told why the statement stopped; side requests
                // to the same model would only repeat it.
                handle.abort();
            } else {
                self.apply_side(handle, &statement.id, cancel, sink).await?;
            }
        }
        Ok(report)
    }

    fn conversation_mut(&mut self) -> &mut Conversation {
        self.conversation.get_or_insert_with(Conversation::default)
    }

    async fn ensure_conversation(&mut self) -> Result<&mut Conversation, AgentError> {
        if self.conversation.is_none() {
            let created = self
                .store
                .create_conversation(NewConversation::default())
                .await?;
            self.conversation = Some(Conversation {
                id: created.id,
                ..Conversation::default()
            });
        }
        Ok(self.conversation_mut())
    }

    /// The provider for `snapshot`, connected again when the config changed.
    fn provider(&mut self, snapshot: &Snapshot) -> Result<Arc<dyn Provider>, AgentError> {
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
        let provider = satchel_llm::connect(snapshot.llm.resolve(&env)?)?;
        self.provider = Some((snapshot.generation, provider.clone()));
        self.schema_refused = false;
        self.usage_samples = None;
        Ok(provider)
    }

    /// Appends a log entry of the statement.
    async fn log(
        &self,
        conversation_id: &str,
        statement_id: &str,
        kind: LogKind,
        text: &str,
    ) -> Result<(), AgentError> {
        let mut entry = NewLogEntry::new(conversation_id, kind, text);
        entry.statement_id = Some(statement_id.to_owned());
        self.store.append_log_entry(entry).await?;
        Ok(())
    }

    /// Records a turn's model call.
    async fn record_turn_call(
        &mut self,
        provider: &Arc<dyn Provider>,
        estimate: &TokenEstimate,
        started: Instant,
        result: &Result<Response, LlmError>,
        statement: &Statement,
        turn: u32,
    ) -> Result<(), AgentError> {
        let mut call = llm_call_row(provider, "turn", estimate, started, result);
        call.conversation_id = Some(statement.conversation_id.clone());
        call.statement_id = Some(statement.id.clone());
        call.turn = Some(turn);
        self.record_call(call).await
    }

    /// Records a model call, and learns from its usage how the model's own
    /// tokenizer compares with the estimate.
    async fn record_call(&mut self, call: NewLlmCall) -> Result<(), AgentError> {
        if let (Some(samples), Some(input)) = (self.usage_samples.as_mut(), call.input_tokens)
            && input > 0
            && call.estimate_tokens > 0
        {
            samples.push_front((call.estimate_tokens, input));
            samples.truncate(Calibration::WINDOW);
        }
        self.store.record_llm_call(call).await?;
        Ok(())
    }

    /// Reads the latest usage of the current model from the store, once per
    /// model, when its tokenizer is not embedded.
    async fn load_usage_samples(&mut self, provider: &Arc<dyn Provider>) -> Result<(), AgentError> {
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
    fn calibration(&self) -> Option<Calibration> {
        Calibration::from_pairs(self.usage_samples.as_ref()?.iter().copied())
    }

    fn prepare(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        specs: &[ToolSpec],
        last: bool,
    ) -> Result<PreparedRequest, AgentError> {
        let prompted = provider.config().tool_mode() == ToolMode::Prompted;
        let schema = (prompted && !last && self.constrains_replies(provider))
            .then(|| prompted::reply_schema(specs));
        let history = self.turn_history(snapshot, provider, specs, last);
        let native_specs = if prompted { &[][..] } else { specs };
        let mut request = ChatRequest::new(&history, native_specs);
        let none = ToolChoice::None;
        if last && !prompted {
            request.tool_choice = &none;
        }
        request.reply_schema = schema.as_ref();
        let mode = if provider.config().stream {
            Mode::Stream
        } else {
            Mode::Whole
        };
        Ok(provider.prepare(&request, mode)?)
    }

    /// The messages of a turn's request as sent: the system prompt (with
    /// the tools in prompted mode), past statements compact, this one native.
    fn turn_history(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        specs: &[ToolSpec],
        last: bool,
    ) -> Vec<Message> {
        let prompted = provider.config().tool_mode() == ToolMode::Prompted;
        let constrained = prompted && !last && self.constrains_replies(provider);
        let system = match (prompted, last) {
            (true, false) if constrained => format!(
                "{}\n\n{}{}\n",
                snapshot.agent.system_prompt(),
                prompted::render_tools(specs),
                prompted::ANSWER_INSTRUCTION
            ),
            (true, false) => format!(
                "{}\n\n{}",
                snapshot.agent.system_prompt(),
                prompted::render_tools(specs)
            ),
            _ => snapshot.agent.system_prompt().to_owned(),
        };
        self.conversation_mut().transcript.history(
            &system,
            snapshot.agent.tool_result_max_length,
            Phase::InStatement,
        )
    }

    /// Whether prompted replies carry the reply schema now.
    fn constrains_replies(&self, provider: &Arc<dyn Provider>) -> bool {
        provider.config().reply_format().is_some() && !self.schema_refused
    }

    /// Summarises the oldest past statements into one message; false when
    /// there was nothing to summarise or the side request failed.
    async fn compact(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        statement_id: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<bool, AgentError> {
        let keep = snapshot.agent.keep_recent_statements;
        let max_chars = snapshot.agent.tool_result_max_length;
        let conversation = self.conversation_mut();
        let transcript = &conversation.transcript;
        // The statement in progress is never summarised.
        let past: Vec<&StatementRecord> = transcript
            .unsummarised()
            .take(transcript.unsummarised().count().saturating_sub(1))
            .collect();
        let fold = past.len().saturating_sub(keep);
        if fold == 0 {
            return Ok(false);
        }
        let mut material = String::new();
        if let Some(previous) = &transcript.compaction {
            material.push_str("Summary so far:\n");
            material.push_str(&previous.text);
            material.push_str("\n\n");
        }
        for statement in &past[..fold] {
            material.push_str("User: ");
            material.push_str(&crate::history::user_text(&statement.user));
            material.push_str("\nAssistant: ");
            material.push_str(&crate::history::past_answer(statement, max_chars));
            material.push_str("\n\n");
        }
        let through = past[fold - 1].seq;
        let first = past[0].seq;
        let conversation_id = conversation.id.clone();
        let result = side_request(
            provider.clone(),
            SideKind::Summary,
            SideInput::Standalone(material),
            cancel.clone(),
        )
        .await;
        let mut call = result.call;
        call.conversation_id = Some(conversation_id.clone());
        call.statement_id = Some(statement_id.to_owned());
        self.record_call(call).await?;
        let text = match result.text {
            Ok(text) => text,
            Err(error) => {
                sink.emit(AgentEvent::Notice(format!(
                    "the history is past {:.0}% of the context window but could not be summarised: {error}",
                    snapshot.agent.context_threshold * 100.0
                )));
                return Ok(false);
            }
        };
        self.store
            .append_messages(vec![NewLlmMessage {
                conversation_id: conversation_id.clone(),
                statement_id: Some(statement_id.to_owned()),
                turn: 0,
                role: SUMMARY_ROLE.into(),
                content: serde_json::json!({"text": text, "through_statement": through}),
            }])
            .await?;
        let mut entry = NewLogEntry::new(&conversation_id, LogKind::Auxiliary, &text);
        entry.side_conversation = Some(SideKind::Summary.as_str().into());
        entry.statement_id = Some(statement_id.to_owned());
        self.store.append_log_entry(entry).await?;
        self.conversation_mut().transcript.compaction = Some(Compaction {
            text: text.clone(),
            through,
        });
        sink.emit(AgentEvent::Side {
            kind: SideKind::Summary,
            text,
        });
        sink.emit(AgentEvent::Notice(format!(
            "statements {first}-{through} were summarised to fit the context window; the log keeps them whole"
        )));
        Ok(true)
    }

    /// The side requests a statement needs: always its objective; the goal
    /// and title while the conversation has none.
    fn side_plan(&mut self, text: &str, first: bool) -> SidePlan {
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
    async fn apply_side(
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

    async fn log_answer(
        &self,
        conversation_id: &str,
        statement_id: &str,
        text: &str,
        thinking: &str,
    ) -> Result<(), AgentError> {
        if !thinking.trim().is_empty() {
            let mut entry = NewLogEntry::new(conversation_id, LogKind::Auxiliary, thinking);
            entry.side_conversation = Some(satchel_store::THINKING_SIDE.into());
            entry.statement_id = Some(statement_id.to_owned());
            self.store.append_log_entry(entry).await?;
        }
        if !text.trim().is_empty() {
            let mut entry = NewLogEntry::new(conversation_id, LogKind::Assistant, text);
            entry.statement_id = Some(statement_id.to_owned());
            self.store.append_log_entry(entry).await?;
        }
        Ok(())
    }

    /// Runs one turn's calls in conflict-free waves; records them.
    #[allow(clippy::too_many_arguments)]
    async fn run_tools(
        &mut self,
        registry: &Arc<Registry>,
        snapshot: &Snapshot,
        calls: &[Planned],
        trigger: Option<String>,
        reasoning: Option<String>,
        statement_id: &str,
        turn: u32,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<Vec<CallRecord>, AgentError> {
        let conversation_id = self.conversation_mut().id.clone();
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
        for wave in waves(&capabilities) {
            let runs = wave.iter().map(|&index| {
                let call = &calls[index];
                let ctx = ToolContext {
                    cancel: cancel.child_token(),
                    conversation_id: Some(conversation_id.clone()),
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
                };
                self.run_one(registry, snapshot, call, ctx, sink)
            });
            for (index, done) in wave.iter().zip(join_all(runs).await) {
                finished[*index] = Some(done);
            }
        }
        let finished: Vec<Finished> = finished.into_iter().flatten().collect();
        let rows = finished
            .iter()
            .map(|done| NewToolCall {
                source: self.source,
                conversation_id: Some(conversation_id.clone()),
                statement_id: Some(statement_id.to_owned()),
                turn: Some(turn),
                call: done.call.clone(),
                output: done.output.clone(),
                decision: done.decision.clone(),
                started_at: timestamp(done.started_at),
                finished_at: timestamp(done.started_at + done.duration),
                duration_us: u64::try_from(done.duration.as_micros()).unwrap_or(u64::MAX),
            })
            .collect();
        self.store.record_tool_calls(rows).await?;
        let starts = finished
            .iter()
            .filter_map(|done| done.start.clone())
            .collect();
        self.store.end_calls(starts).await?;
        let markdown = Style::Markdown;
        for done in &finished {
            let tool = registry.get(&done.call.name);
            let use_text = tool.map_or_else(
                || generic_use(&done.call.name, &done.call.input, markdown),
                |t| t.format_use(&done.call.input, markdown),
            );
            let result_text = tool.map_or_else(
                || generic_result(&done.output, markdown),
                |t| t.format_result(&done.output, markdown),
            );
            for (kind, text) in [
                (LogKind::ToolUse, use_text),
                (LogKind::ToolResult, result_text),
            ] {
                let mut entry = NewLogEntry::new(&conversation_id, kind, text);
                entry.statement_id = Some(statement_id.to_owned());
                entry.call_id = Some(done.call.id.clone());
                self.store.append_log_entry(entry).await?;
            }
        }
        let conversation = self.conversation_mut();
        for done in &finished {
            conversation
                .tally
                .add(&done.call.name, done.output.is_error);
            if !done.output.is_error {
                let spec = registry.get(&done.call.name).map(|t| t.spec());
                conversation.resources.add_call(spec, &done.call);
            }
        }
        Ok(finished
            .into_iter()
            .map(|done| CallRecord {
                call: done.call,
                output: done.output,
            })
            .collect())
    }

    async fn run_one(
        &self,
        registry: &Registry,
        snapshot: &Snapshot,
        planned: &Planned,
        ctx: ToolContext,
        sink: &dyn EventSink,
    ) -> Finished {
        let call = planned.call.clone();
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
                        call: call.clone(),
                        conversation_id: ctx.conversation_id.clone(),
                        started_at: timestamp(started_at),
                    })
                    .await;
                match begun {
                    Err(error) => (not_recorded(&error.to_string()), None),
                    Ok(id) => {
                        start = Some(id);
                        let dispatched = dispatch(
                            registry,
                            &snapshot.policy,
                            self.consent.as_ref(),
                            &call,
                            &ctx,
                        )
                        .await;
                        let label = dispatched.decision_label();
                        (dispatched.output, label)
                    }
                }
            }
        };
        let duration = clock.elapsed();
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

    /// Adds a finished turn to the transcript and records its messages.
    async fn finish_turn(
        &mut self,
        conversation_id: &str,
        statement_id: &str,
        turn: u32,
        record: TurnRecord,
    ) -> Result<(), AgentError> {
        let mut assistant = serde_json::to_value(Message::Assistant {
            content: record.assistant.clone(),
        })
        .unwrap_or_default();
        if let (Some(raw), Some(object)) = (&record.raw_reply, assistant.as_object_mut()) {
            // What was sent back is the reply as written; the parts are its reading.
            object.insert(PROMPTED_REPLY_KEY.into(), raw.clone().into());
        }
        let mut rows = vec![assistant];
        rows.extend(
            record
                .sent_results
                .iter()
                .map(|m| serde_json::to_value(m).unwrap_or_default()),
        );
        self.record_values(conversation_id, statement_id, turn, rows)
            .await?;
        if let Some(statement) = self.conversation_mut().transcript.statements.last_mut() {
            statement.turns.push(record);
        }
        Ok(())
    }

    async fn record_messages(
        &self,
        conversation_id: &str,
        statement_id: &str,
        turn: u32,
        messages: &[Message],
    ) -> Result<(), AgentError> {
        let values = messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .collect();
        self.record_values(conversation_id, statement_id, turn, values)
            .await
    }

    async fn record_values(
        &self,
        conversation_id: &str,
        statement_id: &str,
        turn: u32,
        values: Vec<serde_json::Value>,
    ) -> Result<(), AgentError> {
        let rows = values
            .into_iter()
            .map(|content| NewLlmMessage {
                conversation_id: conversation_id.to_owned(),
                statement_id: Some(statement_id.to_owned()),
                turn,
                role: content
                    .get("role")
                    .and_then(|r| r.as_str())
                    .unwrap_or("unknown")
                    .to_owned(),
                content,
            })
            .collect();
        self.store.append_messages(rows).await?;
        Ok(())
    }
}

/// A call that ran (or was refused), before it is recorded.
#[derive(Debug, Clone)]
struct Finished {
    call: ToolCall,
    output: ToolOutput,
    decision: Option<String>,
    started_at: SystemTime,
    duration: Duration,
    /// Its start's record, ended once the call's own record is written.
    start: Option<String>,
}

/// The text of the statement in progress, for tools that keep traces.
fn text_trigger(transcript: &Transcript) -> Option<String> {
    transcript
        .statements
        .last()
        .map(|s| crate::history::user_text(&s.user))
}

/// The estimate as the model's own tokenizer would count it: calibrated
/// when the model has a calibration, else the count itself.
fn calibrated_total(estimate: &TokenEstimate, calibration: Option<Calibration>) -> u64 {
    calibration.map_or(estimate.total, |c| c.apply(estimate.total))
}

fn over_threshold(
    estimate: &TokenEstimate,
    calibration: Option<Calibration>,
    threshold: f64,
) -> bool {
    estimate.context_window > 0
        && calibrated_total(estimate, calibration) as f64
            > threshold * estimate.context_window as f64
}

/// Tokens (as Satchel counts them) the coming tool results may take before
/// the next request passes the threshold.
fn room_for_results(
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
fn fit_results(
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
                    let kept: String = text.chars().take(keep_chars).collect();
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
                    output.results = ToolResults::Text(kept + &note);
                }
            }
            output
        })
        .collect();
    (outputs, notices)
}

/// Native tool-result messages, the feedback block before the first.
fn native_results(records: &[CallRecord], outputs: &[ToolOutput], feedback: &str) -> Vec<Message> {
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
fn prompted_results(
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

/// Reads a prompted-mode reply: the prose as the assistant's text, each
/// call (or the reason it cannot run) as a planned call.
/// Reads a prompted-mode reply into what it says and the calls it asks
/// for; `cut_at_limit` when the server stopped it at the answer limit,
/// which is then why an unreadable call object is unreadable.
fn prompted_turn(raw: &str, turn: u32, cut_at_limit: bool) -> (Vec<AssistantPart>, Vec<Planned>) {
    let reply = parse_reply(raw);
    let mut parts = Vec::new();
    if !reply.message.trim().is_empty() {
        parts.push(AssistantPart::Text {
            text: reply.message.clone(),
        });
    }
    let id = |index: usize| format!("prompted_{turn}_{index}");
    let planned: Vec<Planned> = match &reply.outcome {
        ReplyOutcome::Final => Vec::new(),
        ReplyOutcome::Calls(calls) => calls
            .iter()
            .enumerate()
            .map(|(index, call)| match call.to_tool_call(id(index)) {
                Ok(call) => Planned { call, preset: None },
                Err(output) => Planned {
                    call: ToolCall {
                        id: id(index),
                        name: call.tool().unwrap_or("(invalid call)").to_owned(),
                        input: serde_json::Value::Null,
                    },
                    preset: Some(output),
                },
            })
            .collect(),
        ReplyOutcome::Invalid(error) => vec![Planned {
            call: ToolCall {
                id: id(0),
                name: "(unreadable reply)".into(),
                input: serde_json::Value::Null,
            },
            preset: Some(if cut_at_limit {
                ToolOutput::error(
                    ErrorCode::InvalidParams,
                    "your reply was cut off at the answer's token limit before its JSON object \
                     closed, so no tool was run. Send a shorter reply: fewer calls, shorter \
                     strings.",
                )
            } else {
                error.to_output()
            }),
        }],
    };
    parts.extend(
        planned
            .iter()
            .map(|p| AssistantPart::ToolCall(p.call.clone())),
    );
    (parts, planned)
}

/// A call to run, or the output it gets without running (malformed).
#[derive(Debug, Clone)]
struct Planned {
    call: ToolCall,
    preset: Option<ToolOutput>,
}

impl Planned {
    fn native(assembled: &AssembledToolCall) -> Planned {
        Planned {
            call: ToolCall {
                id: assembled.id.clone(),
                name: assembled.name.clone(),
                input: assembled.input.clone(),
            },
            preset: assembled.invalid_params_output(),
        }
    }
}

/// Marks an answer that was cut off, where it stops in the history.
const CUT_OFF_MARK: &str = "\n[answer cut off before the model finished]";

/// Stands for an answer with neither text nor a tool call in the history.
const EMPTY_ANSWER_MARK: &str = "[no answer: the model returned neither text nor a tool call]";

/// What a side request is written from.
enum SideInput {
    /// Its own short prompt about this text (see [`side_messages`]).
    Standalone(String),
    /// The main request's messages and tools, then the task: the same
    /// prefix, which a server's prompt cache has just processed.
    Continuing(Arc<SidePrefix>),
}

/// The start of a main request that side requests continue.
struct SidePrefix {
    messages: Vec<Message>,
    tools: Vec<ToolSpec>,
}

/// The side requests a statement needs, each with its own material.
struct SidePlan(Vec<(SideKind, String)>);

impl SidePlan {
    /// Each as its own short request (beside the first turn).
    fn standalone(self) -> Vec<(SideKind, SideInput)> {
        self.0
            .into_iter()
            .map(|(kind, material)| (kind, SideInput::Standalone(material)))
            .collect()
    }

    /// Each as a continuation of `prefix` (after the first answer).
    fn continuing(self, prefix: SidePrefix) -> Vec<(SideKind, SideInput)> {
        let prefix = Arc::new(prefix);
        self.0
            .into_iter()
            .map(|(kind, _)| (kind, SideInput::Continuing(prefix.clone())))
            .collect()
    }
}

/// Starts the side requests of `plan` on their own task: all at once when
/// `parallel`, else one after another (a server with one slot would cut
/// one off to serve the next).
fn spawn_side_requests(
    plan: Vec<(SideKind, SideInput)>,
    provider: Arc<dyn Provider>,
    parallel: bool,
    cancel: &CancellationToken,
) -> JoinHandle<Vec<SideResult>> {
    let cancel = cancel.child_token();
    tokio::spawn(async move {
        let requests = plan
            .into_iter()
            .map(|(kind, input)| side_request(provider.clone(), kind, input, cancel.clone()));
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

/// True when `error` is a server refusing a request's `response_format`.
fn refuses_reply_schema(error: &LlmError) -> bool {
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

/// Whether side requests go out beside the first turn (see [`SideTiming`]).
fn side_in_parallel(config: &AgentConfig, model: &ModelConfig) -> bool {
    match config.side_request_timing {
        SideTiming::Parallel => true,
        SideTiming::Sequential => false,
        SideTiming::Auto => !model.is_private_endpoint(),
    }
}

/// Streams one answer, passing text and thinking to `sink`; each retry of
/// the request is told to `sink` and described in `retries`, for the log.
async fn stream_answer(
    provider: &dyn Provider,
    prepared: &PreparedRequest,
    stream_text: bool,
    cancel: &CancellationToken,
    sink: &dyn EventSink,
    retries: &mut Vec<String>,
) -> Result<Response, LlmError> {
    let mut events = provider.send(prepared, cancel.clone());
    while let Some(event) = events.next().await {
        match event? {
            StreamEvent::TextDelta(text) if stream_text => sink.emit(AgentEvent::TextDelta(text)),
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

/// Runs one side request and describes it for the usage table.
async fn side_request(
    provider: Arc<dyn Provider>,
    kind: SideKind,
    input: SideInput,
    cancel: CancellationToken,
) -> SideResult {
    let (messages, tools) = match input {
        SideInput::Standalone(material) => (side_messages(kind, &material), Vec::new()),
        SideInput::Continuing(prefix) => {
            let mut messages = prefix.messages.clone();
            messages.push(side_note(kind));
            (messages, prefix.tools.clone())
        }
    };
    let mut request = ChatRequest::new(&messages, &tools);
    request.max_output_tokens = Some(kind.max_output_tokens());
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
    let result = collect(provider.send(&prepared, cancel)).await;
    let call = llm_call_row(&provider, kind.as_str(), &estimate, started, &result);
    let text = match result {
        Ok(response) => clean_answer(kind, &response.text())
            .ok_or_else(|| "the model answered with no text".to_owned()),
        Err(error) => Err(error.to_string()),
    };
    SideResult { kind, text, call }
}

/// The usage row of one request.
fn llm_call_row(
    provider: &Arc<dyn Provider>,
    purpose: &str,
    estimate: &TokenEstimate,
    started: Instant,
    result: &Result<Response, LlmError>,
) -> NewLlmCall {
    let config = provider.config();
    let answered = match result {
        Ok(response) => Some(response),
        Err(error) => error.partial_response(),
    };
    let usage = answered.and_then(|r| r.usage);
    NewLlmCall {
        purpose: purpose.into(),
        provider: config.provider.display_name().into(),
        model: config.model.clone(),
        estimate_tokens: estimate.total,
        estimate_sections: serde_json::to_value(estimate.sections).unwrap_or_default(),
        context_window: estimate.context_window,
        input_tokens: usage.map(|u| u.input_tokens),
        output_tokens: usage.map(|u| u.output_tokens),
        cache_read_tokens: usage.map(|u| u.cache_read_tokens),
        cache_write_tokens: usage.map(|u| u.cache_write_tokens),
        stop_reason: answered.map(|r| stop_reason_name(&r.stop_reason)),
        error: result.as_ref().err().map(ToString::to_string),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ..NewLlmCall::default()
    }
}

/// A stop reason as stored and shown: its wire name (`end_turn`...).
fn stop_reason_name(reason: &StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reason:?}"))
}

fn add_usage(total: &mut Usage, usage: Usage) {
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    total.cache_read_tokens += usage.cache_read_tokens;
    total.cache_write_tokens += usage.cache_write_tokens;
}

fn timestamp(time: SystemTime) -> Timestamp {
    let millis = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp::from_millis(millis)
}

#[cfg(test)]
mod tests {
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
        assert!(
            cut.ends_with("The whole result is stored; the call id is big.]"),
            "{cut}"
        );
        assert_eq!(notices.len(), 1);
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
        let text = content[0].to_text();
        assert!(
            text.starts_with("FEEDBACK\n[\n{\"tool\":\"bash\""),
            "{text}"
        );
    }
}
