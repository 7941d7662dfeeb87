//! A session's `Memory`: its context for a model, and a put of messages.

use std::sync::Arc;

use agent_memory::{ChatMessage, MAX_BATCH_MESSAGES, Memory};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::messages::MessageInput;
use super::{Address, Ops};
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError, OpResult};

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
/// and archived when the window passed its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryPutView {
    /// Messages flushed out of the short-term window.
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
    /// [`ErrorCode::InvalidInput`] for an invalid address or limit; the stores' and blocks'
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
        if messages.is_empty() {
            return Err(OpError::invalid("a put needs at least one message"));
        }
        let max = self.limits.max_messages_per_append.min(MAX_BATCH_MESSAGES);
        if messages.len() > max {
            return Err(OpError::new(
                ErrorCode::LimitExceeded,
                format!("a put carries at most {max} messages"),
            ));
        }
        let messages = messages
            .into_iter()
            .map(MessageInput::into_message)
            .collect::<OpResult<Vec<_>>>()?;
        let report = memory.put_messages(&messages).await?;
        Ok(MemoryPutView {
            flushed_messages: report.messages,
            flushed_tokens: report.tokens,
            deliveries: report.deliveries,
        })
    }
}
