//! Whether a process still runs, for tests that stop one: found by its
//! command line (tools run in the sandbox's pid namespace, so the pids
//! they print are not this system's), zombies not counted (a zombie has
//! given up its resources).

#![allow(dead_code, unreachable_pub)]

/// Whether a process whose command line contains `marker` runs.
pub fn running(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
    })
}
