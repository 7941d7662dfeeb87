//! [`CachedWindow`]: one thread's window as the cache keeps it, and how a cursor read's delta
//! extends it.

use std::sync::Arc;

use memory_core::{StoredMessage, ThreadCursor, Window};

use crate::estimate::estimated_bytes;

/// What every cached window is taken to cost besides its messages (its key, its cursor, the
/// map's bookkeeping), so that even an empty window has a weight and can be evicted.
const WINDOW_OVERHEAD: u64 = 128;

/// The windows the cache keeps, as a key: [`Window`] without the variants a later version may
/// add (a window this cache does not know is read through the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WindowShape {
    /// [`Window::All`].
    All,
    /// [`Window::Last`].
    Last(usize),
    /// [`Window::After`].
    After(u64),
    /// [`Window::TokenBudget`].
    TokenBudget(u64),
    /// [`Window::Everything`].
    Everything,
}

impl WindowShape {
    /// The shape of `window`, or `None` for a window this cache does not know.
    pub(crate) fn of(window: Window) -> Option<Self> {
        match window {
            Window::All => Some(Self::All),
            Window::Last(n) => Some(Self::Last(n)),
            Window::After(seq) => Some(Self::After(seq)),
            Window::TokenBudget(budget) => Some(Self::TokenBudget(budget)),
            Window::Everything => Some(Self::Everything),
            _ => None,
        }
    }

    /// How many of the oldest messages, given by their stored `tokens` from the oldest, fall out of the window: for [`Last`](Self::Last)
    /// all but the last `n`; for [`TokenBudget`](Self::TokenBudget) the oldest ones while the
    /// stored tokens add up to more than the budget (the window is the longest newest run that
    /// fits); none for the others, which only grow while the epoch stays.
    fn excess(self, tokens: &[u32]) -> usize {
        match self {
            Self::Last(n) => tokens.len().saturating_sub(n),
            Self::TokenBudget(budget) => {
                let mut total = tokens
                    .iter()
                    .fold(0u64, |sum, t| sum.saturating_add(u64::from(*t)));
                let mut excess = 0usize;
                for tokens in tokens {
                    if total <= budget {
                        break;
                    }
                    total = total.saturating_sub(u64::from(*tokens));
                    excess = excess.saturating_add(1);
                }
                excess
            }
            Self::All | Self::After(_) | Self::Everything => 0,
        }
    }
}

/// A message in the cache, with its estimated size.
#[derive(Debug, Clone)]
struct CachedMessage {
    message: Arc<StoredMessage>,
    bytes: u64,
}

impl CachedMessage {
    fn new(message: StoredMessage) -> Self {
        Self {
            bytes: estimated_bytes(&message),
            message: Arc::new(message),
        }
    }
}

/// One thread's window and the cursor it was read at. Immutable: a refresh builds a new one
/// (sharing the messages it keeps), so concurrent readers never see a half-updated window.
#[derive(Debug)]
pub(crate) struct CachedWindow {
    messages: Vec<CachedMessage>,
    cursor: ThreadCursor,
    bytes: u64,
    /// Whether the messages are consecutive and end at the cursor: then the window holds every
    /// message the store's window counted, and a trim by count or by stored tokens here is the
    /// store's own. A window with a hole (a row the store could not decode and left out, or an
    /// archived message inside the active window) is never trimmed here: see
    /// [`extended`](Self::extended).
    dense: bool,
}

impl CachedWindow {
    /// The window a [`Delta::Whole`](memory_core::Delta::Whole) answer returned.
    pub(crate) fn whole(messages: Vec<StoredMessage>, cursor: ThreadCursor) -> Self {
        let consecutive = messages
            .windows(2)
            .all(|pair| matches!(pair, [a, b] if a.seq.checked_add(1) == Some(b.seq)));
        let dense = consecutive && messages.last().is_none_or(|m| m.seq == cursor.seq());
        Self::from_messages(
            messages.into_iter().map(CachedMessage::new).collect(),
            cursor,
            dense,
        )
    }

    fn from_messages(messages: Vec<CachedMessage>, cursor: ThreadCursor, dense: bool) -> Self {
        let bytes = messages
            .iter()
            .fold(WINDOW_OVERHEAD, |sum, m| sum.saturating_add(m.bytes));
        Self {
            messages,
            cursor,
            bytes,
            dense,
        }
    }

    /// The cursor the window was read at.
    pub(crate) fn cursor(&self) -> ThreadCursor {
        self.cursor
    }

    /// About how many bytes the window holds (never 0).
    pub(crate) fn weight(&self) -> u64 {
        self.bytes
    }

    /// A copy of the window's messages, as a read returns them.
    pub(crate) fn to_messages(&self) -> Vec<StoredMessage> {
        self.messages.iter().map(|m| (*m.message).clone()).collect()
    }

    /// The window after a [`Delta::Appended`](memory_core::Delta::Appended) answer of
    /// `appended` messages at `cursor`: this window plus them, trimmed to `shape`.
    ///
    /// `None` when the answer does not continue this window exactly: another epoch, or sequence
    /// numbers that are not the ones after this window's cursor, one by one, up to the new
    /// cursor (the store left a message out: a row it could not decode, a budget it stopped at,
    /// a window that starts later). The caller then reads the window whole instead of trusting
    /// a merge.
    pub(crate) fn extended(
        &self,
        shape: WindowShape,
        appended: Vec<StoredMessage>,
        cursor: ThreadCursor,
    ) -> Option<Self> {
        if cursor.epoch() != self.cursor.epoch() {
            return None;
        }
        // A window with a hole cannot be trimmed here: the store counted the missing rows
        // (their count, their stored tokens) and this window cannot.
        let trims = matches!(shape, WindowShape::Last(_) | WindowShape::TokenBudget(_));
        if trims && !self.dense {
            return None;
        }
        let mut last = self.cursor.seq();
        for message in &appended {
            if Some(message.seq) != last.checked_add(1) {
                return None;
            }
            last = message.seq;
        }
        if last != cursor.seq() {
            return None;
        }
        let tokens: Vec<u32> = self
            .messages
            .iter()
            .map(|m| m.message.tokens)
            .chain(appended.iter().map(|m| m.tokens))
            .collect();
        let excess = shape.excess(&tokens);
        let kept_old = self.messages.len().saturating_sub(excess);
        let dropped_new = excess.saturating_sub(self.messages.len());
        let mut messages = Vec::with_capacity(kept_old.saturating_add(appended.len()));
        messages.extend(self.messages.iter().skip(excess).cloned());
        messages.extend(
            appended
                .into_iter()
                .skip(dropped_new)
                .map(CachedMessage::new),
        );
        Some(Self::from_messages(messages, cursor, self.dense))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::{ChatMessage, Scope};

    fn message(seq: u64, tokens: u32) -> StoredMessage {
        StoredMessage {
            seq,
            tokens,
            archived: false,
            message: ChatMessage::user(format!("m{seq}")).into(),
        }
    }

    fn seqs(window: &CachedWindow) -> Vec<u64> {
        window.to_messages().iter().map(|m| m.seq).collect()
    }

    #[test]
    fn a_delta_is_appended_and_trimmed_to_the_window() {
        let scope = Scope::session("w").unwrap();
        let at = |seq| ThreadCursor::new(&scope, 7, seq);
        let last = CachedWindow::whole(vec![message(2, 1), message(3, 1)], at(3));
        let next = last
            .extended(
                WindowShape::Last(2),
                vec![message(4, 1), message(5, 1), message(6, 1)],
                at(6),
            )
            .unwrap();
        assert_eq!(seqs(&next), [5, 6]);

        let budget = CachedWindow::whole(vec![message(1, 3), message(2, 3)], at(2));
        let next = budget
            .extended(WindowShape::TokenBudget(7), vec![message(3, 2)], at(3))
            .unwrap();
        assert_eq!(seqs(&next), [2, 3]);
        let all = CachedWindow::whole(vec![message(1, 3)], at(1));
        let next = all
            .extended(WindowShape::All, vec![message(2, 9)], at(2))
            .unwrap();
        assert_eq!(seqs(&next), [1, 2]);
        assert!(next.weight() > all.weight());
    }

    #[test]
    fn a_delta_that_does_not_continue_the_window_is_refused() {
        let scope = Scope::session("w").unwrap();
        let at = |seq| ThreadCursor::new(&scope, 7, seq);
        let window = CachedWindow::whole(vec![message(1, 1), message(2, 1)], at(2));
        // A gap before the delta (a budget the store stopped at, a row it left out).
        assert!(
            window
                .extended(WindowShape::TokenBudget(5), vec![message(4, 1)], at(4))
                .is_none()
        );
        // A gap inside the delta.
        assert!(
            window
                .extended(WindowShape::All, vec![message(3, 1), message(5, 1)], at(5))
                .is_none()
        );
        // Messages the window did not select after the cursor.
        assert!(window.extended(WindowShape::All, vec![], at(3)).is_none());
        // Another epoch.
        let other = ThreadCursor::new(&scope, 8, 3);
        assert!(
            window
                .extended(WindowShape::All, vec![message(3, 1)], other)
                .is_none()
        );
        // A window with a hole (a row the store left out: seq 4 of 1..5) is not trimmed here:
        // the store's Last(3) after seq 6 is [5, 6], which the cache cannot know.
        let holed = CachedWindow::whole(vec![message(3, 1), message(5, 1)], at(5));
        assert!(
            holed
                .extended(WindowShape::Last(3), vec![message(6, 1)], at(6))
                .is_none()
        );
        assert!(
            holed
                .extended(WindowShape::TokenBudget(2), vec![message(6, 1)], at(6))
                .is_none()
        );
        // A window whose newest rows were left out does not end at its cursor: no trim either.
        let short = CachedWindow::whole(vec![message(1, 1), message(2, 1)], at(3));
        assert!(
            short
                .extended(WindowShape::Last(2), vec![message(4, 1)], at(4))
                .is_none()
        );
        // Windows that are not trimmed still grow.
        assert_eq!(
            seqs(
                &holed
                    .extended(WindowShape::All, vec![message(6, 1)], at(6))
                    .unwrap()
            ),
            [3, 5, 6]
        );
        // Nothing new is a window unchanged.
        assert_eq!(
            seqs(&window.extended(WindowShape::All, vec![], at(2)).unwrap()),
            [1, 2]
        );
    }
}
