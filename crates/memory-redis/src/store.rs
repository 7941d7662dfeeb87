//! [`RedisStore`]: its builder, and what its operations share (listing, purging expiry
//! records); the connection itself is [`Connection`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    Error, MessageId, Page, PageRequest, Result, Scope, ScopeFilter, TenantId, TokenCounter,
    ttl_millis,
};
use redis::Cmd;
use redis::Value;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SlotAddr};

use crate::config::{Endpoint, Overflow, RedisConfig};
use crate::conn::{Connection, pipeline_integer};
use crate::error::{During, bad_reply};
use crate::keys::{self, Listed};
use crate::scripts::LuaScript;

/// How many expiry records `purge_expired` checks in one pipelined request.
const PURGE_BATCH: usize = 500;
/// How long an expiry record outlives the thread or session it records (see
/// [`RedisStore`]'s TTL section): 24 hours.
pub(crate) const EXPIRY_RECORD_GRACE: Duration = Duration::from_secs(24 * 3600);

/// Chat history ([`HistoryStore`](memory_core::HistoryStore)) and session state
/// ([`SessionStore`](memory_core::SessionStore)) on Redis or Redis Cluster.
///
/// One store serves every thread and session; cloning it is cheap and shares the connection
/// (and the [`round_trips`](RedisStore::round_trips) counter). See the crate documentation for
/// URLs, options and the key layout.
///
/// # Guarantees
/// - Every append is one Lua script: atomic (all of the batch or none of it), one round trip,
///   sequence numbers assigned by the server, ids already stored skipped (a retried append
///   never duplicates), `max_messages` applied and the TTL refreshed in the same step. The
///   append that creates a thread then adds it to its tenant's thread index (two more round
///   trips; see "Listing").
/// - Every read touches only the window it returns (plus, for a token budget, the token counts
///   of the messages it walks), never the whole thread, and runs in pages of at most
///   [`MAX_READ_PAGE`](memory_core::MAX_READ_PAGE) messages, each one short script call: a
///   window of up to that many messages is one round trip, a larger one (a long thread's
///   [`Window::All`](memory_core::Window::All) or
///   [`Window::Everything`](memory_core::Window::Everything)) one per page, so no read holds
///   the server for long. Pages of a read that finds the thread cleared and written again
///   between two of them start over (see the `# Behavior` list of
///   [`HistoryStore`](memory_core::HistoryStore)).
/// - A cursor read ([`read_since`](memory_core::HistoryStore::read_since)) is one script call,
///   one snapshot, when its answer holds at most
///   [`MAX_READ_PAGE`](memory_core::MAX_READ_PAGE) messages (a delta after appends, or a
///   window of that size); a larger answer is read in pages after that call, bounded by it.
///   The thread's epoch is a random u64 in its meta hash, changed by the scripts that move
///   messages out of the active window.
/// - Session saves compare the stored version in a script: a stale writer gets `Conflict`.
/// - Calls never hang: each fails with `Unavailable` when the server cannot be reached and
///   with `Timeout` when it does not answer within `connection_timeout + response_timeout`
///   (plus 0.5 s). The connection is re-established on its own once the server is back.
///
/// # Re-sent requests
/// The cluster client re-sends a request after a lost connection, a redirect (`MOVED`, `ASK`)
/// or a `TRYAGAIN`/`CLUSTERDOWN` reply, so a script may run twice when only its reply was
/// lost. Every script is safe to run twice: an append skips the ids it stored (a re-sent append
/// returns the same seqs, with `inserted` 0), a save carries a nonce that the session keeps as
/// `last_nonce` (finding its own save applied, a re-sent save returns the same version, not
/// `Conflict`), and archive, clear and session delete record `<nonce> <reply>` for five minutes
/// under the scope's `ack` key (a re-sent one returns the applied one's reply). `set_ttl` is
/// idempotent; `purge_expired` may count less than it purged if its connection fails mid-call.
///
/// The client's re-sends share one deadline, `connection_timeout + response_timeout`, which
/// passes before the store's own (0.5 s later): when a call returns `Timeout` or
/// `Unavailable` the client has abandoned the request and sends it no more. A copy sent before
/// the deadline may still be applied after the error, as any request whose reply was lost:
/// those errors mean "the outcome is unknown", and retrying the call is safe for appends (same
/// ids); a retried save gets a new nonce, so it may get `Conflict` for its own earlier save,
/// which a load then shows. The single-server connection never re-sends a request.
///
/// # TTL and `purge_expired`
/// Expiry is Redis's own (`PEXPIRE` on every key of the thread or session, with one deadline):
/// an expired thread or session vanishes at its deadline. A thread or session with a TTL also
/// has a one-key *expiry record* that outlives it by 24 hours; `purge_expired` deletes the
/// records of those that expired and returns how many it found, so it reports what expired
/// since the last purge (within those 24 hours) rather than deleting data itself. For
/// threads, it looks only at those due in an expiry index (a sorted set of the threads with an
/// expiry record, scored by a time before which each surely lives), in batches, so a purge
/// costs O(threads due), not O(keyspace); a thread still alive is scored again with its real
/// deadline. The index is synchronised with the records by a `SCAN` on the first purge and then
/// at most once a day. Sessions' records are checked node by node in pipelined batches after a
/// `SCAN`, not one round trip per record.
///
/// # Eviction
/// Redis must run with `maxmemory-policy noeviction` (or without `maxmemory`): an evicting
/// policy can drop one key of a thread and keep the others (see the crate documentation).
///
/// # Listing
/// `list_threads` pages through a per-tenant index of threads (a sorted set in scope-key
/// order, kept by appends, clears, purges and the listings themselves), so a page costs
/// O(page) whatever the keyspace holds; the first listing of a tenant builds its index with a
/// one-time `SCAN` of the tenant's thread keys, so threads written before the index existed
/// are listed (see the crate's README, "TTL, listing, purging"). `list` (sessions) scans the
/// keyspace with `SCAN … MATCH` (never `KEYS`), on every master of a cluster: each of its
/// pages scans the whole keyspace. Both return scopes in [`Scope::key`] order; the cursor is
/// the last scope key returned (or examined: a `list_threads` page that met mostly threads
/// gone since they were indexed may end short, with a cursor). `list_tenants` (history and
/// sessions) scans the threads' meta keys or the sessions' hashes under the prefix, on every
/// master, and keeps the smallest tenants after the cursor: each page scans the keyspace, an
/// administration call.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Connection,
    config: RedisConfig,
    /// Opened with [`RedisStoreBuilder::existing_only`]: reads write nothing.
    existing_only: bool,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("endpoint", &self.inner.conn.endpoint())
            .field("cluster", &self.is_cluster())
            .field("config", &self.inner.config)
            .field("round_trips", &self.round_trips())
            .finish()
    }
}

impl RedisStore {
    /// Connects with the default options to `url`: `redis://[user:password@]host[:port][/db]`,
    /// `rediss://…` (TLS, with the `tls` feature), `unix:///path/to/socket`, or a cluster as
    /// `redis+cluster://[user:password@]host1:port1,host2:port2` (`rediss+cluster://` for TLS).
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL it cannot use;
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached. Messages
    /// never contain the password.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// Connects with the default options to the cluster that the seed nodes belong to (each a
    /// `redis://` or `rediss://` URL; the other nodes are discovered).
    ///
    /// # Errors
    /// As [`connect`](RedisStore::connect).
    pub async fn connect_cluster<S: AsRef<str>>(seeds: &[S]) -> Result<Self> {
        Self::cluster_builder(seeds).connect().await
    }

    /// A builder for a store at `url` (any URL [`connect`](RedisStore::connect) accepts).
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder {
            endpoint: Endpoint::parse(url),
            config: RedisConfig::default(),
            existing_only: false,
        }
    }

    /// A builder for a store on the cluster that the seed nodes belong to.
    pub fn cluster_builder<S: AsRef<str>>(seeds: &[S]) -> RedisStoreBuilder {
        RedisStoreBuilder {
            endpoint: Endpoint::cluster(seeds),
            config: RedisConfig::default(),
            existing_only: false,
        }
    }

    /// A store on an application's existing connection manager (one server). Its own timeouts
    /// and reconnection settings apply; `config`'s timeouts still bound each call.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for invalid options.
    pub fn from_connection_manager(conn: ConnectionManager, config: RedisConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::new(
            Connection::on_manager(conn, config.timeouts()),
            config,
        ))
    }

    /// A store on an application's existing cluster connection. Its own timeouts and re-send
    /// settings apply (see "Re-sent requests": give it an overall response timeout under
    /// `connection_timeout + response_timeout` so no request is re-sent after its call failed);
    /// `config`'s timeouts still bound each call.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for invalid options.
    pub fn from_cluster_connection(conn: ClusterConnection, config: RedisConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::new(
            Connection::on_cluster(conn, config.timeouts()),
            config,
        ))
    }

    fn new(conn: Connection, config: RedisConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                conn,
                config,
                existing_only: false,
            }),
        }
    }

    /// The store's options.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }

    /// Whether the store is on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// How many requests (commands, script calls or pipelines) this store, its clones and the
    /// [`AfRedisHistory`](crate::AfRedisHistory)s on its connection
    /// ([`agent_framework`](RedisStore::agent_framework)) have sent to the server since it was
    /// opened. Each is one network round trip; a script the
    /// server does not have cached yet (a first call, or after a restart) is sent again in
    /// full, which counts as a second one. On a cluster, a session listing sends one `SCAN` step per
    /// master per step plus one `CLUSTER SLOTS`. Re-sends by the cluster client (see "Re-sent
    /// requests") are not counted.
    pub fn round_trips(&self) -> u64 {
        self.inner.conn.round_trips()
    }

    /// Checks that the server answers (`PING`).
    ///
    /// # Errors
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when it does not.
    pub async fn ping(&self) -> Result<()> {
        self.inner.conn.ping().await.during("ping")
    }

    /// The connection, shared with the clones of this store.
    #[cfg(feature = "agent-framework")]
    pub(crate) fn conn(&self) -> &Connection {
        &self.inner.conn
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.inner.config.key_prefix
    }

    /// Whether the store was opened with [`RedisStoreBuilder::existing_only`]: listings scan
    /// and build no index, so reads write nothing.
    pub(crate) fn existing_only(&self) -> bool {
        self.inner.existing_only
    }

    pub(crate) fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.inner.config.token_counter
    }

    pub(crate) fn overflow(&self) -> Overflow {
        self.inner.config.overflow
    }

    pub(crate) fn max_messages(&self) -> Option<usize> {
        self.inner.config.max_messages
    }

    pub(crate) fn default_ttl(&self) -> Option<Duration> {
        self.inner.config.default_ttl
    }

    /// Sends one command and returns its reply.
    pub(crate) async fn query(&self, what: &str, cmd: &Cmd) -> Result<Value> {
        self.inner.conn.query(what, cmd).await
    }

    /// Runs a script (see [`Connection::eval`]).
    pub(crate) async fn eval(
        &self,
        what: &str,
        script: &LuaScript,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value> {
        self.inner.conn.eval(what, script, keys, args).await
    }

    /// Sends a pipeline to the single server (see [`Connection::send_pipeline`]).
    pub(crate) async fn send_pipeline(
        &self,
        what: &str,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<Value>> {
        self.inner.conn.send_pipeline(what, pipe, None).await
    }

    /// Sends a pipeline whose keys all lie in the slot of `key` to the node that serves it (on
    /// a single server: to the server), as one round trip.
    pub(crate) async fn send_pipeline_in_slot_of(
        &self,
        what: &str,
        pipe: &redis::Pipeline,
        key: &str,
    ) -> Result<Vec<Value>> {
        let route = self
            .is_cluster()
            .then(|| Route::with_key(key, SlotAddr::Master));
        self.inner.conn.send_pipeline(what, pipe, route).await
    }

    /// Whether each of `keys` exists (see [`each`](Self::each)).
    pub(crate) async fn exist(&self, what: &str, keys: &[String]) -> Result<Vec<bool>> {
        self.each(what, "EXISTS", keys)
            .await?
            .into_iter()
            .map(|reply| Ok(pipeline_integer(what, reply)? > 0))
            .collect()
    }

    /// The reply of `command key` for each of `keys` (a failed one's as
    /// [`Value::ServerError`]): one pipeline on a single server; on a cluster, where the keys
    /// lie in many slots, one command each, sent concurrently.
    pub(crate) async fn each(
        &self,
        what: &str,
        command: &str,
        keys: &[String],
    ) -> Result<Vec<Value>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        if self.is_cluster() {
            return futures::future::try_join_all(keys.iter().map(|key| {
                let mut cmd = redis::cmd(command);
                cmd.arg(key);
                async move { self.query(what, &cmd).await }
            }))
            .await;
        }
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd(command).arg(key);
        }
        self.inner.conn.send_pipeline(what, &pipe, None).await
    }

    /// Every key matching `pattern`, on the server or every cluster master (`SCAN`).
    pub(crate) async fn scan_keys(&self, what: &str, pattern: &str) -> Result<Vec<String>> {
        self.inner.conn.scan(what, pattern, None).await
    }

    /// A page of the scopes holding a key of `what` that match `filter`, in scope-key order,
    /// after the request's cursor (the last scope key of the previous page).
    pub(crate) async fn list_scopes(
        &self,
        what_for: &str,
        filter: &ScopeFilter,
        page: &PageRequest,
        what: Listed,
    ) -> Result<Page<Scope>> {
        let pattern = keys::scan_pattern(self.prefix(), filter, what);
        let found = self.inner.conn.scan(what_for, &pattern, None).await?;
        let prefix = self.prefix();
        Ok(scope_page(
            found
                .iter()
                .filter_map(|key| keys::scope_of(prefix, key, what)),
            filter,
            page,
        ))
    }

    /// A page of the tenants holding a key of `what` (a thread's meta hash, a session's hash),
    /// in tenant order, after the request's cursor (the last tenant of the previous page): one
    /// `SCAN` of every key of `what` under the prefix, on every master of a cluster, keeping
    /// the `limit + 1` smallest tenants after the cursor (one more than a page tells whether
    /// another page follows). Keys of another layout that match the pattern are skipped.
    pub(crate) async fn list_key_tenants(
        &self,
        what_for: &str,
        page: &PageRequest,
        what: Listed,
    ) -> Result<Page<TenantId>> {
        let limit = page.limit.max(1);
        let after = page.cursor.as_deref();
        let pattern = keys::scan_all_pattern(self.prefix(), what);
        let prefix = self.prefix();
        let mut smallest: BTreeSet<TenantId> = BTreeSet::new();
        self.inner
            .conn
            .scan_each(what_for, &pattern, None, |key| {
                let Some(scope) = keys::scope_of(prefix, &key, what) else {
                    return;
                };
                let tenant = scope.tenant();
                if after.is_some_and(|c| tenant.as_str() <= c) || smallest.contains(tenant) {
                    return;
                }
                smallest.insert(tenant.clone());
                if smallest.len() > limit.saturating_add(1) {
                    smallest.pop_last();
                }
            })
            .await?;
        Ok(tenant_page(smallest, limit))
    }

    /// Deletes the expiry records of `what` whose thread or session has expired and returns
    /// how many it deleted. `data_key` maps a record's scope to the key that exists while the
    /// thread or session lives. Per node, in batches of [`PURGE_BATCH`] records: one pipelined
    /// `EXISTS` per record, then one pipelined purge script per record whose data is gone (it
    /// checks again, so a thread created meanwhile keeps its record): one or two round trips
    /// per batch.
    pub(crate) async fn purge_records(
        &self,
        what_for: &str,
        what: Listed,
        data_key: impl Fn(&Scope) -> String,
    ) -> Result<u64> {
        Ok(self
            .purge_record_scopes(what_for, what, data_key)
            .await?
            .len() as u64)
    }

    /// [`purge_records`](Self::purge_records), returning the scopes whose records it deleted.
    pub(crate) async fn purge_record_scopes(
        &self,
        what_for: &str,
        what: Listed,
        data_key: impl Fn(&Scope) -> String,
    ) -> Result<Vec<Scope>> {
        let pattern = keys::scan_all_pattern(self.prefix(), what);
        let mut purged = Vec::new();
        for node in self.inner.conn.nodes(what_for).await? {
            let records: BTreeSet<String> = self
                .inner
                .conn
                .scan_node(what_for, &pattern, None, node)
                .await?
                .into_iter()
                .collect();
            let pairs: Vec<(String, String, Scope)> = records
                .into_iter()
                .filter_map(|record| {
                    let scope = keys::scope_of(self.prefix(), &record, what)?;
                    Some((data_key(&scope), record, scope))
                })
                .collect();
            for batch in pairs.chunks(PURGE_BATCH) {
                purged.extend(self.purge_batch(what_for, batch, node).await?);
            }
        }
        Ok(purged)
    }

    /// Purges one batch of `(data key, expiry record, scope)` on one node; returns the scopes
    /// whose records it deleted.
    async fn purge_batch(
        &self,
        what: &str,
        batch: &[(String, String, Scope)],
        node: Option<u16>,
    ) -> Result<Vec<Scope>> {
        let mut exists = redis::pipe();
        for (data, _, _) in batch {
            exists.cmd("EXISTS").arg(data);
        }
        let node = node.map(|slot| Route::new(slot, SlotAddr::Master));
        let found = self.inner.conn.send_pipeline(what, &exists, node).await?;
        let mut gone = Vec::new();
        for (pair, reply) in batch.iter().zip(found) {
            if pipeline_integer(what, reply)? == 0 {
                gone.push(pair);
            }
        }
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        // Loaded first, so the EVALSHAs after it find the script even on a restarted server.
        let script = &crate::scripts::SCRIPTS.purge;
        let mut purge = redis::pipe();
        purge.cmd("SCRIPT").arg("LOAD").arg(script.source);
        for (data, record, _) in &gone {
            purge
                .cmd("EVALSHA")
                .arg(&script.sha1)
                .arg(2)
                .arg(data)
                .arg(record);
        }
        let mut purged = Vec::new();
        for (reply, (_, _, scope)) in self
            .inner
            .conn
            .send_pipeline(what, &purge, node)
            .await?
            .into_iter()
            .skip(1)
            .zip(gone)
        {
            match pipeline_integer(what, reply)? {
                0 => {}
                1 => purged.push(scope.clone()),
                _ => return Err(bad_reply(what, "purge returned an impossible count")),
            }
        }
        Ok(purged)
    }
}

/// The page of `scopes` that `page` asks for: those matching `filter` after its cursor (a scope
/// key), in [`Scope::key`] order, at most `page.limit` of them (at least 1). `scopes` may
/// repeat one scope (a scan's "at least once").
pub(crate) fn scope_page(
    scopes: impl IntoIterator<Item = Scope>,
    filter: &ScopeFilter,
    page: &PageRequest,
) -> Page<Scope> {
    let limit = page.limit.max(1);
    let after = page.cursor.as_deref();
    // The `limit + 1` smallest scope keys after the cursor: one more than a page tells whether
    // another page follows.
    let mut smallest: BTreeMap<String, Scope> = BTreeMap::new();
    for scope in scopes {
        if !filter.matches(&scope) {
            continue;
        }
        let scope_key = scope.key();
        if after.is_some_and(|c| scope_key.as_str() <= c) {
            continue;
        }
        smallest.insert(scope_key, scope);
        if smallest.len() > limit.saturating_add(1) {
            smallest.pop_last();
        }
    }
    let more = smallest.len() > limit;
    let items: Vec<(String, Scope)> = smallest.into_iter().take(limit).collect();
    let next_cursor = if more {
        items.last().map(|(k, _)| k.clone())
    } else {
        None
    };
    Page {
        items: items.into_iter().map(|(_, s)| s).collect(),
        next_cursor,
    }
}

/// The page of at most `limit` (at least 1) of `smallest` (the smallest tenants after the
/// request's cursor, up to one more than a page), with the last tenant as the cursor when
/// another page follows.
pub(crate) fn tenant_page(smallest: BTreeSet<TenantId>, limit: usize) -> Page<TenantId> {
    let limit = limit.max(1);
    let more = smallest.len() > limit;
    let items: Vec<TenantId> = smallest.into_iter().take(limit).collect();
    let next_cursor = if more {
        items.last().map(|t| t.as_str().to_owned())
    } else {
        None
    };
    Page { items, next_cursor }
}

/// A builder of [`RedisStore`]: the endpoint and every option of [`RedisConfig`].
///
/// ```no_run
/// # async fn run() -> memory_core::Result<()> {
/// use std::time::Duration;
/// use memory_redis::{Overflow, RedisStore};
///
/// let store = RedisStore::builder("redis://127.0.0.1:6379")
///     .key_prefix("chat")
///     .max_messages(500)
///     .overflow(Overflow::Archive)
///     .default_ttl(Duration::from_secs(30 * 24 * 3600))
///     .response_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct RedisStoreBuilder {
    endpoint: Result<Endpoint>,
    config: RedisConfig,
    existing_only: bool,
}

impl RedisStoreBuilder {
    /// Replaces every option at once.
    pub fn config(mut self, config: RedisConfig) -> Self {
        self.config = config;
        self
    }

    /// The first part of every key: 1 to 32 characters of `[a-z0-9_.-]` (default `am`).
    /// Checked by [`connect`](RedisStoreBuilder::connect).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// Counts each message's tokens once, when it is appended (default
    /// [`memory_core::default_token_counter`]).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.config.token_counter = counter;
        self
    }

    /// Gives every new thread and session a time to live (default: none).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.config.default_ttl = Some(ttl);
        self
    }

    /// Keeps at most `n` messages in each thread's active window (default: no limit).
    pub fn max_messages(mut self, n: usize) -> Self {
        self.config.max_messages = Some(n);
        self
    }

    /// What happens to the messages `max_messages` pushes out (default
    /// [`Overflow::Archive`]).
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.config.overflow = overflow;
        self
    }

    /// How long a call waits for the server's answer (default 3 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take (default 2 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.config.connection_timeout = timeout;
        self
    }

    /// Opens only a store that exists, for tools that inspect or change an application's data
    /// (the `agent-memory` command): [`connect`](Self::connect) fails with
    /// [`NotFound`](memory_core::ErrorKind::NotFound) when the server holds no key under the
    /// key prefix (a mistyped prefix is an error, not an empty store; the message says so when
    /// the server holds Agent Framework's lists instead), and the store's reads write nothing:
    /// [`list_threads`](memory_core::HistoryStore::list_threads) scans the tenant's thread keys
    /// (`SCAN`, each page a scan of the keyspace) instead of building the tenant's thread index.
    /// Writes (append, clear, a forget's purge) write as usual.
    pub fn existing_only(mut self) -> Self {
        self.existing_only = true;
        self
    }

    /// Checks the options and connects.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL or option it cannot
    /// use; [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached;
    /// with [`existing_only`](Self::existing_only),
    /// [`NotFound`](memory_core::ErrorKind::NotFound) when no key has the prefix.
    pub async fn connect(self) -> Result<RedisStore> {
        self.open().await.during("connect")
    }

    async fn open(self) -> Result<RedisStore> {
        let endpoint = self.endpoint?;
        let config = self.config;
        config.validate()?;
        let conn = Connection::open(&endpoint, config.timeouts()).await?;
        if self.existing_only {
            require_existing(&conn, &config.key_prefix).await?;
        }
        Ok(RedisStore {
            inner: Arc::new(Inner {
                conn,
                config,
                existing_only: self.existing_only,
            }),
        })
    }
}

/// For [`RedisStoreBuilder::existing_only`]: succeeds when some key has the prefix (a `SCAN`
/// that stops at the first), else `NotFound`, naming Agent Framework's layout when the server
/// holds its lists (`…|v2|…`, or `chat_messages:…` of the legacy format).
async fn require_existing(conn: &Connection, prefix: &str) -> Result<()> {
    let what = "look for the store's keys";
    if conn.scan_any(what, &format!("{prefix}:{{*"), None).await? {
        return Ok(());
    }
    let peer = conn.scan_any(what, "*|v2|*", Some("list")).await?
        || conn.scan_any(what, "chat_messages:*", Some("list")).await?;
    let hint = if peer {
        "; it holds lists in Microsoft Agent Framework's RedisHistoryProvider layout, which is \
         not agent-memory's own (open them with memory-redis's AfRedisHistory, whose Forgetter \
         and bundle export reach them; docs/interop.md)"
    } else {
        ""
    };
    Err(Error::not_found(format!(
        "there is no agent-memory data with key prefix {prefix:?} on this server: check the URL \
         and the prefix (nothing was written){hint}"
    )))
}

/// The TTL and grace arguments of the scripts that write an expiry record: the TTL in whole
/// milliseconds (`"0"` for none) and [`EXPIRY_RECORD_GRACE`] in milliseconds.
///
/// # Errors
/// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a TTL outside
/// [`memory_core::ttl_millis`]'s range.
pub(crate) fn expiry_args(ttl: Option<Duration>) -> Result<[String; 2]> {
    let ttl = match ttl {
        Some(ttl) => ttl_millis(ttl)?.to_string(),
        None => "0".to_owned(),
    };
    Ok([ttl, EXPIRY_RECORD_GRACE.as_millis().to_string()])
}

/// A value unique to one call, for the scripts that recognise a re-sent request (see
/// [`RedisStore`]'s "Re-sent requests"): a UUIDv7, random in its low 74 bits.
pub(crate) fn request_nonce() -> String {
    MessageId::generate().as_str().to_owned()
}
