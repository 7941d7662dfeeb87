#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

pub mod agent_framework;
pub mod llamaindex;
pub mod python_json;
mod record;
pub mod repeated;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use memory_core::id::MessageId;
use memory_core::message::{Media, Part, Role};

/// The key under which we record, in a peer's free-form dict (Agent Framework's
/// `additional_properties`, LlamaIndex's `additional_kwargs`), what the peer's shape has no place
/// for: `created_at`, `metadata`, `parts` and, for LlamaIndex, `id` and `author_name`.
pub const AGENT_MEMORY_KEY: &str = "agent_memory";

/// The creation time given to a message read from a peer that recorded none: the Unix epoch.
pub const UNKNOWN_TIME: DateTime<Utc> = DateTime::<Utc>::UNIX_EPOCH;

/// A deterministic UUIDv5 of `name` in a namespace of our own for `peer`, hyphenated.
pub(crate) fn derived_uuid(peer: &str, name: &str) -> String {
    let namespace = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("https://github.com/agent-memory/agent-memory/interop/{peer}").as_bytes(),
    );
    uuid::Uuid::new_v5(&namespace, name.as_bytes()).to_string()
}

/// A deterministic message id: UUIDv5 of `name` in the namespace of `peer`.
pub(crate) fn derived_id(peer: &str, name: &str) -> MessageId {
    // A hyphenated UUID is always a valid id; the fallback is never taken.
    MessageId::new(derived_uuid(peer, name)).unwrap_or_else(|_| MessageId::generate())
}

/// Our id for a peer id that is not a valid [`MessageId`].
pub(crate) fn id_for_foreign_id(peer: &str, foreign: &str) -> MessageId {
    derived_id(peer, &format!("message_id\u{0}{foreign}"))
}

/// The closest of our roles to a peer's free-form role name.
///
/// Our five names map to themselves (also in other cases); `function` → tool; `model`,
/// `chatbot`, `ai`, `bot` → assistant; `human` → user; anything else → user, so that text from an
/// unknown party is never presented to a model as its own earlier output.
pub(crate) fn closest_role(name: &str) -> Role {
    match name.to_ascii_lowercase().as_str() {
        "system" => Role::System,
        "developer" => Role::Developer,
        "assistant" | "model" | "chatbot" | "ai" | "bot" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        _ => Role::User,
    }
}

/// RFC 3339 with as many fraction digits as needed, `Z` for UTC (as our message JSON writes).
pub(crate) fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

pub(crate) fn parse_time(value: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(value.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Our parts in their JSON form (docs/format.md).
pub(crate) fn parts_to_json(parts: &[Part]) -> Value {
    // Parts hold only strings and JSON values, so encoding cannot fail.
    serde_json::to_value(parts).unwrap_or(Value::Null)
}

pub(crate) fn parts_from_json(value: &Value) -> Option<Vec<Part>> {
    serde_json::from_value(value.clone()).ok()
}

/// The part kind for a MIME type: `image/…`, `audio/…`, `video/…`, anything else a document.
pub(crate) fn media_part(media_type: Option<&str>, media: Media) -> Part {
    let top = media_type
        .and_then(|t| t.split('/').next())
        .map(|t| t.trim().to_ascii_lowercase());
    match top.as_deref() {
        Some("image") => Part::Image(media),
        Some("audio") => Part::Audio(media),
        Some("video") => Part::Video(media),
        _ => Part::Document(media),
    }
}

/// A tool call's arguments as our string form: a string as it is, JSON as compact text, none as
/// the empty string.
pub(crate) fn arguments_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Our arguments string as the peers store it: the parsed object when it is a JSON object, the
/// string otherwise.
pub(crate) fn arguments_value(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::String(arguments.to_owned()),
    }
}

/// The object at `key` of a metadata map, if it is one.
pub(crate) fn object_at<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    map.get(key).and_then(Value::as_object)
}

/// `metadata` without `key`.
pub(crate) fn without_key(map: &Map<String, Value>, key: &str) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| k.as_str() != key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Removes `inner` from the object at `outer` of `metadata`, and the object if it becomes empty.
pub(crate) fn remove_nested(metadata: &mut Map<String, Value>, outer: &str, inner: &str) {
    if let Some(Value::Object(map)) = metadata.get_mut(outer) {
        map.shift_remove(inner);
        if map.is_empty() {
            metadata.shift_remove(outer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_valid() {
        let a = derived_id("agent-framework", "x");
        assert_eq!(a, derived_id("agent-framework", "x"));
        assert_ne!(a, derived_id("llamaindex", "x"));
        assert_ne!(a, id_for_foreign_id("agent-framework", "x"));
        assert_eq!(a.as_str().len(), 36);
    }

    #[test]
    fn roles_map_to_the_closest() {
        assert_eq!(closest_role("assistant"), Role::Assistant);
        assert_eq!(closest_role("Developer"), Role::Developer);
        assert_eq!(closest_role("function"), Role::Tool);
        assert_eq!(closest_role("model"), Role::Assistant);
        assert_eq!(closest_role("critic"), Role::User);
    }

    #[test]
    fn arguments_convert_both_ways() {
        assert_eq!(arguments_value(r#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(arguments_value("[1]"), Value::String("[1]".into()));
        assert_eq!(
            arguments_value("not json"),
            Value::String("not json".into())
        );
        assert_eq!(
            arguments_text(Some(&serde_json::json!({"a": 1}))),
            r#"{"a":1}"#
        );
        assert_eq!(arguments_text(None), "");
    }
}
