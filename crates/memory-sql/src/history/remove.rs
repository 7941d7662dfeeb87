//! The writes that move or remove messages: archive, clear, and the purge of expired threads.

use memory_core::Result;

use super::batch::batch_chunk;
use super::thread::{THREAD_COLS, ThreadRow};
use crate::dialect::Backend;
use crate::driver::{Arg, Col, Query};
use crate::rows::fresh_epoch;
use crate::sql::PURGE_BATCH;
use crate::store::SqlStore;

impl SqlStore {
    pub(super) async fn archive_once(&self, key: &str, first: i64, last: i64) -> Result<u64> {
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

    pub(super) async fn clear_once(&self, key: &str) -> Result<u64> {
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

    pub(super) async fn purge_threads_once(&self) -> Result<usize> {
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
