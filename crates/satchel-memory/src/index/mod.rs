//! [`RecallIndex`]: what recall ranks, held in memory and kept in step
//! with the store by revision: every live memory's terms (BM25, in
//! `terms`) and embedding (cosine, in `vectors`), with what filters look
//! at.
//!
//! A search scans every row that passes the filter, so a filter never
//! costs results. Rows are addressed by slot; an update or deletion
//! retires the old slot (an update appends a new one) and the index is
//! compacted once a quarter of its slots are retired.

mod mean;
mod terms;
mod vectors;

use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;

use satchel_store::{MemoryFilter, MemoryIndexRow, MemoryLayer, Timestamp};

use crate::text;
use mean::Means;
pub use terms::Bm25;
use terms::Terms;
use vectors::Vectors;

/// One row recall may return, with both its scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The memory's `seq`.
    pub seq: i64,
    /// Its date (for the recency factor).
    pub created_at: Timestamp,
    /// Its certainty (for the certainty factor).
    pub certainty: f32,
    /// Its BM25 for the query (0 when no query term occurs in it).
    pub bm25: f32,
    /// Its cosine with the query, when both have an embedding.
    pub cosine: Option<f32>,
}

/// One query's BM25 over the whole index (from [`RecallIndex::keyword_scores`]),
/// computed while the query is being embedded.
#[derive(Debug, Default)]
pub struct KeywordScores {
    /// By slot.
    scores: Vec<f32>,
    /// The best that pass the filter, best first.
    best: Vec<(f32, usize)>,
}

/// How [`RecallIndex::candidates`] searches by vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemanticSearch {
    /// Rows to take by cosine.
    pub limit: usize,
    /// Candidate rows above which the search is two-stage.
    pub exact_scan_limit: usize,
    /// Share of the namespace's mean taken off before the cosines handed
    /// on, 0 to 1.
    pub centring: f32,
}

/// The filter in the index's own terms.
struct Compiled {
    namespace: u32,
    layers: u8,
    category: Option<u32>,
    since: i64,
    until: i64,
    live_at: i64,
    include_archived: bool,
    session: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Meta {
    seq: i64,
    alive: bool,
    namespace: u32,
    layer: u8,
    category: u32,
    session: u32,
    created_at: i64,
    expires_at: i64,
    archived: bool,
    certainty: f32,
}

/// Strings (namespaces, categories, sessions) as small integers.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn intern(&mut self, text: &str) -> u32 {
        let next = u32::try_from(self.ids.len()).unwrap_or(u32::MAX - 1);
        *self.ids.entry(text.to_owned()).or_insert(next)
    }

    fn get(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }
}

/// No category or session.
const NONE: u32 = u32::MAX;

/// Retired slots tolerated before compaction, at least.
const COMPACT_AFTER: usize = 1024;

/// The in-memory recall index.
#[derive(Debug, Default)]
pub struct RecallIndex {
    rev: i64,
    meta: Vec<Meta>,
    slot_of: HashMap<i64, usize>,
    retired: usize,
    with_vector: usize,
    namespaces: Interner,
    categories: Interner,
    sessions: Interner,
    terms: Terms,
    vectors: Vectors,
    means: Means,
}

fn layer_bit(layer: MemoryLayer) -> u8 {
    match layer {
        MemoryLayer::Long => 1,
        MemoryLayer::Mid => 2,
        MemoryLayer::Short => 4,
        MemoryLayer::Session => 8,
    }
}

/// A score and a slot, ordered worst first (for a heap of the best).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scored(f32, usize);

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Scored) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    /// Higher score is "less", so the heap's top is the worst kept.
    fn cmp(&self, other: &Scored) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

/// Rows whose terms `apply` cuts at a time.
const APPLY_BLOCK: usize = 16_384;

/// Rows per thread below which `terms_of` stays on one thread: loading a
/// large store is mostly cutting and stemming words.
const TERM_ROWS_PER_THREAD: usize = 4096;

/// Each row's terms, in order; on every core for many rows.
fn terms_of(rows: &[MemoryIndexRow]) -> Vec<Vec<String>> {
    on_every_core(rows.len(), TERM_ROWS_PER_THREAD, |range| {
        rows[range]
            .iter()
            .map(|row| text::terms(&row.content))
            .collect()
    })
}

/// `work` over `0..len`, cut into one range per core (each at least
/// `min_per_thread` long, so small jobs stay on this thread), the results
/// concatenated in order. A panic in any range is raised here.
fn on_every_core<T: Send>(
    len: usize,
    min_per_thread: usize,
    work: impl Fn(Range<usize>) -> Vec<T> + Sync,
) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(len.div_ceil(min_per_thread.max(1)))
        .max(1);
    if threads == 1 {
        return work(0..len);
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..len)
            .step_by(chunk)
            .map(|start| {
                let work = &work;
                scope.spawn(move || work(start..len.min(start + chunk)))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| match handle.join() {
                Ok(found) => found,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// The `k` best scores seen, kept in a bounded heap.
struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(4096) + 1),
        }
    }

    fn push(&mut self, score: f32, slot: usize) {
        if self.heap.len() < self.k {
            self.heap.push(Scored(score, slot));
        } else if let Some(worst) = self.heap.peek()
            && score > worst.0
        {
            self.heap.pop();
            self.heap.push(Scored(score, slot));
        }
    }

    /// Best first.
    fn into_sorted(self) -> Vec<(f32, usize)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Scored(score, slot)| (score, slot))
            .collect()
    }
}

impl RecallIndex {
    /// An empty index.
    pub fn new() -> RecallIndex {
        RecallIndex::default()
    }

    /// The store revision the index reflects.
    pub fn revision(&self) -> i64 {
        self.rev
    }

    /// Live rows.
    pub fn len(&self) -> usize {
        self.meta.len() - self.retired
    }

    /// True when no row is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live rows with an embedding.
    pub fn with_vectors(&self) -> usize {
        self.with_vector
    }

    /// Distinct terms indexed (removed rows' terms included until the
    /// next compaction).
    pub fn vocabulary(&self) -> usize {
        self.terms.vocabulary()
    }

    /// Width of the vectors; 0 until the first one arrives.
    pub fn dim(&self) -> usize {
        self.vectors.dim()
    }

    /// Applies changes read from the store, bringing the index to `rev`.
    pub fn apply(&mut self, rev: i64, upserts: Vec<MemoryIndexRow>, deleted: &[i64]) {
        for seq in deleted {
            self.retire(*seq);
        }
        // In blocks, so the cut terms of a whole store are never all held.
        let mut rows = upserts.into_iter();
        loop {
            let block: Vec<MemoryIndexRow> = rows.by_ref().take(APPLY_BLOCK).collect();
            if block.is_empty() {
                break;
            }
            let terms = terms_of(&block);
            for (row, terms) in block.into_iter().zip(terms) {
                self.insert(row, &terms);
            }
        }
        self.rev = self.rev.max(rev);
        if self.retired >= COMPACT_AFTER && self.retired * 4 >= self.meta.len() {
            self.compact();
        }
    }

    fn retire(&mut self, seq: i64) {
        let Some(slot) = self.slot_of.remove(&seq) else {
            return;
        };
        let meta = &mut self.meta[slot];
        meta.alive = false;
        self.retired += 1;
        self.terms.remove(slot);
        if self.vectors.has(slot) {
            self.with_vector -= 1;
            self.means
                .remove(self.meta[slot].namespace, self.vectors.values(slot));
        }
    }

    /// Adds a row, or replaces the row with its `seq`.
    pub fn upsert(&mut self, row: MemoryIndexRow) {
        let terms = text::terms(&row.content);
        self.insert(row, &terms);
    }

    /// `upsert`, with the row's terms already cut.
    fn insert(&mut self, row: MemoryIndexRow, terms: &[String]) {
        self.retire(row.seq);
        if self.meta.len() >= terms::MAX_SLOTS {
            self.compact();
        }
        let slot = self.meta.len();
        self.meta.push(Meta {
            seq: row.seq,
            alive: true,
            namespace: self.namespaces.intern(&row.namespace),
            layer: layer_bit(row.layer),
            category: row
                .category
                .as_deref()
                .map_or(NONE, |c| self.categories.intern(&c.to_lowercase())),
            session: row
                .session_id
                .as_deref()
                .map_or(NONE, |s| self.sessions.intern(s)),
            created_at: row.created_at.as_millis(),
            expires_at: row.expires_at.map_or(i64::MAX, Timestamp::as_millis),
            archived: row.archived,
            certainty: row.certainty,
        });
        self.slot_of.insert(row.seq, slot);
        self.terms.push(terms);
        let embedding = row.embedding.as_deref();
        if self.vectors.push(embedding) {
            self.with_vector += 1;
            self.means
                .add(self.meta[slot].namespace, self.vectors.values(slot));
        } else if let Some(vector) = embedding.filter(|v| !v.is_empty()) {
            tracing::warn!(
                seq = row.seq,
                found = vector.len(),
                expected = self.vectors.dim(),
                "a memory's embedding has another width (another model?); it is left out of semantic recall"
            );
        }
    }

    /// Drops retired slots, renumbering the rest in order.
    fn compact(&mut self) {
        let mut remap = Vec::with_capacity(self.meta.len());
        let mut next = 0u32;
        for meta in &self.meta {
            if meta.alive {
                remap.push(Some(next));
                next += 1;
            } else {
                remap.push(None);
            }
        }
        self.meta.retain(|meta| meta.alive);
        self.slot_of = self
            .meta
            .iter()
            .enumerate()
            .map(|(slot, meta)| (meta.seq, slot))
            .collect();
        self.terms.compact(&remap, self.meta.len());
        self.vectors.compact(&remap);
        self.retired = 0;
    }

    fn compile(&self, filter: &MemoryFilter) -> Option<Compiled> {
        let namespace = self.namespaces.get(&filter.namespace)?;
        let category = match &filter.category {
            Some(category) => Some(self.categories.get(&category.to_lowercase())?),
            None => None,
        };
        // A session the index has never seen matches no row.
        let session = filter
            .session_id
            .as_ref()
            .map(|session| self.sessions.get(session).unwrap_or(NONE - 1));
        Some(Compiled {
            namespace,
            layers: if filter.layers.is_empty() {
                0xff
            } else {
                filter.layers.iter().fold(0, |m, l| m | layer_bit(*l))
            },
            category,
            since: filter.since.map_or(i64::MIN, Timestamp::as_millis),
            until: filter.until.map_or(i64::MAX, Timestamp::as_millis),
            live_at: filter.live_at.map_or(i64::MIN, Timestamp::as_millis),
            include_archived: filter.include_archived,
            session,
        })
    }

    fn passes(meta: &Meta, filter: &Compiled) -> bool {
        meta.alive
            && meta.namespace == filter.namespace
            && meta.layer & filter.layers != 0
            && filter.category.is_none_or(|c| c == meta.category)
            && meta.created_at >= filter.since
            && meta.created_at < filter.until
            && meta.expires_at > filter.live_at
            && (filter.include_archived || !meta.archived)
            && (meta.layer != layer_bit(MemoryLayer::Session)
                || filter.session.is_none_or(|s| s == meta.session))
    }

    /// The `limit` rows most similar to `query` (a unit vector) that pass
    /// `filter`, best first, as `(seq, cosine)`. Above `exact_scan_limit`
    /// rows with vectors the scan is two-stage (see `vectors`).
    pub fn search_vectors(
        &self,
        query: &[f32],
        filter: &MemoryFilter,
        limit: usize,
        exact_scan_limit: usize,
    ) -> Vec<(i64, f32)> {
        let Some(compiled) = self.compile(filter) else {
            return Vec::new();
        };
        let keep = |slot: usize| Self::passes(&self.meta[slot], &compiled);
        self.vectors
            .search(query, keep, limit, self.with_vector, exact_scan_limit)
            .into_iter()
            .map(|(score, slot)| (self.meta[slot].seq, score))
            .collect()
    }

    /// The `limit` rows that rank best for the words of `query` by BM25
    /// and pass `filter`, best first, as `(seq, score)`; see
    /// [`text::query_terms`] for which words count.
    pub fn search_keywords(
        &self,
        query: &str,
        filter: &MemoryFilter,
        limit: usize,
        bm25: Bm25,
    ) -> Vec<(i64, f32)> {
        self.keyword_scores(query, filter, limit, bm25)
            .best
            .into_iter()
            .map(|(score, slot)| (self.meta[slot].seq, score))
            .collect()
    }

    /// BM25 of every row for `query`, and the best `limit` that pass
    /// `filter`; pass it to [`RecallIndex::candidates`] on the same,
    /// unchanged index.
    pub fn keyword_scores(
        &self,
        query: &str,
        filter: &MemoryFilter,
        limit: usize,
        bm25: Bm25,
    ) -> KeywordScores {
        let Some(compiled) = self.compile(filter) else {
            return KeywordScores::default();
        };
        let keep = |slot: usize| Self::passes(&self.meta[slot], &compiled);
        let (scores, best) = self
            .terms
            .search(&text::query_terms(query), keep, limit, bm25);
        KeywordScores { scores, best }
    }

    /// What hybrid recall fuses: the best `search.limit` rows by BM25
    /// (from `keywords`) and the best by cosine with `vector`, each with
    /// both scores, so a row found by one ranking is still scored by the
    /// other. The vector search ranks by plain cosine; the cosines handed
    /// on are measured from the namespace's mean (see `mean`) when
    /// `search.centring` asks for it and the namespace has enough rows.
    pub fn candidates(
        &self,
        keywords: &KeywordScores,
        vector: Option<&[f32]>,
        filter: &MemoryFilter,
        search: SemanticSearch,
    ) -> Vec<Candidate> {
        let SemanticSearch {
            limit,
            exact_scan_limit,
            centring,
        } = search;
        let Some(compiled) = self.compile(filter) else {
            return Vec::new();
        };
        let mut slots: Vec<usize> = keywords.best.iter().map(|(_, slot)| *slot).collect();
        let mut cosines = vec![None; slots.len()];
        if let Some(vector) = vector {
            let keep = |slot: usize| Self::passes(&self.meta[slot], &compiled);
            let found =
                self.vectors
                    .search(vector, keep, limit, self.with_vector, exact_scan_limit);
            for (_, slot) in found {
                if !slots.contains(&slot) {
                    slots.push(slot);
                }
            }
            // Every candidate scored the same way, whichever ranking found it.
            cosines = match self.means.mean(compiled.namespace, centring) {
                Some(mean) => self.vectors.centred_cosines(vector, &mean, &slots),
                None => self.vectors.cosines(vector, &slots),
            };
        }
        // Scores from another state of the index would be misread.
        let fresh = keywords.scores.len() == self.meta.len();
        slots
            .into_iter()
            .zip(cosines)
            .filter(|(slot, _)| *slot < self.meta.len() && self.meta[*slot].alive)
            .map(|(slot, cosine)| Candidate {
                seq: self.meta[slot].seq,
                created_at: Timestamp::from_millis(self.meta[slot].created_at),
                certainty: self.meta[slot].certainty,
                bm25: if fresh { keywords.scores[slot] } else { 0.0 },
                cosine,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        values.iter().map(|v| v / norm).collect()
    }

    fn row(seq: i64, layer: MemoryLayer, content: &str, vector: &[f32]) -> MemoryIndexRow {
        MemoryIndexRow {
            seq,
            namespace: "n".into(),
            layer,
            content: content.into(),
            category: Some("Fact".into()),
            certainty: 1.0,
            session_id: None,
            created_at: Timestamp::from_millis(seq * 1000),
            expires_at: None,
            archived: false,
            embedding: Some(unit(vector)),
        }
    }

    fn filter() -> MemoryFilter {
        MemoryFilter {
            namespace: "n".into(),
            ..MemoryFilter::default()
        }
    }

    fn seqs(found: &[(i64, f32)]) -> Vec<i64> {
        found.iter().map(|f| f.0).collect()
    }

    #[test]
    fn candidates_carry_cosines_from_the_namespace_mean_once_it_has_enough_rows() {
        // Every row points mostly along a shared axis (the third); what
        // tells them apart is a small remainder.
        let near = |seq: i64, x: f32, y: f32| row(seq, MemoryLayer::Long, "filler", &[x, y, 1.0]);
        let mut index = RecallIndex::new();
        let mut rows = vec![near(1, 0.3, 0.0), near(2, 0.0, 0.3)];
        rows.extend((3..=mean::MIN_ROWS as i64 + 1).map(|seq| {
            // The rest spread evenly around the axis, so the mean stays on it.
            let angle = seq as f32;
            near(seq, 0.3 * angle.cos(), 0.3 * angle.sin())
        }));
        let query = unit(&[0.3, 0.0, 1.0]);
        let cosines = |index: &RecallIndex, centring: f32| -> HashMap<i64, f32> {
            let search = SemanticSearch {
                limit: 1000,
                exact_scan_limit: usize::MAX,
                centring,
            };
            let keywords = index.keyword_scores("nothing", &filter(), 2, Bm25::default());
            index
                .candidates(&keywords, Some(&query), &filter(), search)
                .into_iter()
                .map(|c| (c.seq, c.cosine.unwrap()))
                .collect()
        };

        index.apply(2, rows[..2].to_vec(), &[]);
        let few = cosines(&index, 1.0);
        assert!(
            few[&2] > 0.9,
            "too few rows for a mean: plain cosine {few:?}"
        );

        index.apply(3, rows[2..].to_vec(), &[]);
        let plain = cosines(&index, 0.0);
        assert!(plain[&1] > 0.99 && plain[&2] > 0.9, "{plain:?}");
        let centred = cosines(&index, 1.0);
        assert!(centred[&1] > 0.95, "{centred:?}");
        assert!(
            centred[&2].abs() < 0.1,
            "the unrelated row drops: {centred:?}"
        );

        // Removing the rows around the axis leaves too few for a mean again.
        let gone: Vec<i64> = (3..=mean::MIN_ROWS as i64 + 1).collect();
        index.apply(4, Vec::new(), &gone);
        assert!(cosines(&index, 1.0)[&2] > 0.9);
    }

    #[test]
    fn finds_the_nearest_and_filters_while_scanning() {
        let mut index = RecallIndex::new();
        index.apply(
            3,
            vec![
                row(1, MemoryLayer::Long, "a", &[1.0, 0.0, 0.0]),
                row(2, MemoryLayer::Mid, "b", &[0.9, 0.1, 0.0]),
                row(3, MemoryLayer::Long, "c", &[0.0, 1.0, 0.0]),
            ],
            &[],
        );
        let query = unit(&[1.0, 0.05, 0.0]);
        let found = index.search_vectors(&query, &filter(), 2, 1000);
        assert_eq!(seqs(&found), [1, 2]);
        assert!((found[0].1 - 0.9988).abs() < 0.01, "{found:?}");
        // Only long memories: the filter still yields `limit` results.
        let long = MemoryFilter {
            layers: vec![MemoryLayer::Long],
            ..filter()
        };
        assert_eq!(seqs(&index.search_vectors(&query, &long, 2, 1000)), [1, 3]);
        let category = MemoryFilter {
            category: Some("FACT".into()),
            ..filter()
        };
        assert_eq!(index.search_vectors(&query, &category, 5, 1000).len(), 3);
        let other = MemoryFilter {
            category: Some("goal".into()),
            ..filter()
        };
        assert!(index.search_vectors(&query, &other, 5, 1000).is_empty());
        let time = MemoryFilter {
            since: Some(Timestamp::from_millis(2000)),
            ..filter()
        };
        assert_eq!(index.search_vectors(&query, &time, 5, 1000)[0].0, 2);
    }

    #[test]
    fn keywords_rank_by_bm25_with_stems_and_filters() {
        let mut index = RecallIndex::new();
        index.apply(
            4,
            vec![
                row(
                    1,
                    MemoryLayer::Long,
                    "Caroline went hiking in the mountains",
                    &[1.0],
                ),
                row(
                    2,
                    MemoryLayer::Long,
                    "Melanie paints; she painted a sunset",
                    &[1.0],
                ),
                row(
                    3,
                    MemoryLayer::Mid,
                    "Caroline hikes every weekend, hiking is her thing",
                    &[1.0],
                ),
                row(4, MemoryLayer::Long, "the weather was nice", &[1.0]),
            ],
            &[],
        );
        // "hikes" and "hiking" share a stem; the row saying it twice ranks first.
        let found =
            index.search_keywords("Where does Caroline hike?", &filter(), 10, Bm25::default());
        assert_eq!(seqs(&found), [3, 1]);
        assert!(found[0].1 > found[1].1);
        assert_eq!(
            seqs(&index.search_keywords("painting", &filter(), 10, Bm25::default())),
            [2]
        );
        let long = MemoryFilter {
            layers: vec![MemoryLayer::Long],
            ..filter()
        };
        assert_eq!(
            seqs(&index.search_keywords("hiking", &long, 10, Bm25::default())),
            [1]
        );
        // Only stopwords: they are what is left to rank by.
        assert_eq!(
            seqs(&index.search_keywords("was the", &filter(), 10, Bm25::default())),
            [4, 1]
        );
        assert!(
            index
                .search_keywords("?!", &filter(), 10, Bm25::default())
                .is_empty()
        );
    }

    #[test]
    fn deletions_updates_and_compaction_keep_both_halves_consistent() {
        let mut index = RecallIndex::new();
        let rows: Vec<_> = (1..=3000)
            .map(|i| {
                let content = format!("memory number{i} about topic{}", i % 7);
                row(
                    i,
                    MemoryLayer::Long,
                    &content,
                    &[i as f32, 1.0, (i % 7) as f32],
                )
            })
            .collect();
        index.apply(1, rows, &[]);
        let mut updated = row(50, MemoryLayer::Long, "replaced words", &[0.0, 0.0, 1.0]);
        updated.created_at = Timestamp::from_millis(1);
        let deleted: Vec<i64> = (100..1200).collect();
        index.apply(2, vec![updated], &deleted);
        assert_eq!(index.len(), 1900);
        assert_eq!(index.with_vectors(), 1900);
        assert_eq!(index.revision(), 2);
        // 1,101 retired of 3,001 slots: compacted.
        assert_eq!(index.meta.len(), 1900);
        let found = index.search_vectors(&unit(&[0.0, 0.0, 1.0]), &filter(), 1, 1000);
        assert_eq!(found[0].0, 50);
        assert_eq!(
            seqs(&index.search_keywords("replaced", &filter(), 5, Bm25::default())),
            [50]
        );
        assert!(
            index
                .search_keywords("number50", &filter(), 5, Bm25::default())
                .is_empty()
        );
        assert_eq!(
            seqs(&index.search_keywords("number2000", &filter(), 5, Bm25::default())),
            [2000]
        );
        for gone in [100, 555, 1199] {
            let content = format!("number{gone}");
            assert!(
                index
                    .search_keywords(&content, &filter(), 5, Bm25::default())
                    .is_empty()
            );
            let exact = unit(&[gone as f32, 1.0, (gone % 7) as f32]);
            assert!(
                index
                    .search_vectors(&exact, &filter(), 3000, usize::MAX)
                    .iter()
                    .all(|(seq, _)| *seq != gone)
            );
        }
    }

    #[test]
    fn rows_without_embeddings_are_found_by_keywords_only() {
        let mut index = RecallIndex::new();
        let mut bare = row(1, MemoryLayer::Long, "no vector here", &[1.0, 0.0]);
        bare.embedding = None;
        index.apply(
            2,
            vec![bare, row(2, MemoryLayer::Long, "vector here", &[1.0, 0.0])],
            &[],
        );
        assert_eq!((index.len(), index.with_vectors()), (2, 1));
        assert_eq!(
            seqs(&index.search_keywords("vector", &filter(), 5, Bm25::default())).len(),
            2
        );
        assert_eq!(
            seqs(&index.search_vectors(&unit(&[1.0, 0.0]), &filter(), 5, 100)),
            [2]
        );
    }
}
