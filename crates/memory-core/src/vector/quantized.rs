//! Compact vectors for a store's first, approximate pass of an exact search: a vector as one
//! signed byte a dimension (of its unit vector) and a scale, a quarter of its `f32` bytes.
//!
//! A store that scans every point of a scope (the SQL and Redis vector stores) reads these
//! instead of the `f32` values, scores them against the query with [`QueryScorer::score`],
//! keeps the best [`rescoring_candidates`] and scores those again exactly from their stored
//! `f32` values, so the scores it returns are exact cosine similarities and the ranking is
//! exact unless a point of the true top `top_k` scores, approximately, below all of the
//! candidates (the approximation errs by about 0.01 at 384 dimensions; the candidates are at
//! least four times `top_k`).
//!
//! The layout: the scale (`f32`, little-endian) then one `i8` a dimension, `round(u_i / scale)`
//! where `u` is the vector divided by its norm and `scale = max |u_i| / 127`; a zero vector is
//! all zeros, scale included. Its length, `dimensions + 4`, is never a multiple of 4 times the
//! dimension, so [`QueryScorer::score`] also accepts a stored `f32` vector (`4 × dimensions`
//! bytes), as a store's rows from before it kept compact vectors hold.

use crate::{Error, Result};

/// The bytes of the compact form of `vector` (see the module docs).
pub fn quantize(vector: &[f32]) -> Vec<u8> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    let mut out = Vec::with_capacity(vector.len().saturating_add(4));
    if norm == 0.0 || largest == 0.0 || !norm.is_finite() {
        out.resize(vector.len().saturating_add(4), 0);
        return out;
    }
    let scale = largest / norm / 127.0;
    out.extend_from_slice(&scale.to_le_bytes());
    out.extend(vector.iter().map(|x| {
        // In -127..=127 by construction; the cast saturates anyway.
        let q = (x / norm / scale).round() as i8;
        q.cast_unsigned()
    }));
    out
}

/// How many candidates an approximate pass keeps for the exact one, for a search of `top_k`:
/// four times `top_k`, at least 32, rounded up to a power of two (so statements that read the
/// candidates come in few shapes).
pub fn rescoring_candidates(top_k: usize) -> usize {
    top_k
        .saturating_mul(4)
        .max(32)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
}

/// A query vector prepared to score stored vectors, compact or `f32`, without decoding them.
pub struct QueryScorer<'q> {
    values: &'q [f32],
    norm: f32,
}

impl<'q> QueryScorer<'q> {
    /// The scorer of `values`.
    pub fn new(values: &'q [f32]) -> Self {
        let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt();
        Self { values, norm }
    }

    /// The cosine similarity of the stored vector `bytes` to the query: approximate for a
    /// compact vector ([`quantize`]), exact for `f32` values (little-endian); 0 when either is
    /// all zeros.
    ///
    /// # Errors
    /// `Serialization` naming `point` when `bytes` is neither form of a vector of the query's
    /// dimension.
    pub fn score(&self, bytes: &[u8], point: &dyn std::fmt::Display) -> Result<f32> {
        let dimensions = self.values.len();
        if bytes.len() == dimensions.saturating_add(4)
            && let Some((scale, values)) = bytes.split_first_chunk::<4>()
        {
            let scale = f32::from_le_bytes(*scale);
            if self.norm == 0.0 {
                return Ok(0.0);
            }
            let dot = dot_with(self.values, values, |b| f32::from(b.cast_signed()));
            return Ok(dot * scale / self.norm);
        }
        if bytes.len() == dimensions.saturating_mul(4) {
            let (values, _) = bytes.as_chunks::<4>();
            let dot = dot_with(self.values, values, |b| f32::from_le_bytes(*b));
            let stored_sq = dot_with_self(values);
            let denom = self.norm * stored_sq.sqrt();
            return Ok(if denom == 0.0 { 0.0 } else { dot / denom });
        }
        Err(wrong_length(bytes, dimensions, point))
    }

    /// The exact cosine similarity of the stored `f32` vector `bytes` (little-endian) to the
    /// query (0 when either is all zeros): the second pass of a search.
    ///
    /// # Errors
    /// `Serialization` naming `point` when `bytes` is not an `f32` vector of the query's
    /// dimension.
    pub fn score_exactly(&self, bytes: &[u8], point: &dyn std::fmt::Display) -> Result<f32> {
        let dimensions = self.values.len();
        if bytes.len() != dimensions.saturating_mul(4) {
            return Err(wrong_length(bytes, dimensions, point));
        }
        self.score(bytes, point)
    }
}

fn wrong_length(bytes: &[u8], dimensions: usize, point: &dyn std::fmt::Display) -> Error {
    Error::serialization(format!(
        "the stored vector of {point} is {} bytes long, which is no vector of {dimensions} \
         dimensions",
        bytes.len()
    ))
}

/// Lanes summed apart, so the compiler can keep them in one SIMD register.
const LANES: usize = 8;

/// The dot product of `query` and the stored values `stored` (decoded by `value`).
fn dot_with<T>(query: &[f32], stored: &[T], value: impl Fn(&T) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let (q_chunks, q_rest) = query.as_chunks::<LANES>();
    let (s_chunks, s_rest) =
        stored.split_at(q_chunks.len().saturating_mul(LANES).min(stored.len()));
    for (q, s) in q_chunks.iter().zip(s_chunks.chunks_exact(LANES)) {
        for ((lane, q), s) in lanes.iter_mut().zip(q).zip(s) {
            *lane += q * value(s);
        }
    }
    let tail: f32 = q_rest.iter().zip(s_rest).map(|(q, s)| q * value(s)).sum();
    lanes.iter().sum::<f32>() + tail
}

/// The squared norm of stored `f32` values.
fn dot_with_self(values: &[[u8; 4]]) -> f32 {
    let mut lanes = [0f32; LANES];
    let (chunks, rest) = values.as_chunks::<LANES>();
    for chunk in chunks {
        for (lane, bytes) in lanes.iter_mut().zip(chunk) {
            let v = f32::from_le_bytes(*bytes);
            *lane += v * v;
        }
    }
    let tail: f32 = rest
        .iter()
        .map(|b| {
            let v = f32::from_le_bytes(*b);
            v * v
        })
        .sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::cosine_similarity;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A deterministic pseudo-random vector.
    fn vector(seed: u64, dimensions: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..dimensions)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn compact_scores_are_within_a_hundredth_of_cosine() {
        for seed in 1..200 {
            let (q, v) = (vector(seed, 384), vector(seed + 1000, 384));
            let exact = cosine_similarity(&q, &v);
            let approx = QueryScorer::new(&q).score(&quantize(&v), &"p").unwrap();
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        let q = vector(7, 384);
        let same = QueryScorer::new(&q).score(&quantize(&q), &"p").unwrap();
        assert!((same - 1.0).abs() < 0.01, "{same}");
    }

    #[test]
    fn f32_bytes_score_exactly_with_an_odd_dimension() {
        for dimensions in [1, 3, 7, 8, 9, 385] {
            let (q, v) = (vector(3, dimensions), vector(4, dimensions));
            let exact = cosine_similarity(&q, &v);
            let scored = QueryScorer::new(&q).score(&f32_bytes(&v), &"p").unwrap();
            assert!(
                (exact - scored).abs() < 1e-5,
                "{dimensions}: {exact} vs {scored}"
            );
            let approx = QueryScorer::new(&q).score(&quantize(&v), &"p").unwrap();
            assert!(
                (exact - approx).abs() < 0.02,
                "{dimensions}: {exact} vs {approx}"
            );
        }
    }

    #[test]
    fn the_exact_pass_takes_f32_vectors_only() {
        let (q, v) = (vector(5, 8), vector(6, 8));
        let scorer = QueryScorer::new(&q);
        let exact = scorer.score_exactly(&f32_bytes(&v), &"p").unwrap();
        assert!((exact - cosine_similarity(&q, &v)).abs() < 1e-5);
        let err = scorer.score_exactly(&quantize(&v), &"point 9").unwrap_err();
        assert!(err.message().contains("point 9"), "{err}");
    }

    #[test]
    fn zero_vectors_score_zero() {
        let q = vector(1, 8);
        let zero = [0f32; 8];
        assert_eq!(
            QueryScorer::new(&q).score(&quantize(&zero), &"p").unwrap(),
            0.0
        );
        assert_eq!(
            QueryScorer::new(&zero).score(&quantize(&q), &"p").unwrap(),
            0.0
        );
        assert_eq!(
            QueryScorer::new(&zero).score(&f32_bytes(&q), &"p").unwrap(),
            0.0
        );
    }

    #[test]
    fn other_lengths_are_errors_naming_the_point() {
        let q = vector(1, 8);
        for bytes in [&[][..], &[0u8; 11][..], &[0u8; 31][..], &[0u8; 36][..]] {
            let err = QueryScorer::new(&q)
                .score(bytes, &"vector point 7")
                .unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Serialization);
            assert!(err.message().contains("vector point 7"), "{err}");
        }
    }

    #[test]
    fn candidates_are_four_times_top_k_at_least_32_in_powers_of_two() {
        assert_eq!(rescoring_candidates(0), 32);
        assert_eq!(rescoring_candidates(10), 64);
        assert_eq!(rescoring_candidates(8), 32);
        assert_eq!(rescoring_candidates(100), 512);
        assert_eq!(rescoring_candidates(usize::MAX), usize::MAX);
    }
}
