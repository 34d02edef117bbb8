//! The agent loop: statements and turns, a history that fits the context
//! window, objectives and tool feedback, hot-reloaded configuration.
//!
//! [`Agent`] runs one conversation. Each [`Agent::statement`] is a loop of
//! turns; what the user sees (the conversation log) and what the model
//! gets (the history, see [`Transcript::history`]) are recorded
//! separately in the store. The front end (REPL, `satchel run`) follows a
//! statement through [`AgentEvent`]s.
//!
//! What does not live here: terminal rendering and consent prompts (the
//! CLI), wire formats and token counting (`satchel-llm`), the tools and
//! their policy (`satchel-tools`), SQL (`satchel-store`).

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod config;
mod events;
mod feedback;
pub mod history;
mod hot;
pub mod instructions;
mod resume;
pub mod schedule;
mod side;
pub mod summary;
pub mod telemetry;
pub mod tool_index;

pub use agent::{
    Agent, AgentDeps, AgentError, ContextReport, HookSetup, Outcome, StatementReport,
    record_hook_runs,
};
pub use config::{AgentConfig, DEFAULT_RECENT_TOOL_TURNS, DEFAULT_SYSTEM_PROMPT, SideTiming};
pub use events::{AgentEvent, EventSink, Silent};
pub use feedback::Feedback;
pub use history::{PROMPTED_REPLY_KEY, Phase, SUMMARY_ROLE, Shape, Transcript};
pub use hot::{ConfigureTools, HotConfig, ReloadListener, Snapshot, no_tool_sections};
pub use instructions::{Instructions, ProjectContext, PromptAdditions};
pub use resume::{Loaded, load_transcript};
pub use satchel_tools::usage::{Resources, ToolTally};
pub use schedule::waves;
pub use side::{SIDE_PREFIX, SideKind};
