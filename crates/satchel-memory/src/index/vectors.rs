//! The semantic half of the recall index: every row's embedding, kept
//! quantised, and the scans that rank them.
//!
//! Vectors are 8-bit codes with one scale per vector (cosine error about
//! 1e-3) plus sign bits. With at most `exact_scan_limit` candidate rows a
//! search scores every one of them by its codes (exact up to
//! quantisation); above that it measures Hamming distance on the sign bits
//! first, keeps the closest `max(50 × limit, 2000)` per thread or more
//! (chosen by a histogram of distances, not a heap) and re-scores those by
//! their codes.
//! Scans over many rows are split over threads.

use super::{TopK, on_every_core};
use crate::simd::{dispatch, round_small};

/// Rows per thread below which a scan stays on one thread.
const ROWS_PER_THREAD: usize = 32_768;

/// Quantised vectors by slot; a slot without a vector has scale 0.
#[derive(Debug, Default)]
pub(super) struct Vectors {
    dim: usize,
    words: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
    signs: Vec<u64>,
}

/// A query in the index's terms.
struct Query {
    codes: Vec<i8>,
    scale: f32,
    signs: Vec<u64>,
}

dispatch! {
    /// 8-bit codes and the scale that maps them back.
    fn quantise(vector: &[f32], codes: &mut [i8]) -> f32 {
        let max = vector.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if max == 0.0 || !max.is_finite() {
            codes.iter_mut().for_each(|c| *c = 0);
            return 0.0;
        }
        let scale = max / 127.0;
        let inverse = 127.0 / max;
        for (code, value) in codes.iter_mut().zip(vector) {
            *code = round_small((value * inverse).clamp(-127.0, 127.0)) as i8;
        }
        scale
    }
}

dispatch! {
    /// One bit per value, set where it is positive.
    fn sign_bits(vector: &[f32], bits: &mut [u64]) {
        for (word, values) in bits.iter_mut().zip(vector.chunks(64)) {
            *word = values
                .iter()
                .enumerate()
                .fold(0u64, |word, (i, v)| word | (u64::from(*v > 0.0) << i));
        }
    }
}

/// The dot product of two code vectors.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { dot_i8_avx2(a, b) };
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

/// `dot_i8` sixteen codes at a time: widened to 16 bits, multiplied and
/// added in pairs by `vpmaddwd`, summed across lanes once at the end
/// (what the compiler made of the plain loop summed every 32 codes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_loadu_si128, _mm256_add_epi32, _mm256_cvtepi8_epi16,
        _mm256_madd_epi16, _mm256_setzero_si256, _mm256_storeu_si256,
    };
    let n = a.len().min(b.len());
    let mut acc = [_mm256_setzero_si256(); 2];
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n`, so sixteen codes lie within each slice.
        let (x, y) = unsafe {
            (
                _mm_loadu_si128(a.as_ptr().add(i).cast::<__m128i>()),
                _mm_loadu_si128(b.as_ptr().add(i).cast::<__m128i>()),
            )
        };
        let product = _mm256_madd_epi16(_mm256_cvtepi8_epi16(x), _mm256_cvtepi8_epi16(y));
        let lane = (i / 16) % 2;
        acc[lane] = _mm256_add_epi32(acc[lane], product);
        i += 16;
    }
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` holds eight `i32`s, one register.
    unsafe {
        _mm256_storeu_si256(
            lanes.as_mut_ptr().cast::<__m256i>(),
            _mm256_add_epi32(acc[0], acc[1]),
        );
    }
    let tail: i32 = a[i..n]
        .iter()
        .zip(&b[i..n])
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    lanes.iter().sum::<i32>() + tail
}

dispatch! {
    /// The sign-bit (Hamming) distance of `query` to each vector of slots
    /// `first..` in `signs` (`query.len()` words a slot) that has a vector
    /// (`scales[slot] != 0`): written to `distances` (one per slot, left
    /// alone for a slot without a vector) and counted in `histogram`.
    fn sign_distances(
        query: &[u64],
        signs: &[u64],
        scales: &[f32],
        first: usize,
        histogram: &mut [usize],
        distances: &mut [u16]
    ) {
        let words = query.len();
        for (offset, distance) in distances.iter_mut().enumerate() {
            let slot = first + offset;
            if scales[slot] == 0.0 {
                continue;
            }
            let bits = &signs[slot * words..(slot + 1) * words];
            let d: u32 = query.iter().zip(bits).map(|(x, y)| (x ^ y).count_ones()).sum();
            histogram[d as usize] += 1;
            *distance = d as u16;
        }
    }
}

impl Vectors {
    /// Width of the vectors; 0 until the first one arrives.
    pub(super) fn dim(&self) -> usize {
        self.dim
    }

    /// True when `slot` holds a vector.
    pub(super) fn has(&self, slot: usize) -> bool {
        self.scales.get(slot).is_some_and(|scale| *scale != 0.0)
    }

    /// Adds the next slot. Returns false (and stores nothing) for a vector
    /// of another width than the first one seen.
    pub(super) fn push(&mut self, vector: Option<&[f32]>) -> bool {
        let slot = self.scales.len();
        let vector = vector.filter(|v| !v.is_empty());
        if let Some(vector) = vector
            && self.dim == 0
        {
            self.dim = vector.len();
            self.words = vector.len().div_ceil(64);
        }
        let (dim, words) = (self.dim, self.words);
        self.codes.resize((slot + 1) * dim, 0);
        self.signs.resize((slot + 1) * words, 0);
        match vector {
            Some(vector) if vector.len() == dim => {
                let scale = quantise(vector, &mut self.codes[slot * dim..]);
                sign_bits(vector, &mut self.signs[slot * words..]);
                self.scales.push(scale);
                true
            }
            _ => {
                self.scales.push(0.0);
                false
            }
        }
    }

    /// Keeps the slots `remap` keeps, in order (see `Terms::compact`).
    pub(super) fn compact(&mut self, remap: &[Option<u32>]) {
        let (dim, words) = (self.dim, self.words);
        let mut next = 0;
        for (old, new) in remap.iter().enumerate() {
            if new.is_none() {
                continue;
            }
            if next != old {
                self.scales[next] = self.scales[old];
                self.codes
                    .copy_within(old * dim..(old + 1) * dim, next * dim);
                self.signs
                    .copy_within(old * words..(old + 1) * words, next * words);
            }
            next += 1;
        }
        self.scales.truncate(next);
        self.codes.truncate(next * dim);
        self.signs.truncate(next * words);
    }

    /// Cosine of `vector` with each of `slots` (`None` for a slot without
    /// a vector, or a query of another width).
    pub(super) fn cosines(&self, vector: &[f32], slots: &[usize]) -> Vec<Option<f32>> {
        if vector.len() != self.dim {
            return vec![None; slots.len()];
        }
        let query = self.query(vector);
        slots
            .iter()
            .map(|slot| self.has(*slot).then(|| self.score(&query, *slot)))
            .collect()
    }

    /// Cosines of `vector` with each of `slots`, both measured from `mean`
    /// (see `index::mean`): `(q − m)·(d − m) / (|q − m| |d − m|)`. Two
    /// int8 dot products per row, `(q − m)·d` and `m·d`, give it, as
    /// stored vectors are unit vectors: `|d − m|² = 1 − 2 m·d + |m|²`.
    pub(super) fn centred_cosines(
        &self,
        vector: &[f32],
        mean: &[f32],
        slots: &[usize],
    ) -> Vec<Option<f32>> {
        if vector.len() != self.dim || mean.len() != self.dim {
            return vec![None; slots.len()];
        }
        let shifted: Vec<f32> = vector.iter().zip(mean).map(|(q, m)| q - m).collect();
        let shifted_norm = shifted.iter().map(|v| v * v).sum::<f32>().sqrt();
        let shifted_dot_mean: f32 = shifted.iter().zip(mean).map(|(s, m)| s * m).sum();
        let mean_square: f32 = mean.iter().map(|m| m * m).sum();
        let (shifted_query, mean_query) = (self.query(&shifted), self.query(mean));
        slots
            .iter()
            .map(|slot| {
                self.has(*slot).then(|| {
                    let dot = self.score(&shifted_query, *slot) - shifted_dot_mean;
                    let mean_dot_row = self.score(&mean_query, *slot);
                    let row_square = (1.0 - 2.0 * mean_dot_row + mean_square).max(0.0);
                    let norms = shifted_norm * row_square.sqrt();
                    if norms > 0.0 { dot / norms } else { 0.0 }
                })
            })
            .collect()
    }

    /// The vector of `slot` as stored (dequantised); empty for a slot
    /// without one.
    pub(super) fn values(&self, slot: usize) -> impl ExactSizeIterator<Item = f32> + '_ {
        let scale = self.scales.get(slot).copied().unwrap_or(0.0);
        let codes = if scale == 0.0 {
            &[][..]
        } else {
            &self.codes[slot * self.dim..(slot + 1) * self.dim]
        };
        codes.iter().map(move |code| f32::from(*code) * scale)
    }

    fn query(&self, vector: &[f32]) -> Query {
        let mut codes = vec![0i8; self.dim];
        let scale = quantise(vector, &mut codes);
        let mut signs = vec![0u64; self.words];
        sign_bits(vector, &mut signs);
        Query {
            codes,
            scale,
            signs,
        }
    }

    fn score(&self, query: &Query, slot: usize) -> f32 {
        let codes = &self.codes[slot * self.dim..(slot + 1) * self.dim];
        dot_i8(&query.codes, codes) as f32 * query.scale * self.scales[slot]
    }

    /// The `limit` slots most similar to `vector` (a unit vector) among
    /// those `keep` accepts, best first, as `(cosine, slot)`. `candidates`
    /// is how many slots may pass `keep`, an upper bound that decides
    /// between the exact and the two-stage scan.
    pub(super) fn search(
        &self,
        vector: &[f32],
        keep: impl Fn(usize) -> bool + Sync,
        limit: usize,
        candidates: usize,
        exact_scan_limit: usize,
    ) -> Vec<(f32, usize)> {
        let slots = self.scales.len();
        if limit == 0 || slots == 0 || vector.len() != self.dim {
            return Vec::new();
        }
        let query = self.query(vector);
        let two_stage = candidates > exact_scan_limit;
        let first_stage = limit.saturating_mul(50).max(2000);
        let keep = |slot: usize| self.scales[slot] != 0.0 && keep(slot);
        let scan = |start: usize, end: usize| -> Vec<(f32, usize)> {
            if two_stage {
                self.two_stage(&query, &keep, start, end, first_stage, limit)
            } else {
                let mut best = TopK::new(limit);
                for slot in (start..end).filter(|s| keep(*s)) {
                    best.push(self.score(&query, slot), slot);
                }
                best.into_sorted()
            }
        };
        let found = on_every_core(slots, ROWS_PER_THREAD, |rows| scan(rows.start, rows.end));
        let mut best = TopK::new(limit);
        for (score, slot) in found {
            best.push(score, slot);
        }
        best.into_sorted()
    }

    /// Sign-bit distances over `start..end`, then the codes of the
    /// `first_stage` closest that `keep` accepts.
    ///
    /// The filter is checked only on the closest rows (twice as many as
    /// needed): with the usual filters most rows pass, and reading every
    /// row's filter fields costs more than its sign bits. When the filter
    /// rejects too many of them, the closest are chosen again among the
    /// rows it accepts, so a filter never costs results.
    fn two_stage(
        &self,
        query: &Query,
        keep: &impl Fn(usize) -> bool,
        start: usize,
        end: usize,
        first_stage: usize,
        limit: usize,
    ) -> Vec<(f32, usize)> {
        let words = self.words;
        let mut histogram = vec![0usize; words * 64 + 1];
        let mut distances = vec![u16::MAX; end - start];
        let (signs, scales) = (&self.signs, &self.scales);
        sign_distances(
            &query.signs,
            signs,
            scales,
            start,
            &mut histogram,
            &mut distances,
        );
        let with_vectors: usize = histogram.iter().sum();
        let threshold = admitting(&histogram, first_stage.saturating_mul(2));
        let picked: Vec<usize> = (start..end)
            .filter(|slot| usize::from(distances[slot - start]) <= threshold && keep(*slot))
            .collect();
        let looked_at: usize = histogram[..=threshold].iter().sum();
        if picked.len() >= first_stage || looked_at >= with_vectors {
            return self.rerank(query, &picked, limit);
        }
        // The filter rejected most of the closest rows: choose among the
        // rows it accepts.
        histogram.iter_mut().for_each(|count| *count = 0);
        for (offset, distance) in distances.iter_mut().enumerate() {
            if *distance != u16::MAX && keep(start + offset) {
                histogram[usize::from(*distance)] += 1;
            } else {
                *distance = u16::MAX;
            }
        }
        let threshold = admitting(&histogram, first_stage);
        let picked: Vec<usize> = (start..end)
            .filter(|slot| usize::from(distances[slot - start]) <= threshold)
            .collect();
        self.rerank(query, &picked, limit)
    }

    /// The `limit` best of `slots` by their codes. The slots are scattered
    /// over codes too large for the cache, so each one's codes are
    /// prefetched `AHEAD` slots before they are scored: the reads overlap
    /// instead of waiting on memory one after another.
    fn rerank(&self, query: &Query, slots: &[usize], limit: usize) -> Vec<(f32, usize)> {
        const AHEAD: usize = 8;
        let mut best = TopK::new(limit);
        for (i, &slot) in slots.iter().enumerate() {
            if let Some(&ahead) = slots.get(i + AHEAD) {
                prefetch(&self.codes[ahead * self.dim..(ahead + 1) * self.dim]);
            }
            best.push(self.score(query, slot), slot);
        }
        best.into_sorted()
    }
}

/// Asks the CPU to start loading `bytes` into its cache.
fn prefetch(bytes: &[i8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch only hints the cache; it never faults, and
        // the address lies within `bytes` anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The smallest distance at or under which `wanted` rows lie (the largest
/// distance when fewer rows are counted).
fn admitting(histogram: &[usize], wanted: usize) -> usize {
    let mut admitted = 0;
    for (distance, count) in histogram.iter().enumerate() {
        admitted += count;
        if admitted >= wanted {
            return distance;
        }
    }
    histogram.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        values.iter().map(|v| v / norm).collect()
    }

    #[test]
    fn the_int8_dot_product_is_exact_at_every_length() {
        for len in [0, 5, 16, 37, 384, 385] {
            let a: Vec<i8> = (0..len).map(|i| (i * 77 % 256) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| (i * 31 % 256) as u8 as i8).collect();
            let plain: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), plain, "length {len}");
        }
        let extreme = vec![-128i8; 384];
        assert_eq!(dot_i8(&extreme, &extreme), 384 * 128 * 128);
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

    /// `count` pseudo-random 64-dimensional unit vectors and a query, from
    /// a fixed LCG.
    fn random(seed: u64, count: usize) -> (Vectors, Vec<f32>) {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let mut vectors = Vectors::default();
        for _ in 0..count {
            let v: Vec<f32> = unit(&(0..64).map(|_| next()).collect::<Vec<_>>());
            assert!(vectors.push(Some(&v)));
        }
        let query = unit(&(0..64).map(|_| next()).collect::<Vec<_>>());
        (vectors, query)
    }

    #[test]
    fn centred_cosines_match_the_float_formula() {
        let (isotropic, query) = random(5, 200);
        // Give every vector a large shared direction, as sentence
        // embeddings have.
        let shared = |v: Vec<f32>| {
            unit(
                &v.iter()
                    .enumerate()
                    .map(|(i, x)| x + if i < 8 { 0.4 } else { 0.0 })
                    .collect::<Vec<_>>(),
            )
        };
        let rows: Vec<Vec<f32>> = (0..200)
            .map(|slot| shared(isotropic.values(slot).collect()))
            .collect();
        let query = shared(query);
        let mut vectors = Vectors::default();
        rows.iter().for_each(|row| assert!(vectors.push(Some(row))));
        let mean: Vec<f32> = (0..64)
            .map(|i| rows.iter().map(|r| r[i]).sum::<f32>() / 200.0)
            .collect();
        let centred = |row: &[f32]| {
            let (q, r): (Vec<f32>, Vec<f32>) = query
                .iter()
                .zip(row)
                .zip(&mean)
                .map(|((q, r), m)| (q - m, r - m))
                .unzip();
            let dot: f32 = q.iter().zip(&r).map(|(a, b)| a * b).sum();
            dot / (q.iter().map(|v| v * v).sum::<f32>() * r.iter().map(|v| v * v).sum::<f32>())
                .sqrt()
        };
        let slots: Vec<usize> = (0..200).collect();
        let found = vectors.centred_cosines(&query, &mean, &slots);
        let mut spread = 0.0f32;
        for (slot, cosine) in slots.iter().zip(found) {
            let (exact, plain) = (
                centred(&rows[*slot]),
                vectors.cosines(&query, &[*slot])[0].unwrap(),
            );
            assert!(
                (cosine.unwrap() - exact).abs() < 0.02,
                "slot {slot}: {cosine:?} vs {exact}"
            );
            spread = spread.max((exact - plain).abs());
        }
        assert!(
            spread > 0.2,
            "centring should change cosines here: {spread}"
        );
        assert_eq!(
            vectors.centred_cosines(&query[..10], &mean, &slots)[0],
            None
        );
    }

    #[test]
    fn two_stage_search_agrees_with_exact_search() {
        let (vectors, query) = random(7, 3000);
        let exact = vectors.search(&query, |_| true, 10, 3000, usize::MAX);
        let approx = vectors.search(&query, |_| true, 10, 3000, 100);
        let overlap = exact
            .iter()
            .filter(|e| approx.iter().any(|a| a.1 == e.1))
            .count();
        assert!(overlap >= 8, "{overlap} of 10");
    }

    #[test]
    fn a_narrow_filter_costs_the_two_stage_search_no_results() {
        let (vectors, query) = random(11, 20_000);
        // One slot in 400 passes (50): the 4,000 closest by sign bits hold
        // about 10 of them, fewer than the first stage wants, so the
        // search chooses again among the 50 and scores them all.
        let keep = |slot: usize| slot % 400 == 7;
        let exact = vectors.search(&query, keep, 10, 20_000, usize::MAX);
        let approx = vectors.search(&query, keep, 10, 20_000, 100);
        assert_eq!(approx, exact);
        assert!(approx.iter().all(|(_, slot)| keep(*slot)));
    }

    #[test]
    fn a_slot_without_a_vector_is_never_found() {
        let mut vectors = Vectors::default();
        assert!(!vectors.push(None));
        assert!(vectors.push(Some(&unit(&[1.0, 0.0]))));
        assert!(
            !vectors.push(Some(&unit(&[1.0, 0.0, 0.0]))),
            "another width"
        );
        let found = vectors.search(&unit(&[1.0, 0.1]), |_| true, 5, 3, 100);
        assert_eq!(found.iter().map(|f| f.1).collect::<Vec<_>>(), [1]);
    }
}
