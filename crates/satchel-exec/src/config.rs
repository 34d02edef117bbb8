//! How a run is bounded: output limits, grace periods, spill files.

use std::path::PathBuf;
use std::time::Duration;

use satchel_core::redact::Redactor;

/// Limits and behaviour shared by every run of a runner.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerConfig {
    /// How stdout is kept.
    pub stdout: OutputConfig,
    /// How stderr is kept.
    pub stderr: OutputConfig,
    /// How much of any tool's text result the model gets (the rest is
    /// spilled): a limit of 0 turns the cut off.
    pub result: OutputConfig,
    /// Time between SIGTERM and SIGKILL when a run is stopped.
    pub kill_grace: Duration,
    /// How long to keep reading the pipes after the direct child has exited:
    /// background grandchildren (`server &`) may hold them open forever.
    pub drain_timeout: Duration,
    /// Kill whatever is left in the child's process group once the child
    /// has exited, so no background job outlives its command. Processes that
    /// start their own session (`setsid`) are not in the group and survive.
    pub kill_background: bool,
    /// Remove ANSI escape sequences from the kept text.
    pub strip_ansi: bool,
    /// Keep only the last state of carriage-return progress lines.
    pub collapse_carriage_returns: bool,
    /// Where cut output is kept in full.
    pub spill: SpillConfig,
    /// Secrets replaced in the output as it arrives, before it is cut to
    /// head and tail or spilled: the model, the spill file and every
    /// record downstream see `[redacted]`.
    pub redactor: Redactor,
    /// Most background processes alive at once per owner (a conversation,
    /// an MCP session); exited ones do not count.
    pub max_background: usize,
    /// Ports of an owner's loopback-only namespace reachable from the
    /// machine's own loopback, once it starts a background process.
    pub forward_ports: Vec<u16>,
}

impl Default for RunnerConfig {
    fn default() -> RunnerConfig {
        RunnerConfig {
            stdout: OutputConfig {
                limit_bytes: 10 * 1024,
            },
            stderr: OutputConfig {
                limit_bytes: 4 * 1024,
            },
            // About 32k tokens: 2,000 numbered lines of source read at once fit.
            result: OutputConfig {
                limit_bytes: 128 * 1024,
            },
            kill_grace: Duration::from_secs(2),
            drain_timeout: Duration::from_millis(250),
            kill_background: true,
            strip_ansi: true,
            collapse_carriage_returns: true,
            spill: SpillConfig::default(),
            redactor: Redactor::none(),
            max_background: 8,
            forward_ports: Vec::new(),
        }
    }
}

/// Limits for one output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputConfig {
    /// Bytes of output kept (half from the start, half from the end); the
    /// marker that replaces the middle comes on top.
    pub limit_bytes: usize,
}

/// Where and how much cut output is kept on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct SpillConfig {
    /// Directory of spill files; `None` disables spilling.
    pub dir: Option<PathBuf>,
    /// Largest spill file; output beyond it is counted but not kept.
    pub max_file_bytes: u64,
    /// Total size of the directory above which the oldest files are removed.
    pub max_total_bytes: u64,
    /// Age after which a spill file is removed.
    pub max_age: Duration,
}

impl Default for SpillConfig {
    fn default() -> SpillConfig {
        let uid = rustix::process::getuid().as_raw();
        SpillConfig {
            dir: Some(
                std::env::temp_dir()
                    .join(format!("satchel-{uid}"))
                    .join("spill"),
            ),
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 512 * 1024 * 1024,
            max_age: Duration::from_secs(24 * 60 * 60),
        }
    }
}
