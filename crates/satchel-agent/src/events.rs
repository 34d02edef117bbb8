//! What the loop tells its front end (REPL, `satchel run`, a web view) as a
//! statement runs: [`AgentEvent`]s, delivered to an [`EventSink`].

use std::time::Duration;

use satchel_llm::Usage;

use crate::SideKind;

/// One thing that happened while a statement ran.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A turn (one model call) starts.
    TurnStarted {
        /// 1-based turn.
        turn: u32,
        /// The statement's budget.
        max_turns: u32,
        /// Input tokens counted on the request sent.
        estimate_tokens: u64,
        /// The model's context window.
        context_window: u64,
    },
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ThinkingDelta(String),
    /// A tool call starts.
    ToolStarted {
        /// The model's id of the call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The call as the tool formats it for the front end's style.
        display: String,
    },
    /// A tool call finished.
    ToolFinished {
        /// The model's id of the call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The outcome as the tool formats it for the front end's style.
        display: String,
        /// True when the call failed.
        is_error: bool,
        /// How long it took, checks included.
        duration: Duration,
    },
    /// The statement's turns are over and its answer, if any, is whole:
    /// what may still come (side requests' goal, objective and title) is
    /// not part of it, so a front end can end the answer's line now
    /// rather than after them, and a front end that delivers whole
    /// answers (Telegram) can deliver it without waiting for them.
    AnswerComplete {
        /// How the statement ended: what `statement` will report.
        outcome: crate::Outcome,
    },
    /// A side request produced a goal, objective, title or summary.
    Side {
        /// Which.
        kind: SideKind,
        /// The text.
        text: String,
    },
    /// Something the user should know: a reloaded or broken config, a
    /// summarised history, a cut tool result, a spent turn budget.
    Notice(String),
    /// A turn ended.
    TurnFinished {
        /// 1-based turn.
        turn: u32,
        /// What the provider reported.
        usage: Option<Usage>,
    },
}

/// Receives events; must return quickly (it runs on the loop's task).
pub trait EventSink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: AgentEvent);
}

impl<F: Fn(AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AgentEvent) {
        self(event)
    }
}

/// A sink that drops every event.
pub struct Silent;

impl EventSink for Silent {
    fn emit(&self, _event: AgentEvent) {}
}
