//! How points are stored: a vector as its f32 values in little-endian bytes, a payload as its
//! JSON object, an id as its hyphenated UUID; and reading them back from replies.

use memory_core::{Error, Result};
use redis::Value;
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use crate::error::bad_reply;

/// The bytes of one f32.
const F32_BYTES: usize = 4;

/// A vector as stored: each value's 4 little-endian bytes.
pub(super) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes stored vector bytes into `out` (cleared first).
///
/// # Errors
/// [`Serialization`](memory_core::ErrorKind::Serialization) when the length is not a whole
/// number of f32s, or not `dimensions` of them when that is given.
pub(super) fn decode_vector_into(
    what: &str,
    id: &Uuid,
    bytes: &[u8],
    dimensions: Option<usize>,
    out: &mut Vec<f32>,
) -> Result<()> {
    let expected = dimensions.map(|d| d.saturating_mul(F32_BYTES));
    let whole = bytes.chunks_exact(F32_BYTES).remainder().is_empty();
    if !whole || expected.is_some_and(|n| n != bytes.len()) {
        return Err(corrupt(
            what,
            format!(
                "the vector of point {id} has {} bytes{}",
                bytes.len(),
                dimensions.map_or_else(String::new, |d| format!(
                    "; the store holds vectors of {d} dimensions"
                ))
            ),
        ));
    }
    out.clear();
    out.extend(bytes.chunks_exact(F32_BYTES).map(|b| {
        let mut four = [0u8; F32_BYTES];
        four.copy_from_slice(b);
        f32::from_le_bytes(four)
    }));
    Ok(())
}

/// A payload as stored: its JSON text.
pub(super) fn payload_json(what: &str, payload: &Map<String, Json>) -> Result<String> {
    serde_json::to_string(payload).map_err(|e| {
        Error::serialization(format!("{what}: a payload does not serialize: {e}")).with_source(e)
    })
}

/// Decodes a stored payload.
///
/// # Errors
/// [`Serialization`](memory_core::ErrorKind::Serialization) when it is not a JSON object.
pub(super) fn decode_payload(what: &str, id: &Uuid, bytes: &[u8]) -> Result<Map<String, Json>> {
    serde_json::from_slice(bytes).map_err(|e| {
        corrupt(
            what,
            format!("the payload of point {id} is not a JSON object: {e}"),
        )
        .with_source(e)
    })
}

/// Decodes a stored point id (a hash field).
pub(super) fn decode_id(what: &str, field: &Value) -> Result<Uuid> {
    let bytes = bulk(field).ok_or_else(|| bad_reply(what, "a point id is not a string"))?;
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| Uuid::parse_str(text).ok())
        .ok_or_else(|| corrupt(what, "a stored point id is not a UUID"))
}

/// The bytes of a bulk string reply; `None` for anything else (`Nil` among them).
pub(super) fn bulk(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        _ => None,
    }
}

/// The field/value pairs of an `HGETALL` reply (a flat array in RESP2, a map in RESP3).
pub(super) fn hash_pairs(what: &str, reply: Value) -> Result<Vec<(Value, Value)>> {
    match reply {
        Value::Map(pairs) => Ok(pairs),
        Value::Array(items) => {
            let mut pairs = Vec::with_capacity(items.len().div_ceil(2));
            let mut items = items.into_iter();
            while let Some(field) = items.next() {
                let value = items
                    .next()
                    .ok_or_else(|| bad_reply(what, "HGETALL returned an odd number of items"))?;
                pairs.push((field, value));
            }
            Ok(pairs)
        }
        Value::Nil => Ok(Vec::new()),
        _ => Err(bad_reply(what, "HGETALL did not return a hash")),
    }
}

/// The items of an array reply.
pub(super) fn array(what: &str, reply: Value, command: &str) -> Result<Vec<Value>> {
    match reply {
        Value::Array(items) => Ok(items),
        _ => Err(bad_reply(
            what,
            format!("{command} did not return an array"),
        )),
    }
}

/// Stored data that does not have the shape the store writes.
fn corrupt(what: &str, detail: impl std::fmt::Display) -> Error {
    Error::serialization(format!("{what}: the stored data is corrupt: {detail}"))
        .with_backend(crate::error::BACKEND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_their_bytes() {
        let id = Uuid::nil();
        let vector = [0.1f32, -2.5, 1e-30, f32::MAX, 0.0];
        let bytes = vector_bytes(&vector);
        assert_eq!(bytes.len(), 20);
        assert_eq!(&bytes[..4], &0.1f32.to_le_bytes());
        let mut out = vec![9.0];
        decode_vector_into("read", &id, &bytes, Some(5), &mut out).unwrap();
        assert_eq!(out, vector);
        decode_vector_into("read", &id, &bytes, None, &mut out).unwrap();
        assert_eq!(out, vector);
    }

    #[test]
    fn bad_lengths_are_corrupt_data() {
        let id = Uuid::nil();
        let mut out = Vec::new();
        for (bytes, dims) in [(vec![0u8; 7], None), (vec![0u8; 8], Some(3))] {
            let err = decode_vector_into("read", &id, &bytes, dims, &mut out).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Serialization);
        }
        let err = decode_payload("read", &id, b"[1]").unwrap_err();
        assert_eq!(err.kind(), memory_core::ErrorKind::Serialization);
    }

    #[test]
    fn hashes_read_in_both_protocols() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let flat = Value::Array(vec![b("a"), b("1"), b("b"), b("2")]);
        let map = Value::Map(vec![(b("a"), b("1")), (b("b"), b("2"))]);
        assert_eq!(
            hash_pairs("x", flat).unwrap(),
            hash_pairs("x", map).unwrap()
        );
        assert!(hash_pairs("x", Value::Array(vec![b("a")])).is_err());
    }
}
