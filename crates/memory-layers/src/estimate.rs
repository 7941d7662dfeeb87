//! A cheap estimate of the memory a cached message holds.

use memory_core::{Media, Part, StoredMessage};
use serde_json::Value;

/// What every cached message is taken to cost besides its strings: the struct, its id and
/// time, the vectors' headers and the cache's own bookkeeping.
const MESSAGE_OVERHEAD: u64 = 256;
/// What every part and every JSON value is taken to cost besides its strings.
const ITEM_OVERHEAD: u64 = 32;

/// About how many bytes `message` holds in memory: the lengths of its strings (text, tool
/// arguments and results, media, data and metadata JSON) plus a fixed overhead per message, part
/// and JSON value. It walks the message once, without allocating, and is meant for a byte
/// budget, not for accounting.
pub(crate) fn estimated_bytes(message: &StoredMessage) -> u64 {
    let message = &message.message;
    let mut bytes = MESSAGE_OVERHEAD
        .saturating_add(len(message.author_name.as_deref().unwrap_or_default()))
        .saturating_add(map_bytes(&message.metadata));
    for part in &message.parts {
        bytes = bytes
            .saturating_add(ITEM_OVERHEAD)
            .saturating_add(part_bytes(part));
    }
    bytes
}

fn len(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX)
}

fn part_bytes(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Refusal { text } => len(text),
        Part::ToolCall {
            id,
            name,
            arguments,
        } => len(id)
            .saturating_add(len(name))
            .saturating_add(len(arguments)),
        Part::ToolResult { call_id, content } => len(call_id).saturating_add(len(content)),
        Part::Image(media) | Part::Audio(media) | Part::Video(media) | Part::Document(media) => {
            media_bytes(media)
        }
        Part::Data { media_type, data } => len(media_type).saturating_add(json_bytes(data)),
        // A part kind added later: its overhead only, until this estimate learns it.
        _ => 0,
    }
}

fn media_bytes(media: &Media) -> u64 {
    [
        &media.url,
        &media.data,
        &media.media_type,
        &media.file_id,
        &media.filename,
        &media.detail,
    ]
    .into_iter()
    .flatten()
    .fold(0, |sum, text| sum.saturating_add(len(text)))
}

fn map_bytes(map: &serde_json::Map<String, Value>) -> u64 {
    map.iter().fold(0, |sum, (key, value)| {
        sum.saturating_add(len(key))
            .saturating_add(json_bytes(value))
    })
}

/// The strings of a JSON value plus [`ITEM_OVERHEAD`] per value, walked with an explicit stack
/// (no recursion, whatever the nesting).
fn json_bytes(value: &Value) -> u64 {
    let mut bytes = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        bytes = bytes.saturating_add(ITEM_OVERHEAD);
        match value {
            Value::String(text) => bytes = bytes.saturating_add(len(text)),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    bytes = bytes.saturating_add(len(key));
                    stack.push(item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ChatMessage;

    fn stored(message: ChatMessage) -> StoredMessage {
        StoredMessage {
            seq: 1,
            tokens: 1,
            archived: false,
            message: message.into(),
        }
    }

    #[test]
    fn the_estimate_grows_with_the_text_and_the_data() {
        let short = estimated_bytes(&stored(ChatMessage::user("hi")));
        let long = estimated_bytes(&stored(ChatMessage::user("x".repeat(10_000))));
        assert!(short >= MESSAGE_OVERHEAD);
        // 10,000 bytes of text instead of 2.
        assert_eq!(long - short, 9_998, "{short} {long}");
        let mut with_metadata = ChatMessage::user("hi");
        with_metadata.metadata.insert(
            "nested".to_owned(),
            serde_json::json!({"a": ["y".repeat(5_000), {"b": "z".repeat(5_000)}]}),
        );
        let with_metadata = estimated_bytes(&stored(with_metadata));
        assert!(with_metadata > short + 10_000, "{with_metadata}");
    }
}
