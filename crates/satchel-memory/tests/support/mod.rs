//! Shared test helpers: where the model files are.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use satchel_memory::Embedder;

/// The model directory: `SATCHEL_TEST_MODEL_DIR`, else where
/// `scripts/fetch-memory-model.sh` puts it.
pub(crate) fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SATCHEL_TEST_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".local/share")
        });
    data.join("satchel/models/all-MiniLM-L6-v2")
}

/// The shared model; fails the test, saying what to run, when it is absent.
pub(crate) fn embedder() -> Arc<Embedder> {
    let dir = model_dir();
    assert!(
        Embedder::files_present(&dir),
        "the embedding model is not in {}: run scripts/fetch-memory-model.sh (or set SATCHEL_TEST_MODEL_DIR)",
        dir.display()
    );
    Embedder::shared(&dir).unwrap()
}
