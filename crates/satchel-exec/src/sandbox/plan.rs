//! What a sandboxed child applies, built in the parent ([`ChildPlan`]),
//! and the steps that end it in the process that execs the command: the
//! limits, Landlock, no capabilities, seccomp ([`restrict`]), and, in a
//! PID namespace, its own `/proc` ([`mount_proc`]). Shared by the process
//! std forks ([`super::child`]) and those it starts inside the namespaces
//! ([`super::split`]).

use std::ffi::CString;
use std::io;

use landlock::RulesetCreated;
use seccompiler::BpfProgram;

use super::exec_target::ExecTarget;
use super::limits::Resource;
use super::syscalls::{check, write_file};

/// What the child does to confine itself.
pub(crate) struct ChildPlan {
    /// New namespaces, when the kernel allows them.
    pub(crate) namespaces: Option<Namespaces>,
    /// `setrlimit` calls.
    pub(crate) rlimits: Vec<(Resource, u64)>,
    /// The Landlock ruleset, taken by the child that applies it.
    pub(crate) ruleset: Option<RulesetCreated>,
    /// The seccomp filter.
    pub(crate) filter: Option<BpfProgram>,
    /// A user and a network namespace to join first (descriptors the
    /// parent holds open): a conversation's loopback.
    pub(crate) join: Option<(libc::c_int, libc::c_int)>,
    /// A network namespace of the command's own, its loopback up.
    pub(crate) own_network: bool,
    /// What the command's process execs when namespaces are entered: it
    /// is not std's process that execs then ([`super::split`]).
    pub(crate) exec: Option<ExecTarget>,
}

/// The namespace half of a plan, paths as C strings.
pub(crate) struct Namespaces {
    /// Lines for `/proc/self/uid_map` and `gid_map`.
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// Bound on themselves and left writable.
    pub(crate) writable: Vec<CString>,
    /// Bound on themselves read-only, after the writable ones (paths
    /// inside a writable directory that must not change).
    pub(crate) read_only: Vec<CString>,
    /// The working directory, entered again once the mounts are in place.
    pub(crate) cwd: CString,
    /// Written to the namespace's `/proc/sys/kernel/pid_max`: its process
    /// limit.
    pub(crate) pid_max: Option<Vec<u8>>,
}

/// The last steps before exec, in the process that execs: limits,
/// Landlock, no capabilities, no inherited descriptors, seccomp (last, so
/// that nothing before it needs a system call it refuses).
pub(super) fn restrict(plan: &mut ChildPlan) -> io::Result<()> {
    for &(resource, value) in &plan.rlimits {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: a plain system call on a stack value.
        check(unsafe { libc::setrlimit(resource, &limit) })?;
    }
    if let Some(ruleset) = plan.ruleset.take() {
        ruleset.restrict_self().map_err(io::Error::other)?;
    }
    drop_capabilities();
    // Descriptors Satchel inherited without close-on-exec (a socket from
    // whatever started it) do not reach the command; std's own exec-error
    // pipe is close-on-exec already.
    // SAFETY: close_range on this process's own table.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    match &plan.filter {
        Some(filter) => seccompiler::apply_filter(filter).map_err(|error| match error {
            seccompiler::Error::Seccomp(error) | seccompiler::Error::Prctl(error) => error,
            other => io::Error::other(other),
        }),
        None => Ok(()),
    }
}

/// A `/proc` of the namespace's own, and its process limit.
pub(super) unsafe fn mount_proc(pid_max: Option<&[u8]>) -> io::Result<()> {
    // SAFETY: system calls on static C strings.
    unsafe {
        check(libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))?;
    }
    if let Some(limit) = pid_max {
        // Kernels before 6.14 keep one pid_max for all namespaces and
        // refuse this write; the probe reports the limit as missing.
        let _ = write_file(c"/proc/sys/kernel/pid_max", limit);
    }
    Ok(())
}

/// Sandboxed commands run without capabilities, even as root: the bounding
/// set is emptied so exec grants none. Fails quietly where the caller has
/// none to drop.
fn drop_capabilities() {
    for capability in 0..64 {
        // SAFETY: prctl with integer arguments.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
}
