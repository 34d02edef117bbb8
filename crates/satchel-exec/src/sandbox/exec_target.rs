//! What a namespaced command's process executes, prepared in the parent.
//!
//! With namespaces the command is exec'd by a process that shares its
//! memory with the one std forked ([`super::split`]), not by std's own exec
//! path. So the paths `execvp` would try, and the argument and environment
//! arrays, are built here, where allocating is allowed; the child only
//! calls `execve` on them, trying the paths in order as glibc's `execvp`
//! does (inside the sandbox, so Landlock's view of each is the one that
//! counts).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// `execvp`'s search path when `PATH` is unset (glibc's `_CS_PATH`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The shell `execvp` runs a file with when the kernel cannot (a script
/// without a `#!` line).
const SHELL: &CStr = c"/bin/sh";

/// The program's candidate paths with NUL-terminated `argv` and `envp`.
pub(crate) struct ExecTarget {
    /// Where the program may be, in `execvp`'s order: the program itself
    /// when its name has a slash, else each `PATH` entry joined with it.
    candidates: Vec<CString>,
    // Owners of what `argv` and `envp` point into; never read directly.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `argv` for [`SHELL`], one per candidate: the shell, the candidate,
    /// then the program's arguments.
    script_argv: Vec<Vec<*const libc::c_char>>,
}

// SAFETY: the pointers point into `candidates` and `_strings`, owned by the
// same value and never changed after construction; sharing them is sharing
// `&[CString]`.
unsafe impl Send for ExecTarget {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for ExecTarget {}

impl ExecTarget {
    /// What `command` would exec: its program, looked for in `PATH` (the
    /// command's own `PATH` when it sets one), its arguments, and the
    /// environment it would pass (this process's, unless `clear_env`, with
    /// the command's changes).
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
        let candidates = candidates(command.get_program(), &search)?
            .iter()
            .map(|path| c_string(path.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;

        let mut strings = vec![c_string(command.get_program().as_bytes())?];
        for arg in command.get_args() {
            strings.push(c_string(arg.as_bytes())?);
        }
        let argc = strings.len();
        for (name, value) in &env {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            strings.push(c_string(&pair)?);
        }
        let argv = null_terminated(strings[..argc].iter().map(|s| s.as_ptr()));
        let envp = null_terminated(strings[argc..].iter().map(|s| s.as_ptr()));
        let script_argv = candidates
            .iter()
            .map(|path| {
                let head = [SHELL.as_ptr(), path.as_ptr()];
                null_terminated(head.into_iter().chain(argv[1..argc].iter().copied()))
            })
            .collect();
        Ok(ExecTarget {
            candidates,
            _strings: strings,
            argv,
            envp,
            script_argv,
        })
    }

    /// Replaces the calling process with the program, trying the
    /// candidates as glibc's `execvp` does: past one that is missing or
    /// refused, and through the shell for a file the kernel cannot
    /// execute. Returns only the error. Async-signal-safe: system calls on
    /// prepared memory.
    pub(crate) fn execve(&self) -> io::Error {
        let mut refused = false;
        let mut last = libc::ENOENT;
        for (path, script_argv) in self.candidates.iter().zip(&self.script_argv) {
            // SAFETY: NUL-terminated strings and NULL-terminated arrays
            // that outlive the calls.
            let error = unsafe {
                libc::execve(path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
                let mut error = errno();
                if error == libc::ENOEXEC {
                    libc::execve(SHELL.as_ptr(), script_argv.as_ptr(), self.envp.as_ptr());
                    error = errno();
                }
                error
            };
            match error {
                libc::EACCES => refused = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => return io::Error::from_raw_os_error(other),
            }
            last = error;
        }
        io::Error::from_raw_os_error(if refused { libc::EACCES } else { last })
    }
}

/// The paths `execvp` tries for `program`: the name itself when it has a
/// slash, else each entry of `search` joined with it (an empty entry is
/// the working directory, where the child runs).
fn candidates(program: &OsStr, search: &OsStr) -> io::Result<Vec<OsString>> {
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(vec![program.to_owned()]);
    }
    Ok(search
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let dir = OsStr::from_bytes(if dir.is_empty() { b"." } else { dir });
            Path::new(dir).join(program).into_os_string()
        })
        .collect())
}

fn c_string(bytes: impl AsRef<[u8]>) -> io::Result<CString> {
    CString::new(bytes.as_ref()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument, a variable or the path contains a NUL byte",
        )
    })
}

fn null_terminated(
    pointers: impl Iterator<Item = *const libc::c_char>,
) -> Vec<*const libc::c_char> {
    pointers.chain(std::iter::once(std::ptr::null())).collect()
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_tried_in_each_search_directory_and_a_path_as_it_is() {
        let tried = candidates(OsStr::new("sh"), OsStr::new("/nonexistent::/bin")).unwrap();
        assert_eq!(tried, ["/nonexistent/sh", "./sh", "/bin/sh"]);
        let given = candidates(OsStr::new("./x/y"), OsStr::new("/bin")).unwrap();
        assert_eq!(given, ["./x/y"]);
        let empty = candidates(OsStr::new(""), OsStr::new("/bin")).unwrap_err();
        assert_eq!(empty.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "commands built to be prepared, never run"
    )]
    fn the_environment_is_the_inherited_one_with_the_commands_changes() {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .env("SATCHEL_EXEC_TARGET_SET", "1")
            .env_remove("PATH");
        let target = ExecTarget::of(&command, false).unwrap();
        let envp = target._strings[2..]
            .iter()
            .map(|s| s.to_str().unwrap().to_owned())
            .collect::<Vec<_>>();
        assert!(envp.contains(&"SATCHEL_EXEC_TARGET_SET=1".to_owned()));
        assert!(!envp.iter().any(|pair| pair.starts_with("PATH=")));
        // Without PATH, execvp's default search.
        assert_eq!(target.candidates, [c"/bin/sh", c"/usr/bin/sh"]);
        assert_eq!(target.argv.len(), 3);
        assert_eq!(target.envp.len(), envp.len() + 1);
        assert_eq!(target.script_argv[1].len(), 4);

        let cleared = ExecTarget::of(&Command::new("/bin/true"), true).unwrap();
        assert_eq!(cleared.envp, [std::ptr::null()]);
    }
}
