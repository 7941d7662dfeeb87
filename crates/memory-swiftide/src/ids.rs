//! The ids a pushed message is stored under: derived from the message (and the message it
//! follows), never random, so pushing again what was stored stores nothing.

use memory_core::{MessageId, Result};
use swiftide_core::chat_completion::ChatMessage as SwiftMessage;
use uuid::Uuid;

/// The namespace of the name-based (version 5) UUIDs of pushed messages.
const NAMESPACE: Uuid = Uuid::from_u128(0x6d65_6d6f_7279_2d73_7769_6674_6964_6531);

/// What a message's id is derived from: its swiftide JSON, and for a message without an
/// identity of its own, the id of the message it follows.
///
/// - A system message: its text alone, so the system prompt a new agent pushes again (swiftide
///   pushes it whenever an agent starts) is stored once per thread.
/// - An assistant message that calls tools, and a tool output: the message (the call ids the
///   model made are unique), so a retried push stores nothing.
/// - Any other message (user, assistant text, summary): the message and the id of the message
///   before it, so the same words said twice in a conversation are two messages.
///
/// `archived` is how many archived messages the thread holds: an
/// [`overwrite`](swiftide_core::MessageHistory::overwrite) archives, so a message that says
/// again what an archived one said, after the same message, gets a new id (an id the thread
/// already holds, archived, would store nothing).
pub(crate) fn message_id(
    message: &SwiftMessage,
    previous: Option<&MessageId>,
    archived: u64,
) -> Result<MessageId> {
    let json = serde_json::to_string(message).map_err(|e| {
        memory_core::Error::serialization(format!("A swiftide message cannot be encoded: {e}."))
    })?;
    let mut name = String::with_capacity(json.len().saturating_add(64));
    if is_chained(message) {
        name.push_str(previous.map_or("", MessageId::as_str));
        name.push('\n');
        name.push_str(&archived.to_string());
    }
    name.push('\n');
    name.push_str(&json);
    let uuid = Uuid::new_v5(&NAMESPACE, name.as_bytes());
    MessageId::new(format!("sw-{}", uuid.simple()))
}

/// Whether `message` is stored under an id chained to the message before it.
pub(crate) fn is_chained(message: &SwiftMessage) -> bool {
    match message {
        SwiftMessage::System(_) | SwiftMessage::ToolOutput(..) => false,
        SwiftMessage::Assistant(_, Some(calls)) => calls.is_empty(),
        _ => true,
    }
}
