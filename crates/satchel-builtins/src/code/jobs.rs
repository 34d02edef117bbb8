//! Background code generation: a job is created, a generator writes the
//! code while the call returns, and `status` reports how it went.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use satchel_exec::{ExecRequest, OutputConfig, RunnerConfig};
use satchel_store::{CodeJob, CodeStore, JobStatus};
use tokio_util::sync::CancellationToken;

use super::runtime::Language;

/// What a generator is asked to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateRequest {
    /// The task, as the model put it.
    pub task: String,
    /// Background: files, constraints, earlier attempts.
    pub context: Option<String>,
    /// The language wanted, if any.
    pub language: Option<Language>,
}

impl GenerateRequest {
    /// The request as one prompt for a coding model or agent.
    pub fn prompt(&self) -> String {
        let language = self
            .language
            .map_or_else(String::new, |l| format!(" in {l}"));
        let mut prompt = format!("Write code{language} for this task:\n{}\n", self.task);
        if let Some(context) = self.context.as_deref().filter(|c| !c.trim().is_empty()) {
            prompt.push_str(&format!("\nContext:\n{context}\n"));
        }
        prompt.push_str("\nAnswer with the complete code, then a one-line note on how to run it.");
        prompt
    }
}

/// Something that writes code for a task: the configured model (in a side
/// conversation) or an external coding agent's command line.
#[async_trait]
pub trait CodeGenerator: Send + Sync {
    /// How jobs record it (`model`, `opencode run`...).
    fn name(&self) -> String;
    /// Writes the code; the error says what went wrong.
    async fn generate(
        &self,
        request: &GenerateRequest,
        cancel: &CancellationToken,
    ) -> Result<String, String>;
}

/// An external coding agent run as a command: `{prompt}` in an argument is
/// replaced by the prompt; without it, the prompt goes on stdin. Its
/// stdout is the result.
pub struct CommandGenerator {
    /// The command line.
    pub argv: Vec<String>,
    /// How long it may take.
    pub timeout: Duration,
    /// Where it runs.
    pub working_dir: PathBuf,
    /// Limits for its output.
    pub runner: RunnerConfig,
}

/// Bytes of a generator's output kept as the job's result.
const MAX_RESULT_BYTES: usize = 256 * 1024;

#[async_trait]
impl CodeGenerator for CommandGenerator {
    fn name(&self) -> String {
        self.argv
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    async fn generate(
        &self,
        request: &GenerateRequest,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err("code.generator.command is empty".into());
        };
        let prompt = request.prompt();
        let substituted = args.iter().any(|a| a.contains("{prompt}"));
        let mut exec = ExecRequest::new(
            program,
            args.iter().map(|a| a.replace("{prompt}", &prompt)),
            self.working_dir.clone(),
            self.timeout,
        );
        if !substituted {
            exec.stdin = Some(prompt.into_bytes());
        }
        let runner = RunnerConfig {
            stdout: OutputConfig {
                limit_bytes: MAX_RESULT_BYTES,
            },
            strip_ansi: true,
            ..self.runner.clone()
        };
        let outcome = satchel_exec::run(&exec, &runner, cancel)
            .await
            .map_err(|e| e.to_string())?;
        if outcome.timed_out {
            return Err(format!(
                "the generator did not finish within {} s",
                self.timeout.as_secs()
            ));
        }
        if outcome.cancelled {
            return Err("the job was cancelled".into());
        }
        match outcome.exit.shell_code() {
            Some(0) if !outcome.stdout.text.trim().is_empty() => Ok(outcome.stdout.text),
            Some(0) => Err(format!(
                "the generator printed nothing; stderr: {}",
                outcome.stderr.text.trim()
            )),
            code => Err(format!(
                "the generator exited with status {}; stderr: {}",
                code.map_or_else(|| "unknown".into(), |c| c.to_string()),
                outcome.stderr.text.trim()
            )),
        }
    }
}

/// This process as a job runner: `pid@start-time`, unique across restarts.
pub fn this_runner() -> String {
    let pid = std::process::id();
    format!("{pid}@{}", process_start(pid).unwrap_or(0))
}

/// The start time (clock ticks since boot) of process `pid`, from `/proc`.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; start time is field 22.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// True when the runner that owns a job is still alive.
pub fn runner_alive(runner: &str) -> bool {
    let Some((pid, start)) = runner.split_once('@') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    process_start(pid) == Some(start)
}

/// How often a caller waiting for a job hears of its state.
pub(super) const FOLLOW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs `job` with `generator` in the background, recording its progress.
pub(super) fn spawn_job(
    store: Arc<dyn CodeStore>,
    generator: Arc<dyn CodeGenerator>,
    job: CodeJob,
    request: GenerateRequest,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(error) = store
            .update_job(&job.id, JobStatus::Running, None, None)
            .await
        {
            tracing::warn!(job = %job.id, %error, "cannot mark the job running");
        }
        let (status, result, error) = match generator.generate(&request, &cancel).await {
            Ok(code) => (JobStatus::Done, Some(code), None),
            Err(reason) => (JobStatus::Failed, None, Some(reason)),
        };
        if let Err(store_error) = store.update_job(&job.id, status, result, error).await {
            tracing::warn!(job = %job.id, %store_error, "cannot record the job's outcome");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(runner_alive(&this_runner()));
        assert!(!runner_alive("1@1"));
        assert!(!runner_alive("garbage"));
    }

    #[test]
    fn prompt_carries_task_language_and_context() {
        let request = GenerateRequest {
            task: "parse a CSV".into(),
            context: Some("the file has a header".into()),
            language: Some(Language::Python),
        };
        let prompt = request.prompt();
        assert!(prompt.starts_with("Write code in python for this task:\nparse a CSV\n"));
        assert!(prompt.contains("Context:\nthe file has a header"));
    }
}
