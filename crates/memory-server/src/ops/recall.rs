//! The agent-facing operations the MCP tools use: remember a fact, recall a session's
//! memory, search a thread's text.

use agent_memory::memory::{render_fact, render_message};
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
    /// The facts and the conversation as one text for a prompt: `Facts:` with one
    /// `<fact>…</fact>` a line, then `Conversation:` with one `<message role='…'>…</message>`
    /// a line (each part absent when empty), the text escaped as the memory block escapes it
    /// (`&lt;`, `&gt;`, `&amp;`), so no remembered text can forge a message.
    pub context: String,
    /// The `<memory>` text the server's memory blocks give for the session (what the vector
    /// memory retrieved for the conversation's last messages), when the server has blocks and
    /// they gave any; it also opens `context`.
    pub memory: Option<String>,
    /// The session's facts that fit, oldest first.
    pub facts: Vec<MessageView>,
    /// The newest messages of the thread that fit, in seq order.
    pub messages: Vec<MessageView>,
    /// The tokens of `memory` (counted by the default counter) and the stored counts of
    /// `facts` and `messages`, added up (the text adds its few framing words).
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

    /// The session's memory within `max_tokens`: the memory blocks' text (when the server has
    /// blocks), within a quarter of the budget; then its newest facts, up to half of what is
    /// left; then the newest messages of its thread that fit in the rest (facts and messages
    /// by their stored counts), all rendered as one text.
    ///
    /// The blocks get their own share rather than what the thread leaves: a thread whose
    /// window is larger than the budget would otherwise leave the memory no room at all, and a
    /// client that only remembers and recalls would never see its long-term memory.
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
        let memory = self
            .blocks_text(who, address, &scope, max_tokens / 4)
            .await?;
        let memory_tokens = memory.as_deref().map_or(0, |text| {
            u64::from(agent_memory::default_token_counter().count_text(text))
        });
        let budget = max_tokens.saturating_sub(memory_tokens);
        let facts = if budget / 2 == 0 {
            Vec::new()
        } else {
            self.stores
                .history
                .read(&facts_scope, Window::TokenBudget(budget / 2))
                .await?
        };
        let fact_tokens: u64 = facts.iter().map(|m| u64::from(m.tokens)).sum();
        let rest = budget.saturating_sub(fact_tokens);
        let messages = if rest == 0 {
            Vec::new()
        } else {
            self.stores
                .history
                .read(&scope, Window::TokenBudget(rest))
                .await?
        };
        let message_tokens: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
        let mut context = String::new();
        if let Some(text) = &memory {
            context.push_str(text);
            context.push_str("\n\n");
        }
        // Rendered as the memory block renders them (one escaping rule for every text of
        // memory a model reads): a fact or a message cannot close its tag or forge another.
        if !facts.is_empty() {
            context.push_str("Facts:\n");
            for fact in &facts {
                context.push_str(&render_fact(&fact.message.text()));
                context.push('\n');
            }
        }
        if !messages.is_empty() {
            if !context.is_empty() {
                context.push('\n');
            }
            context.push_str("Conversation:\n");
            for m in &messages {
                context.push_str(&render_message(
                    &role_name(m.message.role),
                    &m.message.text(),
                ));
                context.push('\n');
            }
        }
        Ok(RecallView {
            context,
            memory,
            facts: facts.iter().map(view).collect::<OpResult<_>>()?,
            messages: messages.iter().map(view).collect::<OpResult<_>>()?,
            tokens: memory_tokens
                .saturating_add(fact_tokens)
                .saturating_add(message_tokens),
        })
    }

    /// The `<memory>` text the `Memory`'s blocks render for the session within `budget`
    /// tokens, if it has blocks and they render anything. The memory is built with room for
    /// the whole active window and `budget` more, so the blocks are truncated to `budget`
    /// (by priority), never to what the window leaves; the window is their retrieval context.
    async fn blocks_text(
        &self,
        who: &Principal,
        address: &Address,
        scope: &agent_memory::Scope,
        budget: u64,
    ) -> OpResult<Option<String>> {
        if self.blocks.is_empty() || budget == 0 {
            return Ok(None);
        }
        let active = self.stores.history.count(scope).await?.active_tokens;
        let limit = active
            .saturating_add(budget)
            .clamp(1, super::MAX_MEMORY_TOKEN_LIMIT);
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
