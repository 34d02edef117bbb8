//! Starting a background process: the same session, parent-death signal,
//! environment and sandbox as a foreground run, with stdout and stderr on
//! one pipe (or a pseudo-terminal) and stdin held open by Satchel.

use std::io;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Child;

use crate::run::base_command;
use crate::sandbox::{self, SandboxReport};
use crate::{ExecError, ExecRequest};

/// Columns of a background process's terminal: wide, so that lines are
/// not wrapped for a reader that is not a screen.
const TTY_COLUMNS: u16 = 200;
/// Rows of its terminal.
const TTY_ROWS: u16 = 50;

/// A started process and its ends of the pipes.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) output: Box<dyn AsyncRead + Send + Unpin>,
    pub(crate) input: Box<dyn AsyncWrite + Send + Unpin>,
    pub(crate) sandbox: SandboxReport,
}

/// Starts `request` in the background; with `tty`, on a new
/// pseudo-terminal that is its controlling terminal.
pub(crate) fn spawn(request: &ExecRequest, tty: bool) -> Result<Spawned, ExecError> {
    match spawn_once(request, tty) {
        Err(ExecError::Spawn { source, .. })
            if request.sandbox.is_some()
                && sandbox::namespaces_failed(&source, request.sandbox.as_ref()) =>
        {
            spawn_once(request, tty)
        }
        spawned => spawned,
    }
}

fn spawn_error(request: &ExecRequest, source: io::Error) -> ExecError {
    ExecError::Spawn {
        program: request.program.to_string_lossy().into_owned(),
        source,
    }
}

fn spawn_once(request: &ExecRequest, tty: bool) -> Result<Spawned, ExecError> {
    let (mut command, plan, report) = base_command(request)?;
    let parent = rustix::process::getpid();
    // Between fork and exec: only async-signal-safe calls on memory
    // prepared above (see `crate::run`). With a terminal, pty-process has
    // already made the session and taken the terminal.
    let confine = move |new_session: bool| -> io::Result<()> {
        if new_session {
            rustix::process::setsid()?;
        }
        crate::run::default_interrupts()?;
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(io::Error::other("parent exited during spawn"));
        }
        if let Some(plan) = &plan {
            // SAFETY: called between fork and exec in the child.
            unsafe { sandbox::confine(plan)? };
        }
        Ok(())
    };
    if tty {
        let (pty, pts) = pty_process::open().map_err(|e| spawn_error(request, pty_io(e)))?;
        pty.resize(pty_process::Size::new(TTY_ROWS, TTY_COLUMNS))
            .map_err(|e| spawn_error(request, pty_io(e)))?;
        // SAFETY: see `confine` above.
        let command =
            unsafe { pty_process::Command::from(command).pre_exec(move || confine(false)) };
        let child = { command }
            .spawn(pts)
            .map_err(|e| spawn_error(request, pty_io(e)))?;
        let (output, input) = pty.into_split();
        return Ok(Spawned {
            child,
            output: Box::new(output),
            input: Box::new(input),
            sandbox: report,
        });
    }
    let (reader, writer) = io::pipe().map_err(|e| spawn_error(request, e))?;
    let writer_too = writer.try_clone().map_err(|e| spawn_error(request, e))?;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_too));
    // SAFETY: see `confine` above.
    unsafe {
        command.pre_exec(move || confine(true));
    }
    let mut child = command.spawn().map_err(|e| spawn_error(request, e))?;
    // The command's copies of the write end must be the only ones left,
    // or the output never ends.
    drop(command);
    let output = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| spawn_error(request, e))?;
    let input = child
        .stdin
        .take()
        .ok_or_else(|| spawn_error(request, io::Error::other("no stdin pipe")))?;
    Ok(Spawned {
        child,
        output: Box::new(output),
        input: Box::new(input),
        sandbox: report,
    })
}

fn pty_io(error: pty_process::Error) -> io::Error {
    match error {
        pty_process::Error::Io(error) => error,
        pty_process::Error::Rustix(errno) => errno.into(),
        other => io::Error::other(other.to_string()),
    }
}
