//! Starting a command in namespaces without copying Satchel's memory.
//!
//! std's spawn forks, and a fork copies the page tables of every mapping
//! that holds private pages; while the copy lives, each page Satchel
//! writes is copied again, and when it ends the copy is torn down. Where
//! the forked process would live as long as the command (std's C1, the
//! relay of [`super::split`]), every sandboxed command paid all three.
//!
//! [`launch`] starts the command the way `posix_spawn` does: C1 is
//! `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, and the
//! spawning thread waits until C1 ends. C1 sets up the command's stdio
//! and signals, enters the namespaces and starts C2, the namespace's
//! PID 1, with `CLONE_PARENT`: C2 is Satchel's own child. C1 ends once
//! the command has exec'd or failed to. C2 starts the command's session,
//! reaps orphans until the command ends, writes its wait status on the
//! status pipe and exits, which ends the namespace.
//!
//! C1 shares Satchel's memory, so it must not change what belongs to
//! the memory rather than the process: it does not mark it undumpable (a
//! fork does); Landlock, which C3 always applies, is what keeps the
//! command from tracing C1 and C2. C1 may still join a conversation's
//! loopback: `setns` into a user namespace is refused to a thread of a
//! group or a process sharing its filesystem context, not to one sharing
//! memory. Background processes, whose pipes or terminal std and
//! pty-process own, are still forked ([`super::confine`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

use super::child::enter_namespaces;
use super::plan::ChildPlan;
use super::split::{default_handlers, os_error, start_for_satchel};
use super::stacks::Stacks;
use super::syscalls::check;

/// A command started in its namespaces.
pub(crate) struct Launched {
    /// C2, the namespace's PID 1: Satchel's child, its session's leader,
    /// and its process group's id.
    pub(crate) init: Pid,
    /// Where C2 writes the command's wait status before it exits.
    pub(crate) status: OwnedFd,
    /// C2 runs on one of these until it exits: keep them until it has
    /// been reaped.
    pub(crate) stacks: Stacks,
}

/// What C1 reads and writes, on the spawning thread's stack (which waits
/// while C1 runs).
struct Launch {
    plan: *const ChildPlan,
    stdio: [libc::c_int; 3],
    status_write: libc::c_int,
    init_stack: *mut libc::c_void,
    command_stack: *mut libc::c_void,
    /// C2's pid, once started.
    init: AtomicI32,
    /// The error number of a start that failed.
    error: AtomicI32,
}

/// Whether [`launch`] can start `plan`: one in namespaces.
pub(crate) fn can_launch(plan: &ChildPlan) -> bool {
    plan.namespaces.is_some() && plan.exec.is_some()
}

/// Starts the command of `plan` with `stdio` as its standard input,
/// output and error. `Err` when it did not start (nothing is left
/// running).
pub(crate) fn launch(plan: &ChildPlan, stdio: [BorrowedFd<'_>; 3]) -> io::Result<Launched> {
    if !can_launch(plan) {
        return Err(io::Error::other("this sandbox plan is started by a fork"));
    }
    // Above 2, so that moving them into place in C1 overwrites none (a
    // Satchel started with a standard stream closed hands that number out
    // again).
    let mut copies = Vec::new();
    let mut raw = [0; 3];
    for (slot, fd) in raw.iter_mut().zip(stdio) {
        *slot = if fd.as_raw_fd() > 2 {
            fd.as_raw_fd()
        } else {
            let copy = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
            let number = copy.as_raw_fd();
            copies.push(copy);
            number
        };
    }
    let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let stacks = Stacks::reused(3)?;
    let launch = Launch {
        plan: ptr::from_ref(plan),
        stdio: raw,
        status_write: status_write.as_raw_fd(),
        init_stack: stacks.top(1),
        command_stack: stacks.top(2),
        init: AtomicI32::new(0),
        error: AtomicI32::new(0),
    };
    // SAFETY: C1 runs on its own stack and touches only `launch`, the plan
    // and its own descriptor table while this thread waits (CLONE_VFORK);
    // every signal is blocked across the clone so that no handler of
    // Satchel's runs in it.
    let c1 = unsafe {
        let mut all = std::mem::zeroed();
        let mut old = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        // No exit signal: neither C1 nor C2 (which takes C1's through
        // CLONE_PARENT) sends Satchel a SIGCHLD, which would wake a thread
        // and the runtime's signal handling twice a command. Both are
        // waited for with `__WALL`.
        let c1 = libc::clone(
            launch_main,
            stacks.top(0),
            libc::CLONE_VM | libc::CLONE_VFORK,
            ptr::from_ref(&launch).cast_mut().cast(),
        );
        let cloned = check(c1);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
        cloned?
    };
    reap(c1);
    drop((status_write, copies));
    let (init, error) = (
        launch.init.load(Ordering::Acquire),
        launch.error.load(Ordering::Acquire),
    );
    match Pid::from_raw(init) {
        Some(init) if error == 0 => Ok(Launched {
            init,
            status: status_read,
            stacks,
        }),
        Some(_) => {
            // C2 exits at once after a failed start.
            reap(init);
            Err(io::Error::from_raw_os_error(error))
        }
        None if error != 0 => Err(io::Error::from_raw_os_error(error)),
        None => Err(io::Error::other(
            "the sandbox's first process ended before the command started",
        )),
    }
}

/// Waits for a child that has ended or is about to.
fn reap(pid: libc::pid_t) {
    // SAFETY: waitpid on a child of this process.
    while unsafe { libc::waitpid(pid, ptr::null_mut(), libc::__WALL) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
}

/// C1: starts the command, leaves the outcome in `Launch`, and exits.
extern "C" fn launch_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the spawning thread's `Launch`, alive while it
    // waits for this process.
    let launch = unsafe { &*arg.cast::<Launch>() };
    // SAFETY: this process has its own descriptor table and signal
    // dispositions; what it shares (memory) it only reads, but for
    // `launch`'s two results.
    match unsafe { start(launch) } {
        Ok((init, outcome)) => {
            launch.init.store(init, Ordering::Release);
            let error = outcome.err().map_or(0, |error| os_error(&error));
            launch.error.store(error, Ordering::Release);
        }
        Err(error) => launch.error.store(os_error(&error), Ordering::Release),
    }
    // SAFETY: ends this process only; the spawning thread goes on.
    unsafe { libc::_exit(0) }
}

unsafe fn start(launch: &Launch) -> io::Result<(libc::pid_t, io::Result<()>)> {
    // SAFETY: the plan outlives this process (the spawning thread waits).
    let plan = unsafe { &*launch.plan };
    let Some(namespaces) = &plan.namespaces else {
        return Err(io::Error::other("no namespaces in this plan"));
    };
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: disposition, descriptor and limit calls on stack values,
    // then the namespaces' own steps, as in a forked child.
    unsafe {
        default_handlers();
        // As std's spawn and `crate::run::default_interrupts` leave them.
        for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_DFL);
        }
        for (target, &fd) in (0..).zip(&launch.stdio) {
            check(libc::dup2(fd, target))?;
        }
        // C2 shares Satchel's memory: it must never dump it.
        check(libc::setrlimit(libc::RLIMIT_CORE, &no_core))?;
        if let Some((user, net)) = plan.join {
            super::loopback::join(user, net)?;
        }
        enter_namespaces(namespaces, plan.own_network)?;
        start_for_satchel(
            plan,
            launch.status_write,
            launch.init_stack,
            launch.command_stack,
        )
    }
}
