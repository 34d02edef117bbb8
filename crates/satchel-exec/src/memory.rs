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

/// [`give_back_freed_memory`] once, `GATHER` from now, for every caller
/// until then, on a blocking thread. A trim walks every arena of the heap:
/// when 100 chats go idle together, one trim, not 100 of them on the
/// threads that run the other chats. Without a Tokio runtime, at once.
pub fn give_back_freed_memory_soon() {
    static TRIM: Gathered = Gathered::new();
    TRIM.ask(give_back_freed_memory);
}

/// Requests for one piece of work, gathered: the first starts a timer,
/// the others until it fires ride along.
struct Gathered {
    pending: AtomicBool,
}

impl Gathered {
    const fn new() -> Gathered {
        Gathered {
            pending: AtomicBool::new(false),
        }
    }

    /// Runs `work` [`GATHER`] from now unless a run is already due.
    fn ask(&'static self, work: fn()) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            work();
            return;
        };
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn(async move {
            tokio::time::sleep(GATHER).await;
            // Cleared first: what is freed from here on asks for the next run.
            self.pending.store(false, Ordering::Release);
            if tokio::task::spawn_blocking(work).await.is_err() {
                tracing::debug!("gathered work did not run (the runtime is shutting down)");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RUNS: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }

    /// The runs counted so far, once `at_least` have happened or 5 s of
    /// real time passed (the work runs on a blocking thread).
    async fn runs(at_least: usize) -> usize {
        for _ in 0..500 {
            if RUNS.load(Ordering::SeqCst) >= at_least {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            tokio::task::yield_now().await;
        }
        RUNS.load(Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn many_requests_within_the_gathering_time_run_the_work_once() {
        static GATHERED: Gathered = Gathered::new();
        for _ in 0..100 {
            GATHERED.ask(count);
        }
        assert_eq!(RUNS.load(Ordering::SeqCst), 0, "not at once");
        tokio::time::sleep(GATHER * 2).await;
        assert_eq!(runs(1).await, 1);
        // A request after the run asks for a run of its own.
        GATHERED.ask(count);
        tokio::time::sleep(GATHER * 2).await;
        assert_eq!(runs(2).await, 2);
    }
}
