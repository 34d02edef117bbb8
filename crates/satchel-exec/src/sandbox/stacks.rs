//! Stacks for the processes the sandbox clones: they share the memory of
//! the process that clones them, so each runs on a stack of its own.

use std::io;
use std::ptr;
use std::sync::{Mutex, PoisonError};

use super::syscalls::check;

/// Each stack. Only the pages touched are ever allocated.
const STACK_SIZE: usize = 256 * 1024;
/// An inaccessible region below each stack, so an overflow faults rather
/// than writing into the next stack (a multiple of every page size).
const GUARD_SIZE: usize = 64 * 1024;
const SLOT: usize = GUARD_SIZE + STACK_SIZE;
/// Mappings kept for the next commands once their processes have ended:
/// one used before has its pages already, so a command neither maps,
/// guards and faults in its stacks nor unmaps them. A few, for the
/// commands a host runs at once.
const KEPT: usize = 8;

/// Mappings whose processes have ended, as (address, stacks).
static KEPT_MAPPINGS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// One mapping for a few stacks, each above a guard region; unmapped (or
/// kept for a later command) when dropped, so its owner must outlive every
/// process running on it.
pub(crate) struct Stacks {
    base: *mut u8,
    count: usize,
    /// Given back to [`KEPT_MAPPINGS`] when dropped, rather than unmapped.
    kept: bool,
}

// SAFETY: a mapping owned by this value alone; the processes that run on
// it are not Rust threads, and the owner keeps it until they have ended.
unsafe impl Send for Stacks {}

impl Stacks {
    /// `count` stacks kept from an earlier command, or new ones; given
    /// back when dropped. Not in a forked child (another thread may hold
    /// the lock forever there): [`Stacks::map`].
    pub(crate) fn reused(count: usize) -> io::Result<Stacks> {
        let kept = {
            let mut kept = lock();
            let index = kept.iter().position(|&(_, n)| n == count);
            index.map(|index| kept.swap_remove(index))
        };
        if let Some((base, count)) = kept {
            return Ok(Stacks {
                base: base as *mut u8,
                count,
                kept: true,
            });
        }
        let mut stacks = Stacks::map(count)?;
        stacks.kept = true;
        Ok(stacks)
    }

    /// Maps `count` new stacks, unmapped when dropped.
    pub(crate) fn map(count: usize) -> io::Result<Stacks> {
        // SAFETY: a fresh anonymous mapping, and protection changes within
        // it; the mapping is owned by the returned value from here on.
        unsafe {
            let base = libc::mmap(
                ptr::null_mut(),
                count * SLOT,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stacks = Stacks {
                base: base.cast(),
                count,
                kept: false,
            };
            for slot in 0..count {
                check(libc::mprotect(
                    stacks.base.add(slot * SLOT).cast(),
                    GUARD_SIZE,
                    libc::PROT_NONE,
                ))?;
            }
            Ok(stacks)
        }
    }

    /// The top of stack `index` (stacks grow down).
    pub(crate) fn top(&self, index: usize) -> *mut libc::c_void {
        assert!(index < self.count, "stack {index} of {}", self.count);
        // SAFETY: within the mapping: the end of slot `index`.
        unsafe { self.base.add((index + 1) * SLOT).cast() }
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        if self.kept {
            let mut kept = lock();
            if kept.len() < KEPT {
                kept.push((self.base as usize, self.count));
                return;
            }
        }
        // SAFETY: the mapping made in `map`, no longer used (see `Stacks`).
        unsafe {
            libc::munmap(self.base.cast(), self.count * SLOT);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    KEPT_MAPPINGS.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_given_back_is_the_next_one_taken_and_stays_usable() {
        let first = Stacks::reused(3).unwrap();
        let top = first.top(2);
        // SAFETY: the byte just below the top is inside the third stack.
        unsafe { *top.cast::<u8>().sub(1) = 7 };
        drop(first);
        let second = Stacks::reused(3).unwrap();
        assert_eq!(second.top(2), top);
        // SAFETY: as above: still mapped, and written before.
        assert_eq!(unsafe { *second.top(2).cast::<u8>().sub(1) }, 7);
    }
}
