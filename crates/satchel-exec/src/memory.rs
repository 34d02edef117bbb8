//! [`give_back_freed_memory`]: memory a long-running process freed goes
//! back to the system, for servers that hold many short-lived sessions
//! (`mcp serve --http`, the Telegram bot's chats).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Returns the memory freed since the last call to the system. glibc's
/// allocator keeps freed memory in its arenas: after 10,000 abandoned MCP
/// sessions expired, `mcp serve --http` stayed at twice its starting size
/// without this (`bench/mcp-http-flood.py --settle`). Elsewhere (musl, other
/// systems) it does nothing.
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it
    // takes no pointer and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long [`give_back_freed_memory_soon`] gathers requests into one.
const GATHER: Duration = Duration::from_secs(1);

/// [`give_back_freed_memory`] once, [`GATHER`] from now, for every caller
/// until then, on a blocking thread. A trim walks every arena of the heap:
/// when 100 chats go idle together, one trim, not 100 of them on the
/// threads that run the other chats. Without a Tokio runtime, at once.
pub fn give_back_freed_memory_soon() {
    static PENDING: AtomicBool = AtomicBool::new(false);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        give_back_freed_memory();
        return;
    };
    if PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    runtime.spawn(async {
        tokio::time::sleep(GATHER).await;
        // Cleared first: memory freed from here on asks for the next trim.
        PENDING.store(false, Ordering::Release);
        if tokio::task::spawn_blocking(give_back_freed_memory)
            .await
            .is_err()
        {
            tracing::debug!("the heap trim did not run (the runtime is shutting down)");
        }
    });
}
