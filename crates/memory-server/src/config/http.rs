//! The `[http]` table: how long a client may take, how many connections are served at once,
//! how long a shutdown waits, and which host names a server without tokens answers to.
//!
//! ```toml
//! [http]
//! allowed_hosts = ["memory.internal"]   # besides localhost, 127.0.0.1, [::1] and the listen IP
//! header_timeout_secs = 10              # a request's headers, from their first byte
//! body_timeout_secs = 30                # a request's body, from its headers
//! idle_timeout_secs = 60                # a keep-alive connection with nothing to do
//! max_connections = 1024                # more wait in the listen backlog
//! shutdown_timeout_secs = 10            # then the connections still open are cut
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::uri::Authority;
use serde::{Deserialize, Deserializer};

use super::{ConfigError, ENV_PREFIX};

/// The header timeout when none is configured.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The body timeout when none is configured.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The idle timeout when none is configured.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The connection cap when none is configured.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The shutdown deadline when none is configured.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest timeout accepted: a day.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest connection cap accepted.
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// The names a server without tokens always answers to (with any port), besides its listen IP.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The `[http]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Host names a server without tokens answers to besides [`LOOPBACK_HOSTS`] and its
    /// listen IP, in the `Host` header and in the `Origin` of browsers (against DNS
    /// rebinding): `name` (any port) or `name:port` (that port only). With tokens every host
    /// is answered (a request without a token is refused anyway).
    pub allowed_hosts: Vec<String>,
    /// How long a client may take to send a request's headers, from their first byte (or,
    /// for a connection's first request, from the connection's start); the connection is
    /// closed after it. TOML: `header_timeout_secs` (seconds, may be fractional).
    #[serde(rename = "header_timeout_secs", deserialize_with = "seconds")]
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body, from the end of its headers: a
    /// body still incomplete then is answered 408 and the connection closed. TOML:
    /// `body_timeout_secs`.
    #[serde(rename = "body_timeout_secs", deserialize_with = "seconds")]
    pub body_timeout: Duration,
    /// How long a connection may go on with nothing moving: a keep-alive connection between
    /// requests, or a response the client does not read. TOML: `idle_timeout_secs`.
    #[serde(rename = "idle_timeout_secs", deserialize_with = "seconds")]
    pub idle_timeout: Duration,
    /// The most connections served at once; more wait in the listen backlog (unaccepted)
    /// until one closes.
    pub max_connections: usize,
    /// How long a shutdown waits for the requests in flight once it stops accepting
    /// connections; the connections still open then are cut (an append is atomic: it is
    /// stored whole or not at all). TOML: `shutdown_timeout_secs` (0: cut at once).
    #[serde(rename = "shutdown_timeout_secs", deserialize_with = "seconds")]
    pub shutdown_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// A number of seconds, whole or fractional, as a [`Duration`].
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Whole(u64),
        Fraction(f64),
    }
    match Number::deserialize(deserializer)? {
        Number::Whole(secs) => Ok(Duration::from_secs(secs)),
        Number::Fraction(secs) => Duration::try_from_secs_f64(secs).map_err(|_| {
            serde::de::Error::custom("a timeout must be a number of seconds, 0 or more")
        }),
    }
}

/// The connection settings [`HttpConfig`] gives, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    /// [`HttpConfig::header_timeout`].
    pub header_timeout: Duration,
    /// [`HttpConfig::body_timeout`].
    pub body_timeout: Duration,
    /// [`HttpConfig::idle_timeout`].
    pub idle_timeout: Duration,
    /// [`HttpConfig::max_connections`].
    pub max_connections: usize,
    /// [`HttpConfig::shutdown_timeout`].
    pub shutdown_timeout: Duration,
}

impl Default for Transport {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// One allowed host: a name (lower case, IPv6 without brackets) and, if given, the only port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostEntry {
    name: String,
    port: Option<u16>,
}

impl HostEntry {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // A bare IPv6 address (`::1`) is not an authority; its bracketed form is.
        let bracketed;
        let text = if text.parse::<std::net::Ipv6Addr>().is_ok() {
            bracketed = format!("[{text}]");
            bracketed.as_str()
        } else {
            text
        };
        let authority: Authority = text.parse().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        Some(Self {
            name: normalize_name(authority.host()),
            port: authority.port_u16(),
        })
    }
}

/// A host name as compared: lower case, an IPv6 address without its brackets.
fn normalize_name(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The host names a server without tokens answers to: the one rule for the `Host` header
/// and the `Origin` header of every route, `/mcp` included (against DNS rebinding: a page
/// of another site whose name resolves to 127.0.0.1 sends its own name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    entries: Vec<HostEntry>,
}

impl AllowedHosts {
    /// [`LOOPBACK_HOSTS`] and the IP of `listen`, with any port.
    pub fn loopback(listen: SocketAddr) -> Self {
        let mut entries: Vec<HostEntry> = LOOPBACK_HOSTS
            .iter()
            .filter_map(|name| HostEntry::parse(name))
            .collect();
        let own = HostEntry {
            name: normalize_name(&listen.ip().to_string()),
            port: None,
        };
        if !entries.contains(&own) {
            entries.push(own);
        }
        Self { entries }
    }

    /// [`loopback`](Self::loopback) and `extra` (`name` or `name:port` each).
    ///
    /// # Errors
    /// A [`ConfigError`] naming an entry that is not a host name, IP address or
    /// `host:port`.
    pub fn with_extra<S: AsRef<str>>(listen: SocketAddr, extra: &[S]) -> Result<Self, ConfigError> {
        let mut hosts = Self::loopback(listen);
        for text in extra {
            let text = text.as_ref();
            let entry = HostEntry::parse(text).ok_or_else(|| {
                ConfigError(format!(
                    "http.allowed_hosts holds `{text}`, which is not a host name, IP address or host:port"
                ))
            })?;
            if !hosts.entries.contains(&entry) {
                hosts.entries.push(entry);
            }
        }
        Ok(hosts)
    }

    /// Whether the authority `host` (a `Host` header's value: `name[:port]`) is allowed.
    pub fn allows_host(&self, host: &str) -> bool {
        match host.parse::<Authority>() {
            Ok(authority) if !authority.as_str().contains('@') => {
                self.allows(authority.host(), authority.port_u16())
            }
            _ => false,
        }
    }

    /// Whether the browser origin `origin` (`scheme://host[:port]`, as the `Origin` header
    /// gives it) is on an allowed host; `null` and anything that is not an http(s) origin is
    /// not.
    pub fn allows_origin(&self, origin: &str) -> bool {
        let Ok(uri) = origin.trim().parse::<axum::http::Uri>() else {
            return false;
        };
        let scheme_ok = uri
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"));
        let path_ok = uri.path_and_query().is_none_or(|p| p.as_str() == "/");
        match uri.authority() {
            Some(authority) if scheme_ok && path_ok && !authority.as_str().contains('@') => {
                self.allows(authority.host(), authority.port_u16())
            }
            _ => false,
        }
    }

    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let name = normalize_name(host);
        self.entries.iter().any(|entry| {
            entry.name == name && entry.port.is_none_or(|allowed| port == Some(allowed))
        })
    }
}

impl HttpConfig {
    /// Applies the `[http]` overrides: `AGENT_MEMORY_SERVER_ALLOWED_HOSTS` (comma-separated,
    /// replacing the file's list), `..._HEADER_TIMEOUT_SECS`, `..._BODY_TIMEOUT_SECS`,
    /// `..._IDLE_TIMEOUT_SECS`, `..._MAX_CONNECTIONS`, `..._SHUTDOWN_TIMEOUT_SECS`; `var`
    /// reads a variable by its suffix.
    ///
    /// # Errors
    /// A [`ConfigError`] for a value that is not a number.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(list) = var("ALLOWED_HOSTS") {
            self.allowed_hosts = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        let secs = |name: &str| -> Result<Option<Duration>, ConfigError> {
            var(name)
                .map(|value| {
                    value
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .and_then(|s| Duration::try_from_secs_f64(s).ok())
                        .ok_or_else(|| {
                            ConfigError(format!(
                                "{ENV_PREFIX}{name} must be a number of seconds, 0 or more"
                            ))
                        })
                })
                .transpose()
        };
        if let Some(d) = secs("HEADER_TIMEOUT_SECS")? {
            self.header_timeout = d;
        }
        if let Some(d) = secs("BODY_TIMEOUT_SECS")? {
            self.body_timeout = d;
        }
        if let Some(d) = secs("IDLE_TIMEOUT_SECS")? {
            self.idle_timeout = d;
        }
        if let Some(d) = secs("SHUTDOWN_TIMEOUT_SECS")? {
            self.shutdown_timeout = d;
        }
        if let Some(value) = var("MAX_CONNECTIONS") {
            self.max_connections = value.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "{ENV_PREFIX}MAX_CONNECTIONS must be a whole number"
                ))
            })?;
        }
        Ok(())
    }

    /// The connection settings, checked.
    ///
    /// # Errors
    /// A [`ConfigError`] for a timeout of zero (the shutdown's may be zero) or over a day, or
    /// a connection cap of zero or over [`MAX_CONNECTIONS`].
    pub fn transport(&self) -> Result<Transport, ConfigError> {
        for (name, value) in [
            ("header_timeout_secs", self.header_timeout),
            ("body_timeout_secs", self.body_timeout),
            ("idle_timeout_secs", self.idle_timeout),
        ] {
            if value.is_zero() || value > MAX_TIMEOUT {
                return Err(ConfigError(format!(
                    "http.{name} must be more than 0 and at most {} seconds",
                    MAX_TIMEOUT.as_secs()
                )));
            }
        }
        if self.shutdown_timeout > MAX_TIMEOUT {
            return Err(ConfigError(format!(
                "http.shutdown_timeout_secs must be at most {} seconds",
                MAX_TIMEOUT.as_secs()
            )));
        }
        if self.max_connections == 0 || self.max_connections > MAX_CONNECTIONS {
            return Err(ConfigError(format!(
                "http.max_connections must be between 1 and {MAX_CONNECTIONS}"
            )));
        }
        Ok(Transport {
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
            shutdown_timeout: self.shutdown_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen() -> SocketAddr {
        "127.0.0.1:8080".parse().unwrap()
    }

    #[test]
    fn loopback_names_with_any_port_are_allowed_and_others_are_not() {
        let hosts = AllowedHosts::loopback(listen());
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1:8080",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(hosts.allows_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.2:8080",
            "user@localhost",
            "",
            "local host",
        ] {
            assert!(!hosts.allows_host(bad), "{bad}");
        }
        assert!(hosts.allows_origin("http://localhost:3000"));
        assert!(hosts.allows_origin("https://127.0.0.1"));
        for bad in [
            "null",
            "http://evil.example:8080",
            "file://localhost",
            "localhost",
            "http://localhost/path",
        ] {
            assert!(!hosts.allows_origin(bad), "{bad}");
        }
    }

    #[test]
    fn extra_hosts_and_the_listen_ip_are_allowed() {
        let listen: SocketAddr = "127.0.0.5:9000".parse().unwrap();
        let hosts =
            AllowedHosts::with_extra(listen, &["Memory.Internal", "other:81", "::2"]).unwrap();
        assert!(hosts.allows_host("127.0.0.5:9000"));
        assert!(hosts.allows_host("memory.internal:9000"));
        assert!(hosts.allows_host("other:81"));
        assert!(!hosts.allows_host("other:82"));
        assert!(hosts.allows_host("[::2]:9000"));
        let err = AllowedHosts::with_extra(listen, &["not a host"]).unwrap_err();
        assert!(err.0.contains("not a host name"), "{err}");
    }

    #[test]
    fn timeouts_are_checked_and_read_from_the_environment() {
        let mut config = HttpConfig::default();
        assert_eq!(config.transport().unwrap(), Transport::default());
        config
            .apply_env(|name| match name {
                "HEADER_TIMEOUT_SECS" => Some("0.25".to_owned()),
                "MAX_CONNECTIONS" => Some("7".to_owned()),
                "ALLOWED_HOSTS" => Some("a.example, b.example:1".to_owned()),
                _ => None,
            })
            .unwrap();
        let transport = config.transport().unwrap();
        assert_eq!(transport.header_timeout, Duration::from_millis(250));
        assert_eq!(transport.max_connections, 7);
        assert_eq!(config.allowed_hosts, ["a.example", "b.example:1"]);
        config.idle_timeout = Duration::ZERO;
        assert!(config.transport().unwrap_err().0.contains("idle_timeout"));
        let err = HttpConfig::default()
            .apply_env(|name| (name == "BODY_TIMEOUT_SECS").then(|| "-1".to_owned()))
            .unwrap_err();
        assert!(err.0.contains("seconds"), "{err}");
    }
}
