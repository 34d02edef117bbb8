//! [`MemoryError`]: every way a memory operation can fail.

use std::path::PathBuf;

use satchel_store::StoreError;

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The input is not acceptable (an empty text, a certainty outside 0
    /// to 1, a category that does not belong to the layer...). Produced by
    /// storing and recalling; not retryable until the input is fixed.
    #[error("{0}")]
    Invalid(String),
    /// No memory with this id (in this namespace). Not retryable.
    #[error("no memory with id `{0}`")]
    NotFound(String),
    /// The model directory lacks files. Produced when the model is loaded;
    /// run `scripts/fetch-memory-model.sh`. Recall falls back to keywords.
    #[error(
        "the embedding model is not installed in `{}` (missing {missing}); `satchel doctor --fix` fetches it",
        dir.display()
    )]
    ModelMissing {
        /// The model directory.
        dir: PathBuf,
        /// The files that are missing.
        missing: String,
    },
    /// A model file is unreadable or does not describe a supported model.
    /// Not retryable until the file is replaced.
    #[error("cannot load the embedding model from `{}`: {reason}", path.display())]
    Model {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The store failed; see [`StoreError`] for retryability.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A blocking task (embedding, loading) was cancelled or panicked.
    #[error("a background task failed: {0}")]
    Task(String),
}
