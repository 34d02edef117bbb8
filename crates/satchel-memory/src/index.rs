//! [`VectorIndex`]: every memory's embedding held in memory for semantic
//! search, with what filters look at, loaded from the store and kept in
//! step with it by revision.
//!
//! Vectors are kept quantised: 8-bit codes with one scale per vector
//! (cosine error about 1e-3) and, for large collections, sign bits. A
//! search scans every row that passes the filter, so a filter never costs
//! results: with at most `exact_scan_limit` rows it scores all of them by
//! their 8-bit codes (exact up to quantisation); above that it ranks by
//! Hamming distance of the sign bits first and re-scores the best
//! `max(50 × limit, 2000)` by their codes. Scans over many rows are split
//! over threads.

use std::collections::{BinaryHeap, HashMap};

use satchel_store::{MemoryLayer, MemoryVectorRow, Timestamp};

/// Rows per thread below which a scan stays on one thread.
const ROWS_PER_THREAD: usize = 32_768;

/// What a search may return: the same conditions as the store's filter.
#[derive(Debug, Clone, Default)]
pub struct VectorFilter {
    /// Only this namespace.
    pub namespace: String,
    /// Only these layers; empty means all.
    pub layers: Vec<MemoryLayer>,
    /// Only this category (case-insensitive).
    pub category: Option<String>,
    /// Only memories dated at or after this time.
    pub since: Option<Timestamp>,
    /// Only memories dated before this time.
    pub until: Option<Timestamp>,
    /// Leave out memories expired at this time.
    pub live_at: Option<Timestamp>,
    /// Include archived memories.
    pub include_archived: bool,
    /// Session-layer memories only from this session.
    pub session_id: Option<String>,
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
    namespace: u32,
    layer: u8,
    category: u32,
    session: u32,
    created_at: i64,
    expires_at: i64,
    archived: bool,
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

/// The in-memory vector index.
#[derive(Debug, Default)]
pub struct VectorIndex {
    dim: usize,
    words: usize,
    rev: i64,
    meta: Vec<Meta>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    signs: Vec<u64>,
    slot_of: HashMap<i64, usize>,
    namespaces: Interner,
    categories: Interner,
    sessions: Interner,
}

fn layer_bit(layer: MemoryLayer) -> u8 {
    match layer {
        MemoryLayer::Long => 1,
        MemoryLayer::Mid => 2,
        MemoryLayer::Short => 4,
        MemoryLayer::Session => 8,
    }
}

/// 8-bit codes and the scale that maps them back.
fn quantise(vector: &[f32], codes: &mut [i8]) -> f32 {
    let max = vector.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if max == 0.0 {
        codes.iter_mut().for_each(|c| *c = 0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (code, value) in codes.iter_mut().zip(vector) {
        *code = (value / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

fn sign_bits(vector: &[f32], bits: &mut [u64]) {
    bits.iter_mut().for_each(|b| *b = 0);
    for (i, value) in vector.iter().enumerate() {
        if *value > 0.0 {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Blocks of 32 let the compiler vectorise with 16-bit products.
    let mut total = 0i32;
    let mut chunks_a = a.chunks_exact(32);
    let mut chunks_b = b.chunks_exact(32);
    for (x, y) in chunks_a.by_ref().zip(chunks_b.by_ref()) {
        let mut acc = 0i32;
        for i in 0..32 {
            acc += i32::from(x[i]) * i32::from(y[i]);
        }
        total += acc;
    }
    for (x, y) in chunks_a.remainder().iter().zip(chunks_b.remainder()) {
        total += i32::from(*x) * i32::from(*y);
    }
    total
}

fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
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

/// The `k` best scores seen, kept in a bounded heap.
struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
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

/// The `k` best of `scored`, best first.
fn top_k(scored: Vec<(f32, usize)>, k: usize) -> Vec<(f32, usize)> {
    let mut top = TopK::new(k);
    for (score, slot) in scored {
        top.push(score, slot);
    }
    top.into_sorted()
}

impl VectorIndex {
    /// An empty index.
    pub fn new() -> VectorIndex {
        VectorIndex::default()
    }

    /// The store revision the index reflects.
    pub fn revision(&self) -> i64 {
        self.rev
    }

    /// Rows with an embedding.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// True when no row has an embedding.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Width of the vectors; 0 until the first one arrives.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Applies changes read from the store, bringing the index to `rev`.
    pub fn apply(&mut self, rev: i64, upserts: Vec<MemoryVectorRow>, deleted: &[i64]) {
        for seq in deleted {
            self.remove(*seq);
        }
        for row in upserts {
            self.upsert(row);
        }
        self.rev = self.rev.max(rev);
    }

    fn remove(&mut self, seq: i64) {
        let Some(slot) = self.slot_of.remove(&seq) else {
            return;
        };
        let last = self.meta.len() - 1;
        if slot != last {
            let moved = self.meta[last].seq;
            self.meta.swap(slot, last);
            self.scales.swap(slot, last);
            let (dim, words) = (self.dim, self.words);
            for i in 0..dim {
                self.codes.swap(slot * dim + i, last * dim + i);
            }
            for i in 0..words {
                self.signs.swap(slot * words + i, last * words + i);
            }
            self.slot_of.insert(moved, slot);
        }
        self.meta.pop();
        self.scales.pop();
        self.codes.truncate(last * self.dim);
        self.signs.truncate(last * self.words);
    }

    /// Adds or replaces one row; a row without an embedding is removed.
    pub fn upsert(&mut self, row: MemoryVectorRow) {
        let Some(vector) = row.embedding.as_deref().filter(|v| !v.is_empty()) else {
            self.remove(row.seq);
            return;
        };
        if self.dim == 0 {
            self.dim = vector.len();
            self.words = vector.len().div_ceil(64);
        }
        if vector.len() != self.dim {
            tracing::warn!(
                seq = row.seq,
                found = vector.len(),
                expected = self.dim,
                "a memory's embedding has another width (another model?); it is left out of semantic recall"
            );
            self.remove(row.seq);
            return;
        }
        let meta = Meta {
            seq: row.seq,
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
        };
        let slot = match self.slot_of.get(&row.seq) {
            Some(slot) => *slot,
            None => {
                let slot = self.meta.len();
                self.meta.push(meta);
                self.scales.push(0.0);
                self.codes.resize((slot + 1) * self.dim, 0);
                self.signs.resize((slot + 1) * self.words, 0);
                self.slot_of.insert(row.seq, slot);
                slot
            }
        };
        self.meta[slot] = meta;
        let (dim, words) = (self.dim, self.words);
        self.scales[slot] = quantise(vector, &mut self.codes[slot * dim..(slot + 1) * dim]);
        sign_bits(vector, &mut self.signs[slot * words..(slot + 1) * words]);
    }

    fn compile(&self, filter: &VectorFilter) -> Option<Compiled> {
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
        meta.namespace == filter.namespace
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
    /// `filter`, best first, as `(seq, cosine)`.
    pub fn search(
        &self,
        query: &[f32],
        filter: &VectorFilter,
        limit: usize,
        exact_scan_limit: usize,
    ) -> Vec<(i64, f32)> {
        if limit == 0 || self.meta.is_empty() || query.len() != self.dim {
            return Vec::new();
        }
        let Some(compiled) = self.compile(filter) else {
            return Vec::new();
        };
        let dim = self.dim;
        let mut query_codes = vec![0i8; dim];
        let query_scale = quantise(query, &mut query_codes);
        let mut query_signs = vec![0u64; self.words];
        sign_bits(query, &mut query_signs);
        let two_stage = self.meta.len() > exact_scan_limit;
        let threads = std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
            .min(self.meta.len().div_ceil(ROWS_PER_THREAD))
            .max(1);
        let chunk = self.meta.len().div_ceil(threads);
        let first_stage = if two_stage {
            limit.saturating_mul(50).max(2000)
        } else {
            limit
        };

        // Each thread scans a range of slots and keeps its best.
        let scan = |start: usize, end: usize| -> Vec<(f32, usize)> {
            if two_stage {
                let mut best = TopK::new(first_stage);
                for slot in start..end {
                    if !Self::passes(&self.meta[slot], &compiled) {
                        continue;
                    }
                    let bits = &self.signs[slot * self.words..(slot + 1) * self.words];
                    best.push(-(hamming(&query_signs, bits) as f32), slot);
                }
                let rescored = best
                    .into_sorted()
                    .into_iter()
                    .map(|(_, slot)| (self.score(&query_codes, query_scale, slot), slot))
                    .collect();
                top_k(rescored, limit)
            } else {
                let mut best = TopK::new(limit);
                for slot in start..end {
                    if Self::passes(&self.meta[slot], &compiled) {
                        best.push(self.score(&query_codes, query_scale, slot), slot);
                    }
                }
                best.into_sorted()
            }
        };
        let found: Vec<(f32, usize)> = if threads == 1 {
            scan(0, self.meta.len())
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let start = t * chunk;
                        let end = ((t + 1) * chunk).min(self.meta.len());
                        scope.spawn(move || scan(start, end))
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|handle| handle.join().unwrap_or_default())
                    .collect()
            })
        };
        top_k(found, limit)
            .into_iter()
            .map(|(score, slot)| (self.meta[slot].seq, score))
            .collect()
    }

    fn score(&self, query: &[i8], query_scale: f32, slot: usize) -> f32 {
        let codes = &self.codes[slot * self.dim..(slot + 1) * self.dim];
        dot_i8(query, codes) as f32 * query_scale * self.scales[slot]
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

    fn row(seq: i64, layer: MemoryLayer, vector: &[f32]) -> MemoryVectorRow {
        MemoryVectorRow {
            seq,
            namespace: "n".into(),
            layer,
            category: Some("Fact".into()),
            certainty: 1.0,
            session_id: None,
            created_at: Timestamp::from_millis(seq * 1000),
            expires_at: None,
            archived: false,
            embedding: Some(unit(vector)),
        }
    }

    fn filter() -> VectorFilter {
        VectorFilter {
            namespace: "n".into(),
            ..VectorFilter::default()
        }
    }

    #[test]
    fn finds_the_nearest_and_filters_while_scanning() {
        let mut index = VectorIndex::new();
        index.apply(
            3,
            vec![
                row(1, MemoryLayer::Long, &[1.0, 0.0, 0.0]),
                row(2, MemoryLayer::Mid, &[0.9, 0.1, 0.0]),
                row(3, MemoryLayer::Long, &[0.0, 1.0, 0.0]),
            ],
            &[],
        );
        let query = unit(&[1.0, 0.05, 0.0]);
        let found = index.search(&query, &filter(), 2, 1000);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 2]);
        assert!((found[0].1 - 0.9988).abs() < 0.01, "{found:?}");
        // Only long memories: the filter still yields `limit` results.
        let long = VectorFilter {
            layers: vec![MemoryLayer::Long],
            ..filter()
        };
        let found = index.search(&query, &long, 2, 1000);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 3]);
        let category = VectorFilter {
            category: Some("FACT".into()),
            ..filter()
        };
        assert_eq!(index.search(&query, &category, 5, 1000).len(), 3);
        let other = VectorFilter {
            category: Some("goal".into()),
            ..filter()
        };
        assert!(index.search(&query, &other, 5, 1000).is_empty());
        let time = VectorFilter {
            since: Some(Timestamp::from_millis(2000)),
            ..filter()
        };
        assert_eq!(index.search(&query, &time, 5, 1000)[0].0, 2);
    }

    #[test]
    fn deletions_and_updates_keep_slots_consistent() {
        let mut index = VectorIndex::new();
        let rows: Vec<_> = (1..=50)
            .map(|i| row(i, MemoryLayer::Long, &[i as f32, 1.0, (i % 7) as f32]))
            .collect();
        index.apply(1, rows, &[]);
        index.apply(
            2,
            vec![row(50, MemoryLayer::Long, &[0.0, 0.0, 1.0])],
            &[1, 2, 3, 25],
        );
        assert_eq!(index.len(), 46);
        assert_eq!(index.revision(), 2);
        let found = index.search(&unit(&[0.0, 0.0, 1.0]), &filter(), 1, 1000);
        assert_eq!(found[0].0, 50);
        for deleted in [1, 2, 3, 25] {
            let exact = unit(&[deleted as f32, 1.0, (deleted % 7) as f32]);
            assert!(
                index
                    .search(&exact, &filter(), 46, 1000)
                    .iter()
                    .all(|(seq, _)| *seq != deleted)
            );
        }
    }

    #[test]
    fn two_stage_search_agrees_with_exact_search() {
        // Pseudo-random 64-dimensional vectors from a fixed LCG.
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let rows: Vec<_> = (0..3000)
            .map(|i| {
                let v: Vec<f32> = (0..64).map(|_| next()).collect();
                row(i, MemoryLayer::Long, &v)
            })
            .collect();
        let mut index = VectorIndex::new();
        index.apply(1, rows, &[]);
        let query: Vec<f32> = unit(&(0..64).map(|_| next()).collect::<Vec<_>>());
        let exact = index.search(&query, &filter(), 10, usize::MAX);
        let approx = index.search(&query, &filter(), 10, 100);
        let overlap = exact
            .iter()
            .filter(|e| approx.iter().any(|a| a.0 == e.0))
            .count();
        assert!(overlap >= 8, "{overlap} of 10");
    }

    #[test]
    fn int8_dot_matches_float_dot() {
        let a = unit(
            &(0..384)
                .map(|i| ((i * 37 % 101) as f32) - 50.0)
                .collect::<Vec<_>>(),
        );
        let b = unit(
            &(0..384)
                .map(|i| ((i * 53 % 89) as f32) - 44.0)
                .collect::<Vec<_>>(),
        );
        let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let (mut ca, mut cb) = (vec![0i8; 384], vec![0i8; 384]);
        let (sa, sb) = (quantise(&a, &mut ca), quantise(&b, &mut cb));
        let approx = dot_i8(&ca, &cb) as f32 * sa * sb;
        assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
    }
}
