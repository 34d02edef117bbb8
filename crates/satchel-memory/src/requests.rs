//! What callers ask of [`Memory`](crate::Memory) and what they get back:
//! requests to store, recall and list, their answers, and the options a
//! memory is built with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_store::{Clock, MemoryLayer, MemoryRecord, MemorySession, Timestamp};
use serde::Serialize;

use crate::embed::Embedder;
use crate::session::Summarizer;

/// Most results one recall or listing returns.
pub const MAX_LIMIT: usize = 100;

/// Fetches the embedding model into a directory when memory first needs
/// it (the binary's fetcher downloads and verifies it, and tells the user
/// why). The memory crate itself never touches the network.
#[async_trait::async_trait]
pub trait ModelFetcher: Send + Sync + std::fmt::Debug {
    /// Fetches and verifies the model into `dir`.
    async fn fetch(&self, dir: &Path) -> Result<(), String>;
}

/// Where the embedding model comes from.
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// Load it from this directory on first use (keyword recall only when
    /// the files are missing).
    Dir(PathBuf),
    /// Load it from `dir` on first use, fetching it there first when the
    /// files are missing: the first store or recall that embeds fetches
    /// (once per process; a failure leaves recall on keywords). Opening
    /// memory, sessions, listing and the background backfill fetch nothing.
    Fetch {
        /// Where the model is, or goes.
        dir: PathBuf,
        /// Who fetches it.
        fetcher: Arc<dyn ModelFetcher>,
    },
    /// Use this model, already loaded.
    Loaded(Arc<Embedder>),
    /// No model: keyword recall only.
    None,
}

/// What a [`Memory`](crate::Memory) is built with besides the store and configuration.
#[derive(Clone)]
pub struct MemoryOptions {
    /// Where "now" comes from (expiry, sessions, recency).
    pub clock: Arc<dyn Clock>,
    /// The embedding model.
    pub model: ModelSource,
    /// Writes session summaries; `None`: they are skipped (and logged).
    pub summarizer: Option<Arc<dyn Summarizer>>,
}

/// What to store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreRequest {
    /// The layer.
    pub layer: MemoryLayer,
    /// The text.
    pub content: String,
    /// The category, if any.
    pub category: Option<String>,
    /// 0 to 1; `None`: 1.
    pub certainty: Option<f32>,
    /// The conversation storing it, if any (its session, for `session`).
    pub conversation_id: Option<String>,
    /// The time it is dated by; `None`: now. Lifetimes count from it.
    pub created_at: Option<Timestamp>,
}

impl StoreRequest {
    /// A request with no category, full certainty, dated now.
    pub fn new(layer: MemoryLayer, content: impl Into<String>) -> StoreRequest {
        StoreRequest {
            layer,
            content: content.into(),
            category: None,
            certainty: None,
            conversation_id: None,
            created_at: None,
        }
    }
}

/// What a session change did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionChange {
    /// The session that ended, if one was open.
    pub ended: Option<MemorySession>,
    /// Session memories archived with it.
    pub archived: usize,
    /// The summary written to the `short` layer, if any.
    pub summary: Option<MemoryRecord>,
    /// Why no summary was written, when none was.
    pub summary_skipped: Option<String>,
    /// The session now open, when one was started.
    pub started: Option<MemorySession>,
}

/// What storing did.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// A new memory.
    Created(MemoryRecord),
    /// A near-duplicate existed and was updated instead.
    Updated {
        /// The memory as it is now.
        memory: MemoryRecord,
        /// Its text before.
        previous_content: String,
        /// How similar the two were (1 for the same text).
        similarity: f32,
    },
    /// The sentinel: a new session was started.
    NewSession(Box<SessionChange>),
}

/// What to recall.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallQuery {
    /// Free text.
    pub text: String,
    /// Only these layers; empty means all.
    pub layers: Vec<MemoryLayer>,
    /// Only this category.
    pub category: Option<String>,
    /// Only memories dated at or after this.
    pub since: Option<Timestamp>,
    /// Only memories dated before this.
    pub until: Option<Timestamp>,
    /// At most this many (1 to [`MAX_LIMIT`]).
    pub limit: usize,
    /// The conversation asking (its current session's memories are included).
    pub conversation_id: Option<String>,
    /// The time to recall as of (expiry, recency); `None`: now.
    pub as_of: Option<Timestamp>,
}

impl RecallQuery {
    /// A query over every layer, 10 results.
    pub fn new(text: impl Into<String>) -> RecallQuery {
        RecallQuery {
            text: text.into(),
            layers: Vec::new(),
            category: None,
            since: None,
            until: None,
            limit: 10,
            conversation_id: None,
            as_of: None,
        }
    }
}

/// One recalled memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recalled {
    /// The memory.
    #[serde(flatten)]
    pub memory: MemoryRecord,
    /// 0 to 1: fused rank, times the recency and certainty factors.
    pub relevance: f32,
    /// Cosine similarity to the query, when ranked semantically, measured
    /// from the namespace's mean embedding when `recall.centring` is on.
    #[serde(skip)]
    pub semantic: Option<f32>,
    /// BM25 score, when matched by keywords.
    #[serde(skip)]
    pub keyword: Option<f64>,
}

/// The answer to a recall.
#[derive(Debug, Clone, PartialEq)]
pub struct Recall {
    /// Best first.
    pub memories: Vec<Recalled>,
    /// False when only keywords ranked (no model).
    pub semantic: bool,
    /// Said once per process when recall falls back to keywords.
    pub notice: Option<String>,
}

/// What to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    /// Only these layers; empty means all.
    pub layers: Vec<MemoryLayer>,
    /// Only this category.
    pub category: Option<String>,
    /// Only memories dated at or after this.
    pub since: Option<Timestamp>,
    /// Only memories dated before this.
    pub until: Option<Timestamp>,
    /// At most this many.
    pub limit: usize,
    /// Include expired and archived memories.
    pub include_inactive: bool,
}

/// What a maintenance pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Maintenance {
    /// Sessions ended because their division time passed.
    pub sessions_ended: usize,
    /// Expired memories deleted.
    pub purged: u64,
}
