//! Chat reducers: what part of a long history the model sees, cut along
//! [`Segmentation`] so tool calls keep their results, the leading system message stays and the
//! last user turn stays.

mod grouping;
mod limits;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;

pub use grouping::Segmentation;
pub use limits::{MessageCountReducer, TokenBudgetReducer};

use crate::error::Result;
use crate::history::StoredMessage;

/// When an agent applies its reducer (Agent Framework's `ChatReducerTriggerEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReducerTrigger {
    /// After new messages are stored: the stored thread's active window shrinks (the dropped
    /// messages are archived, never deleted).
    AfterMessageAdded,
    /// Before messages are sent to the model: only the view shrinks; the store is untouched.
    #[default]
    BeforeMessagesRetrieval,
}

/// What a reducer keeps of a list of messages: the pinned leading message (if any) and every
/// message from `first_kept` on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reduction {
    /// Index of the pinned leading system message, kept whatever happens.
    pub pinned: Option<usize>,
    /// Index of the first message of the kept suffix.
    pub first_kept: usize,
}

impl Reduction {
    /// A reduction that keeps everything.
    pub fn keep_all() -> Self {
        Self {
            pinned: None,
            first_kept: 0,
        }
    }

    /// Keeps `pinned` and the suffix from `first_kept`.
    pub fn new(pinned: Option<usize>, first_kept: usize) -> Self {
        Self { pinned, first_kept }
    }

    /// The indices of the messages dropped from the view.
    pub fn dropped(&self) -> Range<usize> {
        let start = self.pinned.map_or(0, |p| p + 1);
        start..self.first_kept.max(start)
    }

    /// Whether nothing is dropped.
    pub fn is_noop(&self) -> bool {
        self.dropped().is_empty()
    }

    /// The kept messages, in order.
    pub fn apply<T: Clone>(&self, messages: &[T]) -> Vec<T> {
        let dropped = self.dropped();
        messages
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
            .map(|(_, m)| m.clone())
            .collect()
    }
}

/// Decides which messages of a history the model sees.
///
/// # Behavior
/// A reducer returns a [`Reduction`] that keeps the pinned leading system message and a suffix
/// that starts on a group boundary of [`Segmentation`] at or before the last user turn. Given
/// messages that already fit, it drops nothing.
#[async_trait]
pub trait ChatReducer: Send + Sync + fmt::Debug + 'static {
    /// Chooses what to keep of `messages` (oldest first, with their stored token counts).
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction>;
}

#[async_trait]
impl<T: ChatReducer + ?Sized> ChatReducer for Arc<T> {
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction> {
        (**self).reduce(messages).await
    }
}

/// Keeps the longest suffix of whole groups whose `cost` fits in `limit`, never less than the
/// protected last turn. `pinned_cost` is charged first.
pub(crate) fn keep_within<M>(
    messages: &[M],
    seg: &Segmentation,
    limit: u64,
    pinned_cost: u64,
    cost: impl Fn(&M) -> u64,
) -> Reduction {
    let mut used = pinned_cost;
    let mut first_group = seg.groups.len();
    for (g, range) in seg.groups.iter().enumerate().rev() {
        let group_cost: u64 = messages[range.clone()].iter().map(&cost).sum();
        if g >= seg.protected_from || used + group_cost <= limit {
            used += group_cost;
            first_group = g;
        } else {
            break;
        }
    }
    Reduction::new(seg.pinned, seg.group_start(first_group, messages.len()))
}
