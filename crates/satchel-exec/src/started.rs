//! A started child, whichever way it was started: std's spawn through
//! Tokio, or the sandbox's [`launch`](crate::sandbox::launch), where the
//! child Satchel waits for is the namespace's PID 1 and the command's own
//! status arrives on a pipe.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, WaitIdStatus};
use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::process::Child;

use crate::sandbox::{Launched, Stacks};

/// A running child and Satchel's ends of its pipes.
pub(crate) struct Started {
    /// The child's pid, which is also its process group's id.
    pub(crate) pid: Pid,
    pub(crate) stdin: Option<pipe::Sender>,
    pub(crate) stdout: Option<pipe::Receiver>,
    pub(crate) stderr: Option<pipe::Receiver>,
    waiter: Waiter,
}

enum Waiter {
    Forked(Child),
    Launched(Init),
}

impl Started {
    /// A child std forked (Tokio kills it when dropped).
    pub(crate) fn forked(mut child: Child) -> io::Result<Started> {
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::other("child exited before its pid was read"))?;
        let stdin = child.stdin.take().map(|end| end.into_owned_fd());
        let stdout = child.stdout.take().map(|end| end.into_owned_fd());
        let stderr = child.stderr.take().map(|end| end.into_owned_fd());
        Ok(Started {
            pid,
            stdin: stdin.transpose()?.map(sender).transpose()?,
            stdout: stdout.transpose()?.map(receiver).transpose()?,
            stderr: stderr.transpose()?.map(receiver).transpose()?,
            waiter: Waiter::Forked(child),
        })
    }

    /// A command the sandbox launched, with Satchel's ends of its pipes
    /// (killed when dropped before it ended).
    pub(crate) fn launched(
        launched: Launched,
        stdin: Option<OwnedFd>,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> io::Result<Started> {
        let Launched {
            init: pid,
            status,
            stacks,
        } = launched;
        // Held first: from here, dropping kills and reaps the init.
        let mut init = Init {
            pid,
            pidfd: None,
            status: None,
            bytes: [0; 4],
            read: 0,
            stacks: Some(stacks),
            ended: None,
        };
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
        // SAFETY: an `OwnedFd` is open, and stays the same descriptor, for
        // as long as the `AsyncFd` that owns it.
        let pidfd = unsafe { AsyncFd::register(pidfd) }.map_err(io::Error::from)?;
        init.pidfd = Some(pidfd);
        init.status = Some(receiver(status)?);
        Ok(Started {
            pid,
            stdin: stdin.map(sender).transpose()?,
            stdout: Some(receiver(stdout)?),
            stderr: Some(receiver(stderr)?),
            waiter: Waiter::Launched(init),
        })
    }

    /// Waits for the child to end; cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.waiter {
            Waiter::Forked(child) => child.wait().await,
            Waiter::Launched(init) => init.wait().await,
        }
    }
}

fn sender(fd: OwnedFd) -> io::Result<pipe::Sender> {
    pipe::Sender::from_owned_fd(fd)
}

fn receiver(fd: OwnedFd) -> io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(fd)
}

/// The namespace's PID 1 of a launched command, and its status pipe.
struct Init {
    pid: Pid,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<pipe::Receiver>,
    /// The command's wait status as read so far.
    bytes: [u8; 4],
    read: usize,
    /// The stacks the init runs on: given back once it has been reaped.
    stacks: Option<Stacks>,
    ended: Option<ExitStatus>,
}

impl Init {
    async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.ended {
            return Ok(status);
        }
        let (Some(status_pipe), Some(pidfd)) = (&mut self.status, &self.pidfd) else {
            return Err(io::Error::other("the sandbox's init is not being watched"));
        };
        // The init writes the command's status, then exits (end of file).
        while self.read < self.bytes.len() {
            match status_pipe.read(&mut self.bytes[self.read..]).await {
                Ok(0) => break,
                Ok(n) => self.read += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        let own = loop {
            let mut ready = pidfd.readable().await?;
            match reap_now(pidfd.get_ref())? {
                Some(own) => break own,
                None => ready.clear_ready(),
            }
        };
        let status = if self.read == self.bytes.len() {
            ExitStatus::from_raw(i32::from_ne_bytes(self.bytes))
        } else {
            // It ended before the command did: killed (a timeout's
            // SIGKILL to the group, or from outside).
            own
        };
        self.ended = Some(status);
        self.stacks = None;
        Ok(status)
    }
}

/// Reaps the process of `pidfd` if it has ended.
fn reap_now(pidfd: &OwnedFd) -> io::Result<Option<ExitStatus>> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | all_children();
    Ok(rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), options)?.map(|s| raw_status(&s)))
}

/// `__WALL`: the launched init has no exit signal, and a wait without this
/// flag does not see such a child.
fn all_children() -> WaitIdOptions {
    WaitIdOptions::from_bits_retain(libc::__WALL as u32)
}

fn raw_status(status: &WaitIdStatus) -> ExitStatus {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => ExitStatus::from_raw((code & 0xff) << 8),
        (None, Some(signal)) => ExitStatus::from_raw(signal & 0x7f),
        (None, None) => ExitStatus::from_raw(0xff << 8),
    }
}

impl Drop for Init {
    /// An init dropped before it ended is killed, which ends everything in
    /// its namespace, and reaped out of the caller's way; its stacks are
    /// given back only then.
    fn drop(&mut self) {
        if self.ended.is_some() {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            // Never watched: wait for it here (it was killed, or ends at
            // once after a failed start).
            let _ = rustix::process::kill_process(self.pid, Signal::KILL);
            let all = rustix::process::WaitOptions::from_bits_retain(libc::__WALL as u32);
            let _ = rustix::process::waitpid(Some(self.pid), all);
            return;
        };
        let _ = rustix::process::pidfd_send_signal(pidfd.get_ref(), Signal::KILL);
        // Leaked rather than unmapped under a live process should the
        // reaping thread not start.
        let stacks = std::mem::ManuallyDrop::new(self.stacks.take());
        let pidfd = pidfd.into_inner();
        // A blocking wait for a process just killed: moments, off the
        // caller's thread.
        let reap = move || {
            let options = WaitIdOptions::EXITED | all_children();
            let _ = rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), options);
            drop(std::mem::ManuallyDrop::into_inner(stacks));
        };
        if let Err(error) = std::thread::Builder::new()
            .name("satchel-reap".into())
            .spawn(reap)
        {
            tracing::warn!(%error, "cannot start a thread to reap a killed sandbox; its stacks stay mapped");
        }
    }
}
