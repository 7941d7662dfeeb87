//! The message-count and token-budget reducers.

use async_trait::async_trait;

use super::{ChatReducer, Reduction, Segmentation, keep_within};
use crate::error::Result;
use crate::history::StoredMessage;

/// Keeps at most `target` messages besides the pinned system message (Agent Framework's
/// `MessageCountingChatReducer`), cutting only between groups and never into the last user
/// turn.
///
/// ```
/// use memory_core::{ChatReducer, MessageCountReducer};
/// let reducer = MessageCountReducer::new(20);
/// # let _ = reducer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageCountReducer {
    target: usize,
}

impl MessageCountReducer {
    /// A reducer keeping at most `target` messages.
    pub fn new(target: usize) -> Self {
        Self { target }
    }
}

#[async_trait]
impl ChatReducer for MessageCountReducer {
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction> {
        let seg = Segmentation::of(messages);
        Ok(keep_within(messages, &seg, self.target as u64, 0, |_| 1))
    }
}

/// Keeps the newest messages whose stored token counts, with the pinned system message's,
/// fit in `budget`, cutting only between groups and never into the last user turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBudgetReducer {
    budget: u64,
}

impl TokenBudgetReducer {
    /// A reducer keeping at most `budget` tokens.
    pub fn new(budget: u64) -> Self {
        Self { budget }
    }
}

#[async_trait]
impl ChatReducer for TokenBudgetReducer {
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction> {
        let seg = Segmentation::of(messages);
        let pinned = seg
            .pinned
            .and_then(|p| messages.get(p))
            .map_or(0, |m| u64::from(m.tokens));
        Ok(keep_within(messages, &seg, self.budget, pinned, |m| {
            u64::from(m.tokens)
        }))
    }
}
