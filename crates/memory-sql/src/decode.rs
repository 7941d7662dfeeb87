//! Message rows decoded: the columns reads select (`seq, tokens, archived, body`) into
//! [`StoredMessage`]s, leaving out (with a warning) a row that does not decode.

use memory_core::history::skip_undecodable;
use memory_core::{ChatMessage, Error, Result, StoredMessage};

use crate::driver::{Col, Row};

/// Columns of a message row as reads select them.
pub(crate) const MESSAGE_COLS: &[Col] = &[Col::Int, Col::Int, Col::Flag, Col::Text];

/// One message row (`seq, tokens, archived, body`) decoded.
fn decode_message(mut row: Row) -> Result<StoredMessage> {
    let seq = row.uint(0)?;
    let tokens = u32::try_from(row.int(1)?).map_err(|_| {
        Error::serialization(format!("message {seq} has an impossible token count"))
    })?;
    let archived = row.int(2)? != 0;
    let body = row.take_text(3)?;
    let message = ChatMessage::from_json(&body).map_err(|err| {
        Error::serialization(format!(
            "stored message {seq} cannot be decoded: {}",
            err.message()
        ))
        .with_source(err)
    })?;
    Ok(StoredMessage {
        seq,
        tokens,
        archived,
        message: message.into(),
    })
}

/// Decodes the rows of a read; a row that cannot be decoded is left out, with a warning naming
/// the thread and its sequence number (the `HistoryStore` contract), so one bad row never makes
/// the thread unreadable.
pub(crate) fn decode_messages(key: &str, rows: Vec<Row>) -> Vec<StoredMessage> {
    rows.into_iter()
        .filter_map(|row| {
            let seq = row.uint(0).unwrap_or_default();
            decode_message(row)
                .inspect_err(|err| skip_undecodable(&key, seq, err))
                .ok()
        })
        .collect()
}
