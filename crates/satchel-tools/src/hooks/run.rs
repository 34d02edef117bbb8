//! [`run_hook`]: one hook, `sh -c COMMAND` with the event's JSON on stdin,
//! in its own process group, killed whole at its deadline. A project's
//! hook runs in the sandbox of the mode in force (the one `bash` gets,
//! secret-named variables kept out); the user's own hooks run as the user.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use satchel_exec::{ExecRequest, Exit, OutputConfig, RunnerConfig, SandboxSpec};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::reply::{HookReply, read_reply};
use super::{Hook, HookOrigin};

/// Bytes of a hook's stdout kept (its JSON answer) and of its stderr.
const OUTPUT_LIMIT: usize = 64 * 1024;

/// Where and how hooks run.
#[derive(Debug, Clone)]
pub struct RunSetting {
    /// The working directory (the project).
    pub cwd: PathBuf,
    /// The sandbox of the mode in force for project hooks; `None` when
    /// the mode runs commands unconfined (`trust`).
    pub sandbox: Option<SandboxSpec>,
    /// The runner's limits and redactor (the tools').
    pub runner: RunnerConfig,
}

/// One run of a hook, for the caller's record.
#[derive(Debug, Clone)]
pub struct HookRun {
    /// The hook.
    pub hook: Hook,
    /// When it started.
    pub started_at: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// Its exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// It was killed at its deadline.
    pub timed_out: bool,
    /// Whether it ran in the sandbox.
    pub sandboxed: bool,
    /// What it answered.
    pub reply: HookReply,
}

impl HookRun {
    /// Its exit in words: `exit 0`, `killed at its 2 s deadline`...
    pub fn status(&self) -> String {
        match (self.exit_code, self.timed_out) {
            (_, true) => format!(
                "killed at its {} s deadline",
                self.hook.timeout.as_secs_f64()
            ),
            (Some(code), false) => format!("exit {code}"),
            (None, false) => "did not run to an exit".to_owned(),
        }
    }
}

/// Runs `hook` with `input` on stdin. Never fails: a hook that cannot
/// start, times out or is killed is a run whose reply says so.
pub async fn run_hook(
    hook: &Hook,
    input: &Value,
    setting: &RunSetting,
    cancel: &CancellationToken,
) -> HookRun {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let sandbox = match hook.origin {
        HookOrigin::User => None,
        HookOrigin::Project => setting.sandbox.clone(),
    };
    let sandboxed = sandbox.is_some();
    let finish = |exit_code, timed_out, reply| HookRun {
        hook: hook.clone(),
        started_at,
        duration: clock.elapsed(),
        exit_code,
        timed_out,
        sandboxed,
        reply,
    };
    if sandboxed && let Err(why) = satchel_exec::sandbox::available() {
        let reply = read_reply(
            hook.event,
            None,
            "",
            "",
            Some(format!(
                "a project's hook runs only in the sandbox, and {why}"
            )),
            hook.block_on_failure,
        );
        return finish(None, false, reply);
    }
    let project = setting.cwd.as_os_str().to_owned();
    let request = ExecRequest {
        program: "sh".into(),
        args: vec!["-c".into(), hook.command.clone().into()],
        stdin: Some(input.to_string().into_bytes()),
        working_dir: setting.cwd.clone(),
        env: vec![
            (OsString::from("CLAUDE_PROJECT_DIR"), project.clone()),
            (OsString::from("SATCHEL_PROJECT_DIR"), project),
        ],
        clear_env: false,
        timeout: hook.timeout,
        sandbox,
    };
    let runner = RunnerConfig {
        stdout: OutputConfig {
            limit_bytes: OUTPUT_LIMIT,
        },
        stderr: OutputConfig {
            limit_bytes: OUTPUT_LIMIT,
        },
        kill_grace: Duration::from_millis(500),
        spill: satchel_exec::SpillConfig {
            dir: None,
            ..setting.runner.spill.clone()
        },
        ..setting.runner.clone()
    };
    match satchel_exec::run(&request, &runner, cancel).await {
        Err(error) => {
            let reply = read_reply(
                hook.event,
                None,
                "",
                "",
                Some(format!("it could not start: {error}")),
                hook.block_on_failure,
            );
            finish(None, false, reply)
        }
        Ok(outcome) => {
            let exit_code = match outcome.exit {
                Exit::Code(code) => Some(code),
                _ => None,
            };
            let failure = if outcome.timed_out {
                Some(format!(
                    "it ran past its {} s deadline and was killed with its process group",
                    hook.timeout.as_secs_f64()
                ))
            } else if exit_code.is_none() {
                Some(format!(
                    "it ended without an exit code ({:?})",
                    outcome.exit
                ))
            } else if exit_code == Some(127) {
                Some(format!(
                    "its command was not found: {}",
                    outcome.stderr.text.trim()
                ))
            } else {
                None
            };
            let reply = read_reply(
                hook.event,
                exit_code,
                &outcome.stdout.text,
                &outcome.stderr.text,
                failure,
                hook.block_on_failure,
            );
            finish(exit_code, outcome.timed_out, reply)
        }
    }
}
