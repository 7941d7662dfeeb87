//! Rows into messages: a row's id (recorded, or the row's own), its creation time and its
//! token count (counted once per row and data).

use std::hash::{Hash, Hasher};
use std::time::{Duration, UNIX_EPOCH};

use memory_core::history::skip_undecodable;
use memory_core::{ChatMessage, Error, MessageId, Result, StoredMessage};
use memory_interop::llamaindex::{METADATA_KEY, from_llamaindex};
use memory_interop::{AGENT_MEMORY_KEY, UNKNOWN_TIME};
use serde_json::Value;

use super::store::LlamaIndexHistoryStore;
use crate::driver::Row;

/// The `status` of a row in the active window.
const ACTIVE: &str = "active";
/// Rows whose token counts are kept in memory at most (then the cache starts again).
const TOKEN_CACHE_ROWS: usize = 100_000;

impl LlamaIndexHistoryStore {
    /// Decodes a row `(seq, row id, status, data, timestamp)` and counts its tokens.
    pub(super) fn decode(&self, mut row: Row) -> Result<StoredMessage> {
        let seq = row.uint(0)?;
        let row_id = row.int(1)?;
        let status = row.take_text(2)?;
        let data = row.take_text(3)?;
        let corrupt = |what: String| {
            Error::serialization(format!(
                "row {row_id} of LlamaIndex table {}: {what}",
                self.inner.table
            ))
        };
        let value: Value =
            serde_json::from_str(&data).map_err(|e| corrupt(format!("data is not JSON: {e}")))?;
        let mut message =
            from_llamaindex(&value).map_err(|e| corrupt(e.message().to_owned()).with_source(e))?;
        if recorded_id(&value).is_none()
            && let Some(id) = self.row_message_id(row_id)
        {
            message.id = id;
        } else {
            original_without_id_record(&mut message);
        }
        if message.created_at == UNKNOWN_TIME
            && let Ok(ns) = u64::try_from(row.int(4)?)
        {
            message.created_at = UNIX_EPOCH
                .checked_add(Duration::from_nanos(ns))
                .unwrap_or(UNIX_EPOCH)
                .into();
        }
        let tokens = self.tokens(row_id, &data, &message);
        Ok(StoredMessage {
            seq,
            tokens,
            archived: status != ACTIVE,
            message: message.into(),
        })
    }

    /// [`decode`](Self::decode), or `None` with a warning naming the session and the row's
    /// position for a row that cannot be decoded: the read leaves it out (the `HistoryStore`
    /// contract), so one bad row never makes the session unreadable.
    pub(super) fn decode_or_skip(&self, key: &str, row: Row) -> Option<StoredMessage> {
        let seq = row.uint(0).unwrap_or_default();
        self.decode(row)
            .inspect_err(|err| skip_undecodable(&key, seq, err))
            .ok()
    }

    /// The token count of a row's message, counted once per row and data.
    fn tokens(&self, row_id: i64, data: &str, message: &ChatMessage) -> u32 {
        let mut hasher = std::hash::DefaultHasher::new();
        data.hash(&mut hasher);
        let key = (row_id, hasher.finish());
        if let Some(&n) = self
            .inner
            .tokens
            .lock()
            .ok()
            .and_then(|c| c.get(&key).copied())
            .as_ref()
        {
            return n;
        }
        let n = self.inner.counter.count_message(message);
        if let Ok(mut cache) = self.inner.tokens.lock() {
            if cache.len() >= TOKEN_CACHE_ROWS {
                cache.clear();
            }
            cache.insert(key, n);
        }
        n
    }
}

/// The id recorded in a LlamaIndex message (`additional_kwargs.agent_memory.id`), if it is a
/// valid message id (what [`from_llamaindex`] takes as the id).
pub(super) fn recorded_id(value: &Value) -> Option<&str> {
    value
        .get("additional_kwargs")?
        .get(AGENT_MEMORY_KEY)?
        .get("id")?
        .as_str()
        .filter(|id| MessageId::new(*id).is_ok())
}

/// Takes out of the original a message keeps (blocks we have no part for) the record of our
/// id and time, when the record holds nothing else and the id is the message's: a row Python
/// wrote and its copy here, which records the row's id and time, then keep one original, and
/// the store writes the record again wherever it copies the message.
fn original_without_id_record(message: &mut ChatMessage) {
    let id = message.id.as_str();
    let Some(Value::Object(li)) = message.metadata.get_mut(METADATA_KEY) else {
        return;
    };
    let Some(Value::Object(kwargs)) = li
        .get_mut("original")
        .and_then(|o| o.get_mut("additional_kwargs"))
    else {
        return;
    };
    let Some(Value::Object(record)) = kwargs.get(AGENT_MEMORY_KEY) else {
        return;
    };
    let only_id_and_time = record.keys().all(|k| k == "id" || k == "created_at");
    if only_id_and_time && record.get("id").and_then(Value::as_str) == Some(id) {
        kwargs.shift_remove(AGENT_MEMORY_KEY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_ids_are_read_like_from_llamaindex() {
        let v: Value = serde_json::json!({"additional_kwargs": {"agent_memory": {"id": "m-1"}}});
        assert_eq!(recorded_id(&v), Some("m-1"));
        let bad: Value = serde_json::json!({"additional_kwargs": {"agent_memory": {"id": "a b"}}});
        assert_eq!(recorded_id(&bad), None);
        assert_eq!(
            recorded_id(&serde_json::json!({"additional_kwargs": {}})),
            None
        );
    }
}
