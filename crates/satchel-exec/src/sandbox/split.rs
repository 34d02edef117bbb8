//! The processes of a namespaced command, started without copying
//! Satchel's memory.
//!
//! C1 has entered the namespaces: either std's fork of Satchel
//! ([`super::child`], for a background process) or a clone sharing
//! Satchel's memory ([`super::launch`]). It starts C2, the
//! PID namespace's init, with `clone(CLONE_VM)`: C2 runs on a stack of its
//! own in C1's memory. C2 mounts the namespace's `/proc` and starts C3
//! with `clone(CLONE_VM | CLONE_VFORK)`; C3 confines itself and execs the
//! command, and C2 goes on once it has (or has failed to). C2 tells C1 the
//! start's outcome on the outcome pipe, then reaps orphans until the
//! command ends, writes its wait status on the status pipe and exits,
//! which ends the namespace and kills whatever is left in it: `setsid`
//! and double-forked processes end with the call.
//!
//! - std's fork ([`run_in_namespace`]): C1 hands a failed start back to
//!   std, which reports it as the spawn's error, or waits for C2 and ends
//!   the way the command did, so the runner sees the command's own
//!   status.
//! - the launch ([`start_for_satchel`]): C2 is made with `CLONE_PARENT`,
//!   Satchel's own child, and starts the command's session; C1 leaves the
//!   outcome to Satchel and exits, and Satchel reads the status itself.
//!
//! Signals to the process group reach the command; C1 and C2 ignore the
//! polite ones and die with SIGKILL like everything else.
//!
//! Why clones: a fork copies the page tables of every mapping that holds
//! private pages, and Satchel's process has many (its relocated data, the
//! heaps, thread stacks). When C2 and C3 were forks as well, every command
//! paid for three copies and three teardowns; now it pays for one, or
//! none.
//!
//! Processes that share memory share the C library's per-thread state,
//! `errno` among it, and would share whatever a signal handler inherited
//! from Satchel touches. So, as `posix_spawn` does, every signal is
//! blocked before the first clone and every handled one set back to its
//! default (exec would have); each process unblocks only once the next is
//! started, C3 just before it execs. C1 and C2 then run at the same time,
//! each only blocking in `read` or `waitpid`, and neither reads `errno`
//! except after a call that failed; once C2 has said how the start went,
//! it makes only raw system calls, which never write `errno`.

use std::convert::Infallible;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::fd::BorrowedFd;
use rustix::process::WaitOptions;

use super::plan::{ChildPlan, mount_proc, restrict};
use super::stacks::Stacks;
use super::syscalls::check;

/// What the processes share, on C1's stack: alive until C1 has the
/// start's outcome and, when the start failed, has waited for C2.
struct Shared {
    plan: *const ChildPlan,
    /// The start's outcome: C2 writes it, C1 reads it.
    outcome_read: libc::c_int,
    outcome_write: libc::c_int,
    /// Where C2 writes the command's wait status once it has ended.
    status_write: libc::c_int,
    /// The signal mask the command starts with, restored in each process
    /// once it is safe to take signals.
    mask: libc::sigset_t,
    /// The top of C3's stack.
    command_stack: *mut libc::c_void,
    /// Set by C3 when it could not exec: the error number.
    exec_error: AtomicI32,
    /// C2 is Satchel's own child ([`start_for_satchel`]): it starts the
    /// command's session, and C1 does not wait for it.
    satchels_child: bool,
}

/// In C1, std's fork, inside the namespaces: starts C2 and, through it,
/// the command. Returns only the error of a start that failed; otherwise
/// this process waits for the command and ends as it did.
///
/// # Safety
/// Call only between fork and exec, in a single-threaded child, with
/// `plan.exec` set.
pub(super) unsafe fn run_in_namespace(plan: &ChildPlan) -> io::Error {
    // SAFETY: forwarded from the caller.
    match unsafe { relay_start(plan) } {
        Err(error) => error,
        Ok(never) => match never {},
    }
}

unsafe fn relay_start(plan: &ChildPlan) -> io::Result<Infallible> {
    // SAFETY: system calls on stack values; the stacks are mapped for the
    // clones and never unmapped (this process ends without returning to
    // std), and `shared` outlives every use C2 and C3 make of it.
    unsafe {
        let (outcome, status) = (pipe()?, pipe()?);
        let stacks = Stacks::map(2)?;
        let mask = block_signals_and_default_handlers()?;
        let shared = Shared {
            plan: ptr::from_ref(plan),
            outcome_read: outcome[0],
            outcome_write: outcome[1],
            status_write: status[1],
            mask,
            command_stack: stacks.top(1),
            exec_error: AtomicI32::new(0),
            satchels_child: false,
        };
        let init = libc::clone(
            init_main,
            stacks.top(0),
            libc::CLONE_VM | libc::SIGCHLD,
            ptr::from_ref(&shared).cast_mut().cast(),
        );
        std::mem::forget(stacks);
        // From here SIGTERM and its kin are for the command (see `relay`).
        ignore_polite_signals();
        libc::sigprocmask(libc::SIG_SETMASK, &shared.mask, ptr::null_mut());
        let init = check(init)?;
        libc::close(status[1]);
        match read_outcome(&shared) {
            Ok(()) => relay(init, status[0]),
            Err(error) => {
                // C2 exits at once after a failed start; once it has,
                // nothing refers to `shared` and this frame may go.
                while libc::waitpid(init, ptr::null_mut(), 0) < 0 && errno() == libc::EINTR {}
                Err(error)
            }
        }
    }
}

/// In C1, a clone sharing Satchel's memory ([`super::launch`]), inside the
/// namespaces: starts C2 as Satchel's own child and, through it, the
/// command, which starts with an empty signal mask. C2 writes the
/// command's wait status to `status_write`. Returns C2's pid and whether
/// the command started; C2 exits at once when it did not, and Satchel
/// reaps it.
///
/// # Safety
/// Call only in that clone, with every signal blocked, while Satchel's
/// spawning thread waits for it, and with `plan.exec` set.
pub(super) unsafe fn start_for_satchel(
    plan: &ChildPlan,
    status_write: libc::c_int,
    init_stack: *mut libc::c_void,
    command_stack: *mut libc::c_void,
) -> io::Result<(libc::pid_t, io::Result<()>)> {
    // SAFETY: as in `relay_start`; the caller keeps the stacks mapped
    // until C2 has been reaped.
    unsafe {
        let outcome = pipe()?;
        let mut mask = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        let shared = Shared {
            plan: ptr::from_ref(plan),
            outcome_read: outcome[0],
            outcome_write: outcome[1],
            status_write,
            mask,
            command_stack,
            exec_error: AtomicI32::new(0),
            satchels_child: true,
        };
        // Its exit signal is C1's (none): CLONE_PARENT ignores this one.
        let init = check(libc::clone(
            init_main,
            init_stack,
            libc::CLONE_VM | libc::CLONE_PARENT,
            ptr::from_ref(&shared).cast_mut().cast(),
        ))?;
        Ok((init, read_outcome(&shared)))
    }
}

/// In C1: closes its end for writing and reads what C2 says of the start.
/// C2 has stopped using `shared` once this returns.
unsafe fn read_outcome(shared: &Shared) -> io::Result<()> {
    // SAFETY: descriptor calls on this process's own table.
    unsafe {
        libc::close(shared.outcome_write);
        let mut outcome = [0u8; 4];
        let read = read_exact(shared.outcome_read, &mut outcome);
        libc::close(shared.outcome_read);
        match i32::from_ne_bytes(outcome) {
            _ if !read => Err(io::Error::other(
                "the sandbox's init ended before the command started",
            )),
            0 => Ok(()),
            error => Err(io::Error::from_raw_os_error(error)),
        }
    }
}

fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok(fds)
}

/// Blocks every signal and sets each that has a handler (inherited from
/// Satchel) back to its default ([`default_handlers`]). Returns the mask
/// to restore.
unsafe fn block_signals_and_default_handlers() -> io::Result<libc::sigset_t> {
    // SAFETY: a signal-mask call on stack values.
    unsafe {
        let mut all = std::mem::zeroed();
        let mut old = std::mem::zeroed();
        libc::sigfillset(&mut all);
        check(libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old))?;
        default_handlers();
        Ok(old)
    }
}

/// Sets each signal that has a handler (inherited from Satchel) back to
/// its default; ignored ones stay ignored, as across exec. Call with every
/// signal blocked, in a process of its own signal dispositions.
pub(super) unsafe fn default_handlers() {
    // SAFETY: disposition calls on stack values.
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, ptr::null(), &mut action) != 0 {
                continue;
            }
            if action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, ptr::null_mut());
            }
        }
    }
}

/// C2, PID 1 of the namespace.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is C1's `Shared`, alive while this process reads it
    // (until C1 has read the outcome).
    let shared = unsafe { &*arg.cast::<Shared>() };
    let (status_write, outcome_write, mask) =
        (shared.status_write, shared.outcome_write, shared.mask);
    // SAFETY: this process shares C1's memory; C1 only waits meanwhile.
    let started = unsafe { start_command(shared) };
    let error = match &started {
        Ok(_) => 0,
        Err(error) => os_error(error),
    };
    // SAFETY: descriptor calls, then a write of a stack buffer; this
    // process never returns. The descriptors are moved first, while C1
    // still waits: a failed C library call writes `errno`, which this
    // process shares with the thread that started it.
    unsafe {
        keep_only_fds(status_write, outcome_write);
        libc::write(4, error.to_ne_bytes().as_ptr().cast(), 4);
        libc::close(4);
        match started {
            Ok(command) => reap(command, &mask),
            Err(_) => libc::_exit(127),
        }
    }
}

/// In C2: its own session when it is Satchel's child, the namespace's
/// `/proc`, then C3, which execs the command.
unsafe fn start_command(shared: &Shared) -> io::Result<libc::pid_t> {
    // SAFETY: descriptor, prctl and poll calls on plain values; the plan
    // is read while C3 does not run (it is started below, and this process
    // waits while it runs).
    unsafe {
        libc::close(shared.outcome_read);
        if shared.satchels_child {
            check(libc::setsid())?;
        }
        check(libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
        ))?;
        // C1 may have died before the signal was armed (it is PID 1's
        // parent, or its sibling, so `getppid` says nothing): then the
        // outcome pipe has no reader.
        let mut reader = libc::pollfd {
            fd: shared.outcome_write,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut reader, 1, 0) > 0 && reader.revents & libc::POLLERR != 0 {
            libc::_exit(1);
        }
        let plan = &*shared.plan;
        mount_proc(plan.namespaces.as_ref().and_then(|n| n.pid_max.as_deref()))?;
        let command = check(libc::clone(
            command_main,
            shared.command_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            ptr::from_ref(shared).cast_mut().cast(),
        ))?;
        // C3 has exec'd, or exited having failed to.
        ignore_polite_signals();
        match shared.exec_error.load(Ordering::Acquire) {
            0 => Ok(command),
            error => {
                libc::waitpid(command, ptr::null_mut(), 0);
                Err(io::Error::from_raw_os_error(error))
            }
        }
    }
}

/// C3: confines itself and execs the command.
extern "C" fn command_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is C1's `Shared`; C2 is suspended until this process
    // execs or exits, and C1 is blocked reading the outcome pipe.
    let shared = unsafe { &*arg.cast::<Shared>() };
    // SAFETY: as above: nothing else touches the plan meanwhile.
    let error = exec_command(unsafe { &*shared.plan }, &shared.mask);
    shared.exec_error.store(os_error(&error), Ordering::Release);
    // SAFETY: ends this process only.
    unsafe { libc::_exit(127) }
}

/// Returns only the error that stopped the command from starting.
fn exec_command(plan: &ChildPlan, mask: &libc::sigset_t) -> io::Error {
    // SAFETY: prctl with plain values.
    let armed = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    if let Err(error) = check(armed) {
        return error;
    }
    if let Err(error) = restrict(plan) {
        return error;
    }
    // SAFETY: restores the command's mask, on a value copied before the
    // clone; signals now take their default actions, as after exec.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, mask, ptr::null_mut()) };
    match &plan.exec {
        Some(target) => target.execve(),
        None => io::Error::other("no program was resolved for the sandbox"),
    }
}

/// C1 as std's fork: waits for the namespace's PID 1, then ends as the
/// command did.
unsafe fn relay(init: libc::pid_t, status_read: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls only; this process never returns.
    unsafe {
        keep_only_fds(status_read, -1);
        let mut init_status = 0;
        while libc::waitpid(init, &mut init_status, 0) < 0 && errno() == libc::EINTR {}
        let mut bytes = [0u8; 4];
        let status = if read_exact(3, &mut bytes) {
            i32::from_ne_bytes(bytes)
        } else {
            init_status
        };
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut set = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }
}

/// C2, PID 1 of the namespace: reaps orphans until the command ends, then
/// writes its wait status on descriptor 3 and exits, which ends the
/// namespace.
///
/// Raw system calls only (rustix's never touch `errno`): when C2 is
/// Satchel's child, it shares Satchel's memory while the thread that
/// started it runs again, and a C library call that failed would write
/// that thread's `errno`.
unsafe fn reap(command: libc::pid_t, mask: &libc::sigset_t) -> ! {
    // SAFETY: a signal mask change (which cannot fail with a valid set)
    // and raw system calls; this process never returns.
    unsafe {
        libc::sigprocmask(libc::SIG_SETMASK, mask, ptr::null_mut());
        let status = BorrowedFd::borrow_raw(3);
        loop {
            match rustix::process::waitpid(None, WaitOptions::empty()) {
                Ok(Some((pid, wait))) if pid.as_raw_nonzero().get() == command => {
                    let _ = rustix::io::write(status, &wait.as_raw().to_ne_bytes());
                    libc::_exit(0);
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => libc::_exit(1),
            }
        }
    }
}

/// Reads exactly `buffer.len()` bytes; false at end of file or on error.
unsafe fn read_exact(fd: libc::c_int, buffer: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: reads into the unfilled part of `buffer`.
        let read =
            unsafe { libc::read(fd, buffer[done..].as_mut_ptr().cast(), buffer.len() - done) };
        match read {
            n if n > 0 => done += n.unsigned_abs(),
            n if n < 0 && errno() == libc::EINTR => {}
            _ => return false,
        }
    }
    true
}

/// Moves `fd` to 3 and `second` (unless -1) to 4, and closes every other
/// descriptor above 2, among them the runner's exec-error pipe, which must
/// close when the command execs.
unsafe fn keep_only_fds(fd: libc::c_int, second: libc::c_int) {
    // SAFETY: descriptor calls on this process's own table. Both are
    // copied above 4 before either is moved, so that neither move
    // overwrites the other.
    unsafe {
        let fd = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 5);
        let second = if second >= 0 {
            libc::fcntl(second, libc::F_DUPFD_CLOEXEC, 5)
        } else {
            -1
        };
        libc::dup2(fd, 3);
        let mut first_closed = 4u32;
        if second >= 0 {
            libc::dup2(second, 4);
            first_closed = 5;
        }
        libc::syscall(libc::SYS_close_range, first_closed, u32::MAX, 0u32);
    }
}

/// SIGTERM and its kin are for the command: the processes that stand
/// between it and the runner outlive them and end when it does.
unsafe fn ignore_polite_signals() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: setting a disposition is async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
}

/// The error number to pass on for `error` (never 0, which means success).
pub(super) fn os_error(error: &io::Error) -> i32 {
    error
        .raw_os_error()
        .filter(|&code| code != 0)
        .unwrap_or(libc::EINVAL)
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
