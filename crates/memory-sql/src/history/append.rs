//! Appends: the thread row locked (or created), the batch's known ids looked up, the new
//! messages inserted with their sequence numbers and the counters moved, in one transaction;
//! on PostgreSQL, the whole append as one statement when nothing raced it.

use std::collections::HashMap;

use memory_core::{Error, PreparedBatch, PreparedMessage, Result, Scope};

use super::batch::batch_chunk;
use super::thread::{THREAD_COLS, ThreadRow, counter};
use crate::dialect::{Backend, MAX_PARAMS, MAX_STATEMENT_BYTES};
use crate::driver::{Arg, Col, Query, Tx};
use crate::rows::{MAX_TTL_MS, fresh_epoch, scope_args};
use crate::store::SqlStore;

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

    pub(super) async fn append_once(
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
}
