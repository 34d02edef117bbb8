//! [`BackgroundProcess`]: one process that outlives the call that started
//! it: its output read a piece at a time, its stdin written, its end
//! observed once and reported, and a kill that leaves nothing behind.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use regex::Regex;
use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::log::{OutputLog, SpillState, Unread};
use super::tree;
use crate::outcome::Exit;
use crate::run::exit_of;
use crate::sandbox::SandboxReport;

/// How long the output must stay quiet before a read that saw new output
/// returns: a burst (an echo and the answer after it) comes back whole.
const SETTLE: Duration = Duration::from_millis(100);
/// How long to keep reading after the process ended: what it printed last.
const DRAIN: Duration = Duration::from_millis(250);
/// How long to wait for a SIGKILLed process to be reaped.
const REAP: Duration = Duration::from_secs(2);
/// Read buffer.
const READ_BUF: usize = 64 * 1024;

/// Where a background process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Still running.
    Running,
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Killed(i32),
}

impl ProcessState {
    /// The state in a few words: `running`, `exited 3`, `killed by SIGTERM`.
    pub fn describe(self) -> String {
        match self {
            ProcessState::Running => "running".to_owned(),
            ProcessState::Exited(code) => format!("exited {code}"),
            ProcessState::Killed(signal) => format!(
                "killed by {}",
                Exit::Signal(signal).signal_name().unwrap_or_default()
            ),
        }
    }

    /// Whether it still runs.
    pub fn is_running(self) -> bool {
        self == ProcessState::Running
    }

    /// The exit code a shell would report (128 + N for signal N).
    pub fn exit_code(self) -> Option<i32> {
        match self {
            ProcessState::Running => None,
            ProcessState::Exited(code) => Some(code),
            ProcessState::Killed(signal) => Some(128 + signal),
        }
    }
}

/// What one read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The output printed since the last read.
    pub output: Unread,
    /// The state after the read.
    pub state: ProcessState,
    /// Whether the `until` pattern matched (`None` without one).
    pub matched: Option<bool>,
    /// Bytes printed in all.
    pub total_bytes: u64,
    /// The whole output on disk.
    pub spill: SpillState,
}

/// A process in the table, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its id in the table (`p3`).
    pub id: String,
    /// The command as given.
    pub command: String,
    /// Its PID on the machine.
    pub pid: i32,
    /// Its state.
    pub state: ProcessState,
    /// Time since it started.
    pub age: Duration,
    /// Output not read yet.
    pub unread_bytes: u64,
    /// Whether it has a terminal.
    pub tty: bool,
}

struct Status {
    state: ProcessState,
    /// The model has been told of the end.
    told: bool,
}

pub(crate) struct Shared {
    log: Mutex<OutputLog>,
    status: Mutex<Status>,
    changed: watch::Sender<u64>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// One process started in the background; see the module docs.
///
/// # Caveats
/// Dropping it does not end the process: [`BackgroundProcess::kill`] does,
/// and so does the end of the runtime its tasks run on (the direct child
/// is killed on drop, and with it, in the sandbox, its namespace).
pub struct BackgroundProcess {
    id: String,
    command: String,
    pid: i32,
    tty: bool,
    started: Instant,
    /// When it started, on the wall clock.
    pub started_at: SystemTime,
    /// The sandbox it runs in.
    pub sandbox: SandboxReport,
    shared: Arc<Shared>,
    input: tokio::sync::Mutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>,
    kill_grace: Duration,
    marker: String,
}

/// What a started process needs to become a [`BackgroundProcess`].
pub(crate) struct Parts {
    pub(crate) id: String,
    pub(crate) command: String,
    pub(crate) tty: bool,
    pub(crate) spawned: super::spawn::Spawned,
    pub(crate) log: OutputLog,
    pub(crate) kill_grace: Duration,
    pub(crate) record_dir: Option<PathBuf>,
    /// The value of [`tree::MARKER`] its processes carry.
    pub(crate) marker: String,
}

impl BackgroundProcess {
    /// Takes a spawned process and starts reading and waiting for it.
    pub(crate) fn start(parts: Parts) -> Option<Arc<BackgroundProcess>> {
        let Parts {
            id,
            command,
            tty,
            spawned,
            log,
            kill_grace,
            record_dir,
            marker,
        } = parts;
        let mut child = spawned.child;
        let pid = child.id().and_then(|id| i32::try_from(id).ok())?;
        let record = record_dir.and_then(|dir| super::record::write(&dir, &id, pid));
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            log: Mutex::new(log),
            status: Mutex::new(Status {
                state: ProcessState::Running,
                told: false,
            }),
            changed,
        });
        let mut reader = tokio::spawn(pump(spawned.output, shared.clone()));
        let waiter_shared = shared.clone();
        let waiter_marker = marker.clone();
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => exit_of(status),
                Err(_) => Exit::Unknown,
            };
            // Whatever it left (in its group, or marked) ends with it.
            tree::signal_group(pid, Signal::KILL);
            for stray in tree::marked(&waiter_marker) {
                tree::signal(stray, Signal::KILL);
            }
            if tokio::time::timeout(DRAIN, &mut reader).await.is_err() {
                reader.abort();
            }
            lock(&waiter_shared.log).finish();
            lock(&waiter_shared.status).state = match exit {
                Exit::Code(code) => ProcessState::Exited(code),
                Exit::Signal(signal) => ProcessState::Killed(signal),
                Exit::Unknown => ProcessState::Killed(libc::SIGKILL),
            };
            if let Some(path) = record {
                let _ = std::fs::remove_file(path);
            }
            waiter_shared.bump();
        });
        Some(Arc::new(BackgroundProcess {
            id,
            command,
            pid,
            tty,
            started: Instant::now(),
            started_at: SystemTime::now(),
            sandbox: spawned.sandbox,
            shared,
            input: tokio::sync::Mutex::new(Some(spawned.input)),
            kill_grace,
            marker,
        }))
    }

    /// Its id in the table.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its PID on the machine.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The command as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Its state now.
    pub fn state(&self) -> ProcessState {
        lock(&self.shared.status).state
    }

    /// How it is listed.
    pub fn info(&self) -> ProcessInfo {
        ProcessInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            pid: self.pid,
            state: self.state(),
            age: self.started.elapsed(),
            unread_bytes: lock(&self.shared.log).unread_bytes(),
            tty: self.tty,
        }
    }

    /// Marks the end as told, returning whether it was news: an ended
    /// process is reported once.
    pub(crate) fn tell_end(&self) -> bool {
        let mut status = lock(&self.shared.status);
        if status.state.is_running() || status.told {
            return false;
        }
        status.told = true;
        true
    }

    /// Reads what was printed since the last read. With `until`, waits up
    /// to `wait` for a line that matches it (or the end); without, waits up
    /// to `wait` for any new output, then for the output to settle.
    pub async fn read(&self, wait: Duration, until: Option<Regex>) -> Reading {
        let has_until = until.is_some();
        let mut changes = self.shared.changed.subscribe();
        if has_until {
            lock(&self.shared.log).watch(until);
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut seen_output = false;
        loop {
            let (running, matched, unread) = self.peek();
            if !running || (has_until && matched) {
                break;
            }
            if !has_until && unread > 0 {
                seen_output = true;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            let limit = if seen_output {
                deadline.min(now + SETTLE)
            } else {
                deadline
            };
            match tokio::time::timeout_at(limit, changes.changed()).await {
                Ok(Ok(())) => {}
                // Quiet for the settle time, or the deadline passed.
                Ok(Err(_)) | Err(_) => {
                    if seen_output || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                }
            }
        }
        let (output, matched, total_bytes, spill) = {
            let mut log = lock(&self.shared.log);
            let matched = has_until.then(|| log.matched());
            log.watch(None);
            (log.take(), matched, log.total_bytes(), log.spill_state())
        };
        let state = self.state();
        if !state.is_running() {
            self.tell_end();
        }
        Reading {
            output,
            state,
            matched,
            total_bytes,
            spill,
        }
    }

    fn peek(&self) -> (bool, bool, u64) {
        let running = self.state().is_running();
        let log = lock(&self.shared.log);
        (running, log.matched(), log.unread_bytes())
    }

    /// Writes `text` to its stdin. Without a terminal, `\u{3}` sends SIGINT
    /// to its process group and `\u{4}` closes stdin (with a terminal both
    /// are the terminal's own). Fails when stdin is closed or the process
    /// has ended.
    pub async fn write(&self, text: &str) -> Result<(), String> {
        if !self.state().is_running() {
            return Err(format!("process {} has ended", self.id));
        }
        let mut input = self.input.lock().await;
        let Some(pipe) = input.as_mut() else {
            return Err(format!(
                "the input of process {} was closed (by \\u0004)",
                self.id
            ));
        };
        if self.tty {
            return write_all(pipe, text.as_bytes()).await;
        }
        let mut rest = text;
        while let Some(at) = rest.find(['\u{3}', '\u{4}']) {
            write_all(pipe, &rest.as_bytes()[..at]).await?;
            if rest[at..].starts_with('\u{3}') {
                tree::signal_group(self.pid, Signal::INT);
                rest = &rest[at + 1..];
            } else {
                let _ = pipe.shutdown().await;
                *input = None;
                return Ok(());
            }
        }
        write_all(pipe, rest.as_bytes()).await
    }

    /// Ends it and everything it started: SIGTERM to its process group and
    /// every descendant, SIGKILL after the grace period. Returns the final
    /// state; a process already ended is left as it is.
    pub async fn kill(&self) -> ProcessState {
        if !self.state().is_running() {
            return self.state();
        }
        let mut family = self.family();
        tree::signal_group(self.pid, Signal::TERM);
        for &pid in &family {
            tree::signal(pid, Signal::TERM);
        }
        if !self.wait_end(self.kill_grace).await {
            family.extend(self.family());
            tree::signal_group(self.pid, Signal::KILL);
            tree::signal(self.pid, Signal::KILL);
            for &pid in &family {
                tree::signal(pid, Signal::KILL);
            }
            self.wait_end(REAP + DRAIN).await;
        }
        // A descendant that had left the group and survived its TERM.
        family.extend(tree::marked(&self.marker));
        for pid in family {
            tree::signal(pid, Signal::KILL);
        }
        self.state()
    }

    /// Its descendants, the members of its group and session, and every
    /// process that carries its marker.
    fn family(&self) -> Vec<i32> {
        let mut family = tree::family(self.pid);
        family.extend(tree::marked(&self.marker));
        family.retain(|pid| *pid != self.pid);
        family.sort_unstable();
        family.dedup();
        family
    }

    /// Waits up to `limit` for the end; true once it ended.
    pub async fn wait_end(&self, limit: Duration) -> bool {
        let mut changes = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if !self.state().is_running() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return !self.state().is_running();
            }
        }
    }
}

async fn write_all(pipe: &mut (dyn AsyncWrite + Send + Unpin), bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() {
        return Ok(());
    }
    pipe.write_all(bytes)
        .await
        .map_err(|error| format!("cannot write to its input: {error}"))?;
    pipe.flush()
        .await
        .map_err(|error| format!("cannot write to its input: {error}"))
}

/// Reads the output into the log until EOF (or, for a terminal, EIO once
/// every process holding it has gone).
async fn pump(mut output: Box<dyn AsyncRead + Send + Unpin>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        match output.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                lock(&shared.log).push(&buf[..n]);
                shared.bump();
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}
