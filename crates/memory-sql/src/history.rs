//! [`HistoryStore`] for [`SqlStore`].
//!
//! Every write to a thread first locks its row in `{prefix}threads` (creating it if needed),
//! so writers of one thread, in any number of processes, take turns: sequence numbers are
//! assigned under that lock, inside the transaction that inserts the messages. The thread row
//! also keeps the counters (`last_seq`, `active_count`, `active_tokens`) that answer
//! [`count`](HistoryStore::count) without scanning, and the expiry.
//!
//! The trait's methods are here; what they call is in submodules: [`append`], [`read`] (the
//! paged reads), [`remove`] (archive, clear, purge), [`thread`] (the locked thread row) and
//! [`batch`] (chunks of batch statements). Cursor reads are `cursor.rs`.

mod append;
mod batch;
mod read;
mod remove;
mod thread;

use std::ops::RangeInclusive;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Error, HistoryCapabilities, HistoryStore, Page,
    PageRequest, PreparedBatch, Result, Scope, ScopeFilter, StoredMessage, TenantId, ThreadCount,
    ThreadCursor, Window,
};

use crate::decode::{MESSAGE_COLS, decode_messages};
use crate::driver::{Arg, Col, Query};
use crate::retry::with_retries;
use crate::rows::{to_i64, ttl_ms};
use crate::sql::PURGE_BATCH;
use crate::store::{SqlStore, list_page, tenant_page};

#[async_trait]
impl HistoryStore for SqlStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_ttl(true)
            .with_multi_process(!self.is_private_memory())
            .with_dedupes_ids(true)
            .with_counts_purged(true)
            .with_lists_every_thread(true)
            .with_cursor_reads(true)
            .with_paged_reads(true)
            .with_lists_tenants(true)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        // Counting tokens is the application's work, outside the database's time bound.
        // A large batch is counted off the async executor (`tokens::precount`).
        let counted = memory_core::tokens::precount(&self.inner.counter, messages).await?;
        let batch = PreparedBatch::new(&counted, messages)?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let key = scope.key();
        let (unique_seqs, inserted) = self
            .bounded(
                "append",
                "append",
                with_retries("append", || self.append_once(scope, &key, &batch)),
            )
            .await?;
        tracing::debug!(scope = %scope, inserted, "history.append");
        Ok(AppendOutcome {
            seqs: batch.seqs_for_input(&unique_seqs),
            inserted,
        })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let key = scope.key();
        let sql = &self.inner.history;
        // The `EXISTS` clause of every read: the thread is live now (by the database's clock).
        let live = [Arg::Text(&key)];
        let query = match window {
            Window::All => Query::shared(&sql.read_all).text(&key).args(live),
            Window::Everything => Query::shared(&sql.read_everything).text(&key).args(live),
            Window::After(seq) => Query::shared(&sql.read_after)
                .text(&key)
                .int(to_i64(seq))
                .args(live),
            Window::Last(0) => return Ok(Vec::new()),
            Window::Last(n) => Query::shared(&sql.read_last)
                .text(&key)
                .args(live)
                .int(to_i64(n)),
            Window::TokenBudget(budget) => {
                return self
                    .bounded("read", "read", self.read_budget(&key, budget))
                    .await;
            }
            _ => {
                return Err(Error::unsupported(format!(
                    "window {window:?} is not supported by memory-sql"
                )));
            }
        };
        let rows = self
            .bounded(
                "read",
                "read",
                self.inner.db.fetch("read", query, MESSAGE_COLS),
            )
            .await?;
        Ok(decode_messages(&key, rows))
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let key = scope.key();
        let query = Query::shared(&self.inner.history.count).text(&key);
        let rows = self
            .bounded(
                "count",
                "count",
                self.inner
                    .db
                    .fetch("count", query, &[Col::Int, Col::Int, Col::Int]),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(ThreadCount::default());
        };
        let last_seq = row.uint(0)?;
        let active = row.uint(1)?;
        Ok(ThreadCount {
            active,
            archived: last_seq.saturating_sub(active),
            active_tokens: row.uint(2)?,
            last_seq,
        })
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let first = to_i64((*seqs.start()).max(1));
        let last = to_i64(*seqs.end());
        if first > last {
            return Ok(0);
        }
        let key = scope.key();
        let moved = self
            .bounded(
                "archive",
                "archive",
                with_retries("archive", || self.archive_once(&key, first, last)),
            )
            .await?;
        tracing::debug!(scope = %scope, moved, first, last, "history.archive");
        Ok(moved)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        let removed = self
            .bounded(
                "clear",
                "clear",
                with_retries("clear", || self.clear_once(&key)),
            )
            .await?;
        tracing::debug!(scope = %scope, removed, "history.clear");
        Ok(removed)
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let list = list_page(
            self,
            "list threads",
            "threads",
            "thread_key",
            "last_seq > 0",
            filter,
            page,
        );
        self.bounded("list_threads", "list threads", list).await
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let ttl_ms = ttl.map(ttl_ms).transpose()?;
        let key = scope.key();
        // The expiry is the database's clock + the TTL.
        let q = Query::shared(&self.inner.history.set_ttl)
            .arg(Arg::OptInt(ttl_ms))
            .arg(Arg::OptInt(ttl_ms))
            .text(&key);
        const CTX: &str = "set a thread's TTL";
        let changed = self
            .bounded("set_ttl", CTX, self.inner.db.execute(CTX, q))
            .await?;
        if changed == 0 {
            return Err(Error::not_found(format!("no thread at {scope}")));
        }
        Ok(())
    }

    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.bounded(
            "read_since",
            "read since a cursor",
            self.cursor_read(scope, window, since),
        )
        .await
    }

    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let key = scope.key();
        self.bounded(
            "read_page",
            "read a page of a thread",
            self.read_page_rows(&key, after, limit),
        )
        .await
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        const CTX: &str = "list the tenants of threads";
        let list = tenant_page(self, CTX, &self.inner.history.list_tenants, page);
        self.bounded("list_tenants", CTX, list).await
    }

    async fn purge_expired(&self) -> Result<u64> {
        const CTX: &str = "purge expired threads";
        let mut total = 0u64;
        loop {
            // Each batch is an operation of its own: a long purge is no sign of a dead server.
            let n = self
                .bounded(
                    "purge_expired",
                    CTX,
                    with_retries(CTX, || self.purge_threads_once()),
                )
                .await?;
            total = total.saturating_add(n as u64);
            if n < PURGE_BATCH {
                break;
            }
        }
        tracing::debug!(removed = total, "history.purge_expired");
        Ok(total)
    }
}
