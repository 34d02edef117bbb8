//! The processes of a namespaced command, started without copying
//! Satchel's memory.
//!
//! C1, std's fork of Satchel, has entered the namespaces
//! ([`super::child`]). It starts C2, the PID namespace's init, with
//! `clone(CLONE_VM)`: C2 runs on a stack of its own in C1's memory. C2
//! mounts the namespace's `/proc` and starts C3 with
//! `clone(CLONE_VM | CLONE_VFORK)`; C3 confines itself and execs the
//! command, and C2 goes on once it has (or has failed to). C2 tells C1 the
//! start's outcome on the status pipe, then reaps orphans until the
//! command ends, passes its wait status on the same pipe and exits, which
//! ends the namespace and kills whatever is left in it: `setsid` and
//! double-forked processes end with the call. C1 hands a failed start back
//! to std, which reports it as the spawn's error, or waits and ends the
//! way the command did, so the runner sees the command's own status.
//! Signals to the process group reach the command; C1 and C2 ignore the
//! polite ones and die with SIGKILL like everything else.
//!
//! Why clones: a fork copies the page tables of every mapping that holds
//! private pages, and Satchel's process has many (its relocated data, the
//! heaps, thread stacks). When C2 and C3 were forks as well, every command
//! paid for three copies and three teardowns; now it pays for one.
//!
//! Processes that share memory share the C library's per-thread state,
//! `errno` among it, and would share whatever a signal handler inherited
//! from Satchel touches. So, as `posix_spawn` does, C1 blocks every signal
//! before the first clone and sets every handled one back to its default
//! (exec would have); each process unblocks only once the next is
//! started, C3 just before it execs. C1 and C2 then run at the same time,
//! each only blocking in `read` or `waitpid`, and neither reads `errno`
//! except after a call that failed.

use std::convert::Infallible;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use super::plan::{ChildPlan, mount_proc, restrict};
use super::syscalls::check;

/// Each clone's stack. Only the pages touched are ever allocated.
const STACK_SIZE: usize = 256 * 1024;
/// An inaccessible region below each stack, so an overflow faults rather
/// than writing into the other stack (a multiple of every page size).
const GUARD_SIZE: usize = 64 * 1024;

/// What the three processes share, on C1's stack: alive until C1 has the
/// start's outcome and, when the start failed, has waited for C2.
struct Shared {
    plan: *mut ChildPlan,
    /// The status pipe: C1 reads, C2 writes.
    status_read: libc::c_int,
    status_write: libc::c_int,
    /// The signal mask std left for the command, restored in each process
    /// once it is safe to take signals.
    mask: libc::sigset_t,
    /// The top of C3's stack.
    command_stack: *mut libc::c_void,
    /// Set by C3 when it could not exec: the error number.
    exec_error: AtomicI32,
}

/// In C1, inside the namespaces: starts C2 and, through it, the command.
/// Returns only the error of a start that failed; otherwise this process
/// waits for the command and ends as it did.
///
/// # Safety
/// Call only between fork and exec, in a single-threaded child, with
/// `plan.exec` set.
pub(super) unsafe fn run_in_namespace(plan: &mut ChildPlan) -> io::Error {
    // SAFETY: forwarded from the caller.
    match unsafe { start(plan) } {
        Err(error) => error,
        Ok(never) => match never {},
    }
}

unsafe fn start(plan: &mut ChildPlan) -> io::Result<Infallible> {
    if plan.exec.is_none() {
        return Err(io::Error::other("no program was resolved for the sandbox"));
    }
    // SAFETY: system calls on stack values; the clone's stack is mapped
    // for it, and `shared` outlives every use C2 and C3 make of it (see
    // `Shared`).
    unsafe {
        let mut status = [0; 2];
        check(libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC))?;
        let (init_stack, command_stack) = map_stacks()?;
        let mask = block_signals_and_default_handlers()?;
        let shared = Shared {
            plan: ptr::from_mut(plan),
            status_read: status[0],
            status_write: status[1],
            mask,
            command_stack,
            exec_error: AtomicI32::new(0),
        };
        let init = check(libc::clone(
            init_main,
            init_stack,
            libc::CLONE_VM | libc::SIGCHLD,
            ptr::from_ref(&shared).cast_mut().cast(),
        ));
        // From here SIGTERM and its kin are for the command (see `relay`).
        ignore_polite_signals();
        libc::sigprocmask(libc::SIG_SETMASK, &shared.mask, ptr::null_mut());
        let init = init?;
        libc::close(status[1]);
        let mut outcome = [0u8; 4];
        let read = read_exact(status[0], &mut outcome);
        let error = i32::from_ne_bytes(outcome);
        if read && error == 0 {
            relay(init, status[0]);
        }
        // C2 exits at once after a failed start; once it has, nothing
        // refers to `shared` and this frame may go.
        while libc::waitpid(init, ptr::null_mut(), 0) < 0 && errno() == libc::EINTR {}
        Err(if read {
            io::Error::from_raw_os_error(error)
        } else {
            io::Error::other("the sandbox's init ended before the command started")
        })
    }
}

/// Blocks every signal and sets each that has a handler (inherited from
/// Satchel) back to its default; ignored ones stay ignored, as across
/// exec. Returns the mask to restore.
unsafe fn block_signals_and_default_handlers() -> io::Result<libc::sigset_t> {
    // SAFETY: signal-mask and disposition calls on stack values.
    unsafe {
        let mut all = std::mem::zeroed();
        let mut old = std::mem::zeroed();
        libc::sigfillset(&mut all);
        check(libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old))?;
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
        Ok(old)
    }
}

/// C2, PID 1 of the namespace.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is C1's `Shared`, alive while this process reads it.
    let shared = unsafe { &*arg.cast::<Shared>() };
    let (status_write, mask) = (shared.status_write, shared.mask);
    // SAFETY: this process shares C1's memory; C1 only waits meanwhile.
    let started = unsafe { start_command(shared) };
    let error = match &started {
        Ok(_) => 0,
        Err(error) => os_error(error),
    };
    // SAFETY: a write of a stack buffer; this process never returns.
    unsafe {
        libc::write(status_write, error.to_ne_bytes().as_ptr().cast(), 4);
        match started {
            Ok(command) => reap(command, status_write, &mask),
            Err(_) => libc::_exit(127),
        }
    }
}

/// In C2: the namespace's `/proc`, then C3, which execs the command.
unsafe fn start_command(shared: &Shared) -> io::Result<libc::pid_t> {
    // SAFETY: descriptor, prctl and poll calls on plain values; the plan
    // is read while C3 does not run (it is started below, and this process
    // waits while it runs).
    unsafe {
        libc::close(shared.status_read);
        check(libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
        ))?;
        // C1 may have died before the signal was armed (it is PID 1's
        // parent, so `getppid` says nothing): then the pipe has no reader.
        let mut reader = libc::pollfd {
            fd: shared.status_write,
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
    // execs or exits, and C1 is blocked reading the status pipe.
    let shared = unsafe { &*arg.cast::<Shared>() };
    // SAFETY: as above: nothing else touches the plan meanwhile.
    let error = unsafe { exec_command(&mut *shared.plan, &shared.mask) };
    shared.exec_error.store(os_error(&error), Ordering::Release);
    // SAFETY: ends this process only.
    unsafe { libc::_exit(127) }
}

/// Returns only the error that stopped the command from starting.
fn exec_command(plan: &mut ChildPlan, mask: &libc::sigset_t) -> io::Error {
    // SAFETY: prctl with plain values.
    let armed = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    if let Err(error) = check(armed) {
        return error;
    }
    if let Err(error) = restrict(plan) {
        return error;
    }
    // SAFETY: restores the mask std set, on a value copied before the
    // clone; signals now take their default actions, as after exec.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, mask, ptr::null_mut()) };
    match &plan.exec {
        Some(target) => target.execve(),
        None => io::Error::other("no program was resolved for the sandbox"),
    }
}

/// One mapping for both clones' stacks, each above a guard region.
/// Returns the two stack tops (stacks grow down).
unsafe fn map_stacks() -> io::Result<(*mut libc::c_void, *mut libc::c_void)> {
    let slot = GUARD_SIZE + STACK_SIZE;
    // SAFETY: a fresh anonymous mapping, and protection changes within it.
    unsafe {
        let base = libc::mmap(
            ptr::null_mut(),
            2 * slot,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        for stack in 0..2 {
            check(libc::mprotect(
                base.add(stack * slot).cast(),
                GUARD_SIZE,
                libc::PROT_NONE,
            ))?;
        }
        Ok((base.add(slot).cast(), base.add(2 * slot).cast()))
    }
}

/// C1: waits for the namespace's PID 1, then ends as the command did.
unsafe fn relay(init: libc::pid_t, status_read: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls only; this process never returns.
    unsafe {
        keep_only_fd(status_read);
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
/// passes on its status and exits, which ends the namespace.
unsafe fn reap(command: libc::pid_t, status_write: libc::c_int, mask: &libc::sigset_t) -> ! {
    // SAFETY: async-signal-safe calls only; this process never returns.
    unsafe {
        keep_only_fd(status_write);
        libc::sigprocmask(libc::SIG_SETMASK, mask, ptr::null_mut());
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == command {
                let bytes = status.to_ne_bytes();
                libc::write(3, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
            if pid < 0 && errno() != libc::EINTR {
                libc::_exit(1);
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

/// Moves `fd` to 3 and closes every other descriptor above 2, among them
/// the runner's exec-error pipe, which must close when the command execs.
unsafe fn keep_only_fd(fd: libc::c_int) {
    // SAFETY: descriptor calls on this process's own table.
    unsafe {
        if fd != 3 {
            libc::dup2(fd, 3);
        }
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
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
fn os_error(error: &io::Error) -> i32 {
    error
        .raw_os_error()
        .filter(|&code| code != 0)
        .unwrap_or(libc::EINVAL)
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
