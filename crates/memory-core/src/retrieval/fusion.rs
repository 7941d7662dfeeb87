//! [`Fusion`]: how a [`HybridRetriever`](super::HybridRetriever) merges the dense and the
//! lexical rankings into one.

use std::collections::HashMap;

use uuid::Uuid;

use super::Retrieved;

/// The usual `k` of reciprocal rank fusion: the constant of Cormack et al. (2009).
pub const DEFAULT_RRF_K: f32 = 60.0;

/// The default fusion's weight of the dense scores ([`Fusion::default`]): chosen on the first
/// six LoCoMo conversations (docs/quality.md), where weighted scores with dense 0.5 and lexical
/// 1 recalled best (R@10 66.3, against 64.5 for the best reciprocal rank fusion tried), and
/// still do with each turn indexed with the one before it (R@10 72.1, RRF k 20: 68.1).
pub const DEFAULT_DENSE_WEIGHT: f32 = 0.5;

/// The default fusion's weight of the lexical scores ([`Fusion::default`]).
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 1.0;

/// How two rankings of the same query are merged.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Fusion {
    /// Reciprocal rank fusion: an item scores `Σ weight / (k + rank)` over the rankings it
    /// appears in (rank 1 is the best). Only ranks matter, so scores on different scales (a
    /// cosine, a BM25 score) mix without calibration; a larger `k` flattens the difference
    /// between the first ranks.
    ReciprocalRank {
        /// The rank offset (60 in the original paper); at least 0.
        k: f32,
        /// The weight of the dense ranking.
        dense_weight: f32,
        /// The weight of the lexical ranking.
        lexical_weight: f32,
    },
    /// Weighted sum of min-max normalised scores: each ranking's scores are mapped to
    /// `[0, 1]` (its best to 1, its worst candidate to 0; a ranking whose scores are all equal
    /// gives 1), and an item scores `dense_weight × dense + lexical_weight × lexical`, a
    /// ranking it is absent from adding 0.
    WeightedScore {
        /// The weight of the dense scores.
        dense_weight: f32,
        /// The weight of the lexical scores.
        lexical_weight: f32,
    },
}

impl Default for Fusion {
    /// Weighted min-max scores, dense [`DEFAULT_DENSE_WEIGHT`], lexical
    /// [`DEFAULT_LEXICAL_WEIGHT`] (the best fusion measured on the tuning conversations).
    fn default() -> Self {
        Self::weighted_score(DEFAULT_DENSE_WEIGHT, DEFAULT_LEXICAL_WEIGHT)
    }
}

impl Fusion {
    /// Reciprocal rank fusion with rank offset `k` (negative or NaN taken as 0), both rankings
    /// weighted 1.
    pub fn reciprocal_rank(k: f32) -> Self {
        Self::ReciprocalRank {
            k: non_negative(k),
            dense_weight: 1.0,
            lexical_weight: 1.0,
        }
    }

    /// Weighted sum of normalised scores.
    pub fn weighted_score(dense_weight: f32, lexical_weight: f32) -> Self {
        Self::WeightedScore {
            dense_weight: non_negative(dense_weight),
            lexical_weight: non_negative(lexical_weight),
        }
    }

    /// Sets the weights of the dense and the lexical rankings (negative or NaN taken as 0).
    #[must_use]
    pub fn with_weights(self, dense: f32, lexical: f32) -> Self {
        let (dense, lexical) = (non_negative(dense), non_negative(lexical));
        match self {
            Self::ReciprocalRank { k, .. } => Self::ReciprocalRank {
                k,
                dense_weight: dense,
                lexical_weight: lexical,
            },
            Self::WeightedScore { .. } => Self::WeightedScore {
                dense_weight: dense,
                lexical_weight: lexical,
            },
        }
    }

    /// Merges a dense and a lexical ranking (each best first) into one, best first: each item
    /// once, scored by this fusion, ties by ascending id, at most `top_k`. An item keeps the
    /// payload of the first ranking it appears in (the dense one).
    pub fn fuse(
        &self,
        dense: Vec<Retrieved>,
        lexical: Vec<Retrieved>,
        top_k: usize,
    ) -> Vec<Retrieved> {
        let (dense_weight, lexical_weight) = match *self {
            Self::ReciprocalRank {
                dense_weight,
                lexical_weight,
                ..
            }
            | Self::WeightedScore {
                dense_weight,
                lexical_weight,
            } => (dense_weight, lexical_weight),
        };
        let mut fused: Vec<Retrieved> =
            Vec::with_capacity(dense.len().saturating_add(lexical.len()));
        let mut position: HashMap<Uuid, usize> = HashMap::new();
        for (weight, ranking) in [(dense_weight, dense), (lexical_weight, lexical)] {
            let contributions = self.contributions(&ranking);
            for (item, contribution) in ranking.into_iter().zip(contributions) {
                let score = weight * contribution;
                if let Some(slot) = position.get(&item.id).and_then(|&i| fused.get_mut(i)) {
                    slot.score += score;
                    continue;
                }
                position.insert(item.id, fused.len());
                fused.push(Retrieved {
                    id: item.id,
                    score,
                    payload: item.payload,
                });
            }
        }
        fused.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        fused.truncate(top_k);
        fused
    }

    /// What each item of one ranking (best first, ids distinct) contributes before weighting.
    fn contributions(&self, ranking: &[Retrieved]) -> Vec<f32> {
        match *self {
            Self::ReciprocalRank { k, .. } => (1..=ranking.len())
                .map(|rank| 1.0 / (k + rank as f32))
                .collect(),
            Self::WeightedScore { .. } => {
                let max = ranking
                    .iter()
                    .map(|r| r.score)
                    .fold(f32::NEG_INFINITY, f32::max);
                let min = ranking
                    .iter()
                    .map(|r| r.score)
                    .fold(f32::INFINITY, f32::min);
                let span = max - min;
                ranking
                    .iter()
                    .map(|r| {
                        if span > 0.0 {
                            (r.score - min) / span
                        } else {
                            1.0
                        }
                    })
                    .collect()
            }
        }
    }
}

fn non_negative(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn ranking(ids: &[u128], scores: &[f32]) -> Vec<Retrieved> {
        ids.iter()
            .zip(scores)
            .map(|(&n, &score)| Retrieved {
                id: id(n),
                score,
                payload: Map::new(),
            })
            .collect()
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn reciprocal_rank_fusion_sums_hand_computed_scores() {
        // dense: 1, 2, 3; lexical: 3, 4, 1; k = 60.
        let dense = ranking(&[1, 2, 3], &[0.9, 0.8, 0.7]);
        let lexical = ranking(&[3, 4, 1], &[12.0, 7.0, 1.0]);
        let fused = Fusion::reciprocal_rank(60.0).fuse(dense, lexical, 10);
        let ids: Vec<Uuid> = fused.iter().map(|r| r.id).collect();
        // 1: 1/61 + 1/63 = 0.032266; 3: 1/63 + 1/61 = same, tie by id -> 1 first;
        // 2: 1/62 = 0.016129; 4: 1/62 = same, tie by id -> 2 first.
        assert_eq!(ids, [id(1), id(3), id(2), id(4)]);
        assert!(close(fused[0].score, 1.0 / 61.0 + 1.0 / 63.0));
        assert!(close(fused[1].score, fused[0].score));
        assert!(close(fused[2].score, 1.0 / 62.0));
    }

    #[test]
    fn reciprocal_rank_weights_and_k_change_the_order() {
        // dense: 1, 2; lexical: 2, 1. With the lexical ranking weighted 2 and k = 0:
        // 1: 1/1 + 2/2 = 2.0; 2: 1/2 + 2/1 = 2.5.
        let fusion = Fusion::reciprocal_rank(0.0).with_weights(1.0, 2.0);
        let fused = fusion.fuse(
            ranking(&[1, 2], &[0.9, 0.1]),
            ranking(&[2, 1], &[5.0, 4.0]),
            10,
        );
        assert_eq!(fused[0].id, id(2));
        assert!(close(fused[0].score, 2.5));
        assert!(close(fused[1].score, 2.0));
        // A zero lexical weight keeps the dense order.
        let dense_only = Fusion::reciprocal_rank(60.0).with_weights(1.0, 0.0);
        let fused = dense_only.fuse(
            ranking(&[1, 2], &[0.9, 0.1]),
            ranking(&[2, 1], &[5.0, 4.0]),
            10,
        );
        assert_eq!(fused[0].id, id(1));
    }

    #[test]
    fn weighted_score_normalises_each_ranking() {
        // dense 1: 0.9 -> 1, 2: 0.5 -> 0, 3: 0.7 -> 0.5 (order given best first: 1, 3, 2);
        // lexical 2: 10 -> 1, 4: 4 -> 0.
        let dense = ranking(&[1, 3, 2], &[0.9, 0.7, 0.5]);
        let lexical = ranking(&[2, 4], &[10.0, 4.0]);
        let fused = Fusion::weighted_score(0.5, 1.0).fuse(dense, lexical, 10);
        // 1: 0.5; 3: 0.25; 2: 0 + 1 = 1; 4: 0.
        let got: Vec<(Uuid, f32)> = fused.iter().map(|r| (r.id, r.score)).collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].0, id(2));
        assert!(close(got[0].1, 1.0));
        assert_eq!(got[1].0, id(1));
        assert!(close(got[1].1, 0.5));
        assert_eq!(got[2].0, id(3));
        assert!(close(got[2].1, 0.25));
        assert_eq!(got[3].0, id(4));
        // A single result (all scores equal) normalises to 1.
        let fused = Fusion::weighted_score(1.0, 1.0).fuse(ranking(&[7], &[0.3]), Vec::new(), 10);
        assert!(close(fused[0].score, 1.0));
    }

    #[test]
    fn fusion_truncates_and_keeps_the_dense_payload() {
        let mut dense = ranking(&[1, 2, 3], &[0.9, 0.8, 0.7]);
        dense[0].payload.insert("from".into(), "dense".into());
        let mut lexical = ranking(&[1], &[3.0]);
        lexical[0].payload.insert("from".into(), "lexical".into());
        let fused = Fusion::default().fuse(dense, lexical, 2);
        assert_eq!(fused.len(), 2);
        assert_eq!(fused[0].id, id(1));
        assert_eq!(fused[0].payload["from"], "dense");
        assert!(Fusion::default().fuse(Vec::new(), Vec::new(), 5).is_empty());
        assert!(
            Fusion::default()
                .fuse(ranking(&[1], &[1.0]), Vec::new(), 0)
                .is_empty()
        );
    }

    #[test]
    fn negative_parameters_are_clamped() {
        assert_eq!(
            Fusion::reciprocal_rank(-3.0).with_weights(f32::NAN, -1.0),
            Fusion::ReciprocalRank {
                k: 0.0,
                dense_weight: 0.0,
                lexical_weight: 0.0
            }
        );
    }
}
