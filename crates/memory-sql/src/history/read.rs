//! Reads in pages: the token-budget window (newest first, in one read-only snapshot when it
//! outgrows one statement) and the pages of `read_page`.

use memory_core::{MAX_READ_PAGE, Result, StoredMessage};

use crate::decode::{MESSAGE_COLS, decode_messages};
use crate::driver::{Query, Row, Tx};
use crate::rows::to_i64;
use crate::store::SqlStore;

/// The first page of a budgeted read, in messages. A window that fits in it is read with one
/// statement; a longer one is read again in a snapshot transaction, in pages of four times
/// this, then doubling.
const BUDGET_FIRST_PAGE: i64 = 1024;
/// The largest page of a budgeted read.
const BUDGET_MAX_PAGE: i64 = 1 << 16;

impl SqlStore {
    /// A budgeted window: one statement when it fits in the first page, else every page in
    /// one read-only snapshot, so a clear, archive or expiry between two pages can neither mix
    /// two versions of the thread nor leave a hole.
    pub(super) async fn read_budget(&self, key: &str, budget: u64) -> Result<Vec<StoredMessage>> {
        const CTX: &str = "read a token-budget window";
        let budget = to_i64(budget);
        let first = self
            .budget_page(None, key, i64::MAX, BUDGET_FIRST_PAGE, budget)
            .await?;
        if to_i64(first.len()) < BUDGET_FIRST_PAGE {
            return Ok(decode_messages(key, first).into_iter().rev().collect());
        }
        let mut tx = self.inner.db.begin_read(CTX).await?;
        let window = self.budget_pages(&mut tx, key, budget).await?;
        tx.commit(CTX).await?;
        Ok(window)
    }

    /// A budgeted window read in pages in `tx` (a snapshot), growing from four times the first
    /// page; for a window too long for one statement.
    pub(crate) async fn budget_pages(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        budget: i64,
    ) -> Result<Vec<StoredMessage>> {
        let mut newest_first = Vec::new();
        let mut remaining = budget;
        let mut cursor = i64::MAX;
        let mut page = BUDGET_FIRST_PAGE.saturating_mul(4).min(BUDGET_MAX_PAGE);
        loop {
            let rows = self
                .budget_page(Some(&mut *tx), key, cursor, page, remaining)
                .await?;
            let full = to_i64(rows.len()) == page;
            // The budget and the cursor follow the rows, decodable or not.
            for row in &rows {
                remaining = remaining.saturating_sub(row.int(1)?);
                cursor = row.int(0)?;
            }
            newest_first.extend(decode_messages(key, rows));
            if !full {
                break;
            }
            page = page.saturating_mul(2).min(BUDGET_MAX_PAGE);
        }
        newest_first.reverse();
        Ok(newest_first)
    }

    /// One page of a budgeted read, newest first: the rows of the active messages before
    /// `cursor`, at most `page` of them, whose tokens total at most `remaining`.
    async fn budget_page(
        &self,
        tx: Option<&mut Tx<'_>>,
        key: &str,
        cursor: i64,
        page: i64,
        remaining: i64,
    ) -> Result<Vec<Row>> {
        const CTX: &str = "read a token-budget window";
        let q = Query::shared(&self.inner.history.read_budget)
            .text(key)
            .int(cursor)
            .text(key)
            .int(page)
            .text(key)
            .int(remaining);
        match tx {
            Some(tx) => tx.fetch(CTX, q, MESSAGE_COLS).await,
            None => self.inner.db.fetch(CTX, q, MESSAGE_COLS).await,
        }
    }

    /// A page of [`read_page`](memory_core::HistoryStore::read_page): one statement, the primary key
    /// `(thread_key, seq)` read from `after` on. Only when every row of a page cannot be
    /// decoded does it read the next one (so an empty page always means the end of the
    /// thread).
    pub(super) async fn read_page_rows(
        &self,
        key: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        const CTX: &str = "read a page of a thread";
        let limit = to_i64(limit.clamp(1, MAX_READ_PAGE));
        let mut after = to_i64(after);
        loop {
            let q = Query::shared(&self.inner.history.read_page)
                .text(key)
                .int(after)
                .text(key)
                .int(limit);
            let rows = self.inner.db.fetch(CTX, q, MESSAGE_COLS).await?;
            let Some(last) = rows.last() else {
                return Ok(Vec::new());
            };
            let last = last.int(0)?;
            let full = to_i64(rows.len()) == limit;
            let page = decode_messages(key, rows);
            if !page.is_empty() || !full {
                return Ok(page);
            }
            after = last;
        }
    }
}
