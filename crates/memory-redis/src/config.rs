//! [`RedisConfig`]: the store's options, and the URLs it connects to.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, Result, TokenCounter, default_token_counter, redact_url, ttl_millis};

use crate::keys::validate_prefix;

/// The key prefix used when none is given.
pub const DEFAULT_KEY_PREFIX: &str = "am";
/// How long a call waits for the server's answer by default.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one connection attempt may take by default.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest response or connection timeout a store accepts (one day): the call budgets
/// add the two up, and an unbounded timeout would overflow them.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// What an append does with the messages that `max_messages` pushes out of the active window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Overflow {
    /// Archive them: they leave the active window but stay stored, readable with
    /// [`Window::Everything`](memory_core::Window::Everything). The default: nothing is deleted
    /// by a reduction.
    #[default]
    Archive,
    /// Delete their bodies, token counts and ids: the thread keeps nothing of them, so its
    /// keys never outgrow `max_messages` plus its archived messages. A deleted message is no
    /// longer held by the thread, so appending its id again stores it again, as a new message;
    /// the one exception keeps retries safe: the ids of messages that an append stored and
    /// deleted at once (a batch longer than `max_messages`) stay known until the thread's next
    /// append, so a retried or re-sent copy of that append stores nothing. Deleted messages are
    /// counted neither as active nor as archived.
    Delete,
}

impl Overflow {
    pub(crate) fn as_arg(self) -> &'static str {
        match self {
            Overflow::Archive => "archive",
            Overflow::Delete => "delete",
        }
    }
}

/// The options of a [`RedisStore`](crate::RedisStore): plain data, with `Default`.
///
/// Connection settings (URL, password) are not part of it, so a configuration can be logged or
/// kept in state without leaking a secret.
///
/// ```
/// use std::time::Duration;
/// use memory_redis::{Overflow, RedisConfig};
///
/// let mut config = RedisConfig::default();
/// config.key_prefix = "chat".to_owned();
/// config.max_messages = Some(200);
/// config.overflow = Overflow::Delete;
/// config.default_ttl = Some(Duration::from_secs(7 * 24 * 3600));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisConfig {
    /// The first part of every key: 1 to 32 characters of `[a-z0-9_.-]` (default `am`). Stores
    /// with different prefixes on one server never see each other's data.
    pub key_prefix: String,
    /// Counts each message's tokens once, when it is appended (default
    /// [`default_token_counter`]).
    pub token_counter: Arc<dyn TokenCounter>,
    /// The time to live of every new thread and session (default none: they never expire).
    /// Each append restarts a thread's clock and each save a session's; `set_ttl` changes it
    /// per thread or session.
    pub default_ttl: Option<Duration>,
    /// The most messages a thread's active window holds after an append (default none). The
    /// oldest active messages past it leave the window in the same atomic step as the append,
    /// as the [`Overflow`] option says.
    pub max_messages: Option<usize>,
    /// What happens to messages past `max_messages` (default [`Overflow::Archive`]).
    pub overflow: Overflow,
    /// How long a call waits for the server's answer (default 3 s).
    pub response_timeout: Duration,
    /// How long one connection attempt may take (default 2 s).
    pub connection_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            token_counter: default_token_counter(),
            default_ttl: None,
            max_messages: None,
            overflow: Overflow::Archive,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
        }
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("key_prefix", &self.key_prefix)
            .field("token_counter", &self.token_counter)
            .field("default_ttl", &self.default_ttl)
            .field("max_messages", &self.max_messages)
            .field("overflow", &self.overflow)
            .field("response_timeout", &self.response_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .finish()
    }
}

impl RedisConfig {
    /// Checks the options.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a prefix outside the rules,
    /// `max_messages` of 0, a TTL under a millisecond or over [`memory_core::MAX_TTL`], or a
    /// timeout of zero or over [`MAX_TIMEOUT`].
    pub fn validate(&self) -> Result<()> {
        validate_prefix(&self.key_prefix)?;
        if self.max_messages == Some(0) {
            return Err(Error::invalid_input(
                "max_messages must be at least 1 (use None for no limit)",
            ));
        }
        if let Some(ttl) = self.default_ttl {
            ttl_millis(ttl)?;
        }
        self.timeouts().validate()
    }

    /// The connection's timeouts.
    pub(crate) fn timeouts(&self) -> Timeouts {
        Timeouts {
            connection: self.connection_timeout,
            response: self.response_timeout,
        }
    }
}

/// The timeouts of a connection, and the budgets derived from them: every store of this crate
/// (and [`RedisConfig`]) holds its timeouts as this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// How long one connection attempt may take.
    pub(crate) connection: Duration,
    /// How long a call waits for the server's answer.
    pub(crate) response: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connection: DEFAULT_CONNECTION_TIMEOUT,
            response: DEFAULT_RESPONSE_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// Checks that both are above zero and at most [`MAX_TIMEOUT`].
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when one is zero or longer.
    pub(crate) fn validate(self) -> Result<()> {
        if self.response.is_zero() || self.connection.is_zero() {
            return Err(Error::invalid_input(
                "the redis response and connection timeouts must be above zero",
            ));
        }
        if self.response > MAX_TIMEOUT || self.connection > MAX_TIMEOUT {
            return Err(Error::invalid_input(format!(
                "the redis response and connection timeouts must be at most {} hours, not {:?} and {:?}",
                MAX_TIMEOUT.as_secs() / 3600,
                self.response,
                self.connection
            )));
        }
        Ok(())
    }

    /// The longest a single call may take before it fails: the re-send deadline plus a little
    /// slack for the reconnect backoff.
    pub(crate) fn call_budget(self) -> Duration {
        self.resend_deadline()
            .saturating_add(Duration::from_millis(500))
    }

    /// How long the cluster client may keep re-sending one request (one connection attempt
    /// plus one answer): it passes before [`call_budget`](Self::call_budget), so no request is
    /// re-sent after its call has failed.
    pub(crate) fn resend_deadline(self) -> Duration {
        self.connection.saturating_add(self.response)
    }
}

/// Where the store connects: one server or the seed nodes of a cluster.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// A standalone server (or a proxy): a `redis://`, `rediss://`, `valkey://`, `valkeys://`,
    /// `redis+unix://` or `unix://` URL.
    Standalone(String),
    /// A cluster, by the URLs of some of its nodes.
    Cluster(Vec<String>),
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Endpoint {
    /// Parses a URL: a standalone server's, or `redis+cluster://` / `rediss+cluster://` with
    /// comma-separated seed nodes.
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            // Not echoed: without a scheme there is no telling where a password would be.
            return Err(Error::invalid_input(
                "not a redis URL: expected redis://host:port",
            ));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "redis" | "rediss" | "valkey" | "valkeys" | "redis+unix" | "unix" => {
                Ok(Self::Standalone(url.to_owned()))
            }
            "redis+cluster" | "rediss+cluster" | "valkey+cluster" | "valkeys+cluster" => {
                let base = scheme.split('+').next().unwrap_or("redis");
                Ok(Self::Cluster(cluster_seeds(base, rest, url)?))
            }
            _ => Err(Error::invalid_input(format!(
                "unsupported redis URL scheme in {}: use redis://, rediss://, \
                 redis+cluster:// or rediss+cluster://",
                redact_url(url)
            ))),
        }
    }

    /// Seed URLs of a cluster, each checked for a supported scheme.
    pub(crate) fn cluster<S: AsRef<str>>(seeds: &[S]) -> Result<Self> {
        if seeds.is_empty() {
            return Err(Error::invalid_input(
                "a redis cluster needs at least one seed URL",
            ));
        }
        let mut out = Vec::with_capacity(seeds.len());
        for seed in seeds {
            match Self::parse(seed.as_ref())? {
                Self::Standalone(url) => out.push(url),
                Self::Cluster(more) => out.extend(more),
            }
        }
        Ok(Self::Cluster(out))
    }

    /// The endpoint with every password replaced by `***`.
    pub(crate) fn redacted(&self) -> String {
        match self {
            Self::Standalone(url) => redact_url(url),
            Self::Cluster(seeds) => format!(
                "cluster[{}]",
                seeds
                    .iter()
                    .map(|s| redact_url(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `host1:p1,host2:p2[/…][?…]` with optional `user:password@` before the first host: one
/// `{base}://[userinfo@]host[tail]` URL per host.
fn cluster_seeds(base: &str, rest: &str, url: &str) -> Result<Vec<String>> {
    let (userinfo, hosts_and_tail) = match rest.rfind('@') {
        Some(at) => (
            rest.get(..at),
            rest.get(at.saturating_add(1)..).unwrap_or_default(),
        ),
        None => (None, rest),
    };
    let split = hosts_and_tail
        .find(['/', '?'])
        .unwrap_or(hosts_and_tail.len());
    let (hosts, tail) = hosts_and_tail.split_at(split);
    let seeds: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|host| match userinfo {
            Some(info) => format!("{base}://{info}@{host}{tail}"),
            None => format!("{base}://{host}{tail}"),
        })
        .collect();
    if seeds.is_empty() {
        return Err(Error::invalid_input(format!(
            "{} names no cluster node: expected redis+cluster://host1:port1,host2:port2",
            redact_url(url)
        )));
    }
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_urls() {
        for url in [
            "redis://127.0.0.1:6379",
            "rediss://user:pw@host:6380/2",
            "unix:///tmp/redis.sock",
        ] {
            assert_eq!(
                Endpoint::parse(url).unwrap(),
                Endpoint::Standalone(url.into())
            );
        }
        assert!(Endpoint::parse("http://x").is_err());
        assert!(Endpoint::parse("127.0.0.1:6379").is_err());
    }

    #[test]
    fn cluster_urls_expand_to_seeds() {
        assert_eq!(
            Endpoint::parse("redis+cluster://:hunter2@h1:7000,h2:7001/?protocol=3").unwrap(),
            Endpoint::Cluster(vec![
                "redis://:hunter2@h1:7000/?protocol=3".into(),
                "redis://:hunter2@h2:7001/?protocol=3".into(),
            ])
        );
        assert_eq!(
            Endpoint::parse("rediss+cluster://h1:7000").unwrap(),
            Endpoint::Cluster(vec!["rediss://h1:7000".into()])
        );
        assert!(Endpoint::parse("redis+cluster://").is_err());
        assert_eq!(
            Endpoint::cluster(&["redis://a:1", "redis+cluster://b:2,c:3"]).unwrap(),
            Endpoint::Cluster(vec![
                "redis://a:1".into(),
                "redis://b:2".into(),
                "redis://c:3".into()
            ])
        );
        assert!(Endpoint::cluster::<&str>(&[]).is_err());
    }

    /// Redaction is memory-core's [`redact_url`]; these are the URLs of this crate.
    #[test]
    fn passwords_are_redacted() {
        let redacted = |url: &str| Endpoint::parse(url).unwrap().redacted();
        assert_eq!(
            redacted("redis://:hunter2@127.0.0.1:1"),
            "redis://:***@127.0.0.1:1"
        );
        assert_eq!(
            redacted("rediss://me:hun@ter2@h:1/0?password=hunter2&protocol=3"),
            "rediss://me:***@h:1/0?password=***&protocol=3"
        );
        // A lone user part is the user name for redis (`redis://name@h`), not a secret.
        assert_eq!(redacted("redis://hunter2@h"), "redis://hunter2@h");
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
        assert_eq!(
            redacted("redis://u:p/a?s#s@w:rd@h:6379/0"),
            "redis://u:***@h:6379/0"
        );
        assert_eq!(
            redacted("redis+cluster://u:p/w@a:1,b:2"),
            "cluster[redis://u:***@a:1, redis://u:***@b:2]"
        );
        let cluster = Endpoint::parse("redis+cluster://:hunter2@a:1,b:2").unwrap();
        assert!(!format!("{cluster:?}").contains("hunter2"));
        assert_eq!(
            format!("{cluster:?}"),
            "cluster[redis://:***@a:1, redis://:***@b:2]"
        );
        for bad in ["foo://:hunter2@x", "me:hunter2@host:6379"] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn config_validation() {
        assert!(RedisConfig::default().validate().is_ok());
        for bad in [
            RedisConfig {
                max_messages: Some(0),
                ..RedisConfig::default()
            },
            RedisConfig {
                key_prefix: "Bad Prefix".into(),
                ..RedisConfig::default()
            },
            RedisConfig {
                default_ttl: Some(Duration::from_micros(10)),
                ..RedisConfig::default()
            },
            RedisConfig {
                response_timeout: Duration::ZERO,
                ..RedisConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert_eq!(ttl_millis(Duration::from_millis(1500)).unwrap(), 1500);
        let too_long = RedisConfig {
            default_ttl: Some(memory_core::MAX_TTL + Duration::from_secs(1)),
            ..RedisConfig::default()
        };
        assert!(too_long.validate().is_err());
    }
}
