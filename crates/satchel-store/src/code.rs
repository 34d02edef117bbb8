//! Records and repository of the `code` tool: traces of executions and
//! background generation jobs.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{StoreError, Timestamp};

/// What a caller gives to record one execution.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewCodeExecution {
    /// `javascript`, `typescript`, `python`, `bash`.
    pub language: String,
    /// The runtime that ran it (`bun`, `node`, `python3`...).
    pub runtime: String,
    /// The program.
    pub code: String,
    /// What it printed (as kept within limits).
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// Its exit code (128 + N for signal N); `None` when unknown.
    pub exit_code: Option<i32>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// True when it exited 0 within its time limit.
    pub success: bool,
    /// `syntax`, `import`, `type`, `reference`, `timeout`, `network`,
    /// `runtime` or `unknown`; `None` on success.
    pub error_category: Option<String>,
    /// The line of stderr that names the error.
    pub error_message: Option<String>,
    /// What sandbox was enforced, in words.
    pub sandbox: String,
    /// The conversation, when there is one.
    pub conversation_id: Option<String>,
    /// The memory session, when there is one.
    pub session_id: Option<String>,
    /// The tool call that ran it.
    pub tool_call_id: Option<String>,
    /// The user message that led to it.
    pub trigger_message: Option<String>,
    /// The model's reasoning, when the provider gives it.
    pub reasoning: Option<String>,
}

/// One stored execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeExecution {
    /// Store-assigned id.
    pub id: String,
    /// The language.
    pub language: String,
    /// The runtime.
    pub runtime: String,
    /// The program.
    pub code: String,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Whether it succeeded.
    pub success: bool,
    /// The error category, on failure.
    pub error_category: Option<String>,
    /// The error line, on failure.
    pub error_message: Option<String>,
    /// The sandbox, in words.
    pub sandbox: String,
    /// The conversation.
    pub conversation_id: Option<String>,
    /// The session.
    pub session_id: Option<String>,
    /// The tool call.
    pub tool_call_id: Option<String>,
    /// The triggering user message.
    pub trigger_message: Option<String>,
    /// The model's reasoning.
    pub reasoning: Option<String>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// Which executions to list; the default lists all, newest last.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CodeQuery {
    /// Only executions recorded at or after this time.
    pub since: Option<Timestamp>,
    /// Only failures.
    pub failed_only: bool,
    /// At most this many of the newest.
    pub limit: Option<usize>,
}

/// Where a generation job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Waiting to start.
    Queued,
    /// Running.
    Running,
    /// Finished with a result.
    Done,
    /// Finished with an error.
    Failed,
}

impl JobStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<JobStatus> {
        [
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Done,
            JobStatus::Failed,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// What a caller gives to create a generation job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewCodeJob {
    /// What to write.
    pub task: String,
    /// Background the generator should know.
    pub context: Option<String>,
    /// The language asked for, if any.
    pub language: Option<String>,
    /// Which generator runs it (`model`, or the command line).
    pub generator: String,
    /// The conversation, when there is one.
    pub conversation_id: Option<String>,
    /// The process running it (`pid@start-time`), so that another process
    /// can tell a job whose runner died from one still running.
    pub runner: String,
}

/// One generation job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeJob {
    /// Store-assigned id.
    pub id: String,
    /// What to write.
    pub task: String,
    /// Background for the generator.
    pub context: Option<String>,
    /// The language asked for.
    pub language: Option<String>,
    /// The generator.
    pub generator: String,
    /// Where it stands.
    pub status: JobStatus,
    /// The generated code (or the generator's answer) when done.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The conversation.
    pub conversation_id: Option<String>,
    /// The process running it.
    pub runner: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it started running.
    pub started_at: Option<Timestamp>,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
}

/// Executions and generation jobs of the `code` tool.
#[async_trait]
pub trait CodeStore: Send + Sync {
    /// Records one execution; returns its id.
    async fn record_execution(&self, new: NewCodeExecution) -> Result<String, StoreError>;
    /// Lists executions, oldest first.
    async fn code_executions(&self, query: CodeQuery) -> Result<Vec<CodeExecution>, StoreError>;
    /// Creates a queued job.
    async fn create_job(&self, new: NewCodeJob) -> Result<CodeJob, StoreError>;
    /// Moves a job to `status`, with its result or error; returns the job.
    async fn update_job(
        &self,
        id: &str,
        status: JobStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<Option<CodeJob>, StoreError>;
    /// One job by id.
    async fn job(&self, id: &str) -> Result<Option<CodeJob>, StoreError>;
    /// Jobs still queued or running, oldest first.
    async fn unfinished_jobs(&self) -> Result<Vec<CodeJob>, StoreError>;
}
