//! The checks and encoding every backend applies to a batch before it writes it.

use std::collections::HashMap;

use crate::error::{Error, ErrorKind, Result};
use crate::message::ChatMessage;
use crate::tokens::TokenCounter;

use crate::limits::too_deep;
pub use crate::limits::{
    MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, MAX_JSON_DEPTH, MAX_MESSAGE_BYTES, check_message_depth,
    json_depth, over_limits,
};

/// What a message id repeated inside one batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Repeats {
    /// The first occurrence is stored and the later ones map to it: the contract of
    /// [`HistoryStore::append`](crate::HistoryStore::append).
    #[default]
    Collapse,
    /// Every occurrence is its own message: encoded, checked and stored again. For a foreign
    /// layout whose own writer stores repeats (Agent Framework's Redis list).
    Keep,
}

/// One message of a batch to store, encoded and counted once.
#[derive(Debug, Clone)]
pub struct PreparedMessage<'a> {
    /// The message.
    pub message: &'a ChatMessage,
    /// The text the store writes for it: its versioned JSON form (docs/format.md), or what the
    /// encoder of [`PreparedBatch::with_encoder`] returned.
    pub json: String,
    /// Its token count (0 when the batch was prepared without a counter).
    pub tokens: u32,
}

/// A batch ready to write: the messages to store (the first occurrence of each id, in order,
/// or every message with [`Repeats::Keep`]) and, for every given message, the index of its
/// message to store.
#[derive(Debug, Clone)]
pub struct PreparedBatch<'a> {
    /// The messages to store, in the order given.
    pub unique: Vec<PreparedMessage<'a>>,
    /// For each given message, its index in `unique`.
    pub positions: Vec<usize>,
}

impl<'a> PreparedBatch<'a> {
    /// Validates, encodes (in the versioned JSON form) and counts `messages`, collapsing
    /// repeated ids.
    ///
    /// # Errors
    /// As [`with_encoder`](Self::with_encoder).
    pub fn new(counter: &dyn TokenCounter, messages: &'a [ChatMessage]) -> Result<Self> {
        Self::with_encoder(
            messages,
            Some(counter),
            Repeats::Collapse,
            ChatMessage::to_json,
        )
    }

    /// Validates, encodes and counts `messages` for a layout that stores its own form:
    /// `encode` returns the text stored for one message and is called once per message to
    /// store, in order (so it may record a by-product per message, such as a key). The limits
    /// apply to what it returns. Without a `counter` every count is 0, for a layout that
    /// stores none.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] for a batch over [`MAX_BATCH_MESSAGES`] or
    /// [`MAX_BATCH_BYTES`], a message over [`MAX_MESSAGE_BYTES`], or a message nested deeper
    /// than [`MAX_JSON_DEPTH`] (in its values or in the encoded text); `encode`'s error (for
    /// [`new`](Self::new), [`ErrorKind::Serialization`]) if a message cannot be encoded.
    pub fn with_encoder(
        messages: &'a [ChatMessage],
        counter: Option<&dyn TokenCounter>,
        repeats: Repeats,
        mut encode: impl FnMut(&ChatMessage) -> Result<String>,
    ) -> Result<Self> {
        if messages.len() > MAX_BATCH_MESSAGES {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "a batch of {} messages is over the limit of {MAX_BATCH_MESSAGES}",
                    messages.len()
                ),
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(messages.len());
        let mut batch_bytes = 0usize;
        let mut unique = Vec::with_capacity(messages.len());
        let mut positions = Vec::with_capacity(messages.len());
        for message in messages {
            if repeats == Repeats::Collapse {
                if let Some(&at) = seen.get(message.id.as_str()) {
                    positions.push(at);
                    continue;
                }
                seen.insert(message.id.as_str(), unique.len());
            }
            // Checked before encoding too: a serializer recurses once per level.
            check_message_depth(message)?;
            let json = encode(message)?;
            if json_depth(&json) > MAX_JSON_DEPTH {
                return Err(too_deep(message));
            }
            if json.len() > MAX_MESSAGE_BYTES {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "message {} is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
                        message.id,
                        json.len()
                    ),
                ));
            }
            batch_bytes = batch_bytes.saturating_add(json.len());
            if batch_bytes > MAX_BATCH_BYTES {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!("the batch is over {MAX_BATCH_BYTES} bytes; append it in parts"),
                ));
            }
            positions.push(unique.len());
            unique.push(PreparedMessage {
                message,
                json,
                tokens: 0,
            });
        }
        // Counted once every limit is checked: a refused batch costs no counting.
        if let Some(counter) = counter {
            for prepared in &mut unique {
                prepared.tokens = counter.count_message(prepared.message);
            }
        }
        Ok(Self { unique, positions })
    }

    /// Maps the sequence numbers of the distinct messages to one per given message.
    pub fn seqs_for_input(&self, unique_seqs: &[u64]) -> Vec<u64> {
        self.positions
            .iter()
            .map(|&i| unique_seqs.get(i).copied().unwrap_or_default())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MessageId;
    use crate::tokens::FnTokenCounter;

    fn message(id: &str, text: &str) -> ChatMessage {
        ChatMessage::user(text).with_id(MessageId::new(id).unwrap())
    }

    fn words() -> FnTokenCounter {
        FnTokenCounter::new(|text| u32::try_from(text.split_whitespace().count()).unwrap())
    }

    #[test]
    fn new_collapses_repeats_and_stores_the_versioned_json() {
        let messages = [
            message("a", "one two"),
            message("b", "three"),
            message("a", "x"),
        ];
        let batch = PreparedBatch::new(&words(), &messages).unwrap();
        assert_eq!(batch.unique.len(), 2);
        assert_eq!(batch.positions, [0, 1, 0]);
        assert_eq!(batch.unique[0].json, messages[0].to_json().unwrap());
        assert_eq!(batch.seqs_for_input(&[7, 8]), [7, 8, 7]);
        assert!(batch.unique[0].tokens > 0);
    }

    #[test]
    fn an_encoder_gives_the_stored_text_once_per_message_to_store() {
        let messages = [
            message("a", "one"),
            message("b", "two"),
            message("a", "one"),
        ];
        let mut calls = Vec::new();
        let batch = PreparedBatch::with_encoder(&messages, None, Repeats::Keep, |m| {
            calls.push(m.id.to_string());
            Ok(format!("<{}>", m.id))
        })
        .unwrap();
        assert_eq!(calls, ["a", "b", "a"]);
        assert_eq!(batch.positions, [0, 1, 2]);
        let stored: Vec<&str> = batch.unique.iter().map(|m| m.json.as_str()).collect();
        assert_eq!(stored, ["<a>", "<b>", "<a>"]);
        assert!(batch.unique.iter().all(|m| m.tokens == 0));

        let collapsed =
            PreparedBatch::with_encoder(&messages, Some(&words()), Repeats::Collapse, |m| {
                Ok(m.id.to_string())
            })
            .unwrap();
        assert_eq!(collapsed.positions, [0, 1, 0]);
        assert_eq!(
            collapsed.unique[1].tokens,
            words().count_message(&messages[1])
        );
    }

    #[test]
    fn the_limits_apply_to_the_encoded_text() {
        let messages = [message("a", "small")];
        let err = PreparedBatch::with_encoder(&messages, None, Repeats::Keep, |_| {
            Ok("x".repeat(MAX_MESSAGE_BYTES + 1))
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);

        // Repeats kept count towards the batch's bytes each time.
        let big = message("a", "small");
        let messages = vec![big; MAX_BATCH_BYTES / MAX_MESSAGE_BYTES + 1];
        let err = PreparedBatch::with_encoder(&messages, None, Repeats::Keep, |_| {
            Ok("x".repeat(MAX_MESSAGE_BYTES))
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        let collapsed = PreparedBatch::with_encoder(&messages, None, Repeats::Collapse, |_| {
            Ok("x".repeat(MAX_MESSAGE_BYTES))
        })
        .unwrap();
        assert_eq!(collapsed.unique.len(), 1);
    }

    /// A metadata value nested `levels` deep (arrays; 1 is `[]`).
    fn nested(levels: usize) -> serde_json::Value {
        let mut value = serde_json::Value::Array(Vec::new());
        for _ in 1..levels {
            value = serde_json::Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn json_depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a":[1,{"b":"[[[{{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[[[", []]"#), 2);
    }

    #[test]
    fn a_message_at_the_depth_limit_is_stored_and_reads_back_one_past_is_refused() {
        // message → metadata → value: the value may nest MAX_JSON_DEPTH - 2 levels.
        let at = message("a", "x").with_metadata("deep", nested(MAX_JSON_DEPTH - 2));
        let batch = PreparedBatch::new(&words(), std::slice::from_ref(&at)).unwrap();
        assert_eq!(json_depth(&batch.unique[0].json), MAX_JSON_DEPTH);
        assert_eq!(ChatMessage::from_json(&batch.unique[0].json).unwrap(), at);

        let past = message("b", "x").with_metadata("deep", nested(MAX_JSON_DEPTH - 1));
        let err = PreparedBatch::new(&words(), &[past]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert!(err.message().contains("deeper than"), "{err}");

        // What used to be stored and then made every read fail (serde_json stops at 128).
        let unreadable = message("c", "x").with_metadata("deep", nested(125));
        let err = PreparedBatch::new(&words(), &[unreadable]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);

        // Data parts are checked too, and a very deep value is refused without recursion.
        let data = ChatMessage::new(
            crate::Role::User,
            vec![crate::Part::Data {
                media_type: "x".into(),
                data: nested(100_000),
            }],
        );
        let err = PreparedBatch::new(&words(), std::slice::from_ref(&data)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        // A deep value's own drop recurses; leak it so the test's stack is not the limit.
        std::mem::forget(data);
    }

    #[test]
    fn the_depth_limit_applies_to_an_encoders_text() {
        let messages = [message("a", "x")];
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH + 1),
            "]".repeat(MAX_JSON_DEPTH + 1)
        );
        let err = PreparedBatch::with_encoder(&messages, None, Repeats::Keep, |_| Ok(deep.clone()))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    }

    #[test]
    fn an_encoder_error_is_returned() {
        let messages = [message("a", "one")];
        let err = PreparedBatch::with_encoder(&messages, None, Repeats::Keep, |_| {
            Err(Error::serialization("cannot encode"))
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
    }
}
