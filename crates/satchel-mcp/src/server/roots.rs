//! An MCP client's roots as the writable paths of its calls: when the
//! client declares the `roots` capability, each call asks it for its
//! roots (`roots/list`) and the call's `workspace` sandbox, for commands
//! and the file tools alike, writes beneath those directories instead of
//! the server's project. A client that declares none keeps the project;
//! one that lists none may write nowhere.
//!
//! Asked per call rather than cached: a client changes its roots when it
//! likes (`notifications/roots/list_changed`), and the answer is one local
//! round trip. A request of the stateless revision (2026-07-28) cannot be
//! answered by a request of the server's, so its roots are not asked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{RequestContext, RoleServer};

/// How long a client has to list its roots.
const ROOTS_WAIT: Duration = Duration::from_secs(5);

/// The client's roots as local directories, when it declares roots.
// Roots are deprecated by the newest revision (SEP-2577) but still what
// today's clients (Claude Code, the Python SDK) declare.
#[allow(deprecated)]
pub(super) async fn client_roots(context: &RequestContext<RoleServer>) -> Option<Arc<[PathBuf]>> {
    context.client_capabilities()?.roots.as_ref()?;
    if super::asks_inline(context) {
        return None;
    }
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
}
