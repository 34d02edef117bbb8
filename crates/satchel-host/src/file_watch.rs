//! [`FileWatch`]: whether a few files may have changed, asked of the
//! kernel (inotify) instead of by a `stat` of each of them.
//!
//! A running server reads its configuration again when a layer changes,
//! and asks before every call: the configuration, the policy and the
//! hooks each looked at their files, twelve `stat` calls per call and a
//! sixth of a served call's time. With a watch, an unchanged set costs
//! one `read` that finds nothing; after a change the caller looks at the
//! files as before.
//!
//! Each file is watched itself (writes, attributes, its removal) and in
//! the nearest directory on its way that exists (entries of that name
//! made, removed or renamed: an editor's save by rename, a `.agents`
//! directory made later). The kernel queues an event before the write
//! that caused it returns, so a call made after a change always sees it.
//! Where inotify cannot be used (no instances left, a file system without
//! it) every question is answered "maybe", which means a `stat` as before.

use std::collections::HashMap;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// A set of files and the watch on them.
pub(crate) struct FileWatch {
    paths: Vec<PathBuf>,
    armed: Option<Armed>,
}

/// An inotify instance watching the files and their directories.
struct Armed {
    fd: OwnedFd,
    /// What counts in each watch's events: every event (a watched file),
    /// or only those naming one of these entries (a directory on the way).
    counts: HashMap<i32, Option<Vec<OsString>>>,
}

impl FileWatch {
    /// Watches nothing yet: the first question arms it.
    pub(crate) fn new(paths: Vec<PathBuf>) -> FileWatch {
        FileWatch { paths, armed: None }
    }

    /// Whether any of the files may have changed since the last time this
    /// said no. The first time, after a change, and where the kernel
    /// cannot watch: yes (and the watch is armed again before returning,
    /// so a change made while the caller looks is seen next time).
    pub(crate) fn may_have_changed(&mut self) -> bool {
        if let Some(armed) = &self.armed
            && !armed.saw_change()
        {
            return false;
        }
        self.armed = arm(&self.paths);
        true
    }
}

impl Armed {
    /// Whether an event that counts is queued; an error reading counts.
    fn saw_change(&self) -> bool {
        let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN) => return false,
                Err(Errno::INTR) => continue,
                Err(_) => return true,
            };
            let itself = ReadFlags::DELETE_SELF
                | ReadFlags::MOVE_SELF
                | ReadFlags::IGNORED
                | ReadFlags::UNMOUNT
                | ReadFlags::QUEUE_OVERFLOW;
            if event.events().intersects(itself) {
                return true;
            }
            let counts = match self.counts.get(&event.wd()) {
                Some(None) | None => true,
                Some(Some(names)) => event.file_name().is_some_and(|name| {
                    names
                        .iter()
                        .any(|wanted| wanted.as_encoded_bytes() == name.to_bytes())
                }),
            };
            if counts {
                return true;
            }
        }
    }
}

/// A new instance watching each of `paths`; `None` where inotify cannot
/// be used.
fn arm(paths: &[PathBuf]) -> Option<Armed> {
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
    let mut counts: HashMap<i32, Option<Vec<OsString>>> = HashMap::new();
    let file_events = WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::MASK_ADD;
    let entry_events = WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::MASK_ADD;
    for path in paths {
        match inotify::add_watch(&fd, path, file_events) {
            Ok(wd) => {
                counts.insert(wd, None);
            }
            Err(Errno::NOENT | Errno::NOTDIR) => {}
            Err(_) => return None,
        }
        let (directory, entry) = nearest_directory(&fd, path, entry_events)?;
        let names = counts.entry(directory).or_insert_with(|| Some(Vec::new()));
        if let Some(names) = names {
            names.push(entry);
        }
    }
    Some(Armed { fd, counts })
}

/// Watches the nearest directory above `path` that exists; returns its
/// watch and the name of the entry in it that leads to `path`.
fn nearest_directory(fd: &OwnedFd, path: &Path, events: WatchFlags) -> Option<(i32, OsString)> {
    let mut entry = path;
    loop {
        let directory = match entry.parent() {
            Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
            Some(parent) => parent,
            None => return None,
        };
        match inotify::add_watch(fd, directory, events) {
            Ok(wd) => return Some((wd, entry.file_name()?.to_owned())),
            Err(Errno::NOENT | Errno::NOTDIR) => entry = directory,
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch on `dir/.agents/agent.json`, asked once so it is armed.
    fn watching(dir: &Path) -> (FileWatch, PathBuf) {
        let file = dir.join(".agents").join("agent.json");
        let mut watch = FileWatch::new(vec![file.clone()]);
        assert!(watch.may_have_changed(), "the first question is yes");
        assert!(!watch.may_have_changed(), "nothing changed since");
        (watch, file)
    }

    #[test]
    fn a_file_made_in_a_directory_made_later_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut watch, file) = watching(dir.path());
        std::fs::create_dir(file.parent().unwrap()).unwrap();
        assert!(watch.may_have_changed());
        assert!(!watch.may_have_changed());
        std::fs::write(&file, "{}").unwrap();
        assert!(watch.may_have_changed());
        assert!(!watch.may_have_changed());
    }

    #[test]
    fn writes_of_the_same_size_renames_over_and_removal_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".agents").join("agent.json");
        std::fs::create_dir(file.parent().unwrap()).unwrap();
        std::fs::write(&file, r#"{"a":1}"#).unwrap();
        let (mut watch, _) = watching(dir.path());

        std::fs::write(&file, r#"{"a":2}"#).unwrap();
        assert!(watch.may_have_changed(), "a write in place");
        assert!(!watch.may_have_changed());

        let saved = file.with_extension("json.tmp");
        std::fs::write(&saved, r#"{"a":3}"#).unwrap();
        std::fs::rename(&saved, &file).unwrap();
        assert!(watch.may_have_changed(), "an editor's save by rename");
        assert!(!watch.may_have_changed());

        std::fs::remove_file(&file).unwrap();
        assert!(watch.may_have_changed(), "its removal");
        assert!(!watch.may_have_changed());
    }

    #[test]
    fn other_files_beside_it_are_not_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let (mut watch, file) = watching(dir.path());
        std::fs::write(dir.path().join("notes.md"), "work").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        assert!(!watch.may_have_changed());
        std::fs::create_dir(file.parent().unwrap()).unwrap();
        assert!(watch.may_have_changed());
        std::fs::write(file.with_file_name("other.json"), "{}").unwrap();
        assert!(!watch.may_have_changed());
    }
}
