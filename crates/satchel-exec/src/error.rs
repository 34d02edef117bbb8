//! Errors of the runner itself (not of the child: a failing child is an outcome).

use std::io;
use std::path::PathBuf;

/// A run that could not start or could not be observed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The working directory is missing or not a directory; not retryable.
    #[error("working directory `{}` does not exist or is not a directory", path.display())]
    MissingWorkingDir {
        /// The directory asked for.
        path: PathBuf,
    },
    /// The program could not be started (not found, not executable, out of
    /// processes); retryable only for resource exhaustion.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program asked for.
        program: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// A sandbox was asked for and this system cannot enforce it: the
    /// command did not run (never unsandboxed in silence).
    #[error("the command was not run: {reason}")]
    SandboxUnavailable {
        /// Why the kernel cannot sandbox it.
        reason: String,
    },
    /// Waiting for the child failed; should not happen on Linux.
    #[error("waiting for the child process failed: {0}")]
    Wait(#[source] io::Error),
}
