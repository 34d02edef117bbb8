//! The half of the sandbox that runs in std's fork, between fork and exec
//! (what [`super::launch`] does not start: background processes, and any
//! command where namespaces cannot be made).
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

use std::io;

use super::plan::{ChildPlan, Namespaces, restrict};
use super::syscalls::{check, write_file};

/// Confines the calling child. Returns in the process that goes on to
/// exec the command; with namespaces the two processes forked on the way
/// never return.
///
/// # Safety
/// Call only between fork and exec, in a single-threaded child.
pub(crate) unsafe fn confine(plan: &ChildPlan) -> io::Result<()> {
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

/// New user, mount and PID namespaces for the child (and a network one
/// with only `lo`, up, when `own_network`), every mount read-only but the
/// writable paths.
pub(super) unsafe fn enter_namespaces(ns: &Namespaces, own_network: bool) -> io::Result<()> {
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
