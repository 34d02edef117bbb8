//! One MCP session's identity and end. A session that began with
//! `initialize` (stdio's one client, each stateful HTTP session) is the
//! owner of what its calls leave behind: the background processes they
//! started and what the model last saw of each file (the stale-file rule),
//! as a conversation is in `chat`. When the session closes (the client
//! leaves, HTTP expires or deletes it) its processes are ended.
//!
//! Stateless HTTP requests have no session: their calls belong to the
//! server as a whole, as a `tools call` does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use rmcp::ServerHandler;

/// What runs when a session closes, given its key: ends its processes.
pub type SessionEnd = Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// Tells sessions apart within this process.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A handler that can start a session of its own: HTTP asks for one per
/// session, so each gets its own `Slot` while sharing everything else.
pub trait PerSession: ServerHandler + Clone {
    /// This handler for a new session.
    fn for_new_session(&self) -> Self;
}

/// One session's key and end; dropped when the last handler of the session
/// (a running task included) is.
pub(crate) struct Slot {
    key: String,
    begun: AtomicBool,
    on_end: Option<SessionEnd>,
    /// The roots the session's client last listed.
    pub(crate) roots: super::roots::KnownRoots,
}

impl Slot {
    /// A session not begun yet.
    pub(crate) fn new(on_end: Option<SessionEnd>) -> Arc<Slot> {
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        Arc::new(Slot {
            key: format!("mcp-session-{}-{number}", std::process::id()),
            begun: AtomicBool::new(false),
            on_end,
            roots: super::roots::KnownRoots::default(),
        })
    }

    /// The client was answered `initialize`: calls from now on are the session's.
    pub(crate) fn begin(&self) {
        self.begun.store(true, Ordering::Release);
    }

    /// The key calls are kept under, once the session began.
    pub(crate) fn key(&self) -> Option<String> {
        self.begun.load(Ordering::Acquire).then(|| self.key.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.begun.load(Ordering::Acquire) {
            return;
        }
        let Some(on_end) = self.on_end.take() else {
            return;
        };
        // Outside a runtime (the process is ending) the host's own close
        // ends every process instead.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            tracing::debug!(session = %self.key, "MCP session closed: ending its processes");
            runtime.spawn(on_end(self.key.clone()));
        }
    }
}

impl PerSession for super::SatchelServer {
    fn for_new_session(&self) -> Self {
        super::SatchelServer {
            inner: self.inner.clone(),
            session: Slot::new(self.inner.options.on_session_end.clone()),
        }
    }
}
