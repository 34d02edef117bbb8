//! Writing a file atomically: a temporary file in the same directory,
//! written, flushed to disk, given the old file's mode (or the usual mode
//! under the umask for a new file), then renamed over the target and the
//! directory flushed. A reader sees the old file or the new one, never
//! half of either; a crash leaves at most a stray temporary file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `bytes` to `path` atomically, making its parent directories;
/// returns whether the file is new.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let parent = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the path has no parent directory"))?;
    std::fs::create_dir_all(parent)?;
    let existing = std::fs::metadata(path).ok();
    if existing.as_ref().is_some_and(std::fs::Metadata::is_dir) {
        return Err(std::io::Error::other("it is a directory"));
    }
    // A new file gets 0666 less the umask, as `open(2)` would give it.
    let mut file = tempfile::Builder::new()
        .prefix(".satchel-write-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(parent)?;
    file.write_all(bytes)?;
    if let Some(meta) = &existing {
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))?;
        keep_owner(file.as_file(), meta);
    }
    file.as_file().sync_all()?;
    file.persist(path).map_err(|error| error.error)?;
    if let Ok(dir) = std::fs::File::open(parent) {
        // Some file systems cannot sync a directory; the rename stands.
        let _ = dir.sync_all();
    }
    Ok(existing.is_none())
}

/// Gives the new file the old one's owner and group where this process
/// may (as root, or the same owner for the group); otherwise it stays ours.
fn keep_owner(file: &std::fs::File, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::fs::Uid::from_raw(meta.uid());
    let gid = rustix::fs::Gid::from_raw(meta.gid());
    let _ = rustix::fs::fchown(file, Some(uid), Some(gid));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_usual() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o751)).unwrap();
        assert!(!write_atomic(&script, b"new").unwrap());
        assert_eq!(std::fs::read(&script).unwrap(), b"new");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
        let fresh = dir.path().join("a/b/c.txt");
        assert!(write_atomic(&fresh, b"x").unwrap());
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_ne!(mode & 0o600, 0, "{mode:o}");
        assert_eq!(mode & 0o111, 0, "{mode:o}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".satchel"))
            .collect();
        assert!(leftovers.is_empty());
    }
}
