//! Vectors as their rows store them: `f32` values, little-endian, 4 bytes a dimension; and
//! the cosine similarity of a stored vector to a query, computed on the bytes.

use memory_core::{Error, Result};
use uuid::Uuid;

/// The bytes of a vector: its values, little-endian.
pub(super) fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector of stored bytes, exactly as written.
///
/// # Errors
/// `Serialization` naming the point when the bytes are not a whole number of `f32`s.
pub(super) fn decode_vector(bytes: &[u8], id: Uuid) -> Result<Vec<f32>> {
    check_length(bytes, id)?;
    Ok(values(bytes).collect())
}

fn check_length(bytes: &[u8], id: Uuid) -> Result<()> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return Err(Error::serialization(format!(
            "the stored vector of vector point {id} is {} bytes long, which is no whole \
             number of 4-byte values",
            bytes.len()
        )));
    }
    Ok(())
}

/// The values of `bytes` (whose length [`check_length`] accepted).
fn values(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    let (values, _) = bytes.as_chunks::<4>();
    values.iter().map(|b| f32::from_le_bytes(*b))
}

/// A query vector with its norm, scoring stored vectors without decoding them into a `Vec`.
pub(super) struct QueryVector<'q> {
    values: &'q [f32],
    norm: f32,
}

impl<'q> QueryVector<'q> {
    pub(super) fn new(values: &'q [f32]) -> Self {
        let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt();
        Self { values, norm }
    }

    /// The cosine similarity of the stored vector `bytes` to the query (0 when either is all
    /// zeros).
    ///
    /// # Errors
    /// `Serialization` naming the point when the bytes are not a vector of the query's
    /// dimension.
    pub(super) fn score(&self, bytes: &[u8], id: Uuid) -> Result<f32> {
        check_length(bytes, id)?;
        if bytes.len() / 4 != self.values.len() {
            return Err(Error::serialization(format!(
                "the stored vector of vector point {id} has {} dimensions; the store records {}",
                bytes.len() / 4,
                self.values.len()
            )));
        }
        let (mut dot, mut stored_sq) = (0f32, 0f32);
        for (q, v) in self.values.iter().zip(values(bytes)) {
            dot += q * v;
            stored_sq += v * v;
        }
        let denom = self.norm * stored_sq.sqrt();
        Ok(if denom == 0.0 { 0.0 } else { dot / denom })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_exactly() {
        let v = vec![1.5, -0.0, f32::MIN_POSITIVE, f32::MAX, -3.25];
        let id = Uuid::nil();
        let back = decode_vector(&encode_vector(&v), id).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn scores_are_cosine_similarities() {
        let q = [1.0, 0.0, 0.0];
        let query = QueryVector::new(&q);
        let id = Uuid::nil();
        let score = |v: &[f32]| query.score(&encode_vector(v), id).unwrap();
        assert!((score(&[2.0, 0.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!((score(&[1.0, 1.0, 0.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(score(&[0.0, 0.0, 0.0]), 0.0);
        assert!((score(&[-1.0, 0.0, 0.0]) + 1.0).abs() < 1e-6);
    }

    #[test]
    fn corrupt_bytes_are_errors_naming_the_point() {
        let id = Uuid::from_u128(7);
        for bytes in [&[][..], &[0u8, 0, 0][..], &[0u8; 8][..]] {
            let err = QueryVector::new(&[1.0, 0.0, 0.0])
                .score(bytes, id)
                .unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Serialization);
            assert!(err.message().contains(&id.to_string()), "{err}");
        }
        assert!(decode_vector(&[1, 2, 3, 4, 5], id).is_err());
    }
}
