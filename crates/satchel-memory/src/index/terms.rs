//! The keyword half of the recall index: an inverted index of stemmed
//! words, ranked by BM25 with SQLite FTS5's formula ([`Bm25`] holds its
//! two parameters).
//!
//! A query is scored term by term into one accumulator per row, so its
//! cost is the length of its terms' posting lists and nothing else: no
//! row lookups, no per-row reads of document lengths. That is what FTS5's
//! `bm25()` does per match, and why it measured 136 ms at 100,000 memories
//! and 3.5 s at 1,000,000 on this machine's benchmark.
//!
//! Rows are addressed by slot; a removed slot stays in its posting lists
//! until the index is compacted, and a search skips it, in the document
//! frequencies too (counted over the live postings while any are removed).

use std::collections::HashMap;

/// BM25's two parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25 {
    /// Term-frequency saturation: how soon repeating a word stops adding.
    pub k1: f32,
    /// Length normalisation: 0 ignores length, 1 divides by it fully.
    pub b: f32,
}

impl Default for Bm25 {
    /// Anserini's defaults for short passages: memories are a sentence or
    /// two, where lengths vary less than in documents (see the
    /// "memory recall" section of the README for the measurements).
    fn default() -> Bm25 {
        Bm25 { k1: 0.9, b: 0.4 }
    }
}
/// Bits of a posting that hold the term frequency (capped at 63).
const TF_BITS: u32 = 6;
const TF_MAX: u32 = (1 << TF_BITS) - 1;
/// Slots a posting can address: 2^26, about 67 million rows.
pub(super) const MAX_SLOTS: usize = 1 << (32 - TF_BITS);

/// Postings and document lengths.
#[derive(Debug, Default)]
pub(super) struct Terms {
    ids: HashMap<Box<str>, u32>,
    /// By term id: `slot << TF_BITS | tf`, in slot order.
    postings: Vec<Vec<u32>>,
    /// By slot: how many terms the row has (0 once removed).
    lengths: Vec<u32>,
    total_length: u64,
    live: usize,
}

impl Terms {
    /// Indexes the next slot (which must be `len()`) with its terms.
    pub(super) fn push(&mut self, terms: &[String]) {
        let slot = u32::try_from(self.lengths.len()).unwrap_or(u32::MAX);
        let mut counts: HashMap<&str, u32> = HashMap::with_capacity(terms.len());
        for term in terms {
            *counts.entry(term.as_str()).or_default() += 1;
        }
        for (term, count) in counts {
            let id = match self.ids.get(term) {
                Some(id) => *id,
                None => {
                    let id = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
                    self.ids.insert(term.into(), id);
                    self.postings.push(Vec::new());
                    id
                }
            };
            self.postings[id as usize].push(slot << TF_BITS | count.min(TF_MAX));
        }
        let length = u32::try_from(terms.len()).unwrap_or(u32::MAX);
        self.lengths.push(length);
        self.total_length += u64::from(length);
        self.live += 1;
    }

    /// Takes a slot out of the statistics; its postings stay until
    /// [`Terms::compact`].
    pub(super) fn remove(&mut self, slot: usize) {
        if let Some(length) = self.lengths.get_mut(slot) {
            self.total_length -= u64::from(*length);
            *length = 0;
            self.live = self.live.saturating_sub(1);
        }
    }

    /// Renumbers slots: `remap[old]` is the new slot, `None` for a removed
    /// one. Terms left with no posting are forgotten.
    pub(super) fn compact(&mut self, remap: &[Option<u32>], new_len: usize) {
        let mut lengths = vec![0; new_len];
        for (old, new) in remap.iter().enumerate() {
            if let Some(new) = new {
                lengths[*new as usize] = self.lengths[old];
            }
        }
        self.lengths = lengths;
        for list in &mut self.postings {
            list.retain_mut(|posting| match remap[(*posting >> TF_BITS) as usize] {
                Some(new) => {
                    *posting = new << TF_BITS | (*posting & TF_MAX);
                    true
                }
                None => false,
            });
            // Compaction keeps slot order, so lists stay sorted.
        }
        let mut ids: Vec<(Box<str>, u32)> = std::mem::take(&mut self.ids).into_iter().collect();
        ids.sort_by_key(|(_, id)| *id);
        let mut postings = Vec::with_capacity(ids.len());
        for (term, id) in ids {
            let list = std::mem::take(&mut self.postings[id as usize]);
            if !list.is_empty() {
                let new = u32::try_from(postings.len()).unwrap_or(u32::MAX);
                self.ids.insert(term, new);
                postings.push(list);
            }
        }
        self.postings = postings;
    }

    /// Distinct terms indexed.
    pub(super) fn vocabulary(&self) -> usize {
        self.ids.len()
    }

    /// Every slot's BM25 for `query` (0 where no term occurs), and the
    /// best `limit` slots among those `keep` accepts, best first, as
    /// `(score, slot)`.
    pub(super) fn search(
        &self,
        query: &[String],
        keep: impl Fn(usize) -> bool,
        limit: usize,
        bm25: Bm25,
    ) -> (Vec<f32>, Vec<(f32, usize)>) {
        if self.live == 0 || limit == 0 {
            return (Vec::new(), Vec::new());
        }
        let Bm25 { k1, b } = bm25;
        let n = self.live as f32;
        let average = (self.total_length as f32 / n).max(1.0);
        let mut seen: Vec<u32> = Vec::new();
        let mut scores = vec![0.0f32; self.lengths.len()];
        let mut touched: Vec<u32> = Vec::new();
        let retired = self.live < self.lengths.len();
        for term in query {
            let Some(&id) = self.ids.get(term.as_str()) else {
                continue;
            };
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let list = &self.postings[id as usize];
            // A removed row's postings stay until compaction; while there
            // are any, count the live ones, so they weigh as if gone.
            let df = if retired {
                list.iter()
                    .filter(|posting| self.lengths[(**posting >> TF_BITS) as usize] != 0)
                    .count()
            } else {
                list.len()
            } as f32;
            // FTS5's idf, floored like its: a word in half the memories or
            // more (a speaker's name, say) barely counts. Lucene's
            // never-negative idf measured worse on LoCoMo (R@10 0.692 vs 0.699).
            let idf = ((n - df + 0.5) / (df + 0.5)).ln().max(1e-6);
            for posting in list {
                let slot = (*posting >> TF_BITS) as usize;
                let length = self.lengths[slot];
                if length == 0 {
                    continue;
                }
                let tf = (*posting & TF_MAX) as f32;
                let norm = k1 * (1.0 - b + b * length as f32 / average);
                let score = &mut scores[slot];
                if *score == 0.0 {
                    touched.push(slot as u32);
                }
                *score += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        let mut best = super::TopK::new(limit);
        for slot in touched {
            let slot = slot as usize;
            if keep(slot) {
                best.push(scores[slot], slot);
            }
        }
        (scores, best.into_sorted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn score(terms: &Terms, query: &str, slot: usize) -> f32 {
        terms.search(&words(query), |_| true, 10, Bm25::default()).0[slot]
    }

    #[test]
    fn removed_rows_leave_the_scores_as_if_never_indexed() {
        let rows = ["apple pie", "apple tart crumble", "pear tart", "plum"];
        let mut churned = Terms::default();
        for row in rows {
            churned.push(&words(row));
        }
        churned.remove(1);
        let mut fresh = Terms::default();
        for row in [rows[0], rows[2], rows[3]] {
            fresh.push(&words(row));
        }
        // Slots 0, 2, 3 of the churned index are slots 0, 1, 2 of the fresh one.
        for query in ["apple", "tart", "apple tart"] {
            for (churned_slot, fresh_slot) in [(0, 0), (2, 1), (3, 2)] {
                let (a, b) = (
                    score(&churned, query, churned_slot),
                    score(&fresh, query, fresh_slot),
                );
                assert!((a - b).abs() < 1e-6, "{query:?}: {a} vs {b}");
            }
            assert_eq!(score(&churned, query, 1), 0.0);
        }
        // "apple" is now in one live row of three: a real idf, not the
        // floor that two of four would give.
        assert!(score(&churned, "apple", 0) > 0.1);
    }
}
