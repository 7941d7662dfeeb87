//! [`inspect`]: a read-only look at a Redis server or cluster, for `agent-memory doctor`: does
//! it answer (every master of a cluster), which version it runs, its `maxmemory-policy` (any
//! policy but `noeviction` lets Redis delete stored memory when it is full) and whether it
//! persists anything. It writes no key and changes no setting.

use memory_core::doctor::Check;
use memory_core::redact::{rewrite_error, scrub_error};
use memory_core::{Error, Result, url_secrets};
use redis::Value;

use crate::config::{Endpoint, RedisConfig};
use crate::conn::{Connection, text};
use crate::error::BACKEND;

/// What [`inspect`] found at a Redis URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisInspection {
    /// Whether the URL names a cluster (`redis+cluster://`).
    pub cluster: bool,
    /// The server, or each master of the cluster (from `CLUSTER SLOTS`).
    pub nodes: Vec<RedisNode>,
}

/// What [`inspect`] found on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisNode {
    /// `host:port` of a cluster master; `None` for a standalone server.
    pub address: Option<String>,
    /// Why it did not answer `PING`, as a sentence; `None` when it answered.
    pub unreachable: Option<String>,
    /// The server's name and version (`Redis 7.2.4`, `Valkey 8.0.1`), from `INFO server`.
    pub server_version: Option<String>,
    /// Its `maxmemory-policy`, from `CONFIG GET` or else `INFO memory`; `None` when neither
    /// answered.
    pub maxmemory_policy: Option<String>,
    /// Its `maxmemory` in bytes (0: no limit).
    pub maxmemory: Option<u64>,
    /// Why `CONFIG GET` failed (disabled, renamed, not allowed to this user), when it did.
    pub config_refused: Option<String>,
    /// Whether the append-only file is on.
    pub appendonly: Option<bool>,
    /// The RDB snapshot schedule (`save`), empty when snapshots are off; `None` when unknown.
    pub save: Option<String>,
}

/// Looks at the Redis server or cluster `url` names (any URL
/// [`RedisStore::connect`](crate::RedisStore::connect) takes), within `config`'s timeouts,
/// without writing anything. Turn the result into findings with [`RedisInspection::checks`].
///
/// A cluster master that does not answer is a finding ([`RedisNode::unreachable`]), not an
/// error: only a URL it cannot use, or a server (or cluster) it cannot reach at all, is.
///
/// # Errors
/// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL or timeouts it cannot use;
/// [`Unavailable`](memory_core::ErrorKind::Unavailable) or
/// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached,
/// [`Backend`](memory_core::ErrorKind::Backend) when it refuses (a wrong password). Messages
/// are sentences that never repeat the URL (nor, therefore, its password).
pub async fn inspect(url: &str, config: &RedisConfig) -> Result<RedisInspection> {
    let endpoint = Endpoint::parse(url).map_err(|err| clean(err, url, None))?;
    config.timeouts().validate()?;
    let redacted = endpoint.redacted();
    let conn = Connection::open(&endpoint, config.timeouts())
        .await
        .map_err(|err| clean(err, url, Some(&redacted)))?;
    let mut nodes = Vec::new();
    if conn.is_cluster() {
        let masters = conn
            .master_addresses("list the cluster's masters")
            .await
            .map_err(|err| clean(err, url, Some(&redacted)))?;
        for (host, port) in masters {
            nodes.push(inspect_node(&conn, Some((&host, port))).await);
        }
    } else {
        nodes.push(inspect_node(&conn, None).await);
    }
    Ok(RedisInspection {
        cluster: conn.is_cluster(),
        nodes,
    })
}

/// The error as a sentence without the URL: its secrets scrubbed, the redacted URL replaced
/// by "the server".
fn clean(err: Error, url: &str, redacted: Option<&str>) -> Error {
    let err = scrub_error(err, &url_secrets(url)).with_backend(BACKEND);
    let Some(redacted) = redacted else {
        return err.with_operation("inspect");
    };
    rewrite_error(err, |text| text.replace(redacted, "the server")).with_operation("inspect")
}

async fn send(conn: &Connection, node: Option<(&str, u16)>, cmd: &redis::Cmd) -> Result<Value> {
    const WHAT: &str = "inspect the server";
    match node {
        Some((host, port)) => conn.query_node(WHAT, cmd, host, port).await,
        None => conn.query(WHAT, cmd).await,
    }
}

async fn inspect_node(conn: &Connection, node: Option<(&str, u16)>) -> RedisNode {
    let mut found = RedisNode {
        address: node.map(|(host, port)| format!("{host}:{port}")),
        unreachable: None,
        server_version: None,
        maxmemory_policy: None,
        maxmemory: None,
        config_refused: None,
        appendonly: None,
        save: None,
    };
    if let Err(err) = send(conn, node, &redis::cmd("PING")).await {
        found.unreachable = Some(err.message().to_owned());
        return found;
    }
    let info = |section: &'static str| {
        let mut cmd = redis::cmd("INFO");
        cmd.arg(section);
        async move { send(conn, node, &cmd).await.ok().map(|v| info_fields(&v)) }
    };
    if let Some(server) = info("server").await {
        found.server_version = server_version(&server);
    }
    let config_get = |name: &'static str| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(name);
        async move { send(conn, node, &cmd).await.map(|v| config_value(&v)) }
    };
    match config_get("maxmemory-policy").await {
        Ok(policy) => {
            found.maxmemory_policy = policy;
            found.maxmemory = config_get("maxmemory")
                .await
                .ok()
                .flatten()
                .and_then(|v| v.parse().ok());
            found.appendonly = config_get("appendonly")
                .await
                .ok()
                .flatten()
                .map(|v| v == "yes");
            found.save = config_get("save").await.ok().flatten();
        }
        Err(err) => {
            found.config_refused = Some(err.message().to_owned());
            if let Some(memory) = info("memory").await {
                found.maxmemory_policy = field(&memory, "maxmemory_policy");
                found.maxmemory = field(&memory, "maxmemory").and_then(|v| v.parse().ok());
            }
            if let Some(persistence) = info("persistence").await {
                found.appendonly = field(&persistence, "aof_enabled").map(|v| v == "1");
            }
        }
    }
    found
}

/// The `key:value` lines of an `INFO` reply.
fn info_fields(reply: &Value) -> Vec<(String, String)> {
    let body = match reply {
        Value::VerbatimString { text, .. } => Some(text.clone()),
        other => text(other),
    };
    body.unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn field(fields: &[(String, String)], name: &str) -> Option<String> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// `Valkey 8.0.1` when the server says it is Valkey, else `Redis <redis_version>`.
fn server_version(server: &[(String, String)]) -> Option<String> {
    if let Some(valkey) = field(server, "valkey_version") {
        return Some(format!("Valkey {valkey}"));
    }
    field(server, "redis_version").map(|v| format!("Redis {v}"))
}

/// The value of a one-parameter `CONFIG GET` reply (`[name, value]`, or a map under RESP3);
/// `None` when the server does not know the parameter.
fn config_value(reply: &Value) -> Option<String> {
    match reply {
        Value::Array(items) => items.get(1).and_then(text),
        Value::Map(pairs) => pairs.first().and_then(|(_, v)| text(v)),
        _ => None,
    }
}

/// The finding for a `maxmemory-policy`: ok for `noeviction`, a warning for any other policy
/// (Redis may then delete stored threads and sessions when memory is full) and when it could
/// not be read.
fn policy_check(name: String, node: &RedisNode) -> Check {
    let limit = match node.maxmemory {
        Some(0) => " (maxmemory is 0 now: no limit, so nothing is evicted until one is set)",
        _ => "",
    };
    match node.maxmemory_policy.as_deref() {
        Some("noeviction") => Check::ok(
            name,
            "noeviction: when memory is full, writes fail and nothing stored is evicted.",
        ),
        Some(policy) => Check::warning(
            name,
            format!(
                "The policy is {policy}: when memory is full, Redis evicts keys, which silently \
                 deletes conversation history and session state{limit}. Set \
                 maxmemory-policy to noeviction."
            ),
        ),
        None => Check::warning(
            name,
            format!(
                "unknown: {}; make sure maxmemory-policy is noeviction.",
                match &node.config_refused {
                    Some(reason) => format!("the server refused CONFIG GET ({reason})"),
                    None => "the server did not report it".to_owned(),
                }
            ),
        ),
    }
}

fn persistence_check(name: String, node: &RedisNode) -> Check {
    let aof = match node.appendonly {
        Some(true) => "the append-only file is on",
        Some(false) => "the append-only file is off",
        None => "the append-only file setting is unknown",
    };
    let rdb = match node.save.as_deref() {
        Some("") => "RDB snapshots are off".to_owned(),
        Some(save) => format!("RDB snapshots are taken at \"save {save}\""),
        None => "the RDB snapshot schedule is unknown".to_owned(),
    };
    let lost = if node.appendonly == Some(false) && node.save.as_deref() == Some("") {
        ": a restart loses every thread and session"
    } else {
        ""
    };
    let mut sentence = format!("{aof}, {rdb}{lost}.");
    if let Some(first) = sentence.get(..1) {
        sentence = format!(
            "{}{}",
            first.to_ascii_uppercase(),
            sentence.get(1..).unwrap_or("")
        );
    }
    Check::ok(name, sentence)
}

impl RedisInspection {
    /// The findings, in order. A standalone server: `connection`, `maxmemory-policy`,
    /// `persistence`. A cluster: `cluster` (error when a master does not answer), then for each
    /// master the same three, named with its address (`maxmemory-policy 10.0.0.1:7000`).
    ///
    /// `noeviction` is ok; any other policy, or one that cannot be read (`CONFIG` disabled or
    /// renamed, and `INFO` silent), is a warning. Persistence is information: ok.
    pub fn checks(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        if self.cluster {
            let down: Vec<&str> = self
                .nodes
                .iter()
                .filter(|n| n.unreachable.is_some())
                .filter_map(|n| n.address.as_deref())
                .collect();
            let total = self.nodes.len();
            checks.push(if down.is_empty() {
                Check::ok(
                    "cluster",
                    format!(
                        "{total} master{} listed by CLUSTER SLOTS, each answers PING.",
                        if total == 1 { "" } else { "s" }
                    ),
                )
            } else {
                Check::error(
                    "cluster",
                    format!(
                        "{} of {total} masters do not answer: {}.",
                        down.len(),
                        down.join(", ")
                    ),
                )
            });
        }
        for node in &self.nodes {
            let named = |what: &str| match &node.address {
                Some(address) => format!("{what} {address}"),
                None => what.to_owned(),
            };
            if let Some(reason) = &node.unreachable {
                checks.push(Check::error(
                    named("connection"),
                    format!("It does not answer PING: {reason}."),
                ));
                continue;
            }
            checks.push(Check::ok(
                named("connection"),
                format!(
                    "{} answers PING.",
                    node.server_version.as_deref().unwrap_or("The server")
                ),
            ));
            checks.push(policy_check(named("maxmemory-policy"), node));
            checks.push(persistence_check(named("persistence"), node));
        }
        checks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::doctor::CheckStatus;

    fn node(policy: Option<&str>) -> RedisNode {
        RedisNode {
            address: None,
            unreachable: None,
            server_version: Some("Redis 7.2.4".into()),
            maxmemory_policy: policy.map(str::to_owned),
            maxmemory: Some(0),
            config_refused: None,
            appendonly: Some(false),
            save: Some(String::new()),
        }
    }

    #[test]
    fn only_noeviction_is_ok() {
        assert_eq!(
            policy_check("p".into(), &node(Some("noeviction"))).status,
            CheckStatus::Ok
        );
        for policy in [
            "allkeys-lru",
            "volatile-lru",
            "allkeys-lfu",
            "volatile-ttl",
            "allkeys-random",
        ] {
            let check = policy_check("p".into(), &node(Some(policy)));
            assert_eq!(check.status, CheckStatus::Warning, "{policy}");
            assert!(check.detail.contains(policy), "{check}");
        }
        let mut refused = node(None);
        refused.config_refused = Some("unknown command 'CONFIG'".into());
        let check = policy_check("p".into(), &refused);
        assert_eq!(check.status, CheckStatus::Warning);
        assert!(check.detail.starts_with("unknown"), "{check}");
        assert!(check.detail.contains("unknown command"), "{check}");
    }

    #[test]
    fn persistence_is_information() {
        let check = persistence_check("persistence".into(), &node(None));
        assert_eq!(check.status, CheckStatus::Ok);
        assert!(check.detail.contains("a restart loses"), "{check}");
        let mut on = node(None);
        on.appendonly = Some(true);
        on.save = Some("3600 1".into());
        let check = persistence_check("persistence".into(), &on);
        assert_eq!(
            check.detail,
            "The append-only file is on, RDB snapshots are taken at \"save 3600 1\"."
        );
    }

    #[test]
    fn replies_parse() {
        let info = Value::BulkString(
            b"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n".to_vec(),
        );
        let fields = info_fields(&info);
        assert_eq!(server_version(&fields).as_deref(), Some("Redis 7.0.15"));
        let valkey = Value::BulkString(b"redis_version:7.2.4\r\nvalkey_version:8.0.1\r\n".to_vec());
        assert_eq!(
            server_version(&info_fields(&valkey)).as_deref(),
            Some("Valkey 8.0.1")
        );
        let resp2 = Value::Array(vec![
            Value::BulkString(b"maxmemory-policy".to_vec()),
            Value::BulkString(b"allkeys-lru".to_vec()),
        ]);
        assert_eq!(config_value(&resp2).as_deref(), Some("allkeys-lru"));
        let resp3 = Value::Map(vec![(
            Value::BulkString(b"maxmemory-policy".to_vec()),
            Value::BulkString(b"noeviction".to_vec()),
        )]);
        assert_eq!(config_value(&resp3).as_deref(), Some("noeviction"));
        assert_eq!(config_value(&Value::Array(vec![])), None);
    }

    #[test]
    fn a_master_down_is_an_error() {
        let mut down = node(Some("noeviction"));
        down.address = Some("h:2".into());
        down.unreachable = Some("inspect the server: redis is unavailable (I/O error)".into());
        let mut up = node(Some("noeviction"));
        up.address = Some("h:1".into());
        let found = RedisInspection {
            cluster: true,
            nodes: vec![up, down],
        };
        let checks = found.checks();
        assert_eq!(checks[0].name, "cluster");
        assert_eq!(checks[0].status, CheckStatus::Error);
        assert!(checks[0].detail.contains("h:2"));
        assert!(
            checks
                .iter()
                .any(|c| c.name == "connection h:2" && c.status == CheckStatus::Error)
        );
        assert!(
            checks
                .iter()
                .any(|c| c.name == "maxmemory-policy h:1" && c.status == CheckStatus::Ok)
        );
    }
}
