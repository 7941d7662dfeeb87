//! The agent-facing operations the MCP tools use: remember a fact, recall a session's
//! memory, search a thread's text.

use agent_memory::{Part, Role, Window};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::messages::{AppendView, MessageInput, MessageView, role_name, view};
use super::{Address, Ops};
use crate::auth::Principal;
use crate::error::{OpError, OpResult};

/// The source of the thread that keeps a session's facts, beside its history.
pub const FACTS_SOURCE: &str = "facts";

/// A session's memory as [`Ops::recall`] returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecallView {
    /// The facts and the conversation as one text for a prompt: `Facts:` with one `- fact` a
    /// line, then `Conversation:` with one `role: text` a line (each part absent when empty).
    pub context: String,
    /// The `<memory>` text the server's memory blocks give for the session (what the vector
    /// memory retrieved for the conversation's last messages), when the server has blocks and
    /// they gave any; it also opens `context`.
    pub memory: Option<String>,
    /// The session's facts that fit, oldest first.
    pub facts: Vec<MessageView>,
    /// The newest messages of the thread that fit, in seq order.
    pub messages: Vec<MessageView>,
    /// The stored token counts of `facts` and `messages` added up (the text adds its few
    /// framing words).
    pub tokens: u64,
}

impl Ops {
    /// Remembers `fact` about the session: appends it to the session's facts thread (source
    /// [`FACTS_SOURCE`], the address's user and agent) as a `system` message with
    /// `{"kind": "fact"}` metadata, whose id is derived from the text, so the same fact is
    /// stored once however often it is remembered.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an empty fact or a source other than the facts
    /// thread's; as [`append`](Self::append).
    pub async fn remember_fact(
        &self,
        who: &Principal,
        address: &Address,
        fact: &str,
    ) -> OpResult<AppendView> {
        let fact = fact.trim();
        if fact.is_empty() {
            return Err(OpError::invalid("the fact is empty"));
        }
        if address.source.as_deref().is_some_and(|s| s != FACTS_SOURCE) {
            return Err(OpError::invalid(format!(
                "facts are kept in the `{FACTS_SOURCE}` source; leave `source` out"
            )));
        }
        let address = Address {
            source: Some(FACTS_SOURCE.to_owned()),
            ..address.clone()
        };
        let digest = crate::auth::sha256(fact);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let mut metadata = serde_json::Map::new();
        metadata.insert("kind".to_owned(), Value::String("fact".to_owned()));
        let message = MessageInput {
            id: Some(format!("fact-{hex}")),
            metadata: Some(metadata),
            ..MessageInput::text(Role::System, fact)
        };
        self.append(who, &address, vec![message]).await
    }

    /// The session's memory within `max_tokens` (by stored counts): its newest facts, up to
    /// half the budget, then the newest messages of its thread that fit in the rest, and the
    /// two rendered as one text.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for a zero budget or an address naming the facts source;
    /// as [`scope`](Self::scope); the store's errors.
    pub async fn recall(
        &self,
        who: &Principal,
        address: &Address,
        max_tokens: u64,
    ) -> OpResult<RecallView> {
        if max_tokens == 0 {
            return Err(OpError::invalid("the token budget must be at least 1"));
        }
        if address.source.as_deref() == Some(FACTS_SOURCE) {
            return Err(OpError::invalid(format!(
                "recall a conversation's source, not `{FACTS_SOURCE}`: its facts come with it"
            )));
        }
        let facts_scope = self.scope(
            who,
            &Address {
                source: Some(FACTS_SOURCE.to_owned()),
                ..address.clone()
            },
        )?;
        let scope = self.scope(who, address)?;
        let facts = self
            .stores
            .history
            .read(&facts_scope, Window::TokenBudget(max_tokens / 2))
            .await?;
        let fact_tokens: u64 = facts.iter().map(|m| u64::from(m.tokens)).sum();
        let rest = max_tokens.saturating_sub(fact_tokens);
        let messages = if rest == 0 {
            Vec::new()
        } else {
            self.stores
                .history
                .read(&scope, Window::TokenBudget(rest))
                .await?
        };
        let message_tokens: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
        let memory = self.blocks_text(who, address, max_tokens).await?;
        let mut context = String::new();
        if let Some(text) = &memory {
            context.push_str(text);
            context.push_str("\n\n");
        }
        if !facts.is_empty() {
            context.push_str("Facts:\n");
            for fact in &facts {
                context.push_str("- ");
                context.push_str(&fact.message.text());
                context.push('\n');
            }
        }
        if !messages.is_empty() {
            if !context.is_empty() {
                context.push('\n');
            }
            context.push_str("Conversation:\n");
            for m in &messages {
                context.push_str(&role_name(m.message.role));
                context.push_str(": ");
                context.push_str(&m.message.text());
                context.push('\n');
            }
        }
        Ok(RecallView {
            context,
            memory,
            facts: facts.iter().map(view).collect::<OpResult<_>>()?,
            messages: messages.iter().map(view).collect::<OpResult<_>>()?,
            tokens: fact_tokens.saturating_add(message_tokens),
        })
    }

    /// The `<memory>` text the `Memory`'s blocks render for the session, if it has blocks
    /// and they render anything.
    async fn blocks_text(
        &self,
        who: &Principal,
        address: &Address,
        max_tokens: u64,
    ) -> OpResult<Option<String>> {
        if self.blocks.is_empty() {
            return Ok(None);
        }
        let limit = max_tokens.min(super::MAX_MEMORY_TOKEN_LIMIT);
        let messages = self.memory(who, address, Some(limit))?.get(&[]).await?;
        Ok(messages
            .first()
            .filter(|m| m.role == Role::System)
            .and_then(|m| m.parts.first())
            .and_then(|part| match part {
                Part::Text { text } if text.starts_with("<memory>") => Some(text.clone()),
                _ => None,
            }))
    }

    /// The messages of the thread whose text contains `query`, ignoring case (a plain
    /// substring match over each message's text parts, not a semantic search), newest first,
    /// at most `limit`; `include_archived` searches archived messages too. The thread is read
    /// whole, so a search costs one read of it.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an empty query or a zero limit; as
    /// [`scope`](Self::scope); the store's errors.
    pub async fn search_text(
        &self,
        who: &Principal,
        address: &Address,
        query: &str,
        limit: usize,
        include_archived: bool,
    ) -> OpResult<Vec<MessageView>> {
        let scope = self.scope(who, address)?;
        let needle = query.trim().to_lowercase();
        if needle.is_empty() {
            return Err(OpError::invalid("the search query is empty"));
        }
        if limit == 0 {
            return Err(OpError::invalid("`limit` must be at least 1"));
        }
        let window = if include_archived {
            Window::Everything
        } else {
            Window::All
        };
        let stored = self.stores.history.read(&scope, window).await?;
        stored
            .iter()
            .rev()
            .filter(|m| m.message.text().to_lowercase().contains(&needle))
            .take(limit)
            .map(view)
            .collect()
    }
}
