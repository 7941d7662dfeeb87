//! Store configuration: the table prefix, token counter, TTL and pool settings, and the
//! handling of database URLs (which backend, and a printable form without the password).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, Result, TokenCounter, default_token_counter};

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
    pub(crate) schema_version: Option<u32>,
}

impl Default for SqlConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl SqlConfig {
    /// The defaults: prefix `agent_memory_`, tiktoken `o200k_base` counts, no TTL, a 5 s bound
    /// on connecting and on waiting for a pooled connection, a 10 s SQLite busy timeout.
    pub fn new() -> Self {
        Self {
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            token_counter: default_token_counter(),
            default_ttl: None,
            max_connections: None,
            acquire_timeout: Duration::from_secs(5),
            busy_timeout: Duration::from_secs(10),
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
    /// [`HistoryStore::set_ttl`](memory_core::HistoryStore::set_ttl)).
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

    /// How long a SQLite writer waits for another one's lock before giving up (default 10 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
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
        let (redacted, secrets) = redact(url);
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
        let mut out = text.to_owned();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), "***");
        }
        out
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

/// Masks the password of `url` (the userinfo's part after `:`, and any `password=` query
/// parameter); returns the masked URL and the secrets it removed (raw and percent-decoded).
fn redact(url: &str) -> (String, Vec<String>) {
    let mut secrets = Vec::new();
    let Some(scheme_end) = url.find("://") else {
        return (url.to_owned(), secrets);
    };
    let (head, rest) = url.split_at(scheme_end + 3);
    // The userinfo ends at the last '@' (a password may hold an unescaped '@' or '/'; masking
    // too much is safe, too little is not).
    let mut out = head.to_owned();
    let after_userinfo = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.split_once(':') {
                Some((user, password)) => {
                    if !password.is_empty() {
                        secrets.push(password.to_owned());
                        let decoded = percent_decode(password);
                        if decoded != password {
                            secrets.push(decoded);
                        }
                    }
                    out.push_str(user);
                    out.push_str(":***@");
                }
                None => {
                    out.push_str(userinfo);
                    out.push('@');
                }
            }
            &rest[at + 1..]
        }
        None => rest,
    };
    match after_userinfo.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((k, v)) if k.to_ascii_lowercase().contains("password") => {
                        if !v.is_empty() {
                            secrets.push(v.to_owned());
                            secrets.push(percent_decode(v));
                        }
                        format!("{k}=***")
                    }
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(after_userinfo),
    }
    secrets.retain(|s| !s.is_empty());
    (out, secrets)
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
    }
}
