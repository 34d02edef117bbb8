//! What a namespaced command's process executes, resolved in the parent.
//!
//! With namespaces the command is exec'd by a process that shares its
//! memory with the one std forked ([`super::split`]), not by std's own exec
//! path. So the program is looked up in `PATH` here, the way `execvp`
//! would, and the argument and environment arrays are built here, where
//! allocating is allowed; the child only calls `execve` on them.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `execvp`'s search path when `PATH` is unset (glibc's `_CS_PATH`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The shell `execvp` runs a file with when the kernel cannot (a script
/// without a `#!` line).
const SHELL: &std::ffi::CStr = c"/bin/sh";

/// A resolved program with its NUL-terminated `argv` and `envp` arrays.
pub(crate) struct ExecTarget {
    program: CString,
    // Owners of what the pointer arrays point into; never read directly.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `argv` for [`SHELL`]: the shell, the program, then its arguments.
    script_argv: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into `_strings`, owned by the same value and
// never changed after construction; sharing them is sharing `&[CString]`.
unsafe impl Send for ExecTarget {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for ExecTarget {}

impl ExecTarget {
    /// What `command` would exec: its program found in `PATH` (the
    /// command's own `PATH` when it sets one), its arguments, and the
    /// environment it would pass (this process's, unless `clear_env`,
    /// with the command's changes).
    pub(crate) fn of(command: &Command, clear_env: bool) -> io::Result<ExecTarget> {
        let mut env: BTreeMap<OsString, OsString> = if clear_env {
            BTreeMap::new()
        } else {
            // The child inherits this environment; reading it here builds
            // exactly what std would pass.
            #[expect(
                clippy::disallowed_methods,
                reason = "the environment the child inherits, built for its execve"
            )]
            let inherited = std::env::vars_os();
            inherited.collect()
        };
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => env.insert(name.to_owned(), value.to_owned()),
                None => env.remove(name),
            };
        }
        let search = env
            .get(OsStr::new("PATH"))
            .map_or_else(|| OsString::from(DEFAULT_PATH), Clone::clone);
        let cwd = command.get_current_dir().map(Path::to_path_buf);
        let program = resolve(command.get_program(), &search, cwd.as_deref())?;

        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "an argument contains a NUL byte",
                )
            })
        };
        let mut strings = Vec::new();
        strings.push(c(command.get_program().as_bytes())?);
        for arg in command.get_args() {
            strings.push(c(arg.as_bytes())?);
        }
        let argc = strings.len();
        for (name, value) in &env {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            strings.push(c(&pair)?);
        }
        let pointers = |slice: &[CString]| {
            slice
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let program = c(program.as_os_str().as_bytes())?;
        let argv = pointers(&strings[..argc]);
        let envp = pointers(&strings[argc..]);
        let script_argv = [SHELL.as_ptr(), program.as_ptr()]
            .into_iter()
            .chain(argv[1..].iter().copied())
            .collect();
        Ok(ExecTarget {
            program,
            _strings: strings,
            argv,
            envp,
            script_argv,
        })
    }

    /// Replaces the calling process with the program, or, as `execvp`
    /// does, with the shell running it when it is a file the kernel cannot
    /// execute; returns only the error. Async-signal-safe: system calls on
    /// prepared memory.
    pub(crate) fn execve(&self) -> io::Error {
        // SAFETY: NUL-terminated strings and NULL-terminated arrays that
        // outlive the calls.
        unsafe {
            libc::execve(
                self.program.as_ptr(),
                self.argv.as_ptr(),
                self.envp.as_ptr(),
            );
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::ENOEXEC) {
                return error;
            }
            libc::execve(
                SHELL.as_ptr(),
                self.script_argv.as_ptr(),
                self.envp.as_ptr(),
            );
            error
        }
    }
}

/// `program` as `execvp` finds it: a name with a slash as it is, any other
/// the first executable file of that name in `search`. Relative entries
/// are taken from `cwd`, where the child runs.
fn resolve(program: &OsStr, search: &OsStr, cwd: Option<&Path>) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    if program.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    let mut denied = false;
    for dir in search.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(OsStr::from_bytes(if dir.is_empty() { b"." } else { dir }));
        let dir = match cwd {
            Some(cwd) if dir.is_relative() => cwd.join(dir),
            _ => dir.to_path_buf(),
        };
        let candidate = dir.join(program);
        match rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK) {
            Ok(()) if candidate.is_file() => return Ok(candidate),
            Ok(()) => {}
            Err(errno) if errno == rustix::io::Errno::ACCESS => denied = true,
            Err(_) => {}
        }
    }
    Err(if denied {
        io::ErrorKind::PermissionDenied.into()
    } else {
        io::ErrorKind::NotFound.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_in_the_search_path_and_a_path_is_taken_as_it_is() {
        let found = resolve(OsStr::new("sh"), OsStr::new("/nonexistent:/bin"), None).unwrap();
        assert_eq!(found, Path::new("/bin/sh"));
        let given = resolve(OsStr::new("./x/y"), OsStr::new("/bin"), None).unwrap();
        assert_eq!(given, Path::new("./x/y"));
        let missing = resolve(OsStr::new("no-such-program"), OsStr::new("/bin"), None);
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "commands built to be resolved, never run"
    )]
    fn the_environment_is_the_inherited_one_with_the_commands_changes() {
        let mut command = Command::new("sh");
        command
            .env("SATCHEL_EXEC_TARGET_SET", "1")
            .env_remove("PATH");
        let target = ExecTarget::of(&command, false).unwrap();
        let envp = target._strings[1..]
            .iter()
            .map(|s| s.to_str().unwrap().to_owned())
            .collect::<Vec<_>>();
        assert!(envp.contains(&"SATCHEL_EXEC_TARGET_SET=1".to_owned()));
        assert!(!envp.iter().any(|pair| pair.starts_with("PATH=")));
        // Without PATH, execvp's default search finds it.
        assert_eq!(target.program.to_str().unwrap(), "/bin/sh");
        assert_eq!(target.argv.len(), 2);
        assert_eq!(target.envp.len(), envp.len() + 1);

        let cleared = ExecTarget::of(&Command::new("/bin/true"), true).unwrap();
        assert_eq!(cleared.envp, [std::ptr::null()]);
    }
}
