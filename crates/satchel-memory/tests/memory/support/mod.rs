//! Shared test helpers: where the model files are.

#![allow(dead_code)]

use std::sync::Arc;

use satchel_memory::Embedder;
use satchel_memory::testing::model_dir;

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
