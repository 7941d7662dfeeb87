//! Vectors as their rows store them: `f32` values, little-endian, 4 bytes a dimension (a
//! search scores the bytes with [`QueryScorer`](memory_core::vector::quantized::QueryScorer)).

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
    fn corrupt_bytes_are_errors_naming_the_point() {
        let id = Uuid::from_u128(7);
        for bytes in [&[][..], &[0u8, 0, 0][..], &[1, 2, 3, 4, 5][..]] {
            let err = decode_vector(bytes, id).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Serialization);
            assert!(err.message().contains(&id.to_string()), "{err}");
        }
    }
}
