//! The half of the sandbox that runs in the child, between fork and exec.
//!
//! Everything is prepared in the parent ([`ChildPlan`]); here only
//! async-signal-safe system calls run, on memory allocated before the fork.
//!
//! With namespaces the child (C1) enters new user, mount and PID
//! namespaces and makes every mount read-only except the writable paths
//! (so `chmod`, `chown` and times fail outside them too); [`super::split`]
//! then starts the namespace's PID 1 and the command's process from it,
//! as clones that share C1's memory rather than copies of it. Without
//! namespaces the child confines itself and returns to std, which execs.

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

/// Confines the calling child. Returns in the process that goes on to
/// exec the command; with namespaces the two processes forked on the way
/// never return.
///
/// # Safety
/// Call only between fork and exec, in a single-threaded child.
pub(crate) unsafe fn confine(plan: &mut ChildPlan) -> io::Result<()> {
    // This process and the two it may fork are copies of Satchel (keys,
    // conversations): never dumped, never traced.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prctl and setrlimit with plain values.
    unsafe {
        check(libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0))?;
        check(libc::setrlimit(libc::RLIMIT_CORE, &no_core))?;
    }
    if let Some(namespaces) = &plan.namespaces {
        if let Some((user, net)) = plan.join {
            super::loopback::join(user, net)?;
        }
        // SAFETY: forwarded from the caller.
        unsafe { enter_namespaces(namespaces, plan.own_network)? };
        // SAFETY: forwarded from the caller; returns only on failure.
        return Err(unsafe { super::split::run_in_namespace(plan) });
    }
    restrict(plan)
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

/// New user, mount and PID namespaces for the child (and a network one
/// with only `lo`, up, when `own_network`), every mount read-only but the
/// writable paths.
unsafe fn enter_namespaces(ns: &Namespaces, own_network: bool) -> io::Result<()> {
    let network = if own_network { libc::CLONE_NEWNET } else { 0 };
    // SAFETY: system calls on C strings and buffers that outlive them.
    unsafe {
        check(libc::unshare(
            libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | network,
        ))?;
        // Needed before an unprivileged gid_map; absent on old kernels.
        let _ = write_file(c"/proc/self/setgroups", b"deny");
        write_file(c"/proc/self/uid_map", &ns.uid_map)?;
        write_file(c"/proc/self/gid_map", &ns.gid_map)?;
        if own_network {
            super::loopback::loopback_up()?;
        }
        let root = c"/";
        check(libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        set_read_only(root.as_ptr(), true)?;
        for path in &ns.writable {
            bind(path.as_ptr(), path.as_ptr())?;
            set_read_only(path.as_ptr(), false)?;
        }
        for path in &ns.read_only {
            bind(path.as_ptr(), path.as_ptr())?;
            set_read_only(path.as_ptr(), true)?;
        }
        // The old working directory is on the mount beneath the new ones.
        check(libc::chdir(ns.cwd.as_ptr()))?;
    }
    Ok(())
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

unsafe fn bind(source: *const libc::c_char, target: *const libc::c_char) -> io::Result<()> {
    // SAFETY: forwarded from the caller: valid C strings.
    check(unsafe {
        libc::mount(
            source,
            target,
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// `struct mount_attr` of `mount_setattr(2)` (Linux 5.12).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 1;

/// Sets or clears read-only on the mount at `path` and every mount below.
unsafe fn set_read_only(path: *const libc::c_char, read_only: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid C string and a struct that outlives the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path,
            libc::AT_RECURSIVE,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(i32::try_from(result).unwrap_or(-1)).map(drop)
}
