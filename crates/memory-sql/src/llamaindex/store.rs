//! [`LlamaIndexHistoryStore`]: the type, how it opens (the table and its columns) and the
//! plumbing every operation shares (keys, timeouts, the key's write lock).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::scope::{DEFAULT_SOURCE, DEFAULT_TENANT};
use memory_core::{Error, MessageId, Result, Scope, TokenCounter};
use memory_interop::llamaindex::LiOptions;

use super::config::{
    self, KeyMapping, LlamaIndexConfig, mysql_unsupported, sqlx_url, validate_config,
};
use super::ddl;
use super::statements::Statements;
use crate::config::DbUrl;
use crate::connect::{connect_pool, debug_url, redact_error, within_operation};
use crate::dialect::{Backend, Dialect};
use crate::driver::{Arg, Col, Db, Pool, Query, Tx};

/// A [`HistoryStore`](memory_core::HistoryStore) on LlamaIndex's `SQLAlchemyChatStore` table (SQLite or PostgreSQL), shared
/// with Python LlamaIndex `Memory` objects.
///
/// # The table
/// LlamaIndex's `SQLAlchemyChatStore` (llama-index-core 0.14) keeps every message of every
/// session in one table, `llama_index_memory` by default:
///
/// | column | type | meaning |
/// | --- | --- | --- |
/// | `id` | `SERIAL` (PostgreSQL), `INTEGER` (SQLite), primary key | row number |
/// | `key` | `VARCHAR`, indexed | the session (`Memory(session_id=…)`) |
/// | `timestamp` | `BIGINT`, indexed | `time.time_ns()` at insert, `+ i` inside a batch |
/// | `role` | `VARCHAR` | the message's role |
/// | `status` | `VARCHAR`, indexed | `active`, or `archived` once flushed |
/// | `data` | `JSON` (text on SQLite) | `ChatMessage.model_dump(mode="json")` by `json.dumps` |
///
/// The store creates the table and its indexes (`ix_<table>_key`, `ix_<table>_status`,
/// `ix_<table>_timestamp`) when they are missing, with the statements SQLAlchemy runs for
/// LlamaIndex, and works on a table LlamaIndex created. The table name is configurable like
/// LlamaIndex's `table_name`, and so is the PostgreSQL schema (`db_schema`). MySQL/MariaDB are
/// not supported: SQLAlchemy cannot create this table there (`VARCHAR requires a length`).
///
/// # Sessions and scopes
/// The thread of a [`Scope`] is the rows whose `key` is the scope's **session id, verbatim**: a
/// Python `Memory.from_defaults(session_id="demo-session", …)` and a Rust scope
/// `Scope::session("demo-session")` read and write the same rows. The layout has no column for
/// the other parts of a scope (tenant, user, agent, source), so it cannot keep scopes that
/// differ only in them apart. [`KeyMapping`] says what the store does about it:
/// [`Strict`](KeyMapping::Strict) (the default) accepts only scopes made by
/// [`Scope::session`] (default tenant and source, no user or agent) and refuses the others with
/// `InvalidInput`; [`SessionIdOnly`](KeyMapping::SessionIdOnly) accepts every scope and lets
/// all scopes of one session id share one thread (isolation by session id only). Keys that are
/// not valid session ids (LlamaIndex accepts any string) cannot be addressed from Rust, and
/// [`list_threads`](memory_core::HistoryStore::list_threads) skips them.
///
/// # Messages
/// An append writes each message as LlamaIndex would: `role`, `status = 'active'` and
/// `data = python_json::dumps(to_llamaindex(message, options))`, where `options` are
/// [`LiOptions::minimal`] with the id recorded (see [`LlamaIndexConfig::with_message_options`]).
/// LlamaIndex's messages have no id, so ours is kept in `additional_kwargs`: Python sees
/// `{"role": "user", "additional_kwargs": {"agent_memory": {"id": "…"}}, "blocks": […]}`.
/// LlamaIndex keeps `additional_kwargs` as they are, counts them in its token budget (about 20
/// tokens per message) and, for a message with `tool_calls`, its OpenAI integration sends them
/// to the model service. The author name and parts that have no LlamaIndex block are recorded
/// there too; creation time and metadata are not (they read back as the row's `timestamp` and
/// empty) unless the options say so.
///
/// A row read back becomes [`from_llamaindex`](memory_interop::llamaindex::from_llamaindex) of its `data`. Its id is the recorded one, or,
/// for a row Python wrote (no recorded id), `llamaindex:<table>:<row id>`: unique per row even
/// when two messages are equal. Appending a message with such an id again is a retry of that
/// row. Its creation time is the recorded one, or the row's `timestamp` (the insert time).
/// A message read from a row and appended to another session or table (directly, or after a
/// stay in another store or a bundle) is written with the row's `data` byte for byte, blocks
/// we have no part for included, plus the record of the row's id and time: the copy reads
/// with them, a retry there is recognised by that id, and a session that repeats a message
/// (several rows with equal `data`) is copied row for row. A message whose id is the one
/// derived from its content (a LlamaIndex message read without a row, the first of its thread
/// with that content) records no id; a retry of it is recognised by equal `data` among the
/// rows that record no id (the first such row).
///
/// # Sequence numbers and windows
/// A message's sequence number is the position of its row among all rows of the key (active and
/// archived) ordered by `(timestamp, id)`, LlamaIndex's own order: 1 for the first, then
/// consecutive. Appends give their rows timestamps after every row of the key
/// (`max(now_ns, last timestamp + 1) + i`), so positions only grow while rows are only added.
/// They move when rows are deleted (`reset`/`set()` in Python, [`clear`](memory_core::HistoryStore::clear)
/// here: the thread starts again at 1) or when a Python writer whose clock is behind inserts
/// rows older than the newest.
///
/// Reads find the key's rows through the `key` index and number them with a window function:
/// the server walks the key's index entries (archived rows too, as LlamaIndex's own `get()`
/// does), and only the window's rows are sent and decoded. The layout stores no token counts:
/// reads count the tokens of the messages they return with the configured counter (once per
/// row and process: counts are cached by row id and data), so [`Window::TokenBudget`](memory_core::Window::TokenBudget) decodes
/// the newest messages page by page and [`count`](memory_core::HistoryStore::count) decodes every active
/// message (as LlamaIndex does after every `put`). LlamaIndex counts with its own tokenizer
/// (tiktoken `cl100k_base` by default, `additional_kwargs` included), so the two sides may
/// decide to flush at slightly different points; give the store
/// [`TiktokenCounter::cl100k`](memory_core::TiktokenCounter::cl100k) (through
/// [`LlamaIndexConfig::with_sql_config`]) to come closer.
///
/// # Writes
/// - `append` runs in one transaction that first takes a lock on the key (PostgreSQL:
///   `pg_advisory_xact_lock` on the table and key; SQLite: `BEGIN IMMEDIATE`), then looks the
///   batch's ids up among the key's rows (active and archived) and inserts only the new
///   messages, so a retried append inserts nothing twice, even under concurrent writers of this
///   store. Python writers take no such lock: on PostgreSQL one inserting into the same session
///   at the same moment can shift the positions an append reports.
/// - `archive(range)` is LlamaIndex's flush: `UPDATE … SET status = 'archived'` for the active
///   rows at those positions. Rows are never deleted by it.
/// - `clear` deletes the key's rows (LlamaIndex's `reset()`).
/// - TTL is [`Unsupported`](memory_core::ErrorKind::Unsupported) (the trait's default
///   `set_ttl` and `purge_expired`; the capabilities say `ttl: false`): the layout has no expiry.
/// - Cursor reads ([`read_since`](memory_core::HistoryStore::read_since)) are
///   [`Unsupported`](memory_core::ErrorKind::Unsupported) (the capabilities say
///   `cursor_reads: false`): an epoch would have to change whenever the thread changes
///   otherwise than by appends, and the Python side, which shares the table, archives and
///   resets threads without ever moving one, so a cursor could not tell its changes from
///   appends.
///
/// # Exports
/// [`read_page`](memory_core::HistoryStore::read_page) is one statement per page: the key's rows numbered
/// as every read numbers them (the `key` index), only the page's rows sent and decoded.
/// [`list_tenants`](memory_core::HistoryStore::list_tenants) is supported under [`KeyMapping::Strict`]
/// only (the capabilities say so): there every key is a session id of the default tenant, so
/// the listing is that tenant when the table holds such a key. Under
/// [`SessionIdOnly`](KeyMapping::SessionIdOnly) a key does not say which tenant wrote it;
/// under [`ScopeKey`](KeyMapping::ScopeKey) the tenants are in the keys, but the `key` column
/// sorts by the database's collation (on PostgreSQL not necessarily bytewise), so no index
/// range holds one tenant's keys and a page of tenants could only be found by reading every
/// key of the table; both return [`Unsupported`](memory_core::ErrorKind::Unsupported).
///
/// Cloning is cheap and shares the pool.
///
/// ```no_run
/// # async fn demo() -> memory_core::Result<()> {
/// use std::sync::Arc;
/// use memory_core::memory::{Memory, blocks::StaticMemoryBlock};
/// use memory_core::{ChatMessage, InMemorySessionStore, Scope};
/// use memory_sql::LlamaIndexHistoryStore;
///
/// // What Python opens as `async_database_uri="sqlite+aiosqlite:///chat.db"`.
/// let history = LlamaIndexHistoryStore::connect("sqlite://chat.db").await?;
/// let memory = Memory::builder(
///     Scope::session("demo-session")?,
///     Arc::new(history),
///     Arc::new(InMemorySessionStore::new()),
/// )
/// .block(Arc::new(StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.")?))
/// .build()?;
/// memory.put(ChatMessage::user("Which service paged me last night?")).await?;
/// let for_the_model = memory.get(&[]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LlamaIndexHistoryStore {
    pub(super) inner: Arc<Inner>,
}

/// What the clones of a store share.
pub(super) struct Inner {
    pub(super) db: Db,
    pub(super) table: String,
    pub(super) schema: Option<String>,
    pub(super) sql: Statements,
    pub(super) key_mapping: KeyMapping,
    pub(super) counter: Arc<dyn TokenCounter>,
    pub(super) options: LiOptions,
    pub(super) operation_timeout: Duration,
    /// The URL, password masked; `None` for an application's pool.
    pub(super) url: Option<String>,
    pub(super) private_memory: bool,
    /// Token counts of rows already read, by row id and a hash of the data: the table keeps
    /// no counts, and a row's data never changes (LlamaIndex updates only `status`).
    pub(super) tokens: Mutex<HashMap<(i64, u64), u32>>,
}

impl fmt::Debug for LlamaIndexHistoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("LlamaIndexHistoryStore")
            .field("backend", &inner.db.dialect.backend)
            .field("url", &debug_url(inner.url.as_deref()))
            .field("table", &inner.table)
            .field("schema", &inner.schema)
            .field("key_mapping", &inner.key_mapping)
            .field("message_options", &inner.options)
            .field("operation_timeout", &inner.operation_timeout)
            .finish()
    }
}

impl LlamaIndexHistoryStore {
    /// LlamaIndex's default table name (`Memory.from_defaults` uses it).
    pub const DEFAULT_TABLE: &'static str = config::DEFAULT_TABLE;

    /// The longest table or schema name accepted (PostgreSQL's identifier limit).
    pub const MAX_TABLE_NAME_LEN: usize = config::MAX_TABLE_NAME_LEN;

    /// Opens the database at `url` with the default [`LlamaIndexConfig`], creating the table
    /// and its indexes if they are missing.
    ///
    /// URLs: `sqlite://path/to/chat.db` (created if missing; WAL mode), `sqlite::memory:`,
    /// `postgres://user:password@host:5432/db`, and the SQLAlchemy URLs LlamaIndex is given:
    /// `sqlite+aiosqlite:///chat.db` (relative), `sqlite+aiosqlite:////abs/chat.db`,
    /// `sqlite+aiosqlite:///:memory:`, `postgresql+asyncpg://…` (any `+driver`).
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a malformed URL, an invalid table or
    /// schema name, or an existing table that lacks LlamaIndex's columns;
    /// [`Unsupported`](memory_core::ErrorKind::Unsupported) for MySQL/MariaDB or a database whose feature
    /// is not enabled; [`Unavailable`](memory_core::ErrorKind::Unavailable) when the server cannot be
    /// reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, LlamaIndexConfig::new()).await
    }

    /// Opens the database at `url` with `config` (see [`connect`](Self::connect)).
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, config: LlamaIndexConfig) -> Result<Self> {
        validate_config(&config)?;
        let url = DbUrl::parse(&sqlx_url(url))?;
        if url.backend == Backend::MySql {
            return Err(mysql_unsupported());
        }
        let opened = async {
            let opened = connect_pool(&url, &config.sql).await?;
            let redacted = Some(url.redacted.clone());
            Self::open(opened.pool, config, redacted, opened.memory).await
        };
        opened.await.map_err(|err| redact_error(&url, err))
    }

    /// Wraps the application's SQLite pool, creating the table if it is missing. Appends use
    /// `BEGIN IMMEDIATE`: give the pool a busy timeout so writers (ours and Python's) queue
    /// instead of failing.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    #[cfg(feature = "sqlite")]
    pub async fn from_sqlite_pool(
        pool: sqlx::SqlitePool,
        config: LlamaIndexConfig,
    ) -> Result<Self> {
        validate_config(&config)?;
        Self::open(Pool::Sqlite(pool), config, None, false).await
    }

    /// Wraps the application's PostgreSQL pool, creating the schema, table and indexes if they
    /// are missing.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    #[cfg(feature = "postgres")]
    pub async fn from_postgres_pool(pool: sqlx::PgPool, config: LlamaIndexConfig) -> Result<Self> {
        validate_config(&config)?;
        Self::open(Pool::Postgres(pool), config, None, false).await
    }

    async fn open(
        pool: Pool,
        config: LlamaIndexConfig,
        url: Option<String>,
        private_memory: bool,
    ) -> Result<Self> {
        let backend = pool.backend();
        let schema = match backend {
            Backend::Postgres => config.schema.clone(),
            _ => None,
        };
        let table_sql = match &schema {
            Some(schema) => format!(
                "{}.{}",
                ddl::quoted(schema),
                ddl::quoted(&config.table_name)
            ),
            None => ddl::quoted(&config.table_name),
        };
        let store = Self {
            inner: Arc::new(Inner {
                db: Db::new(pool, Dialect::new(backend)),
                sql: Statements::new(backend, table_sql),
                table: config.table_name,
                schema,
                key_mapping: config.key_mapping,
                counter: config.sql.token_counter,
                options: config.message_options,
                operation_timeout: config.sql.operation_timeout,
                url,
                private_memory,
                tokens: Mutex::new(HashMap::new()),
            }),
        };
        store
            .bounded("open", "create the LlamaIndex table", store.create_table())
            .await?;
        Ok(store)
    }

    /// Which database the store talks to.
    pub fn backend(&self) -> Backend {
        self.inner.db.dialect.backend
    }

    /// The table name.
    pub fn table_name(&self) -> &str {
        &self.inner.table
    }

    /// The PostgreSQL schema of the table, if one was set.
    pub fn schema(&self) -> Option<&str> {
        self.inner.schema.as_deref()
    }

    /// The value of the `key` column for `scope`: its session id, or its canonical key with
    /// [`KeyMapping::ScopeKey`].
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when the [`KeyMapping`] refuses the scope.
    pub fn key_for<'s>(&self, scope: &'s Scope) -> Result<Cow<'s, str>> {
        if self.inner.key_mapping == KeyMapping::ScopeKey {
            return Ok(Cow::Owned(scope.key()));
        }
        if self.inner.key_mapping == KeyMapping::Strict {
            let plain = scope.tenant().as_str() == DEFAULT_TENANT
                && scope.user().is_none()
                && scope.agent().is_none()
                && scope.source().as_str() == DEFAULT_SOURCE;
            if !plain {
                return Err(Error::invalid_input(format!(
                    "scope {scope} cannot be kept apart in LlamaIndex's table, which keys a thread \
                     by session id alone: use Scope::session(..) (default tenant and source, no \
                     user or agent), KeyMapping::SessionIdOnly to share the thread of the \
                     session id, or KeyMapping::ScopeKey to key threads by the whole scope"
                )));
            }
        }
        Ok(Cow::Borrowed(scope.session_id().as_str()))
    }

    /// The message id given to a row that records none: `llamaindex:<table>:<row id>`.
    pub fn row_message_id(&self, row_id: i64) -> Option<MessageId> {
        MessageId::new(format!("llamaindex:{}:{row_id}", self.inner.table)).ok()
    }

    /// Statements sent to the database since the store opened (`BEGIN` and `COMMIT` count).
    pub fn round_trips(&self) -> u64 {
        self.inner.db.round_trips()
    }

    /// Closes the pool; later calls fail with [`Unavailable`](memory_core::ErrorKind::Unavailable).
    pub async fn close(&self) {
        self.inner.db.close().await;
    }

    /// The row id that `id` names, if it is one of this table's row ids.
    pub(super) fn row_of(&self, id: &str) -> Option<i64> {
        let rest = id
            .strip_prefix("llamaindex:")?
            .strip_prefix(self.inner.table.as_str())?
            .strip_prefix(':')?;
        let row: i64 = rest.parse().ok()?;
        (row.to_string() == rest).then_some(row)
    }

    /// Runs `operation` (the `HistoryStore` method's name, or `open`) within the operation
    /// timeout; its errors name the operation and the backend, as `SqlStore`'s do. `ctx` says
    /// what was being done in the timeout's message.
    pub(super) async fn bounded<T, F>(&self, operation: &'static str, ctx: &str, op: F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let limit = self.inner.operation_timeout;
        within_operation(limit, self.backend(), operation, ctx, op).await
    }

    pub(super) fn query(&self, sql: &Arc<str>) -> Query<'static> {
        Query::shared(sql)
    }

    /// Creates the schema, table and indexes if missing, then checks the table's columns.
    async fn create_table(&self) -> Result<()> {
        let ctx = "create the LlamaIndex table";
        let inner = &self.inner;
        let backend = self.backend();
        let statements = ddl::create_statements(
            backend,
            &inner.table,
            &inner.sql.table,
            inner.schema.as_deref(),
        );
        let mut tx = inner.db.begin(ctx).await?;
        if backend == Backend::Postgres {
            // Two processes creating one table at once would collide in the catalogue.
            let q = self
                .query(&inner.sql.lock)
                .text("agent_memory.llamaindex.ddl")
                .text(&inner.sql.table);
            tx.execute(ctx, q).await?;
        }
        // The schema and table first; the indexes only once the table is known to be
        // LlamaIndex's (they name its columns).
        let index_count = 3;
        let split = statements.len().saturating_sub(index_count);
        let mut statements = statements.into_iter();
        for statement in statements.by_ref().take(split) {
            tx.execute(ctx, Query::built(statement, false)).await?;
        }
        let columns = self.columns(&mut tx).await?;
        let missing: Vec<&str> = ["id", "key", "timestamp", "role", "status", "data"]
            .into_iter()
            .filter(|c| !columns.contains(*c))
            .collect();
        if !missing.is_empty() {
            tx.rollback(ctx).await?;
            return Err(Error::invalid_input(format!(
                "table {} exists but is not LlamaIndex's SQLAlchemyChatStore table: it has no \
                 column {}",
                inner.sql.table,
                missing.join(", ")
            )));
        }
        for statement in statements {
            tx.execute(ctx, Query::built(statement, false)).await?;
        }
        tx.commit(ctx).await?;
        Ok(())
    }

    async fn columns(&self, tx: &mut Tx<'_>) -> Result<HashSet<String>> {
        let ctx = "read the LlamaIndex table's columns";
        let inner = &self.inner;
        let q = match self.backend() {
            Backend::Postgres => Query::built(
                "SELECT CAST(column_name AS TEXT) FROM information_schema.columns \
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2"
                    .to_owned(),
                false,
            )
            .arg(Arg::OptText(inner.schema.as_deref()))
            .text(&inner.table),
            _ => Query::built("SELECT name FROM pragma_table_info(?)".to_owned(), false)
                .text(&inner.table),
        };
        let rows = tx.fetch(ctx, q, &[Col::Text]).await?;
        rows.into_iter()
            .map(|mut r| r.take_text(0).map(|c| c.to_ascii_lowercase()))
            .collect()
    }

    /// Takes the key's write lock in `tx` (PostgreSQL; a SQLite write transaction already
    /// holds the database's).
    pub(super) async fn lock_key(&self, tx: &mut Tx<'_>, ctx: &str, key: &str) -> Result<()> {
        if self.backend() != Backend::Postgres {
            return Ok(());
        }
        let inner = &self.inner;
        let q = self.query(&inner.sql.lock).text(&inner.sql.table).text(key);
        tx.execute(ctx, q).await.map(drop)
    }
}
