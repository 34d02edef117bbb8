//! Remembered `--schema` answers, keyed by path, size and mtime, so that a
//! one-shot `satchel` command does not respawn every tool to learn its spec.
//!
//! Failures are remembered too: a tool that hangs on `--schema` costs its
//! time limit once per change of the file, not once per command.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

/// What identifies one version of an executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileKey {
    size: u64,
    mtime_ns: i128,
}

impl FileKey {
    pub(crate) fn of(meta: &Metadata) -> FileKey {
        FileKey {
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// The outcome of one `--schema` probe: the document, or why it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ProbeResult {
    /// The tool printed this document (not yet validated).
    Document(String),
    /// The probe failed for this reason.
    Failed(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    key: FileKey,
    result: ProbeResult,
}

/// Probe results by executable path, optionally persisted to a file.
#[derive(Debug, Default)]
pub struct SpecCache {
    file: Option<PathBuf>,
    entries: Mutex<HashMap<PathBuf, Entry>>,
    /// True when `entries` differ from what the file holds, so an
    /// unchanged cache is never written again.
    changed: AtomicBool,
}

impl SpecCache {
    /// A cache that lives only as long as this value.
    pub fn in_memory() -> SpecCache {
        SpecCache::default()
    }

    /// A cache persisted at `file`; a missing or unreadable file starts empty.
    pub fn persistent(file: PathBuf) -> SpecCache {
        let entries = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<HashMap<PathBuf, Entry>>(&bytes).ok())
            .unwrap_or_default();
        SpecCache {
            file: Some(file),
            entries: Mutex::new(entries),
            changed: AtomicBool::new(false),
        }
    }

    pub(crate) fn get(&self, path: &Path, key: FileKey) -> Option<ProbeResult> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .get(path)
            .filter(|entry| entry.key == key)
            .map(|entry| entry.result.clone())
    }

    pub(crate) fn put(&self, path: &Path, key: FileKey, result: ProbeResult) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let same = entries
            .get(path)
            .is_some_and(|entry| entry.key == key && entry.result == result);
        if !same {
            entries.insert(path.to_path_buf(), Entry { key, result });
            self.changed.store(true, Ordering::Relaxed);
        }
    }

    /// Forgets everything, so the next discovery probes every tool again.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        self.changed.store(true, Ordering::Relaxed);
    }

    /// Keeps only the given paths (the executables that still exist).
    pub(crate) fn retain(&self, paths: &[PathBuf]) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = entries.len();
        entries.retain(|path, _| paths.contains(path));
        if entries.len() != before {
            self.changed.store(true, Ordering::Relaxed);
        }
    }

    /// Writes the cache to its file (atomically: a temporary file renamed
    /// over it) when it changed since it was read or last saved; a no-op
    /// for in-memory caches and unchanged ones.
    pub fn save(&self) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        if !self.changed.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let bytes = {
            let entries = self
                .entries
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            serde_json::to_vec(&*entries).map_err(io::Error::other)?
        };
        let written = crate::config::write_atomically(file, &bytes);
        if written.is_err() {
            // Try again at the next save.
            self.changed.store(true, Ordering::Relaxed);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_save_and_go_stale_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("t");
        std::fs::write(&tool, "one").unwrap();
        let key = FileKey::of(&std::fs::metadata(&tool).unwrap());
        let cache_file = dir.path().join("cache/specs.json");

        let cache = SpecCache::persistent(cache_file.clone());
        cache.put(&tool, key, ProbeResult::Document("{}".into()));
        cache.save().unwrap();

        let reloaded = SpecCache::persistent(cache_file.clone());
        assert_eq!(
            reloaded.get(&tool, key),
            Some(ProbeResult::Document("{}".into()))
        );
        std::fs::write(&tool, "longer content").unwrap();
        let changed = FileKey::of(&std::fs::metadata(&tool).unwrap());
        assert_eq!(reloaded.get(&tool, changed), None);

        std::fs::write(&cache_file, "garbage").unwrap();
        assert_eq!(SpecCache::persistent(cache_file).get(&tool, key), None);
    }

    /// Issue #22: a one-shot command rewrote the cache even when nothing
    /// changed; now only a changed cache is written.
    #[test]
    fn an_unchanged_cache_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("t");
        std::fs::write(&tool, "one").unwrap();
        let key = FileKey::of(&std::fs::metadata(&tool).unwrap());
        let cache_file = dir.path().join("specs.json");
        let cache = SpecCache::persistent(cache_file.clone());
        cache.put(&tool, key, ProbeResult::Document("{}".into()));
        cache.save().unwrap();

        let reloaded = SpecCache::persistent(cache_file.clone());
        std::fs::remove_file(&cache_file).unwrap();
        reloaded.put(&tool, key, ProbeResult::Document("{}".into()));
        reloaded.retain(std::slice::from_ref(&tool));
        reloaded.save().unwrap();
        assert!(!cache_file.exists(), "nothing changed: nothing written");

        reloaded.put(&tool, key, ProbeResult::Failed("gone".into()));
        reloaded.save().unwrap();
        assert!(cache_file.exists(), "a changed entry is written");
    }
}
