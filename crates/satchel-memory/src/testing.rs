//! For tests and benchmarks, in this crate and the ones above it: where
//! the model files are. Production code never calls this; it is handed
//! its model directory (see `config`).

#![expect(
    clippy::disallowed_methods,
    reason = "tests and benchmarks find the model where the scripts put it"
)]

use std::path::{Path, PathBuf};

/// `SATCHEL_TEST_MODEL_DIR`, else `.peers/models/all-MiniLM-L6-v2` in the
/// repository when `scripts/test` put it there, else where
/// `scripts/fetch-memory-model.sh` puts the model by default:
/// `$XDG_DATA_HOME/satchel/models/all-MiniLM-L6-v2`, under `~/.local/share`
/// without an absolute `XDG_DATA_HOME`.
pub fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SATCHEL_TEST_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let in_repository =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.peers/models/all-MiniLM-L6-v2");
    if in_repository.is_dir() {
        return in_repository;
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share")
        });
    data.join("satchel/models/all-MiniLM-L6-v2")
}
