//! The `code` tool: run a small program given as a string, keep a trace of
//! every run, and generate code as background jobs.
//!
//! The program goes to its runtime on stdin (nothing is written to disk,
//! nothing is `eval`ed by Satchel), in an empty temporary directory that is
//! removed afterwards, with a reduced environment, through the process
//! runner's limits and, where the kernel allows, a Landlock sandbox.
//!
//! Modules: `runtime` (which program runs which language), `categorize`
//! (error categories from stderr), `config` (the `code` section), `jobs`
//! (generators and background jobs), `stats` (summaries of the traces).

mod categorize;
mod config;
mod jobs;
mod runtime;
mod stats;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use satchel_exec::{ExecError, ExecRequest, SandboxReport, SandboxSpec};
use satchel_store::{CodeStore, JobStatus, NewCodeExecution, NewCodeJob};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use self::categorize::{Category, categorize};
pub use self::config::{CodeConfig, GeneratorConfig};
pub use self::jobs::{CodeGenerator, CommandGenerator, GenerateRequest, runner_alive, this_runner};
pub use self::runtime::{Language, Runtime, RuntimeKind, resolve};
pub use self::stats::{CodeStats, FailureSummary, code_stats};
use crate::memory::MemoryHandle;
use satchel_tools::format::{Style, markdown_fence, paint, truncate_chars};
use satchel_tools::{Tool, ToolContext, ToolError};

/// Time limit of a run when the call gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// Where the tool finds its store, opened on first use (so a command that
/// never runs code never creates a database).
#[async_trait]
pub trait CodeStoreHandle: Send + Sync {
    /// The store, or why there is none.
    async fn code_store(&self) -> Result<Arc<dyn CodeStore>, String>;
}

/// A store that is already open.
pub struct OpenCodeStore(pub Arc<dyn CodeStore>);

#[async_trait]
impl CodeStoreHandle for OpenCodeStore {
    async fn code_store(&self) -> Result<Arc<dyn CodeStore>, String> {
        Ok(self.0.clone())
    }
}

/// The generation jobs running in this process, so that a short-lived
/// process (a one-shot CLI call) can wait for them before it exits.
#[derive(Debug, Clone, Default)]
pub struct JobTracker {
    running: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl JobTracker {
    fn track(&self, handle: tokio::task::JoinHandle<()>) {
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        running.retain(|h| !h.is_finished());
        running.push(handle);
    }

    /// Number of jobs still running.
    pub fn running(&self) -> usize {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        running.iter().filter(|h| !h.is_finished()).count()
    }

    /// Waits until every job started so far has finished.
    pub async fn wait_all(&self) {
        let handles: Vec<_> = std::mem::take(
            &mut *self
                .running
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for handle in handles {
            let _ = handle.await;
        }
    }
}

/// The tool; see the module docs.
pub struct CodeTool {
    spec: ToolSpec,
    store: Option<Arc<dyn CodeStoreHandle>>,
    model_generator: Option<Arc<dyn CodeGenerator>>,
    jobs: JobTracker,
    memory: Option<Arc<dyn MemoryHandle>>,
}

impl CodeTool {
    /// The tool, tracing into `store` (runs are not traced without one) and
    /// generating with `model_generator` when the config says `model`.
    pub fn new(
        store: Option<Arc<dyn CodeStoreHandle>>,
        model_generator: Option<Arc<dyn CodeGenerator>>,
    ) -> CodeTool {
        CodeTool::with_jobs(store, model_generator, JobTracker::default())
    }

    /// Like [`CodeTool::new`], reporting its jobs to `jobs`.
    pub fn with_jobs(
        store: Option<Arc<dyn CodeStoreHandle>>,
        model_generator: Option<Arc<dyn CodeGenerator>>,
        jobs: JobTracker,
    ) -> CodeTool {
        CodeTool {
            spec: spec(),
            store,
            model_generator,
            jobs,
            memory: None,
        }
    }

    /// Traces runs under the caller's memory session, as `memory` knows
    /// it, when the caller does not say which (see [`CallTrace`]).
    ///
    /// [`CallTrace`]: satchel_tools::CallTrace
    pub fn with_memory(mut self, memory: Option<Arc<dyn MemoryHandle>>) -> CodeTool {
        self.memory = memory;
        self
    }

    /// The memory session a run belongs to: the caller's, else the open
    /// one of its conversation (started if none is). `None` without a
    /// memory, or when it cannot say; the run is traced either way.
    async fn session_id(&self, ctx: &ToolContext) -> Option<String> {
        if let Some(id) = &ctx.trace.session_id {
            return Some(id.clone());
        }
        let memory = self
            .memory
            .as_ref()?
            .memory_in(ctx.memory_namespace.as_deref())
            .await
            .ok()?;
        match memory.current_session(ctx.conversation_id.as_deref()).await {
            Ok(session) => Some(session.id),
            Err(error) => {
                tracing::debug!(%error, "no memory session for the code trace");
                None
            }
        }
    }

    async fn store(&self) -> Result<Arc<dyn CodeStore>, String> {
        match &self.store {
            Some(handle) => handle.code_store().await,
            None => Err("no database is configured".into()),
        }
    }

    async fn execute(&self, input: CodeInput, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let config = crate::code_config(&ctx.config);
        let (Some(code), Some(language)) = (input.code, input.language) else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                "execute needs `code` and `language`",
            ));
        };
        let runtime = resolve(
            language,
            config.js_runtime,
            &config.runtimes,
            &config.search_path,
        )
        .map_err(|reason| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("{reason}; choose another language"),
            )
        })?;
        let timeout = Duration::from_millis(input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))
            .min(config.max_timeout);
        let workdir = tempfile::Builder::new()
            .prefix("satchel-code-")
            .tempdir()
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::ToolCrashed,
                    format!("cannot create a temporary directory: {e}"),
                )
            })?;
        let dir = workdir.path().to_path_buf();
        let mut request = ExecRequest::new(
            &runtime.program,
            runtime.kind.stdin_args(language),
            &dir,
            timeout,
        );
        request.stdin = Some(code.clone().into_bytes());
        request.clear_env = true;
        request.env = config
            .env
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        for (name, value) in [("HOME", &dir), ("TMPDIR", &dir)] {
            request
                .env
                .push((name.into(), value.clone().into_os_string()));
        }
        request
            .env
            .push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        request
            .env
            .push(("DENO_DIR".into(), dir.join(".deno").into_os_string()));
        request.sandbox = ctx.confinement.is_sandboxed().then(|| SandboxSpec {
            private_tmp: Some(dir.clone()),
            network: config.network,
            ..SandboxSpec::new(vec![dir.clone()])
        });

        let outcome = satchel_exec::run(&request, &ctx.config.runner, &ctx.cancel)
            .await
            .map_err(|e| match e {
                ExecError::SandboxUnavailable { reason } => ToolError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "{} was not run: {reason}. Set `permissions.mode` to `trust` \
                         only if you accept running it unsandboxed.",
                        runtime.kind.program_name()
                    ),
                ),
                e => ToolError::new(
                    ErrorCode::ToolCrashed,
                    format!("{} could not run: {e}", runtime.kind.program_name()),
                ),
            })?;
        if let Err(error) = workdir.close() {
            tracing::debug!(%error, "temporary directory not fully removed");
        }

        let exit_code = outcome.exit.shell_code();
        let success = exit_code == Some(0) && !outcome.timed_out && !outcome.cancelled;
        let (category, message) = if success {
            (None, None)
        } else {
            let (category, line) = categorize(language, &outcome.stderr.text, outcome.timed_out);
            let message = match category {
                Category::Timeout => Some(format!(
                    "the program did not finish within {} ms",
                    timeout.as_millis()
                )),
                _ => line.or_else(|| exit_code.map(|c| format!("exited with status {c}"))),
            };
            (Some(category), message)
        };
        let sandbox = describe_sandbox(&outcome.sandbox);
        let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);

        let trace = NewCodeExecution {
            language: language.as_str().into(),
            runtime: runtime.kind.program_name().into(),
            code,
            stdout: outcome.stdout.text.clone(),
            stderr: outcome.stderr.text.clone(),
            exit_code,
            duration_ms,
            success,
            error_category: category.map(|c| c.as_str().to_owned()),
            error_message: message.clone(),
            sandbox: sandbox.clone(),
            conversation_id: ctx.conversation_id.clone(),
            session_id: self.session_id(ctx).await,
            tool_call_id: Some(ctx.call_id.clone()),
            trigger_message: ctx.trace.trigger_message.clone(),
            reasoning: ctx.trace.reasoning.clone(),
        };
        let (execution_id, trace_note) = match self.store().await {
            Ok(store) => match store.record_execution(trace).await {
                Ok(id) => (Some(id), None),
                Err(error) => (None, Some(format!("This run was not traced: {error}."))),
            },
            Err(reason) => (None, Some(format!("This run was not traced: {reason}."))),
        };

        let results = json!({
            "success": success,
            "result": {
                "stdout": outcome.stdout.text,
                "stderr": outcome.stderr.text,
                "exit_code": exit_code,
                "duration_ms": duration_ms,
                "execution_id": execution_id,
                "runtime": runtime.kind.program_name(),
                "sandbox": sandbox,
                "truncated": outcome.stdout.truncated() || outcome.stderr.truncated(),
                "timed_out": outcome.timed_out,
            },
            "error": message,
            "error_category": category.map(Category::as_str),
            "job_id": null,
        });
        let verdict = match (success, category) {
            (true, _) => "ok".to_owned(),
            (false, Some(category)) => format!("{category} error"),
            (false, None) => "failed".to_owned(),
        };
        let user_message = format!(
            "ran {language} with {} in {duration_ms} ms: {verdict}",
            runtime.kind.program_name()
        );
        let mut output = ToolOutput::success(ToolResults::json(results), user_message);
        if outcome.timed_out {
            output.is_error = true;
            output.error_code = Some(ErrorCode::ToolTimeout);
        } else if outcome.cancelled {
            output.is_error = true;
            output.error_code = Some(ErrorCode::Cancelled);
        }
        output.response = trace_note;
        Ok(output)
    }

    async fn generate(&self, input: CodeInput, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(task) = input.task.filter(|t| !t.trim().is_empty()) else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                "generate needs a `task`",
            ));
        };
        let generator: Arc<dyn CodeGenerator> = match &crate::code_config(&ctx.config).generator {
            None => {
                return Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    "no code generator is configured: set \"code\": {\"generator\": \"model\"} or \
                     {\"generator\": {\"command\": [\"opencode\", \"run\", \"{prompt}\"]}} in .agents/agent.json",
                ));
            }
            Some(GeneratorConfig::Model) => self.model_generator.clone().ok_or_else(|| {
                ToolError::new(
                    ErrorCode::InvalidParams,
                    "code.generator is \"model\" but no model is configured",
                )
            })?,
            Some(GeneratorConfig::Command { argv, timeout }) => Arc::new(CommandGenerator {
                argv: argv.clone(),
                timeout: *timeout,
                working_dir: ctx.working_dir.clone(),
                runner: ctx.config.runner.clone(),
            }),
        };
        let store = self.store().await.map_err(|reason| {
            ToolError::new(
                ErrorCode::ToolUnavailable,
                format!("jobs need the database: {reason}"),
            )
        })?;
        let request = GenerateRequest {
            task: task.clone(),
            context: input.context.clone(),
            language: input.language,
        };
        let job = store
            .create_job(NewCodeJob {
                task,
                context: input.context,
                language: input.language.map(|l| l.as_str().to_owned()),
                generator: generator.name(),
                conversation_id: ctx.conversation_id.clone(),
                runner: this_runner(),
            })
            .await
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::ToolCrashed,
                    format!("cannot create the job: {e}"),
                )
            })?;
        let job_id = job.id.clone();
        // A background caller (an MCP task) waits here, and its cancellation
        // stops the job; anyone else polls, and the job outlives the call.
        let cancel = if ctx.background {
            ctx.cancel.child_token()
        } else {
            CancellationToken::new()
        };
        let handle = jobs::spawn_job(
            store.clone(),
            generator.clone(),
            job,
            request,
            cancel.clone(),
        );
        if ctx.background {
            // Dropping the call (a task given up) stops the job with it.
            let _stop_with_the_call = cancel.drop_guard();
            return self.follow_job(&job_id, handle, store, ctx).await;
        }
        self.jobs.track(handle);
        let results = json!({"success": true, "result": {"status": "queued", "generator": generator.name()}, "error": null, "job_id": job_id});
        Ok(ToolOutput::success(ToolResults::json(results), format!("started code generation job {job_id} ({})", generator.name()))
            .with_response("The job runs in the background; call code with action \"status\" and this job_id to get the code."))
    }

    /// Waits for the job a background call started, telling the caller its
    /// state every second, and answers as `status` would once it ends.
    async fn follow_job(
        &self,
        job_id: &str,
        mut handle: tokio::task::JoinHandle<()>,
        store: Arc<dyn CodeStore>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let started = std::time::Instant::now();
        let mut ticks = tokio::time::interval(jobs::FOLLOW_INTERVAL);
        loop {
            tokio::select! {
                _ = &mut handle => break,
                _ = ticks.tick() => {
                    if let Some(progress) = &ctx.progress {
                        let state = match store.job(job_id).await {
                            Ok(Some(job)) => job.status.as_str().to_owned(),
                            Ok(None) | Err(_) => "unknown".to_owned(),
                        };
                        let elapsed = started.elapsed().as_secs_f64();
                        progress.report(satchel_tools::progress::ProgressUpdate {
                            progress: elapsed,
                            total: None,
                            message: format!("job {job_id}: {state}, {elapsed:.0} s"),
                        });
                    }
                }
            }
        }
        let mut output = self
            .status(CodeInput {
                action: "status".into(),
                code: None,
                language: None,
                timeout_ms: None,
                task: None,
                context: None,
                job_id: Some(job_id.to_owned()),
            })
            .await?;
        if ctx.cancel.is_cancelled() {
            output = ToolOutput::error(
                ErrorCode::Cancelled,
                format!("code generation job {job_id} was cancelled before it finished"),
            );
        }
        Ok(output)
    }

    async fn status(&self, input: CodeInput) -> Result<ToolOutput, ToolError> {
        let Some(job_id) = input.job_id else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                "status needs a `job_id`",
            ));
        };
        let store = self.store().await.map_err(|reason| {
            ToolError::new(
                ErrorCode::ToolUnavailable,
                format!("jobs need the database: {reason}"),
            )
        })?;
        let read = |e: satchel_store::StoreError| {
            ToolError::new(ErrorCode::ToolCrashed, format!("cannot read the job: {e}"))
        };
        let Some(mut job) = store.job(&job_id).await.map_err(read)? else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("no code generation job `{job_id}`"),
            ));
        };
        let unfinished = matches!(job.status, JobStatus::Queued | JobStatus::Running);
        if unfinished && !runner_alive(&job.runner) {
            let pid = job.runner.split('@').next().unwrap_or("?").to_owned();
            let reason =
                format!("the Satchel process that ran it (pid {pid}) exited before it finished");
            if let Some(updated) = store
                .update_job(&job.id, JobStatus::Failed, None, Some(reason))
                .await
                .map_err(read)?
            {
                job = updated;
            }
        }
        let results = json!({
            "success": job.status != JobStatus::Failed,
            "result": {
                "status": job.status,
                "code": job.result,
                "task": job.task,
                "generator": job.generator,
                "created_at": job.created_at.to_string(),
                "started_at": job.started_at.map(|t| t.to_string()),
                "finished_at": job.finished_at.map(|t| t.to_string()),
            },
            "error": job.error,
            "job_id": job.id,
        });
        Ok(ToolOutput::success(
            ToolResults::json(results),
            format!("job {job_id}: {}", job.status.as_str()),
        ))
    }
}

/// The sandbox in words, for the model and the trace.
fn describe_sandbox(report: &SandboxReport) -> String {
    match report {
        SandboxReport::Enforced { .. } => report.describe(),
        SandboxReport::NotRequested => "none (the mode is `trust`)".into(),
    }
}

#[derive(Deserialize)]
struct CodeInput {
    action: String,
    code: Option<String>,
    language: Option<Language>,
    timeout_ms: Option<u64>,
    task: Option<String>,
    context: Option<String>,
    job_id: Option<String>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "code".into(),
        title: Some("Code".into()),
        description: "Run a short program and get its output (\"execute\": code, language), or have code \
                      written in the background (\"generate\": task, context; returns a job_id for \"status\", \
                      or the code itself to a caller that runs the call in the background, such as an MCP \
                      task). Runs sandboxed in an empty temporary directory."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["execute", "generate", "status"]},
                "code": {"type": "string", "minLength": 1, "description": "The program (execute)"},
                "language": {"type": "string", "enum": ["javascript", "typescript", "python", "bash"]},
                "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 600000, "default": DEFAULT_TIMEOUT_MS},
                "task": {"type": "string", "description": "What the code should do (generate)"},
                "context": {"type": "string", "description": "Background for the generator (generate)"},
                "job_id": {"type": "string", "description": "The job to report on (status)"}
            },
            "required": ["action"],
            "additionalProperties": false,
            // Per action, as an if/else chain: no combinator at the root,
            // which the Anthropic API and Claude Code refuse.
            "if": {"properties": {"action": {"const": "execute"}}},
            "then": {"required": ["code", "language"]},
            "else": {
                "if": {"properties": {"action": {"const": "generate"}}},
                "then": {"required": ["task"]},
                "else": {
                    "if": {"properties": {"action": {"const": "status"}}},
                    "then": {"required": ["job_id"]}
                }
            }
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "success": {"type": "boolean"},
                "result": {"type": ["object", "null"]},
                "error": {"type": ["string", "null"]},
                "job_id": {"type": ["string", "null"]}
            },
            "required": ["success", "result", "error", "job_id"]
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(false),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities { reads: vec![Resource::FILES], writes: vec![Resource::EXECUTION] },
    }
}

#[async_trait]
impl Tool for CodeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Generating code takes minutes; a background caller gets the code
    /// itself rather than a job id.
    fn runs_long(&self, input: &Value) -> bool {
        input.get("action").and_then(Value::as_str) == Some("generate")
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: CodeInput = serde_json::from_value(input).map_err(|error| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("invalid code input: {error}"),
            )
        })?;
        match input.action.as_str() {
            "execute" => self.execute(input, ctx).await,
            "generate" => self.generate(input, ctx).await,
            "status" => self.status(input).await,
            other => Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("unknown action `{other}`"),
            )),
        }
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        match (field("action"), style) {
            ("execute", Style::Terminal { .. }) => format!(
                "{} {}",
                paint(style, "2", field("language")),
                paint(style, "1", field("code"))
            ),
            ("execute", Style::Markdown) => markdown_fence(field("code"), field("language")),
            ("generate", _) => format!("generate code: {}", truncate_chars(field("task"), 120)),
            (_, _) => format!("code job {}", field("job_id")),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let Some(value) = output
            .results
            .structured()
            .filter(|v| v.get("success").is_some())
        else {
            return satchel_tools::format::generic_result(output, style);
        };
        let result = &value["result"];
        let text = |key: &str| {
            result
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end()
                .to_owned()
        };
        let mut parts = Vec::new();
        if let Some(code) = result.get("code").and_then(Value::as_str) {
            parts.push(match style {
                Style::Terminal { .. } => code.trim_end().to_owned(),
                Style::Markdown => markdown_fence(code, ""),
            });
        }
        for (key, colour) in [("stdout", "0"), ("stderr", "31")] {
            let body = text(key);
            if !body.is_empty() {
                parts.push(match style {
                    Style::Terminal { .. } => paint(style, colour, &body),
                    Style::Markdown => markdown_fence(&body, "text"),
                });
            }
        }
        let colour = if value["success"] == json!(true) {
            "2"
        } else {
            "33"
        };
        parts.push(paint(style, colour, &output.user_message));
        parts.join("\n")
    }
}
