//! Documents as rows and rows as results: the batch's rows (the last of an id winning), the
//! chunks a batch statement takes, and the decoding of ids, payloads, scores and counts.

use std::collections::{HashMap, HashSet};

use memory_core::lexical::{ScoredDocument, TextDocument, query_words};
use memory_core::{Error, Result};
use uuid::Uuid;

use crate::dialect::{MAX_PARAMS, MAX_STATEMENT_BYTES};
use crate::driver::Row;

/// A document as its row stores it.
pub(super) struct Prepared<'a> {
    pub(super) id: String,
    pub(super) text: &'a str,
    /// MySQL: the text's words, as the `FULLTEXT` index sees them.
    pub(super) words: String,
    pub(super) payload: String,
}

impl Prepared<'_> {
    pub(super) fn bytes(&self) -> usize {
        self.text
            .len()
            .saturating_add(self.words.len())
            .saturating_add(self.payload.len())
    }
}

/// The batch's rows, the last of each id winning (one statement cannot write a row twice on
/// PostgreSQL), in the batch's order.
pub(super) fn prepare(documents: &[TextDocument], words: bool) -> Result<Vec<Prepared<'_>>> {
    let mut last = HashMap::with_capacity(documents.len());
    for (at, d) in documents.iter().enumerate() {
        last.insert(d.id, at);
    }
    let mut rows = Vec::with_capacity(last.len());
    for (at, d) in documents.iter().enumerate() {
        if last.get(&d.id) != Some(&at) {
            continue;
        }
        let payload = serde_json::to_string(&d.payload).map_err(|err| {
            Error::serialization(format!(
                "the payload of document {} cannot be written",
                d.id
            ))
            .with_source(err)
        })?;
        rows.push(Prepared {
            id: d.id.hyphenated().to_string(),
            text: &d.text,
            words: if words {
                query_words(&d.text).join(" ")
            } else {
                String::new()
            },
            payload,
        });
    }
    Ok(rows)
}

/// How many of `rows` go in the next statement: a power of two (few statement shapes to
/// cache), within the parameter limit and, past the first row, the statement byte budget.
pub(super) fn chunk_len(rows: &[Prepared<'_>], params_per_row: usize) -> usize {
    let by_params = MAX_PARAMS.checked_div(params_per_row).unwrap_or(1).max(1);
    let mut n = 0usize;
    let mut bytes = 0usize;
    for row in rows.iter().take(by_params) {
        bytes = bytes.saturating_add(row.bytes());
        if n > 0 && bytes > MAX_STATEMENT_BYTES {
            break;
        }
        n = n.saturating_add(1);
    }
    power_of_two_at_most(n.max(1))
}

pub(super) fn power_of_two_at_most(n: usize) -> usize {
    match n.checked_ilog2() {
        Some(log) => 1usize.checked_shl(log).unwrap_or(1),
        None => 1,
    }
}

/// The words in their first order, each once.
pub(super) fn distinct(words: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::with_capacity(words.len());
    words
        .into_iter()
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// The ids in their first order, each once, with their stored form.
pub(super) fn distinct_ids(ids: &[Uuid]) -> Vec<(Uuid, String)> {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter()
        .filter(|id| seen.insert(**id))
        .map(|id| (*id, id.hyphenated().to_string()))
        .collect()
}

pub(super) fn parse_id(text: &str) -> Result<Uuid> {
    Uuid::parse_str(text).map_err(|err| {
        Error::serialization(format!("a stored text document id {text:?} is not a UUID"))
            .with_source(err)
    })
}

pub(super) fn parse_payload(
    text: &str,
    id: Uuid,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    serde_json::from_str(text).map_err(|err| {
        Error::serialization(format!(
            "the stored payload of text document {id} is not a JSON object"
        ))
        .with_source(err)
    })
}

/// A search row (id, payload, score) as a result. The score is the engine's, as `f32`, and at
/// least the smallest positive `f32`: every result has a positive score, even when the engine
/// gives a match none (InnoDB scores a word held by every row of the table near 0).
pub(super) fn scored(mut row: Row) -> Result<ScoredDocument> {
    let id = parse_id(&row.take_text(0)?)?;
    let payload = parse_payload(&row.take_text(1)?, id)?;
    #[allow(clippy::cast_possible_truncation)]
    let score = row.float(2)? as f32;
    let score = if score.is_finite() && score > 0.0 {
        score
    } else if score == f32::INFINITY {
        f32::MAX
    } else {
        f32::MIN_POSITIVE
    };
    Ok(ScoredDocument { id, score, payload })
}

pub(super) fn first_count(rows: &[Row]) -> Result<u64> {
    match rows.first() {
        Some(row) => row.uint(0),
        None => Err(Error::serialization(
            "the database answered a count with no row",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_powers_of_two_within_budgets() {
        assert_eq!(power_of_two_at_most(1), 1);
        assert_eq!(power_of_two_at_most(7), 4);
        assert_eq!(power_of_two_at_most(8), 8);
        let docs: Vec<TextDocument> = (0..5000)
            .map(|i| TextDocument {
                id: Uuid::from_u128(i),
                text: "x".into(),
                payload: serde_json::Map::new(),
            })
            .collect();
        let rows = prepare(&docs, false).unwrap();
        assert_eq!(chunk_len(&rows, 9), 2048);
        assert_eq!(chunk_len(&rows[..3], 9), 2);
        let big = TextDocument {
            id: Uuid::from_u128(1),
            text: "y".repeat(3 << 20),
            payload: serde_json::Map::new(),
        };
        let two = [
            big.clone(),
            TextDocument {
                id: Uuid::from_u128(2),
                ..big
            },
        ];
        let rows = prepare(&two, false).unwrap();
        assert_eq!(chunk_len(&rows, 9), 1);
    }

    #[test]
    fn the_last_of_an_id_wins() {
        let doc = |id: u128, text: &str| TextDocument {
            id: Uuid::from_u128(id),
            text: text.into(),
            payload: serde_json::Map::new(),
        };
        let docs = [doc(1, "a"), doc(2, "b"), doc(1, "c")];
        let rows = prepare(&docs, true).unwrap();
        let got: Vec<(&str, &str)> = rows.iter().map(|r| (r.id.as_str(), r.text)).collect();
        assert_eq!(
            got,
            [
                ("00000000-0000-0000-0000-000000000002", "b"),
                ("00000000-0000-0000-0000-000000000001", "c"),
            ]
        );
        assert_eq!(rows[1].words, "c");
    }
}
