//! Spill files: the full output of a stream that was cut, kept on disk
//! within a size and age budget so the model can read what it did not see.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{SpillConfig, SpillFile};

/// Distinguishes spill files created in the same millisecond by one process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// An open spill file that accepts bytes up to its size limit.
///
/// Writes are synchronous: they go to the page cache, happen only for
/// output that was already cut, and stop at `max_file_bytes`.
pub(crate) struct SpillWriter {
    file: Option<File>,
    path: PathBuf,
    written: u64,
    max: u64,
    complete: bool,
}

impl SpillWriter {
    /// Creates a new spill file for `stream` (`stdout`, `stderr`) after
    /// pruning the directory; `None` when spilling is off or impossible.
    pub(crate) fn create(config: &SpillConfig, stream: &str) -> Option<SpillWriter> {
        let dir = config.dir.as_ref()?;
        match SpillWriter::try_create(config, dir, stream) {
            Ok(writer) => Some(writer),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot create a spill file; cut output is not kept");
                None
            }
        }
    }

    fn try_create(config: &SpillConfig, dir: &Path, stream: &str) -> io::Result<SpillWriter> {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        prune(dir, config);
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let name = format!("{millis}-{}-{sequence}.{stream}.log", std::process::id());
        let path = dir.join(name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(SpillWriter {
            file: Some(file),
            path,
            written: 0,
            max: config.max_file_bytes,
            complete: true,
        })
    }

    /// Appends what fits; past the limit (or after a write error) the file
    /// is marked incomplete and further bytes are dropped.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        let Some(file) = self.file.as_mut() else {
            self.complete &= bytes.is_empty();
            return;
        };
        let room = usize::try_from(self.max.saturating_sub(self.written)).unwrap_or(usize::MAX);
        let part = &bytes[..bytes.len().min(room)];
        if let Err(error) = file.write_all(part) {
            tracing::warn!(path = %self.path.display(), %error, "spill file write failed");
            self.file = None;
            self.complete = false;
            return;
        }
        self.written += part.len() as u64;
        if part.len() < bytes.len() {
            self.file = None;
            self.complete = false;
        }
    }

    /// Where the file is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Closes the file and describes it.
    pub(crate) fn finish(self) -> SpillFile {
        SpillFile {
            path: self.path,
            bytes: self.written,
            complete: self.complete,
        }
    }
}

/// Removes spill files past their age, then the oldest ones until the
/// directory fits its budget. Errors are ignored: pruning is best effort.
fn prune(dir: &Path, config: &SpillConfig) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            meta.is_file()
                .then(|| (meta.modified().unwrap_or(now), meta.len(), entry.path()))
        })
        .collect();
    files.sort();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    for (modified, len, path) in files {
        let expired = now
            .duration_since(modified)
            .is_ok_and(|age| age > config.max_age);
        if (expired || total > config.max_total_bytes) && fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(dir: &Path, max_file: u64, max_total: u64) -> SpillConfig {
        SpillConfig {
            dir: Some(dir.to_path_buf()),
            max_file_bytes: max_file,
            max_total_bytes: max_total,
            max_age: Duration::from_secs(3600),
        }
    }

    #[test]
    fn writer_stops_at_its_limit_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SpillWriter::create(&config(dir.path(), 10, 1000), "stdout").unwrap();
        writer.write(b"0123456");
        writer.write(b"789abc");
        writer.write(b"def");
        let spill = writer.finish();
        assert_eq!(spill.bytes, 10);
        assert!(!spill.complete);
        assert_eq!(fs::read(&spill.path).unwrap(), b"0123456789");
    }

    #[test]
    fn creating_a_file_prunes_the_oldest_past_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 100, 150);
        let mut paths = Vec::new();
        for _ in 0..3 {
            let mut writer = SpillWriter::create(&cfg, "stdout").unwrap();
            writer.write(&[b'x'; 100]);
            paths.push(writer.finish().path);
            std::thread::sleep(Duration::from_millis(20));
        }
        // The third creation saw 200 bytes over a 150-byte budget: the first went.
        assert!(!paths[0].exists());
        assert!(paths[1].exists() && paths[2].exists());
    }
}
