//! [`HistoryStore`] on Redis: each operation is one script or one command.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::history::skip_undecodable;
use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Error, HistoryCapabilities, HistoryStore,
    MAX_READ_PAGE, Page, PageRequest, PreparedBatch, Result, Scope, ScopeFilter, StoredMessage,
    TenantId, ThreadCount, ThreadCursor, Window,
};
use redis::Value;

use crate::conn::{integer, unsigned};
use crate::cursor_read::fresh_epoch;
use crate::error::{During, bad_reply};
use crate::keys::{self, Listed, ThreadKeys};
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
                None => {
                    return Err(Error::conflict(format!(
                        "{what}: the thread was cleared and written again while it was read, \
                         {} times in a row",
                        READ_RESTARTS + 1
                    )))
                    .during("read");
                }
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

/// How many times a read starts again when the thread is cleared and written again between two
/// of its pages, before it gives up with `Conflict`.
pub(crate) const READ_RESTARTS: usize = 3;

/// How a read walks the thread, page by page (see `lua/read.lua`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Walk {
    /// Active messages after a seq, oldest first (`All`, `After`).
    Forward { after: u64 },
    /// Stored messages, active and archived, oldest first (`Everything`).
    Everything,
    /// Active messages newest first, at most `remaining` of them, or as many as fit `budget`
    /// (`Last`, `TokenBudget`).
    Backward {
        remaining: Option<usize>,
        budget: Option<u64>,
    },
}

impl Walk {
    /// The walk of a window (`Last(0)` walks nothing: callers answer it without one).
    pub(crate) fn of(window: Window) -> Result<Self> {
        Ok(match window {
            Window::All => Walk::Forward { after: 0 },
            Window::Last(n) => Walk::Backward {
                remaining: Some(n),
                budget: None,
            },
            Window::After(seq) => Walk::Forward { after: seq },
            Window::TokenBudget(budget) => Walk::Backward {
                remaining: None,
                budget: Some(budget),
            },
            Window::Everything => Walk::Everything,
            other => {
                return Err(Error::unsupported(format!(
                    "the redis store does not know the window {other:?}"
                )));
            }
        })
    }
}

/// Limits of a paged read beyond its window (a cursor read's, see `cursor_read.rs`); the
/// default has none.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bounds {
    /// Only messages with a sequence number above this one.
    pub(crate) above: u64,
    /// Only messages with a sequence number up to this one.
    pub(crate) upto: Option<u64>,
    /// The thread's `born` mark the pages must all see (else the read starts again).
    pub(crate) born: Option<Vec<u8>>,
}

impl RedisStore {
    /// [`HistoryStore::read_page`]'s calls of the read script (see there).
    async fn read_one_page(
        &self,
        scope: &Scope,
        what: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let script_keys = [
            keys.meta.as_str(),
            keys.msg.as_str(),
            keys.tok.as_str(),
            keys.active.as_str(),
        ];
        let limit_arg = limit.to_string();
        let mut restarts = 0usize;
        let mut born: Option<Vec<u8>> = None;
        let mut cursor = after;
        loop {
            let cursor_arg = cursor.to_string();
            let reply = self
                .eval(
                    what,
                    &SCRIPTS.read,
                    &script_keys,
                    &[
                        b"page".as_slice(),
                        cursor_arg.as_bytes(),
                        limit_arg.as_bytes(),
                        b"".as_slice(),
                    ],
                )
                .await?;
            let Value::Array(mut items) = reply else {
                return Err(bad_reply(what, "the read script did not return an array"));
            };
            if items.len() < 2 {
                return Err(bad_reply(what, "the read script returned no page header"));
            }
            let body = items.split_off(2);
            let [Value::BulkString(mark), Value::BulkString(next)] = items.as_slice() else {
                return Err(bad_reply(what, "the page header is not two strings"));
            };
            match &born {
                Some(first) if first != mark => {
                    // Cleared and written again since the first call: read the new life from
                    // `after`, not from where the old one was probed to.
                    if restarts >= READ_RESTARTS {
                        return Err(Error::conflict(format!(
                            "{what}: the thread was cleared and written again while it was \
                             read, {} times in a row",
                            READ_RESTARTS + 1
                        )));
                    }
                    restarts = restarts.saturating_add(1);
                    born = None;
                    cursor = after;
                    continue;
                }
                Some(_) => {}
                None => born = Some(mark.clone()),
            }
            let page = decode_messages(what, Value::Array(body))?;
            if !page.is_empty() || next.is_empty() {
                return Ok(page);
            }
            let next = std::str::from_utf8(next)
                .ok()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| bad_reply(what, "a page cursor is not a number"))?;
            if next <= cursor {
                return Err(bad_reply(what, "the page cursor did not move"));
            }
            cursor = next;
        }
    }

    /// Reads the window `walk` selects, within `bounds`, in pages of at most [`MAX_READ_PAGE`]
    /// messages, each one script call, so no call holds the server for long. `None` when the
    /// thread was cleared and written again between two pages (its `born` mark changed, or is
    /// not `bounds.born`): the caller starts again.
    pub(crate) async fn read_pages(
        &self,
        scope: &Scope,
        what: &str,
        walk: Walk,
        bounds: Bounds,
    ) -> Result<Option<Vec<StoredMessage>>> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let script_keys = [
            keys.meta.as_str(),
            keys.msg.as_str(),
            keys.tok.as_str(),
            keys.active.as_str(),
        ];
        let (mode, mut cursor) = match walk {
            Walk::Forward { after } => ("forward", after.max(bounds.above).to_string()),
            Walk::Everything => ("everything", bounds.above.to_string()),
            // Backward pages read below their cursor.
            Walk::Backward { .. } => (
                "backward",
                bounds
                    .upto
                    .map_or_else(String::new, |upto| upto.saturating_add(1).to_string()),
            ),
        };
        let (mut remaining, mut budget) = match walk {
            Walk::Backward { remaining, budget } => (remaining, budget),
            _ => (None, None),
        };
        let mut born: Option<Vec<u8>> = bounds.born;
        // Backward pages come newest first; each page is in seq order.
        let mut pages: Vec<Vec<StoredMessage>> = Vec::new();
        loop {
            let limit = remaining.map_or(MAX_READ_PAGE, |r| r.min(MAX_READ_PAGE));
            let limit_arg = limit.to_string();
            let budget_arg = budget.map_or_else(String::new, |b| b.to_string());
            let reply = self
                .eval(
                    what,
                    &SCRIPTS.read,
                    &script_keys,
                    &[
                        mode.as_bytes(),
                        cursor.as_bytes(),
                        limit_arg.as_bytes(),
                        budget_arg.as_bytes(),
                    ],
                )
                .await?;
            let Value::Array(mut items) = reply else {
                return Err(bad_reply(what, "the read script did not return an array"));
            };
            if items.len() < 2 {
                return Err(bad_reply(what, "the read script returned no page header"));
            }
            let body = items.split_off(2);
            let [Value::BulkString(mark), Value::BulkString(next)] = items.as_slice() else {
                return Err(bad_reply(what, "the page header is not two strings"));
            };
            match &born {
                None => born = Some(mark.clone()),
                Some(first) if first != mark => return Ok(None),
                Some(_) => {}
            }
            let mut page = decode_messages(what, Value::Array(body))?;
            let next_seq = std::str::from_utf8(next)
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            // The next page starts past a bound: this one is the last.
            let bounded = match walk {
                Walk::Backward { .. } => {
                    next_seq.is_some_and(|n| n <= bounds.above.saturating_add(1))
                }
                _ => bounds
                    .upto
                    .is_some_and(|upto| next_seq.is_some_and(|n| n >= upto)),
            };
            page.retain(|m| m.seq > bounds.above && bounds.upto.is_none_or(|upto| m.seq <= upto));
            if let Some(r) = remaining.as_mut() {
                *r = r.saturating_sub(page.len());
            }
            if let Some(b) = budget.as_mut() {
                let used: u64 = page.iter().map(|m| u64::from(m.tokens)).sum();
                *b = b.saturating_sub(used);
            }
            pages.push(page);
            if next.is_empty() || remaining == Some(0) || bounded {
                break;
            }
            cursor = std::str::from_utf8(next)
                .map_err(|_| bad_reply(what, "a page cursor is not text"))?
                .to_owned();
        }
        if matches!(walk, Walk::Backward { .. }) {
            pages.reverse();
        }
        Ok(Some(pages.into_iter().flatten().collect()))
    }

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

/// How many index members a `list_threads` page looks at, at most, per item it may return
/// (plus [`LIST_EXAMINED_BASE`]): a page that meets only stale members (threads cleared or
/// expired since they were indexed, each removed as it is met) ends short, with a cursor.
const LIST_EXAMINED_PER_ITEM: usize = 10;
/// See [`LIST_EXAMINED_PER_ITEM`].
const LIST_EXAMINED_BASE: usize = 1_000;
/// How many due threads `purge_expired` takes from the expiry index at a time.
const PURGE_INDEX_BATCH: usize = 500;
/// How many scope keys one `ZADD` of the one-time index scan carries.
const INDEX_CHUNK: usize = 500;

/// Unix time in milliseconds (0 before 1970).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl RedisStore {
    /// Adds the thread of `scope` to the expiry index, due now: the next `purge_expired` reads
    /// its real deadline (`PTTL`) and scores it with that.
    async fn index_expiring(&self, scope: &Scope) -> Result<()> {
        let mut add = redis::cmd("ZADD");
        add.arg(keys::expiry_index(self.prefix()))
            .arg(now_ms())
            .arg(scope.key());
        self.query(&format!("add thread {scope} to the expiry index"), &add)
            .await?;
        Ok(())
    }

    /// Makes sure the expiry index holds every expiry record written before it existed: a purge
    /// that finds no completion mark scans the records (`SCAN`, on every master), adds them
    /// due now, and sets the mark for 24 hours.
    async fn ensure_expiry_index(&self) -> Result<String> {
        let index = keys::expiry_index(self.prefix());
        let complete = keys::expiry_index_complete(self.prefix());
        let what = "check the expiry index";
        let mut exists = redis::cmd("EXISTS");
        exists.arg(&complete);
        if integer(&self.query(what, &exists).await?).unwrap_or(0) > 0 {
            return Ok(index);
        }
        let what = "build the expiry index";
        let pattern = keys::scan_all_pattern(self.prefix(), Listed::ThreadExpiries);
        let found: BTreeSet<String> = self
            .scan_keys(what, &pattern)
            .await?
            .iter()
            .filter_map(|key| keys::scope_of(self.prefix(), key, Listed::ThreadExpiries))
            .map(|scope| scope.key())
            .collect();
        let found: Vec<String> = found.into_iter().collect();
        let now = now_ms();
        for chunk in found.chunks(INDEX_CHUNK) {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in chunk {
                add.arg(now).arg(key);
            }
            self.query(what, &add).await?;
        }
        // The mark lapses with the expiry records' grace: at most once a day, a purge scans
        // again and catches records an older writer or a failed `ZADD` left out.
        let mut mark = redis::cmd("SET");
        mark.arg(&complete)
            .arg(1)
            .arg("PX")
            .arg(crate::store::EXPIRY_RECORD_GRACE.as_millis().to_string());
        self.query(what, &mark).await?;
        tracing::info!(records = found.len(), "history.expiry_index_built");
        Ok(index)
    }

    /// `purge_expired` from the expiry index: only the threads due (scored at or before now)
    /// are looked at, in batches. A thread still alive is scored again with its deadline
    /// (`PTTL`), or leaves the index when it has no TTL any more; the expiry record of a thread
    /// that is gone is deleted by the purge script (which checks again), the thread leaves both
    /// indexes, and each deleted record counts one.
    async fn purge_indexed(&self) -> Result<u64> {
        let index = self.ensure_expiry_index().await?;
        let what = "purge expired threads";
        let mut purged = 0u64;
        loop {
            let now = now_ms();
            let mut due = redis::cmd("ZRANGEBYSCORE");
            due.arg(&index)
                .arg("-inf")
                .arg(now)
                .arg("LIMIT")
                .arg(0)
                .arg(PURGE_INDEX_BATCH);
            let Value::Array(members) = self.query(what, &due).await? else {
                return Err(bad_reply(what, "ZRANGEBYSCORE did not return an array"));
            };
            let members: Vec<String> = members.iter().filter_map(crate::conn::text).collect();
            if members.is_empty() {
                return Ok(purged);
            }
            let mut drop: Vec<String> = Vec::new();
            let mut rescore: Vec<(u64, String)> = Vec::new();
            let mut scopes = Vec::new();
            for member in &members {
                match keys::scope_from_key(member) {
                    Some(scope) => scopes.push(scope),
                    None => drop.push(member.clone()),
                }
            }
            let metas: Vec<String> = scopes
                .iter()
                .map(|s| ThreadKeys::new(self.prefix(), s).meta)
                .collect();
            let ttls = self.each(what, "PTTL", &metas).await?;
            let mut gone = Vec::new();
            for (scope, ttl) in scopes.into_iter().zip(ttls) {
                match integer(&ttl) {
                    Some(ms) if ms > 0 => {
                        rescore.push((now.saturating_add(ms.unsigned_abs()), scope.key()));
                    }
                    // Alive without a TTL: no longer expiring.
                    Some(-1) => drop.push(scope.key()),
                    _ => gone.push(scope),
                }
            }
            purged = purged.saturating_add(self.purge_gone(what, &gone).await?);
            drop.extend(gone.iter().map(Scope::key));
            if !rescore.is_empty() {
                let mut add = redis::cmd("ZADD");
                add.arg(&index);
                for (score, key) in &rescore {
                    add.arg(*score).arg(key);
                }
                self.query(what, &add).await?;
            }
            if !drop.is_empty() {
                let mut rem = redis::cmd("ZREM");
                rem.arg(&index).arg(&drop);
                self.query(what, &rem).await?;
            }
            let mut by_tenant: std::collections::BTreeMap<String, Vec<Scope>> = Default::default();
            for scope in gone {
                by_tenant
                    .entry(scope.tenant().as_str().to_owned())
                    .or_default()
                    .push(scope);
            }
            for (tenant, scopes) in by_tenant {
                self.unindex_threads(&tenant, &scopes).await?;
            }
            if members.len() < PURGE_INDEX_BATCH {
                return Ok(purged);
            }
        }
    }

    /// Runs the purge script (delete the expiry record if the thread is gone) for each scope:
    /// one pipeline on a single server, concurrent calls on a cluster. Returns how many
    /// records it deleted.
    async fn purge_gone(&self, what: &str, gone: &[Scope]) -> Result<u64> {
        if gone.is_empty() {
            return Ok(0);
        }
        let script = &crate::scripts::SCRIPTS.purge;
        let keys: Vec<ThreadKeys> = gone
            .iter()
            .map(|s| ThreadKeys::new(self.prefix(), s))
            .collect();
        let replies: Vec<Value> =
            if self.is_cluster() {
                futures::future::try_join_all(keys.iter().map(|k| async move {
                    self.eval(what, script, &[&k.meta, &k.expiry], &[]).await
                }))
                .await?
            } else {
                // Loaded first, so the EVALSHAs after it find the script on a restarted server.
                let mut pipe = redis::pipe();
                pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
                for k in &keys {
                    pipe.cmd("EVALSHA")
                        .arg(&script.sha1)
                        .arg(2)
                        .arg(&k.meta)
                        .arg(&k.expiry);
                }
                self.send_pipeline(what, &pipe)
                    .await?
                    .into_iter()
                    .skip(1)
                    .collect()
            };
        let mut purged = 0u64;
        for reply in replies {
            if crate::conn::pipeline_integer(what, reply)? > 0 {
                purged = purged.saturating_add(1);
            }
        }
        Ok(purged)
    }

    /// Adds the thread of `scope` to its tenant's index, then clears the thread's `unindexed`
    /// mark (an `HDEL` on a thread cleared meanwhile changes nothing).
    async fn index_thread(&self, scope: &Scope, meta: &str) -> Result<()> {
        let index = keys::thread_index(self.prefix(), scope.tenant().as_str());
        let what = format!("index thread {scope}");
        let mut add = redis::cmd("ZADD");
        add.arg(&index).arg(0).arg(scope.key());
        self.query(&what, &add).await?;
        let mut done = redis::cmd("HDEL");
        done.arg(meta).arg("unindexed");
        self.query(&what, &done).await?;
        Ok(())
    }

    /// Removes `scopes` (of one tenant) from the tenant's index, then adds back those whose
    /// thread exists again. An append that creates a thread adds it after creating it, so
    /// whatever the order of the two, a thread that exists stays indexed: either this check
    /// sees it, or its append's `ZADD` comes after this `ZREM`.
    async fn unindex_threads(&self, tenant: &str, scopes: &[Scope]) -> Result<()> {
        if scopes.is_empty() {
            return Ok(());
        }
        let index = keys::thread_index(self.prefix(), tenant);
        let what = format!(
            "remove {} threads from the index of tenant {tenant}",
            scopes.len()
        );
        let mut rem = redis::cmd("ZREM");
        rem.arg(&index);
        for scope in scopes {
            rem.arg(scope.key());
        }
        self.query(&what, &rem).await?;
        let metas: Vec<String> = scopes
            .iter()
            .map(|s| ThreadKeys::new(self.prefix(), s).meta)
            .collect();
        let alive = self.exist(&what, &metas).await?;
        let back: Vec<String> = scopes
            .iter()
            .zip(alive)
            .filter(|(_, alive)| *alive)
            .map(|(s, _)| s.key())
            .collect();
        if !back.is_empty() {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in &back {
                add.arg(0).arg(key);
            }
            self.query(&what, &add).await?;
        }
        Ok(())
    }

    /// Makes sure the tenant's index holds every thread written before the index existed: the
    /// first listing of a tenant scans its thread keys once (`SCAN`, on every master) and adds
    /// them, then marks the index complete ([`keys::INDEX_COMPLETE`]).
    async fn ensure_index(&self, tenant: &str) -> Result<String> {
        let index = keys::thread_index(self.prefix(), tenant);
        let what = format!("check the thread index of tenant {tenant}");
        let mut score = redis::cmd("ZSCORE");
        score.arg(&index).arg(keys::INDEX_COMPLETE);
        if !matches!(self.query(&what, &score).await?, Value::Nil) {
            return Ok(index);
        }
        let what = format!("build the thread index of tenant {tenant}");
        let filter = ScopeFilter::tenant(
            memory_core::TenantId::new(tenant)
                .map_err(|e| bad_reply(&what, format!("the tenant is not valid: {e}")))?,
        );
        let pattern = keys::scan_pattern(self.prefix(), &filter, Listed::Threads);
        let found = self.scan_keys(&what, &pattern).await?;
        let scope_keys: BTreeSet<String> = found
            .iter()
            .filter_map(|key| keys::scope_of(self.prefix(), key, Listed::Threads))
            .map(|scope| scope.key())
            .collect();
        let scope_keys: Vec<String> = scope_keys.into_iter().collect();
        for chunk in scope_keys.chunks(INDEX_CHUNK) {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in chunk {
                add.arg(0).arg(key);
            }
            self.query(&what, &add).await?;
        }
        let mut mark = redis::cmd("ZADD");
        mark.arg(&index).arg(0).arg(keys::INDEX_COMPLETE);
        self.query(&what, &mark).await?;
        tracing::info!(tenant, threads = scope_keys.len(), "history.index_built");
        Ok(index)
    }

    /// A page of `list_threads` from the tenant's index: `O(page)` work, not `O(keyspace)`.
    /// Members whose thread no longer exists (cleared, expired) are removed as they are met.
    async fn list_indexed_threads(
        &self,
        filter: &ScopeFilter,
        page: &PageRequest,
    ) -> Result<Page<Scope>> {
        let tenant = filter.tenant.as_str();
        let index = self.ensure_index(tenant).await?;
        let what = format!("list the threads of tenant {tenant}");
        let limit = page.limit.max(1);
        let budget = limit
            .saturating_mul(LIST_EXAMINED_PER_ITEM)
            .saturating_add(LIST_EXAMINED_BASE);
        let (mut min, max) = keys::index_range(filter, page.cursor.as_deref());
        let mut live: Vec<Scope> = Vec::new();
        let mut examined = 0usize;
        let fetch = limit.saturating_add(1).min(LIST_EXAMINED_BASE);
        loop {
            let mut range = redis::cmd("ZRANGEBYLEX");
            range
                .arg(&index)
                .arg(&min)
                .arg(&max)
                .arg("LIMIT")
                .arg(0)
                .arg(fetch);
            let Value::Array(members) = self.query(&what, &range).await? else {
                return Err(bad_reply(&what, "ZRANGEBYLEX did not return an array"));
            };
            let members: Vec<String> = members.iter().filter_map(crate::conn::text).collect();
            let Some(last) = members.last().cloned() else {
                return Ok(Page {
                    items: live,
                    next_cursor: None,
                });
            };
            let candidates: Vec<Scope> = members
                .iter()
                .filter_map(|m| keys::scope_from_key(m))
                .filter(|s| filter.matches(s))
                .collect();
            let metas: Vec<String> = candidates
                .iter()
                .map(|s| ThreadKeys::new(self.prefix(), s).meta)
                .collect();
            let alive = self.exist(&what, &metas).await?;
            let mut stale = Vec::new();
            for (scope, alive) in candidates.into_iter().zip(alive) {
                if !alive {
                    stale.push(scope);
                } else if live.len() < limit {
                    live.push(scope);
                } else {
                    // One more than a page: the page ends at its last item, with a cursor.
                    self.unindex_threads(tenant, &stale).await?;
                    let next_cursor = live.last().map(Scope::key);
                    return Ok(Page {
                        items: live,
                        next_cursor,
                    });
                }
            }
            self.unindex_threads(tenant, &stale).await?;
            examined = examined.saturating_add(members.len());
            let exhausted = members.len() < fetch;
            min = format!("({last}");
            if exhausted {
                return Ok(Page {
                    items: live,
                    next_cursor: None,
                });
            }
            if examined >= budget {
                // Mostly stale members: end the page short; the next one goes on after them.
                return Ok(Page {
                    items: live,
                    next_cursor: Some(last),
                });
            }
        }
    }
}

/// The counts of a thread from its meta fields `last_seq`, `active`, `tokens`, `deleted` (in
/// this order; absent ones count 0).
pub(crate) fn thread_count(what: &str, fields: &[Value]) -> Result<ThreadCount> {
    let field = |i: usize| -> Result<u64> {
        match fields.get(i) {
            None | Some(Value::Nil) => Ok(0),
            // Counters go through HINCRBY and never go below 0 unless the data is corrupt.
            Some(v) => integer(v)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad_reply(what, "a thread counter is not a count")),
        }
    };
    let (last_seq, active, active_tokens, deleted) = (field(0)?, field(1)?, field(2)?, field(3)?);
    Ok(ThreadCount {
        active,
        archived: last_seq.saturating_sub(active).saturating_sub(deleted),
        active_tokens,
        last_seq,
    })
}

/// Decodes the read script's reply: `seq, tokens, active, json` per message. A reply of another
/// shape is [`Serialization`](memory_core::ErrorKind::Serialization); a message that does not
/// decode (a token count over `u32`, a body that is not UTF-8 or not a message) is left out
/// with a warning naming the thread and its sequence number.
pub(crate) fn decode_messages(what: &str, reply: Value) -> Result<Vec<StoredMessage>> {
    let Value::Array(items) = reply else {
        return Err(bad_reply(what, "the read script did not return an array"));
    };
    if items.len() % 4 != 0 {
        return Err(bad_reply(
            what,
            "the read script returned a partial message",
        ));
    }
    let mut out = Vec::with_capacity(items.len() / 4);
    for chunk in items.chunks_exact(4) {
        let [seq, tokens, active, body] = chunk else {
            return Err(bad_reply(
                what,
                "the read script returned a partial message",
            ));
        };
        let (Some(seq), Some(tokens), Some(active)) =
            (unsigned(seq), unsigned(tokens), unsigned(active))
        else {
            return Err(bad_reply(
                what,
                "a seq, token count or flag is not a number",
            ));
        };
        let Value::BulkString(body) = body else {
            return Err(bad_reply(what, "a message body is not a string"));
        };
        let decoded = decode_message(seq, tokens, body);
        match decoded {
            Ok((message, tokens)) => out.push(StoredMessage {
                seq,
                tokens,
                archived: active == 0,
                message: message.into(),
            }),
            // One bad message never makes the thread unreadable (the `HistoryStore` contract).
            Err(err) => skip_undecodable(&what, seq, &err),
        }
    }
    Ok(out)
}

/// One stored message body and token count, decoded.
fn decode_message(seq: u64, tokens: u64, body: &[u8]) -> Result<(ChatMessage, u32)> {
    let json = std::str::from_utf8(body)
        .map_err(|e| Error::serialization(format!("message {seq} is not UTF-8")).with_source(e))?;
    let message = ChatMessage::from_json(json)?;
    let tokens = u32::try_from(tokens).map_err(|_| {
        Error::serialization(format!("message {seq} has an impossible token count"))
    })?;
    Ok((message, tokens))
}
