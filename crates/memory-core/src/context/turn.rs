//! What an agent tells its context providers about the history of a run: the window it read
//! before the model ([`ReadWindow`]) and what it stored after ([`StoredTurn`]), so a provider
//! over the same store need not read, count or append again.

use std::sync::Arc;

use crate::history::{AppendOutcome, HistoryStore, StoredMessage, ThreadCount, Window};

/// The history window an agent read for a run, before the model was called: the messages as
/// the store returned them (a retried run's earlier attempt included), the window they were
/// read with, the store, and the thread's counts when the read returned them.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ReadWindow<'a> {
    /// The store the window was read from.
    pub store: &'a Arc<dyn HistoryStore>,
    /// The window the messages were read with.
    pub window: Window,
    /// The messages, in sequence order.
    pub messages: &'a [StoredMessage],
    /// The thread's counts taken in the same read, when the store gave them
    /// ([`read_since`](HistoryStore::read_since)).
    pub count: Option<ThreadCount>,
}

impl<'a> ReadWindow<'a> {
    /// The `messages` read from `store` with `window`, without counts.
    pub fn new(
        store: &'a Arc<dyn HistoryStore>,
        window: Window,
        messages: &'a [StoredMessage],
    ) -> Self {
        Self {
            store,
            window,
            messages,
            count: None,
        }
    }

    /// The same, with the thread's counts taken in the same read.
    pub fn with_count(mut self, count: ThreadCount) -> Self {
        self.count = Some(count);
        self
    }

    /// Whether the window was read from `store` (the same store object, not an equal one).
    pub fn is_from(&self, store: &Arc<dyn HistoryStore>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(self.store), Arc::as_ptr(store))
    }

    /// Whether the messages are every active message of the thread when it was read:
    /// [`Window::All`], a [`Window::Last`] that returned fewer than it asked for, or a window
    /// whose counts show as many active messages as it holds.
    pub fn is_whole(&self) -> bool {
        let len = u64::try_from(self.messages.len()).unwrap_or(u64::MAX);
        match self.window {
            Window::All => true,
            Window::Last(n) => {
                self.messages.len() < n || self.count.is_some_and(|c| c.active == len)
            }
            Window::TokenBudget(_) | Window::After(_) => {
                self.count.is_some_and(|c| c.active == len)
            }
            _ => false,
        }
    }

    /// The active tokens of the thread when it was read: from the counts, or summed over a
    /// whole window; `None` when neither is known.
    pub fn active_tokens(&self) -> Option<u64> {
        if let Some(count) = self.count {
            return Some(count.active_tokens);
        }
        self.is_whole()
            .then(|| self.messages.iter().map(|m| u64::from(m.tokens)).sum())
    }

    /// The thread's newest `n` active messages when it was read (fewer when it held fewer), if
    /// the window holds them.
    pub fn newest(&self, n: usize) -> Option<&'a [StoredMessage]> {
        let newest_first = matches!(
            self.window,
            Window::All | Window::Last(_) | Window::TokenBudget(_) | Window::After(_)
        );
        if !newest_first || (self.messages.len() < n && !self.is_whole()) {
            return None;
        }
        self.messages.get(self.messages.len().saturating_sub(n)..)
    }

    /// The highest sequence number of the thread when it was read, as far as the window shows:
    /// from the counts, else the newest message's (0 for an empty window). A store never gives
    /// a later message a lower number, so an append whose numbers follow this one directly
    /// proves that nothing was appended in between.
    pub fn last_seq(&self) -> u64 {
        self.count
            .map_or_else(|| self.messages.last().map_or(0, |m| m.seq), |c| c.last_seq)
    }
}

/// What an agent stored of a successful run: the input and every message the run produced,
/// appended to its history store as one batch, in the order of `request` then `response`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct StoredTurn<'a> {
    /// The store the run's messages were appended to.
    pub store: &'a Arc<dyn HistoryStore>,
    /// What the append did.
    pub outcome: &'a AppendOutcome,
    /// Whether the agent's reducer changed the thread after the append (archived messages or
    /// stored a summary), so its counts are no longer those of the window plus the batch.
    pub reduced: bool,
}

impl<'a> StoredTurn<'a> {
    /// The `outcome` of appending the run's messages to `store`.
    pub fn new(store: &'a Arc<dyn HistoryStore>, outcome: &'a AppendOutcome) -> Self {
        Self {
            store,
            outcome,
            reduced: false,
        }
    }

    /// The same, with whether the reducer changed the thread after the append.
    pub fn with_reduced(mut self, reduced: bool) -> Self {
        self.reduced = reduced;
        self
    }

    /// Whether the run's messages were appended to `store` (the same store object).
    pub fn is_in(&self, store: &Arc<dyn HistoryStore>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(self.store), Arc::as_ptr(store))
    }

    /// Whether the append stored every message anew, numbered right after `window`'s
    /// [`last_seq`](ReadWindow::last_seq): then nothing else was appended between the read and
    /// the append, and the thread is the window's plus the batch (unless
    /// [`reduced`](Self::reduced)).
    pub fn follows(&self, window: &ReadWindow<'_>) -> bool {
        let seqs = &self.outcome.seqs;
        self.outcome.inserted == seqs.len()
            && seqs
                .iter()
                .zip(window.last_seq().saturating_add(1)..)
                .all(|(seq, want)| *seq == want)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::history::InMemoryHistoryStore;
    use crate::message::ChatMessage;

    fn messages(seqs: std::ops::RangeInclusive<u64>) -> Vec<StoredMessage> {
        seqs.map(|seq| StoredMessage {
            seq,
            tokens: 10,
            archived: false,
            message: ChatMessage::user(format!("m{seq}")).into(),
        })
        .collect()
    }

    fn count(active: u64, last_seq: u64) -> ThreadCount {
        ThreadCount {
            active,
            archived: 0,
            active_tokens: active.saturating_mul(10),
            last_seq,
        }
    }

    #[test]
    fn a_window_is_whole_only_when_it_shows_it() {
        let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
        let held = messages(3..=7);
        let read = |window| ReadWindow::new(&store, window, &held);
        assert!(read(Window::All).is_whole());
        assert!(read(Window::Last(6)).is_whole(), "a short Last read");
        assert!(
            !read(Window::Last(5)).is_whole(),
            "a full Last read may hide more"
        );
        assert!(!read(Window::TokenBudget(50)).is_whole());
        assert!(
            read(Window::TokenBudget(50))
                .with_count(count(5, 7))
                .is_whole()
        );
        assert!(
            !read(Window::TokenBudget(50))
                .with_count(count(9, 7))
                .is_whole()
        );
        assert!(!read(Window::Everything).with_count(count(5, 7)).is_whole());

        assert_eq!(read(Window::All).active_tokens(), Some(50));
        assert_eq!(read(Window::TokenBudget(50)).active_tokens(), None);
        assert_eq!(
            read(Window::TokenBudget(50))
                .with_count(count(9, 12))
                .active_tokens(),
            Some(90)
        );
    }

    #[test]
    fn the_newest_messages_come_from_a_window_that_holds_them() {
        let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
        let held = messages(3..=7);
        let read = |window| ReadWindow::new(&store, window, &held);
        let seqs =
            |m: Option<&[StoredMessage]>| m.map(|m| m.iter().map(|m| m.seq).collect::<Vec<_>>());
        assert_eq!(
            seqs(read(Window::TokenBudget(50)).newest(2)),
            Some(vec![6, 7])
        );
        assert_eq!(seqs(read(Window::TokenBudget(50)).newest(8)), None);
        assert_eq!(seqs(read(Window::All).newest(8)), Some(vec![3, 4, 5, 6, 7]));
        assert_eq!(seqs(read(Window::Last(5)).newest(8)), None);
        assert_eq!(seqs(read(Window::Everything).newest(2)), None);
    }

    #[test]
    fn an_append_follows_a_read_only_when_numbered_right_after_it() {
        let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
        let other: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
        let held = messages(3..=7);
        let read = ReadWindow::new(&store, Window::All, &held);
        assert!(read.is_from(&store) && !read.is_from(&other));
        assert_eq!(read.last_seq(), 7);
        assert_eq!(read.with_count(count(5, 9)).last_seq(), 9);
        let outcome = |seqs: Vec<u64>, inserted| AppendOutcome { seqs, inserted };
        let next = outcome(vec![8, 9], 2);
        assert!(StoredTurn::new(&store, &next).follows(&read));
        assert!(StoredTurn::new(&store, &next).is_in(&store));
        assert!(!StoredTurn::new(&store, &next).is_in(&other));
        assert!(!StoredTurn::new(&store, &next).follows(&read.with_count(count(5, 9))));
        let gap = outcome(vec![9, 10], 2);
        assert!(
            !StoredTurn::new(&store, &gap).follows(&read),
            "another writer appended"
        );
        let deduped = outcome(vec![6, 8], 1);
        assert!(
            !StoredTurn::new(&store, &deduped).follows(&read),
            "a retried batch"
        );
        let empty: Vec<StoredMessage> = Vec::new();
        let first = ReadWindow::new(&store, Window::All, &empty);
        assert!(StoredTurn::new(&store, &outcome(vec![1, 2], 2)).follows(&first));
        assert!(!StoredTurn::new(&store, &outcome(vec![4, 5], 2)).follows(&first));
    }
}
