//! Store configuration: the table prefix, token counter, TTL and pool settings, and the
//! handling of database URLs (which backend, and a printable form without the password).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    Error, REDACTED, Result, TokenCounter, default_token_counter, redact_url, url_secrets,
};

use crate::dialect::Backend;

/// The table prefix used when none is given.
pub const DEFAULT_TABLE_PREFIX: &str = "agent_memory_";

/// What opening a store may do to the database's schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaMode {
    /// Create what is missing (the SQLite file, the tables) and apply pending migrations: what
    /// an application wants. The default.
    #[default]
    CreateOrMigrate,
    /// Change nothing: open an existing SQLite file without creating it (and without changing
    /// its journal mode), create no table, apply no migration. The open fails with
    /// [`NotFound`](memory_core::ErrorKind::NotFound) when the file or the tables with the
    /// prefix are missing, and with [`Unsupported`](memory_core::ErrorKind::Unsupported) when
    /// the tables are at another schema version than this build's. What an operator's tool
    /// wants: a mistyped URL or prefix is an error, not a new empty store, and a production
    /// schema is never upgraded behind the applications' back.
    RequireCurrent,
}
/// How a [`SqlStore`](crate::SqlStore) uses its database: plain data, shared by every
/// constructor.
///
/// ```
/// use std::time::Duration;
/// use memory_sql::SqlConfig;
///
/// let config = SqlConfig::new()
///     .with_table_prefix("chat_")
///     .with_default_ttl(Duration::from_secs(24 * 3600));
/// assert_eq!(config.table_prefix(), "chat_");
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
    pub(crate) schema_mode: SchemaMode,
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
            schema_mode: SchemaMode::CreateOrMigrate,
        }
    }

    /// Sets the prefix of every table name. It is checked when the store opens: 1 to 32
    /// characters of `[a-z0-9_]` starting with a letter, else
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput).
    pub fn with_table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// Counts tokens with `counter` (each message is counted once, when appended).
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.token_counter = counter;
        self
    }

    /// Gives every new thread this time to live (see
    /// [`HistoryStore::set_ttl`](memory_core::HistoryStore::set_ttl)). It is checked when the
    /// store opens: 1 ms to [`MAX_TTL`](memory_core::MAX_TTL), else
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput).
    pub fn with_default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Caps the pool a URL constructor opens (default: 10 for servers, 4 for a SQLite file; an
    /// in-memory SQLite database always has exactly one connection). Ignored by the
    /// `from_*_pool` constructors, whose pool is the application's.
    pub fn with_max_connections(mut self, max: u32) -> Self {
        self.max_connections = Some(max.max(1));
        self
    }

    /// Bounds connecting and waiting for a pooled connection (default 5 s).
    pub fn with_acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How long a writer waits for a lock another transaction holds before it fails with
    /// [`Timeout`](memory_core::ErrorKind::Timeout) (default 10 s): SQLite's busy timeout,
    /// PostgreSQL's `lock_timeout`, MySQL's `innodb_lock_wait_timeout` (whole seconds, at least
    /// one). Set on the connections of the pools the URL constructors open; the application's
    /// own pools keep their settings.
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Bounds every operation of the store (an append with its retries, a read with all its
    /// pages, …): past it the call fails with [`Timeout`](memory_core::ErrorKind::Timeout) and
    /// its transaction is rolled back (default 30 s). It guards against a server that stopped
    /// answering; lock waits are bounded first by [`with_busy_timeout`](Self::with_busy_timeout). On
    /// PostgreSQL it is also the server's `idle_in_transaction_session_timeout` for the
    /// connections this crate opens, so a client that hangs inside a transaction cannot hold
    /// its locks for longer. Needs a Tokio runtime with the time driver (as `#[tokio::main]`
    /// builds).
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets what opening may do to the schema (default [`SchemaMode::CreateOrMigrate`]).
    pub fn with_schema_mode(mut self, mode: SchemaMode) -> Self {
        self.schema_mode = mode;
        self
    }

    /// Opens only a database whose tables exist at this build's schema version, creating and
    /// migrating nothing: [`SchemaMode::RequireCurrent`].
    pub fn existing_only(self) -> Self {
        self.with_schema_mode(SchemaMode::RequireCurrent)
    }

    /// What opening may do to the schema.
    pub fn schema_mode(&self) -> SchemaMode {
        self.schema_mode
    }

    /// Migrates only up to `version` instead of the newest schema. For tests of upgrades.
    #[doc(hidden)]
    pub fn __schema_version(mut self, version: u32) -> Self {
        self.schema_version = Some(version);
        self
    }

    /// The table prefix as given.
    pub fn table_prefix(&self) -> &str {
        &self.table_prefix
    }

    /// The default TTL of new threads.
    pub fn default_ttl(&self) -> Option<Duration> {
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
            .field("schema_mode", &self.schema_mode)
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
        let redacted = redact_url(url);
        let mut secrets = url_secrets(url);
        secrets.retain(|s| s != REDACTED);
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

    /// The URL's secrets (its password, secret query values), as they may appear in a text.
    pub(crate) fn secrets(&self) -> &[String] {
        &self.secrets
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

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

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
        assert!(url.secrets().iter().any(|s| s == "hunter2"));
        assert_eq!(url.scrub("x hunter2 y"), "x *** y");
        let url = DbUrl::parse("mysql://root:p%40ss@h/db?sslmode=x&password=zz").unwrap();
        assert_eq!(url.redacted, "mysql://root:***@h/db?sslmode=x&password=***");
        for secret in ["p@ss", "p%40ss", "zz"] {
            assert!(url.secrets().iter().any(|s| s == secret), "{secret}");
        }
        let url = DbUrl::parse("mysql://root:a@b@h/db").unwrap();
        assert!(!url.redacted.contains("a@b"));
        let url = DbUrl::parse("mysql://root@h/db").unwrap();
        assert_eq!(url.redacted, "mysql://root@h/db");
        let url = DbUrl::parse("postgres://u:pa/ss@h/db?password=zz").unwrap();
        assert_eq!(url.redacted, "postgres://u:***@h/db?password=***");
        assert!(url.secrets().iter().any(|s| s == "pa/ss"));
        assert_eq!(url.scrub("a pa/ss b zz"), "a *** b ***");
    }
}
