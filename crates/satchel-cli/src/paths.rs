//! Where Satchel's files live, from the XDG environment variables, and
//! the environment: the one module that reads it (the libraries never do;
//! `clippy.toml` refuses `std::env::var*` everywhere else).

#![expect(
    clippy::disallowed_methods,
    reason = "the one place the process environment is read"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use satchel_host::HostPaths;

/// The user's directories, as the host takes them.
pub(crate) fn host_paths() -> HostPaths {
    HostPaths {
        config: user_config_dir(),
        cache: user_cache_dir(),
        data: xdg_dir("XDG_DATA_HOME", ".local/share").map(|dir| dir.join("satchel")),
        system_tools: system_tools_dir(),
    }
}

/// The process environment (variables that are not UTF-8 cannot be named
/// in settings, and are left out).
pub(crate) fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

/// `$XDG_CONFIG_HOME/satchel`, falling back to `~/.config/satchel`.
pub(crate) fn user_config_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|dir| dir.join("satchel"))
}

fn xdg_dir(variable: &str, home_fallback: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(home_fallback)))
}

/// `$XDG_CACHE_HOME/satchel`, falling back to `~/.cache/satchel`.
pub(crate) fn user_cache_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CACHE_HOME", ".cache").map(|dir| dir.join("satchel"))
}

/// The system tools directory, `$SATCHEL_LIBEXEC_DIR`.
pub(crate) fn system_tools_dir() -> Option<PathBuf> {
    std::env::var_os("SATCHEL_LIBEXEC_DIR")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

/// One environment variable, if set and UTF-8.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Whether `stream` may be painted: a terminal, and `NO_COLOR` unset.
pub(crate) fn color(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
