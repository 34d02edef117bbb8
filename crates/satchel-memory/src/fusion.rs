//! Hybrid recall's ranking: each candidate's semantic and keyword scores
//! fused into one (convex combination or reciprocal ranks), then weighed
//! by recency and certainty.

use satchel_store::Timestamp;

use crate::config::{Fusion, RecallConfig};
use crate::index::Candidate;

/// One candidate after fusion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fused {
    pub(crate) seq: i64,
    pub(crate) created_at: Timestamp,
    pub(crate) certainty: f32,
    pub(crate) score: f32,
    pub(crate) semantic: Option<f32>,
    pub(crate) keyword: Option<f64>,
}

/// Combines each candidate's two scores into one from 0 to 1, best
/// first; see [`Fusion`]. A ranking that found nothing for this query
/// (no model, or no query word in any memory) has no weight.
pub(crate) fn fuse(config: &RecallConfig, candidates: &[Candidate]) -> Vec<Fused> {
    let cosines: Vec<Option<f64>> = candidates.iter().map(|c| c.cosine.map(f64::from)).collect();
    let bm25s: Vec<Option<f64>> = candidates
        .iter()
        .map(|c| (c.bm25 > 0.0).then_some(f64::from(c.bm25)))
        .collect();
    let weight = |scores: &[Option<f64>], weight: f32| {
        if scores.iter().any(Option::is_some) {
            weight
        } else {
            0.0
        }
    };
    let semantic_weight = weight(&cosines, config.semantic_weight);
    let keyword_weight = weight(&bm25s, config.keyword_weight);
    let total = semantic_weight + keyword_weight;
    let total = if total > 0.0 { total } else { 1.0 };
    let normal = |scores: &[Option<f64>]| match config.fusion {
        Fusion::Convex => scaled_by_max(scores),
        Fusion::Rrf => reciprocal_ranks(scores, config.rrf_k),
    };
    let (semantic, keyword) = (normal(&cosines), normal(&bm25s));
    let mut fused: Vec<Fused> = candidates
        .iter()
        .enumerate()
        .map(|(i, candidate)| Fused {
            seq: candidate.seq,
            created_at: candidate.created_at,
            certainty: candidate.certainty,
            score: (semantic_weight * semantic[i] + keyword_weight * keyword[i]) / total,
            semantic: candidate.cosine,
            keyword: bm25s[i],
        })
        .collect();
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    fused
}

/// Scores mapped to 0..1 between 0, the least either ranking can give
/// (BM25 of no match; cosine of unrelated texts, negatives clamped), and
/// the best candidate's (a missing score is 0). The lower end is fixed
/// rather than the worst candidate's: Bruch et al. ("An Analysis of Fusion
/// Functions for Hybrid Retrieval", 2023) found this "theoretical min-max"
/// more robust, and it measured better here too.
fn scaled_by_max(scores: &[Option<f64>]) -> Vec<f32> {
    let max = scores.iter().flatten().fold(0.0f64, |hi, s| hi.max(*s));
    scores
        .iter()
        .map(|score| match score {
            Some(s) if max > f64::EPSILON => (s.max(0.0) / max) as f32,
            _ => 0.0,
        })
        .collect()
}

/// `(k + 1) / (k + rank)` by descending score, rank from 1 (a missing
/// score is 0).
fn reciprocal_ranks(scores: &[Option<f64>], k: f32) -> Vec<f32> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|i| scores[*i].is_some()).collect();
    order.sort_by(|a, b| {
        scores[*b]
            .unwrap_or(0.0)
            .total_cmp(&scores[*a].unwrap_or(0.0))
    });
    let mut ranks = vec![0.0; scores.len()];
    for (rank, i) in order.into_iter().enumerate() {
        ranks[i] = (k + 1.0) / (k + rank as f32 + 1.0);
    }
    ranks
}

/// The recency and certainty factors of a memory as of `now`.
pub(crate) fn factors(
    config: &RecallConfig,
    created_at: Timestamp,
    certainty: f32,
    now: Timestamp,
) -> f32 {
    let age_days = (now.as_millis() - created_at.as_millis()).max(0) as f32 / 86_400_000.0;
    let recency = 0.5f32.powf(age_days / config.recency_half_life_days);
    let recency_factor = 1.0 - config.recency_weight + config.recency_weight * recency;
    let certainty_factor =
        1.0 - config.certainty_weight + config.certainty_weight * certainty.clamp(0.0, 1.0);
    recency_factor * certainty_factor
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn candidate(seq: i64, cosine: Option<f32>, bm25: f32) -> Candidate {
        Candidate {
            seq,
            created_at: Timestamp::from_millis(0),
            certainty: 1.0,
            bm25,
            cosine,
        }
    }

    #[test]
    fn fusion_rewards_agreement_and_is_normalised() {
        let candidates = [
            candidate(1, Some(0.9), 0.0),
            candidate(2, Some(0.8), 5.0),
            candidate(3, Some(0.7), 0.0),
            candidate(4, None, 3.0),
        ];
        let rrf = RecallConfig {
            fusion: Fusion::Rrf,
            ..RecallConfig::default()
        };
        let fused = fuse(&rrf, &candidates);
        assert_eq!(
            fused.iter().map(|f| f.seq).collect::<Vec<_>>(),
            [2, 1, 4, 3]
        );
        assert!(fused[0].score <= 1.0 && fused[0].score > 0.9, "{fused:?}");
        assert_eq!(fused[0].keyword, Some(5.0));
        assert_eq!(fused[2].semantic, None);
        // One ranking alone: its best scores 1.
        let alone: Vec<Candidate> = candidates
            .iter()
            .map(|c| Candidate { bm25: 0.0, ..*c })
            .collect();
        assert_eq!(fuse(&rrf, &alone)[0].score, 1.0);

        let convex = RecallConfig {
            fusion: Fusion::Convex,
            semantic_weight: 1.0,
            keyword_weight: 1.0,
            ..RecallConfig::default()
        };
        let fused = fuse(&convex, &candidates);
        // Each score over the best of its kind: 2: (0.8/0.9 + 5/5) / 2;
        // 1: (1 + 0) / 2; 3: 0.7/0.9 / 2; 4: 3/5 / 2.
        assert_eq!(
            fused.iter().map(|f| f.seq).collect::<Vec<_>>(),
            [2, 1, 3, 4]
        );
        let expected = [(0.8 / 0.9 + 1.0) / 2.0, 0.5, 0.7 / 0.9 / 2.0, 0.3];
        for (f, e) in fused.iter().zip(expected) {
            assert!((f.score - e).abs() < 1e-6, "{fused:?}");
        }
    }

    #[test]
    fn recency_and_certainty_lower_scores_by_their_weights() {
        let config = RecallConfig::default();
        let now = Timestamp::from_millis(1_000 * 86_400_000);
        let ago = |days: i64| Timestamp::from_millis(now.as_millis() - days * 86_400_000);
        assert_eq!(factors(&config, ago(0), 1.0, now), 1.0);
        let half = factors(&config, ago(180), 1.0, now);
        assert!((half - 0.95).abs() < 1e-4, "{half}");
        let unsure = factors(&config, ago(0), 0.0, now);
        assert!((unsure - 0.8).abs() < 1e-6, "{unsure}");
    }
}
