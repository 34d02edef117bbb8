//! Layered memory: what the `memory` tool stores and recalls.
//!
//! Four layers with lifetimes ([`MemoryLayer`]: `long` forever, `mid` 90
//! days, `short` 14 days, `session` until its session ends), duplicate
//! detection on store, sessions divided daily or weekly at a local time,
//! and hybrid recall: keyword ranking (SQLite FTS5 BM25, in the store) and
//! semantic ranking (all-MiniLM-L6-v2 run in-process, [`Embedder`],
//! against the in-memory [`VectorIndex`]), fused by reciprocal rank and
//! weighted by recency and certainty ([`RecallConfig`]).
//!
//! Modules: `memory` (the [`Memory`] service), `embed` (tokenizer and BERT
//! forward pass), `index` (quantised vectors and filtered search),
//! `text` (safe FTS5 queries), `session` (division times, the sentinel,
//! [`Summarizer`]), `config` (the `memory` section of agent.json), `locomo`
//! (the benchmark's conversation format and recall metric).
//!
//! What does not live here: SQL and the file (that is `satchel-store`,
//! behind [`MemoryStore`](satchel_store::MemoryStore)), the tool's JSON
//! (that is `satchel-tools`), printing (that is the binary).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod config;
pub mod embed;
mod error;
pub mod index;
pub mod locomo;
mod memory;
pub mod session;
pub mod text;

pub use config::{AutoDivide, Fusion, MemoryConfig, MemorySettings, RecallConfig};
pub use embed::Embedder;
pub use error::MemoryError;
pub use index::{VectorFilter, VectorIndex};
pub use memory::{
    ListQuery, MAX_LIMIT, Maintenance, Memory, MemoryOptions, ModelSource, Recall, RecallQuery,
    Recalled, SessionChange, StoreRequest, Stored, spawn_maintenance, validate_category,
};
pub use satchel_store::{MemoryLayer, MemoryRecord, MemorySession, MemoryStats};
pub use session::{NEW_SESSION_SENTINEL, SYSTEM_CATEGORY, Summarizer, division_after};
