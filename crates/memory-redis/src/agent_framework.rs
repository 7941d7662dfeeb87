//! [`AfRedisHistory`]: chat history in Microsoft Agent Framework's `RedisHistoryProvider` layout,
//! so a Python agent and a Rust agent can share one conversation in one Redis.

mod key;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::history::skip_undecodable;
use memory_core::{
    AppendOutcome, ChatMessage, Error, HistoryCapabilities, HistoryStore, MAX_READ_PAGE, Page,
    PageRequest, PreparedBatch, Repeats, Result, Scope, ScopeFilter, SessionId, StoredMessage,
    ThreadCount, TokenCounter, Window, default_token_counter, ttl_millis,
};
use memory_interop::agent_framework::{
    AfOptions, derives_id, from_agent_framework, to_agent_framework,
};
use memory_interop::python_json::dumps;
use memory_interop::repeated::RepeatedIds;
use redis::Value;
use redis::aio::ConnectionManager;

pub use key::AfKeyFormat;

use crate::config::{Endpoint, Timeouts};
use crate::conn::{Connection, integer, unsigned};
use crate::error::bad_reply;
use crate::scripts::SCRIPTS;
use crate::store::{RedisStore, scope_page};

/// How many times a paged read starts over when the list shifts between two of its pages.
const READ_RESTARTS: usize = 3;
/// The first and the largest chunk a token-budget read fetches, in elements.
const BUDGET_FIRST_CHUNK: i64 = 32;
const BUDGET_MAX_CHUNK: i64 = 1024;

/// A [`HistoryStore`] that reads and writes exactly the layout of Microsoft Agent Framework's
/// `RedisHistoryProvider`, so a Python agent and a Rust agent can share one conversation in one
/// Redis.
///
/// One store serves every session of one provider configuration ([`AfKeyFormat`]) and one
/// scope template. Cloning it is cheap and shares the connection. It runs on the connection
/// plumbing of [`RedisStore`] (URLs, reconnection, timeouts, scripts), on one server or a Redis
/// Cluster (`redis+cluster://…`): each list is one key, and every step touches that key alone.
/// [`RedisStore::agent_framework`] opens one on a store's own connection.
///
/// ```no_run
/// # async fn run() -> memory_core::Result<()> {
/// use memory_core::{ChatMessage, HistoryStore, Scope, Window};
/// use memory_redis::{AfKeyFormat, AfRedisHistory};
///
/// // The Python side: RedisHistoryProvider(redis_url=…, application_id="demo-app", agent_id="demo-agent")
/// let format = AfKeyFormat::scoped("demo-app").with_agent("demo-agent");
/// let history = AfRedisHistory::connect("redis://127.0.0.1:6379", format).await?;
/// let scope = Scope::session("session-1")?;
/// history.append(&scope, &[ChatMessage::user("What is on my calendar tomorrow?")]).await?;
/// let transcript = history.read(&scope, Window::All).await?;
/// # Ok(()) }
/// ```
///
/// # Layout
/// One Redis LIST per session and nothing else: no index, metadata or expiry-record keys. Each
/// element is one message as `json.dumps(Message.to_dict())` (written with
/// [`to_agent_framework`] and [`dumps`](memory_interop::python_json::dumps), byte for byte what Python writes; read
/// with [`from_agent_framework`]), oldest first. The key is named by [`AfKeyFormat`], which must
/// match the Python provider's `key_format`, `key_prefix`, `tenant_id`, `application_id`,
/// `agent_id` and `source_id`; the session id of a call is the session id of the [`Scope`].
///
/// # Scopes
/// Agent Framework's key has no user and its own tenant, agent and source, fixed per provider.
/// A store is therefore bound to one *scope template* (by default `Scope::session(…)`'s:
/// tenant `default`, no user, no agent, source `history`; see
/// [`scope_template`](AfRedisHistoryBuilder::scope_template)): it serves the scopes
/// with that tenant, user, agent and source, one list per session id, and refuses any other
/// scope with [`InvalidInput`](memory_core::ErrorKind::InvalidInput), so two users or two agents
/// can never share a list by accident. Use one store per Python provider configuration.
///
/// # What this mode keeps and what it cannot
/// - **Appends** are one Lua script: atomic (unlike Python's read, `MULTI`/`RPUSH`, then a
///   separate `LTRIM`), reading only `LLEN` and the last `len(batch)` elements (Python reads the
///   whole list), deduplicated by Agent Framework's rules rather than by id alone (see
///   [`append`](#method.append)), `max_messages` applied with `LTRIM`
///   and the default TTL re-applied in the same step.
/// - **Sequence numbers are list positions** (1 for the oldest element). The layout stores no
///   numbers, so positions shift when the front of the list is trimmed, by `max_messages` here
///   or by a Python provider: a seq is valid until the next trim.
/// - **Reads** go in pages of at most [`MAX_READ_PAGE`] elements (`LRANGE` in one short
///   script each, with the list's length), so a long list never holds the server. Each page
///   after the first re-reads the last element of the page before it; when that element moved
///   (the front was trimmed or the list cleared in between), the read starts over, at most
///   three times, then fails with [`Conflict`](memory_core::ErrorKind::Conflict).
/// - **No token counts are stored.** Token budgets and [`count`](HistoryStore::count) decode
///   the messages and count them with the store's counter at read time; a
///   [`StoredMessage::tokens`] is that count.
/// - **No archive.** The list holds the active window and nothing else:
///   [`archive`](HistoryStore::archive) is [`Unsupported`](memory_core::ErrorKind::Unsupported)
///   (so is a [`Memory`](memory_core::Memory) flush, which archives), and every count has
///   `archived` 0. Bound a thread with `max_messages` instead: trimmed messages are deleted, as
///   Python's are.
/// - **TTL** is the key's own expiry (Python sets none and never removes one: an `RPUSH` or
///   `LTRIM` keeps it). With a default TTL every append re-applies it; a TTL set with
///   [`set_ttl`](HistoryStore::set_ttl) has nowhere to be recorded, so later appends keep its
///   deadline without restarting it (unless a default TTL replaces it).
///   [`purge_expired`](HistoryStore::purge_expired) returns 0: Redis deletes expired lists by
///   itself and no record of them is kept.
/// - **Listing** maps keys back to sessions: a verbatim or base32 session segment decodes; a
///   session whose encoding was over 180 characters became a SHA-256 digest and cannot be
///   listed (it can still be read and written by its session id), and neither can a session id
///   that is not a valid [`SessionId`] (Agent Framework's session ids are free strings).
/// - **Ids.** A message Python wrote without `message_id` gets an id derived from its content;
///   repeats of one message in a list (a user who says "ok" twice) are told apart by
///   [`RepeatedIds`]: the first keeps the derived id, a later one gets an id from the content
///   and the number of equal id-less messages before it in the list. A read that starts after
///   the list's first element and holds an id-less message therefore also reads the elements
///   before it (in pages, like every read); a trim of the list's front renumbers repeats as it
///   renumbers seqs. Written back (by [`to_agent_framework`]), a repeat carries its id as
///   `message_id`, so it reads back with the same id in any list.
/// - **Re-sent requests** (a cluster client re-sends a script whose reply was lost, see
///   [`RedisStore`]): a re-sent append finds its batch at the end of the list and stores
///   nothing again, unless the batch is a single id-less `user` message, which Agent
///   Framework's rules take for a new turn; a re-sent `clear` returns 0. The layout has no key
///   to record a request in.
/// - **No cursor reads.** [`read_since`](HistoryStore::read_since) is
///   [`Unsupported`](memory_core::ErrorKind::Unsupported): a cursor read needs an epoch that
///   every writer changes when the window loses messages, and the list has no place for one,
///   nor would Python's provider change it when it trims or clears the list. Read a window
///   ([`read`](HistoryStore::read)) instead.
/// - **Tenants.** [`list_tenants`](HistoryStore::list_tenants) is
///   [`Unsupported`](memory_core::ErrorKind::Unsupported): a list's key holds Agent Framework's
///   own `tenant_id` segment (or none), not a [`Scope`]'s tenant; the store serves the one
///   tenant of its scope template by configuration, and two stores with different templates
///   over one key format would read the same lists. The keys do not map to tenants, so the
///   store cannot honestly list any.
#[derive(Clone)]
pub struct AfRedisHistory {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Connection,
    format: AfKeyFormat,
    template: Option<Scope>,
    max_messages: Option<usize>,
    default_ttl: Option<Duration>,
    counter: Arc<dyn TokenCounter>,
}

impl fmt::Debug for AfRedisHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfRedisHistory")
            .field("endpoint", &self.inner.conn.endpoint())
            .field("cluster", &self.inner.conn.is_cluster())
            .field("format", &self.inner.format)
            .field("template", &self.inner.template)
            .field("max_messages", &self.inner.max_messages)
            .field("default_ttl", &self.inner.default_ttl)
            .finish_non_exhaustive()
    }
}

impl AfRedisHistory {
    /// Connects with the default options to `url` (any URL [`RedisStore::connect`] accepts:
    /// `redis://[user:password@]host[:port][/db]`, `rediss://…` with the `tls` feature,
    /// `unix:///path`, `redis+cluster://host1:port1,host2:port2`), naming lists by `format`.
    ///
    /// # Errors
    /// As [`AfRedisHistoryBuilder::connect`].
    pub async fn connect(url: &str, format: AfKeyFormat) -> Result<Self> {
        Self::builder(url, format).connect().await
    }

    /// A builder for a store at `url` that names lists by `format`.
    pub fn builder(url: &str, format: AfKeyFormat) -> AfRedisHistoryBuilder {
        AfRedisHistoryBuilder::new(Target::Endpoint(Endpoint::parse(url)), format)
    }

    /// A builder for a store on an application's existing connection manager (its own timeouts
    /// and reconnection settings apply; the builder's timeouts still bound each call).
    pub fn builder_on(conn: ConnectionManager, format: AfKeyFormat) -> AfRedisHistoryBuilder {
        AfRedisHistoryBuilder::new(Target::Manager(conn), format)
    }

    /// The key format.
    pub fn key_format(&self) -> &AfKeyFormat {
        &self.inner.format
    }

    /// The Redis key of the list of `scope`.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when `scope`'s tenant, user, agent
    /// or source is not the store's scope template's.
    pub fn key_for(&self, scope: &Scope) -> Result<String> {
        let accepted = match &self.inner.template {
            Some(t) => {
                scope.tenant() == t.tenant()
                    && scope.user() == t.user()
                    && scope.agent() == t.agent()
                    && scope.source() == t.source()
            }
            None => {
                scope.tenant().as_str() == memory_core::scope::DEFAULT_TENANT
                    && scope.user().is_none()
                    && scope.agent().is_none()
                    && scope.source().as_str() == memory_core::scope::DEFAULT_SOURCE
            }
        };
        if !accepted {
            return Err(Error::invalid_input(format!(
                "{scope} is not served by this Agent Framework history: its lists are keyed by \
                 session only, for the tenant, user, agent and source of its scope template"
            )));
        }
        self.inner.format.key(scope.session_id().as_str())
    }

    /// Checks that the server answers (`PING`).
    ///
    /// # Errors
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when it does not.
    pub async fn ping(&self) -> Result<()> {
        self.inner.conn.ping().await
    }

    /// The scope of `session` under the scope template.
    fn scope_of(&self, session: SessionId) -> Result<Scope> {
        let Some(template) = &self.inner.template else {
            return Scope::session(session.as_str());
        };
        let mut scope = Scope::new(template.tenant().clone(), session)
            .with_source_id(template.source().clone());
        if let Some(user) = template.user() {
            scope = scope.with_user(user.as_str())?;
        }
        if let Some(agent) = template.agent() {
            scope = scope.with_agent_id(agent.clone());
        }
        Ok(scope)
    }

    /// `LRANGE key start stop` with the list's length and newest element, atomically.
    async fn read_range(&self, what: &str, key: &str, start: i64, stop: i64) -> Result<ListRange> {
        let (start_arg, stop_arg) = (start.to_string(), stop.to_string());
        let reply = self
            .inner
            .conn
            .eval(
                what,
                &SCRIPTS.af_read,
                &[key],
                &[start_arg.as_bytes(), stop_arg.as_bytes()],
            )
            .await?;
        let Value::Array(items) = reply else {
            return Err(bad_reply(what, "the read script did not return an array"));
        };
        let mut items = items.into_iter();
        let len = items
            .next()
            .as_ref()
            .and_then(integer)
            .ok_or_else(|| bad_reply(what, "the read script returned no length"))?;
        let newest = match items.next() {
            Some(Value::BulkString(bytes)) => Some(bytes),
            Some(Value::Nil) => None,
            _ => {
                return Err(bad_reply(
                    what,
                    "the read script returned no newest element",
                ));
            }
        };
        let elements = items
            .map(|item| match item {
                Value::BulkString(bytes) => Ok(bytes),
                _ => Err(bad_reply(what, "a list element is not a string")),
            })
            .collect::<Result<Vec<_>>>()?;
        // Past the end (`Window::After(u64::MAX)`) the range is empty and starts at `len`, so
        // the positions of what was read never overflow.
        let first = if start < 0 {
            len.saturating_add(start).max(0)
        } else {
            start.min(len)
        };
        Ok(ListRange {
            len,
            newest,
            first,
            elements,
        })
    }

    /// Decodes the element at `position` (1-based) of `key` into a stored message, and whether
    /// its id was derived from its content (no `message_id`): such an id is the one of the
    /// first equal message until [`with_repeat_ids`](Self::with_repeat_ids) numbers repeats.
    fn decode(&self, key: &str, position: i64, element: &[u8]) -> Result<Decoded> {
        let corrupt = |detail: String| {
            Error::serialization(format!(
                "element {position} of the Agent Framework list {key} {detail}"
            ))
        };
        let value: serde_json::Value = serde_json::from_slice(element)
            .map_err(|e| corrupt("is not JSON".to_owned()).with_source(e))?;
        let message = from_agent_framework(&value)
            .map_err(|e| corrupt("is not an Agent Framework message".to_owned()).with_source(e))?;
        let stored = StoredMessage {
            seq: u64::try_from(position).unwrap_or_default(),
            tokens: self.inner.counter.count_message(&message),
            archived: false,
            message: message.into(),
        };
        Ok((stored, derives_id(&value)))
    }

    /// `decoded` (messages of `key` in list order, as read) with the ids of repeated id-less
    /// messages numbered over the whole list ([`RepeatedIds`]): the first message with a
    /// content keeps the id derived from it, a later one gets its own. When the read began
    /// after the list's start and holds such a message, the elements before it are read too
    /// (in pages of [`MAX_READ_PAGE`], each one short script call) to count the equal messages
    /// that come first.
    async fn with_repeat_ids(
        &self,
        what: &str,
        key: &str,
        decoded: Vec<Decoded>,
    ) -> Result<Vec<StoredMessage>> {
        let mut ids = RepeatedIds::new();
        if let Some((first, _)) = decoded.first()
            && first.seq > 1
            && decoded.iter().any(|(_, derived)| *derived)
        {
            let before = i64::try_from(first.seq.saturating_sub(1)).unwrap_or(i64::MAX);
            self.count_earlier(what, key, before, &mut ids).await?;
        }
        Ok(decoded
            .into_iter()
            .map(|(mut stored, derived)| {
                if derived {
                    let mut message = ChatMessage::clone(&stored.message);
                    message.id = ids.next(message.id);
                    stored.message = message.into();
                }
                stored
            })
            .collect())
    }

    /// Counts into `ids` the id-less messages among the first `end` elements of `key`, read in
    /// pages (elements that do not decode are left out, as reads leave them out).
    async fn count_earlier(
        &self,
        what: &str,
        key: &str,
        end: i64,
        ids: &mut RepeatedIds,
    ) -> Result<()> {
        let page = i64::try_from(MAX_READ_PAGE).unwrap_or(i64::MAX);
        let mut start = 0i64;
        while start < end {
            let stop = start.saturating_add(page).min(end).saturating_sub(1);
            let range = self.read_range(what, key, start, stop).await?;
            if range.elements.is_empty() {
                break;
            }
            for element in &range.elements {
                let Ok(value) = serde_json::from_slice::<serde_json::Value>(element) else {
                    continue;
                };
                if derives_id(&value)
                    && let Ok(message) = from_agent_framework(&value)
                {
                    ids.next(message.id);
                }
            }
            start = start.saturating_add(i64::try_from(range.elements.len()).unwrap_or(page));
        }
        Ok(())
    }

    /// [`decode`](Self::decode), or `None` with a warning naming the list and the position for
    /// an element that cannot be decoded: reads leave it out (the `HistoryStore` contract), so
    /// one bad element never makes the list unreadable.
    fn decode_or_skip(&self, key: &str, position: i64, element: &[u8]) -> Option<Decoded> {
        self.decode(key, position, element)
            .inspect_err(|err| {
                skip_undecodable(&key, u64::try_from(position).unwrap_or_default(), err);
            })
            .ok()
    }

    /// Decodes elements starting at 0-based index `first`, leaving out those that do not
    /// decode.
    fn decode_all(&self, key: &str, first: i64, elements: &[Vec<u8>]) -> Vec<Decoded> {
        elements
            .iter()
            .zip(first.saturating_add(1)..)
            .filter_map(|(element, position)| self.decode_or_skip(key, position, element))
            .collect()
    }

    /// The elements from index `start` (negative: from the end) to the end of the list, at most
    /// `most` of them, in pages of at most [`MAX_READ_PAGE`] elements, each one short script
    /// call (a long list is never read in one step that blocks the server). Each page after the
    /// first also reads the last element of the page before it: when that element moved (the
    /// list was trimmed or cleared in between, which shifts positions), the read starts over, at
    /// most [`READ_RESTARTS`] times, then fails with `Conflict`. Elements appended meanwhile
    /// are read too (up to `most`).
    async fn read_paged(
        &self,
        what: &str,
        key: &str,
        start: i64,
        most: Option<usize>,
    ) -> Result<Vec<Decoded>> {
        let page = i64::try_from(MAX_READ_PAGE).unwrap_or(i64::MAX);
        // The last index of a page, counted from its first.
        let span = page.saturating_sub(1);
        let most = most.unwrap_or(usize::MAX);
        'attempts: for _ in 0..=READ_RESTARTS {
            // A negative start whose page would reach past the end reads to the end (-1).
            let stop = if start < 0 {
                start.saturating_add(span).min(-1)
            } else {
                start.saturating_add(span)
            };
            let range = self.read_range(what, key, start, stop).await?;
            let mut out = self.decode_all(key, range.first, &range.elements);
            out.truncate(most);
            let mut next = range
                .first
                .saturating_add(i64::try_from(range.elements.len()).unwrap_or(i64::MAX));
            let mut boundary = range.elements.last().cloned();
            let mut len = range.len;
            while next < len && out.len() < most {
                let more = match boundary.take() {
                    Some(last) => {
                        let mut more = self
                            .read_range(
                                what,
                                key,
                                next.saturating_sub(1),
                                next.saturating_add(span),
                            )
                            .await?;
                        if more.first != next.saturating_sub(1)
                            || more.elements.first() != Some(&last)
                        {
                            tracing::debug!(key, "history.read: the list shifted between pages");
                            continue 'attempts;
                        }
                        more.elements.remove(0);
                        more
                    }
                    // A first page that ended before the list began (a `Last(n)` longer than
                    // the list): nothing read yet, so nothing to check.
                    None => {
                        self.read_range(what, key, next, next.saturating_add(span))
                            .await?
                    }
                };
                if more.elements.is_empty() {
                    break;
                }
                let decoded = self.decode_all(key, next, &more.elements);
                let room = most.saturating_sub(out.len());
                out.extend(decoded.into_iter().take(room));
                next = next.saturating_add(i64::try_from(more.elements.len()).unwrap_or(i64::MAX));
                boundary = more.elements.last().cloned();
                len = more.len;
            }
            return Ok(out);
        }
        Err(Error::conflict(format!(
            "{what}: the list was trimmed or cleared while it was read, {} times in a row",
            READ_RESTARTS + 1
        )))
    }

    /// The newest messages within `budget` tokens, counted now, fetched in growing chunks from
    /// the end (each chunk one atomic read). Each further chunk also reads one element of the
    /// chunk before it, and the read stops early, returning the (shorter, still contiguous)
    /// window it has, when the list's length, its newest element or that boundary element
    /// changed in between: another writer appended or trimmed, which shifts the positions.
    async fn read_budget(&self, what: &str, key: &str, budget: u64) -> Result<Vec<Decoded>> {
        let mut newest_first: Vec<Decoded> = Vec::new();
        if budget == 0 {
            return Ok(newest_first);
        }
        let mut used = 0u64;
        let mut chunk = BUDGET_FIRST_CHUNK;
        let snapshot = self
            .read_range(what, key, chunk.saturating_neg(), -1)
            .await?;
        let mut first = snapshot.first;
        let mut elements = snapshot.elements;
        'chunks: loop {
            for (offset, element) in elements.iter().enumerate().rev() {
                let position = first
                    .saturating_add(1)
                    .saturating_add(i64::try_from(offset).unwrap_or(i64::MAX));
                let Some(message) = self.decode_or_skip(key, position, element) else {
                    continue;
                };
                let total = used.saturating_add(u64::from(message.0.tokens));
                if total > budget {
                    break 'chunks;
                }
                used = total;
                newest_first.push(message);
            }
            if first == 0 {
                break;
            }
            chunk = chunk.saturating_mul(2).min(BUDGET_MAX_CHUNK);
            let boundary = elements.first().cloned();
            let mut next = self
                .read_range(what, key, first.saturating_sub(chunk).max(0), first)
                .await?;
            let unchanged = next.len == snapshot.len
                && next.newest == snapshot.newest
                && next.elements.pop() == boundary;
            if !unchanged {
                tracing::debug!(
                    key,
                    "history.read: the list changed under a budgeted read; window cut short"
                );
                break;
            }
            first = next.first;
            elements = next.elements;
        }
        newest_first.reverse();
        Ok(newest_first)
    }
}

/// A decoded element: the stored message, and whether its id was derived from its content.
type Decoded = (StoredMessage, bool);

/// What [`AfRedisHistory::read_range`] read.
struct ListRange {
    /// The list's length.
    len: i64,
    /// Its newest element.
    newest: Option<Vec<u8>>,
    /// The 0-based index of the first element read.
    first: i64,
    /// The elements read.
    elements: Vec<Vec<u8>>,
}

#[async_trait]
impl HistoryStore for AfRedisHistory {
    /// Archive: no (the list has no place for archived messages: the trait's default
    /// [`archive`](HistoryStore::archive) answers `Unsupported`); TTL: yes (the key's expiry);
    /// multi-process: yes (every write is one script). Deduplicates ids: no (Agent Framework's
    /// rule deduplicates against the list's tail, see [`append`](#method.append)); counts
    /// purged threads: no ([`purge_expired`](#method.purge_expired) returns 0); lists every
    /// thread: no (sessions whose key segment became a digest, or that are not valid
    /// [`SessionId`]s, are not listed). Reduces on append: when `max_messages` is set (the
    /// append trims the list). Cursor reads: no (no epoch: Python's provider, which trims and
    /// clears the same list, would never change one; see "No cursor reads"). Paged reads: yes
    /// (by list position). Lists tenants: no (see "Tenants").
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_ttl(true)
            .with_multi_process(true)
            .with_reduces_on_append(self.inner.max_messages.is_some())
            .with_paged_reads(true)
    }

    /// Appends the messages that Agent Framework's deduplication finds new, atomically: one
    /// script that reads `LLEN` and the last `messages.len()` elements, `RPUSH`es the new
    /// suffix of the batch, applies `max_messages` (`LTRIM`) and the default TTL.
    ///
    /// The deduplication is `filter_new_messages`' of Agent Framework 1.23: a message's
    /// identity is its `message_id` when it has one that is not null (every message we create
    /// has one), else its role and contents. If the whole list appears in the batch (a
    /// full-transcript replay), what follows its first occurrence is new; else the longest
    /// suffix of the list equal to a prefix of the batch is skipped; but a single id-less
    /// `user` message is not taken as a duplicate in either case (a repeated input), except
    /// when the list is that one message and the batch holds it after other messages (a
    /// replay). A retried batch and a replayed transcript are therefore no-ops; unlike the
    /// native store, an id already stored further back, or repeated inside the batch, is
    /// stored again, as Python would.
    ///
    /// The identities of the batch are computed here; the script decodes the stored elements
    /// with `cjson` for `message_id` and `role`, and compares the contents of id-less messages
    /// as the exact text `json.dumps` wrote for them (what every writer of this layout
    /// produces), not Python's key-sorted form: two contents equal up to the order of their
    /// keys count as different, so such a message is appended again where Python would skip
    /// it; never the reverse. Likewise a `message_id` that is not a string is compared as its
    /// JSON text, so it never equals a string id (Python compares `str()` of both).
    ///
    /// `seqs` are list positions after the append (see [`AfRedisHistory`]); a message
    /// that is not in the list (the head of a replay that was trimmed earlier, or cut by
    /// `max_messages` in this append) gets 0.
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let key = self.key_for(scope)?;
        let options = AfOptions::default();
        let mut identities = Vec::with_capacity(messages.len());
        // Repeats are kept: Agent Framework stores an id repeated within a batch again.
        let batch = PreparedBatch::with_encoder(messages, None, Repeats::Keep, |message| {
            let value = to_agent_framework(message, &options);
            identities.push(identity(&value));
            Ok(dumps(&value))
        })?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let max = self.inner.max_messages.unwrap_or(0).to_string();
        let ttl = match self.inner.default_ttl {
            Some(ttl) => ttl_millis(ttl)?.to_string(),
            None => "0".to_owned(),
        };
        let count = messages.len().to_string();
        let mut args: Vec<&[u8]> =
            Vec::with_capacity(batch.unique.len().saturating_mul(4).saturating_add(3));
        args.extend([max.as_bytes(), ttl.as_bytes(), count.as_bytes()]);
        for ((kind, first, second), prepared) in identities.iter().zip(&batch.unique) {
            args.extend([
                kind.as_bytes(),
                first.as_bytes(),
                second.as_bytes(),
                prepared.json.as_bytes(),
            ]);
        }
        let what = format!("append to the Agent Framework list of {scope}");
        let reply = self
            .inner
            .conn
            .eval(&what, &SCRIPTS.af_append, &[&key], &args)
            .await?;
        let numbers = match reply {
            Value::Array(items) => items.iter().map(integer).collect::<Option<Vec<i64>>>(),
            _ => None,
        };
        let Some(&[base, skip, trimmed]) = numbers.as_deref() else {
            return Err(bad_reply(
                &what,
                "the append script did not return 3 numbers",
            ));
        };
        let seqs = (0i64..)
            .zip(messages)
            .map(|(i, _)| {
                u64::try_from(base.saturating_add(i).saturating_sub(trimmed)).unwrap_or(0)
            })
            .collect();
        let inserted = messages
            .len()
            .saturating_sub(usize::try_from(skip).unwrap_or(usize::MAX));
        tracing::debug!(scope = %scope, inserted, given = messages.len(), trimmed, "history.append");
        Ok(AppendOutcome { seqs, inserted })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        let what = format!("read {window:?} of the Agent Framework list of {scope}");
        let messages = match window {
            Window::All | Window::Everything => self.read_paged(&what, &key, 0, None).await?,
            Window::Last(0) => Vec::new(),
            Window::Last(n) => {
                let start = i64::try_from(n).map_or(-i64::MAX, i64::saturating_neg);
                self.read_paged(&what, &key, start, Some(n)).await?
            }
            Window::After(seq) => {
                let start = i64::try_from(seq).unwrap_or(i64::MAX);
                self.read_paged(&what, &key, start, None).await?
            }
            Window::TokenBudget(budget) => self.read_budget(&what, &key, budget).await?,
            other => {
                return Err(Error::unsupported(format!(
                    "the Agent Framework history does not know the window {other:?}"
                )));
            }
        };
        let messages = self.with_repeat_ids(&what, &key, messages).await?;
        tracing::debug!(scope = %scope, ?window, returned = messages.len(), "history.read");
        Ok(messages)
    }

    /// `active` and `last_seq` are the list's length, `archived` 0. The layout stores no
    /// token counts: `active_tokens` reads and decodes the whole list (one atomic read) and
    /// counts it with the store's counter, so this costs O(length), like every save of
    /// Python's provider; bound the list with `max_messages`.
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let key = self.key_for(scope)?;
        let what = format!("count the Agent Framework list of {scope}");
        let range = self.read_range(&what, &key, 0, -1).await?;
        let mut tokens = 0u64;
        for (message, _) in self.decode_all(&key, range.first, &range.elements) {
            tokens = tokens.saturating_add(u64::from(message.tokens));
        }
        let len = u64::try_from(range.len).unwrap_or_default();
        Ok(ThreadCount {
            active: len,
            archived: 0,
            active_tokens: tokens,
            last_seq: len,
        })
    }

    /// `DEL` of the list (with its `LLEN`, atomically).
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = self.key_for(scope)?;
        let what = format!("clear the Agent Framework list of {scope}");
        let reply = self
            .inner
            .conn
            .eval(&what, &SCRIPTS.af_clear, &[&key], &[])
            .await?;
        let len = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))?;
        tracing::debug!(scope = %scope, deleted = len, "history.clear");
        Ok(len)
    }

    /// Scans the keys of the store's [`AfKeyFormat`] (`SCAN … MATCH … TYPE list`, never
    /// `KEYS`) and returns, in [`Scope::key`] order, the scopes (under the scope template) of
    /// the sessions it can map back: not digest segments, not session ids that are not valid
    /// [`SessionId`]s. Each page scans the whole keyspace: for administration, not a hot path.
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let what = "list the Agent Framework lists";
        let pattern = self.inner.format.scan_pattern();
        let keys = self.inner.conn.scan(what, &pattern, Some("list")).await?;
        let mut scopes = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(session) = self.inner.format.session_of(&key) else {
                continue;
            };
            let Ok(session) = SessionId::new(session) else {
                continue;
            };
            scopes.push(self.scope_of(session)?);
        }
        Ok(scope_page(scopes, filter, &page))
    }

    /// `PEXPIRE` (or `PERSIST` for `None`) on the list. The layout has nowhere to record the
    /// TTL, so later appends keep this deadline without restarting it, unless the store has a
    /// default TTL, which each append re-applies.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let key = self.key_for(scope)?;
        let millis = ttl.map(ttl_millis).transpose()?.unwrap_or(0).to_string();
        let what = format!("set the TTL of the Agent Framework list of {scope}");
        let reply = self
            .inner
            .conn
            .eval(&what, &SCRIPTS.af_set_ttl, &[&key], &[millis.as_bytes()])
            .await?;
        match unsigned(&reply) {
            Some(1) => Ok(()),
            Some(0) => Err(Error::not_found(format!(
                "{scope} has no Agent Framework list (unknown or expired)"
            ))),
            _ => Err(bad_reply(&what, "not a status")),
        }
    }

    /// 0: Redis deletes expired lists itself, and this layout keeps no record of them.
    async fn purge_expired(&self) -> Result<u64> {
        Ok(0)
    }

    /// `LRANGE` of the `limit` elements after position `after` (seqs are list positions, so
    /// the page is the elements at 0-based indices `after..after + limit`), in one short
    /// script call; a page whose elements are all undecodable (left out with a warning) goes
    /// on to the next elements, so an empty page always means the list ends. The list holds
    /// no archived messages. Positions shift when the front of the list is trimmed (by
    /// `max_messages`, here or by a Python provider) or the list is cleared: a paging through
    /// a list trimmed meanwhile skips as many messages as were trimmed, as a `Window::After`
    /// read would.
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        let limit = limit.clamp(1, MAX_READ_PAGE);
        let what =
            format!("read {limit} messages after {after} of the Agent Framework list of {scope}");
        let span = i64::try_from(limit).unwrap_or(i64::MAX).saturating_sub(1);
        // Past `i64::MAX` no list reaches: the page is empty.
        let Ok(mut start) = i64::try_from(after) else {
            return Ok(Vec::new());
        };
        loop {
            let range = self
                .read_range(&what, &key, start, start.saturating_add(span))
                .await?;
            let page = self.decode_all(&key, range.first, &range.elements);
            let next = range
                .first
                .saturating_add(i64::try_from(range.elements.len()).unwrap_or(i64::MAX));
            if !page.is_empty() || range.elements.is_empty() || next >= range.len {
                tracing::debug!(scope = %scope, after, returned = page.len(), "history.read_page");
                return self.with_repeat_ids(&what, &key, page).await;
            }
            start = next;
        }
    }
}

/// Where a builder connects.
enum Target {
    Endpoint(Result<Endpoint>),
    Manager(ConnectionManager),
    Shared(Connection),
}

/// A builder of [`AfRedisHistory`].
///
/// ```no_run
/// # async fn run() -> memory_core::Result<()> {
/// use std::time::Duration;
/// use memory_core::Scope;
/// use memory_redis::{AfKeyFormat, AfRedisHistory};
///
/// let history = AfRedisHistory::builder(
///     "redis://127.0.0.1:6379",
///     AfKeyFormat::scoped("demo-app").with_tenant("tenant-1"),
/// )
/// .scope_template(&Scope::session("any")?.with_tenant("acme")?)
/// .max_messages(200)
/// .default_ttl(Duration::from_secs(7 * 24 * 3600))
/// .connect()
/// .await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until `connect` is called"]
pub struct AfRedisHistoryBuilder {
    target: Target,
    format: AfKeyFormat,
    template: Option<Scope>,
    max_messages: Option<usize>,
    default_ttl: Option<Duration>,
    counter: Arc<dyn TokenCounter>,
    timeouts: Timeouts,
}

impl fmt::Debug for AfRedisHistoryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Endpoint(Ok(endpoint)) => endpoint.redacted(),
            Target::Endpoint(Err(_)) => "<a URL it cannot use>".to_owned(),
            Target::Manager(_) => "<application connection manager>".to_owned(),
            Target::Shared(conn) => conn.endpoint().to_owned(),
        };
        f.debug_struct("AfRedisHistoryBuilder")
            .field("target", &target)
            .field("format", &self.format)
            .field("template", &self.template)
            .field("max_messages", &self.max_messages)
            .field("default_ttl", &self.default_ttl)
            .field("response_timeout", &self.timeouts.response)
            .field("connection_timeout", &self.timeouts.connection)
            .finish_non_exhaustive()
    }
}

impl AfRedisHistoryBuilder {
    fn new(target: Target, format: AfKeyFormat) -> Self {
        Self {
            target,
            format,
            template: None,
            max_messages: None,
            default_ttl: None,
            counter: default_token_counter(),
            timeouts: Timeouts::default(),
        }
    }

    /// The tenant, user, agent and source of the scopes the store serves (`template`'s
    /// session is ignored). Default: those of `Scope::session(…)`: tenant `default`, no user,
    /// no agent, source `history`.
    pub fn scope_template(mut self, template: &Scope) -> Self {
        self.template = Some(template.clone());
        self
    }

    /// Keeps at most `n` (at least 1) messages per list, as the Python provider's
    /// `max_messages`: each append that pushes beyond it trims the oldest, in the same script.
    /// Default: no limit. (Python's `max_messages=0`, "write nothing", is refused.)
    pub fn max_messages(mut self, n: usize) -> Self {
        self.max_messages = Some(n);
        self
    }

    /// Gives every list an expiry of `ttl`, re-applied by each append (default: none, as
    /// Python's provider).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Counts tokens for budgets and counts, at read time (default
    /// [`default_token_counter`]).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// How long a call waits for the server's answer (default 3 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.response = timeout;
        self
    }

    /// How long one connection attempt may take (default 2 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connection = timeout;
        self
    }

    /// Checks the options and connects.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for an invalid key format, a
    /// `max_messages` of 0, a TTL out of range, a zero timeout or a URL it cannot use;
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached. Messages
    /// never contain the password.
    pub async fn connect(self) -> Result<AfRedisHistory> {
        self.format.validate()?;
        if self.max_messages == Some(0) {
            return Err(Error::invalid_input(
                "max_messages must be at least 1 (Agent Framework's 0 means \"store nothing\")",
            ));
        }
        if let Some(ttl) = self.default_ttl {
            ttl_millis(ttl)?;
        }
        self.timeouts.validate()?;
        let conn = match self.target {
            Target::Endpoint(endpoint) => Connection::open(&endpoint?, self.timeouts).await?,
            Target::Manager(conn) => Connection::on_manager(conn, self.timeouts),
            Target::Shared(conn) => conn.with_timeouts(self.timeouts),
        };
        tracing::debug!(endpoint = %conn.endpoint(), format = ?self.format, "redis.agent_framework.connected");
        Ok(AfRedisHistory {
            inner: Arc::new(Inner {
                conn,
                format: self.format,
                template: self.template,
                max_messages: self.max_messages,
                default_ttl: self.default_ttl,
                counter: self.counter,
            }),
        })
    }
}

impl RedisStore {
    /// A builder of an [`AfRedisHistory`] on this store's connection (its server or cluster,
    /// reconnection and [`round_trips`](RedisStore::round_trips) counter), with this store's
    /// timeouts and token counter. The store's key prefix, `max_messages`, overflow and default
    /// TTL do not apply: Agent Framework's layout has its own, set on the builder.
    ///
    /// ```no_run
    /// # async fn run() -> memory_core::Result<()> {
    /// use memory_redis::{AfKeyFormat, RedisStore};
    ///
    /// let store = RedisStore::connect("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").await?;
    /// let python_history = store
    ///     .agent_framework(AfKeyFormat::scoped("demo-app"))
    ///     .max_messages(200)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn agent_framework(&self, format: AfKeyFormat) -> AfRedisHistoryBuilder {
        let mut builder = AfRedisHistoryBuilder::new(Target::Shared(self.conn().clone()), format);
        builder.counter = Arc::clone(&self.config().token_counter);
        builder.timeouts = self.config().timeouts();
        builder
    }
}

/// Agent Framework's `get_message_identity` of a message in `Message.to_dict()` form, as the
/// append script takes it: `("i", message_id, "")` for a string `message_id` (even empty),
/// `("j", its JSON text, "")` for a `message_id` of another type, else `("c", role, contents
/// as json.dumps writes them)`.
fn identity(message: &serde_json::Value) -> (&'static str, String, String) {
    match message.get("message_id") {
        Some(serde_json::Value::String(id)) => ("i", id.clone(), String::new()),
        Some(serde_json::Value::Null) | None => {
            let role = message
                .get("role")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let contents = message
                .get("contents")
                .map_or_else(|| "[]".to_owned(), dumps);
            ("c", role, contents)
        }
        Some(other) => ("j", dumps(other), String::new()),
    }
}
