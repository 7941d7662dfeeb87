//! [`HistoryStore`] for [`SqlStore`].
//!
//! Every write to a thread first locks its row in `{prefix}threads` (creating it if needed),
//! so writers of one thread, in any number of processes, take turns: sequence numbers are
//! assigned under that lock, inside the transaction that inserts the messages. The thread row
//! also keeps the counters (`last_seq`, `active_count`, `active_tokens`) that answer
//! [`count`](HistoryStore::count) without scanning, and the expiry.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    AppendOutcome, ChatMessage, Error, HistoryCapabilities, HistoryStore, Page, PageRequest,
    PreparedBatch, PreparedMessage, Result, Scope, ScopeFilter, StoredMessage, ThreadCount, Window,
};

use crate::config::TablePrefix;
use crate::dialect::{Dialect, MAX_PARAMS, MAX_STATEMENT_BYTES};
use crate::driver::{Arg, Col, Query, Row, Tx};
use crate::error::{MAX_RETRIES, backoff, is_retryable, retries_exhausted};
use crate::store::{SqlStore, duration_ms, expiry, list_page, now_ms, scope_args};

/// Columns of a message row as reads select them.
const MESSAGE_COLS: &[Col] = &[Col::Int, Col::Int, Col::Flag, Col::Text];
/// Columns of a thread row as writers lock it.
const THREAD_COLS: &[Col] = &[Col::Int, Col::Int, Col::Int, Col::Int, Col::Int];
/// The first page of a budgeted read, in messages; each next page is twice as large.
const BUDGET_FIRST_PAGE: i64 = 256;
/// Expired threads removed per purge transaction.
const PURGE_BATCH: usize = 256;

/// The fixed statements of the history store, rendered for one dialect and prefix at open.
pub(crate) struct HistorySql {
    dialect: Dialect,
    prefix: TablePrefix,
    upsert_thread: Arc<str>,
    lock_thread: Arc<str>,
    insert_thread: Arc<str>,
    update_thread: Arc<str>,
    delete_messages: Arc<str>,
    delete_thread: Arc<str>,
    read_last: Arc<str>,
    read_all: Arc<str>,
    read_after: Arc<str>,
    read_everything: Arc<str>,
    read_budget: Arc<str>,
    count: Arc<str>,
    lock_live: Arc<str>,
    archive_counters: Arc<str>,
    archive_messages: Arc<str>,
    set_ttl: Arc<str>,
    purge_select: Arc<str>,
}

/// `EXISTS` clause: the thread (`?` = key) is live at `?` = now.
const LIVE: &str = "EXISTS (SELECT 1 FROM {prefix}threads t WHERE t.thread_key = ? \
                    AND (t.expires_at IS NULL OR t.expires_at > ?))";

impl HistorySql {
    pub(crate) fn new(dialect: Dialect, prefix: &TablePrefix) -> Self {
        let r = |t: &str| -> Arc<str> { dialect.render(prefix, t).into() };
        let for_update = dialect.for_update();
        let select_msgs = "SELECT seq, tokens, archived, body FROM {prefix}messages";
        Self {
            dialect,
            prefix: prefix.clone(),
            upsert_thread: r("INSERT INTO {prefix}threads \
                 (thread_key, tenant, user_id, agent_id, source, session_id, ttl_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (thread_key) DO UPDATE SET thread_key = excluded.thread_key \
                 RETURNING last_seq, active_count, active_tokens, ttl_ms, expires_at"),
            lock_thread: r(&format!(
                "SELECT last_seq, active_count, active_tokens, ttl_ms, expires_at \
                 FROM {{prefix}}threads WHERE thread_key = ?{for_update}"
            )),
            insert_thread: r("INSERT INTO {prefix}threads \
                 (thread_key, tenant, user_id, agent_id, source, session_id, ttl_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"),
            update_thread: r(
                "UPDATE {prefix}threads SET last_seq = ?, active_count = ?, \
                 active_tokens = ?, ttl_ms = ?, expires_at = ? WHERE thread_key = ?",
            ),
            delete_messages: r("DELETE FROM {prefix}messages WHERE thread_key = ?"),
            delete_thread: r("DELETE FROM {prefix}threads WHERE thread_key = ?"),
            read_last: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND archived = 0 AND {LIVE} \
                 ORDER BY seq DESC LIMIT ?"
            )),
            read_all: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND archived = 0 AND {LIVE} ORDER BY seq"
            )),
            read_after: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND archived = 0 AND seq > ? AND {LIVE} \
                 ORDER BY seq"
            )),
            read_everything: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND {LIVE} ORDER BY seq"
            )),
            // One page of a budgeted read: the newest `LIMIT` active messages before the
            // cursor, of which only the run whose token total stays within the budget is sent.
            read_budget: r(&format!(
                "SELECT seq, tokens, archived, body FROM (\
                   SELECT seq, tokens, archived, body, SUM(tokens) OVER (ORDER BY seq DESC \
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running \
                   FROM ({select_msgs} WHERE thread_key = ? AND archived = 0 AND seq < ? \
                     AND {LIVE} ORDER BY seq DESC LIMIT ?) newest\
                 ) w WHERE running <= ? ORDER BY seq DESC"
            )),
            count: r(
                "SELECT last_seq, active_count, active_tokens FROM {prefix}threads \
                 WHERE thread_key = ? AND (expires_at IS NULL OR expires_at > ?)",
            ),
            lock_live: r(&format!(
                "SELECT last_seq FROM {{prefix}}threads WHERE thread_key = ? \
                 AND (expires_at IS NULL OR expires_at > ?){for_update}"
            )),
            archive_counters: r("UPDATE {prefix}threads SET \
                 active_count = active_count - (SELECT COUNT(*) FROM {prefix}messages \
                   WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?), \
                 active_tokens = active_tokens - (SELECT COALESCE(SUM(tokens), 0) \
                   FROM {prefix}messages \
                   WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?) \
                 WHERE thread_key = ?"),
            archive_messages: r("UPDATE {prefix}messages SET archived = 1 \
                 WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?"),
            set_ttl: r("UPDATE {prefix}threads SET ttl_ms = ?, expires_at = ? \
                 WHERE thread_key = ? AND last_seq > 0 \
                 AND (expires_at IS NULL OR expires_at > ?)"),
            purge_select: r(&format!(
                "SELECT thread_key FROM {{prefix}}threads \
                 WHERE expires_at IS NOT NULL AND expires_at <= ? \
                 ORDER BY expires_at LIMIT {PURGE_BATCH}{for_update}"
            )),
        }
    }

    fn render(&self, template: &str) -> String {
        self.dialect.render(&self.prefix, template)
    }
}

/// A thread row as a writer sees it under its lock.
#[derive(Debug, Clone, Copy)]
struct ThreadRow {
    last_seq: i64,
    active_count: i64,
    active_tokens: i64,
    ttl_ms: Option<i64>,
    expires_at: Option<i64>,
}

impl ThreadRow {
    fn fresh(ttl_ms: Option<i64>) -> Self {
        Self {
            last_seq: 0,
            active_count: 0,
            active_tokens: 0,
            ttl_ms,
            expires_at: None,
        }
    }

    fn from_row(row: &Row) -> Result<Self> {
        Ok(Self {
            last_seq: row.int(0)?,
            active_count: row.int(1)?,
            active_tokens: row.int(2)?,
            ttl_ms: row.opt_int(3)?,
            expires_at: row.opt_int(4)?,
        })
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or_default()
}

fn decode_message(mut row: Row) -> Result<StoredMessage> {
    let seq = row.uint(0)?;
    let tokens = u32::try_from(row.int(1)?).map_err(|_| {
        Error::serialization(format!("message {seq} has an impossible token count"))
    })?;
    let archived = row.int(2)? != 0;
    let body = row.take_text(3)?;
    let message = ChatMessage::from_json(&body).map_err(|err| {
        Error::serialization(format!(
            "stored message {seq} cannot be decoded: {}",
            err.message()
        ))
        .with_source(err)
    })?;
    Ok(StoredMessage {
        seq,
        tokens,
        archived,
        message,
    })
}

fn decode_messages(rows: Vec<Row>) -> Result<Vec<StoredMessage>> {
    rows.into_iter().map(decode_message).collect()
}

/// Runs `op` again while it loses races the database reports, with a short backoff.
pub(crate) async fn with_retries<T, F, Fut>(ctx: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(err) if is_retryable(&err) => {
                attempt += 1;
                if attempt > MAX_RETRIES {
                    return Err(retries_exhausted(ctx, err));
                }
                tracing::debug!(%err, attempt, "memory-sql: retrying after a lost race");
                tokio::time::sleep(backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

impl SqlStore {
    /// Locks the thread row, creating it if missing; returns its state.
    async fn lock_thread(
        &self,
        tx: &mut Tx<'_>,
        scope: &Scope,
        key: &str,
        default_ttl: Option<i64>,
    ) -> Result<ThreadRow> {
        const CTX: &str = "append: lock the thread";
        let sql = &self.inner.history;
        let row_args = scope_args(scope);
        if self.inner.db.dialect.has_upsert_returning() {
            let q = Query::shared(&sql.upsert_thread)
                .text(key)
                .args(row_args)
                .arg(Arg::OptInt(default_ttl));
            let rows = tx.fetch(CTX, q, THREAD_COLS).await?;
            let row = rows
                .first()
                .ok_or_else(|| Error::serialization("the thread upsert returned no row"))?;
            return ThreadRow::from_row(row);
        }
        let rows = tx
            .fetch(CTX, Query::shared(&sql.lock_thread).text(key), THREAD_COLS)
            .await?;
        if let Some(row) = rows.first() {
            return ThreadRow::from_row(row);
        }
        // A writer that creates the same thread at the same moment makes one of the two
        // inserts fail (duplicate key or deadlock): that transaction is retried and finds
        // the row.
        let q = Query::shared(&sql.insert_thread)
            .text(key)
            .args(row_args)
            .arg(Arg::OptInt(default_ttl));
        tx.execute(CTX, q).await?;
        Ok(ThreadRow::fresh(default_ttl))
    }

    /// The sequence numbers of those of `ids` the thread already holds.
    async fn existing_ids(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        batch: &PreparedBatch<'_>,
    ) -> Result<HashMap<String, u64>> {
        let mut found = HashMap::new();
        for chunk in batch.unique.chunks(MAX_PARAMS - 1) {
            let placeholders = vec!["?"; chunk.len()].join(", ");
            let sql = self.inner.history.render(&format!(
                "SELECT message_id, seq FROM {{prefix}}messages \
                 WHERE thread_key = ? AND message_id IN ({placeholders})"
            ));
            let q = Query::built(sql, chunk.len())
                .text(key)
                .args(chunk.iter().map(|m| Arg::Text(m.message.id.as_str())));
            for mut row in tx
                .fetch("append: find known ids", q, &[Col::Text, Col::Int])
                .await?
            {
                let seq = row.uint(1)?;
                found.insert(row.take_text(0)?, seq);
            }
        }
        Ok(found)
    }

    /// Inserts `rows` with one multi-row `INSERT` per chunk (chunks respect the bind-parameter
    /// limit and keep each statement under a few MiB).
    async fn insert_messages(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        rows: &[(i64, &PreparedMessage<'_>)],
    ) -> Result<()> {
        const PARAMS_PER_ROW: usize = 7;
        let mut start = 0;
        while start < rows.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < rows.len()
                && (end == start
                    || ((end - start + 1) * PARAMS_PER_ROW <= MAX_PARAMS
                        && bytes + rows[end].1.json.len() <= MAX_STATEMENT_BYTES))
            {
                bytes += rows[end].1.json.len();
                end += 1;
            }
            let chunk = &rows[start..end];
            let mut sql = String::with_capacity(120 + chunk.len() * 26);
            sql.push_str(
                "INSERT INTO {prefix}messages \
                 (thread_key, seq, message_id, role, tokens, archived, created_at, body) VALUES ",
            );
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str("(?, ?, ?, ?, ?, 0, ?, ?)");
            }
            let mut q = Query::built(self.inner.history.render(&sql), chunk.len());
            for (seq, m) in chunk {
                q = q.text(key).int(*seq).text(m.message.id.as_str()).args([
                    Arg::Text(m.message.role.as_str()),
                    Arg::Int(i64::from(m.tokens)),
                    Arg::Int(m.message.created_at.timestamp_millis()),
                    Arg::Text(&m.json),
                ]);
            }
            tx.execute("append: insert messages", q).await?;
            start = end;
        }
        Ok(())
    }

    async fn append_once(
        &self,
        scope: &Scope,
        key: &str,
        batch: &PreparedBatch<'_>,
    ) -> Result<(Vec<u64>, usize)> {
        const CTX: &str = "append";
        let inner = &self.inner;
        let now = now_ms();
        let default_ttl = inner.default_ttl.map(duration_ms);
        let mut tx = inner.db.begin(CTX).await?;
        let mut thread = self.lock_thread(&mut tx, scope, key, default_ttl).await?;
        if thread.expires_at.is_some_and(|at| at <= now) {
            // An expired thread is gone: the append starts a new one at sequence number 1.
            tx.execute(
                "append: drop the expired thread",
                Query::shared(&inner.history.delete_messages).text(key),
            )
            .await?;
            thread = ThreadRow::fresh(default_ttl);
        }
        let existing = if thread.last_seq == 0 {
            HashMap::new()
        } else {
            self.existing_ids(&mut tx, key, batch).await?
        };
        let mut unique_seqs = Vec::with_capacity(batch.unique.len());
        let mut new_rows = Vec::with_capacity(batch.unique.len());
        let mut next = thread.last_seq;
        let mut new_tokens = 0i64;
        for prepared in &batch.unique {
            if let Some(&seq) = existing.get(prepared.message.id.as_str()) {
                unique_seqs.push(seq);
                continue;
            }
            next += 1;
            new_tokens += i64::from(prepared.tokens);
            unique_seqs.push(to_u64(next));
            new_rows.push((next, prepared));
        }
        self.insert_messages(&mut tx, key, &new_rows).await?;
        let inserted = new_rows.len();
        let expires_at = expiry(now, thread.ttl_ms);
        if inserted > 0 || expires_at.is_some() || thread.last_seq == 0 {
            let q = Query::shared(&inner.history.update_thread)
                .int(next)
                .int(thread.active_count + i64::try_from(inserted).unwrap_or(i64::MAX))
                .int(thread.active_tokens + new_tokens)
                .arg(Arg::OptInt(thread.ttl_ms))
                .arg(Arg::OptInt(expires_at))
                .text(key);
            tx.execute("append: update the thread", q).await?;
        }
        tx.commit(CTX).await?;
        Ok((unique_seqs, inserted))
    }

    async fn read_budget(&self, key: &str, budget: u64) -> Result<Vec<StoredMessage>> {
        let mut newest_first = Vec::new();
        let mut remaining = to_i64(budget);
        let mut cursor = i64::MAX;
        let mut page = BUDGET_FIRST_PAGE;
        loop {
            let now = now_ms();
            let q = Query::shared(&self.inner.history.read_budget)
                .text(key)
                .int(cursor)
                .text(key)
                .int(now)
                .int(page)
                .int(remaining);
            let rows = self
                .inner
                .db
                .fetch("read a token-budget window", q, MESSAGE_COLS)
                .await?;
            let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) == page;
            for row in rows {
                let message = decode_message(row)?;
                remaining -= i64::from(message.tokens);
                cursor = to_i64(message.seq);
                newest_first.push(message);
            }
            if !full {
                break;
            }
            page = page.saturating_mul(2).min(1 << 16);
        }
        newest_first.reverse();
        Ok(newest_first)
    }

    async fn archive_once(&self, key: &str, first: i64, last: i64) -> Result<u64> {
        const CTX: &str = "archive";
        let sql = &self.inner.history;
        let mut tx = self.inner.db.begin(CTX).await?;
        let live = tx
            .fetch(
                CTX,
                Query::shared(&sql.lock_live).text(key).int(now_ms()),
                &[Col::Int],
            )
            .await?;
        if live.is_empty() {
            tx.commit(CTX).await?;
            return Ok(0);
        }
        let counters = Query::shared(&sql.archive_counters)
            .text(key)
            .int(first)
            .int(last)
            .text(key)
            .int(first)
            .int(last)
            .text(key);
        tx.execute(CTX, counters).await?;
        let moved = tx
            .execute(
                CTX,
                Query::shared(&sql.archive_messages)
                    .text(key)
                    .int(first)
                    .int(last),
            )
            .await?;
        tx.commit(CTX).await?;
        Ok(moved)
    }

    async fn clear_once(&self, key: &str) -> Result<u64> {
        const CTX: &str = "clear";
        let sql = &self.inner.history;
        let mut tx = self.inner.db.begin(CTX).await?;
        let now = now_ms();
        let rows = tx
            .fetch(CTX, Query::shared(&sql.lock_thread).text(key), THREAD_COLS)
            .await?;
        let Some(row) = rows.first() else {
            tx.commit(CTX).await?;
            return Ok(0);
        };
        let thread = ThreadRow::from_row(row)?;
        let deleted = tx
            .execute(CTX, Query::shared(&sql.delete_messages).text(key))
            .await?;
        tx.execute(CTX, Query::shared(&sql.delete_thread).text(key))
            .await?;
        tx.commit(CTX).await?;
        let expired = thread.expires_at.is_some_and(|at| at <= now);
        Ok(if expired { 0 } else { deleted })
    }

    async fn purge_threads_once(&self) -> Result<usize> {
        const CTX: &str = "purge expired threads";
        let sql = &self.inner.history;
        let mut tx = self.inner.db.begin(CTX).await?;
        let mut keys = Vec::new();
        for mut row in tx
            .fetch(
                CTX,
                Query::shared(&sql.purge_select).int(now_ms()),
                &[Col::Text],
            )
            .await?
        {
            keys.push(row.take_text(0)?);
        }
        if keys.is_empty() {
            tx.commit(CTX).await?;
            return Ok(0);
        }
        let placeholders = vec!["?"; keys.len()].join(", ");
        for table in ["messages", "threads"] {
            let q = Query::built(
                sql.render(&format!(
                    "DELETE FROM {{prefix}}{table} WHERE thread_key IN ({placeholders})"
                )),
                usize::MAX,
            )
            .args(keys.iter().map(|k| Arg::Text(k)));
            tx.execute(CTX, q).await?;
        }
        tx.commit(CTX).await?;
        Ok(keys.len())
    }
}

#[async_trait]
impl HistoryStore for SqlStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::new(true, !self.is_private_memory())
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let batch = PreparedBatch::new(self.inner.counter.as_ref(), messages)?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let key = scope.key();
        let (unique_seqs, inserted) =
            with_retries("append", || self.append_once(scope, &key, &batch)).await?;
        tracing::debug!(scope = %scope, inserted, "history.append");
        Ok(AppendOutcome {
            seqs: batch.seqs_for_input(&unique_seqs),
            inserted,
        })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let key = scope.key();
        let sql = &self.inner.history;
        let now = now_ms();
        let (query, newest_first) = match window {
            Window::All => (Query::shared(&sql.read_all).text(&key), false),
            Window::Everything => (Query::shared(&sql.read_everything).text(&key), false),
            Window::After(seq) => (
                Query::shared(&sql.read_after).text(&key).int(to_i64(seq)),
                false,
            ),
            Window::Last(0) => return Ok(Vec::new()),
            Window::Last(n) => (
                Query::shared(&sql.read_last)
                    .text(&key)
                    .text(&key)
                    .int(now)
                    .int(i64::try_from(n).unwrap_or(i64::MAX)),
                true,
            ),
            Window::TokenBudget(budget) => return self.read_budget(&key, budget).await,
            _ => {
                return Err(Error::unsupported(format!(
                    "window {window:?} is not supported by memory-sql"
                )));
            }
        };
        let query = if newest_first {
            query
        } else {
            query.text(&key).int(now)
        };
        let rows = self.inner.db.fetch("read", query, MESSAGE_COLS).await?;
        let mut messages = decode_messages(rows)?;
        if newest_first {
            messages.reverse();
        }
        Ok(messages)
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let key = scope.key();
        let rows = self
            .inner
            .db
            .fetch(
                "count",
                Query::shared(&self.inner.history.count)
                    .text(&key)
                    .int(now_ms()),
                &[Col::Int, Col::Int, Col::Int],
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
        let moved = with_retries("archive", || self.archive_once(&key, first, last)).await?;
        tracing::debug!(scope = %scope, moved, first, last, "history.archive");
        Ok(moved)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        let removed = with_retries("clear", || self.clear_once(&key)).await?;
        tracing::debug!(scope = %scope, removed, "history.clear");
        Ok(removed)
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        list_page(
            self,
            "list threads",
            "threads",
            "thread_key",
            "last_seq > 0",
            filter,
            page,
        )
        .await
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let key = scope.key();
        let now = now_ms();
        let ttl_ms = ttl.map(duration_ms);
        let q = Query::shared(&self.inner.history.set_ttl)
            .arg(Arg::OptInt(ttl_ms))
            .arg(Arg::OptInt(expiry(now, ttl_ms)))
            .text(&key)
            .int(now);
        let changed = self.inner.db.execute("set a thread's TTL", q).await?;
        if changed == 0 {
            return Err(Error::not_found(format!("no thread at {scope}")));
        }
        Ok(())
    }

    async fn purge_expired(&self) -> Result<u64> {
        let mut total = 0u64;
        loop {
            let n = with_retries("purge expired threads", || self.purge_threads_once()).await?;
            total += n as u64;
            if n < PURGE_BATCH {
                break;
            }
        }
        tracing::debug!(removed = total, "history.purge_expired");
        Ok(total)
    }
}
