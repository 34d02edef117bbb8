//! [`HostPaths`]: where Satchel's files live. The binary fills it from the
//! XDG environment variables; the host never reads the environment itself,
//! so a test or an embedding program chooses every location.

use std::path::PathBuf;

/// The user-level directories a host reads and writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPaths {
    /// `$XDG_CONFIG_HOME/satchel`: the user's agent.json, mcp.json, tools.
    pub config: Option<PathBuf>,
    /// `$XDG_CACHE_HOME/satchel`: the external tools' spec cache.
    pub cache: Option<PathBuf>,
    /// `$XDG_DATA_HOME/satchel`: the database, the embedding model, the
    /// trust store, installed runtimes.
    pub data: Option<PathBuf>,
    /// `$SATCHEL_LIBEXEC_DIR`: the system tools directory.
    pub system_tools: Option<PathBuf>,
}

impl HostPaths {
    /// The default database, `data/satchel.db`.
    pub fn default_db(&self) -> Option<PathBuf> {
        self.data.as_ref().map(|dir| dir.join("satchel.db"))
    }

    /// Where `scripts/fetch-memory-model.sh` and the first-use fetch put
    /// the embedding model: `data/models/all-MiniLM-L6-v2`.
    pub fn default_model_dir(&self) -> Option<PathBuf> {
        self.data
            .as_ref()
            .map(|dir| dir.join("models").join("all-MiniLM-L6-v2"))
    }

    /// Where `satchel doctor --fix` installs bun (as
    /// `scripts/install-js-runtime.sh` does into a clone): `data/runtimes/js`;
    /// its `node_modules/.bin` is searched for the `code` tool's runtimes.
    pub fn js_runtime_dir(&self) -> Option<PathBuf> {
        self.data
            .as_ref()
            .map(|dir| dir.join("runtimes").join("js"))
    }

    /// Where trust in projects is remembered: `data/trusted-projects.json`.
    pub fn trust_store(&self) -> Option<PathBuf> {
        self.data
            .as_ref()
            .map(|dir| dir.join("trusted-projects.json"))
    }

    /// The user's tools directory, `config/tools`.
    pub fn user_tools(&self) -> Option<PathBuf> {
        self.config.as_ref().map(|dir| dir.join("tools"))
    }
}
