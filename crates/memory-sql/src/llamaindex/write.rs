//! Writes: a batch prepared and looked up among the key's rows, then inserted in one
//! transaction; archive and clear.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use memory_core::{ChatMessage, PreparedBatch, Repeats, Result};
use memory_interop::llamaindex::{is_row_id, to_llamaindex};
use memory_interop::python_json::dumps;
use serde_json::Value;

use super::decode::recorded_id;
use super::statements::placeholders;
use super::store::LlamaIndexHistoryStore;
use crate::driver::{Arg, Col, Query, Tx};
use crate::rows::to_i64;

/// Rows a lookup or an insert statement carries at most.
const ROWS_PER_STATEMENT: usize = 500;
/// Bytes of `data` one insert statement carries at most (one larger message goes alone).
const BYTES_PER_STATEMENT: usize = 4 * 1024 * 1024;

/// A message of a batch, ready to insert.
pub(super) struct Prepared<'a> {
    message: &'a ChatMessage,
    role: String,
    data: String,
    /// Whether `data` records the id (else the id is the one derived from the content of the
    /// first message of its thread with that content, and a retry is recognised by equal
    /// `data` among rows without a recorded id, the first such row).
    recorded: bool,
    /// The row this id names, if it is one of our `llamaindex:<table>:<row>` ids.
    row: Option<i64>,
}

impl LlamaIndexHistoryStore {
    /// Encodes and checks a batch ([`PreparedBatch`]'s checks on LlamaIndex's `data`): the
    /// distinct messages (first of each id) and, per given message, the index of its distinct
    /// one.
    pub(super) fn prepare<'a>(
        &self,
        messages: &'a [ChatMessage],
    ) -> Result<(Vec<Prepared<'a>>, Vec<usize>)> {
        // Per message to store, in order: its role column and whether its data records its id.
        let mut columns: Vec<(String, bool)> = Vec::with_capacity(messages.len());
        let batch = PreparedBatch::with_encoder(messages, None, Repeats::Collapse, |message| {
            // A message read from a row (here or in another table) is written with the row's
            // bytes and the record of its id and time, so the copy reads as the row did and a
            // retry finds it by id, even when the session repeats the row's words.
            let value = if is_row_id(message.id.as_str()) {
                to_llamaindex(message, &self.inner.options.clone().with_created_at(true))
            } else {
                to_llamaindex(message, &self.inner.options)
            };
            let role = value
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or(message.role.as_str())
                .to_owned();
            columns.push((role, recorded_id(&value) == Some(message.id.as_str())));
            Ok(dumps(&value))
        })?;
        let unique = batch
            .unique
            .into_iter()
            .zip(columns)
            .map(|(p, (role, recorded))| Prepared {
                message: p.message,
                role,
                data: p.json,
                recorded,
                row: self.row_of(p.message.id.as_str()),
            })
            .collect();
        Ok((unique, batch.positions))
    }

    /// The positions of the rows of `key` that already hold messages of `batch`, by index
    /// in `batch`.
    async fn find_existing(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        batch: &[Prepared<'_>],
    ) -> Result<HashMap<usize, u64>> {
        let ctx = "look up a batch among a LlamaIndex session";
        let sql = &self.inner.sql;
        let mut found = HashMap::new();
        for (chunk_no, chunk) in batch.chunks(ROWS_PER_STATEMENT).enumerate() {
            let ids: Vec<&str> = chunk
                .iter()
                .filter(|p| p.recorded)
                .map(|p| p.message.id.as_str())
                .collect();
            let rows: Vec<i64> = chunk.iter().filter_map(|p| p.row).collect();
            let datas: Vec<&str> = chunk
                .iter()
                .filter(|p| !p.recorded)
                .map(|p| p.data.as_str())
                .collect();
            let with_data = !datas.is_empty();
            let mut conds = Vec::new();
            let mut args: Vec<Arg<'_>> = vec![Arg::Text(key)];
            if !ids.is_empty() {
                conds.push(format!("w.mid IN ({})", placeholders(ids.len())));
                args.extend(ids.iter().map(|id| Arg::Text(id)));
            }
            if !rows.is_empty() {
                conds.push(format!("w.rid IN ({})", placeholders(rows.len())));
                args.extend(rows.iter().map(|r| Arg::Int(*r)));
            }
            if with_data {
                conds.push(format!(
                    "(w.mid IS NULL AND w.data IN ({}))",
                    placeholders(datas.len())
                ));
                args.extend(datas.iter().map(|d| Arg::Text(d)));
            }
            let template = format!(
                "SELECT w.seq, w.rid, w.mid{} FROM (SELECT ROW_NUMBER() OVER (ORDER BY \
                 \"timestamp\", id) AS seq, CAST(id AS BIGINT) AS rid, {} AS mid{} FROM {{t}} \
                 WHERE \"key\" = ?) AS w WHERE {}",
                if with_data { ", w.data" } else { "" },
                sql.recorded_id(),
                if with_data {
                    ", CAST(data AS TEXT) AS data"
                } else {
                    ""
                },
                conds.join(" OR ")
            );
            let cache = chunk.len() <= 2;
            let q = Query::built(sql.render(&template), cache).args(args);
            let mut cols = vec![Col::Int, Col::Int, Col::Text];
            if with_data {
                cols.push(Col::Text);
            }
            let mut by_mid: HashMap<String, u64> = HashMap::new();
            let mut by_row: HashMap<i64, u64> = HashMap::new();
            let mut by_data: HashMap<String, u64> = HashMap::new();
            for mut row in tx.fetch(ctx, q, &cols).await? {
                let seq = row.uint(0)?;
                by_row.insert(row.int(1)?, seq);
                let mid = row.take_opt_text(2)?;
                let keep_min = |map: &mut HashMap<String, u64>, k: String| {
                    let e = map.entry(k).or_insert(seq);
                    *e = (*e).min(seq);
                };
                match mid {
                    Some(mid) => keep_min(&mut by_mid, mid),
                    None if with_data => keep_min(&mut by_data, row.take_text(3)?),
                    None => {}
                }
            }
            for (i, p) in chunk.iter().enumerate() {
                let hit = if p.recorded {
                    by_mid.get(p.message.id.as_str())
                } else {
                    by_data.get(&p.data)
                }
                .or_else(|| p.row.and_then(|r| by_row.get(&r)));
                if let Some(&seq) = hit {
                    found.insert(
                        chunk_no
                            .saturating_mul(ROWS_PER_STATEMENT)
                            .saturating_add(i),
                        seq,
                    );
                }
            }
        }
        Ok(found)
    }

    /// Appends the distinct messages of a batch; returns their positions and how many were new.
    pub(super) async fn append_tx(
        &self,
        key: &str,
        batch: &[Prepared<'_>],
    ) -> Result<(Vec<u64>, usize)> {
        let ctx = "append to a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let stats = tx
            .fetch(
                ctx,
                self.query(&inner.sql.stats).text(key),
                &[Col::Int, Col::Int],
            )
            .await?;
        let (total, last_ts) = match stats.first() {
            Some(row) => (row.uint(0)?, row.opt_int(1)?),
            None => (0, None),
        };
        let existing = if total == 0 {
            HashMap::new()
        } else {
            self.find_existing(&mut tx, key, batch).await?
        };
        let base = last_ts.map_or(now_ns(), |t| now_ns().max(t.saturating_add(1)));
        let mut seqs = Vec::with_capacity(batch.len());
        let mut fresh: Vec<(&Prepared<'_>, i64)> = Vec::new();
        for (i, p) in batch.iter().enumerate() {
            match existing.get(&i) {
                Some(&seq) => seqs.push(seq),
                None => {
                    let n = fresh.len() as u64;
                    seqs.push(total.saturating_add(n).saturating_add(1));
                    fresh.push((p, base.saturating_add(to_i64(n))));
                }
            }
        }
        let mut rest = fresh.as_slice();
        while !rest.is_empty() {
            // At most ROWS_PER_STATEMENT rows and BYTES_PER_STATEMENT bytes, at least one row.
            let mut take = 0usize;
            let mut bytes = 0usize;
            for (p, _) in rest.iter().take(ROWS_PER_STATEMENT) {
                let with = bytes.saturating_add(p.data.len());
                if take > 0 && with > BYTES_PER_STATEMENT {
                    break;
                }
                bytes = with;
                take = take.saturating_add(1);
            }
            let (rows, after) = rest.split_at(take);
            let values =
                vec![format!("(?, ?, ?, 'active', {})", inner.sql.data_param()); rows.len()];
            let template = format!(
                "INSERT INTO {{t}} (\"key\", \"timestamp\", role, status, data) VALUES {}",
                values.join(", ")
            );
            let mut q = Query::built(inner.sql.render(&template), rows.len() <= 2);
            for (p, ts) in rows {
                q = q.text(key).int(*ts).text(&p.role).text(&p.data);
            }
            tx.execute(ctx, q).await?;
            rest = after;
        }
        tx.commit(ctx).await?;
        Ok((seqs, fresh.len()))
    }

    pub(super) async fn archive_tx(&self, key: &str, first: i64, last: i64) -> Result<u64> {
        let ctx = "archive messages of a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let q = self
            .query(&inner.sql.archive)
            .text(key)
            .int(first)
            .int(last);
        let n = tx.execute(ctx, q).await?;
        tx.commit(ctx).await?;
        Ok(n)
    }

    pub(super) async fn clear_tx(&self, key: &str) -> Result<u64> {
        let ctx = "clear a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let n = tx
            .execute(ctx, self.query(&inner.sql.clear).text(key))
            .await?;
        tx.commit(ctx).await?;
        Ok(n)
    }
}

/// Nanoseconds since the Unix epoch (Python's `time.time_ns()`).
fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| to_i64(d.as_nanos()))
        .unwrap_or_default()
}
