//! The mean embedding of each namespace, kept as rows come and go, so
//! recall can measure cosine from it.
//!
//! Sentence embeddings are anisotropic: they share a large common
//! direction, so any two texts of one corpus have a high cosine and what
//! tells them apart is a small remainder. Within one user's memories the
//! shared part grows (the same names, the same tone), and short chit-chat
//! that carries little but that shared part ends up close to every query.
//! Taking the corpus mean off both vectors before the cosine (as in Mu &
//! Viswanath 2018, "All-but-the-Top", and the whitening of Su et al. 2021)
//! leaves the remainder to compare. On the LoCoMo dev file it lifts hybrid
//! R@10 from 0.70 to 0.72 (bench/memory-results.md).
//!
//! Sums are kept in `f64` over the vectors as stored (dequantised), so
//! removing a row subtracts exactly what adding it added.

use std::collections::HashMap;

/// Below this many vectors a namespace's mean says more about the few
/// rows than about the model or the corpus, and cosines stay plain.
pub(super) const MIN_ROWS: u64 = 100;

/// The running sum of one namespace's vectors.
#[derive(Debug, Default)]
struct Sum {
    total: Vec<f64>,
    count: u64,
}

/// Running sums by namespace.
#[derive(Debug, Default)]
pub(super) struct Means {
    by_namespace: HashMap<u32, Sum>,
}

impl Means {
    /// Counts `vector` in `namespace`.
    pub(super) fn add(&mut self, namespace: u32, vector: impl ExactSizeIterator<Item = f32>) {
        let sum = self.by_namespace.entry(namespace).or_default();
        if sum.total.len() < vector.len() {
            sum.total.resize(vector.len(), 0.0);
        }
        for (total, value) in sum.total.iter_mut().zip(vector) {
            *total += f64::from(value);
        }
        sum.count += 1;
    }

    /// Takes back a vector `add` counted in `namespace`.
    pub(super) fn remove(&mut self, namespace: u32, vector: impl Iterator<Item = f32>) {
        let Some(sum) = self.by_namespace.get_mut(&namespace) else {
            return;
        };
        for (total, value) in sum.total.iter_mut().zip(vector) {
            *total -= f64::from(value);
        }
        sum.count = sum.count.saturating_sub(1);
        if sum.count == 0 {
            self.by_namespace.remove(&namespace);
        }
    }

    /// `share` of the mean of `namespace`'s vectors, once it has at least
    /// [`MIN_ROWS`].
    pub(super) fn mean(&self, namespace: u32, share: f32) -> Option<Vec<f32>> {
        let sum = self.by_namespace.get(&namespace)?;
        if sum.count < MIN_ROWS || share <= 0.0 {
            return None;
        }
        let scale = f64::from(share) / sum.count as f64;
        Some(sum.total.iter().map(|t| (t * scale) as f32).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_follows_adds_and_removals_and_waits_for_enough_rows() {
        let mut means = Means::default();
        for i in 0..MIN_ROWS - 1 {
            means.add(7, [1.0, i as f32].into_iter());
        }
        assert_eq!(means.mean(7, 1.0), None, "too few rows");
        means.add(7, [1.0, 0.5].into_iter());
        means.add(7, [5.0, 3.0].into_iter());
        means.remove(7, [5.0, 3.0].into_iter());
        means.add(7, [1.0, 0.5].into_iter());
        let mean = means.mean(7, 1.0).unwrap();
        let expected_second = ((0..MIN_ROWS - 1).sum::<u64>() as f32 + 1.0) / (MIN_ROWS + 1) as f32;
        assert!((mean[0] - 1.0).abs() < 1e-6, "{mean:?}");
        assert!((mean[1] - expected_second).abs() < 1e-4, "{mean:?}");
        assert_eq!(means.mean(7, 0.5).unwrap()[0], 0.5);
        assert_eq!(means.mean(7, 0.0), None);
        assert_eq!(means.mean(8, 1.0), None, "another namespace");
    }
}
