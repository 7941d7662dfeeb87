//! [`HistoryStore`] for [`SqlStore`].
//!
//! Every write to a thread first locks its row in `{prefix}threads` (creating it if needed),
//! so writers of one thread, in any number of processes, take turns: sequence numbers are
//! assigned under that lock, inside the transaction that inserts the messages. The thread row
//! also keeps the counters (`last_seq`, `active_count`, `active_tokens`) that answer
//! [`count`](HistoryStore::count) without scanning, and the expiry.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::history::skip_undecodable;
use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Error, HistoryCapabilities, HistoryStore,
    MAX_READ_PAGE, Page, PageRequest, PreparedBatch, PreparedMessage, Result, Scope, ScopeFilter,
    StoredMessage, TenantId, ThreadCount, ThreadCursor, Window,
};

use crate::cursor::fresh_epoch;
use crate::dialect::{Backend, MAX_PARAMS, MAX_STATEMENT_BYTES};
use crate::driver::{Arg, Col, Query, Row, Tx};
use crate::error::{MAX_RETRIES, backoff, is_retryable, retries_exhausted};
use crate::rows::{MAX_TTL_MS, scope_args, to_i64, ttl_ms};
use crate::sql::PURGE_BATCH;
use crate::store::{SqlStore, list_page, tenant_page};

/// Columns of a message row as reads select them.
pub(crate) const MESSAGE_COLS: &[Col] = &[Col::Int, Col::Int, Col::Flag, Col::Text];
/// Columns of a thread row as writers lock it.
const THREAD_COLS: &[Col] = &[Col::Int, Col::Int, Col::Int, Col::Int, Col::Int];
/// The first page of a budgeted read, in messages. A window that fits in it is read with one
/// statement; a longer one is read again in a snapshot transaction, in pages of four times
/// this, then doubling.
const BUDGET_FIRST_PAGE: i64 = 1024;
/// The largest page of a budgeted read.
const BUDGET_MAX_PAGE: i64 = 1 << 16;
/// On SQLite, batches of at most this many messages use statements prepared once per
/// connection (a turn appends one or two, so those shapes repeat); larger ones are not cached.
/// MySQL caches every batch statement (see [`batch_chunk`]).
const CACHED_BATCH: usize = 8;

/// A thread row as a writer sees it under its lock.
#[derive(Debug, Clone, Copy)]
struct ThreadRow {
    last_seq: u64,
    active_count: u64,
    active_tokens: u64,
    ttl_ms: Option<i64>,
    /// Whether the thread expired, by the database's clock.
    expired: bool,
}

impl ThreadRow {
    fn fresh(ttl_ms: Option<i64>) -> Self {
        Self {
            last_seq: 0,
            active_count: 0,
            active_tokens: 0,
            ttl_ms,
            expired: false,
        }
    }

    fn from_row(row: &Row) -> Result<Self> {
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
fn counter(key: &str, what: &str, value: Option<u64>) -> Result<i64> {
    value.and_then(|v| i64::try_from(v).ok()).ok_or_else(|| {
        Error::serialization(format!(
            "thread {key:?}: its stored {what} is corrupt (out of range)"
        ))
    })
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
        message: message.into(),
    })
}

/// Decodes the rows of a read; a row that cannot be decoded is left out, with a warning naming
/// the thread and its sequence number (the `HistoryStore` contract), so one bad row never makes
/// the thread unreadable.
pub(crate) fn decode_messages(key: &str, rows: Vec<Row>) -> Vec<StoredMessage> {
    rows.into_iter()
        .filter_map(|row| {
            let seq = row.uint(0).unwrap_or_default();
            decode_message(row)
                .inspect_err(|err| skip_undecodable(&key, seq, err))
                .ok()
        })
        .collect()
}

/// The length of the next chunk of a batch statement built with one placeholder group per
/// item, at most `available` items and `max` per statement, and whether to cache it.
///
/// On MySQL/MariaDB every chunk is a power of two long and cached, so at most a dozen texts
/// per statement kind exist per connection and none is ever closed: sqlx closes an uncached
/// prepared statement with a `COM_STMT_CLOSE` the server never answers, and without
/// `TCP_NODELAY` the next statement then waits for the server's delayed ACK (~40 ms). On
/// SQLite (in-process) and PostgreSQL (fixed statements) a batch goes in one chunk, cached
/// only when small.
fn batch_chunk(mysql: bool, available: usize, max: usize) -> (usize, bool) {
    let n = available.min(max).max(1);
    if mysql {
        (1 << n.ilog2(), true)
    } else {
        (n, n <= CACHED_BATCH)
    }
}

/// Runs `op` again while it loses races the database reports, with a short backoff.
pub(crate) async fn with_retries<T, F, Fut>(ctx: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 0u32;
    loop {
        match op().await {
            Err(err) if is_retryable(&err) => {
                attempt = attempt.saturating_add(1);
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

    /// The sequence numbers of those of the batch's ids the thread already holds.
    async fn existing_ids(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        batch: &PreparedBatch<'_>,
    ) -> Result<HashMap<String, u64>> {
        const CTX: &str = "append: find known ids";
        let ids = batch.unique.iter().map(|m| m.message.id.as_str());
        let mut rows = Vec::new();
        if self.inner.db.dialect.backend == Backend::Postgres {
            // One array argument: the statement text is the same whatever the batch size.
            let q = Query::shared(&self.inner.history.known_ids_pg)
                .text(key)
                .arg(Arg::Texts(ids.collect()));
            rows = tx.fetch(CTX, q, &[Col::Text, Col::Int]).await?;
        } else {
            let ids: Vec<&str> = ids.collect();
            let mysql = self.inner.db.dialect.backend == Backend::MySql;
            let mut rest = ids.as_slice();
            while !rest.is_empty() {
                let (len, cache) = batch_chunk(mysql, rest.len(), MAX_PARAMS.saturating_sub(1));
                let (chunk, after) = rest.split_at(len.clamp(1, rest.len()));
                rest = after;
                let placeholders = vec!["?"; chunk.len()].join(", ");
                let sql = self.inner.history.render(&format!(
                    "SELECT message_id, seq FROM {{prefix}}messages \
                     WHERE thread_key = ? AND message_id IN ({placeholders})"
                ));
                let q = Query::built(sql, cache)
                    .text(key)
                    .args(chunk.iter().map(|id| Arg::Text(id)));
                rows.extend(tx.fetch(CTX, q, &[Col::Text, Col::Int]).await?);
            }
        }
        let mut found = HashMap::with_capacity(rows.len());
        for mut row in rows {
            let seq = row.uint(1)?;
            found.insert(row.take_text(0)?, seq);
        }
        Ok(found)
    }

    /// Inserts `rows` with one multi-row `INSERT` per chunk (chunks respect the bind-parameter
    /// limit and keep each statement under a few MiB). On PostgreSQL the rows go as one array
    /// per column, so the statement text never changes.
    async fn insert_messages(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        rows: &[(i64, &PreparedMessage<'_>)],
    ) -> Result<()> {
        const CTX: &str = "append: insert messages";
        const PARAMS_PER_ROW: usize = 7;
        let postgres = self.inner.db.dialect.backend == Backend::Postgres;
        let mysql = self.inner.db.dialect.backend == Backend::MySql;
        let max_rows = if postgres {
            usize::MAX
        } else {
            MAX_PARAMS / PARAMS_PER_ROW
        };
        let mut rest = rows;
        while !rest.is_empty() {
            // At most `max_rows` rows and MAX_STATEMENT_BYTES bytes of bodies, at least one row.
            let mut take = 0usize;
            let mut bytes = 0usize;
            for (_, m) in rest.iter().take(max_rows) {
                let with = bytes.saturating_add(m.json.len());
                if take > 0 && with > MAX_STATEMENT_BYTES {
                    break;
                }
                bytes = with;
                take = take.saturating_add(1);
            }
            let (len, cache) = batch_chunk(mysql, take, max_rows);
            let (chunk, after) = rest.split_at(len.clamp(1, rest.len()));
            let q = if postgres {
                Query::shared(&self.inner.history.insert_messages_pg)
                    .text(key)
                    .args([
                        Arg::Ints(chunk.iter().map(|(seq, _)| *seq).collect()),
                        Arg::Texts(chunk.iter().map(|(_, m)| m.message.id.as_str()).collect()),
                        Arg::Texts(chunk.iter().map(|(_, m)| m.message.role.as_str()).collect()),
                        Arg::Ints(chunk.iter().map(|(_, m)| i64::from(m.tokens)).collect()),
                        Arg::Ints(
                            chunk
                                .iter()
                                .map(|(_, m)| m.message.created_at.timestamp_millis())
                                .collect(),
                        ),
                        Arg::Texts(chunk.iter().map(|(_, m)| m.json.as_str()).collect()),
                    ])
            } else {
                let mut sql =
                    String::with_capacity(chunk.len().saturating_mul(26).saturating_add(120));
                sql.push_str(
                    "INSERT INTO {prefix}messages \
                     (thread_key, seq, message_id, role, tokens, archived, created_at, body) \
                     VALUES ",
                );
                for i in 0..chunk.len() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str("(?, ?, ?, ?, ?, 0, ?, ?)");
                }
                let mut q = Query::built(self.inner.history.render(&sql), cache);
                for (seq, m) in chunk {
                    q = q.text(key).int(*seq).text(m.message.id.as_str()).args([
                        Arg::Text(m.message.role.as_str()),
                        Arg::Int(i64::from(m.tokens)),
                        Arg::Int(m.message.created_at.timestamp_millis()),
                        Arg::Text(&m.json),
                    ]);
                }
                q
            };
            tx.execute(CTX, q).await?;
            rest = after;
        }
        Ok(())
    }

    /// PostgreSQL: the whole append as one statement (`APPEND_PG` in `sql.rs`). `None` when
    /// it changed nothing and the transaction must go on statement by statement (it holds the
    /// thread row's lock then): another writer changed the thread since the statement's
    /// snapshot, the thread expired, a counter is corrupt, or the batch is too large for one
    /// statement.
    async fn append_one_statement(
        &self,
        tx: &mut Tx<'_>,
        scope: &Scope,
        key: &str,
        batch: &PreparedBatch<'_>,
    ) -> Result<Option<(Vec<u64>, usize)>> {
        const CTX: &str = "append";
        let bytes = batch
            .unique
            .iter()
            .fold(0usize, |sum, m| sum.saturating_add(m.json.len()));
        if bytes > MAX_STATEMENT_BYTES {
            return Ok(None);
        }
        let default_ttl = self.inner.default_ttl_ms;
        let messages = &batch.unique;
        let q = Query::shared(&self.inner.history.append_pg)
            .text(key)
            .args(scope_args(scope))
            .arg(Arg::OptInt(default_ttl))
            .args([
                Arg::Texts(messages.iter().map(|m| m.message.id.as_str()).collect()),
                Arg::Texts(messages.iter().map(|m| m.message.role.as_str()).collect()),
                Arg::Ints(messages.iter().map(|m| i64::from(m.tokens)).collect()),
                Arg::Ints(
                    messages
                        .iter()
                        .map(|m| m.message.created_at.timestamp_millis())
                        .collect(),
                ),
                Arg::Texts(messages.iter().map(|m| m.json.as_str()).collect()),
            ])
            // The expiry: the database's clock + the TTL (bounded).
            .arg(Arg::OptInt(default_ttl.map(|t| t.min(MAX_TTL_MS))));
        let rows = tx.fetch(CTX, q, &[Col::Text, Col::Int, Col::Int]).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        if rows.len() != messages.len() {
            return Err(Error::serialization(format!(
                "thread {key:?}: the append answered {} rows for {} messages",
                rows.len(),
                messages.len()
            )));
        }
        let mut seqs = HashMap::with_capacity(rows.len());
        let mut inserted = 0usize;
        for mut row in rows {
            let seq = row.uint(1)?;
            if row.int(2)? != 0 {
                inserted = inserted.saturating_add(1);
            }
            seqs.insert(row.take_text(0)?, seq);
        }
        let unique_seqs = messages
            .iter()
            .map(|m| {
                seqs.get(m.message.id.as_str()).copied().ok_or_else(|| {
                    Error::serialization(format!(
                        "thread {key:?}: the append answered no sequence number for a message"
                    ))
                })
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(Some((unique_seqs, inserted)))
    }

    async fn append_once(
        &self,
        scope: &Scope,
        key: &str,
        batch: &PreparedBatch<'_>,
    ) -> Result<(Vec<u64>, usize)> {
        const CTX: &str = "append";
        let inner = &self.inner;
        let default_ttl = inner.default_ttl_ms;
        // A transaction even around PostgreSQL's single statement: a client that gives up
        // (the operation timeout) while the statement waits for the thread's lock never sends
        // `COMMIT`, so the append it gave up on is never applied. Alone, the statement would
        // commit on its own once the lock came free.
        let mut tx = inner.db.begin(CTX).await?;
        if inner.db.dialect.backend == Backend::Postgres
            && let Some(done) = self
                .append_one_statement(&mut tx, scope, key, batch)
                .await?
        {
            tx.commit(CTX).await?;
            return Ok(done);
        }
        let mut thread = self.lock_thread(&mut tx, scope, key, default_ttl).await?;
        let mut restarted = false;
        if thread.expired {
            // An expired thread is gone: the append starts a new one at sequence number 1.
            tx.execute(
                "append: drop the expired thread",
                Query::shared(&inner.history.delete_messages).text(key),
            )
            .await?;
            // The thread row is reset by the `update_thread` below (`first_active` back at
            // 1, a fresh epoch: `restarted`).
            thread = ThreadRow::fresh(default_ttl);
            restarted = true;
        }
        let existing = if thread.last_seq == 0 {
            HashMap::new()
        } else {
            self.existing_ids(&mut tx, key, batch).await?
        };
        let mut unique_seqs = Vec::with_capacity(batch.unique.len());
        let mut new_rows = Vec::with_capacity(batch.unique.len());
        let mut next = Some(thread.last_seq);
        let mut new_tokens = Some(0u64);
        for prepared in &batch.unique {
            if let Some(&seq) = existing.get(prepared.message.id.as_str()) {
                unique_seqs.push(seq);
                continue;
            }
            next = next.and_then(|n| n.checked_add(1));
            new_tokens = new_tokens.and_then(|t| t.checked_add(u64::from(prepared.tokens)));
            // In 1..=i64::MAX: the same number as a column value and as a `u64`.
            let seq = counter(key, "last sequence number", next)?;
            unique_seqs.push(seq.unsigned_abs());
            new_rows.push((seq, prepared));
        }
        self.insert_messages(&mut tx, key, &new_rows).await?;
        let inserted = new_rows.len();
        if inserted > 0 || thread.ttl_ms.is_some() || thread.last_seq == 0 {
            let active_count = thread.active_count.checked_add(inserted as u64);
            let active_tokens = new_tokens.and_then(|t| thread.active_tokens.checked_add(t));
            let q = Query::shared(&inner.history.update_thread)
                .int(counter(key, "last sequence number", next)?)
                .int(counter(key, "active message count", active_count)?)
                .int(counter(key, "active token count", active_tokens)?)
                .arg(Arg::OptInt(thread.ttl_ms))
                // The expiry: the database's clock + the TTL (a corrupt stored TTL is bounded).
                .arg(Arg::OptInt(thread.ttl_ms.map(|t| t.min(MAX_TTL_MS))))
                // A thread started again has no archived prefix.
                .arg(Arg::OptInt(restarted.then_some(1)))
                // epoch: a thread started again gets a fresh epoch (cursor reads).
                .arg(Arg::OptInt(restarted.then(fresh_epoch)))
                .text(key);
            tx.execute("append: update the thread", q).await?;
        }
        tx.commit(CTX).await?;
        Ok((unique_seqs, inserted))
    }

    /// A budgeted window: one statement when it fits in the first page, else every page in
    /// one read-only snapshot, so a clear, archive or expiry between two pages can neither mix
    /// two versions of the thread nor leave a hole.
    async fn read_budget(&self, key: &str, budget: u64) -> Result<Vec<StoredMessage>> {
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

    /// A page of [`read_page`](HistoryStore::read_page): one statement, the primary key
    /// `(thread_key, seq)` read from `after` on. Only when every row of a page cannot be
    /// decoded does it read the next one (so an empty page always means the end of the
    /// thread).
    async fn read_page_rows(
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

    async fn archive_once(&self, key: &str, first: i64, last: i64) -> Result<u64> {
        const CTX: &str = "archive";
        let sql = &self.inner.history;
        let mut tx = self.inner.db.begin(CTX).await?;
        let live = tx
            .fetch(CTX, Query::shared(&sql.lock_live).text(key), &[Col::Int])
            .await?;
        if live.is_empty() {
            tx.commit(CTX).await?;
            return Ok(0);
        }
        // The counters, and the first active message when the range covers it: the first
        // active one after the range (the messages after it are the same before and after).
        let counters = Query::shared(&sql.archive_counters)
            .text(key)
            .int(first)
            .int(last)
            .text(key)
            .int(first)
            .int(last)
            .int(first)
            .int(last)
            .text(key)
            .int(last)
            // A fresh epoch when the range holds an active message (the archive moves it).
            .text(key)
            .int(first)
            .int(last)
            .int(fresh_epoch())
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
        Ok(if thread.expired { 0 } else { deleted })
    }

    async fn purge_threads_once(&self) -> Result<usize> {
        const CTX: &str = "purge expired threads";
        let sql = &self.inner.history;
        let mut tx = self.inner.db.begin(CTX).await?;
        let mut keys = Vec::new();
        for mut row in tx
            .fetch(CTX, Query::shared(&sql.purge_select), &[Col::Text])
            .await?
        {
            keys.push(row.take_text(0)?);
        }
        if keys.is_empty() {
            tx.commit(CTX).await?;
            return Ok(0);
        }
        let mysql = self.inner.db.dialect.backend == Backend::MySql;
        for table in ["messages", "threads"] {
            let mut rest = keys.as_slice();
            while !rest.is_empty() {
                let (len, cache) = if mysql {
                    batch_chunk(true, rest.len(), PURGE_BATCH)
                } else {
                    (rest.len(), false)
                };
                let (chunk, after) = rest.split_at(len.clamp(1, rest.len()));
                rest = after;
                let placeholders = vec!["?"; chunk.len()].join(", ");
                let q = Query::built(
                    sql.render(&format!(
                        "DELETE FROM {{prefix}}{table} WHERE thread_key IN ({placeholders})"
                    )),
                    cache,
                )
                .args(chunk.iter().map(|k| Arg::Text(k)));
                tx.execute(CTX, q).await?;
            }
        }
        tx.commit(CTX).await?;
        Ok(keys.len())
    }
}

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
