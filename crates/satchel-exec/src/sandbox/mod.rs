//! The sandbox a child runs in: it may read everywhere but write only where
//! it is told to, reach no network unless allowed, see and signal no
//! process but its own, and takes every process it started with it when it
//! ends.
//!
//! Layers, each built in the parent (`plan`) and applied by the child
//! between fork and exec (`child`):
//! - **Landlock** (`rules`): writes only beneath the writable paths; TCP
//!   refused (ABI 4); signals and abstract unix sockets scoped to the
//!   sandbox (ABI 6). Required: without Landlock nothing is sandboxed and
//!   [`crate::run`] refuses to run the command ([`crate::ExecError::SandboxUnavailable`]).
//! - **seccomp** (`seccomp`): every other socket family, and io_uring.
//! - **Namespaces**, where the kernel allows them (see [`probe`]): new
//!   user, mount and PID namespaces; every mount read-only but the
//!   writable paths (so `chmod`, `chown` and times fail outside them), a
//!   `/proc` that shows only the sandbox, a process limit, and the end of
//!   every process when the command ends.
//! - **Limits** ([`Limits`]) and no capabilities, even as root.
//! - **Environment**: variables named like secrets are removed unless
//!   listed in [`SandboxSpec::pass_env`].

mod child;
mod exec_target;
mod handover;
mod launch;
mod limits;
mod loopback;
mod plan;
mod rules;
mod seccomp;
mod split;
mod stacks;
mod syscalls;

use std::ffi::{CString, OsString};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub(crate) use child::confine;
pub(crate) use exec_target::ExecTarget;
pub(crate) use launch::{Launched, can_launch, launch};
pub use limits::Limits;
pub use loopback::LoopbackNet;
pub(crate) use plan::ChildPlan;
pub(crate) use stacks::Stacks;

/// What a sandboxed child may do.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// Directories (and files) it may write; everything else is read-only.
    pub writable: Vec<PathBuf>,
    /// Paths inside writable directories that stay read-only (a project's
    /// `.git/hooks`, its `.agents`). Enforced where namespaces are
    /// available.
    pub read_only: Vec<PathBuf>,
    /// A writable directory named by `TMPDIR`.
    pub private_tmp: Option<PathBuf>,
    /// Whether it may use IPv4 and IPv6 sockets (TCP and UDP).
    pub network: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Secret-named variables passed in anyway.
    pub pass_env: Vec<String>,
    /// Without `network`: which loopback-only network the command has.
    /// Used where namespaces are; elsewhere no network.
    pub loopback: Loopback,
}

/// The loopback-only network of a command without `network`: 127.0.0.1
/// and nothing else (no other interface, no route).
#[derive(Debug, Clone, Default)]
pub enum Loopback {
    /// No network namespace: no IPv4 or IPv6 socket at all.
    #[default]
    None,
    /// A network namespace of the command's own, made with its other
    /// namespaces: its processes reach each other, and nothing outlives
    /// the command.
    Own,
    /// A namespace to join, shared with other commands (a conversation's):
    /// a server one of them starts is reachable by the others.
    Shared(Arc<LoopbackNet>),
}

impl PartialEq for Loopback {
    fn eq(&self, other: &Loopback) -> bool {
        match (self, other) {
            (Loopback::Shared(a), Loopback::Shared(b)) => Arc::ptr_eq(a, b),
            (Loopback::None, Loopback::None) | (Loopback::Own, Loopback::Own) => true,
            _ => false,
        }
    }
}

impl PartialEq for SandboxSpec {
    fn eq(&self, other: &SandboxSpec) -> bool {
        self.writable == other.writable
            && self.read_only == other.read_only
            && self.private_tmp == other.private_tmp
            && self.network == other.network
            && self.limits == other.limits
            && self.pass_env == other.pass_env
            && self.loopback == other.loopback
    }
}

impl SandboxSpec {
    /// Writes beneath `writable`, the default limits, no network, no
    /// secrets.
    pub fn new(writable: Vec<PathBuf>) -> SandboxSpec {
        SandboxSpec {
            writable,
            read_only: Vec::new(),
            private_tmp: None,
            network: false,
            limits: Limits::default(),
            pass_env: Vec::new(),
            loopback: Loopback::None,
        }
    }
}

/// What was enforced, told truthfully to the caller (and the model).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SandboxReport {
    /// No sandbox was asked for.
    #[default]
    NotRequested,
    /// Landlock and seccomp confine writes and sockets.
    Enforced {
        /// No IPv4 or IPv6 sockets (but on the loopback of its own
        /// namespace when `loopback`).
        network_blocked: bool,
        /// In a loopback-only network namespace: its own, or shared with
        /// the conversation's other commands.
        loopback: Option<LoopbackKind>,
        /// In namespaces of its own: processes, `/proc`, metadata outside
        /// the writable paths, and every process ending with the command.
        isolated: bool,
    },
}

impl SandboxReport {
    /// The sandbox in a few words, for the model and the record.
    pub fn describe(&self) -> String {
        match self {
            SandboxReport::NotRequested => "none".to_owned(),
            SandboxReport::Enforced {
                network_blocked,
                loopback,
                isolated,
            } => format!(
                "landlock+seccomp: writes only to the writable paths; {}; {}",
                if *loopback == Some(LoopbackKind::Shared) {
                    "loopback only (its own, shared with this conversation's commands)"
                } else if *loopback == Some(LoopbackKind::Own) {
                    "loopback only (the command's own)"
                } else if *network_blocked {
                    "no network"
                } else {
                    "network allowed"
                },
                if *isolated {
                    "own process namespace (processes end with the command)"
                } else {
                    "no namespaces on this system (other processes visible)"
                }
            ),
        }
    }
}

/// Which loopback-only network a command had ([`SandboxReport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopbackKind {
    /// A namespace of its own ([`Loopback::Own`]).
    Own,
    /// A namespace shared with other commands ([`Loopback::Shared`]).
    Shared,
}

/// What this kernel can enforce, found once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// Landlock's ABI version; 0 without Landlock.
    pub landlock_abi: i32,
    /// Whether new user, mount and PID namespaces can be made, or why not.
    pub namespaces: Result<(), String>,
    /// Whether a namespace can have its own process limit (Linux 6.14).
    pub process_limit: bool,
}

impl SandboxSupport {
    /// `Err` with the cause when nothing can be sandboxed here.
    pub fn available(&self) -> Result<(), String> {
        if self.landlock_abi >= 1 {
            Ok(())
        } else {
            Err(
                "this kernel has no Landlock (Linux 5.13 or later with Landlock enabled, \
                 and not forbidden by the container), so commands cannot be sandboxed"
                    .to_owned(),
            )
        }
    }
}

/// Set to `landlock` or `namespaces` (comma-separated) to behave as if the
/// kernel lacked them: for tests of the fallbacks, and for checking them.
pub const DISABLE_ENV: &str = "SATCHEL_SANDBOX_DISABLE";

/// What the kernel supports, probed on first use (a few milliseconds: one
/// short process in new namespaces). Running commands does not need it:
/// they assume namespaces work and ask the probe only when a spawn fails
/// (`namespaces_failed`).
pub fn probe() -> &'static SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let namespaces = if disabled("namespaces") {
            Err(format!("disabled by {DISABLE_ENV}"))
        } else {
            probe_namespaces(false)
        };
        let process_limit = namespaces.is_ok() && per_namespace_pid_max();
        SandboxSupport {
            landlock_abi: landlock_abi(),
            namespaces,
            process_limit,
        }
    })
}

/// `Err` with the cause when this system cannot sandbox at all (no
/// Landlock): one system call, once per process, no probe process.
pub fn available() -> Result<(), String> {
    SandboxSupport {
        landlock_abi: landlock_abi(),
        namespaces: Ok(()),
        process_limit: false,
    }
    .available()
}

fn disabled(what: &str) -> bool {
    #[expect(
        clippy::disallowed_methods,
        reason = "an operator's switch for a kernel feature that misbehaves, read where it applies"
    )]
    let value = std::env::var(DISABLE_ENV);
    value
        .unwrap_or_default()
        .split(',')
        .any(|d| d.trim() == what)
}

/// Landlock's ABI, asked of the kernel once (one system call).
fn landlock_abi() -> i32 {
    static ABI: OnceLock<i32> = OnceLock::new();
    *ABI.get_or_init(|| {
        if disabled("landlock") {
            return 0;
        }
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        // only returns the ABI version (or fails).
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32,
            )
        };
        i32::try_from(version).unwrap_or(0).max(0)
    })
}

/// Whether each PID namespace has its own pid_max (Linux 6.14). On older
/// kernels the file is the whole machine's, and a root sandbox writing it
/// would set the limit of every process: never written there.
fn per_namespace_pid_max() -> bool {
    static PER_NAMESPACE: OnceLock<bool> = OnceLock::new();
    *PER_NAMESPACE.get_or_init(|| {
        let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
            return false;
        };
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u32>().ok());
        let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        (major, minor) >= (6, 14)
    })
}

/// Whether commands use namespaces: until a spawn fails and the probe
/// finds them unavailable, they do.
static NAMESPACES_BROKEN: AtomicBool = AtomicBool::new(false);

fn namespaces_usable() -> bool {
    !NAMESPACES_BROKEN.load(Ordering::Relaxed) && !disabled("namespaces")
}

/// Whether commands asking for a network namespace of their own get one:
/// until a spawn with one fails where the other namespaces work.
static OWN_NETWORK_BROKEN: AtomicBool = AtomicBool::new(false);

/// Called when a spawn in namespaces failed with `error`: true when the
/// probe finds namespaces unavailable here, or when `spec` asked for a
/// network namespace of its own and the other namespaces work (the caller
/// then retries without them, and so does every later command: without a
/// network namespace of its own, a command has no sockets).
pub(crate) fn namespaces_failed(error: &std::io::Error, spec: Option<&SandboxSpec>) -> bool {
    let setup_errors = [
        libc::EPERM,
        libc::EACCES,
        libc::EINVAL,
        libc::ENOSPC,
        libc::ENOSYS,
        libc::EUSERS,
    ];
    if !error
        .raw_os_error()
        .is_some_and(|e| setup_errors.contains(&e))
    {
        return false;
    }
    if let Err(reason) = &probe().namespaces {
        tracing::warn!("sandboxing without namespaces: {reason}");
        NAMESPACES_BROKEN.store(true, Ordering::Relaxed);
        return true;
    }
    let own_network = spec.is_some_and(|spec| matches!(spec.loopback, Loopback::Own));
    // The error may be the command's own (a program it may not execute):
    // a probe says whether a network namespace is what failed.
    if own_network && !OWN_NETWORK_BROKEN.load(Ordering::Relaxed) {
        static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
        if let Err(reason) = PROBED.get_or_init(|| probe_namespaces(true)) {
            OWN_NETWORK_BROKEN.store(true, Ordering::Relaxed);
            tracing::warn!(
                "a network namespace cannot be made here ({reason}): sandboxed commands have no network"
            );
            return true;
        }
    }
    false
}

/// Runs `true` in new namespaces (without touching pid_max), with a
/// network namespace of its own when `own_network`.
fn probe_namespaces(own_network: bool) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    crate::make_children_reapable();
    let mut plan = ChildPlan {
        namespaces: Some(plan::Namespaces {
            uid_map: id_map(rustix::process::getuid().as_raw()),
            gid_map: id_map(rustix::process::getgid().as_raw()),
            writable: Vec::new(),
            read_only: Vec::new(),
            cwd: c"/".to_owned(),
            pid_max: None,
        }),
        rlimits: Vec::new(),
        ruleset: None,
        filter: None,
        join: None,
        own_network,
        exec: None,
    };
    #[expect(
        clippy::disallowed_methods,
        reason = "the sandbox's own probe: a child confined as the runner's would be"
    )]
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "true"])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    plan.exec = Some(
        ExecTarget::of(&command, false)
            .map_err(|error| format!("cannot find /bin/sh for the probe: {error}"))?,
    );
    // SAFETY: `confine` makes only async-signal-safe calls on memory
    // prepared above.
    unsafe {
        command.pre_exec(move || confine(&plan));
    }
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("a test process in them failed ({status})")),
        Err(error) => Err(format!(
            "cannot create user, mount and PID namespaces: {error}"
        )),
    }
}

/// The one line of `uid_map` or `gid_map`: the caller keeps its own id and
/// every other id is unmapped (a process may map only itself once inside;
/// root gets no power over files of other owners).
fn id_map(id: u32) -> Vec<u8> {
    format!("{id} {id} 1\n").into_bytes()
}

/// A spec turned into what the child applies and what the parent tells.
pub(crate) struct Prepared {
    pub(crate) plan: ChildPlan,
    pub(crate) report: SandboxReport,
    /// `TMPDIR` for the child.
    pub(crate) tmpdir: Option<OsString>,
}

/// Builds everything in the parent. `Err` explains why the kernel cannot
/// sandbox (the caller refuses to run the command).
pub(crate) fn prepare(spec: &SandboxSpec, cwd: &Path) -> Result<Prepared, String> {
    available()?;
    let landlock_abi = landlock_abi();
    let mut writable = spec.writable.clone();
    writable.extend(spec.private_tmp.iter().cloned());
    let isolated = namespaces_usable();
    // Sockets are allowed where the only network is the namespace's loopback.
    let loopback = match &spec.loopback {
        _ if !isolated || spec.network => None,
        Loopback::None => None,
        Loopback::Own if OWN_NETWORK_BROKEN.load(Ordering::Relaxed) => None,
        Loopback::Own => Some((LoopbackKind::Own, None)),
        Loopback::Shared(net) => Some((
            LoopbackKind::Shared,
            Some((net.user.as_raw_fd(), net.net.as_raw_fd())),
        )),
    };
    let sockets = spec.network || loopback.is_some();
    let ruleset = rules::ruleset(&writable, sockets, landlock_abi)
        .map_err(|error| format!("cannot build the Landlock ruleset: {error}"))?;
    // Landlock is known to be there, so the ruleset has its descriptor.
    let ruleset = Option::<std::os::fd::OwnedFd>::from(ruleset)
        .ok_or_else(|| "the kernel made no Landlock ruleset".to_owned())?;
    let filter = seccomp::filter(sockets)?;
    let namespaces = if isolated {
        Some(namespaces_of(spec, cwd, per_namespace_pid_max())?)
    } else {
        None
    };
    let tmpdir = spec.private_tmp.clone().map(PathBuf::into_os_string);
    Ok(Prepared {
        plan: ChildPlan {
            namespaces,
            rlimits: spec.limits.rlimits(),
            ruleset: Some(ruleset),
            filter: Some(filter),
            join: loopback.and_then(|(_, join)| join),
            own_network: matches!(loopback, Some((LoopbackKind::Own, _))),
            exec: None,
        },
        report: SandboxReport::Enforced {
            network_blocked: !spec.network,
            loopback: loopback.map(|(kind, _)| kind),
            isolated,
        },
        tmpdir,
    })
}

fn namespaces_of(
    spec: &SandboxSpec,
    cwd: &Path,
    process_limit: bool,
) -> Result<plan::Namespaces, String> {
    let c_path = |path: &Path| {
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("path `{}` contains a NUL byte", path.display()))
    };
    // Only existing directories and files can be bound; devices need no
    // bind (writes to them pass read-only mounts).
    let existing = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths
            .iter()
            .filter(|path| path.is_dir() || path.is_file())
            .cloned()
            .collect()
    };
    let mut writable = existing(&spec.writable);
    writable.extend(spec.private_tmp.iter().filter(|tmp| tmp.is_dir()).cloned());
    let bindable = |paths: &[PathBuf]| -> Result<Vec<CString>, String> {
        paths.iter().map(|path| c_path(path)).collect()
    };
    Ok(plan::Namespaces {
        uid_map: id_map(rustix::process::getuid().as_raw()),
        gid_map: id_map(rustix::process::getgid().as_raw()),
        writable: bindable(&writable)?,
        read_only: bindable(&existing(&spec.read_only))?,
        cwd: c_path(cwd)?,
        pid_max: spec
            .limits
            .processes
            .filter(|_| process_limit)
            // The kernel's floor for pid_max is 301.
            .map(|n| n.saturating_add(1).max(301).to_string().into_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_prepares_or_explains() {
        let spec = SandboxSpec::new(vec![std::env::temp_dir()]);
        match prepare(&spec, Path::new("/")) {
            Ok(prepared) => assert!(matches!(
                prepared.report,
                SandboxReport::Enforced {
                    network_blocked: true,
                    ..
                }
            )),
            Err(reason) => assert!(reason.contains("Landlock"), "{reason}"),
        }
    }

    #[test]
    fn each_keeps_their_own_id() {
        assert_eq!(id_map(0), b"0 0 1\n");
        assert_eq!(id_map(1000), b"1000 1000 1\n");
    }
}
