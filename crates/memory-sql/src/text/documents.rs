//! Documents as rows and rows as results: the batch's rows (the last of an id winning), the
//! query's distinct words, and the decoding of scores.

use std::collections::HashSet;

use memory_core::Result;
use memory_core::lexical::{ScoredDocument, TextDocument, query_words};

use crate::driver::Row;
use crate::scoped_rows::{ScopedRows, last_of_each_id, payload_text};

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

/// The batch's rows, the last of each id winning, in the batch's order.
pub(super) fn prepare(documents: &[TextDocument], words: bool) -> Result<Vec<Prepared<'_>>> {
    last_of_each_id(documents.iter().map(|d| d.id))
        .into_iter()
        .filter_map(|at| documents.get(at))
        .map(|d| {
            Ok(Prepared {
                id: d.id.hyphenated().to_string(),
                text: &d.text,
                words: if words {
                    query_words(&d.text).join(" ")
                } else {
                    String::new()
                },
                payload: payload_text(&d.payload, "text document", d.id)?,
            })
        })
        .collect()
}

/// The words in their first order, each once.
pub(super) fn distinct(words: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::with_capacity(words.len());
    words
        .into_iter()
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// A search row (id, payload, score) as a result. The score is the engine's, as `f32`, and at
/// least the smallest positive `f32`: every result has a positive score, even when the engine
/// gives a match none (InnoDB scores a word held by every row of the table near 0).
pub(super) fn scored(rows: &ScopedRows, mut row: Row) -> Result<ScoredDocument> {
    let id = rows.parse_id(&row.take_text(0)?)?;
    let payload = rows.parse_payload(&row.take_text(1)?, id)?;
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

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

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
