//! What the two peers' conversions ([`agent_framework`](crate::agent_framework) and
//! [`llamaindex`](crate::llamaindex)) do alike: read a message's role, keep what the peer wrote
//! and we have no field for, and write and read back our record (under [`AGENT_MEMORY_KEY`]
//! of the peer's free-form dict).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{
    AGENT_MEMORY_KEY, UNKNOWN_TIME, closest_role, format_time, parse_time, parts_to_json,
    without_key,
};
use memory_core::id::MessageId;
use memory_core::message::{ChatMessage, Part, Role};

/// The setters of the two fields both peers' options have, `record_created_at` and
/// `record_metadata`: `with_created_at` and `with_metadata`.
macro_rules! record_setters {
    () => {
        /// Sets whether `created_at` is recorded.
        pub fn with_created_at(mut self, record: bool) -> Self {
            self.record_created_at = record;
            self
        }

        /// Sets whether our metadata is recorded.
        pub fn with_metadata(mut self, record: bool) -> Self {
            self.record_metadata = record;
            self
        }
    };
}
pub(crate) use record_setters;

/// What [`write_record`] records besides what a peer records of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recorded {
    /// Our `created_at` (never the epoch, which means unknown).
    pub created_at: bool,
    /// Our metadata, without the peer's own key.
    pub metadata: bool,
    /// Our parts (when the peer's form does not rebuild them faithfully).
    pub parts: bool,
}

/// The role named by `map`'s string `role`, and that name; the name is kept under `role` of
/// `kept` when it is not one of ours. `None` when there is no string `role`.
pub(crate) fn read_role<'a>(
    map: &'a Map<String, Value>,
    kept: &mut Map<String, Value>,
) -> Option<(&'a str, Role)> {
    let role_name = map.get("role").and_then(Value::as_str)?;
    let role = closest_role(role_name);
    if role.as_str() != role_name {
        kept.insert("role".to_owned(), Value::String(role_name.to_owned()));
    }
    Some((role_name, role))
}

/// Takes our record out of a peer's free-form `dict` (empty when there is none).
pub(crate) fn take_record(dict: &mut Map<String, Value>) -> Map<String, Value> {
    match dict.get(AGENT_MEMORY_KEY) {
        Some(Value::Object(record)) => {
            let record = record.clone();
            dict.shift_remove(AGENT_MEMORY_KEY);
            record
        }
        _ => Map::new(),
    }
}

/// Keeps under `fields` of `kept` the top-level keys of `map` that are not `known`.
pub(crate) fn keep_unknown_fields(
    kept: &mut Map<String, Value>,
    map: &Map<String, Value>,
    known: &[&str],
) {
    let fields: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !fields.is_empty() {
        kept.insert("fields".to_owned(), Value::Object(fields));
    }
}

/// The message read from a peer: its `created_at` and metadata from our `record`, with what
/// the peer wrote and we have no field for (`kept`) under `key` of the metadata.
pub(crate) fn recorded_message(
    head: (MessageId, Role, Option<String>),
    parts: Vec<Part>,
    record: &Map<String, Value>,
    kept: Map<String, Value>,
    key: &str,
) -> ChatMessage {
    let (id, role, author_name) = head;
    let created_at: DateTime<Utc> = record
        .get("created_at")
        .and_then(parse_time)
        .unwrap_or(UNKNOWN_TIME);
    let mut metadata = match record.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    if !kept.is_empty() {
        metadata.insert(key.to_owned(), Value::Object(kept));
    }
    ChatMessage {
        id,
        role,
        author_name,
        parts,
        created_at,
        metadata,
    }
}

/// Keeps `value`, the whole message as read, as `original` under `key` of `message`'s
/// metadata.
pub(crate) fn keep_original(message: &mut ChatMessage, key: &str, value: &Value) {
    let entry = message
        .metadata
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    match entry {
        Value::Object(map) => {
            map.insert("original".to_owned(), value.clone());
        }
        other => *other = json!({"original": value}),
    }
}

/// Adds to `record` what `recorded` says of `message` (its metadata without `key`), and puts
/// the record under [`AGENT_MEMORY_KEY`] of the peer's free-form `dict` unless it is empty.
pub(crate) fn write_record(
    mut record: Map<String, Value>,
    message: &ChatMessage,
    recorded: Recorded,
    key: &str,
    dict: &mut Map<String, Value>,
) {
    if recorded.created_at && message.created_at != UNKNOWN_TIME {
        record.insert(
            "created_at".to_owned(),
            Value::String(format_time(&message.created_at)),
        );
    }
    if recorded.metadata {
        let metadata = without_key(&message.metadata, key);
        if !metadata.is_empty() {
            record.insert("metadata".to_owned(), Value::Object(metadata));
        }
    }
    if recorded.parts {
        record.insert("parts".to_owned(), parts_to_json(&message.parts));
    }
    if !record.is_empty() {
        dict.insert(AGENT_MEMORY_KEY.to_owned(), Value::Object(record));
    }
}

/// The tool messages both peers' round-trip tests write and read back: a call with JSON
/// arguments, a call whose arguments are not JSON, and a result.
#[cfg(test)]
pub(crate) fn tool_messages() -> [ChatMessage; 3] {
    [
        ChatMessage::tool_call("call_1", "get_calendar", r#"{"day":"2024-05-17"}"#),
        ChatMessage::tool_call("call_2", "f", "not json"),
        ChatMessage::tool_result("call_1", "09:00 stand-up"),
    ]
}
