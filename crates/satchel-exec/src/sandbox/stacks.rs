//! Stacks for the processes the sandbox clones: they share the memory of
//! the process that clones them, so each runs on a stack of its own.

use std::io;
use std::ptr;

use super::syscalls::check;

/// Each stack. Only the pages touched are ever allocated.
const STACK_SIZE: usize = 256 * 1024;
/// An inaccessible region below each stack, so an overflow faults rather
/// than writing into the next stack (a multiple of every page size).
const GUARD_SIZE: usize = 64 * 1024;
const SLOT: usize = GUARD_SIZE + STACK_SIZE;

/// One mapping for a few stacks, each above a guard region; unmapped when
/// dropped, so its owner must outlive every process running on it.
pub(crate) struct Stacks {
    base: *mut u8,
    count: usize,
}

// SAFETY: a mapping owned by this value alone; the processes that run on
// it are not Rust threads, and the owner keeps it until they have ended.
unsafe impl Send for Stacks {}

impl Stacks {
    /// Maps `count` stacks.
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
        // SAFETY: the mapping made in `map`, no longer used (see `Stacks`).
        unsafe {
            libc::munmap(self.base.cast(), self.count * SLOT);
        }
    }
}
