//! Layered memory: what the `memory` tool stores and recalls.
//!
//! Four layers with lifetimes ([`MemoryLayer`]: `long` forever, `mid` 90
//! days, `short` 14 days, `session` until its session ends), duplicate
//! detection on store, sessions divided daily or weekly at a local time,
//! and hybrid recall: keyword ranking (BM25 over stemmed words) and
//! semantic ranking (all-MiniLM-L6-v2 run in-process, [`Embedder`]), both
//! against the in-memory [`RecallIndex`], fused, and weighted by recency
//! and certainty ([`RecallConfig`]).
//!
//! Modules: `memory` (the [`Memory`] service), `embed` (tokenizer and BERT
//! forward pass), `index` (the recall index: postings, quantised vectors,
//! filtered search), `text` (words, stems and stopwords), `simd` (loops
//! compiled for AVX2 and picked at run time), `session` (division times, the sentinel,
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
mod fusion;
pub mod index;
pub mod locomo;
mod memory;
mod requests;
pub mod session;
mod simd;
#[doc(hidden)]
pub mod testing;
pub mod text;

pub use config::{AutoDivide, Fusion, MemoryConfig, MemorySettings, RecallConfig};
pub use embed::Embedder;
pub use error::MemoryError;
pub use index::{Bm25, Candidate, KeywordScores, RecallIndex, SemanticSearch};
pub use memory::{Memory, spawn_maintenance, validate_category};
pub use requests::{
    ListQuery, MAX_LIMIT, Maintenance, MemoryOptions, ModelFetcher, ModelSource, Recall,
    RecallQuery, Recalled, SessionChange, StoreRequest, Stored,
};
pub use satchel_store::{MemoryLayer, MemoryRecord, MemorySession, MemoryStats};
pub use session::{NEW_SESSION_SENTINEL, SYSTEM_CATEGORY, Summarizer, division_after};
