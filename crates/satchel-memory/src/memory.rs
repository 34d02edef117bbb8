//! [`Memory`]: storing, recalling, listing and forgetting memories over a
//! [`MemoryStore`], with lifetimes, duplicate detection, sessions and
//! hybrid recall.
//!
//! Recall ranks by keywords (BM25) and by meaning (the query's embedding)
//! against the in-memory [`RecallIndex`], the keyword ranking while the
//! query is embedded, fuses the two rankings, then applies the recency and
//! certainty factors of [`RecallConfig`](crate::RecallConfig).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use satchel_store::{
    Clock, MemoryFilter, MemoryLayer, MemoryRecord, MemorySession, MemoryStats, MemoryStore,
    MemoryUpdate, NewMemory, NewMemorySession, Timestamp,
};
use tokio::task::JoinHandle;

use crate::MemoryError;
use crate::config::{AutoDivide, MemoryConfig};
use crate::embed::Embedder;
use crate::fusion::{Fused, factors, fuse};
use crate::index::{RecallIndex, SemanticSearch};
use crate::requests::{
    ListQuery, MAX_LIMIT, Maintenance, MemoryOptions, ModelSource, Recall, RecallQuery, Recalled,
    SessionChange, StoreRequest, Stored,
};
use crate::session::{NEW_SESSION_SENTINEL, SYSTEM_CATEGORY, Summarizer, division_after};

/// Layered memory over a store; share it in an `Arc`.
pub struct Memory {
    store: Arc<dyn MemoryStore>,
    /// Replaced whole by `reconfigure`. A step that reads several settings
    /// that belong together (lifetimes, division times) reads them from
    /// one snapshot.
    config: RwLock<Arc<MemoryConfig>>,
    clock: Arc<dyn Clock>,
    model: ModelSource,
    summarizer: Option<Arc<dyn Summarizer>>,
    /// Shared with the memories of other namespaces made by
    /// [`Memory::in_namespace`]: the model loads once.
    embedder: Arc<tokio::sync::OnceCell<Option<Arc<Embedder>>>>,
    index: Arc<RwLock<RecallIndex>>,
    /// Shared with other namespaces' memories, as the index is.
    sync_lock: Arc<tokio::sync::Mutex<()>>,
    fallback_said: AtomicBool,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("namespace", &self.config().namespace)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Categories the layers suggest; a category suggested for another layer
/// is refused with a hint.
const LAYER_CATEGORIES: &[(MemoryLayer, &[&str])] = &[
    (MemoryLayer::Long, &["fact", "preference", "relationship"]),
    (MemoryLayer::Mid, &["goal", "plan", "project"]),
    (MemoryLayer::Short, &["summary", "context"]),
];

/// Longest category, in characters.
const MAX_CATEGORY_CHARS: usize = 40;

/// Checks a category for a layer; returns it trimmed and lowercased.
pub fn validate_category(layer: MemoryLayer, category: &str) -> Result<String, MemoryError> {
    let category = category.trim().to_lowercase();
    if category.is_empty() || category.chars().count() > MAX_CATEGORY_CHARS {
        return Err(MemoryError::Invalid(format!(
            "category must be 1 to {MAX_CATEGORY_CHARS} characters"
        )));
    }
    if !category
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
    {
        return Err(MemoryError::Invalid(format!(
            "category `{category}` may hold only letters, digits, spaces, `-` and `_`"
        )));
    }
    if category == SYSTEM_CATEGORY {
        return Err(MemoryError::Invalid(format!(
            "category `system` is reserved for storing {NEW_SESSION_SENTINEL}"
        )));
    }
    for (home, names) in LAYER_CATEGORIES {
        if *home != layer && names.contains(&category.as_str()) {
            return Err(MemoryError::Invalid(format!(
                "category `{category}` belongs to the `{home}` layer, not `{layer}`; store it there, or use a category of `{layer}` ({})",
                suggested(layer)
            )));
        }
    }
    Ok(category)
}

fn suggested(layer: MemoryLayer) -> String {
    LAYER_CATEGORIES
        .iter()
        .find(|(home, _)| *home == layer)
        .map_or("free text".to_owned(), |(_, names)| {
            format!("{}, or free text", names.join(", "))
        })
}

fn blocking_error(error: tokio::task::JoinError) -> MemoryError {
    MemoryError::Task(error.to_string())
}

fn after(time: Timestamp, ttl: Option<Duration>) -> Option<Timestamp> {
    let ttl = ttl?;
    let millis = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    Some(Timestamp::from_millis(
        time.as_millis().saturating_add(millis),
    ))
}

impl Memory {
    /// Memory over `store` with `config`.
    pub fn new(
        store: Arc<dyn MemoryStore>,
        config: MemoryConfig,
        options: MemoryOptions,
    ) -> Memory {
        Memory {
            store,
            config: RwLock::new(Arc::new(config)),
            clock: options.clock,
            model: options.model,
            summarizer: options.summarizer,
            embedder: Arc::new(tokio::sync::OnceCell::new()),
            index: Arc::new(RwLock::new(RecallIndex::new())),
            sync_lock: Arc::new(tokio::sync::Mutex::new(())),
            fallback_said: AtomicBool::new(false),
        }
    }

    /// The memories of another namespace over the same store, model,
    /// vector index and summarizer, with this one's settings: whose
    /// memories they are is all that differs (a Telegram user's own, beside
    /// the configured namespace). The model, once loaded, serves both.
    pub fn in_namespace(&self, namespace: &str) -> Memory {
        let mut config = (*self.config()).clone();
        config.namespace = namespace.to_owned();
        Memory {
            store: Arc::clone(&self.store),
            config: RwLock::new(Arc::new(config)),
            clock: Arc::clone(&self.clock),
            model: self.model.clone(),
            summarizer: self.summarizer.clone(),
            embedder: Arc::clone(&self.embedder),
            // The index holds every namespace's vectors (recall filters by
            // namespace): one copy serves them all.
            index: Arc::clone(&self.index),
            sync_lock: Arc::clone(&self.sync_lock),
            fallback_said: AtomicBool::new(false),
        }
    }

    /// The configuration now.
    pub fn config(&self) -> Arc<MemoryConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the configuration (agent.json changed): the next operation
    /// uses the new lifetimes, weights, limits and session times. The
    /// model stays the one this memory was opened with.
    pub fn reconfigure(&self, config: MemoryConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    /// The store underneath.
    pub fn backing_store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The model, loading it on first use; `None` when there is none.
    pub async fn embedder(&self) -> Option<Arc<Embedder>> {
        self.embedder
            .get_or_init(|| async {
                match &self.model {
                    ModelSource::Loaded(embedder) => Some(Arc::clone(embedder)),
                    ModelSource::None => None,
                    ModelSource::Dir(dir) | ModelSource::Fetch { dir, .. } => {
                        if let ModelSource::Fetch { fetcher, .. } = &self.model
                            && !Embedder::files_present(dir)
                            && let Err(error) = fetcher.fetch(dir).await
                        {
                            tracing::warn!("the embedding model could not be fetched: {error}");
                        }
                        if !Embedder::files_present(dir) {
                            return None;
                        }
                        let dir = dir.clone();
                        match tokio::task::spawn_blocking(move || Embedder::shared(&dir)).await {
                            Ok(Ok(embedder)) => Some(embedder),
                            Ok(Err(error)) => {
                                tracing::warn!("{error}; memory recall uses keywords only");
                                None
                            }
                            Err(error) => {
                                tracing::warn!(
                                    "loading the embedding model failed: {error}; memory recall uses keywords only"
                                );
                                None
                            }
                        }
                    }
                }
            })
            .await
            .clone()
    }

    /// Whether the model can be had without fetching it: loaded already,
    /// or its files present (a backfill must not start a download).
    fn model_at_hand(&self) -> bool {
        match &self.model {
            ModelSource::Fetch { dir, .. } => {
                self.embedder.initialized() || Embedder::files_present(dir)
            }
            ModelSource::Dir(_) | ModelSource::Loaded(_) | ModelSource::None => true,
        }
    }

    /// Why semantic recall is off, said the first time only.
    fn fallback_notice(&self) -> Option<String> {
        if self.fallback_said.swap(true, Ordering::SeqCst) {
            return None;
        }
        let reason = match &self.model {
            ModelSource::Dir(dir) | ModelSource::Fetch { dir, .. } => format!(
                "the embedding model is not available in {} (`satchel doctor --fix` fetches it)",
                dir.display()
            ),
            ModelSource::None | ModelSource::Loaded(_) => "no embedding model is configured".into(),
        };
        let notice = format!("memory recall uses keywords only: {reason}");
        tracing::warn!("{notice}");
        Some(notice)
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Option<Vec<Vec<f32>>>, MemoryError> {
        let Some(embedder) = self.embedder().await else {
            return Ok(None);
        };
        let vectors = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await
        .map_err(blocking_error)??;
        Ok(Some(vectors))
    }

    /// Embeds memories stored without an embedding (before the model was
    /// available), `batch` at a time, each batch committed before the
    /// next, until none is left; returns how many got one. Resumable: a
    /// stopped run leaves the rest for the next. Nothing to do, and 0,
    /// without a model, or with one still to be fetched (the first store
    /// or recall fetches it; the next open backfills).
    pub async fn backfill_embeddings(&self, batch: usize) -> Result<usize, MemoryError> {
        if !self.model_at_hand() || self.embedder().await.is_none() {
            return Ok(0);
        }
        let mut done = 0;
        loop {
            let pending = self.store.memories_without_embedding(batch.max(1)).await?;
            if pending.is_empty() {
                break;
            }
            let texts: Vec<String> = pending.iter().map(|(_, text)| text.clone()).collect();
            let Some(vectors) = self.embed(texts).await? else {
                break;
            };
            let mut set = 0;
            for ((id, content), vector) in pending.into_iter().zip(vectors) {
                if self
                    .store
                    .set_memory_embedding(&id, &content, vector)
                    .await?
                {
                    set += 1;
                }
            }
            done += set;
            if set == 0 {
                // Every row changed under us; the next run picks them up.
                break;
            }
        }
        Ok(done)
    }

    /// Brings the recall index up to the store's latest revision (changes
    /// by this process and others alike).
    pub async fn sync_index(&self) -> Result<(), MemoryError> {
        let _guard = self.sync_lock.lock().await;
        let have = self
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .revision();
        if self.store.memory_revision().await? == have {
            return Ok(());
        }
        let changes = self.store.memory_changes(have).await?;
        let index = Arc::clone(&self.index);
        tokio::task::spawn_blocking(move || {
            index.write().unwrap_or_else(PoisonError::into_inner).apply(
                changes.rev,
                changes.upserts,
                &changes.deleted,
            );
        })
        .await
        .map_err(blocking_error)?;
        Ok(())
    }

    fn expiry(&self, layer: MemoryLayer, created_at: Timestamp) -> Option<Timestamp> {
        let config = self.config();
        match layer {
            MemoryLayer::Long => after(created_at, config.long_ttl),
            MemoryLayer::Mid => after(created_at, config.mid_ttl),
            MemoryLayer::Short => after(created_at, config.short_ttl),
            MemoryLayer::Session => None,
        }
    }

    fn check(&self, request: &StoreRequest) -> Result<(String, Option<String>, f32), MemoryError> {
        let content = request.content.trim();
        if content.is_empty() {
            return Err(MemoryError::Invalid("content must not be empty".into()));
        }
        let chars = content.chars().count();
        let most = self.config().max_content_chars;
        if chars > most {
            return Err(MemoryError::Invalid(format!(
                "content is {chars} characters; at most {most} are kept per memory: store the essentials, or split it"
            )));
        }
        let certainty = request.certainty.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&certainty) {
            return Err(MemoryError::Invalid(format!(
                "certainty must be between 0 and 1, not {certainty}"
            )));
        }
        let category = request
            .category
            .as_deref()
            .map(|c| validate_category(request.layer, c))
            .transpose()?;
        Ok((content.to_owned(), category, certainty))
    }

    /// Stores a memory: validates it, updates a near-duplicate of the same
    /// layer instead of adding a copy, and starts a new session for the
    /// sentinel.
    pub async fn store(&self, request: StoreRequest) -> Result<Stored, MemoryError> {
        if request.content.trim() == NEW_SESSION_SENTINEL {
            let category = request.category.as_deref().map(str::trim);
            if category != Some(SYSTEM_CATEGORY) {
                return Err(MemoryError::Invalid(format!(
                    "to start a new session, store {NEW_SESSION_SENTINEL} with category `system`"
                )));
            }
            let change = self
                .new_session(request.conversation_id.as_deref(), None, "model")
                .await?;
            return Ok(Stored::NewSession(Box::new(change)));
        }
        let (content, category, certainty) = self.check(&request)?;
        let now = self.now();
        let created_at = request.created_at.unwrap_or(now);
        let session_id = match request.layer {
            MemoryLayer::Session => Some(
                self.current_session(request.conversation_id.as_deref())
                    .await?
                    .id,
            ),
            _ => None,
        };
        let embedding = self
            .embed(vec![content.clone()])
            .await?
            .and_then(|mut v| v.pop());
        let filter = MemoryFilter {
            namespace: self.config().namespace.clone(),
            layers: vec![request.layer],
            live_at: Some(now),
            session_id: session_id.clone(),
            ..MemoryFilter::default()
        };
        let duplicate = self
            .find_duplicate(&content, embedding.as_deref(), &filter)
            .await?;
        let expires_at = self.expiry(request.layer, created_at);
        if let Some((existing, similarity)) = duplicate {
            let memory = self
                .store
                .update_memory(MemoryUpdate {
                    id: existing.id.clone(),
                    content,
                    category: category.or(existing.category.clone()),
                    certainty,
                    expires_at: self.expiry(request.layer, now).or(existing.expires_at),
                    embedding,
                })
                .await?;
            self.sync_index().await?;
            return Ok(Stored::Updated {
                memory,
                previous_content: existing.content,
                similarity,
            });
        }
        let mut stored = self
            .store
            .insert_memories(vec![NewMemory {
                namespace: self.config().namespace.clone(),
                layer: request.layer,
                content,
                category,
                certainty,
                session_id,
                conversation_id: request.conversation_id,
                created_at: Some(created_at),
                expires_at,
                embedding,
            }])
            .await?;
        self.sync_index().await?;
        stored
            .pop()
            .map(Stored::Created)
            .ok_or_else(|| MemoryError::Task("the store returned no memory".into()))
    }

    /// The live memory of the same layer that `content` repeats, with the
    /// similarity: cosine at or above the threshold with a model, the same
    /// text ignoring case and spacing without.
    async fn find_duplicate(
        &self,
        content: &str,
        embedding: Option<&[f32]>,
        filter: &MemoryFilter,
    ) -> Result<Option<(MemoryRecord, f32)>, MemoryError> {
        let same_text = self
            .store
            .memories_with_text(filter.clone(), content)
            .await?;
        if let Some(found) = same_text.into_iter().next() {
            return Ok(Some((found, 1.0)));
        }
        let Some(embedding) = embedding else {
            return Ok(None);
        };
        self.sync_index().await?;
        // Every vector is compared, off the async thread as recall's
        // ranking is: a large store would hold up the runtime's other tasks.
        let index = Arc::clone(&self.index);
        let (embedding, filter) = (embedding.to_vec(), filter.clone());
        let best = tokio::task::spawn_blocking(move || {
            let index = index.read().unwrap_or_else(PoisonError::into_inner);
            index
                .search_vectors(&embedding, &filter, 1, usize::MAX)
                .into_iter()
                .next()
        })
        .await
        .map_err(blocking_error)?;
        let Some((seq, similarity)) = best else {
            return Ok(None);
        };
        if similarity < self.config().duplicate_similarity {
            return Ok(None);
        }
        let found = self.store.memories_by_seq(vec![seq]).await?;
        Ok(found.into_iter().next().map(|m| (m, similarity)))
    }

    /// Stores many memories at once, embedded in batches, without looking
    /// for duplicates (an import keeps every item). One transaction per
    /// call.
    pub async fn import(
        &self,
        requests: Vec<StoreRequest>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let now = self.now();
        let mut checked = Vec::with_capacity(requests.len());
        for request in &requests {
            if request.layer == MemoryLayer::Session {
                return Err(MemoryError::Invalid(
                    "session memories cannot be imported; store them one by one".into(),
                ));
            }
            checked.push(self.check(request)?);
        }
        let texts: Vec<String> = checked.iter().map(|(c, _, _)| c.clone()).collect();
        let embeddings = self.embed(texts).await?;
        let mut embeddings = embeddings.map(Vec::into_iter);
        let new: Vec<NewMemory> = requests
            .into_iter()
            .zip(checked)
            .map(|(request, (content, category, certainty))| {
                let created_at = request.created_at.unwrap_or(now);
                NewMemory {
                    namespace: self.config().namespace.clone(),
                    layer: request.layer,
                    content,
                    category,
                    certainty,
                    session_id: None,
                    conversation_id: request.conversation_id,
                    created_at: Some(created_at),
                    expires_at: self.expiry(request.layer, created_at),
                    embedding: embeddings.as_mut().and_then(Iterator::next),
                }
            })
            .collect();
        let stored = self.store.insert_memories(new).await?;
        self.sync_index().await?;
        Ok(stored)
    }

    /// The filter for what a conversation may recall now.
    async fn recall_filter(
        &self,
        conversation_id: Option<&str>,
        now: Timestamp,
    ) -> Result<MemoryFilter, MemoryError> {
        let session = self.due_session(conversation_id, now).await?;
        Ok(MemoryFilter {
            namespace: self.config().namespace.clone(),
            live_at: Some(now),
            // Session memories only from the conversation's open session.
            session_id: Some(session.map_or_else(|| "-".to_owned(), |s| s.id)),
            ..MemoryFilter::default()
        })
    }

    /// Hybrid recall; see the module docs.
    pub async fn recall(&self, query: RecallQuery) -> Result<Recall, MemoryError> {
        let text = query.text.trim().to_owned();
        if text.is_empty() {
            return Err(MemoryError::Invalid("query must not be empty".into()));
        }
        let limit = query.limit.clamp(1, MAX_LIMIT);
        let now = query.as_of.unwrap_or_else(|| self.now());
        let filter = MemoryFilter {
            layers: query.layers.clone(),
            category: query.category.as_deref().map(|c| c.trim().to_lowercase()),
            since: query.since,
            until: query.until,
            ..self
                .recall_filter(query.conversation_id.as_deref(), now)
                .await?
        };
        let config = self.config();
        let recall = &config.recall;
        let candidates = recall.candidates.max(limit);
        let started = std::time::Instant::now();
        self.sync_index().await?;
        let synced = started.elapsed();
        let embedder = self.embedder().await;
        let semantic = embedder.is_some();
        let index = Arc::clone(&self.index);
        let (owned, bm25) = (text.clone(), recall.bm25);
        let search = SemanticSearch {
            limit: candidates,
            exact_scan_limit: recall.exact_scan_limit,
            centring: recall.centring,
        };
        let index_filter = filter;
        let candidates = tokio::task::spawn_blocking(move || {
            let index = index.read().unwrap_or_else(PoisonError::into_inner);
            // Keywords are ranked on another thread while the query is embedded.
            std::thread::scope(|scope| {
                let keywords =
                    scope.spawn(|| index.keyword_scores(&owned, &index_filter, candidates, bm25));
                let vector = embedder.map(|e| e.embed_query(&owned)).transpose();
                let keywords = keywords.join().unwrap_or_default();
                Ok::<_, MemoryError>(index.candidates(
                    &keywords,
                    vector?.as_deref().map(Vec::as_slice),
                    &index_filter,
                    search,
                ))
            })
        })
        .await
        .map_err(blocking_error)??;
        tracing::debug!(?synced, took = ?started.elapsed(), "memory recall rankings");
        let notice = if !semantic {
            self.fallback_notice()
        } else {
            None
        };
        let mut fused: Vec<Fused> = fuse(recall, &candidates)
            .into_iter()
            .map(|f| Fused {
                score: f.score * factors(recall, f.created_at, f.certainty, now),
                ..f
            })
            .filter(|f| f.score >= recall.min_relevance)
            .collect();
        fused.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.created_at.cmp(&a.created_at))
        });
        fused.truncate(limit);
        // Only what is returned is read from the store.
        let seqs: Vec<i64> = fused.iter().map(|f| f.seq).collect();
        let mut records: HashMap<i64, MemoryRecord> = self
            .store
            .memories_by_seq(seqs)
            .await?
            .into_iter()
            .map(|m| (m.seq, m))
            .collect();
        let memories: Vec<Recalled> = fused
            .into_iter()
            .filter_map(|f| {
                Some(Recalled {
                    memory: records.remove(&f.seq)?,
                    relevance: f.score,
                    semantic: f.semantic,
                    keyword: f.keyword,
                })
            })
            .collect();
        Ok(Recall {
            memories,
            semantic,
            notice,
        })
    }

    /// Memories newest first.
    pub async fn list(
        &self,
        query: ListQuery,
        conversation_id: Option<&str>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let now = self.now();
        let base = if query.include_inactive {
            MemoryFilter {
                namespace: self.config().namespace.clone(),
                include_archived: true,
                ..MemoryFilter::default()
            }
        } else {
            self.recall_filter(conversation_id, now).await?
        };
        let filter = MemoryFilter {
            layers: query.layers,
            category: query.category.map(|c| c.trim().to_lowercase()),
            since: query.since,
            until: query.until,
            ..base
        };
        Ok(self
            .store
            .list_memories(filter, query.limit.clamp(1, 10_000))
            .await?)
    }

    /// Deletes a memory for good, from the table, the keyword index and
    /// the vectors.
    pub async fn forget(&self, id: &str) -> Result<(), MemoryError> {
        let deleted = self
            .store
            .delete_memories(&self.config().namespace, vec![id.to_owned()])
            .await?;
        if deleted.is_empty() {
            return Err(MemoryError::NotFound(id.to_owned()));
        }
        self.sync_index().await
    }

    /// Counts for this namespace.
    pub async fn stats(&self) -> Result<MemoryStats, MemoryError> {
        Ok(self
            .store
            .memory_stats(&self.config().namespace, self.now())
            .await?)
    }

    /// Memories with an embedding in the vector index.
    pub async fn indexed(&self) -> usize {
        self.index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The conversation's open session, ending it first when its division
    /// time has passed; `None` when none is open.
    async fn due_session(
        &self,
        conversation_id: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<MemorySession>, MemoryError> {
        let Some(open) = self
            .store
            .open_session(&self.config().namespace, conversation_id)
            .await?
        else {
            return Ok(None);
        };
        match self.division(&open) {
            Some(end) if end <= now => {
                self.end(open, end, self.divide_reason()).await?;
                Ok(None)
            }
            _ => Ok(Some(open)),
        }
    }

    fn division(&self, session: &MemorySession) -> Option<Timestamp> {
        let config = self.config();
        division_after(
            session.started_at,
            config.auto_divide,
            config.divide_at,
            &config.zone(),
        )
    }

    fn divide_reason(&self) -> &'static str {
        match self.config().auto_divide {
            AutoDivide::Daily => "daily",
            AutoDivide::Weekly(_) => "weekly",
            AutoDivide::None => "none",
        }
    }

    /// The conversation's current session, starting one when none is open
    /// (or the open one's division time has passed).
    pub async fn current_session(
        &self,
        conversation_id: Option<&str>,
    ) -> Result<MemorySession, MemoryError> {
        let now = self.now();
        if let Some(open) = self.due_session(conversation_id, now).await? {
            return Ok(open);
        }
        Ok(self
            .store
            .start_session(NewMemorySession {
                namespace: self.config().namespace.clone(),
                conversation_id: conversation_id.map(str::to_owned),
                name: None,
                started_at: Some(now),
            })
            .await?)
    }

    /// Ends the conversation's open session (archiving its memories and
    /// writing its summary) and starts a new one named `name`.
    /// `reason` says who asked: `user`, `model`...
    pub async fn new_session(
        &self,
        conversation_id: Option<&str>,
        name: Option<String>,
        reason: &str,
    ) -> Result<SessionChange, MemoryError> {
        let now = self.now();
        let open = self
            .store
            .open_session(&self.config().namespace, conversation_id)
            .await?;
        let mut change = match open {
            Some(open) => self.end(open, now, reason).await?,
            None => SessionChange {
                ended: None,
                archived: 0,
                summary: None,
                summary_skipped: None,
                started: None,
            },
        };
        let started = self
            .store
            .start_session(NewMemorySession {
                namespace: self.config().namespace.clone(),
                conversation_id: conversation_id.map(str::to_owned),
                name,
                started_at: Some(now),
            })
            .await?;
        change.started = Some(started);
        Ok(change)
    }

    /// Ends a session at `at`: archives its memories, then writes the
    /// summary through the summarizer (skipped, and logged, without one).
    async fn end(
        &self,
        session: MemorySession,
        at: Timestamp,
        reason: &str,
    ) -> Result<SessionChange, MemoryError> {
        let keep = after(at, Some(self.config().archived_session_ttl));
        let (ended, archived) = self
            .store
            .end_session(&session.id, at, reason, keep)
            .await?;
        self.sync_index().await?;
        let mut change = SessionChange {
            ended: Some(ended.clone()),
            archived: archived.len(),
            summary: None,
            summary_skipped: None,
            started: None,
        };
        if archived.is_empty() {
            change.summary_skipped = Some("the session stored no memories".into());
            return Ok(change);
        }
        let Some(summarizer) = &self.summarizer else {
            let reason = "no model is configured to write it";
            tracing::info!(session = %ended.id, "session ended; its summary was skipped: {reason}");
            change.summary_skipped = Some(reason.into());
            return Ok(change);
        };
        let text = match summarizer.summarize(&ended, &archived).await {
            Ok(text) if !text.trim().is_empty() => text,
            Ok(_) => {
                change.summary_skipped = Some("the model wrote an empty summary".into());
                return Ok(change);
            }
            Err(error) => {
                tracing::warn!(session = %ended.id, %error, "the session summary failed");
                change.summary_skipped = Some(format!("the summary request failed: {error}"));
                return Ok(change);
            }
        };
        let text: String = text
            .trim()
            .chars()
            .take(self.config().max_content_chars)
            .collect();
        let embedding = self
            .embed(vec![text.clone()])
            .await?
            .and_then(|mut v| v.pop());
        let summary = self
            .store
            .insert_memories(vec![NewMemory {
                namespace: self.config().namespace.clone(),
                layer: MemoryLayer::Short,
                content: text,
                category: Some("summary".into()),
                certainty: 1.0,
                session_id: Some(ended.id.clone()),
                conversation_id: ended.conversation_id.clone(),
                created_at: Some(at),
                expires_at: self.expiry(MemoryLayer::Short, at),
                embedding,
            }])
            .await?
            .pop();
        if let Some(summary) = &summary {
            self.store
                .set_session_summary(&ended.id, &summary.id)
                .await?;
        }
        self.sync_index().await?;
        change.summary = summary;
        Ok(change)
    }

    /// Ends every session of the namespace whose division time has passed
    /// and deletes expired memories. Long-running processes call it
    /// periodically ([`spawn_maintenance`]); the CLI runs it now and then.
    pub async fn maintain(&self) -> Result<Maintenance, MemoryError> {
        let now = self.now();
        let mut done = Maintenance::default();
        let sessions = self.store.sessions(&self.config().namespace, 1000).await?;
        for session in sessions.into_iter().filter(|s| s.ended_at.is_none()) {
            if let Some(end) = self.division(&session)
                && end <= now
            {
                self.end(session, end, self.divide_reason()).await?;
                done.sessions_ended += 1;
            }
        }
        done.purged = self.store.purge_expired_memories(now).await?;
        if done.purged > 0 {
            self.sync_index().await?;
        }
        Ok(done)
    }
}

/// Runs [`Memory::maintain`] every `config.purge_interval` (as configured
/// after each run) until the last other `Arc` to the memory is dropped.
pub fn spawn_maintenance(memory: &Arc<Memory>) -> JoinHandle<()> {
    let weak = Arc::downgrade(memory);
    let mut interval = memory.config().purge_interval;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let Some(memory) = weak.upgrade() else { return };
            interval = memory.config().purge_interval;
            match memory.maintain().await {
                Ok(done) if done.purged > 0 || done.sessions_ended > 0 => {
                    tracing::info!(?done, "memory maintenance")
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "memory maintenance failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn categories_are_checked_against_layers() {
        assert_eq!(
            validate_category(MemoryLayer::Long, " Fact ").unwrap(),
            "fact"
        );
        assert_eq!(validate_category(MemoryLayer::Mid, "goal").unwrap(), "goal");
        assert_eq!(
            validate_category(MemoryLayer::Long, "hobby").unwrap(),
            "hobby"
        );
        let error = validate_category(MemoryLayer::Long, "goal").unwrap_err();
        assert!(
            error.to_string().contains("belongs to the `mid` layer"),
            "{error}"
        );
        assert!(validate_category(MemoryLayer::Mid, "fact").is_err());
        assert!(validate_category(MemoryLayer::Long, "").is_err());
        assert!(validate_category(MemoryLayer::Long, "a;b").is_err());
        assert!(validate_category(MemoryLayer::Long, "system").is_err());
        assert!(validate_category(MemoryLayer::Session, &"x".repeat(41)).is_err());
    }
}
