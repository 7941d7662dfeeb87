//! [`SqlStore`]: opening a database (from a URL or the application's pool), migrating it, and
//! what the history and session stores share.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, Page, PageRequest, Result, Scope, ScopeFilter, TenantId, TokenCounter};

use crate::config::{DbUrl, SchemaMode, SqlConfig};
use crate::connect::{connect_pool, debug_url, redact_error, within_operation};
use crate::dialect::{Backend, Dialect};
use crate::driver::{Arg, Col, Db, Pool, Query};
use crate::prefix::TablePrefix;
use crate::rows::{scope_from_row, to_i64, ttl_ms};
use crate::schema::{self, SCHEMA_VERSION};
use crate::sql::{CursorSql, HistorySql, SessionSql};

/// A [`HistoryStore`](memory_core::HistoryStore) and [`SessionStore`](memory_core::SessionStore)
/// on SQLite, PostgreSQL or MySQL/MariaDB.
///
/// Both traits share one pool and one schema. Cloning is cheap and shares the pool.
///
/// Cursor reads ([`read_since`](memory_core::HistoryStore::read_since)) are one statement: the
/// thread row keeps an `epoch` (schema v5: drawn at random for a new row, set afresh by an
/// archive that moves a message and by an append that restarts an expired thread), and one
/// `SELECT` returns it with the thread's counts and the window's messages, above the cursor
/// when the cursor's epoch is the row's. Only a [`TokenBudget`](memory_core::Window::TokenBudget)
/// window read whole whose budget outlasts the newest 1,024 sequence numbers takes more: it
/// continues as the paged budgeted read, in one read-only snapshot.
///
/// Open one with [`SqlStore::connect`] or [`SqlStore::builder`] from a URL, or wrap the
/// application's sqlx pool with `from_sqlite_pool`, `from_postgres_pool` or `from_mysql_pool`.
/// Every constructor creates or upgrades the schema (see the crate docs), unless the
/// configuration says [`SchemaMode::RequireCurrent`] ([`SqlConfig::existing_only`],
/// [`SqlStoreBuilder::existing_only`]): then it creates and migrates nothing, and fails when the
/// tables are missing or at another version.
#[derive(Clone)]
pub struct SqlStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) prefix: TablePrefix,
    pub(crate) history: HistorySql,
    pub(crate) session: SessionSql,
    pub(crate) cursor: CursorSql,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) default_ttl: Option<Duration>,
    /// `default_ttl` in milliseconds, checked at open.
    pub(crate) default_ttl_ms: Option<i64>,
    pub(crate) operation_timeout: Duration,
    /// The URL the store was opened with, password masked; `None` for an application pool.
    url: Option<String>,
    memory: bool,
    schema_version: u32,
}

/// Builds a [`SqlStore`] from a URL; see [`SqlStore::builder`].
#[derive(Clone)]
pub struct SqlStoreBuilder {
    url: String,
    config: SqlConfig,
}

impl SqlStore {
    /// Opens the database at `url` with the default [`SqlConfig`], creating or upgrading the
    /// schema.
    ///
    /// URLs: `sqlite://path/to/memory.db` (created if missing; WAL mode), `sqlite::memory:` (a
    /// private in-memory database), `postgres://user:password@host:5432/db`,
    /// `mysql://user:password@host:3306/db` (also MariaDB).
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a malformed URL or one whose database's
    /// feature is not enabled ([`Unsupported`](memory_core::ErrorKind::Unsupported)),
    /// [`Unavailable`](memory_core::ErrorKind::Unavailable) when the server cannot be reached (within the
    /// acquire timeout, 5 s by default), [`Unsupported`](memory_core::ErrorKind::Unsupported) when a newer
    /// version of this crate migrated the database.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// A builder for a store at `url`.
    ///
    /// ```no_run
    /// # async fn demo() -> memory_core::Result<()> {
    /// use std::time::Duration;
    /// use memory_sql::SqlStore;
    ///
    /// let store = SqlStore::builder("postgres://app:secret@db.internal/app")
    ///     .table_prefix("chat_")
    ///     .default_ttl(Duration::from_secs(7 * 24 * 3600))
    ///     .max_connections(20)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: impl Into<String>) -> SqlStoreBuilder {
        SqlStoreBuilder {
            url: url.into(),
            config: SqlConfig::new(),
        }
    }

    /// A private in-memory SQLite store with the default configuration: the fastest way to a
    /// real SQL store in tests. Its data is gone when the last clone is dropped.
    #[cfg(feature = "sqlite")]
    pub async fn in_memory() -> Result<Self> {
        Self::connect("sqlite::memory:").await
    }

    /// Wraps the application's SQLite pool, creating or upgrading the schema. The store
    /// writes with `BEGIN IMMEDIATE`; give the pool a busy timeout (and WAL mode for a file)
    /// so writers queue instead of failing.
    ///
    /// # Errors
    /// As [`SqlStore::connect`].
    #[cfg(feature = "sqlite")]
    pub async fn from_sqlite_pool(pool: sqlx::SqlitePool, config: SqlConfig) -> Result<Self> {
        Self::open(Pool::Sqlite(pool), config, None, false).await
    }

    /// Wraps the application's PostgreSQL pool, creating or upgrading the schema.
    ///
    /// # Errors
    /// As [`SqlStore::connect`].
    #[cfg(feature = "postgres")]
    pub async fn from_postgres_pool(pool: sqlx::PgPool, config: SqlConfig) -> Result<Self> {
        Self::open(Pool::Postgres(pool), config, None, false).await
    }

    /// Wraps the application's MySQL or MariaDB pool, creating or upgrading the schema.
    ///
    /// # Errors
    /// As [`SqlStore::connect`].
    #[cfg(feature = "mysql")]
    pub async fn from_mysql_pool(pool: sqlx::MySqlPool, config: SqlConfig) -> Result<Self> {
        Self::open(Pool::MySql(pool), config, None, false).await
    }

    async fn open(
        pool: Pool,
        config: SqlConfig,
        url: Option<String>,
        memory: bool,
    ) -> Result<Self> {
        let backend = pool.backend();
        let prefix = TablePrefix::new(&config.table_prefix)?;
        let default_ttl_ms = config.default_ttl.map(ttl_ms).transpose()?;
        let dialect = Dialect::new(backend);
        let db = Db::new(pool, dialect);
        let schema_version = match config.schema_mode {
            SchemaMode::CreateOrMigrate => {
                let target = config.schema_version.unwrap_or(SCHEMA_VERSION);
                schema::migrate(&db, &prefix, target).await?
            }
            SchemaMode::RequireCurrent => crate::doctor::require_current(&db, &prefix).await?,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                history: HistorySql::new(dialect, &prefix),
                session: SessionSql::new(dialect, &prefix),
                cursor: CursorSql::new(dialect, &prefix),
                db,
                prefix,
                counter: config.token_counter,
                default_ttl: config.default_ttl,
                default_ttl_ms,
                operation_timeout: config.operation_timeout,
                url,
                memory,
                schema_version,
            }),
        })
    }

    /// Statements sent to the database since the store opened, counting `BEGIN` and `COMMIT`
    /// (not the pool's connection checks). Benchmarks divide it by the operations they ran
    /// to report round trips per operation.
    pub fn round_trips(&self) -> u64 {
        self.inner.db.round_trips()
    }

    /// Which database the store talks to.
    pub fn backend(&self) -> Backend {
        self.inner.db.dialect.backend
    }

    /// The table prefix.
    pub fn table_prefix(&self) -> &str {
        self.inner.prefix.as_str()
    }

    /// The schema version recorded in the database now.
    ///
    /// # Errors
    /// As any query.
    pub async fn schema_version(&self) -> Result<u32> {
        self.bounded(
            "schema_version",
            "read the schema version",
            schema::current_version(&self.inner.db, &self.inner.prefix),
        )
        .await
    }

    /// Closes the pool: waits for checked-out connections to come back and closes them. Later
    /// calls fail with [`Unavailable`](memory_core::ErrorKind::Unavailable).
    pub async fn close(&self) {
        self.inner.db.close().await;
    }
}

impl fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("SqlStore")
            .field("backend", &inner.db.dialect.backend)
            .field("url", &debug_url(inner.url.as_deref()))
            .field("in_memory", &inner.memory)
            .field("table_prefix", &inner.prefix)
            .field("schema_version", &inner.schema_version)
            .field("default_ttl", &inner.default_ttl)
            .field("operation_timeout", &inner.operation_timeout)
            .field("round_trips", &inner.db.round_trips())
            .finish()
    }
}

impl SqlStoreBuilder {
    /// Sets the table prefix (default `agent_memory_`; 1 to 32 characters of `[a-z0-9_]`,
    /// starting with a letter; anything else fails at [`connect`](Self::connect) with
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput)).
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config = self.config.with_table_prefix(prefix);
        self
    }

    /// Counts tokens with `counter` (default: tiktoken `o200k_base`).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.config = self.config.with_token_counter(counter);
        self
    }

    /// Gives every new thread this time to live.
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.config = self.config.with_default_ttl(ttl);
        self
    }

    /// Caps the pool (default 10 for servers, 4 for a SQLite file, 1 for in-memory SQLite).
    pub fn max_connections(mut self, max: u32) -> Self {
        self.config = self.config.with_max_connections(max);
        self
    }

    /// Bounds connecting and waiting for a pooled connection (default 5 s).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.with_acquire_timeout(timeout);
        self
    }

    /// How long a writer waits for another's lock (default 10 s); see
    /// [`SqlConfig::with_busy_timeout`].
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.with_busy_timeout(timeout);
        self
    }

    /// Bounds every operation (default 30 s); see [`SqlConfig::with_operation_timeout`].
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.with_operation_timeout(timeout);
        self
    }

    /// Opens only an existing database whose tables are at this build's schema version,
    /// creating nothing (no SQLite file, no table) and migrating nothing; see
    /// [`SchemaMode::RequireCurrent`].
    pub fn existing_only(mut self) -> Self {
        self.config = self.config.existing_only();
        self
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: SqlConfig) -> Self {
        self.config = config;
        self
    }

    /// Opens the database, creating or upgrading the schema (or, with
    /// [`existing_only`](Self::existing_only), checking that it exists and is current).
    ///
    /// # Errors
    /// As [`SqlStore::connect`]; with [`existing_only`](Self::existing_only) also
    /// [`NotFound`](memory_core::ErrorKind::NotFound) for a missing SQLite file or missing
    /// tables, [`Unsupported`](memory_core::ErrorKind::Unsupported) for tables at an older or
    /// newer schema version.
    pub async fn connect(self) -> Result<SqlStore> {
        let url = DbUrl::parse(&self.url)?;
        TablePrefix::new(&self.config.table_prefix)?;
        let opened = async {
            let opened = connect_pool(&url, &self.config).await?;
            let redacted = Some(url.redacted.clone());
            SqlStore::open(opened.pool, self.config, redacted, opened.memory).await
        };
        opened.await.map_err(|err| {
            redact_error(&url, err)
                .with_backend(url.backend.as_str())
                .with_operation("open")
        })
    }
}

impl fmt::Debug for SqlStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url =
            DbUrl::parse(&self.url).map_or_else(|_| "(invalid URL)".to_owned(), |u| u.redacted);
        f.debug_struct("SqlStoreBuilder")
            .field("url", &url)
            .field("config", &self.config)
            .finish()
    }
}

impl SqlStore {
    /// Runs `operation` of the store (`"append"`, `"load"`: the API's word) within the
    /// operation timeout; its errors name the operation and the backend. `ctx` says what was
    /// being done in the timeout's message.
    pub(crate) async fn bounded<T, F>(&self, operation: &'static str, ctx: &str, op: F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let limit = self.inner.operation_timeout;
        within_operation(limit, self.backend(), operation, ctx, op).await
    }

    /// `template` with `{prefix}` replaced by the table prefix, in the store's dialect.
    pub(crate) fn render(&self, template: &str) -> String {
        self.inner.db.dialect.render(&self.inner.prefix, template)
    }

    /// The schema version the tables were at (or were brought to) when the store opened.
    pub(crate) fn opened_schema_version(&self) -> u32 {
        self.inner.schema_version
    }

    /// Whether this is a private in-memory SQLite database (one process only).
    pub(crate) fn is_private_memory(&self) -> bool {
        self.inner.memory
    }
}

/// One page of scopes from `table`, keyed by `key_col`, matching `filter`, live, and meeting
/// `extra` (an SQL condition of ours, or empty); keyset paging on the key.
pub(crate) async fn list_page(
    store: &SqlStore,
    ctx: &str,
    table: &str,
    key_col: &str,
    extra: &str,
    filter: &ScopeFilter,
    page: PageRequest,
) -> Result<Page<Scope>> {
    let limit = page.limit.max(1);
    let mut sql = format!(
        "SELECT {key_col}, tenant, user_id, agent_id, source, session_id \
         FROM {{prefix}}{table} WHERE tenant = ?"
    );
    let mut args = vec![Arg::Text(filter.tenant.as_str())];
    if let Some(user) = &filter.user {
        sql.push_str(" AND user_id = ?");
        args.push(Arg::Text(user.as_str()));
    }
    if let Some(agent) = &filter.agent {
        sql.push_str(" AND agent_id = ?");
        args.push(Arg::Text(agent.as_str()));
    }
    if let Some(source) = &filter.source {
        sql.push_str(" AND source = ?");
        args.push(Arg::Text(source.as_str()));
    }
    if let Some(session) = &filter.session {
        sql.push_str(" AND session_id = ?");
        args.push(Arg::Text(session.as_str()));
    }
    let cursor = page.cursor.as_deref().map(ascii_cursor);
    if let Some(cursor) = &cursor {
        sql.push_str(&format!(" AND {key_col} > ?"));
        args.push(Arg::Text(cursor));
    }
    if !extra.is_empty() {
        sql.push_str(" AND ");
        sql.push_str(extra);
    }
    sql.push_str(&format!(
        " AND (expires_at IS NULL OR expires_at > {{now}}) ORDER BY {key_col} LIMIT ?"
    ));
    args.push(Arg::Int(to_i64(limit).saturating_add(1)));
    let inner = &store.inner;
    let q = Query::built(inner.db.dialect.render(&inner.prefix, &sql), true).args(args);
    let cols = [Col::Text; 6];
    let rows = inner.db.fetch(ctx, q, &cols).await?;
    let more = rows.len() > limit;
    let mut items = Vec::with_capacity(limit.min(rows.len()));
    let mut last_key = None;
    for mut row in rows.into_iter().take(limit) {
        last_key = Some(row.take_text(0)?);
        items.push(scope_from_row(&mut row, 1)?);
    }
    Ok(Page {
        items,
        next_cursor: if more { last_key } else { None },
    })
}

/// One page of `list_tenants` (history or sessions) with `statement` (see `list_tenants` in
/// `sql.rs`): one statement, keyset paging on the tenant. The cursor is the last tenant of the
/// previous page. A stored tenant that is not a valid id (written by hand) is a
/// [`Serialization`](memory_core::ErrorKind::Serialization) error, as in `list_threads`: an export must not
/// skip a tenant unseen.
pub(crate) async fn tenant_page(
    store: &SqlStore,
    ctx: &str,
    statement: &Arc<str>,
    page: PageRequest,
) -> Result<Page<TenantId>> {
    let limit = page.limit.max(1);
    let cursor = ascii_cursor(page.cursor.as_deref().unwrap_or(""));
    let q = Query::shared(statement)
        .text(&cursor)
        .int(to_i64(limit).saturating_add(1));
    let rows = store.inner.db.fetch(ctx, q, &[Col::Text]).await?;
    let more = rows.len() > limit;
    let mut items = Vec::with_capacity(limit.min(rows.len()));
    let mut last = None;
    for mut row in rows.into_iter().take(limit) {
        let tenant = row.take_text(0)?;
        let id = TenantId::new(tenant.as_str()).map_err(|err| {
            Error::serialization(format!(
                "{ctx}: a stored tenant is not a valid id: {}",
                err.message()
            ))
            .with_source(err)
        })?;
        items.push(id);
        last = Some(tenant);
    }
    Ok(Page {
        items,
        next_cursor: if more { last } else { None },
    })
}

/// A cursor every database can compare with the tenant and key columns and that selects the
/// same values, by byte order, as `cursor` itself: tenants and keys are ASCII without NUL or
/// DEL, so the text before a NUL selects the same ones, and before a non-ASCII character, that
/// text followed by DEL (0x7F, above every character of a tenant or key) does. MySQL refuses to
/// compare non-ASCII text with an `ascii_bin` column, and PostgreSQL's text holds no NUL.
fn ascii_cursor(cursor: &str) -> Cow<'_, str> {
    let cut = cursor
        .char_indices()
        .find(|&(_, c)| !c.is_ascii() || c == '\0');
    match cut {
        None => Cow::Borrowed(cursor),
        Some((at, c)) => {
            let before = cursor.get(..at).unwrap_or_default();
            if c == '\0' {
                Cow::Borrowed(before)
            } else {
                Cow::Owned(format!("{before}\u{7f}"))
            }
        }
    }
}
