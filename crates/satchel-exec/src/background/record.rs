//! The on-disk record of running background processes, so that the next
//! Satchel can end those a killed one left behind.
//!
//! One small file per process, `OWNERPID-ID.proc`, holding four numbers:
//! the process's PID and start time and its Satchel's PID and start time.
//! A start time (clock ticks after boot, from `/proc`) tells a process
//! apart from a later one that got the same PID. The file is removed when
//! the process has ended.

use std::fs::{self, DirBuilder};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::Signal;

use super::tree;

/// One record: which process, started by which Satchel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) pid: i32,
    pub(crate) start: u64,
    pub(crate) owner_pid: i32,
    pub(crate) owner_start: u64,
}

impl Record {
    fn to_line(self) -> String {
        format!(
            "{} {} {} {}\n",
            self.pid, self.start, self.owner_pid, self.owner_start
        )
    }

    fn parse(text: &str) -> Option<Record> {
        let mut numbers = text.split_whitespace();
        Some(Record {
            pid: numbers.next()?.parse().ok()?,
            start: numbers.next()?.parse().ok()?,
            owner_pid: numbers.next()?.parse().ok()?,
            owner_start: numbers.next()?.parse().ok()?,
        })
    }

    /// Whether the process named still runs (same PID, same start time).
    fn alive(pid: i32, start: u64) -> bool {
        tree::stat(pid).is_some_and(|stat| stat.start == start)
    }
}

/// Writes the record of `pid` under `dir`; returns its path.
pub(crate) fn write(dir: &Path, id: &str, pid: i32) -> Option<PathBuf> {
    let me = std::process::id() as i32;
    let record = Record {
        pid,
        start: tree::stat(pid)?.start,
        owner_pid: me,
        owner_start: tree::stat(me)?.start,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ok()?;
    let path = dir.join(format!("{me}-{id}.proc"));
    match fs::write(&path, record.to_line()) {
        Ok(()) => Some(path),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot record a background process");
            None
        }
    }
}

/// Ends every process recorded under `dir` whose Satchel is gone and that
/// still runs, with what it started (its group, its session, and what
/// stayed in them after it ended); removes those records. Returns how many
/// processes were signalled.
pub fn sweep_orphans(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut ended = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "proc") {
            continue;
        }
        let Some(record) = fs::read_to_string(&path)
            .ok()
            .and_then(|text| Record::parse(&text))
        else {
            let _ = fs::remove_file(&path);
            continue;
        };
        if Record::alive(record.owner_pid, record.owner_start) {
            continue;
        }
        ended += end_orphan(record);
        ended += end_marked(&format!("{}.{}.", record.owner_pid, record.owner_start));
        let _ = fs::remove_file(&path);
    }
    ended
}

/// SIGKILLs every process that carries the marker of a dead Satchel
/// (descendants that left the group and the session, or whose parent died).
fn end_marked(prefix: &str) -> usize {
    let victims = tree::marked(prefix);
    for &pid in &victims {
        tree::signal(pid, Signal::KILL);
    }
    victims.len()
}

/// SIGKILLs what is left of one recorded process: the process itself when
/// it still runs, and any process started after it in its group or
/// session (its PID names both, as their leader).
fn end_orphan(record: Record) -> usize {
    let leader_alive = Record::alive(record.pid, record.start);
    let leader_replaced = !leader_alive && tree::stat(record.pid).is_some();
    let mut victims: Vec<i32> = tree::all()
        .into_iter()
        .filter(|p| {
            (p.pgrp == record.pid || p.session == record.pid)
                && p.start >= record.start
                && (leader_alive || !leader_replaced)
        })
        .map(|p| p.pid)
        .collect();
    if leader_alive {
        victims.extend(tree::family(record.pid));
        victims.push(record.pid);
    }
    victims.sort_unstable();
    victims.dedup();
    for &pid in &victims {
        tree::signal(pid, Signal::KILL);
    }
    if !victims.is_empty() {
        tracing::warn!(
            pid = record.pid,
            processes = victims.len(),
            "ended a background process left by a Satchel that is gone"
        );
        // Let the kernel finish them before the caller goes on.
        std::thread::sleep(Duration::from_millis(20));
    }
    victims.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips() {
        let record = Record {
            pid: 12,
            start: 34,
            owner_pid: 56,
            owner_start: 78,
        };
        assert_eq!(Record::parse(&record.to_line()), Some(record));
        assert_eq!(Record::parse("12 x"), None);
    }

    #[test]
    fn records_of_a_live_satchel_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let path = write(dir.path(), "p1", me).unwrap();
        assert_eq!(sweep_orphans(dir.path()), 0);
        assert!(path.exists());
    }
}
