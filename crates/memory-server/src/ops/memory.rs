//! A session's `Memory`: its context for a model, and a put of messages.

use std::sync::Arc;

use agent_memory::{ChatMessage, Memory};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::messages::{AppendView, MessageInput};
use super::{Address, Ops};
use crate::auth::Principal;
use crate::error::{OpError, OpResult};

/// The largest `token_limit` a memory request may ask for.
pub const MAX_MEMORY_TOKEN_LIMIT: u64 = 10_000_000;

/// The messages a `Memory` gives a model for a session: the `<memory>` text of its blocks
/// (when it has any) and the short-term window, within the token limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryContextView {
    /// The messages, in their versioned JSON form, in the order to send them.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
}

/// What a `Memory` put did: the messages are appended, then the oldest flushed to the blocks
/// and archived when the window passed its threshold. It counts what this put flushed: a put
/// racing another on the same session never reports the other's flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryPutView {
    /// Messages this put flushed out of the short-term window (and archived).
    pub flushed_messages: usize,
    /// Their tokens.
    pub flushed_tokens: u64,
    /// Block deliveries made.
    pub deliveries: usize,
}

impl Ops {
    pub(super) fn memory(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
    ) -> OpResult<Memory> {
        let scope = self.scope(who, address)?;
        let mut builder = Memory::builder(
            scope,
            Arc::clone(&self.stores.history),
            Arc::clone(&self.stores.sessions),
        );
        if let Some(limit) = token_limit {
            if limit == 0 || limit > MAX_MEMORY_TOKEN_LIMIT {
                return Err(OpError::invalid(format!(
                    "`token_limit` must be between 1 and {MAX_MEMORY_TOKEN_LIMIT}"
                )));
            }
            builder = builder.token_limit(limit);
        }
        for block in &self.blocks {
            builder = builder.block(Arc::clone(block));
        }
        Ok(builder.build()?)
    }

    /// The context a `Memory` gives a model for the session: its blocks' `<memory>` text and
    /// the short-term window within `token_limit` (default 30,000). The memory's short-term
    /// window is the addressed thread itself (the one `append` and `read` address).
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an invalid address or limit; the stores' and blocks'
    /// errors.
    pub async fn memory_context(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
    ) -> OpResult<MemoryContextView> {
        let memory = self.memory(who, address, token_limit)?;
        let messages = memory.get(&[]).await?;
        Ok(MemoryContextView {
            messages: messages
                .iter()
                .map(ChatMessage::to_json_value)
                .collect::<agent_memory::Result<Vec<_>>>()?,
        })
    }

    /// Puts `messages` into the session's `Memory`: appended (idempotent by id), then flushed
    /// to its blocks when the window passed its threshold.
    ///
    /// # Errors
    /// As [`append`](Self::append) and [`memory_context`](Self::memory_context).
    pub async fn memory_put(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
        messages: Vec<MessageInput>,
    ) -> OpResult<MemoryPutView> {
        let memory = self.memory(who, address, token_limit)?;
        let messages = self.batch(messages, "a put")?;
        Ok(self.put_through(&memory, &messages).await?.1)
    }

    /// Remembers `messages` in the session's thread (MCP's `remember`), under the rules of
    /// [`memory_put`](Self::memory_put) whatever the transport: when the server has memory
    /// blocks, through the session's `Memory` with the default token limit, so what passes its
    /// threshold is flushed to the blocks (and found by [`search_memory`](Self::search_memory))
    /// as an HTTP put would flush it; without blocks, a plain [`append`](Self::append) (nothing
    /// to flush to, and the whole thread stays in the window a text search reads).
    ///
    /// # Errors
    /// As [`memory_put`](Self::memory_put).
    pub async fn remember_messages(
        &self,
        who: &Principal,
        address: &Address,
        messages: Vec<MessageInput>,
    ) -> OpResult<AppendView> {
        if self.blocks.is_empty() {
            return self.append(who, address, messages).await;
        }
        let memory = self.memory(who, address, None)?;
        let messages = self.batch(messages, "an append")?;
        Ok(self.put_through(&memory, &messages).await?.0)
    }

    /// Appends `messages` through `memory` and flushes what passed its threshold.
    async fn put_through(
        &self,
        memory: &Memory,
        messages: &[ChatMessage],
    ) -> OpResult<(AppendView, MemoryPutView)> {
        let (outcome, report) = memory.put_messages_with_outcome(messages).await?;
        Ok((
            AppendView {
                seqs: outcome.seqs,
                inserted: outcome.inserted,
            },
            MemoryPutView {
                flushed_messages: report.messages,
                flushed_tokens: report.tokens,
                deliveries: report.deliveries,
            },
        ))
    }
}
