//! Where Satchel's files live, from the XDG environment variables.

use std::path::PathBuf;

/// `$XDG_CONFIG_HOME/satchel`, falling back to `~/.config/satchel`.
pub(crate) fn user_config_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|dir| dir.join("satchel"))
}

/// `$XDG_DATA_HOME/satchel/satchel.db`, falling back to
/// `~/.local/share/satchel/satchel.db`.
pub(crate) fn default_db() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share").map(|dir| dir.join("satchel").join("satchel.db"))
}

fn xdg_dir(variable: &str, home_fallback: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(home_fallback)))
}

/// `$XDG_DATA_HOME/satchel/models/all-MiniLM-L6-v2`, where
/// `scripts/fetch-memory-model.sh` puts the embedding model.
pub(crate) fn default_model_dir() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share")
        .map(|dir| dir.join("satchel").join("models").join("all-MiniLM-L6-v2"))
}

/// `$XDG_DATA_HOME/satchel/runtimes/js`, where `satchel doctor --fix`
/// installs bun (as `scripts/install-js-runtime.sh` does into a clone);
/// its `node_modules/.bin` is searched for the `code` tool's runtimes.
pub(crate) fn js_runtime_dir() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share")
        .map(|dir| dir.join("satchel").join("runtimes").join("js"))
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
