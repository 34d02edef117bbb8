//! The [`Tool`] trait and what a run gets: [`ToolContext`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::{ErrorCode, ToolOutput, ToolSpec};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::format::{self, Style};
use crate::{Registry, ToolsConfig};

/// Something the model can call.
///
/// Implementations get input that has already been validated against
/// `spec().input_schema`, and report failures as [`ToolError`]s; the
/// registry turns those into model-facing outputs at one place.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's self-description; must stay the same for the tool's life.
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool on validated input.
    ///
    /// # Caveats
    /// A run should watch `ctx.cancel` and return promptly once it fires;
    /// dropping the future must leave nothing running.
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// Whether this call may take long enough that a caller able to run it
    /// in the background (an MCP task) should: by default, when the spec
    /// says so (`longRunningHint`); tools whose duration depends on the
    /// input (a command's timeout, an action) decide per call.
    fn runs_long(&self, _input: &Value) -> bool {
        self.spec().annotations.long_running_hint == Some(true)
    }

    /// News the model should get with the next result of this caller's
    /// calls, whichever tool it called (a background process that ended),
    /// taken so it is told once; [`crate::dispatch`] adds it.
    fn take_notice(&self, _ctx: &ToolContext) -> Option<String> {
        None
    }

    /// Where the tool comes from (built in, a tools directory...).
    fn source(&self) -> ToolSource {
        ToolSource::Builtin
    }

    /// One line saying what the call does, for a person.
    fn format_use(&self, input: &Value, style: Style) -> String {
        format::generic_use(&self.spec().name, input, style)
    }

    /// The outcome of the call, for a person.
    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        format::generic_result(output, style)
    }
}

/// Where a tool comes from, for listings and precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    /// Compiled into Satchel.
    Builtin,
    /// An executable in a tools directory.
    External {
        /// Which directory level it was found at.
        level: ToolLevel,
        /// The executable.
        path: PathBuf,
    },
    /// Added at run time through [`LiveRegistry::set_extra_tools`](crate::LiveRegistry::set_extra_tools),
    /// e.g. a tool imported from an MCP server.
    Extra {
        /// The group the tools were registered under, e.g. `mcp`.
        group: String,
        /// Where within the group, for a person, e.g. `server everything`.
        origin: String,
    },
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolSource::Builtin => f.write_str("builtin"),
            ToolSource::External { level, path } => write!(f, "{level} ({})", path.display()),
            ToolSource::Extra { group, origin } => write!(f, "{group} ({origin})"),
        }
    }
}

/// The tools directories, highest precedence first: a project tool beats
/// a user tool of the same name, which beats a system tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToolLevel {
    /// `.agents/tools/` in the project.
    Project,
    /// `$XDG_CONFIG_HOME/satchel/tools/`.
    User,
    /// `$SATCHEL_LIBEXEC_DIR`.
    System,
}

impl fmt::Display for ToolLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolLevel::Project => "project",
            ToolLevel::User => "user",
            ToolLevel::System => "system",
        })
    }
}

/// What one run of a tool gets besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Fires when the call should stop (user interrupt, shutdown).
    pub cancel: CancellationToken,
    /// The conversation the call belongs to, when there is one.
    pub conversation_id: Option<String>,
    /// The caller's session when the call has no conversation (an MCP
    /// client that began with `initialize`): see [`ToolContext::owner`].
    pub session: Option<String>,
    /// The id of this call.
    pub call_id: String,
    /// Directory relative paths in the input are resolved against.
    pub working_dir: PathBuf,
    /// Configuration as of this call (it may change between calls).
    pub config: Arc<ToolsConfig>,
    /// Why the call was made, for tools that keep traces.
    pub trace: CallTrace,
    /// The registry snapshot the call runs in, when the caller has one:
    /// for tools that describe other tools' calls (the `conversation`
    /// tool reads their capabilities).
    pub registry: Option<Arc<Registry>>,
    /// How the call's processes are confined; [`crate::dispatch`] sets it
    /// from the policy's mode and the user's consent.
    pub confinement: crate::sandbox::Confinement,
    /// Where progress goes while the call runs, when the caller can show
    /// it (an MCP client that sent a progress token); tools that run a
    /// process report through [`ProgressTicker`](crate::progress::ProgressTicker).
    pub progress: Option<std::sync::Arc<dyn crate::progress::ProgressSink>>,
    /// Whose memories the call works on, when the conversation has its own
    /// (a Telegram user's); `None`: the configured `memory.namespace`.
    pub memory_namespace: Option<String>,
    /// The caller runs this call in the background and waits for its whole
    /// result (an MCP task): a tool that would otherwise hand back a job to
    /// poll (`code` generate) does the job within the call instead.
    pub background: bool,
    /// The paths this call may write beneath in `workspace` mode, when its
    /// caller has its own (an MCP client's roots); `None`: the project,
    /// the temporary directory and `exec.writable` (see
    /// [`crate::sandbox::writable_paths`]).
    pub writable_roots: Option<Arc<[PathBuf]>>,
}

/// What led to a call, as far as the caller knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallTrace {
    /// The memory session the call belongs to.
    pub session_id: Option<String>,
    /// The user message that started the statement.
    pub trigger_message: Option<String>,
    /// The model's reasoning for the call, when the provider gives it.
    pub reasoning: Option<String>,
}

impl ToolContext {
    /// Whose call this is, for state kept across calls (background
    /// processes, what the model last saw of each file): the conversation,
    /// else the caller's session; `None` for a call on its own.
    pub fn owner(&self) -> Option<&str> {
        self.conversation_id.as_deref().or(self.session.as_deref())
    }

    /// A context for a call made outside any conversation (CLI, tests).
    pub fn standalone(
        call_id: impl Into<String>,
        working_dir: PathBuf,
        config: Arc<ToolsConfig>,
    ) -> ToolContext {
        ToolContext {
            cancel: CancellationToken::new(),
            conversation_id: None,
            session: None,
            call_id: call_id.into(),
            working_dir,
            config,
            trace: CallTrace::default(),
            registry: None,
            confinement: crate::sandbox::Confinement::default(),
            progress: None,
            memory_namespace: None,
            background: false,
            writable_roots: None,
        }
    }
}

/// A failure a tool reports; becomes an `is_error` output with the same code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// Stable code the model can branch on.
    pub code: ErrorCode,
    /// What went wrong and what to do about it, for the model.
    pub message: String,
    /// Extra fields placed beside `error` and `error_code` in the results.
    pub details: Map<String, Value>,
}

impl ToolError {
    /// An error without details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// The model-facing output for this error.
    pub fn into_output(self) -> ToolOutput {
        ToolOutput::error_with(self.code, self.message, self.details)
    }
}
