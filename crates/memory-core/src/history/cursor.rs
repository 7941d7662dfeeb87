//! Cursor reads: what a thread gained since a reader last looked, in one round trip.
//!
//! A reader that keeps a thread's window (a cache, an agent between turns) holds a
//! [`ThreadCursor`]: the thread's *epoch* and the last sequence number it has. The epoch is a
//! number the store gives the thread's current shape: it stays the same while messages are only
//! appended, and changes whenever the active window loses messages in any other way (archived,
//! cleared, expired, moved out by an append that reduces the thread, or the thread re-created).
//! [`HistoryStore::read_since`](super::HistoryStore::read_since) with a cursor of the current
//! epoch returns only the window's messages after the cursor ([`Delta::Appended`]); otherwise
//! the whole window ([`Delta::Whole`]). Either way it returns the new cursor and the thread's
//! counts, so a reader keeps a token budget without another call.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::{StoredMessage, ThreadCount};
use crate::error::{Error, Result};
use crate::scope::Scope;

/// The epoch of a thread that holds no message (unknown, cleared or expired). A store gives a
/// thread that holds messages any other value.
pub const NO_EPOCH: u64 = 0;

/// Where a reader stands in one thread: the thread's epoch and the last sequence number the
/// reader holds. Made by a store's [`read_since`](super::HistoryStore::read_since) and given
/// back to the same store (or another store object over the same data) for the next read.
///
/// A cursor names its thread (a fingerprint of the scope), so a store refuses it for any other
/// scope. It is meant for the process that got it: it is not serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadCursor {
    scope: u64,
    epoch: u64,
    seq: u64,
}

impl ThreadCursor {
    /// The cursor of `scope` at `epoch`, holding the messages up to `seq`. Stores make cursors;
    /// a reader only passes them back.
    pub fn new(scope: &Scope, epoch: u64, seq: u64) -> Self {
        Self {
            scope: scope_fingerprint(scope),
            epoch,
            seq,
        }
    }

    /// The thread's epoch when the cursor was made ([`NO_EPOCH`] for a thread that held no
    /// message).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The last sequence number the reader holds: the thread's last sequence number when the
    /// cursor was made.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether the cursor was made for `scope`.
    pub fn is_for(&self, scope: &Scope) -> bool {
        self.scope == scope_fingerprint(scope)
    }

    /// Checks a cursor given to a store's `read_since` for `scope`, whose thread is now at
    /// `epoch` with `last_seq` as its highest sequence number. Returns whether the cursor is
    /// current (same epoch: the store answers [`Delta::Appended`]); `false` means the store
    /// answers [`Delta::Whole`].
    ///
    /// # Errors
    /// [`InvalidInput`](crate::ErrorKind::InvalidInput) when the cursor was made for another
    /// scope, or when it is of the current epoch but past the thread's last sequence number (a
    /// cursor from the future: made by another store's data, or forged).
    pub fn check(&self, scope: &Scope, epoch: u64, last_seq: u64) -> Result<bool> {
        if !self.is_for(scope) {
            return Err(Error::invalid_input(format!(
                "the history cursor was made for another thread, not for {scope}"
            )));
        }
        if self.epoch != epoch {
            return Ok(false);
        }
        if self.seq > last_seq {
            return Err(Error::invalid_input(format!(
                "the history cursor of {scope} holds sequence number {} but the thread ends at {last_seq}: \
                 it was not made by this store",
                self.seq
            )));
        }
        Ok(true)
    }
}

/// A stable-in-process fingerprint of a scope (no allocation).
fn scope_fingerprint(scope: &Scope) -> u64 {
    let mut hasher = DefaultHasher::new();
    scope.hash(&mut hasher);
    hasher.finish()
}

/// What a cursor read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delta {
    /// The cursor is current: `messages` are the messages the window selects after the
    /// cursor's sequence number (often none). The reader's earlier window plus these, trimmed
    /// to the window, is the window now.
    Appended,
    /// No cursor was given, or the thread changed in another way than appends (its epoch
    /// moved): `messages` is the whole window, as [`read`](super::HistoryStore::read) returns
    /// it.
    Whole,
}

impl Delta {
    /// The delta of an answer to a cursor that is `current` (or not): [`Appended`](Self::Appended)
    /// when it is, else [`Whole`](Self::Whole).
    pub const fn for_cursor(current: bool) -> Self {
        if current { Self::Appended } else { Self::Whole }
    }
}

/// The answer of [`HistoryStore::read_since`](super::HistoryStore::read_since).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CursorRead {
    /// Whether `messages` is what was appended after the cursor or the whole window.
    pub delta: Delta,
    /// The messages, in sequence order.
    pub messages: Vec<StoredMessage>,
    /// The cursor to pass next time: the thread's epoch and last sequence number when it was
    /// read.
    pub cursor: ThreadCursor,
    /// The thread's counts when it was read (what [`count`](super::HistoryStore::count) would
    /// have returned).
    pub count: ThreadCount,
}

impl CursorRead {
    /// A cursor read's answer.
    pub fn new(
        delta: Delta,
        messages: Vec<StoredMessage>,
        cursor: ThreadCursor,
        count: ThreadCount,
    ) -> Self {
        Self {
            delta,
            messages,
            cursor,
            count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_checked_against_its_scope_its_epoch_and_the_thread_end() {
        let a = Scope::session("a").unwrap();
        let b = Scope::session("b").unwrap();
        let cursor = ThreadCursor::new(&a, 7, 10);
        assert!(cursor.is_for(&a) && !cursor.is_for(&b));
        assert!(cursor.check(&a, 7, 10).unwrap());
        assert!(cursor.check(&a, 7, 12).unwrap());
        assert!(!cursor.check(&a, 8, 3).unwrap());
        assert!(!cursor.check(&a, NO_EPOCH, 0).unwrap());
        let err = cursor.check(&a, 7, 9).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("not made by this store"), "{err}");
        let err = cursor.check(&b, 7, 10).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    }
}
