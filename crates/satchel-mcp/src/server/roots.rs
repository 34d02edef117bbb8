//! An MCP client's roots as the writable paths of its calls: when the
//! client declares the `roots` capability, a call asks it for its roots
//! (`roots/list`) and the call's `workspace` sandbox, for commands and the
//! file tools alike, writes beneath those directories instead of the
//! server's project. A client that declares none keeps the project; one
//! that lists none may write nowhere.
//!
//! A client that promises to announce changes (`roots.listChanged`) is
//! asked once, and again only after it announced one: the transport
//! ([`WatchRoots`]) counts `notifications/roots/list_changed` in the order
//! the client's messages arrive and stamps each request with the count, so
//! a call sent after a change never runs with the roots listed before it,
//! whichever of the two rmcp's tasks run first. A client that made no such
//! promise is asked on every call, as is any request on a transport that
//! does not count. A request of the stateless revision (2026-07-28) cannot
//! be answered by a request of the server's, so its roots are not asked.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ClientNotification, GetExtensions, JsonRpcMessage};
use rmcp::service::{RequestContext, RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long a client has to list its roots.
const ROOTS_WAIT: Duration = Duration::from_secs(5);

/// How many changes of its roots the session's client had announced when
/// it sent a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChangesSeen(u64);

/// A transport that counts the client's announcements that its roots
/// changed and stamps each request with the count ([`ChangesSeen`]).
pub(crate) struct WatchRoots<T> {
    inner: T,
    changes: u64,
}

impl<T> WatchRoots<T> {
    pub(crate) fn new(inner: T) -> WatchRoots<T> {
        WatchRoots { inner, changes: 0 }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for WatchRoots<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await?;
        match &mut message {
            JsonRpcMessage::Notification(notification)
                if matches!(
                    notification.notification,
                    ClientNotification::RootsListChangedNotification(_)
                ) =>
            {
                self.changes += 1;
            }
            JsonRpcMessage::Request(request) => {
                request
                    .request
                    .extensions_mut()
                    .insert(ChangesSeen(self.changes));
            }
            _ => {}
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The roots a session's client last listed, and as of how many announced
/// changes.
#[derive(Default)]
pub(crate) struct KnownRoots(Mutex<Option<(u64, Arc<[PathBuf]>)>>);

impl KnownRoots {
    fn as_of(&self, seen: ChangesSeen) -> Option<Arc<[PathBuf]>> {
        let known = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known
            .as_ref()
            .filter(|(changes, _)| *changes == seen.0)
            .map(|(_, roots)| roots.clone())
    }

    /// Keeps `roots`, listed for a request that had seen `seen`, unless
    /// roots listed after a later change are kept already.
    fn keep(&self, seen: ChangesSeen, roots: Arc<[PathBuf]>) {
        let mut known = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if known.as_ref().is_none_or(|(changes, _)| *changes <= seen.0) {
            *known = Some((seen.0, roots));
        }
    }
}

/// The client's roots as local directories, when it declares roots.
// Roots are deprecated by the newest revision (SEP-2577) but still what
// today's clients (Claude Code, the Python SDK) declare.
#[allow(deprecated)]
pub(super) async fn client_roots(
    context: &RequestContext<RoleServer>,
    known: &KnownRoots,
) -> Option<Arc<[PathBuf]>> {
    let announces_changes = context.client_capabilities()?.roots?.list_changed == Some(true);
    if super::asks_inline(context) {
        return None;
    }
    let seen = if announces_changes {
        context.extensions.get::<ChangesSeen>().copied()
    } else {
        None
    };
    if let Some(roots) = seen.and_then(|seen| known.as_of(seen)) {
        return Some(roots);
    }
    let roots = list_roots(context).await?;
    if let Some(seen) = seen {
        known.keep(seen, roots.clone());
    }
    Some(roots)
}

/// Asks the client for its roots; `None` (the project) when it does not
/// answer, or not in time.
#[allow(deprecated)]
async fn list_roots(context: &RequestContext<RoleServer>) -> Option<Arc<[PathBuf]>> {
    match tokio::time::timeout(ROOTS_WAIT, context.peer.list_roots()).await {
        Ok(Ok(listed)) => Some(
            listed
                .roots
                .iter()
                .filter_map(|root| directory_of(&root.uri))
                .collect(),
        ),
        Ok(Err(error)) => {
            tracing::warn!(%error, "the client declared roots but did not list them; writing in the project");
            None
        }
        Err(_) => {
            tracing::warn!(
                "the client declared roots but did not list them in time; writing in the project"
            );
            None
        }
    }
}

/// The local directory of a `file://` root; other schemes name nothing
/// here.
fn directory_of(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.to_file_path().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_roots_name_directories() {
        assert_eq!(
            directory_of("file:///home/me/project"),
            Some(PathBuf::from("/home/me/project"))
        );
        assert_eq!(
            directory_of("file:///tmp/a%20b"),
            Some(PathBuf::from("/tmp/a b"))
        );
        assert_eq!(directory_of("https://example.com/"), None);
        assert_eq!(directory_of("not a uri"), None);
    }

    #[test]
    fn roots_are_known_only_as_of_the_changes_they_were_listed_after() {
        let known = KnownRoots::default();
        assert_eq!(known.as_of(ChangesSeen(0)), None);
        let first: Arc<[PathBuf]> = Arc::from([PathBuf::from("/a")]);
        let second: Arc<[PathBuf]> = Arc::from([PathBuf::from("/b")]);
        known.keep(ChangesSeen(0), first.clone());
        assert_eq!(known.as_of(ChangesSeen(0)), Some(first.clone()));
        assert_eq!(known.as_of(ChangesSeen(1)), None);
        known.keep(ChangesSeen(1), second.clone());
        // A slow answer to a request sent before the change comes late:
        // it does not replace the newer list.
        known.keep(ChangesSeen(0), first);
        assert_eq!(known.as_of(ChangesSeen(1)), Some(second));
        assert_eq!(known.as_of(ChangesSeen(0)), None);
    }
}
