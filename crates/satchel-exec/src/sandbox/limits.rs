//! Resource limits of a sandboxed command: memory, processes, CPU time and
//! file size, with defaults that stop a fork bomb or a 10 GB allocation
//! and leave an ordinary build alone.

/// Limits on one sandboxed command; `None` leaves a resource unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Data memory of each process (`RLIMIT_DATA`: heap and private
    /// writable mappings, so address-space reservations such as V8's do
    /// not count).
    pub memory_bytes: Option<u64>,
    /// Processes alive at once in the command's PID namespace (enforced
    /// where namespaces are available).
    pub processes: Option<u32>,
    /// CPU seconds of each process (`RLIMIT_CPU`).
    pub cpu_secs: Option<u64>,
    /// Largest file a process may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: Option<u64>,
}

const GIB: u64 = 1024 * 1024 * 1024;

impl Default for Limits {
    /// 8 GiB of memory per process (less on a machine with under 16 GiB:
    /// half of it), 1,024 processes, 30 CPU minutes per process and 4 GiB
    /// per file.
    fn default() -> Limits {
        Limits {
            memory_bytes: Some(default_memory()),
            processes: Some(1024),
            cpu_secs: Some(30 * 60),
            file_size_bytes: Some(4 * GIB),
        }
    }
}

impl Limits {
    /// No limit on anything.
    pub fn none() -> Limits {
        Limits {
            memory_bytes: None,
            processes: None,
            cpu_secs: None,
            file_size_bytes: None,
        }
    }

    /// The `setrlimit` calls these limits make (soft and hard alike), and
    /// no core files. A limit never rises above the one Satchel itself
    /// runs under (which it could not raise).
    pub(crate) fn rlimits(&self) -> Vec<(Resource, u64)> {
        let mut limits = vec![(libc::RLIMIT_CORE, 0)];
        limits.extend(self.memory_bytes.map(|v| (libc::RLIMIT_DATA, v)));
        limits.extend(self.cpu_secs.map(|v| (libc::RLIMIT_CPU, v)));
        limits.extend(self.file_size_bytes.map(|v| (libc::RLIMIT_FSIZE, v)));
        for (resource, value) in &mut limits {
            let mut current = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the struct given.
            if unsafe { libc::getrlimit(*resource, &mut current) } == 0 {
                *value = (*value).min(current.rlim_max);
            }
        }
        limits
    }
}

/// The resource argument of `setrlimit` on this libc.
#[cfg(target_env = "gnu")]
pub(crate) type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(crate) type Resource = libc::c_int;

/// Half the physical memory, at most 8 GiB.
fn default_memory() -> u64 {
    let total = rustix::system::sysinfo().totalram;
    let unit = u64::from(rustix::system::sysinfo().mem_unit.max(1));
    (total.saturating_mul(unit) / 2).clamp(GIB, 8 * GIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_stop_a_ten_gigabyte_allocation() {
        let limits = Limits::default();
        assert!(limits.memory_bytes.unwrap() < 10 * GIB);
        assert!(limits.memory_bytes.unwrap() >= GIB);
        assert_eq!(Limits::none().rlimits(), vec![(libc::RLIMIT_CORE, 0)]);
    }
}
