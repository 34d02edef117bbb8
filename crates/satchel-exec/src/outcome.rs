//! What a run produced: [`ExecOutcome`].

use std::path::PathBuf;
use std::time::Duration;

use crate::SandboxReport;

/// The result of one run, whatever the child did.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecOutcome {
    /// Standard output as kept.
    pub stdout: Captured,
    /// Standard error as kept.
    pub stderr: Captured,
    /// How the direct child ended.
    pub exit: Exit,
    /// The run hit its deadline and was stopped.
    pub timed_out: bool,
    /// The run was cancelled and stopped.
    pub cancelled: bool,
    /// Wall time from spawn to return.
    pub duration: Duration,
    /// What sandbox was enforced, if one was asked for.
    pub sandbox: SandboxReport,
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It could not be reaped in time (stuck in the kernel); it was sent
    /// SIGKILL and is left to the runtime's background reaper.
    Unknown,
}

impl Exit {
    /// The exit code a shell would report: the code, or 128 + the signal.
    pub fn shell_code(self) -> Option<i32> {
        match self {
            Exit::Code(code) => Some(code),
            Exit::Signal(signal) => Some(128 + signal),
            Exit::Unknown => None,
        }
    }

    /// The signal's name (`SIGKILL`) when a signal ended the child.
    pub fn signal_name(self) -> Option<String> {
        match self {
            Exit::Signal(signal) => Some(signal_name(signal)),
            Exit::Code(_) | Exit::Unknown => None,
        }
    }
}

fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 16] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
    ];
    usize::try_from(signal - 1)
        .ok()
        .and_then(|index| NAMES.get(index))
        .map_or_else(|| format!("signal {signal}"), |name| (*name).to_owned())
}

/// One output stream as kept within its limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Captured {
    /// The kept text: head, a marker, tail when cut; cleaned as configured.
    pub text: String,
    /// Bytes the child wrote in all.
    pub total_bytes: u64,
    /// Bytes left out of `text`.
    pub omitted_bytes: u64,
    /// The full output on disk, when it was cut and spilling is on.
    pub spill: Option<SpillFile>,
}

impl Captured {
    /// True when part of the output was left out.
    pub fn truncated(&self) -> bool {
        self.omitted_bytes > 0
    }

    /// Tells the model what of `what` (`stdout`, `the result`) was cut and
    /// where the rest is, naming `readers` (the tools to read it with);
    /// `None` when nothing was cut.
    pub fn cut_note(&self, what: &str, readers: &str) -> Option<String> {
        if !self.truncated() {
            return None;
        }
        let kept = self.total_bytes - self.omitted_bytes;
        let mut note = format!(
            "{what} was {} bytes; only its start and end ({kept} bytes) are shown, {} bytes from the middle left out.",
            self.total_bytes, self.omitted_bytes
        );
        match &self.spill {
            Some(spill) if spill.complete => note.push_str(&format!(
                " The full {what} is in {}; read parts of it with {readers} rather than all at once.",
                spill.path.display()
            )),
            Some(spill) => note.push_str(&format!(
                " The first {} bytes of {what} are in {}.",
                spill.bytes,
                spill.path.display()
            )),
            None => note.push_str(&format!(
                " The rest of {what} was not kept; ask for less at a time to see it all."
            )),
        }
        Some(note)
    }
}

/// A file holding a stream's raw output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillFile {
    /// Where it is.
    pub path: PathBuf,
    /// Bytes in it.
    pub bytes: u64,
    /// False when the stream outgrew the file's size limit.
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_have_names_and_shell_codes() {
        assert_eq!(Exit::Signal(9).signal_name().as_deref(), Some("SIGKILL"));
        assert_eq!(Exit::Signal(15).shell_code(), Some(143));
        assert_eq!(Exit::Signal(40).signal_name().as_deref(), Some("signal 40"));
        assert_eq!(Exit::Code(3).signal_name(), None);
        assert_eq!(Exit::Unknown.shell_code(), None);
    }
}
