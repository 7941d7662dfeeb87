//! The thread row as a writer sees it under its lock, and its counters.

use memory_core::{Error, Result};

use crate::driver::{Col, Row};

/// Columns of a thread row as writers lock it.
pub(super) const THREAD_COLS: &[Col] = &[Col::Int, Col::Int, Col::Int, Col::Int, Col::Int];

/// A thread row as a writer sees it under its lock.
#[derive(Debug, Clone, Copy)]
pub(super) struct ThreadRow {
    pub(super) last_seq: u64,
    pub(super) active_count: u64,
    pub(super) active_tokens: u64,
    pub(super) ttl_ms: Option<i64>,
    /// Whether the thread expired, by the database's clock.
    pub(super) expired: bool,
}

impl ThreadRow {
    /// A thread row not written yet.
    pub(super) fn fresh(ttl_ms: Option<i64>) -> Self {
        Self {
            last_seq: 0,
            active_count: 0,
            active_tokens: 0,
            ttl_ms,
            expired: false,
        }
    }

    /// The row as [`THREAD_COLS`] reads it.
    pub(super) fn from_row(row: &Row) -> Result<Self> {
        Ok(Self {
            last_seq: row.uint(0)?,
            active_count: row.uint(1)?,
            active_tokens: row.uint(2)?,
            ttl_ms: row.opt_int(3)?,
            expired: row.opt_int(4)?.is_some(),
        })
    }
}

/// A thread counter after an addition, as an SQL integer; `None` (an overflow) or a value past
/// `i64::MAX` means the stored counter is corrupt.
pub(super) fn counter(key: &str, what: &str, value: Option<u64>) -> Result<i64> {
    value.and_then(|v| i64::try_from(v).ok()).ok_or_else(|| {
        Error::serialization(format!(
            "thread {key:?}: its stored {what} is corrupt (out of range)"
        ))
    })
}
