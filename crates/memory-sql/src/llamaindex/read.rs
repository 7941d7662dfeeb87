//! Reads: windows, pages, token budgets, counts and the listing of keys.

use memory_core::{
    Error, MAX_READ_PAGE, Page, PageRequest, Result, Scope, StoredMessage, ThreadCount, Window,
};

use super::statements::ROW_COLS;
use super::store::LlamaIndexHistoryStore;
use crate::driver::Col;
use crate::rows::to_i64;

/// The first and the largest page of a token-budget read.
const BUDGET_PAGE: (i64, i64) = (32, 1024);

impl LlamaIndexHistoryStore {
    pub(super) async fn read_rows(&self, key: &str, window: Window) -> Result<Vec<StoredMessage>> {
        let ctx = "read a LlamaIndex session";
        let inner = &self.inner;
        let cols = ROW_COLS;
        let sql = &inner.sql;
        let (q, reverse) = match window {
            Window::All => (self.query(&sql.read_all).text(key), false),
            Window::Everything => (self.query(&sql.read_everything).text(key), false),
            Window::After(seq) => (
                self.query(&sql.read_after).text(key).int(to_i64(seq)),
                false,
            ),
            Window::Last(0) => return Ok(Vec::new()),
            Window::Last(n) => (self.query(&sql.read_last).text(key).int(to_i64(n)), true),
            Window::TokenBudget(budget) => return self.read_budget(key, budget).await,
            other => {
                return Err(Error::unsupported(format!(
                    "window {other:?} is not supported by the LlamaIndex store"
                )));
            }
        };
        let rows = inner.db.fetch(ctx, q, &cols).await?;
        let mut out: Vec<StoredMessage> = rows
            .into_iter()
            .filter_map(|r| self.decode_or_skip(key, r))
            .collect();
        if reverse {
            out.reverse();
        }
        Ok(out)
    }

    /// A page of [`read_page`](HistoryStore::read_page): one statement (the key's rows
    /// numbered as every read numbers them, those of the page sent). Only when every row of a
    /// page cannot be decoded does it read the next one (so an empty page always means the
    /// end of the session).
    pub(super) async fn read_page_rows(
        &self,
        key: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let ctx = "read a page of a LlamaIndex session";
        let limit = to_i64(limit.clamp(1, MAX_READ_PAGE));
        let mut after = to_i64(after);
        loop {
            let q = self
                .query(&self.inner.sql.read_page)
                .text(key)
                .int(after)
                .int(limit);
            let rows = self.inner.db.fetch(ctx, q, &ROW_COLS).await?;
            let Some(last) = rows.last() else {
                return Ok(Vec::new());
            };
            let last = last.int(0)?;
            let full = to_i64(rows.len()) == limit;
            let page: Vec<StoredMessage> = rows
                .into_iter()
                .filter_map(|r| self.decode_or_skip(key, r))
                .collect();
            if !page.is_empty() || !full {
                return Ok(page);
            }
            after = last;
        }
    }

    /// The newest active messages within `budget` tokens, read newest first a page at a time
    /// in one snapshot.
    pub(super) async fn read_budget(&self, key: &str, budget: u64) -> Result<Vec<StoredMessage>> {
        let ctx = "read a LlamaIndex session within a token budget";
        let inner = &self.inner;
        let cols = ROW_COLS;
        let mut tx = inner.db.begin_read(ctx).await?;
        let mut out = Vec::new();
        let mut used = 0u64;
        let mut before = i64::MAX;
        let mut page = BUDGET_PAGE.0;
        'pages: loop {
            let q = self
                .query(&inner.sql.read_before_desc)
                .text(key)
                .int(before)
                .int(page);
            let rows = tx.fetch(ctx, q, &cols).await?;
            let full = rows.len() as i64 == page;
            for row in rows {
                let seq = row.int(0)?;
                let Some(message) = self.decode_or_skip(key, row) else {
                    before = seq;
                    continue;
                };
                let total = used.saturating_add(u64::from(message.tokens));
                if total > budget {
                    break 'pages;
                }
                used = total;
                before = to_i64(message.seq);
                out.push(message);
            }
            if !full {
                break;
            }
            page = page.saturating_mul(2).min(BUDGET_PAGE.1);
        }
        tx.commit(ctx).await?;
        out.reverse();
        Ok(out)
    }

    pub(super) async fn count_tx(&self, key: &str) -> Result<ThreadCount> {
        let ctx = "count a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin_read(ctx).await?;
        let rows = tx
            .fetch(ctx, self.query(&inner.sql.read_all).text(key), &ROW_COLS)
            .await?;
        let counts = tx
            .fetch(
                ctx,
                self.query(&inner.sql.counts).text(key),
                &[Col::Int, Col::Int],
            )
            .await?;
        tx.commit(ctx).await?;
        let mut active_tokens = 0u64;
        for row in rows {
            if let Some(message) = self.decode_or_skip(key, row) {
                active_tokens = active_tokens.saturating_add(u64::from(message.tokens));
            }
        }
        let (total, active) = match counts.first() {
            Some(row) => (row.uint(0)?, row.uint(1)?),
            None => (0, 0),
        };
        Ok(ThreadCount {
            active,
            archived: total.saturating_sub(active),
            active_tokens,
            last_seq: total,
        })
    }

    /// A page of the scopes that the keys of the table give: every key (or, with `prefix`,
    /// those that start with it) for which `scope_of` gives a scope.
    pub(super) async fn list_keys(
        &self,
        page: PageRequest,
        prefix: Option<&str>,
        scope_of: impl Fn(&str) -> Option<Scope>,
    ) -> Result<Page<Scope>> {
        let ctx = "list LlamaIndex sessions";
        let inner = &self.inner;
        let limit = page.limit.max(1);
        let mut cursor = page.cursor.unwrap_or_default();
        let mut items = Vec::with_capacity(limit.min(1024));
        let mut last_key: Option<String> = None;
        let batch = to_i64(limit).saturating_add(1).min(10_000);
        loop {
            let q = match prefix {
                None => self.query(&inner.sql.list).text(&cursor).int(batch),
                Some(prefix) => self
                    .query(&inner.sql.list_prefixed)
                    .text(&cursor)
                    .int(to_i64(prefix.chars().count()))
                    .text(prefix)
                    .int(batch),
            };
            let rows = inner.db.fetch(ctx, q, &[Col::Text]).await?;
            let exhausted = (rows.len() as i64) < batch;
            for mut row in rows {
                let key = row.take_text(0)?;
                cursor.clone_from(&key);
                let Some(scope) = scope_of(&key) else {
                    tracing::debug!(
                        key = %key.escape_debug(),
                        "LlamaIndex session key skipped: not one of a listed scope"
                    );
                    continue;
                };
                if items.len() == limit {
                    return Ok(Page {
                        items,
                        next_cursor: last_key,
                    });
                }
                items.push(scope);
                last_key = Some(key);
            }
            if exhausted {
                return Ok(Page {
                    items,
                    next_cursor: None,
                });
            }
        }
    }
}
