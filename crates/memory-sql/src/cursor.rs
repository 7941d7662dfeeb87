//! Cursor reads ([`HistoryStore::read_since`](memory_core::HistoryStore::read_since)) for
//! [`SqlStore`]: the thread's epoch, counts and the window's new messages in one statement.
//!
//! The thread row keeps an `epoch` (schema v5): a new row draws a random one from the column's
//! default; an archive that moves a message and an append that restarts an expired thread set
//! one from [`fresh_epoch`](crate::rows::fresh_epoch); a clear or a purge deletes the row, so a
//! thread written again gets a new row and a new epoch. Appends never change it.
//!
//! One `SELECT` answers a read: the live thread row, `LEFT JOIN`ed to the window's messages
//! (so the row comes back even when the window is empty; no row at all means no live thread).
//! The window's lower bound is chosen in the statement from the row's own epoch: above the
//! cursor's sequence number when the epochs match, from the start of the window otherwise. A
//! single statement is one snapshot on SQLite, PostgreSQL and MySQL/MariaDB, so the epoch, the
//! counts and the messages always agree. The cursor is checked afterwards
//! ([`ThreadCursor::check`]): a cursor from the future is refused once its thread is read.
//!
//! A token-budget window is summed from the newest message. With a current cursor the walk
//! stops at the cursor, so the statement scans only the messages after it. Without one, the
//! statement scans the newest [`WHOLE_BUDGET_SPAN`] sequence numbers; when the budget still
//! has room after them and older active messages exist, the read falls back to the paged
//! budget read of [`read`](memory_core::HistoryStore::read) in one read-only snapshot (with the
//! thread row read again in it): a [`Delta::Whole`] answer over a long window costs a few
//! statements, never an [`Delta::Appended`] one.
//!
//! The statements are rendered at open ([`CursorSql`](crate::sql::CursorSql), in `sql.rs`).

use memory_core::{
    CursorRead, Delta, Error, NO_EPOCH, Result, Scope, StoredMessage, ThreadCount, ThreadCursor,
    Window,
};

use crate::decode::decode_messages;
use crate::driver::{Col, Query, Row};
use crate::rows::to_i64;
use crate::store::SqlStore;

/// The sequence numbers a token-budget read without a current cursor scans in its one
/// statement (the newest ones); a budget with room left after them falls back to paged reads.
const WHOLE_BUDGET_SPAN: i64 = 1024;

/// The columns of a cursor read's rows: the message (all `NULL` on the row of a thread whose
/// window is empty), then the thread row.
const CURSOR_COLS: &[Col] = &[
    Col::Int,
    Col::Int,
    Col::Flag,
    Col::Text,
    Col::Int,
    Col::Int,
    Col::Int,
    Col::Int,
    Col::Int,
];
/// Where the thread row's columns start in [`CURSOR_COLS`] (and in [`HEAD_COLS`]: 0).
const HEAD_AT: usize = 4;
/// The columns of the thread row alone: epoch, last seq, active count, active tokens, first
/// active seq.
const HEAD_COLS: &[Col] = &[Col::Int, Col::Int, Col::Int, Col::Int, Col::Int];

/// The thread row as a cursor read sees it.
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    epoch: u64,
    count: ThreadCount,
    first_active: u64,
}

impl Head {
    /// The thread row's columns from `at` on; a thread that holds no message is at
    /// [`NO_EPOCH`] whatever its row says.
    fn from_row(row: &Row, at: usize) -> Result<Self> {
        let col = |i: usize| at.saturating_add(i);
        let last_seq = row.uint(col(1))?;
        let active = row.uint(col(2))?;
        Ok(Self {
            epoch: if last_seq == 0 {
                NO_EPOCH
            } else {
                row.uint(col(0))?
            },
            count: ThreadCount {
                active,
                archived: last_seq.saturating_sub(active),
                active_tokens: row.uint(col(3))?,
                last_seq,
            },
            first_active: row.uint(col(4))?,
        })
    }
}

impl SqlStore {
    /// [`HistoryStore::read_since`](memory_core::HistoryStore::read_since): one statement
    /// (see the module docs).
    pub(crate) async fn cursor_read(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        const CTX: &str = "read since a cursor";
        if let Some(cursor) = since
            && !cursor.is_for(scope)
        {
            // Refused before any statement (`check` says why).
            cursor.check(scope, NO_EPOCH, 0)?;
        }
        let key = scope.key();
        let sql = &self.inner.cursor;
        // A cursor epoch past `i64::MAX` was never made here: -1 matches no stored epoch (a
        // negative one is refused as corrupt when decoded).
        let (epoch, seq) = since.map_or((0, 0), |c| {
            (i64::try_from(c.epoch()).unwrap_or(-1), to_i64(c.seq()))
        });
        let k = key.as_str();
        let mut budget = None;
        let query = match window {
            Window::All => Query::shared(&sql.all)
                .text(k)
                .text(k)
                .int(epoch)
                .int(seq)
                .text(k),
            Window::After(after) => Query::shared(&sql.after)
                .text(k)
                .int(to_i64(after))
                .text(k)
                .int(epoch)
                .int(seq)
                .text(k),
            Window::Last(n) => Query::shared(&sql.last)
                .text(k)
                .text(k)
                .int(epoch)
                .int(seq)
                .text(k)
                .int(to_i64(n)),
            Window::Everything => Query::shared(&sql.everything)
                .text(k)
                .int(epoch)
                .int(seq)
                .text(k),
            Window::TokenBudget(tokens) => {
                let tokens = to_i64(tokens);
                budget = Some(tokens);
                Query::shared(&sql.budget)
                    .int(tokens)
                    .text(k)
                    .text(k)
                    .int(epoch)
                    .int(seq)
                    .int(WHOLE_BUDGET_SPAN)
                    .text(k)
                    .text(k)
                    .int(tokens)
            }
            _ => {
                return Err(Error::unsupported(format!(
                    "window {window:?} is not supported by memory-sql"
                )));
            }
        }
        .text(k);
        let rows = self.inner.db.fetch(CTX, query, CURSOR_COLS).await?;
        let mut head = Head::default();
        let mut budget_spent = false;
        let mut message_rows = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            if i == 0 {
                head = Head::from_row(&row, HEAD_AT)?;
            }
            if row.is_null(0) {
                // The row of a thread whose window is empty.
                continue;
            }
            if budget.is_some() && row.is_null(3) {
                // The first message past the budget.
                budget_spent = true;
                continue;
            }
            message_rows.push(row);
        }
        let current = match since {
            Some(cursor) => cursor.check(scope, head.epoch, head.count.last_seq)?,
            None => false,
        };
        if let Some(tokens) = budget
            && !current
            && !budget_spent
            && head
                .first_active
                .saturating_add(to_i64(WHOLE_BUDGET_SPAN).unsigned_abs())
                <= head.count.last_seq
        {
            // The budget had room after the span and older active messages may exist.
            return self.whole_budget(scope, &key, tokens, since).await;
        }
        Ok(CursorRead::new(
            Delta::for_cursor(current),
            decode_messages(&key, message_rows),
            ThreadCursor::new(scope, head.epoch, head.count.last_seq),
            head.count,
        ))
    }

    /// A token-budget window too long for one statement: the thread row and the paged budget
    /// read in one read-only snapshot.
    async fn whole_budget(
        &self,
        scope: &Scope,
        key: &str,
        tokens: i64,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        const CTX: &str = "read since a cursor (a long token-budget window)";
        let mut tx = self.inner.db.begin_read(CTX).await?;
        let rows = tx
            .fetch(
                CTX,
                Query::shared(&self.inner.cursor.head).text(key),
                HEAD_COLS,
            )
            .await?;
        let head = match rows.first() {
            Some(row) => Head::from_row(row, 0)?,
            None => Head::default(),
        };
        let mut messages: Vec<StoredMessage> = if rows.is_empty() {
            Vec::new()
        } else {
            self.budget_pages(&mut tx, key, tokens).await?
        };
        tx.commit(CTX).await?;
        let current = match since {
            Some(cursor) => cursor.check(scope, head.epoch, head.count.last_seq)?,
            None => false,
        };
        let delta = match since {
            // The thread came back to the cursor's epoch in between (epochs do not repeat, so
            // only in theory): the walk above the cursor is the same walk, cut at it.
            Some(cursor) if current => {
                messages.retain(|m| m.seq > cursor.seq());
                Delta::Appended
            }
            _ => Delta::Whole,
        };
        Ok(CursorRead::new(
            delta,
            messages,
            ThreadCursor::new(scope, head.epoch, head.count.last_seq),
            head.count,
        ))
    }
}
