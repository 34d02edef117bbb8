//! [`Agent`]: one conversation, run statement by statement. This file
//! holds the type, what it is built from ([`AgentDeps`]), how it is
//! started or resumed, what a statement reports, and the small accessors
//! front ends use; the statement loop and its parts are the child modules,
//! so that they can reach the agent's private state without it being
//! visible to the rest of the crate.
//!
//! A statement is a loop of turns (`turn.rs`): build the history, count it
//! on the exact request bytes (summarising old statements past the
//! threshold, `compaction.rs`), stream the model's answer (`model.rs`),
//! read it (`answer.rs`), run the tool calls it asked for in waves
//! (`tool_calls.rs`), record everything (`recording.rs`), and go on until
//! the model answers without tools or the turn budget is spent. Goal,
//! objective and title are written by side requests that run beside the
//! first turn (`side_requests.rs`). `context.rs` measures the next request
//! without sending it.

mod answer;
mod compaction;
mod context;
mod hooks;
mod model;
mod recording;
mod repetition;
mod side_requests;
mod streak;
mod tool_calls;
mod turn;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use satchel_llm::{LlmError, Provider, Tape, Usage};
use satchel_store::{AuditSource, LogKind, NewConversation, NewLogEntry, Store, StoreError};
use satchel_tools::hooks::{HookApprovals, HookSet};
use satchel_tools::{Consent, LiveRegistry, Style};

pub use self::context::ContextReport;
pub use self::hooks::record_hook_runs;
use crate::history::Transcript;
use crate::resume::load_transcript;
use crate::{AgentEvent, EventSink, HotConfig, Resources, Snapshot, ToolTally};

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
    /// Recorded on audit rows: `repl`, `run`, `telegram`...
    pub source: AuditSource,
    /// Recorded on audit rows beside the source: who is talking, when the
    /// source serves many people (`telegram:<user id>`).
    pub caller: Option<String>,
    /// Whose memories the `memory` tool works on in this conversation;
    /// `None`: the configured `memory.namespace`.
    pub memory_namespace: Option<String>,
    /// Where tools resolve relative paths.
    pub working_dir: PathBuf,
    /// How tool calls are formatted in events.
    pub display: Style,
    /// Where model traffic is recorded to or replayed from (`--record`,
    /// `--replay`); `None`: the network, unrecorded.
    pub model_tape: Option<Tape>,
    /// Hooks besides agent.json's, and the user's approvals.
    pub hooks: HookSetup,
    /// Project instructions and skills for the system prompt.
    pub context: crate::ProjectContext,
}

/// What the loop needs to run hooks besides agent.json's `hooks`.
#[derive(Debug, Clone, Default)]
pub struct HookSetup {
    /// The project's `.claude/settings.json` and `.codex/hooks.json`
    /// hooks (read by the host, from trusted projects only).
    pub project_files: HookSet,
    /// Which project hooks the user approved; an unapproved one is
    /// skipped and the user told.
    pub approvals: HookApprovals,
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
    /// Indexed tools loaded with `tool_search`: sent whole from now on.
    loaded_tools: std::collections::BTreeSet<String>,
}

/// The agent loop over one conversation.
pub struct Agent {
    store: Arc<dyn Store>,
    tools: Arc<LiveRegistry>,
    config: HotConfig,
    consent: Arc<dyn Consent>,
    source: AuditSource,
    caller: Option<String>,
    memory_namespace: Option<String>,
    working_dir: PathBuf,
    display: Style,
    model_tape: Option<Tape>,
    /// The `invoke_agent` span of the statement in progress (or the last).
    otel: opentelemetry::Context,
    hooks: HookSetup,
    context: crate::ProjectContext,
    /// Unapproved hooks the user was already told about.
    hooks_told: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// `SessionStart` has fired for this conversation.
    session_started: bool,
    /// How the conversation was opened, for `SessionStart`'s `source`.
    resumed: bool,
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
            caller: deps.caller,
            memory_namespace: deps.memory_namespace,
            working_dir: deps.working_dir,
            display: deps.display,
            model_tape: deps.model_tape,
            otel: opentelemetry::Context::new(),
            hooks: deps.hooks,
            context: deps.context,
            hooks_told: Default::default(),
            session_started: false,
            resumed: false,
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
        agent.resumed = true;
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
            resources: loaded.resources.in_project(&agent.working_dir),
            loaded_tools: Default::default(),
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
        self.session_started = false;
        self.resumed = false;
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
                resources: Resources::for_project(&self.working_dir),
                ..Conversation::default()
            });
        }
        Ok(self.conversation_mut())
    }
}
