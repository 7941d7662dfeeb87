//! [`HistoryStore`] on Redis: each operation is one script or one command.
//!
//! The trait's methods and the writes (append, archive, clear) are here; the parts they call
//! are submodules: [`read`] (paged reads), [`cursor_read`] (`read_since`), [`index`] (the
//! per-tenant thread indexes and the expiry index) and [`decode`] (the scripts' replies).

mod cursor_read;
mod decode;
mod index;
mod read;

use std::ops::RangeInclusive;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Error, HistoryCapabilities, HistoryStore,
    MAX_READ_PAGE, Page, PageRequest, PreparedBatch, Result, Scope, ScopeFilter, StoredMessage,
    TenantId, ThreadCount, ThreadCursor, Window,
};
use redis::Value;

use self::cursor_read::fresh_epoch;
use self::decode::thread_count;
use self::read::{Bounds, READ_RESTARTS, Walk, restarted_too_often};
use crate::conn::unsigned;
use crate::error::{During, bad_reply};
use crate::keys::{Listed, ThreadKeys};
use crate::scripts::SCRIPTS;
use crate::store::{RedisStore, expiry_args, request_nonce};

#[async_trait]
impl HistoryStore for RedisStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_ttl(true)
            .with_multi_process(true)
            .with_dedupes_ids(true)
            .with_counts_purged(true)
            .with_lists_every_thread(true)
            .with_reduces_on_append(self.max_messages().is_some())
            .with_cursor_reads(true)
            .with_paged_reads(true)
            .with_lists_tenants(true)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        // A large batch is counted off the async executor (`tokens::precount`).
        let counted = memory_core::tokens::precount(self.counter(), messages).await?;
        let batch = PreparedBatch::new(&counted, messages)?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let keys = ThreadKeys::new(self.prefix(), scope);
        let max = self
            .max_messages()
            .map_or_else(|| "0".to_owned(), |n| n.to_string());
        let [ttl, grace] = expiry_args(self.default_ttl())?;
        let tokens: Vec<String> = batch.unique.iter().map(|m| m.tokens.to_string()).collect();
        let epoch = fresh_epoch();
        let mut args: Vec<&[u8]> =
            Vec::with_capacity(batch.unique.len().saturating_mul(3).saturating_add(5));
        args.extend([
            max.as_bytes(),
            self.overflow().as_arg().as_bytes(),
            ttl.as_bytes(),
            grace.as_bytes(),
            epoch.as_bytes(),
        ]);
        for (prepared, tokens) in batch.unique.iter().zip(&tokens) {
            args.extend([
                prepared.message.id.as_str().as_bytes(),
                tokens.as_bytes(),
                prepared.json.as_bytes(),
            ]);
        }
        let what = format!("append to thread {scope}");
        let reply = self
            .eval(&what, &SCRIPTS.append, &keys.all(), &args)
            .await
            .during("append")?;
        let Value::Array(items) = reply else {
            return Err(bad_reply(
                &what,
                "the append script did not return an array",
            ));
        };
        let numbers: Option<Vec<u64>> = items.iter().map(unsigned).collect();
        let numbers = numbers.ok_or_else(|| bad_reply(&what, "a seq is not a number"))?;
        let Some((&flags, numbers)) = numbers.split_first() else {
            return Err(bad_reply(&what, "the append script returned nothing"));
        };
        let Some((&inserted, unique_seqs)) = numbers.split_first() else {
            return Err(bad_reply(&what, "the append script returned no count"));
        };
        if unique_seqs.len() != batch.unique.len() {
            return Err(bad_reply(
                &what,
                format!(
                    "{} seqs for {} messages",
                    unique_seqs.len(),
                    batch.unique.len()
                ),
            ));
        }
        if flags & 2 != 0 {
            // A failure here only makes purge_expired count this thread late or not at all
            // (its record still expires by itself): the append stands.
            self.index_expiring(scope).await.during("append")?;
        }
        if flags & 1 != 0 {
            // The append is applied; an error here is returned so the caller retries, and the
            // retry (which stores nothing) adds the thread to the index again.
            self.index_thread(scope, &keys.meta)
                .await
                .during("append")?;
        }
        let inserted = usize::try_from(inserted).unwrap_or(usize::MAX);
        tracing::debug!(scope = %scope, inserted, given = messages.len(), "history.append");
        Ok(AppendOutcome {
            seqs: batch.seqs_for_input(unique_seqs),
            inserted,
        })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        if window == Window::Last(0) {
            return Ok(Vec::new());
        }
        let walk = Walk::of(window)?;
        let what = format!("read {window:?} of thread {scope}");
        let mut attempt = 0usize;
        let messages = loop {
            match self
                .read_pages(scope, &what, walk, Bounds::default())
                .await
                .during("read")?
            {
                Some(messages) => break messages,
                None if attempt < READ_RESTARTS => attempt = attempt.saturating_add(1),
                None => return Err(restarted_too_often(&what)).during("read"),
            }
        };
        tracing::debug!(scope = %scope, ?window, returned = messages.len(), "history.read");
        Ok(messages)
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("count thread {scope}");
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&keys.meta)
            .arg(&["last_seq", "active", "tokens", "deleted"]);
        let reply = self.query(&what, &cmd).await.during("count")?;
        let Value::Array(fields) = reply else {
            return Err(bad_reply(&what, "HMGET did not return an array"));
        };
        thread_count(&what, &fields)
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.archive_once(scope, seqs, &request_nonce())
            .await
            .during("archive")
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.clear_once(scope, &request_nonce())
            .await
            .during("clear")
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        if self.existing_only() {
            // A tool's read: scan, build and prune no index.
            return self
                .list_scopes("list threads", filter, &page, Listed::Threads)
                .await
                .during("list_threads");
        }
        self.list_indexed_threads(filter, &page)
            .await
            .during("list_threads")
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("set the TTL of thread {scope}");
        let [ttl_arg, grace] = expiry_args(ttl)?;
        let reply = self
            .eval(
                &what,
                &SCRIPTS.set_ttl,
                &keys.all(),
                &[ttl_arg.as_bytes(), grace.as_bytes()],
            )
            .await
            .during("set_ttl")?;
        match unsigned(&reply) {
            Some(1) => {
                if ttl.is_some() {
                    self.index_expiring(scope).await.during("set_ttl")?;
                }
                tracing::debug!(scope = %scope, ?ttl, "history.set_ttl");
                Ok(())
            }
            Some(0) => Err(Error::not_found(format!("no thread at {scope}"))),
            _ => Err(bad_reply(&what, "not a status")),
        }
    }

    async fn purge_expired(&self) -> Result<u64> {
        let purged = self.purge_indexed().await.during("purge_expired")?;
        tracing::debug!(purged, "history.purge_expired");
        Ok(purged)
    }

    /// One script call (`lua/read_since.lua`) reads the thread's epoch, its counts and the
    /// messages, as one snapshot, when the answer holds at most
    /// [`MAX_READ_PAGE`] messages. A larger answer (a long thread's whole
    /// [`Window::All`], or more than a page appended since the cursor) is read in pages as
    /// [`read`](HistoryStore::read) reads, bounded by that first call: only the messages up to
    /// the sequence number of the returned cursor, and only those above the cursor's for
    /// [`Delta::Appended`](memory_core::Delta::Appended); like any paged read it is not one
    /// snapshot (an archive meanwhile moves the epoch, so the next cursor read is whole), and a
    /// thread cleared and written again meanwhile is read again from the start.
    ///
    /// The epoch is meta `epoch`, a random non-zero u64: written when an append creates the
    /// thread, replaced when an archive moves a message or an append's `max_messages` overflow
    /// moves messages out of the window, gone with the thread's keys (clear, expiry). A thread
    /// written by a build before epochs gets one lazily, from its first cursor read. Every
    /// writer of a thread must be a build that keeps the epoch: an older build's archive does
    /// not move it.
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.cursor_read(scope, window, since)
            .await
            .during("read_since")
    }

    /// One call of the read script (`lua/read.lua`, mode `page`): the stored messages above
    /// `after`, active and archived, skipping the sequence numbers whose bodies
    /// `Overflow::Delete` deleted, at most `limit` of them (clamped to 1..=[`MAX_READ_PAGE`]).
    /// One call looks at no more than 4,000 sequence numbers; when every one it looked at was
    /// deleted, or every message it found is undecodable (left out with a warning), the page
    /// would be empty while the thread goes on, so the store calls again after the last one
    /// looked at, until the page holds a message or the thread ends: one call per page except
    /// on such a thread. A thread cleared and written again between those calls is read from
    /// `after` again (the `born` mark, as in [`read`](HistoryStore::read)). An expired thread's
    /// keys are gone: it reads as empty. Stored seqs are found by their token counts (deleted
    /// with the bodies): a body whose token count is missing (data the scripts did not write)
    /// is not found, where `Window::Everything` reports it as `Serialization`.
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let limit = limit.clamp(1, MAX_READ_PAGE);
        let what = format!("read {limit} messages after {after} of thread {scope}");
        let page = self
            .read_one_page(scope, &what, after, limit)
            .await
            .during("read_page")?;
        tracing::debug!(scope = %scope, after, returned = page.len(), "history.read_page");
        Ok(page)
    }

    /// The tenants with at least one thread: a `SCAN` of the threads' meta keys under the
    /// store's prefix (on every master of a cluster), sorted, after the cursor (the last tenant
    /// of the previous page). A meta key exists exactly while its thread holds a message (a
    /// clear deletes it, an expiry expires it with the thread's other keys, and `SCAN` does
    /// not return expired keys), so no tenant is listed for threads that are gone, and threads
    /// written before the per-tenant indexes existed count too. Each page costs a scan of the
    /// whole keyspace (the client keeps only the `limit + 1` smallest tenants): an
    /// administration call, not a hot path.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        self.list_key_tenants("list the tenants with threads", &page, Listed::Threads)
            .await
            .during("list_tenants")
    }
}

impl RedisStore {
    /// [`HistoryStore::archive`] as the request `nonce`: a re-sent request gets the reply of
    /// the applied one (see "Re-sent requests" on [`RedisStore`]).
    pub(crate) async fn archive_once(
        &self,
        scope: &Scope,
        seqs: RangeInclusive<u64>,
        nonce: &str,
    ) -> Result<u64> {
        let (first, last) = (*seqs.start(), *seqs.end());
        if first > last {
            return Ok(0);
        }
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("archive {first}..={last} of thread {scope}");
        let (first_arg, last_arg) = (first.to_string(), last.to_string());
        let epoch = fresh_epoch();
        let reply = self
            .eval(
                &what,
                &SCRIPTS.archive,
                &[&keys.meta, &keys.tok, &keys.active, &keys.ack],
                &[
                    first_arg.as_bytes(),
                    last_arg.as_bytes(),
                    nonce.as_bytes(),
                    epoch.as_bytes(),
                ],
            )
            .await?;
        let moved = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))?;
        tracing::debug!(scope = %scope, moved, first, last, "history.archive");
        Ok(moved)
    }

    /// [`HistoryStore::clear`] as the request `nonce` (see [`archive_once`](Self::archive_once)).
    pub(crate) async fn clear_once(&self, scope: &Scope, nonce: &str) -> Result<u64> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("clear thread {scope}");
        let mut all = keys.all().to_vec();
        all.push(&keys.ack);
        let reply = self
            .eval(&what, &SCRIPTS.clear, &all, &[nonce.as_bytes()])
            .await?;
        let removed = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))?;
        self.unindex_threads(scope.tenant().as_str(), std::slice::from_ref(scope))
            .await?;
        tracing::debug!(scope = %scope, removed, "history.clear");
        Ok(removed)
    }
}
