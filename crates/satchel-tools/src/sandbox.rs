//! How tools that run processes (`bash`, `code`, external tools) are
//! confined: the sandbox of the policy's mode, built from the `exec`
//! section of agent.json and the project directory.
//!
//! - `readonly`: writes only to a private temporary directory (`TMPDIR`),
//!   no network.
//! - `workspace` (the default): writes under the project directory, the
//!   system's temporary directory and the paths in `exec.writable`; no
//!   network unless
//!   `exec.network` is true. The project's `.agents` and `.git/hooks` and
//!   `.git/config` stay read-only: a command must not rewrite the policy
//!   or plant code that runs later outside the sandbox.
//! - `trust`, or a call the user let leave the sandbox: no sandbox.
//!
//! [`crate::dispatch`] sets the call's [`Confinement`]; tools only read it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use satchel_exec::{Limits, SandboxSpec};
use serde_json::Value;

use crate::ToolContext;

/// How a call's processes are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Confinement {
    /// Writes only to the private temporary directory.
    ReadOnly,
    /// Writes under the project too.
    #[default]
    Workspace,
    /// No sandbox: the mode is `trust`, or the user let this call out.
    Unconfined,
}

impl Confinement {
    /// Whether processes run in a sandbox.
    pub fn is_sandboxed(self) -> bool {
        self != Confinement::Unconfined
    }

    /// The mode's name, as the model and the user read it.
    pub fn as_str(self) -> &'static str {
        match self {
            Confinement::ReadOnly => "readonly",
            Confinement::Workspace => "workspace",
            Confinement::Unconfined => "none",
        }
    }
}

/// The `exec` settings that shape the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxConfig {
    /// Writable paths besides the project (`exec.writable`).
    pub writable: Vec<PathBuf>,
    /// Network for sandboxed commands in `workspace` mode (`exec.network`).
    pub network: bool,
    /// Secret-named variables passed in anyway (`exec.passEnv`).
    pub pass_env: Vec<String>,
    /// Resource limits (`exec.limits`).
    pub limits: Limits,
}

/// The input field by which a call asks to run outside the sandbox.
pub const ESCAPE_FIELD: &str = "sandbox";
/// Its one value.
pub const ESCAPE_VALUE: &str = "none";

/// Whether a call's input asks to leave the sandbox.
pub fn asks_to_leave(input: &Value) -> bool {
    input.get(ESCAPE_FIELD).and_then(Value::as_str) == Some(ESCAPE_VALUE)
}

/// The paths a call may write beneath: `None` when it is unconfined,
/// none at all in `readonly`, and in `workspace` the project (with its
/// `.git` bound on itself), the system's temporary directory and
/// `exec.writable`, or the call's own roots when its caller set them (an
/// MCP client's roots). The file tools and the sandbox of commands both
/// take them from here, so one rule bounds every tool.
pub fn writable_paths(ctx: &ToolContext) -> Option<Vec<PathBuf>> {
    let project = ctx.working_dir.as_path();
    match ctx.confinement {
        Confinement::Unconfined => None,
        Confinement::ReadOnly => Some(Vec::new()),
        Confinement::Workspace => match &ctx.writable_roots {
            Some(roots) => Some(roots.iter().cloned().collect()),
            None => {
                // `.git` bound on itself: a mount point cannot be renamed,
                // so its read-only hooks and config cannot be swapped out.
                let mut writable = vec![
                    project.to_path_buf(),
                    project.join(".git"),
                    std::env::temp_dir(),
                ];
                writable.extend(
                    ctx.config
                        .sandbox
                        .writable
                        .iter()
                        .map(|path| resolve(project, path)),
                );
                Some(writable)
            }
        },
    }
}

/// The sandbox for a call's processes, or `None` when it runs unconfined.
pub fn spec_for(ctx: &ToolContext) -> Option<SandboxSpec> {
    let config = &ctx.config.sandbox;
    let project = ctx.working_dir.as_path();
    let writable = writable_paths(ctx)?;
    let network = ctx.confinement == Confinement::Workspace && config.network;
    Some(SandboxSpec {
        writable,
        read_only: protected_paths(project),
        private_tmp: private_tmp(),
        network,
        limits: config.limits,
        pass_env: config.pass_env.clone(),
        // The `bash` tool adds its conversation's loopback.
        loopback: satchel_exec::Loopback::None,
    })
}

/// An `exec.writable` entry (`~/` was expanded when the settings were
/// read): a relative path is the project's.
fn resolve(project: &Path, path: &Path) -> PathBuf {
    project.join(path)
}

/// Paths in the project no confined call may change: `.agents` (the
/// policy), `.git/hooks` and `.git/config` (code that runs later, outside
/// any sandbox).
pub fn protected_paths(project: &Path) -> Vec<PathBuf> {
    [".agents", ".git/hooks", ".git/config"]
        .iter()
        .map(|path| project.join(path))
        .collect()
}

/// This process's private temporary directory (`TMPDIR` of sandboxed
/// commands), made on first use under the system's:
/// `$TMPDIR/satchel-<uid>/<pid>`. Directories of processes that are gone
/// are removed then.
pub fn private_tmp() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let uid = rustix::process::getuid().as_raw();
        let parent = std::env::temp_dir().join(format!("satchel-{uid}"));
        remove_stale(&parent);
        let dir = parent.join(std::process::id().to_string());
        let owned = |path: &Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir() && m.uid() == uid)
        };
        let made = std::fs::create_dir_all(&dir).and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700))
        });
        // Someone else's directory in a shared /tmp is never used.
        let made = made.and_then(|()| {
            if owned(&parent) && owned(&dir) {
                Ok(())
            } else {
                Err(std::io::Error::other("owned by another user"))
            }
        });
        match made {
            Ok(()) => Some(dir),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "no private temporary directory; /tmp stays read-only in the sandbox");
                None
            }
        }
    })
    .clone()
}

fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
