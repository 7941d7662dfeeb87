//! What callers send: messages to remember, searches, listings and updates. Each flavour
//! turns these into its own JSON (see `platform.rs` and `self_hosted.rs`).

use memory_core::{ChatMessage, Error, Result, Role};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::filters::Filters;
use crate::scope::Mem0Scope;

/// Who wrote a message Mem0 is asked to remember.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mem0Role {
    /// The end user.
    User,
    /// The model.
    Assistant,
    /// Instructions.
    System,
}

/// One message of a conversation, as Mem0 takes it: `{"role": …, "content": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mem0Message {
    /// Who wrote it.
    pub role: Mem0Role,
    /// Its text.
    pub content: String,
}

impl Mem0Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Mem0Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Mem0Role::Assistant,
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Mem0Role::System,
            content: content.into(),
        }
    }

    /// The text of a user or assistant message; `None` for other roles (system, developer,
    /// tool) and for messages without text (a tool call, an image alone).
    pub fn from_chat(message: &ChatMessage) -> Option<Self> {
        let role = match message.role {
            Role::User => Mem0Role::User,
            Role::Assistant => Mem0Role::Assistant,
            _ => return None,
        };
        let content = message.text();
        (!content.trim().is_empty()).then_some(Self { role, content })
    }
}

/// Messages for Mem0 to extract memories from, filed under a scope.
///
/// ```
/// use memory_mem0::{AddRequest, Mem0Message, Mem0Scope};
///
/// let request = AddRequest::new(
///     Mem0Scope::user("alice")?,
///     vec![Mem0Message::user("I am vegetarian.")],
/// )
/// .with_metadata("source", "onboarding")
/// .with_infer(true);
/// assert_eq!(request.metadata.as_ref().map(|m| m.len()), Some(1));
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AddRequest {
    /// The conversation (at least one message).
    pub messages: Vec<Mem0Message>,
    /// The ids stamped on the new memories.
    pub scope: Mem0Scope,
    /// Metadata stored with each new memory.
    pub metadata: Option<Map<String, Value>>,
    /// Whether Mem0 extracts facts (`true`, its default) or stores the messages as they are
    /// (`false`). Platform only.
    pub infer: Option<bool>,
    /// Whether the platform processes the request in the background (platform only; the v3
    /// endpoint always does).
    pub async_mode: Option<bool>,
}

impl AddRequest {
    /// `messages`, filed under `scope`.
    pub fn new(scope: Mem0Scope, messages: Vec<Mem0Message>) -> Self {
        Self {
            messages,
            scope,
            metadata: None,
            infer: None,
            async_mode: None,
        }
    }

    /// Adds one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata
            .get_or_insert_with(Map::new)
            .insert(key.into(), value.into());
        self
    }

    /// Sets `infer`.
    pub fn with_infer(mut self, infer: bool) -> Self {
        self.infer = Some(infer);
        self
    }

    /// Sets `async_mode`.
    pub fn with_async_mode(mut self, async_mode: bool) -> Self {
        self.async_mode = Some(async_mode);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.messages.is_empty() {
            return Err(Error::invalid_input(
                "a Mem0 add request needs at least one message",
            ));
        }
        Ok(())
    }
}

/// A semantic search, always limited to a scope.
///
/// ```
/// use memory_mem0::{Field, Filters, Mem0Scope, SearchRequest};
///
/// let request = SearchRequest::new("What does Alice eat?", Mem0Scope::user("alice")?)
///     .with_top_k(5)
///     .with_filters(Filters::contains(Field::Categories, "food"));
/// assert_eq!(request.top_k, Some(5));
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchRequest {
    /// The query text.
    pub query: String,
    /// Only memories carrying every id of this scope are searched.
    pub scope: Mem0Scope,
    /// Further conditions, combined with the scope by `AND`.
    pub filters: Option<Filters>,
    /// At most this many results (the platform's `top_k`; the self-hosted server has no such
    /// field, so its answer is cut here).
    pub top_k: Option<u32>,
    /// The lowest similarity score returned (platform only).
    pub threshold: Option<f64>,
    /// Whether the platform reranks the results (platform only).
    pub rerank: Option<bool>,
}

impl SearchRequest {
    /// A search for `query` within `scope`.
    pub fn new(query: impl Into<String>, scope: Mem0Scope) -> Self {
        Self {
            query: query.into(),
            scope,
            filters: None,
            top_k: None,
            threshold: None,
            rerank: None,
        }
    }

    /// Adds conditions (combined with the scope by `AND`).
    pub fn with_filters(mut self, filters: Filters) -> Self {
        self.filters = Some(filters);
        self
    }

    /// Sets how many results at most.
    pub fn with_top_k(mut self, top_k: u32) -> Self {
        self.top_k = Some(top_k);
        self
    }

    /// Sets the lowest score returned.
    pub fn with_threshold(mut self, threshold: f64) -> Self {
        self.threshold = Some(threshold);
        self
    }

    /// Sets whether results are reranked.
    pub fn with_rerank(mut self, rerank: bool) -> Self {
        self.rerank = Some(rerank);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.query.trim().is_empty() {
            return Err(Error::invalid_input(
                "a Mem0 search needs a non-empty query",
            ));
        }
        if self.top_k == Some(0) {
            return Err(Error::invalid_input(
                "a Mem0 search's top_k must be at least 1",
            ));
        }
        if let Some(threshold) = self.threshold
            && !(0.0..=1.0).contains(&threshold)
        {
            return Err(Error::invalid_input(
                "a Mem0 search's threshold must be between 0 and 1",
            ));
        }
        Ok(())
    }
}

/// One page of the memories of a scope.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ListRequest {
    /// Only memories carrying every id of this scope are listed.
    pub scope: Mem0Scope,
    /// Further conditions, combined with the scope by `AND` (platform only).
    pub filters: Option<Filters>,
    /// The page, from 1.
    pub page: u32,
    /// Memories per page (default 100).
    pub page_size: u32,
}

impl ListRequest {
    /// The first page of 100 memories of `scope`.
    pub fn new(scope: Mem0Scope) -> Self {
        Self {
            scope,
            filters: None,
            page: 1,
            page_size: 100,
        }
    }

    /// Adds conditions (platform only).
    pub fn with_filters(mut self, filters: Filters) -> Self {
        self.filters = Some(filters);
        self
    }

    /// Sets the page (from 1) and its size.
    pub fn with_page(mut self, page: u32, page_size: u32) -> Self {
        self.page = page;
        self.page_size = page_size;
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.page == 0 || self.page_size == 0 {
            return Err(Error::invalid_input(
                "a Mem0 listing's page and page_size start at 1",
            ));
        }
        Ok(())
    }
}

/// New text and/or metadata for one memory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[non_exhaustive]
pub struct MemoryUpdate {
    /// The memory's new text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The memory's new metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl MemoryUpdate {
    /// New text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            metadata: None,
        }
    }

    /// Sets new metadata as well.
    pub fn with_metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.metadata = Some(metadata);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.text.is_none() && self.metadata.is_none() {
            return Err(Error::invalid_input(
                "a Mem0 update needs new text or new metadata",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ChatMessage;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_user_and_assistant_text_is_taken() {
        assert_eq!(
            Mem0Message::from_chat(&ChatMessage::user("hi")),
            Some(Mem0Message::user("hi"))
        );
        assert_eq!(
            Mem0Message::from_chat(&ChatMessage::assistant("yo")),
            Some(Mem0Message::assistant("yo"))
        );
        assert_eq!(Mem0Message::from_chat(&ChatMessage::system("s")), None);
        assert_eq!(Mem0Message::from_chat(&ChatMessage::user("  ")), None);
        assert_eq!(
            Mem0Message::from_chat(&ChatMessage::tool_call("c", "f", "{}")),
            None
        );
        assert_eq!(
            Mem0Message::from_chat(&ChatMessage::tool_result("c", "42")),
            None
        );
        assert_eq!(
            serde_json::to_value(Mem0Message::system("x")).unwrap(),
            json!({"role": "system", "content": "x"})
        );
    }

    #[test]
    fn requests_are_checked() {
        let scope = Mem0Scope::user("u").unwrap();
        assert!(AddRequest::new(scope.clone(), vec![]).check().is_err());
        assert!(SearchRequest::new(" ", scope.clone()).check().is_err());
        assert!(
            SearchRequest::new("q", scope.clone())
                .with_top_k(0)
                .check()
                .is_err()
        );
        assert!(
            SearchRequest::new("q", scope.clone())
                .with_threshold(1.5)
                .check()
                .is_err()
        );
        assert!(
            ListRequest::new(scope.clone())
                .with_page(0, 10)
                .check()
                .is_err()
        );
        assert!(MemoryUpdate::default().check().is_err());
        assert!(MemoryUpdate::text("t").check().is_ok());
    }
}
