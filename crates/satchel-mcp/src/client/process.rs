//! A stdio MCP server's process: started in its own process group, its
//! stderr kept (the tail, for error messages) and logged, and stopped in
//! the order the MCP specification gives: close stdin, wait, SIGTERM,
//! wait, SIGKILL, applied to the whole group so helpers it started (an
//! `npx` wrapper's `node`) go too.
//!
//! rmcp's `TokioChildProcess` does not put the child in a process group by
//! default and signals only the direct child, so the spawn is done here.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Bytes of a server's stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 2048;

/// A running stdio server process.
pub(crate) struct ServerProcess {
    child: Child,
    pgid: Pid,
    stderr_tail: Arc<Mutex<String>>,
    reaped: Option<ExitStatus>,
}

/// Its pipes to speak MCP over.
pub(crate) struct Pipes {
    /// Its stdout: messages from the server.
    pub(crate) stdout: ChildStdout,
    /// Its stdin: messages to the server.
    pub(crate) stdin: ChildStdin,
}

impl ServerProcess {
    /// Starts `command` in `cwd` with `env` added, in a new process group.
    pub(crate) fn spawn(
        server: &str,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> io::Result<(ServerProcess, Pipes)> {
        satchel_exec::make_children_reapable();
        #[expect(
            clippy::disallowed_methods,
            reason = "a long-lived MCP server on pipes, not a command: its own group, killed on drop"
        )]
        let mut cmd = Command::new(command);
        cmd.args(args)
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                if rustix::process::getppid() != Some(parent) {
                    return Err(io::Error::other("parent exited during spawn"));
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::other("the server exited before its pid was read"))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("the server's pipes were not set up"));
        };
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = stderr_tail.clone();
        let name = server.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "stderr: {line}");
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                tail.push_str(&line);
                tail.push('\n');
                if tail.len() > STDERR_TAIL_BYTES {
                    let mut cut = tail.len() - STDERR_TAIL_BYTES;
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    tail.drain(..cut);
                }
            }
        });
        let process = ServerProcess {
            child,
            pgid,
            stderr_tail,
            reaped: None,
        };
        Ok((process, Pipes { stdout, stdin }))
    }

    /// The process id (also the process group id).
    pub(crate) fn pid(&self) -> i32 {
        self.pgid.as_raw_nonzero().get()
    }

    /// The last lines the server wrote to stderr, trimmed.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .trim()
            .to_owned()
    }

    /// Waits for the server to exit.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.reaped {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.reaped = Some(status);
        Ok(status)
    }

    /// Stops the server and its group; its stdin must already be closed
    /// (the MCP transport closes it). Waits `grace` for it to leave on its
    /// own, then sends SIGTERM to the group, waits `grace` again, then
    /// SIGKILL. Leftover group members are stopped the same way after the
    /// leader exits. Returns the leader's exit status when it was seen.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut status = self.wait_for(grace).await;
        if status.is_none() {
            self.signal(Signal::TERM);
            status = self.wait_for(grace).await;
        }
        if status.is_none() {
            self.signal(Signal::KILL);
            status = self.wait_for(grace).await;
        }
        if self.group_alive() {
            self.signal(Signal::TERM);
            let deadline = tokio::time::Instant::now() + grace;
            while self.group_alive() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            self.signal(Signal::KILL);
        }
        status
    }

    async fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(limit, self.wait()).await.ok()?.ok()
    }

    fn group_alive(&self) -> bool {
        rustix::process::test_kill_process_group(self.pgid).is_ok()
    }

    fn signal(&self, signal: Signal) {
        if let Err(error) = rustix::process::kill_process_group(self.pgid, signal)
            && error != rustix::io::Errno::SRCH
        {
            tracing::warn!(pgid = self.pid(), %error, "cannot signal an MCP server's process group");
        }
    }
}

impl Drop for ServerProcess {
    /// A server abandoned without [`ServerProcess::stop`] is killed with its group.
    fn drop(&mut self) {
        if self.group_alive() {
            self.signal(Signal::KILL);
        }
    }
}

/// How a process ended, in words.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "exited".to_owned(),
    }
}
