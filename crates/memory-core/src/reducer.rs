//! Chat reducers: what part of a long history the model sees, cut along
//! [`Segmentation`] so tool calls keep their results, the leading system message stays and the
//! last user turn stays.

mod grouping;
mod limits;
mod summarizing;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;

pub use grouping::Segmentation;
pub use limits::{MessageCountReducer, TokenBudgetReducer};
pub use summarizing::{DEFAULT_SUMMARY_INSTRUCTIONS, SummarizingReducer};

use crate::error::Result;
use crate::history::StoredMessage;
use crate::message::ChatMessage;

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

/// The metadata key that marks a message as a summary written by a reducer; its value is an
/// object with the sequence range the summary covers (`{"first_seq": …, "last_seq": …}`).
pub const SUMMARY_METADATA_KEY: &str = "agent_memory.summary";

/// Whether `message` is a summary written by a reducer.
pub fn is_summary(message: &ChatMessage) -> bool {
    message.metadata.contains_key(SUMMARY_METADATA_KEY)
}

/// What a reducer keeps of a list of messages: the pinned leading message (if any), every
/// message outside the dropped ranges, and optionally a new summary of what it dropped.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Reduction {
    /// Index of the pinned leading system message, kept whatever happens.
    pub pinned: Option<usize>,
    /// The dropped index ranges, sorted and disjoint.
    pub dropped: Vec<Range<usize>>,
    /// A summary of the dropped messages, shown right after the pinned message.
    pub summary: Option<ChatMessage>,
}

impl Reduction {
    /// A reduction that keeps everything.
    pub fn keep_all() -> Self {
        Self {
            pinned: None,
            dropped: Vec::new(),
            summary: None,
        }
    }

    /// Keeps `pinned` and the suffix from `first_kept`.
    pub fn new(pinned: Option<usize>, first_kept: usize) -> Self {
        let start = pinned.map_or(0, |p| p.saturating_add(1));
        let mut dropped = Vec::new();
        if first_kept > start {
            dropped.push(start..first_kept);
        }
        Self {
            pinned,
            dropped,
            summary: None,
        }
    }

    /// Adds a summary of the dropped messages.
    pub fn with_summary(mut self, summary: ChatMessage) -> Self {
        self.summary = Some(summary);
        self
    }

    /// Also drops the message at `index`.
    pub fn drop_index(mut self, index: usize) -> Self {
        if !self.is_dropped(index) {
            self.dropped.push(index..index.saturating_add(1));
            self.dropped.sort_by_key(|r| r.start);
        }
        self
    }

    /// Whether the message at `index` is dropped.
    pub fn is_dropped(&self, index: usize) -> bool {
        self.dropped.iter().any(|r| r.contains(&index))
    }

    /// How many messages are dropped.
    pub fn dropped_count(&self) -> usize {
        self.dropped.iter().map(ExactSizeIterator::len).sum()
    }

    /// Whether nothing changes.
    pub fn is_noop(&self) -> bool {
        self.dropped_count() == 0 && self.summary.is_none()
    }

    /// The kept items, in order (without the summary).
    pub fn apply<T: Clone>(&self, items: &[T]) -> Vec<T> {
        items
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.is_dropped(*i))
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// The view a model sees: the pinned message, then summaries (the new one, or kept
    /// summaries written by earlier reductions), then the other kept messages in order.
    pub fn view(&self, messages: &[StoredMessage]) -> Vec<ChatMessage> {
        let kept: Vec<(usize, &ChatMessage)> = messages
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.is_dropped(*i))
            .map(|(i, m)| (i, &*m.message))
            .collect();
        let mut out = Vec::with_capacity(kept.len().saturating_add(1));
        out.extend(
            kept.iter()
                .filter(|(i, _)| Some(*i) == self.pinned)
                .map(|(_, m)| (*m).clone()),
        );
        out.extend(self.summary.iter().cloned());
        out.extend(
            kept.iter()
                .filter(|(i, m)| Some(*i) != self.pinned && is_summary(m))
                .map(|(_, m)| (*m).clone()),
        );
        out.extend(
            kept.iter()
                .filter(|(i, m)| Some(*i) != self.pinned && !is_summary(m))
                .map(|(_, m)| (*m).clone()),
        );
        out
    }
}

/// Decides which messages of a history the model sees.
///
/// # Behavior
/// - [`reduce`](ChatReducer::reduce) is given the messages of a window, oldest first, with
///   their stored token counts, and returns a [`Reduction`] of indexes into that slice; it
///   reads and changes no store (the caller applies the reduction: the view shrinks, or, with
///   [`ReducerTrigger::AfterMessageAdded`], the dropped messages are archived and the summary
///   is stored).
/// - The reduction cuts along [`Segmentation`]: it keeps the pinned leading system message and
///   drops only whole groups: those before a kept suffix that starts on a group boundary at or
///   before the last user turn, and earlier summaries that a new summary folds in. So a tool
///   call keeps its results and the last user turn stays, even when it alone is over the
///   reducer's limit. Dropped ranges are sorted, disjoint and within the slice; applying the
///   reduction keeps the order of what is kept.
/// - Given messages that already fit, it drops nothing and writes no summary.
/// - A summary, when the reducer writes one, is a new message marked with
///   [`SUMMARY_METADATA_KEY`] that stands for the dropped messages.
/// - An error (a summarizing reducer's model failing, or answering with an empty summary) is
///   returned to the caller, which then archives and stores nothing of the reduction.
#[async_trait]
pub trait ChatReducer: Send + Sync + fmt::Debug + 'static {
    /// Chooses what to keep of `messages` (oldest first, with their stored token counts).
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction>;
}

/// Forwards [`ChatReducer`] through smart pointers, so `Arc<dyn ChatReducer>` and
/// `Box<dyn ChatReducer>` are reducers too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here, or a default body would silently
/// replace the pointee's own implementation.
macro_rules! forward_chat_reducer {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: ChatReducer + ?Sized> ChatReducer for $pointer<T> {
            async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction> {
                (**self).reduce(messages).await
            }
        }
    )*};
}

forward_chat_reducer!(Arc, Box);

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
        let group_cost: u64 = messages
            .get(range.clone())
            .unwrap_or_default()
            .iter()
            .map(&cost)
            .sum();
        if g >= seg.protected_from || used.saturating_add(group_cost) <= limit {
            used = used.saturating_add(group_cost);
            first_group = g;
        } else {
            break;
        }
    }
    Reduction::new(seg.pinned, seg.group_start(first_group, messages.len()))
}
