//! Processes as `/proc` shows them: start times (a PID plus its start time
//! names one process, whatever reuses the PID later), descendants, and the
//! members of a process group or session.

use std::collections::{HashMap, HashSet};

use rustix::process::{Pid, Signal};

/// One line of `/proc/PID/stat`, the fields used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    /// Clock ticks after boot.
    pub(crate) start: u64,
}

/// Parses `/proc/PID/stat`; `None` when the process is gone.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may hold anything; fields
    // resume after the last `)`.
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?.parse().ok()?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is 4, pgrp 5, session 6, start 22.
    Some(Stat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process on the machine that `/proc` lists.
pub(crate) fn all() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// The processes descended from `root` (not `root` itself), and those in
/// its process group or session: what ending it must end.
pub(crate) fn family(root: i32) -> Vec<i32> {
    let processes = all();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for process in &processes {
        children.entry(process.ppid).or_default().push(process.pid);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if found.insert(child) {
                stack.push(child);
            }
        }
    }
    for process in &processes {
        if process.pid != root && (process.pgrp == root || process.session == root) {
            found.insert(process.pid);
        }
    }
    found.into_iter().collect()
}

/// The variable every background process and its descendants carry:
/// `OWNERPID.OWNERSTART.N.` (its Satchel's PID and start time, and a
/// number unique in that Satchel).
/// Children inherit it whatever they do to their group or session, so
/// it finds what a dead Satchel left.
pub(crate) const MARKER: &str = "SATCHEL_BACKGROUND_ID";

/// This Satchel's marker prefix, `PID.START.`.
pub(crate) fn owner_prefix() -> String {
    let me = std::process::id() as i32;
    let start = stat(me).map_or(0, |s| s.start);
    format!("{me}.{start}.")
}

/// Processes whose environment has [`MARKER`] starting with `prefix`.
pub(crate) fn marked(prefix: &str) -> Vec<i32> {
    let needle = format!("{MARKER}={prefix}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|var| var.starts_with(needle.as_bytes()))
            })
        })
        .collect()
}

/// Sends `signal` to one process; one already gone is fine.
pub(crate) fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `signal` to a process group; one already gone is fine.
pub(crate) fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pgid) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pgid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_is_skipped() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(
            stat,
            Stat {
                pid: 42,
                ppid: 1,
                pgrp: 42,
                session: 42,
                start: 12345
            }
        );
    }

    #[test]
    fn this_process_has_a_start_time() {
        let me = std::process::id() as i32;
        let stat = stat(me).unwrap();
        assert_eq!(stat.pid, me);
        assert!(stat.start > 0);
    }
}
