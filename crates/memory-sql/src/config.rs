//! Store configuration: the table prefix, token counter, TTL and pool settings, and the
//! handling of database URLs (which backend, and a printable form without the password).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, REDACTED, Result, TokenCounter, default_token_counter, redact_url};

use crate::dialect::Backend;

/// The table prefix used when none is given.
pub const DEFAULT_TABLE_PREFIX: &str = "agent_memory_";
/// The longest table prefix, in characters.
pub const MAX_TABLE_PREFIX_LEN: usize = 32;

/// A validated table prefix: 1 to 32 characters of `[a-z0-9_]`, starting with a letter. It is
/// the only text of a statement that does not come from this crate's constants, and it cannot
/// carry a quote, a space or a semicolon, so nothing can be injected through it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct TablePrefix(String);

impl TablePrefix {
    pub(crate) fn new(prefix: &str) -> Result<Self> {
        let ok_len = !prefix.is_empty() && prefix.len() <= MAX_TABLE_PREFIX_LEN;
        let starts_with_letter = prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase());
        let ok_chars = prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok_len && starts_with_letter && ok_chars {
            Ok(Self(prefix.to_owned()))
        } else {
            Err(Error::invalid_input(format!(
                "table prefix {prefix:?} is invalid: it must be 1 to {MAX_TABLE_PREFIX_LEN} \
                 characters of a-z, 0-9 and _, starting with a letter"
            )))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TablePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// How a [`SqlStore`](crate::SqlStore) uses its database: plain data, shared by every
/// constructor.
///
/// ```
/// use std::time::Duration;
/// use memory_sql::SqlConfig;
///
/// let config = SqlConfig::new()
///     .table_prefix("chat_")
///     .default_ttl(Duration::from_secs(24 * 3600));
/// assert_eq!(config.get_table_prefix(), "chat_");
/// ```
#[derive(Clone)]
pub struct SqlConfig {
    pub(crate) table_prefix: String,
    pub(crate) token_counter: Arc<dyn TokenCounter>,
    pub(crate) default_ttl: Option<Duration>,
    pub(crate) max_connections: Option<u32>,
    pub(crate) acquire_timeout: Duration,
    pub(crate) busy_timeout: Duration,
    pub(crate) operation_timeout: Duration,
    pub(crate) schema_version: Option<u32>,
}

impl Default for SqlConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl SqlConfig {
    /// The defaults: prefix `agent_memory_`, tiktoken `o200k_base` counts, no TTL, a 5 s bound
    /// on connecting and on waiting for a pooled connection, a 10 s bound on waiting for a lock
    /// another writer holds, a 30 s bound on every operation.
    pub fn new() -> Self {
        Self {
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            token_counter: default_token_counter(),
            default_ttl: None,
            max_connections: None,
            acquire_timeout: Duration::from_secs(5),
            busy_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(30),
            schema_version: None,
        }
    }

    /// Sets the prefix of every table name. It is checked when the store opens: 1 to 32
    /// characters of `[a-z0-9_]` starting with a letter, else
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput).
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// Counts tokens with `counter` (each message is counted once, when appended).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.token_counter = counter;
        self
    }

    /// Gives every new thread this time to live (see
    /// [`HistoryStore::set_ttl`](memory_core::HistoryStore::set_ttl)). It is checked when the
    /// store opens: 1 ms to [`MAX_TTL`](memory_core::MAX_TTL), else
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Caps the pool a URL constructor opens (default: 10 for servers, 4 for a SQLite file; an
    /// in-memory SQLite database always has exactly one connection). Ignored by the
    /// `from_*_pool` constructors, whose pool is the application's.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = Some(max.max(1));
        self
    }

    /// Bounds connecting and waiting for a pooled connection (default 5 s).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How long a writer waits for a lock another transaction holds before it fails with
    /// [`Timeout`](memory_core::ErrorKind::Timeout) (default 10 s): SQLite's busy timeout,
    /// PostgreSQL's `lock_timeout`, MySQL's `innodb_lock_wait_timeout` (whole seconds, at least
    /// one). Set on the connections of the pools the URL constructors open; the application's
    /// own pools keep their settings.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Bounds every operation of the store (an append with its retries, a read with all its
    /// pages, …): past it the call fails with [`Timeout`](memory_core::ErrorKind::Timeout) and
    /// its transaction is rolled back (default 30 s). It guards against a server that stopped
    /// answering; lock waits are bounded first by [`busy_timeout`](Self::busy_timeout). On
    /// PostgreSQL it is also the server's `idle_in_transaction_session_timeout` for the
    /// connections this crate opens, so a client that hangs inside a transaction cannot hold
    /// its locks for longer. Needs a Tokio runtime with the time driver (as `#[tokio::main]`
    /// builds).
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Migrates only up to `version` instead of the newest schema. For tests of upgrades.
    #[doc(hidden)]
    pub fn __schema_version(mut self, version: u32) -> Self {
        self.schema_version = Some(version);
        self
    }

    /// The table prefix as given.
    pub fn get_table_prefix(&self) -> &str {
        &self.table_prefix
    }

    /// The default TTL of new threads.
    pub fn get_default_ttl(&self) -> Option<Duration> {
        self.default_ttl
    }
}

impl fmt::Debug for SqlConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlConfig")
            .field("table_prefix", &self.table_prefix)
            .field("token_counter", &self.token_counter)
            .field("default_ttl", &self.default_ttl)
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("busy_timeout", &self.busy_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .finish()
    }
}

/// A database URL as given, with the parts this crate needs: the backend, a printable form
/// with the password masked, and the secrets that must never appear in an error.
#[derive(Clone)]
pub(crate) struct DbUrl {
    pub(crate) raw: String,
    pub(crate) backend: Backend,
    pub(crate) redacted: String,
    secrets: Vec<String>,
}

impl DbUrl {
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let mut redacted = redact_url(url);
        let mut secrets = secrets(url, &redacted);
        // `redact_url` ends the user info at the first `/`: a password holding an unescaped
        // `/` (not valid in a URL, but easily typed) would slip past it. Mask all of such a
        // URL's user info.
        // (A SQLite URL is a path, which may hold both.)
        let (main, _) = url_query(url);
        if !url.to_ascii_lowercase().starts_with("sqlite:")
            && let (Some(scheme_end), Some(at)) = (main.find("://").map(|i| i + 3), main.rfind('@'))
            && scheme_end <= at
            && main[scheme_end..at].contains('/')
        {
            if let Some((_, password)) = main[scheme_end..at].split_once(':') {
                secrets.push(password.to_owned());
            }
            redacted = format!("{}{REDACTED}{}", &url[..scheme_end], &main[at..]);
            if let (_, Some(query)) = url_query(&redact_url(url)) {
                redacted = format!("{redacted}?{query}");
            }
        }
        let decoded: Vec<String> = secrets.iter().map(|s| percent_decode(s)).collect();
        secrets.extend(decoded);
        secrets.retain(|s| !s.is_empty() && s != REDACTED);
        // Longest first, so that a secret holding another is masked whole.
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        let scheme = url
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let backend = match scheme.as_str() {
            "sqlite" => Backend::Sqlite,
            "postgres" | "postgresql" => Backend::Postgres,
            "mysql" | "mariadb" => Backend::MySql,
            _ => {
                return Err(Error::invalid_input(format!(
                    "unsupported database URL {redacted}: use sqlite:, postgres:// or mysql://"
                )));
            }
        };
        Ok(Self {
            raw: url.to_owned(),
            backend,
            redacted,
            secrets,
        })
    }

    /// Replaces every secret of the URL in `text` by `***`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |out, secret| {
            out.replace(secret.as_str(), REDACTED)
        })
    }

    /// Whether `text` holds a secret of the URL.
    pub(crate) fn leaks(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(s.as_str()))
    }

    /// Whether this is an in-memory SQLite URL (`sqlite::memory:`, `sqlite://:memory:`,
    /// `?mode=memory`).
    #[cfg(feature = "sqlite")]
    pub(crate) fn is_sqlite_memory(&self) -> bool {
        if self.backend != Backend::Sqlite {
            return false;
        }
        let rest = self.raw["sqlite:".len().min(self.raw.len())..].trim_start_matches("//");
        let (db, params) = rest.split_once('?').unwrap_or((rest, ""));
        db == ":memory:" || params.split('&').any(|p| p == "mode=memory")
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

/// The secrets [`redact_url`] masks in `url` (the password of the user info, the values of
/// secret query parameters), found by comparing the URL with its masked form.
fn secrets(url: &str, redacted: &str) -> Vec<String> {
    let (raw_main, raw_query) = url_query(url);
    let (red_main, red_query) = url_query(redacted);
    let mut found = Vec::new();
    if raw_main != red_main {
        // One masked span: the password, between the parts both forms share.
        let prefix = raw_main
            .bytes()
            .zip(red_main.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let max_suffix = raw_main.len().min(red_main.len()) - prefix;
        let suffix = raw_main
            .bytes()
            .rev()
            .zip(red_main.bytes().rev())
            .take(max_suffix)
            .take_while(|(a, b)| a == b)
            .count();
        if let Some(secret) = raw_main.get(prefix..raw_main.len() - suffix) {
            found.push(secret.to_owned());
        }
    }
    if let (Some(raw_query), Some(red_query)) = (raw_query, red_query) {
        for (raw, red) in raw_query.split('&').zip(red_query.split('&')) {
            if raw != red
                && let Some((_, value)) = raw.split_once('=')
            {
                found.push(value.to_owned());
            }
        }
    }
    found
}

/// `url` split at its first `?`.
fn url_query(url: &str) -> (&str, Option<&str>) {
    url.split_once('?')
        .map_or((url, None), |(main, query)| (main, Some(query)))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[test]
    fn prefixes() {
        for ok in ["a", "agent_memory_", "t1_", "abc_def_2", &"a".repeat(32)] {
            assert!(TablePrefix::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a'b",
            "a;drop table x",
            "A",
            "Ab",
            "1a",
            "_a",
            "a-b",
            "a b",
            "a\"b",
            "é",
            &"a".repeat(33),
        ] {
            let err = TablePrefix::new(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn backends_from_urls() {
        for (url, backend) in [
            ("sqlite::memory:", Backend::Sqlite),
            ("sqlite://memory.db", Backend::Sqlite),
            ("postgres://u@h/db", Backend::Postgres),
            ("postgresql://u@h/db", Backend::Postgres),
            ("mysql://root@h/db", Backend::MySql),
            ("mariadb://root@h/db", Backend::MySql),
        ] {
            assert_eq!(DbUrl::parse(url).unwrap().backend, backend, "{url}");
        }
        let err = DbUrl::parse("redis://:pw@h").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(!err.to_string().contains("pw"));
    }

    #[test]
    #[cfg(feature = "sqlite")]
    fn memory_urls() {
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:file.db?mode=memory",
        ] {
            assert!(DbUrl::parse(url).unwrap().is_sqlite_memory(), "{url}");
        }
        for url in ["sqlite://memory.db", "sqlite:data/x.db", "postgres://h/db"] {
            assert!(!DbUrl::parse(url).unwrap().is_sqlite_memory(), "{url}");
        }
    }

    #[test]
    fn passwords_are_masked() {
        let url = DbUrl::parse("postgres://postgres:hunter2@127.0.0.1:5432/test").unwrap();
        assert_eq!(url.redacted, "postgres://postgres:***@127.0.0.1:5432/test");
        assert!(url.leaks("x hunter2 y"));
        assert_eq!(url.scrub("x hunter2 y"), "x *** y");
        let url = DbUrl::parse("mysql://root:p%40ss@h/db?sslmode=x&password=zz").unwrap();
        assert_eq!(url.redacted, "mysql://root:***@h/db?sslmode=x&password=***");
        assert!(url.leaks("p@ss") && url.leaks("p%40ss") && url.leaks("zz"));
        let url = DbUrl::parse("mysql://root:a@b@h/db").unwrap();
        assert!(!url.redacted.contains("a@b"));
        let url = DbUrl::parse("mysql://root@h/db").unwrap();
        assert_eq!(url.redacted, "mysql://root@h/db");
        let url = DbUrl::parse("postgres://u:pa/ss@h/db?password=zz").unwrap();
        assert_eq!(url.redacted, "postgres://***@h/db?password=***");
        assert!(url.leaks("pa/ss") && url.leaks("zz"));
        assert_eq!(url.scrub("a pa/ss b zz"), "a *** b ***");
    }
}
