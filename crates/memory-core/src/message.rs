//! [`ChatMessage`], its parts, and its two JSON forms: our versioned form (docs/format.md) and
//! the OpenAI chat-completions form.

mod openai;
mod part;
mod part_de;
mod timestamp;
mod transcript;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use openai::{OpenAiFunctionCall, OpenAiMessage, OpenAiToolCall};
pub use part::{Media, MediaKind, Part};
pub use transcript::tagged_transcript;

use crate::error::{Error, Result};
use crate::id::MessageId;

/// The version of the message JSON form this library writes (the `"v"` field).
pub const MESSAGE_FORMAT_VERSION: u32 = 1;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// Instructions from the developer (OpenAI's `developer` role, which replaces `system` for
    /// newer models).
    Developer,
    /// The end user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    /// The role's name as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a conversation.
///
/// A message has a unique, time-ordered [`MessageId`] (generated when not given), a [`Role`], an
/// optional author name (the agent or user that wrote it, for multi-agent chats), its content as
/// a list of [`Part`]s, a creation time and free-form metadata.
///
/// ```
/// use memory_core::{ChatMessage, Role};
///
/// let msg = ChatMessage::user("What is on my calendar tomorrow?");
/// assert_eq!(msg.role, Role::User);
/// assert_eq!(msg.text(), "What is on my calendar tomorrow?");
///
/// // The versioned JSON form round-trips.
/// let json = msg.to_json()?;
/// assert_eq!(ChatMessage::from_json(&json)?, msg);
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    /// Unique id; a store ignores a message whose id it already holds in the thread (one that
    /// declares [`HistoryCapabilities::dedupes_ids`](crate::HistoryCapabilities::dedupes_ids);
    /// others deduplicate by their own documented rule).
    pub id: MessageId,
    /// Who wrote it.
    pub role: Role,
    /// The name of the participant that wrote it (OpenAI's `name`, Agent Framework's
    /// `author_name`).
    pub author_name: Option<String>,
    /// The content.
    pub parts: Vec<Part>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Free-form metadata, kept verbatim.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl ChatMessage {
    /// A message of `role` with the given parts, a new id and the current time.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            id: MessageId::generate(),
            role,
            author_name: None,
            parts,
            created_at: Utc::now(),
            metadata: serde_json::Map::new(),
        }
    }

    /// A text message of `role`.
    pub fn text_message(role: Role, text: impl Into<String>) -> Self {
        Self::new(role, vec![Part::text(text)])
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text_message(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text_message(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text_message(Role::Assistant, text)
    }

    /// An assistant message that calls one tool.
    pub fn tool_call(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self::new(
            Role::Assistant,
            vec![Part::ToolCall {
                id: call_id.into(),
                name: name.into(),
                arguments: arguments.into(),
            }],
        )
    }

    /// A tool message carrying the result of call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::new(
            Role::Tool,
            vec![Part::ToolResult {
                call_id: call_id.into(),
                content: content.into(),
            }],
        )
    }

    /// Replaces the id.
    pub fn with_id(mut self, id: MessageId) -> Self {
        self.id = id;
        self
    }

    /// Sets the author name.
    pub fn with_author(mut self, name: impl Into<String>) -> Self {
        self.author_name = Some(name.into());
        self
    }

    /// Sets one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// The concatenated text of the text parts, separated by newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for text in self.parts.iter().filter_map(Part::as_text) {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
        out
    }

    /// The ids of the tool calls this message makes.
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// The ids of the tool calls this message answers.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// Whether the message calls at least one tool.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_call_ids().next().is_some()
    }

    /// Encodes the message in the versioned JSON form of docs/format.md.
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if a metadata value cannot
    /// be encoded (it always can for values built with `serde_json`).
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string(&WireMessageRef::from(self))?)
    }

    /// Decodes a message from the versioned JSON form, refusing unknown versions.
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) for malformed JSON, a
    /// missing field, an invalid id or an unsupported version.
    pub fn from_json(json: &str) -> Result<Self> {
        let wire: WireMessage = serde_json::from_str(json)?;
        wire.try_into()
    }

    /// Decodes a message from an already parsed JSON value.
    ///
    /// # Errors
    /// As [`ChatMessage::from_json`].
    pub fn from_json_value(value: serde_json::Value) -> Result<Self> {
        let wire: WireMessage = serde_json::from_value(value)?;
        wire.try_into()
    }

    /// Encodes the message as a JSON value in the versioned form.
    ///
    /// # Errors
    /// As [`ChatMessage::to_json`].
    pub fn to_json_value(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(WireMessageRef::from(self))?)
    }
}

impl AsRef<ChatMessage> for ChatMessage {
    fn as_ref(&self) -> &ChatMessage {
        self
    }
}

impl Serialize for ChatMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireMessageRef::from(self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireMessage::deserialize(deserializer)?;
        ChatMessage::try_from(wire).map_err(serde::de::Error::custom)
    }
}

/// The JSON form as written (borrowing).
#[derive(Serialize)]
struct WireMessageRef<'a> {
    v: u32,
    id: &'a MessageId,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    author_name: Option<&'a str>,
    parts: &'a [Part],
    #[serde(serialize_with = "timestamp::serialize")]
    created_at: &'a DateTime<Utc>,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    metadata: &'a serde_json::Map<String, serde_json::Value>,
}

impl<'a> From<&'a ChatMessage> for WireMessageRef<'a> {
    fn from(m: &'a ChatMessage) -> Self {
        Self {
            v: MESSAGE_FORMAT_VERSION,
            id: &m.id,
            role: m.role,
            author_name: m.author_name.as_deref(),
            parts: &m.parts,
            created_at: &m.created_at,
            metadata: &m.metadata,
        }
    }
}

/// The JSON form as read.
#[derive(Deserialize)]
struct WireMessage {
    v: u32,
    id: MessageId,
    role: Role,
    #[serde(default)]
    author_name: Option<String>,
    parts: Vec<Part>,
    #[serde(deserialize_with = "timestamp::deserialize")]
    created_at: DateTime<Utc>,
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
}

impl TryFrom<WireMessage> for ChatMessage {
    type Error = Error;
    fn try_from(w: WireMessage) -> Result<Self> {
        if w.v != MESSAGE_FORMAT_VERSION {
            return Err(Error::serialization(format!(
                "message format version {} is not supported; this library reads version {}",
                w.v, MESSAGE_FORMAT_VERSION
            )));
        }
        Ok(ChatMessage {
            id: w.id,
            role: w.role,
            author_name: w.author_name,
            parts: w.parts,
            created_at: w.created_at,
            metadata: w.metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn json_round_trip_with_every_part() {
        let msg = ChatMessage::new(
            Role::User,
            vec![
                Part::text("héllo 世界 🎉"),
                Part::Image(Media::url("https://example.com/a.png").with_detail("low")),
                Part::Data {
                    media_type: "application/json".into(),
                    data: serde_json::json!({"k": [1, 2]}),
                },
            ],
        )
        .with_author("dana")
        .with_metadata("trace", serde_json::json!("t-1"));
        let json = msg.to_json().unwrap();
        assert!(json.starts_with("{\"v\":1,"));
        assert_eq!(ChatMessage::from_json(&json).unwrap(), msg);
    }

    #[test]
    fn unknown_version_is_refused() {
        let json = ChatMessage::user("x")
            .to_json()
            .unwrap()
            .replace("\"v\":1", "\"v\":99");
        let err = ChatMessage::from_json(&json).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
        assert!(err.to_string().contains("version 99"));
    }

    #[test]
    fn garbage_is_a_typed_error() {
        for bad in [
            "",
            "{",
            "null",
            "[]",
            "{\"v\":1}",
            "{\"v\":\"1\",\"id\":\"a\"}",
        ] {
            let err = ChatMessage::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Serialization, "{bad}");
        }
    }

    #[test]
    fn invalid_id_in_json_is_refused() {
        let json =
            ChatMessage::user("x")
                .to_json()
                .unwrap()
                .replacen("\"id\":\"", "\"id\":\"bad id ", 1);
        assert!(ChatMessage::from_json(&json).is_err());
    }
}
