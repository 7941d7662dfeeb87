//! The settings of a [`LlamaIndexHistoryStore`](super::LlamaIndexHistoryStore): LlamaIndex's
//! table, how scopes map to its `key` column, and the URLs it opens.

use std::borrow::Cow;

use memory_core::{Error, Result, Scope};
use memory_interop::llamaindex::LiOptions;

use super::ddl;
use crate::config::SqlConfig;

/// LlamaIndex's default table name (`Memory.from_defaults` uses it).
pub(super) const DEFAULT_TABLE: &str = "llama_index_memory";

/// The longest table or schema name accepted (PostgreSQL's identifier limit).
pub(super) const MAX_TABLE_NAME_LEN: usize = 63;

/// Which scopes a [`LlamaIndexHistoryStore`](super::LlamaIndexHistoryStore) accepts, given that LlamaIndex's table keys a
/// thread by one string (see [`LlamaIndexHistoryStore`](super::LlamaIndexHistoryStore)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyMapping {
    /// Only scopes made by [`Scope::session`]: the default tenant and source, no user and no
    /// agent. The key is the session id. Other scopes are refused with
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput), so nothing is ever shared by accident;
    /// listings return such scopes.
    #[default]
    Strict,
    /// Every scope; the key is the session id, and every scope with that session id (whatever
    /// its tenant, user, agent or source) reads and writes the same thread. Listings return
    /// the scopes of [`Scope::session`].
    SessionIdOnly,
    /// Every scope, kept apart: the key is the scope's canonical key ([`Scope::key`],
    /// `tenant|user|agent|source|session` with `~` for an absent part), which a Python
    /// `Memory` opens as its `session_id`. Listings return the scopes whose keys parse back
    /// (other keys are skipped), matched against the filter; a listing reads every key of
    /// the table that starts with the filter's tenant.
    ScopeKey,
}

/// The settings of a [`LlamaIndexHistoryStore`](super::LlamaIndexHistoryStore): LlamaIndex's table and how messages map to
/// it, and a [`SqlConfig`] for the pool, the timeouts and the token counter.
#[derive(Debug, Clone)]
pub struct LlamaIndexConfig {
    pub(super) table_name: String,
    pub(super) schema: Option<String>,
    pub(super) key_mapping: KeyMapping,
    pub(super) message_options: LiOptions,
    pub(super) sql: SqlConfig,
}

impl Default for LlamaIndexConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl LlamaIndexConfig {
    /// The defaults: table [`LlamaIndexHistoryStore::DEFAULT_TABLE`](super::LlamaIndexHistoryStore::DEFAULT_TABLE), no schema,
    /// [`KeyMapping::Strict`], [`LiOptions::minimal`] with ids, and [`SqlConfig::new`]'s pool,
    /// timeouts and token counter (tiktoken `o200k_base`).
    pub fn new() -> Self {
        Self {
            table_name: DEFAULT_TABLE.to_owned(),
            schema: None,
            key_mapping: KeyMapping::Strict,
            message_options: LiOptions::minimal().with_id(true),
            sql: SqlConfig::new(),
        }
    }

    /// Sets the table name (LlamaIndex's `table_name`): 1 to
    /// [`LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN`](super::LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN) characters of `[A-Za-z0-9_]`, not
    /// starting with a digit. Anything else fails when the store opens, with
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput).
    pub fn with_table_name(mut self, name: impl Into<String>) -> Self {
        self.table_name = name.into();
        self
    }

    /// Sets the PostgreSQL schema of the table (LlamaIndex's `db_schema`; created if missing).
    /// Same rules as the table name; ignored on SQLite, as LlamaIndex ignores it.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Sets which scopes the store accepts.
    pub fn with_key_mapping(mut self, mapping: KeyMapping) -> Self {
        self.key_mapping = mapping;
        self
    }

    /// Sets what appends record under `additional_kwargs.agent_memory` besides the message.
    /// The id is always recorded (appends are idempotent by id), whatever `options` say;
    /// [`LiOptions::default`] records creation times and metadata too, so our messages read
    /// back exactly as appended, at the cost of longer `additional_kwargs` on the Python side.
    pub fn with_message_options(mut self, options: LiOptions) -> Self {
        self.message_options = options.with_id(true);
        self
    }

    /// Sets the pool, timeouts and token counter, as for a [`SqlStore`](crate::SqlStore): the
    /// store opens its URL exactly as `SqlStore` does with `config` (pool size, acquire, busy
    /// and operation timeouts) and counts tokens with its counter, on every read (the table
    /// stores no counts). The table prefix does not apply (the table is
    /// [`with_table_name`](Self::with_table_name)); a default TTL cannot be honoured (the table has no
    /// expiry), and opening with one fails with [`Unsupported`](memory_core::ErrorKind::Unsupported).
    pub fn with_sql_config(mut self, config: SqlConfig) -> Self {
        self.sql = config;
        self
    }
}

pub(super) fn mysql_unsupported() -> Error {
    Error::unsupported(
        "LlamaIndex's SQLAlchemyChatStore cannot create its table on MySQL/MariaDB (VARCHAR \
         requires a length there); the LlamaIndex store supports SQLite and PostgreSQL",
    )
}

/// The scope whose canonical key ([`Scope::key`]) is `key`, if there is one.
pub(super) fn parse_scope_key(key: &str) -> Option<Scope> {
    Scope::from_key(key).ok().filter(|scope| scope.key() == key)
}

pub(super) fn validate_config(config: &LlamaIndexConfig) -> Result<()> {
    if config.sql.default_ttl.is_some() {
        return Err(Error::unsupported(
            "LlamaIndex's table has no expiry: the LlamaIndex store takes no default TTL",
        ));
    }
    ddl::validate_name("table name", &config.table_name, MAX_TABLE_NAME_LEN)?;
    if let Some(schema) = &config.schema {
        ddl::validate_name("schema name", schema, MAX_TABLE_NAME_LEN)?;
    }
    Ok(())
}

/// `url` in sqlx's form: SQLAlchemy's `dialect+driver://` URLs (what LlamaIndex is given)
/// translated, any other URL as it is. SQLAlchemy's `sqlite:///relative.db`,
/// `sqlite:////abs.db` and `sqlite://` (memory) differ from sqlx's, so they are translated
/// only with a `+driver`.
pub(super) fn sqlx_url(url: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Cow::Borrowed(url);
    };
    let Some((base, _driver)) = scheme.split_once('+') else {
        return Cow::Borrowed(url);
    };
    match base.to_ascii_lowercase().as_str() {
        "sqlite" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            let path = path.strip_prefix('/').unwrap_or(path);
            let (path, query) = path.split_once('?').unwrap_or((path, ""));
            Cow::Owned(match (path, query) {
                ("" | ":memory:", _) => "sqlite::memory:".to_owned(),
                (path, "") => format!("sqlite://{path}"),
                (path, query) => format!("sqlite://{path}?{query}"),
            })
        }
        "postgres" | "postgresql" => Cow::Owned(format!("postgres:{rest}")),
        "mysql" | "mariadb" => Cow::Owned(format!("mysql:{rest}")),
        _ => Cow::Borrowed(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DbUrl;
    use crate::dialect::Backend;

    #[test]
    fn sqlalchemy_urls_translate() {
        for (given, sqlx) in [
            ("sqlite+aiosqlite:///chat.db", "sqlite://chat.db"),
            ("sqlite+aiosqlite:////tmp/chat.db", "sqlite:///tmp/chat.db"),
            (
                "sqlite+aiosqlite:///chat.db?mode=ro",
                "sqlite://chat.db?mode=ro",
            ),
            ("sqlite+aiosqlite:///:memory:", "sqlite::memory:"),
            ("sqlite+aiosqlite://", "sqlite::memory:"),
            ("sqlite://x.db", "sqlite://x.db"),
            ("sqlite::memory:", "sqlite::memory:"),
            (
                "postgresql+asyncpg://u:p@h:5432/db",
                "postgres://u:p@h:5432/db",
            ),
            ("postgres://u:p@h/db", "postgres://u:p@h/db"),
            ("mysql+aiomysql://h/db", "mysql://h/db"),
            ("redis://h", "redis://h"),
            ("nothing", "nothing"),
        ] {
            assert_eq!(sqlx_url(given), sqlx, "{given}");
        }
        let url = DbUrl::parse(&sqlx_url("postgresql+asyncpg://u:hunter2@h/db")).unwrap();
        assert_eq!(url.backend, Backend::Postgres);
        assert!(!url.redacted.contains("hunter2"));
        #[cfg(feature = "sqlite")]
        assert!(
            DbUrl::parse(&sqlx_url("sqlite+aiosqlite://"))
                .unwrap()
                .is_sqlite_memory()
        );
    }

    #[test]
    fn scope_keys_parse_back() {
        let full = Scope::new(
            memory_core::TenantId::new("t-1").unwrap(),
            memory_core::SessionId::new("s:1").unwrap(),
        )
        .with_user("u@x")
        .unwrap()
        .with_agent("a/b")
        .unwrap()
        .with_source("src")
        .unwrap();
        for scope in [full, Scope::session("demo").unwrap()] {
            assert_eq!(parse_scope_key(&scope.key()), Some(scope));
        }
        for bad in [
            "demo",
            "a|b|c|d",
            "a|~|~|default|s|x",
            "|~|~|default|s",
            "a b|~|~|d|s",
        ] {
            assert_eq!(parse_scope_key(bad), None, "{bad}");
        }
    }
}
