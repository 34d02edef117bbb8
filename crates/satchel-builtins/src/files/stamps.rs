//! The stale-file rule: within a conversation, `edit` and `write` change
//! an existing file only as the model last saw it. `read`, `write` and
//! `edit` leave a [`Stamp`] of the file per conversation; a later change
//! is refused when the file on disk no longer matches its stamp (a
//! command, the user or another process changed it), and `write` over an
//! existing file with no stamp is refused too (the model never read it).
//!
//! An MCP client's session counts as its conversation
//! ([`satchel_tools::ToolContext::owner`]). Calls on their own
//! (`satchel tools call`, a stateless MCP request) have no "since the
//! model read it" and are not checked.

use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use satchel_core::ErrorCode;
use satchel_tools::ToolError;

/// Conversations remembered at once; the oldest is forgotten first.
const MAX_CONVERSATIONS: usize = 256;

/// What a file was when the model last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    hash: u64,
}

impl Stamp {
    /// The stamp of `bytes` as they are now in the file of `meta`.
    pub(crate) fn of(bytes: &[u8], meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            hash: hash(bytes),
        }
    }

    /// A stamp from a hash computed while the file was read in pieces.
    pub(crate) fn from_parts(hash: u64, meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            hash,
        }
    }
}

/// The content hash stamps compare (not a security measure: it tells a
/// changed file from a touched one).
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    let mut hasher = Hasher64::default();
    hasher.write(bytes);
    hasher.finish()
}

/// A hasher fed piece by piece, for files read in pages.
pub(crate) type Hasher64 = std::hash::DefaultHasher;

/// Stamps per conversation, shared by `read`, `write` and `edit`.
#[derive(Debug, Default)]
pub struct FileStamps {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_conversation: HashMap<String, HashMap<PathBuf, Stamp>>,
    order: VecDeque<String>,
}

impl FileStamps {
    /// Remembers that the model of `conversation` saw `path` as `stamp`.
    pub(crate) fn remember(&self, conversation: Option<&str>, path: &Path, stamp: Stamp) {
        let Some(conversation) = conversation else {
            return;
        };
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !inner.by_conversation.contains_key(conversation) {
            inner.order.push_back(conversation.to_owned());
            if inner.order.len() > MAX_CONVERSATIONS
                && let Some(oldest) = inner.order.pop_front()
            {
                inner.by_conversation.remove(&oldest);
            }
        }
        inner
            .by_conversation
            .entry(conversation.to_owned())
            .or_default()
            .insert(path.to_path_buf(), stamp);
    }

    /// Refuses a change to the existing file `path` (now `bytes`, `meta`)
    /// unless the model of `conversation` saw it as it is. `shown` is the
    /// path as the model wrote it.
    pub(crate) fn check(
        &self,
        conversation: Option<&str>,
        path: &Path,
        shown: &str,
        bytes: &[u8],
        meta: &std::fs::Metadata,
        tool: &str,
    ) -> Result<(), ToolError> {
        let Some(conversation) = conversation else {
            return Ok(());
        };
        let stamp = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .by_conversation
            .get(conversation)
            .and_then(|files| files.get(path))
            .copied();
        match stamp {
            None if tool == "write" => Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!(
                    "`{shown}` exists and has not been read in this conversation: `write` would replace \
                     what you have not seen. Read it first (`read`), then write it, or change parts of it with `edit`."
                ),
            )),
            None => Ok(()),
            Some(stamp) => {
                let unchanged = stamp.len == meta.len()
                    && (stamp.modified == meta.modified().ok() || stamp.hash == hash(bytes));
                if unchanged {
                    Ok(())
                } else {
                    Err(ToolError::new(
                        ErrorCode::InvalidParams,
                        format!(
                            "`{shown}` changed on disk since you last read or wrote it (a command, the user or \
                             another process changed it), so `{tool}` would work on a text you have not seen. \
                             Read it again, then make your change."
                        ),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_stale_a_touched_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one\n").unwrap();
        let stamps = FileStamps::default();
        let meta = std::fs::metadata(&path).unwrap();
        let conv = Some("c1");
        stamps.remember(conv, &path, Stamp::of(b"one\n", &meta));
        assert!(
            stamps
                .check(conv, &path, "a.txt", b"one\n", &meta, "edit")
                .is_ok()
        );
        // Same bytes, new time: not stale.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, "one\n").unwrap();
        let touched = std::fs::metadata(&path).unwrap();
        assert!(
            stamps
                .check(conv, &path, "a.txt", b"one\n", &touched, "edit")
                .is_ok()
        );
        std::fs::write(&path, "two\n").unwrap();
        let changed = std::fs::metadata(&path).unwrap();
        let error = stamps
            .check(conv, &path, "a.txt", b"two\n", &changed, "edit")
            .unwrap_err();
        assert!(error.message.contains("Read it again"), "{error}");
        // Another conversation never read it: `write` refused, `edit` not.
        assert!(
            stamps
                .check(Some("c2"), &path, "a.txt", b"two\n", &changed, "write")
                .is_err()
        );
        assert!(
            stamps
                .check(Some("c2"), &path, "a.txt", b"two\n", &changed, "edit")
                .is_ok()
        );
        // No conversation: nothing to check.
        assert!(
            stamps
                .check(None, &path, "a.txt", b"two\n", &changed, "write")
                .is_ok()
        );
    }
}
