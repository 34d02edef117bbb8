//! [`run`]: one child process from spawn to a bounded [`ExecOutcome`].

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::capture::Capture;
use crate::meter::OutputMeter;
use crate::sandbox::{self, SandboxReport, SandboxSpec};
use crate::started::Started;
use crate::{Captured, ExecError, ExecOutcome, Exit, RunnerConfig};

/// Variables added to the inherited environment so that nothing waits for
/// a person: no pager, no colour, no credential prompt.
const NON_INTERACTIVE_ENV: [(&str, &str); 5] = [
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Read buffer for each stream at first; most commands print little.
const SMALL_READ: usize = 16 * 1024;
/// Read buffer, and pipe size asked of the kernel, once a stream proves
/// loud (a read fills the small buffer): fewer wake-ups at high volume.
/// Growing lazily keeps the common quiet command from paying for it.
const LARGE_READ: usize = 1024 * 1024;
/// How long to wait for a SIGKILLed child to be reaped before giving up.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecRequest {
    /// The program, looked up in `PATH` when it has no slash.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Bytes written to its stdin, which is then closed; `None` gives it an
    /// empty stdin (`/dev/null`).
    pub stdin: Option<Vec<u8>>,
    /// Working directory; must exist.
    pub working_dir: PathBuf,
    /// Variables set on top of the inherited and non-interactive ones.
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment instead of inheriting Satchel's
    /// (the non-interactive variables and `env` are still set).
    pub clear_env: bool,
    /// Deadline, counted from spawn.
    pub timeout: Duration,
    /// Restrict what the child may write and reach.
    pub sandbox: Option<SandboxSpec>,
}

impl ExecRequest {
    /// A request for `program` with `args` in `working_dir`: inherited
    /// environment, empty stdin, no sandbox.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
        working_dir: impl Into<PathBuf>,
        timeout: Duration,
    ) -> ExecRequest {
        ExecRequest {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            stdin: None,
            working_dir: working_dir.into(),
            env: Vec::new(),
            clear_env: false,
            timeout,
            sandbox: None,
        }
    }
}

/// Runs `request` to completion, timeout or cancellation, and always
/// returns within about `timeout + kill_grace + drain_timeout`.
///
/// The child gets its own session (so it has no controlling terminal and
/// its whole process group can be signalled) and dies with the thread that
/// spawned it (`PR_SET_PDEATHSIG`). On timeout or cancellation the group
/// gets SIGTERM, then SIGKILL after `kill_grace`.
///
/// # Caveats
/// - Dropping the returned future kills the child's process group at once
///   (SIGKILL): nothing outlives an abandoned run.
/// - The parent-death signal fires when the spawning *thread* exits; call
///   this from a long-lived runtime worker, not a short-lived blocking
///   thread. It covers the direct child only: grandchildren that survive a
///   killed Satchel are not reached.
pub async fn run(
    request: &ExecRequest,
    config: &RunnerConfig,
    cancel: &CancellationToken,
) -> Result<ExecOutcome, ExecError> {
    run_metered(request, config, cancel, &OutputMeter::default()).await
}

/// [`run`], counting what the child writes in `meter` as it is read, so
/// that a caller can report progress while it runs.
pub async fn run_metered(
    request: &ExecRequest,
    config: &RunnerConfig,
    cancel: &CancellationToken,
    meter: &OutputMeter,
) -> Result<ExecOutcome, ExecError> {
    if !request.working_dir.is_dir() {
        return Err(ExecError::MissingWorkingDir {
            path: request.working_dir.clone(),
        });
    }
    let started = Instant::now();
    let (mut child, sandbox) = match spawn(request).await {
        // Namespaces are assumed to work until a spawn in them fails and
        // the probe confirms they cannot be made here.
        Err(ExecError::Spawn { source, .. })
            if request.sandbox.is_some()
                && sandbox::namespaces_failed(&source, request.sandbox.as_ref()) =>
        {
            spawn(request).await?
        }
        spawned => spawned?,
    };
    let pgid = child.pid;
    let mut group = GroupGuard { pgid, armed: true };

    let stdin_task = child
        .stdin
        .take()
        .zip(request.stdin.clone())
        .map(|(mut pipe, bytes)| {
            tokio::spawn(async move {
                // A child that exits without reading gives EPIPE: not our error.
                let _ = pipe.write_all(&bytes).await;
            })
        });
    let stop_reading = CancellationToken::new();
    let stdout = child.stdout.take().map(|pipe| {
        let capture = Capture::new(
            config.stdout.limit_bytes,
            "stdout",
            config.spill.clone(),
            &config.redactor,
        );
        tokio::spawn(pump(pipe, capture, stop_reading.clone(), meter.clone()))
    });
    let stderr = child.stderr.take().map(|pipe| {
        let capture = Capture::new(
            config.stderr.limit_bytes,
            "stderr",
            config.spill.clone(),
            &config.redactor,
        );
        tokio::spawn(pump(pipe, capture, stop_reading.clone(), meter.clone()))
    });

    let deadline = tokio::time::Instant::from_std(started + request.timeout);
    let (status, timed_out, cancelled) = tokio::select! {
        status = child.wait() => (Some(status.map_err(ExecError::Wait)?), false, false),
        () = tokio::time::sleep_until(deadline) => (None, true, false),
        () = cancel.cancelled() => (None, false, true),
    };
    let exit = match status {
        Some(status) => exit_of(status),
        None => stop(&mut child, pgid, config.kill_grace).await,
    };

    // The direct child is gone; background jobs may still hold the pipes.
    if let Some(task) = stdin_task {
        task.abort();
    }
    let collect = async { tokio::join!(collect(stdout), collect(stderr)) };
    tokio::pin!(collect);
    let (stdout, stderr) = tokio::select! {
        both = &mut collect => both,
        () = tokio::time::sleep(config.drain_timeout) => {
            stop_reading.cancel();
            collect.await
        }
    };
    if config.kill_background {
        signal_group(pgid, Signal::KILL);
    }
    group.armed = false;
    let finish = |capture: Option<Capture>| {
        capture.map_or_else(Captured::default, |c| {
            c.finish(config.strip_ansi, config.collapse_carriage_returns)
        })
    };
    let (stdout, stderr) = (finish(stdout), finish(stderr));
    Ok(ExecOutcome {
        stdout,
        stderr,
        exit,
        timed_out,
        cancelled,
        duration: started.elapsed(),
        sandbox,
    })
}

/// Sets SIGINT and SIGQUIT back to their defaults in a child, between
/// fork and exec (`sigaction` only, async-signal-safe). A shell starts its
/// background jobs with both ignored, and an ignored signal stays ignored
/// across exec: a Satchel started with `&` (or by a service manager that
/// ignores them) would hand that on, and a ^C typed to a program on its
/// terminal, or sent by `process` `input`, would do nothing.
pub(crate) fn default_interrupts() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: a zeroed `sigaction` whose handler is SIG_DFL is a valid
        // disposition, and `sigaction` is async-signal-safe.
        let failed = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &action, std::ptr::null_mut()) != 0
        };
        if failed {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The child's command as every run starts it, foreground or background:
/// program, arguments, directory, the non-interactive environment, and,
/// when sandboxed, the plan to confine it with (secrets hidden, its own
/// `TMPDIR`). The caller adds its stdio and the `pre_exec` step.
pub(crate) fn base_command(
    request: &ExecRequest,
) -> Result<(Command, Option<sandbox::ChildPlan>, SandboxReport), ExecError> {
    crate::make_children_reapable();
    #[expect(
        clippy::disallowed_methods,
        reason = "the runner: every child of Satchel, foreground or background, starts here"
    )]
    let mut command = Command::new(&request.program);
    if request.clear_env {
        command.env_clear();
    }
    let (plan, report) = match &request.sandbox {
        None => (None, SandboxReport::NotRequested),
        Some(spec) => {
            let prepared = sandbox::prepare(spec, &request.working_dir)
                .map_err(|reason| ExecError::SandboxUnavailable { reason })?;
            hide_secrets(&mut command, request, spec);
            if let Some(tmpdir) = prepared.tmpdir {
                command.env("TMPDIR", tmpdir);
            }
            (Some(prepared.plan), prepared.report)
        }
    };
    command
        .args(&request.args)
        .current_dir(&request.working_dir)
        .envs(NON_INTERACTIVE_ENV)
        .envs(request.env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    let mut plan = plan;
    if let Some(plan) = plan.as_mut().filter(|plan| plan.namespaces.is_some()) {
        let target =
            sandbox::ExecTarget::of(command.as_std(), request.clear_env).map_err(|source| {
                ExecError::Spawn {
                    program: request.program.to_string_lossy().into_owned(),
                    source,
                }
            })?;
        plan.exec = Some(target);
    }
    Ok((command, plan, report))
}

async fn spawn(request: &ExecRequest) -> Result<(Started, SandboxReport), ExecError> {
    let (mut command, plan, report) = base_command(request)?;
    if let Some(plan) = plan.as_ref().filter(|plan| sandbox::can_launch(plan)) {
        return retrying_text_busy(|| launch_once(request, plan))
            .await
            .map(|started| (started, report))
            .map_err(|source| spawn_error(request, source));
    }
    command
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe system calls (setsid, prctl, getppid, and for the
    // sandbox `confine`, on a plan built in the parent); it allocates
    // nothing on the success path. The plan is the child's copy, so a
    // retried spawn is sandboxed too.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            default_interrupts()?;
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The parent may have died before the signal was armed.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other("parent exited during spawn"));
            }
            if let Some(plan) = &plan {
                sandbox::confine(plan)?;
            }
            Ok(())
        });
    }
    retrying_text_busy(|| command.spawn().and_then(Started::forked))
        .await
        .map(|started| (started, report))
        .map_err(|source| spawn_error(request, source))
}

/// Calls `start` again while it fails with ETXTBSY, a few times: the
/// executable is still open for writing somewhere, often only because
/// another thread forked while it was being written (a tool just saved, a
/// test fixture). It clears within milliseconds.
async fn retrying_text_busy<T>(mut start: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut attempt = 0;
    loop {
        match start() {
            Err(error)
                if error.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                    && attempt < 5 =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
            }
            result => return result,
        }
    }
}

fn spawn_error(request: &ExecRequest, source: io::Error) -> ExecError {
    ExecError::Spawn {
        program: request.program.to_string_lossy().into_owned(),
        source,
    }
}

/// Starts a command in namespaces without a fork ([`sandbox::launch`]),
/// with the same pipes std's spawn would give it.
fn launch_once(request: &ExecRequest, plan: &sandbox::ChildPlan) -> io::Result<Started> {
    use rustix::pipe::{PipeFlags, pipe_with};
    let (stdin_read, stdin_write) = match request.stdin {
        Some(_) => {
            let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
            (read, Some(write))
        }
        None => (OwnedFd::from(std::fs::File::open("/dev/null")?), None),
    };
    let (stdout_read, stdout_write) = pipe_with(PipeFlags::CLOEXEC)?;
    let (stderr_read, stderr_write) = pipe_with(PipeFlags::CLOEXEC)?;
    let launched = sandbox::launch(
        plan,
        [
            stdin_read.as_fd(),
            stdout_write.as_fd(),
            stderr_write.as_fd(),
        ],
    )?;
    // The command holds its ends now; Satchel's copies would keep its
    // output open after it ended.
    drop((stdin_read, stdout_write, stderr_write));
    Started::launched(launched, stdin_write, stdout_read, stderr_read)
}

/// Keeps variables named like secrets out of a sandboxed child, unless
/// the spec passes them or the request sets them itself.
fn hide_secrets(command: &mut Command, request: &ExecRequest, spec: &SandboxSpec) {
    if request.clear_env {
        return;
    }
    // The child inherits this process's environment: the names are read to
    // take secrets out of what it inherits, not as configuration.
    #[expect(
        clippy::disallowed_methods,
        reason = "names of inherited variables, to remove secrets"
    )]
    let inherited = std::env::vars_os();
    for (name, _) in inherited {
        let Some(name) = name.to_str() else { continue };
        if satchel_core::redact::is_secret_name(name)
            && !spec.pass_env.iter().any(|passed| passed == name)
            && !request.env.iter().any(|(set, _)| set == name)
        {
            command.env_remove(name);
        }
    }
}

/// Waits for a reader task; a panicked reader loses its stream, not the run.
async fn collect(handle: Option<JoinHandle<Capture>>) -> Option<Capture> {
    handle?.await.ok()
}

/// Reads a pipe into its capture until EOF, an error, or `stop`.
async fn pump(
    mut pipe: impl AsyncRead + AsFd + Unpin,
    mut capture: Capture,
    stop: CancellationToken,
    meter: OutputMeter,
) -> Capture {
    let mut buf = vec![0u8; SMALL_READ];
    loop {
        let read = tokio::select! {
            biased;
            read = pipe.read(&mut buf) => read,
            () = stop.cancelled() => break,
        };
        match read {
            Ok(0) => break,
            Ok(n) => {
                meter.add(&buf[..n]);
                capture.push(&buf[..n]);
                if n == buf.len() && buf.len() < LARGE_READ {
                    // Best effort: the system may cap pipe sizes lower.
                    let _ = rustix::pipe::fcntl_setpipe_size(&pipe, LARGE_READ);
                    buf = vec![0u8; LARGE_READ];
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                tracing::debug!(%error, bytes = capture.total(), "pipe read failed; keeping what was read");
                break;
            }
        }
    }
    capture
}

/// Stops a child that overran: SIGTERM to its group, SIGKILL after the
/// grace period, then a bounded wait to reap it.
async fn stop(child: &mut Started, pgid: Pid, grace: Duration) -> Exit {
    signal_group(pgid, Signal::TERM);
    if let Ok(Ok(status)) = tokio::time::timeout(grace, child.wait()).await {
        return exit_of(status);
    }
    signal_group(pgid, Signal::KILL);
    match tokio::time::timeout(REAP_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) => exit_of(status),
        Ok(Err(_)) | Err(_) => Exit::Unknown,
    }
}

pub(crate) fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Unknown,
    }
}

/// Signals every process in the group; a group already gone is fine.
fn signal_group(pgid: Pid, signal: Signal) {
    if let Err(error) = rustix::process::kill_process_group(pgid, signal)
        && error != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid = pgid.as_raw_nonzero().get(), %error, "cannot signal process group");
    }
}

/// Kills the child's process group when a run is abandoned mid-way (its
/// future dropped), so nothing it started keeps running unobserved.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, Signal::KILL);
        }
    }
}
