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
//!
//! The watch is made only once it has been asked [`ARM_AFTER`] times: a
//! one-shot command asks once or twice, and an inotify instance costs
//! more to close (the kernel waits for a grace period, 0.05 to 23 ms
//! measured here, at exit too) than a few `stat` calls. For the same
//! reason a change re-arms the instance it has rather than making another.
//!
//! A file system that tells no events (NFS, SMB, FUSE) would hide a change
//! made from another machine: with a watch, the answer is still "maybe"
//! once every [`LOOK_ANYWAY`], so such a change is seen within it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// Questions answered by looking (a `stat` of each file) before a watch
/// is made.
const ARM_AFTER: u32 = 4;

/// Longest a watch answers "no" without the files being looked at.
const LOOK_ANYWAY: Duration = Duration::from_secs(2);

/// A set of files and the watch on them.
pub(crate) struct FileWatch {
    paths: Vec<PathBuf>,
    watch: Watch,
    /// [`LOOK_ANYWAY`], but for the tests.
    look_anyway: Duration,
}

/// Where a [`FileWatch`] stands.
enum Watch {
    /// Not made yet: asked this many times.
    NotYet(u32),
    Armed(Armed),
    /// inotify cannot be used here: every answer is "maybe".
    Unavailable,
}

/// An inotify instance watching the files and their directories.
struct Armed {
    fd: OwnedFd,
    /// When "maybe" was last answered.
    looked: Instant,
    /// What counts in each watch's events: every event (a watched file),
    /// or only those naming one of these entries (a directory on the way).
    counts: HashMap<i32, Option<Vec<OsString>>>,
}

impl FileWatch {
    /// Watches nothing yet: it is made once asked [`ARM_AFTER`] times.
    pub(crate) fn new(paths: Vec<PathBuf>) -> FileWatch {
        FileWatch {
            paths,
            watch: Watch::NotYet(0),
            look_anyway: LOOK_ANYWAY,
        }
    }

    /// Whether any of the files may have changed since the last time this
    /// said no. Before the watch is made, after a change, and where the
    /// kernel cannot watch: yes (and the watch is armed again before
    /// returning, so a change made while the caller looks is seen next
    /// time).
    pub(crate) fn may_have_changed(&mut self) -> bool {
        match &mut self.watch {
            Watch::NotYet(asked) if *asked + 1 < ARM_AFTER => *asked += 1,
            Watch::NotYet(_) => {
                self.watch = match inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC) {
                    Ok(fd) => Watch::Armed(Armed {
                        fd,
                        looked: Instant::now(),
                        counts: HashMap::new(),
                    }),
                    Err(_) => Watch::Unavailable,
                };
                self.rearm();
            }
            Watch::Armed(armed) => {
                let changed = armed.saw_change();
                if !changed && armed.looked.elapsed() < self.look_anyway {
                    return false;
                }
                armed.looked = Instant::now();
                if changed {
                    armed.drain();
                    self.rearm();
                }
            }
            Watch::Unavailable => {}
        }
        true
    }

    /// Watches each file again (the same watch where it is the same
    /// file); gives up on watching when the kernel refuses.
    fn rearm(&mut self) {
        if let Watch::Armed(armed) = &mut self.watch
            && armed.watch(&self.paths).is_none()
        {
            self.watch = Watch::Unavailable;
        }
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

    /// Reads and drops every queued event.
    fn drain(&self) {
        let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        while reader.next().is_ok() {}
    }

    /// Adds a watch on each of `paths` and on the nearest directory on
    /// its way (the same watch again where it is the same file); `None`
    /// where the kernel refuses one.
    fn watch(&mut self, paths: &[PathBuf]) -> Option<()> {
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
            match inotify::add_watch(&self.fd, path, file_events) {
                Ok(wd) => {
                    self.counts.insert(wd, None);
                }
                Err(Errno::NOENT | Errno::NOTDIR) => {}
                Err(_) => return None,
            }
            let (directory, entry) = nearest_directory(&self.fd, path, entry_events)?;
            let names = self
                .counts
                .entry(directory)
                .or_insert_with(|| Some(Vec::new()));
            if let Some(names) = names
                && !names.contains(&entry)
            {
                names.push(entry);
            }
        }
        Some(())
    }
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
        for _ in 0..ARM_AFTER {
            assert!(watch.may_have_changed(), "before the watch is made: yes");
        }
        assert!(!watch.may_have_changed(), "nothing changed since");
        (watch, file)
    }

    #[test]
    fn a_few_questions_make_no_watch() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = FileWatch::new(vec![dir.path().join("agent.json")]);
        for _ in 1..ARM_AFTER {
            assert!(watch.may_have_changed());
        }
        assert!(
            matches!(watch.watch, Watch::NotYet(_)),
            "a one-shot command's questions"
        );
        watch.may_have_changed();
        assert!(matches!(watch.watch, Watch::Armed(_)));
    }

    #[test]
    fn the_files_are_looked_at_anyway_now_and_then() {
        let dir = tempfile::tempdir().unwrap();
        let (mut watch, _) = watching(dir.path());
        watch.look_anyway = Duration::from_secs(1);
        assert!(!watch.may_have_changed());
        std::thread::sleep(Duration::from_millis(1100));
        assert!(watch.may_have_changed(), "a change no event told");
        assert!(!watch.may_have_changed());
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
