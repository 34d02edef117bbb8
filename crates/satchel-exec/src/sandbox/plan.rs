//! What a sandboxed child applies, built in the parent ([`ChildPlan`]),
//! and the steps that end it in the process that execs the command: the
//! limits, Landlock, no capabilities, seccomp ([`restrict`]), and, in a
//! PID namespace, its own `/proc` ([`mount_proc`]). Shared by the process
//! std forks ([`super::child`]) and those it starts inside the namespaces
//! ([`super::split`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

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
    /// The Landlock ruleset's descriptor, applied by the process that
    /// execs and never consumed there: that process may share Satchel's
    /// memory ([`super::launch`]), so it must leave the parent's values
    /// as they were.
    pub(crate) ruleset: Option<OwnedFd>,
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
pub(super) fn restrict(plan: &ChildPlan) -> io::Result<()> {
    for &(resource, value) in &plan.rlimits {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: a plain system call on a stack value.
        check(unsafe { libc::setrlimit(resource, &limit) })?;
    }
    if let Some(ruleset) = &plan.ruleset {
        // What `RulesetCreated::restrict_self` does, on a borrowed
        // descriptor: no new privileges, then the ruleset.
        // SAFETY: prctl with plain values; landlock_restrict_self on a
        // descriptor the plan keeps open.
        unsafe {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            let restricted =
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32);
            check(i32::try_from(restricted).unwrap_or(-1))?;
        }
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

/// Sandboxed commands run without capabilities, even as root: every set
/// is emptied, and securebits, locked, keep exec from granting root any
/// (`no_new_privs` already makes file capabilities and set-user-ID bits
/// inert), so none can be had back. Two system calls: emptying the
/// bounding set took one per capability, each making new credentials.
/// Fails quietly where the caller has none to drop.
fn drop_capabilities() {
    /// `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP` and
    /// `SECBIT_NO_CAP_AMBIENT_RAISE`, each with its lock, and
    /// `SECBIT_KEEP_CAPS` locked off.
    const SECURE_BITS: libc::c_ulong = 0b1110_1111;
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit halves per set.
    const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Sets {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [Sets {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: prctl with integer arguments; capset reads the two structs,
    // which outlive the call. Securebits first: setting them needs
    // CAP_SETPCAP, which capset then drops. Ambient capabilities go with
    // the permitted ones.
    unsafe {
        libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0);
        libc::syscall(libc::SYS_capset, &header, none.as_ptr());
    }
}
