//! Small system calls the sandbox's child and the loopback's helper both
//! make between fork and exec: async-signal-safe, allocation-free.

use std::io;

/// Writes `bytes` to the file at `path` in one `write` (a `/proc` file
/// such as `uid_map` takes its content in one write or not at all).
pub(super) fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open, write and close on a valid C string and buffer.
    unsafe {
        let fd = check(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if usize::try_from(written).ok() == Some(bytes.len()) {
            Ok(())
        } else {
            Err(error)
        }
    }
}

/// `result` as an error when it is negative (the C convention).
pub(super) fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}
