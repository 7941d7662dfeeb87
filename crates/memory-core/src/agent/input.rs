//! [`AgentInput`]: what one run is given, and the ids the run derives for text input.

use crate::id::MessageId;
use crate::message::ChatMessage;

/// What one run gives as input: its messages, and whether the run derives their ids.
///
/// Text (`From<&str>`, `From<String>`) makes one user message whose id the run derives
/// deterministically from the session's scope, its turn count and the text (see
/// [`Agent::run`](super::Agent::run)), so retrying a run whose store write committed but whose reply was lost
/// stores the turn once in a store that dedupes ids. Messages given as such
/// (`From<ChatMessage>`, `From<Vec<ChatMessage>>`, [`new`](Self::new)) keep their ids; a retry
/// that passes the same messages (the same ids) is deduped likewise.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInput {
    messages: Vec<ChatMessage>,
    derive_ids: bool,
}

impl AgentInput {
    /// The given messages, with their own ids.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            derive_ids: false,
        }
    }

    /// One user message of `text`, its id derived by the run.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::user(text.into())],
            derive_ids: true,
        }
    }

    /// The messages.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Whether the run derives the messages' ids (text input).
    pub fn derives_ids(&self) -> bool {
        self.derive_ids
    }

    /// The messages, taken out.
    pub fn into_messages(self) -> Vec<ChatMessage> {
        self.messages
    }
}

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        AgentInput::text(text)
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        AgentInput::text(text)
    }
}

impl From<ChatMessage> for AgentInput {
    fn from(message: ChatMessage) -> Self {
        AgentInput::new(vec![message])
    }
}

impl From<Vec<ChatMessage>> for AgentInput {
    fn from(messages: Vec<ChatMessage>) -> Self {
        AgentInput::new(messages)
    }
}

/// The id of input message `index` of the run at turn `turn` of the session at `scope`: a
/// UUIDv5 of the scope key, the turn, the index, the role and the content, so the same text
/// retried at the same turn gets the same id, and the next turn (or other text) another.
pub(super) fn derived_input_id(
    scope: &crate::Scope,
    turn: u64,
    index: usize,
    message: &ChatMessage,
) -> MessageId {
    let parts = serde_json::to_string(&message.parts).unwrap_or_default();
    let name = format!(
        "agent-memory/input\n{}\n{turn}\n{index}\n{:?}\n{parts}",
        scope.key(),
        message.role
    );
    // A UUID is 36 characters of the id alphabet: always a valid id.
    let uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string();
    MessageId::new(uuid).unwrap_or_else(|_| MessageId::generate())
}
