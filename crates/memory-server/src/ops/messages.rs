//! Messages in and out: the input of an append, and a stored message as reads return it.

use agent_memory::{ChatMessage, MessageId, Part, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::invalid;
use crate::error::{OpError, OpResult};

/// A message's role, as the OpenAPI document names it (the schema of
/// [`Role`](agent_memory::Role), which serializes to these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    /// Instructions from the application.
    System,
    /// Instructions from the developer.
    Developer,
    /// The end user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

/// A message to append.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    /// The message id, by the one id rule ([`ID_RULE`](agent_memory::ID_RULE), docs/format.md).
    /// Give one to make retries idempotent: a message whose id the thread holds is not stored
    /// again. Generated when omitted.
    #[serde(default)]
    pub id: Option<String>,
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    #[schema(value_type = RoleName, example = "user")]
    pub role: Role,
    /// The text: shorthand for one `text` part (give `text` or `parts`).
    #[serde(default)]
    pub text: Option<String>,
    /// The parts, each an object tagged by `type` (docs/format.md).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub parts: Option<Vec<Value>>,
    /// Who wrote it.
    #[serde(default)]
    pub author_name: Option<String>,
    /// When it was created (RFC 3339, UTC); now when omitted.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

impl MessageInput {
    /// A user-role text message with no id.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            id: None,
            role,
            text: Some(text.into()),
            parts: None,
            author_name: None,
            created_at: None,
            metadata: None,
        }
    }

    /// The message it describes.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an invalid id, part or timestamp, or both or neither of
    /// `text` and `parts`.
    pub fn into_message(self) -> OpResult<ChatMessage> {
        let parts = match (self.text, self.parts) {
            (Some(text), None) => vec![Part::Text { text }],
            (None, Some(parts)) => parts
                .into_iter()
                .map(|part| {
                    serde_json::from_value::<Part>(part)
                        .map_err(|e| OpError::invalid(format!("a message part is invalid: {e}")))
                })
                .collect::<OpResult<Vec<_>>>()?,
            _ => {
                return Err(OpError::invalid(
                    "a message needs exactly one of `text` and `parts`",
                ));
            }
        };
        let mut message = ChatMessage::new(self.role, parts);
        if let Some(id) = self.id {
            message.id = MessageId::new(id).map_err(invalid)?;
        }
        message.author_name = self.author_name;
        if let Some(metadata) = self.metadata {
            message.metadata = metadata;
        }
        if let Some(created_at) = self.created_at {
            let mut json = message.to_json_value().map_err(invalid)?;
            if let Some(object) = json.as_object_mut() {
                object.insert("created_at".to_owned(), Value::String(created_at));
            }
            message = ChatMessage::from_json_value(json)
                .map_err(|_| OpError::invalid("`created_at` is not an RFC 3339 UTC timestamp"))?;
        }
        Ok(message)
    }
}

/// A stored message as returned by reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    /// Its position in the thread (1, 2, ...).
    pub seq: u64,
    /// Its token count, counted when it was appended.
    pub tokens: u32,
    /// Whether it was archived out of the active window.
    pub archived: bool,
    /// The message in its versioned JSON form (docs/format.md).
    #[schema(value_type = Object)]
    pub message: Value,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendView {
    /// The seq of each given message, in order (a message already stored keeps its seq).
    pub seqs: Vec<u64>,
    /// How many were new.
    pub inserted: usize,
}

pub(super) fn view(stored: &agent_memory::StoredMessage) -> OpResult<MessageView> {
    Ok(MessageView {
        seq: stored.seq,
        tokens: stored.tokens,
        archived: stored.archived,
        message: stored.message.to_json_value()?,
    })
}

pub(super) fn role_name(role: Role) -> String {
    serde_json::to_value(role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "message".to_owned())
}
