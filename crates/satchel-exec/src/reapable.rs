//! [`make_children_reapable`]: a process that inherited SIGCHLD ignored
//! (a disposition exec keeps) has its children reaped by the kernel as
//! they exit, so waiting for one fails with ECHILD and the command's
//! status is lost; the commands it starts would inherit the disposition
//! too. Satchel sets it back before its first child.

use std::sync::Once;

/// SIGCHLD back to its default action when it is ignored (or handled with
/// `SA_NOCLDWAIT`, which reaps children the same way), once per process.
/// Called by `satchel`'s `main` and before every child the library starts
/// (the runner, the sandbox's probe and loopback helper, the MCP client's
/// servers); a handler installed by someone else is kept.
pub fn make_children_reapable() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sigaction reads and writes only the process's
        // disposition of SIGCHLD and the two structures passed.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut current) != 0 {
                return;
            }
            let ignored = current.sa_sigaction == libc::SIG_IGN;
            if !ignored && current.sa_flags & libc::SA_NOCLDWAIT == 0 {
                return;
            }
            let mut reapable = current;
            reapable.sa_flags &= !libc::SA_NOCLDWAIT;
            if ignored {
                reapable.sa_sigaction = libc::SIG_DFL;
            }
            if libc::sigaction(libc::SIGCHLD, &reapable, std::ptr::null_mut()) == 0 {
                tracing::debug!("SIGCHLD was inherited ignored: set back to its default so children can be waited for");
            }
        }
    });
}
