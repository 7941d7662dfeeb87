//! [`Connection`]: the plumbing every store of this crate runs on ([`RedisStore`] and
//! [`AfRedisHistory`](crate::AfRedisHistory)): connecting to an [`Endpoint`] (reconnection and
//! timeouts), the call budget, scripts (`EVALSHA`, then `EVAL`), round-trip counting, `SCAN`
//! over one server or every cluster master, and reading replies.
//!
//! [`RedisStore`]: crate::RedisStore

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memory_core::{Error, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisResult, Value};

use crate::config::{Endpoint, Timeouts};
use crate::error::{bad_reply, redis_error, timed_out};
use crate::scripts::LuaScript;

/// How many keys one `SCAN` step asks each server to look at.
const SCAN_COUNT: usize = 1000;
/// How many times a connection is retried (after the first attempt) before a call fails.
const RECONNECT_RETRIES: usize = 2;
/// The first and the longest wait between reconnection attempts.
const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(500);

/// One server through a [`ConnectionManager`], or a cluster.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// A connection with its call budget. Cloning it is cheap and shares the connection and the
/// round-trip counter.
#[derive(Clone)]
pub(crate) struct Connection {
    conn: Conn,
    /// Where it goes, with every password redacted.
    endpoint: Arc<str>,
    round_trips: Arc<AtomicU64>,
    /// The longest one call may take (see [`Timeouts::call_budget`]).
    call_budget: Duration,
}

impl Connection {
    /// Connects to `endpoint`: a [`ConnectionManager`] that reconnects by itself for one server,
    /// a cluster connection whose re-sends end before the call budget (see "Re-sent requests"
    /// on [`RedisStore`](crate::RedisStore)) for a cluster.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL it cannot use;
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
    /// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached. Messages
    /// never contain the password.
    pub(crate) async fn open(endpoint: &Endpoint, timeouts: Timeouts) -> Result<Self> {
        let redacted = endpoint.redacted();
        let what = format!("connect to {redacted}");
        // Every attempt may take the connection timeout, plus the waits between them.
        let retries = u32::try_from(RECONNECT_RETRIES).unwrap_or(u32::MAX);
        let budget = timeouts
            .resend_deadline()
            .saturating_mul(retries.saturating_add(1))
            .saturating_add(RECONNECT_MAX_DELAY.saturating_mul(retries));
        let conn = match endpoint {
            Endpoint::Standalone(url) => {
                check_tls(url, &redacted)?;
                let client =
                    redis::Client::open(url.as_str()).map_err(|e| redis_error(&what, e))?;
                let manager_config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeouts.connection))
                    .set_response_timeout(Some(timeouts.response))
                    .set_number_of_retries(RECONNECT_RETRIES)
                    .set_min_delay(RECONNECT_MIN_DELAY)
                    .set_max_delay(RECONNECT_MAX_DELAY);
                let manager = tokio::time::timeout(
                    budget,
                    ConnectionManager::new_with_config(client, manager_config),
                )
                .await
                .map_err(|_| timed_out(&what, budget))?
                .map_err(|e| redis_error(&what, e))?;
                Conn::Single(manager)
            }
            Endpoint::Cluster(seeds) => {
                for seed in seeds {
                    check_tls(seed, &redacted)?;
                }
                // Re-sends (see "Re-sent requests" on `RedisStore`) end at this deadline, before
                // the store's own call budget: no re-send is issued after a call has failed.
                let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(timeouts.connection)
                    .response_timeout(timeouts.response)
                    .overall_response_timeout(Some(timeouts.resend_deadline()))
                    .retries(RECONNECT_RETRIES as u32)
                    .min_retry_wait(RECONNECT_MIN_DELAY.as_millis() as u64)
                    .max_retry_wait(RECONNECT_MAX_DELAY.as_millis() as u64)
                    .build()
                    .map_err(|e| redis_error(&what, e))?;
                let conn = tokio::time::timeout(budget, client.get_async_connection())
                    .await
                    .map_err(|_| timed_out(&what, budget))?
                    .map_err(|e| redis_error(&what, e))?;
                Conn::Cluster(conn)
            }
        };
        tracing::debug!(endpoint = %redacted, "redis.connected");
        Ok(Self::new(conn, redacted, timeouts))
    }

    /// An application's connection manager (one server), each call bounded by `timeouts`.
    pub(crate) fn on_manager(conn: ConnectionManager, timeouts: Timeouts) -> Self {
        Self::new(
            Conn::Single(conn),
            "<application connection manager>".to_owned(),
            timeouts,
        )
    }

    /// An application's cluster connection, each call bounded by `timeouts`.
    pub(crate) fn on_cluster(conn: ClusterConnection, timeouts: Timeouts) -> Self {
        Self::new(
            Conn::Cluster(conn),
            "<application cluster connection>".to_owned(),
            timeouts,
        )
    }

    fn new(conn: Conn, endpoint: String, timeouts: Timeouts) -> Self {
        Self {
            conn,
            endpoint: endpoint.into(),
            round_trips: Arc::new(AtomicU64::new(0)),
            call_budget: timeouts.call_budget(),
        }
    }

    /// The same connection (and round-trip counter), each call bounded by `timeouts`.
    #[cfg(feature = "agent-framework")]
    pub(crate) fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.call_budget = timeouts.call_budget();
        self
    }

    /// Where it goes, with every password redacted.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether it is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// How many requests it has sent (see [`RedisStore::round_trips`](crate::RedisStore::round_trips)).
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// `PING`.
    pub(crate) async fn ping(&self) -> Result<()> {
        self.query("ping", &redis::cmd("PING")).await.map(|_| ())
    }

    /// Sends `cmd` (routed by its first key on a cluster, or to the master of `route`'s slot),
    /// within the call budget, counting the round trip; the redis error is left unconverted.
    async fn send(&self, what: &str, cmd: &Cmd, route: Option<u16>) -> Result<RedisResult<Value>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let budget = self.call_budget;
        let call = async {
            match (&self.conn, route) {
                (Conn::Single(conn), _) => cmd.query_async::<Value>(&mut conn.clone()).await,
                (Conn::Cluster(conn), None) => cmd.query_async::<Value>(&mut conn.clone()).await,
                (Conn::Cluster(conn), Some(slot)) => {
                    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                        Route::new(slot, SlotAddr::Master),
                    ));
                    conn.clone()
                        .route_command(cmd.clone(), routing)
                        .await
                        .and_then(Value::extract_error)
                }
            }
        };
        tokio::time::timeout(budget, call)
            .await
            .map_err(|_| timed_out(what, budget))
    }

    /// Sends one command and returns its reply.
    pub(crate) async fn query(&self, what: &str, cmd: &Cmd) -> Result<Value> {
        self.send(what, cmd, None)
            .await?
            .map_err(|e| redis_error(what, e))
    }

    /// Runs a script: `EVALSHA`, and `EVAL` with the source when the server does not have it
    /// cached (a first call, a restarted or flushed server).
    pub(crate) async fn eval(
        &self,
        what: &str,
        script: &LuaScript,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&script.sha1).arg(keys.len()).arg(keys).arg(args);
        match self.send(what, &cmd, None).await? {
            Ok(value) => Ok(value),
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                tracing::debug!(script = script.name, "redis.script_not_cached");
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(script.source).arg(keys.len()).arg(keys).arg(args);
                self.send(what, &cmd, None)
                    .await?
                    .map_err(|e| redis_error(what, e))
            }
            Err(err) => Err(redis_error(what, err)),
        }
    }

    /// Sends a pipeline to one node (`route`: that node on a cluster, by a slot or a key of
    /// it; any node without one) as one round trip, within the call budget; returns one reply
    /// per command, a failed command's as [`Value::ServerError`].
    pub(crate) async fn send_pipeline(
        &self,
        what: &str,
        pipe: &Pipeline,
        route: Option<Route>,
    ) -> Result<Vec<Value>> {
        use redis::aio::ConnectionLike;

        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let budget = self.call_budget;
        let call = async {
            match (&self.conn, route) {
                (Conn::Single(conn), _) => {
                    conn.clone().req_packed_commands(pipe, 0, pipe.len()).await
                }
                (Conn::Cluster(conn), route) => {
                    let routing = match route {
                        Some(route) => SingleNodeRoutingInfo::SpecificNode(route),
                        None => SingleNodeRoutingInfo::Random,
                    };
                    conn.clone()
                        .route_pipeline(pipe.clone(), 0, pipe.len(), routing)
                        .await
                }
            }
        };
        let replies = tokio::time::timeout(budget, call)
            .await
            .map_err(|_| timed_out(what, budget))?
            .map_err(|e| redis_error(what, e))?;
        if replies.len() != pipe.len() {
            return Err(bad_reply(
                what,
                format!("{} replies to {} commands", replies.len(), pipe.len()),
            ));
        }
        Ok(replies)
    }

    /// The nodes a scan visits: the server (`None`), or one slot of each cluster master.
    pub(crate) async fn nodes(&self, what: &str) -> Result<Vec<Option<u16>>> {
        match &self.conn {
            Conn::Single(_) => Ok(vec![None]),
            Conn::Cluster(_) => Ok(self
                .master_slots(what)
                .await?
                .into_iter()
                .map(Some)
                .collect()),
        }
    }

    /// Every key matching `pattern` (and of the type `of_type`, when given), on the server or
    /// on every cluster master. A key may come back more than once (SCAN's guarantee is "at
    /// least once"); callers deduplicate.
    pub(crate) async fn scan(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
    ) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for node in self.nodes(what).await? {
            keys.extend(self.scan_node(what, pattern, of_type, node).await?);
        }
        Ok(keys)
    }

    /// [`scan`](Self::scan) on one node.
    pub(crate) async fn scan_node(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
        slot: Option<u16>,
    ) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        self.scan_node_each(what, pattern, of_type, slot, |key| keys.push(key))
            .await?;
        Ok(keys)
    }

    /// Every key matching `pattern` (and of the type `of_type`, when given), on the server or
    /// on every cluster master, handed to `each` as the scan finds it (so the caller keeps
    /// only what it needs of a large keyspace). A key may come more than once.
    pub(crate) async fn scan_each(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
        mut each: impl FnMut(String),
    ) -> Result<()> {
        for node in self.nodes(what).await? {
            self.scan_node_each(what, pattern, of_type, node, &mut each)
                .await?;
        }
        Ok(())
    }

    /// Whether a key matches `pattern` (and is of the type `of_type`, when given), on the
    /// server or on some cluster master: the scan stops at the first one it finds.
    pub(crate) async fn scan_any(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
    ) -> Result<bool> {
        for node in self.nodes(what).await? {
            let mut found = false;
            self.scan_node_until(what, pattern, of_type, node, |_| {
                found = true;
                ControlFlow::Break(())
            })
            .await?;
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`scan_each`](Self::scan_each) on one node.
    async fn scan_node_each(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
        slot: Option<u16>,
        mut each: impl FnMut(String),
    ) -> Result<()> {
        self.scan_node_until(what, pattern, of_type, slot, |key| {
            each(key);
            ControlFlow::Continue(())
        })
        .await
    }

    /// [`scan_node_each`](Self::scan_node_each) until `each` breaks (after the step that found
    /// that key).
    async fn scan_node_until(
        &self,
        what: &str,
        pattern: &str,
        of_type: Option<&str>,
        slot: Option<u16>,
        mut each: impl FnMut(String) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut cursor = "0".to_owned();
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(&cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            if let Some(of_type) = of_type {
                cmd.arg("TYPE").arg(of_type);
            }
            let reply = self
                .send(what, &cmd, slot)
                .await?
                .map_err(|e| redis_error(what, e))?;
            let Value::Array(mut parts) = reply else {
                return Err(bad_reply(what, "SCAN did not return an array"));
            };
            if parts.len() != 2 {
                return Err(bad_reply(what, "SCAN did not return [cursor, keys]"));
            }
            let batch = parts.pop();
            let next = parts.pop().and_then(|v| text(&v));
            let Some(next) = next else {
                return Err(bad_reply(what, "SCAN returned no cursor"));
            };
            if let Some(Value::Array(items)) = batch {
                for key in items.iter().filter_map(text) {
                    if each(key).is_break() {
                        return Ok(());
                    }
                }
            }
            if next == "0" {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// One slot of each cluster master (from `CLUSTER SLOTS`), to route a `SCAN` to it.
    async fn master_slots(&self, what: &str) -> Result<Vec<u16>> {
        Ok(self
            .masters(what)
            .await?
            .into_values()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect())
    }

    /// The address (host, port) of each cluster master, from `CLUSTER SLOTS` (none on one
    /// server).
    pub(crate) async fn master_addresses(&self, what: &str) -> Result<Vec<(String, u16)>> {
        Ok(self
            .masters(what)
            .await?
            .into_keys()
            .map(|(host, port)| (host, u16::try_from(port).unwrap_or_default()))
            .collect())
    }

    /// Sends one command to the cluster node at `host:port` (on one server: to the server).
    pub(crate) async fn query_node(
        &self,
        what: &str,
        cmd: &Cmd,
        host: &str,
        port: u16,
    ) -> Result<Value> {
        let Conn::Cluster(conn) = &self.conn else {
            return self.query(what, cmd).await;
        };
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let budget = self.call_budget;
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: host.to_owned(),
            port,
        });
        tokio::time::timeout(budget, conn.clone().route_command(cmd.clone(), routing))
            .await
            .map_err(|_| timed_out(what, budget))?
            .and_then(Value::extract_error)
            .map_err(|e| redis_error(what, e))
    }

    /// Each cluster master's address and its lowest slot, from `CLUSTER SLOTS`.
    async fn masters(&self, what: &str) -> Result<BTreeMap<(String, i64), u16>> {
        let Conn::Cluster(conn) = &self.conn else {
            return Ok(BTreeMap::new());
        };
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let budget = self.call_budget;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let reply = tokio::time::timeout(
            budget,
            conn.clone().route_command(
                cmd,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            ),
        )
        .await
        .map_err(|_| timed_out(what, budget))?
        .and_then(Value::extract_error)
        .map_err(|e| redis_error(what, e))?;
        let Value::Array(ranges) = reply else {
            return Err(bad_reply(what, "CLUSTER SLOTS did not return an array"));
        };
        // master address -> its lowest slot
        let mut masters: BTreeMap<(String, i64), u16> = BTreeMap::new();
        for range in &ranges {
            let Value::Array(fields) = range else {
                continue;
            };
            let (Some(start), Some(Value::Array(master))) = (fields.first(), fields.get(2)) else {
                continue;
            };
            let Some(start) = integer(start).and_then(|s| u16::try_from(s).ok()) else {
                continue;
            };
            let host = master.first().and_then(text).unwrap_or_default();
            let port = master.get(1).and_then(integer).unwrap_or_default();
            let slot = masters.entry((host, port)).or_insert(start);
            *slot = (*slot).min(start);
        }
        if masters.is_empty() {
            return Err(bad_reply(what, "CLUSTER SLOTS listed no master"));
        }
        Ok(masters)
    }
}

/// Refuses a TLS URL when the crate was built without TLS, naming the feature to enable.
fn check_tls(url: &str, redacted: &str) -> Result<()> {
    let tls = url
        .split_once("://")
        .is_some_and(|(scheme, _)| matches!(scheme, "rediss" | "valkeys"));
    if tls && !cfg!(feature = "tls") {
        return Err(Error::invalid_input(format!(
            "{redacted} uses TLS: enable the `tls` feature of memory-redis"
        )));
    }
    Ok(())
}

/// A reply as text (bulk or simple string, or an integer).
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A reply as an integer (an integer, or a string of digits).
pub(crate) fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// A reply as a non-negative integer.
pub(crate) fn unsigned(value: &Value) -> Option<u64> {
    integer(value).and_then(|n| u64::try_from(n).ok())
}

/// One integer reply of a pipeline, or the command's error.
pub(crate) fn pipeline_integer(what: &str, reply: Value) -> Result<i64> {
    match reply {
        Value::ServerError(err) => Err(redis_error(what, err.into())),
        reply => integer(&reply).ok_or_else(|| bad_reply(what, "not an integer")),
    }
}
