//! [`LlamaIndexHistoryStore`]: a [`HistoryStore`] over LlamaIndex's own table, so a Rust
//! [`Memory`](memory_core::Memory) and a Python LlamaIndex `Memory` can continue each other's
//! sessions in one SQLite file or one PostgreSQL database.
// With neither SQLite nor PostgreSQL compiled in, the store can open nothing.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports, unused_variables)
)]

mod ddl;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use memory_core::history::skip_undecodable;
use memory_core::scope::{DEFAULT_SOURCE, DEFAULT_TENANT};
use memory_core::{
    AppendOutcome, ChatMessage, Error, HistoryCapabilities, HistoryStore, MAX_READ_PAGE, MessageId,
    Page, PageRequest, PreparedBatch, Repeats, Result, Scope, ScopeFilter, StoredMessage, TenantId,
    ThreadCount, TokenCounter, Window,
};
use memory_interop::llamaindex::{LiOptions, from_llamaindex, to_llamaindex};
use memory_interop::python_json::dumps;
use memory_interop::{AGENT_MEMORY_KEY, UNKNOWN_TIME};
use serde_json::Value;

use crate::config::{DbUrl, SqlConfig};
use crate::connect::{connect_pool, redact_error, within};
use crate::dialect::{Backend, Dialect};
use crate::driver::{Arg, Col, Db, Pool, Query, Row, Tx};
use crate::rows::to_i64;

const ACTIVE: &str = "active";
/// Rows a lookup or an insert statement carries at most.
const ROWS_PER_STATEMENT: usize = 500;
/// Bytes of `data` one insert statement carries at most (one larger message goes alone).
const BYTES_PER_STATEMENT: usize = 4 * 1024 * 1024;
/// The columns of [`NUMBERED_ROWS`].
const ROW_COLS: [Col; 5] = [Col::Int, Col::Int, Col::Text, Col::Text, Col::Int];
/// Rows whose token counts are kept in memory at most (then the cache starts again).
const TOKEN_CACHE_ROWS: usize = 100_000;
/// The first and the largest page of a token-budget read.
const BUDGET_PAGE: (i64, i64) = (32, 1024);

/// Which scopes a [`LlamaIndexHistoryStore`] accepts, given that LlamaIndex's table keys a
/// thread by one string (see [`LlamaIndexHistoryStore`]).
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

/// The settings of a [`LlamaIndexHistoryStore`]: LlamaIndex's table and how messages map to
/// it, and a [`SqlConfig`] for the pool, the timeouts and the token counter.
#[derive(Debug, Clone)]
pub struct LlamaIndexConfig {
    table_name: String,
    schema: Option<String>,
    key_mapping: KeyMapping,
    message_options: LiOptions,
    sql: SqlConfig,
}

impl Default for LlamaIndexConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl LlamaIndexConfig {
    /// The defaults: table [`LlamaIndexHistoryStore::DEFAULT_TABLE`], no schema,
    /// [`KeyMapping::Strict`], [`LiOptions::minimal`] with ids, and [`SqlConfig::new`]'s pool,
    /// timeouts and token counter (tiktoken `o200k_base`).
    pub fn new() -> Self {
        Self {
            table_name: LlamaIndexHistoryStore::DEFAULT_TABLE.to_owned(),
            schema: None,
            key_mapping: KeyMapping::Strict,
            message_options: LiOptions::minimal().with_id(true),
            sql: SqlConfig::new(),
        }
    }

    /// Sets the table name (LlamaIndex's `table_name`): 1 to
    /// [`LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN`] characters of `[A-Za-z0-9_]`, not
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

/// A [`HistoryStore`] on LlamaIndex's `SQLAlchemyChatStore` table (SQLite or PostgreSQL), shared
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
/// [`list_threads`](HistoryStore::list_threads) skips them.
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
/// A row read back becomes [`from_llamaindex`] of its `data`. Its id is the recorded one, or,
/// for a row Python wrote (no recorded id), `llamaindex:<table>:<row id>`: unique per row even
/// when two messages are equal. Appending a message with such an id again is a retry of that
/// row. Its creation time is the recorded one, or the row's `timestamp` (the insert time).
/// Such a row id (of any table) is never recorded: a message read from a row and appended to
/// another session or table (directly, or after a stay in another store) is written with the
/// row's `data` byte for byte, blocks we have no part for included, and a retry there is
/// recognised by equal `data` among the rows that record no id.
///
/// # Sequence numbers and windows
/// A message's sequence number is the position of its row among all rows of the key (active and
/// archived) ordered by `(timestamp, id)`, LlamaIndex's own order: 1 for the first, then
/// consecutive. Appends give their rows timestamps after every row of the key
/// (`max(now_ns, last timestamp + 1) + i`), so positions only grow while rows are only added.
/// They move when rows are deleted (`reset`/`set()` in Python, [`clear`](HistoryStore::clear)
/// here: the thread starts again at 1) or when a Python writer whose clock is behind inserts
/// rows older than the newest.
///
/// Reads find the key's rows through the `key` index and number them with a window function:
/// the server walks the key's index entries (archived rows too, as LlamaIndex's own `get()`
/// does), and only the window's rows are sent and decoded. The layout stores no token counts:
/// reads count the tokens of the messages they return with the configured counter (once per
/// row and process: counts are cached by row id and data), so [`Window::TokenBudget`] decodes
/// the newest messages page by page and [`count`](HistoryStore::count) decodes every active
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
/// - Cursor reads ([`read_since`](HistoryStore::read_since)) are
///   [`Unsupported`](memory_core::ErrorKind::Unsupported) (the capabilities say
///   `cursor_reads: false`): an epoch would have to change whenever the thread changes
///   otherwise than by appends, and the Python side, which shares the table, archives and
///   resets threads without ever moving one, so a cursor could not tell its changes from
///   appends.
///
/// # Exports
/// [`read_page`](HistoryStore::read_page) is one statement per page: the key's rows numbered
/// as every read numbers them (the `key` index), only the page's rows sent and decoded.
/// [`list_tenants`](HistoryStore::list_tenants) is supported under [`KeyMapping::Strict`]
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
    inner: Arc<Inner>,
}

struct Inner {
    db: Db,
    table: String,
    schema: Option<String>,
    sql: Statements,
    key_mapping: KeyMapping,
    counter: Arc<dyn TokenCounter>,
    options: LiOptions,
    operation_timeout: Duration,
    /// The URL, password masked; `None` for an application's pool.
    url: Option<String>,
    private_memory: bool,
    /// Token counts of rows already read, by row id and a hash of the data: the table keeps
    /// no counts, and a row's data never changes (LlamaIndex updates only `status`).
    tokens: Mutex<HashMap<(i64, u64), u32>>,
}

/// The statements of the store, rendered once for its backend and table.
struct Statements {
    /// `?` → `$n` on PostgreSQL.
    postgres: bool,
    /// The table as statements name it.
    table: String,
    /// Rows `(seq, row id, status, data, timestamp)` of one key: active ones, in order.
    read_all: Arc<str>,
    /// … the last `n` active ones, newest first.
    read_last: Arc<str>,
    /// … the active ones after a position.
    read_after: Arc<str>,
    /// … all of them.
    read_everything: Arc<str>,
    /// … all of them after a position, `n` at most.
    read_page: Arc<str>,
    /// … the active ones before a position, newest first, `n` at most.
    read_before_desc: Arc<str>,
    /// `(rows, active rows)` of one key.
    counts: Arc<str>,
    /// `(rows, last timestamp)` of one key.
    stats: Arc<str>,
    /// Archives the active rows of one key at positions `first..=last`.
    archive: Arc<str>,
    /// Deletes the rows of one key.
    clear: Arc<str>,
    /// Distinct keys after a cursor.
    list: Arc<str>,
    /// … that start with a prefix of `n` characters.
    list_prefixed: Arc<str>,
    /// PostgreSQL's transaction-scoped advisory lock on two names.
    lock: Arc<str>,
}

/// The rows of one key numbered in LlamaIndex's order, with the columns reads need.
const NUMBERED_ROWS: &str = "SELECT w.seq, w.rid, w.status, w.data, w.ts FROM (SELECT \
     ROW_NUMBER() OVER (ORDER BY \"timestamp\", id) AS seq, CAST(id AS BIGINT) AS rid, status, \
     CAST(data AS TEXT) AS data, \"timestamp\" AS ts FROM {t} WHERE \"key\" = ?) AS w";

impl Statements {
    fn new(backend: Backend, table: String) -> Self {
        let postgres = backend == Backend::Postgres;
        let r = |template: &str| -> Arc<str> { Arc::from(render(postgres, &table, template)) };
        let rows = |rest: &str| r(&format!("{NUMBERED_ROWS} {rest}"));
        Self {
            read_all: rows("WHERE w.status = 'active' ORDER BY w.seq"),
            read_last: rows("WHERE w.status = 'active' ORDER BY w.seq DESC LIMIT ?"),
            read_after: rows("WHERE w.status = 'active' AND w.seq > ? ORDER BY w.seq"),
            read_everything: rows("ORDER BY w.seq"),
            read_page: rows("WHERE w.seq > ? ORDER BY w.seq LIMIT ?"),
            read_before_desc: rows(
                "WHERE w.status = 'active' AND w.seq < ? ORDER BY w.seq DESC LIMIT ?",
            ),
            counts: r(
                "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END), 0) \
                 FROM {t} WHERE \"key\" = ?",
            ),
            stats: r("SELECT COUNT(*), MAX(\"timestamp\") FROM {t} WHERE \"key\" = ?"),
            archive: r(
                "UPDATE {t} SET status = 'archived' WHERE id IN (SELECT w.rid FROM (SELECT \
                 ROW_NUMBER() OVER (ORDER BY \"timestamp\", id) AS seq, id AS rid, status FROM \
                 {t} WHERE \"key\" = ?) AS w WHERE w.status = 'active' AND w.seq >= ? AND \
                 w.seq <= ?)",
            ),
            clear: r("DELETE FROM {t} WHERE \"key\" = ?"),
            list: r("SELECT DISTINCT \"key\" FROM {t} WHERE \"key\" > ? ORDER BY \"key\" LIMIT ?"),
            list_prefixed: r("SELECT DISTINCT \"key\" FROM {t} WHERE \"key\" > ? \
                 AND substr(\"key\", 1, CAST(? AS INTEGER)) = ? ORDER BY \"key\" LIMIT ?"),
            lock: r("SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))"),
            postgres,
            table,
        }
    }

    /// Renders a statement built for one call.
    fn render(&self, template: &str) -> String {
        render(self.postgres, &self.table, template)
    }

    /// The recorded message id of a row, or `NULL`.
    fn recorded_id(&self) -> String {
        if self.postgres {
            format!("(data -> 'additional_kwargs' -> '{AGENT_MEMORY_KEY}' ->> 'id')")
        } else {
            format!(
                "(CASE WHEN json_valid(data) THEN \
                 json_extract(data, '$.additional_kwargs.{AGENT_MEMORY_KEY}.id') END)"
            )
        }
    }

    /// The placeholder of a `data` value.
    fn data_param(&self) -> &'static str {
        if self.postgres {
            "CAST(? AS json)"
        } else {
            "?"
        }
    }
}

impl fmt::Debug for LlamaIndexHistoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("LlamaIndexHistoryStore")
            .field("backend", &inner.db.dialect.backend)
            .field(
                "url",
                &inner.url.as_deref().unwrap_or("(application's pool)"),
            )
            .field("table", &inner.table)
            .field("schema", &inner.schema)
            .field("key_mapping", &inner.key_mapping)
            .field("message_options", &inner.options)
            .field("operation_timeout", &inner.operation_timeout)
            .finish()
    }
}

/// A message of a batch, ready to insert.
struct Prepared<'a> {
    message: &'a ChatMessage,
    role: String,
    data: String,
    /// Whether `data` records the id (else the id is the one derived from the content, and a
    /// retry is recognised by equal `data` among rows without a recorded id).
    recorded: bool,
    /// The row this id names, if it is one of our `llamaindex:<table>:<row>` ids.
    row: Option<i64>,
}

impl LlamaIndexHistoryStore {
    /// LlamaIndex's default table name (`Memory.from_defaults` uses it).
    pub const DEFAULT_TABLE: &'static str = "llama_index_memory";

    /// The longest table or schema name accepted (PostgreSQL's identifier limit).
    pub const MAX_TABLE_NAME_LEN: usize = 63;

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
            Self::open(opened.pool, url.backend, config, redacted, opened.memory).await
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
        Self::open(Pool::Sqlite(pool), Backend::Sqlite, config, None, false).await
    }

    /// Wraps the application's PostgreSQL pool, creating the schema, table and indexes if they
    /// are missing.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    #[cfg(feature = "postgres")]
    pub async fn from_postgres_pool(pool: sqlx::PgPool, config: LlamaIndexConfig) -> Result<Self> {
        validate_config(&config)?;
        Self::open(Pool::Postgres(pool), Backend::Postgres, config, None, false).await
    }

    async fn open(
        pool: Pool,
        backend: Backend,
        config: LlamaIndexConfig,
        url: Option<String>,
        private_memory: bool,
    ) -> Result<Self> {
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
    fn row_of(&self, id: &str) -> Option<i64> {
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
    async fn bounded<T>(
        &self,
        operation: &'static str,
        ctx: &str,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        within(self.inner.operation_timeout, ctx, op)
            .await
            .map_err(|err| {
                err.with_backend(self.backend().as_str())
                    .with_operation(operation)
            })
    }

    fn query(&self, sql: &Arc<str>) -> Query<'static> {
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
    async fn lock_key(&self, tx: &mut Tx<'_>, ctx: &str, key: &str) -> Result<()> {
        if self.backend() != Backend::Postgres {
            return Ok(());
        }
        let inner = &self.inner;
        let q = self.query(&inner.sql.lock).text(&inner.sql.table).text(key);
        tx.execute(ctx, q).await.map(drop)
    }

    /// Decodes a row `(seq, row id, status, data, timestamp)` and counts its tokens.
    fn decode(&self, mut row: Row) -> Result<StoredMessage> {
        let seq = row.uint(0)?;
        let row_id = row.int(1)?;
        let status = row.take_text(2)?;
        let data = row.take_text(3)?;
        let corrupt = |what: String| {
            Error::serialization(format!(
                "row {row_id} of LlamaIndex table {}: {what}",
                self.inner.table
            ))
        };
        let value: Value =
            serde_json::from_str(&data).map_err(|e| corrupt(format!("data is not JSON: {e}")))?;
        let mut message =
            from_llamaindex(&value).map_err(|e| corrupt(e.message().to_owned()).with_source(e))?;
        if recorded_id(&value).is_none()
            && let Some(id) = self.row_message_id(row_id)
        {
            message.id = id;
        }
        if message.created_at == UNKNOWN_TIME
            && let Ok(ns) = u64::try_from(row.int(4)?)
        {
            message.created_at = UNIX_EPOCH
                .checked_add(Duration::from_nanos(ns))
                .unwrap_or(UNIX_EPOCH)
                .into();
        }
        let tokens = self.tokens(row_id, &data, &message);
        Ok(StoredMessage {
            seq,
            tokens,
            archived: status != ACTIVE,
            message: message.into(),
        })
    }

    /// [`decode`](Self::decode), or `None` with a warning naming the session and the row's
    /// position for a row that cannot be decoded: the read leaves it out (the `HistoryStore`
    /// contract), so one bad row never makes the session unreadable.
    fn decode_or_skip(&self, key: &str, row: Row) -> Option<StoredMessage> {
        let seq = row.uint(0).unwrap_or_default();
        self.decode(row)
            .inspect_err(|err| skip_undecodable(&key, seq, err))
            .ok()
    }

    /// The token count of a row's message, counted once per row and data.
    fn tokens(&self, row_id: i64, data: &str, message: &ChatMessage) -> u32 {
        let mut hasher = std::hash::DefaultHasher::new();
        data.hash(&mut hasher);
        let key = (row_id, hasher.finish());
        if let Some(&n) = self
            .inner
            .tokens
            .lock()
            .ok()
            .and_then(|c| c.get(&key).copied())
            .as_ref()
        {
            return n;
        }
        let n = self.inner.counter.count_message(message);
        if let Ok(mut cache) = self.inner.tokens.lock() {
            if cache.len() >= TOKEN_CACHE_ROWS {
                cache.clear();
            }
            cache.insert(key, n);
        }
        n
    }

    async fn read_rows(&self, key: &str, window: Window) -> Result<Vec<StoredMessage>> {
        let ctx = "read a LlamaIndex session";
        let inner = &self.inner;
        let cols = ROW_COLS;
        let sql = &inner.sql;
        let (q, reverse) = match window {
            Window::All => (self.query(&sql.read_all).text(key), false),
            Window::Everything => (self.query(&sql.read_everything).text(key), false),
            Window::After(seq) => (
                self.query(&sql.read_after).text(key).int(to_i64(seq)),
                false,
            ),
            Window::Last(0) => return Ok(Vec::new()),
            Window::Last(n) => (self.query(&sql.read_last).text(key).int(to_i64(n)), true),
            Window::TokenBudget(budget) => return self.read_budget(key, budget).await,
            other => {
                return Err(Error::unsupported(format!(
                    "window {other:?} is not supported by the LlamaIndex store"
                )));
            }
        };
        let rows = inner.db.fetch(ctx, q, &cols).await?;
        let mut out: Vec<StoredMessage> = rows
            .into_iter()
            .filter_map(|r| self.decode_or_skip(key, r))
            .collect();
        if reverse {
            out.reverse();
        }
        Ok(out)
    }

    /// A page of [`read_page`](HistoryStore::read_page): one statement (the key's rows
    /// numbered as every read numbers them, those of the page sent). Only when every row of a
    /// page cannot be decoded does it read the next one (so an empty page always means the
    /// end of the session).
    async fn read_page_rows(
        &self,
        key: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let ctx = "read a page of a LlamaIndex session";
        let limit = to_i64(limit.clamp(1, MAX_READ_PAGE));
        let mut after = to_i64(after);
        loop {
            let q = self
                .query(&self.inner.sql.read_page)
                .text(key)
                .int(after)
                .int(limit);
            let rows = self.inner.db.fetch(ctx, q, &ROW_COLS).await?;
            let Some(last) = rows.last() else {
                return Ok(Vec::new());
            };
            let last = last.int(0)?;
            let full = to_i64(rows.len()) == limit;
            let page: Vec<StoredMessage> = rows
                .into_iter()
                .filter_map(|r| self.decode_or_skip(key, r))
                .collect();
            if !page.is_empty() || !full {
                return Ok(page);
            }
            after = last;
        }
    }

    /// The newest active messages within `budget` tokens, read newest first a page at a time
    /// in one snapshot.
    async fn read_budget(&self, key: &str, budget: u64) -> Result<Vec<StoredMessage>> {
        let ctx = "read a LlamaIndex session within a token budget";
        let inner = &self.inner;
        let cols = ROW_COLS;
        let mut tx = inner.db.begin_read(ctx).await?;
        let mut out = Vec::new();
        let mut used = 0u64;
        let mut before = i64::MAX;
        let mut page = BUDGET_PAGE.0;
        'pages: loop {
            let q = self
                .query(&inner.sql.read_before_desc)
                .text(key)
                .int(before)
                .int(page);
            let rows = tx.fetch(ctx, q, &cols).await?;
            let full = rows.len() as i64 == page;
            for row in rows {
                let seq = row.int(0)?;
                let Some(message) = self.decode_or_skip(key, row) else {
                    before = seq;
                    continue;
                };
                let total = used.saturating_add(u64::from(message.tokens));
                if total > budget {
                    break 'pages;
                }
                used = total;
                before = to_i64(message.seq);
                out.push(message);
            }
            if !full {
                break;
            }
            page = page.saturating_mul(2).min(BUDGET_PAGE.1);
        }
        tx.commit(ctx).await?;
        out.reverse();
        Ok(out)
    }

    /// Encodes and checks a batch ([`PreparedBatch`]'s checks on LlamaIndex's `data`): the
    /// distinct messages (first of each id) and, per given message, the index of its distinct
    /// one.
    fn prepare<'a>(&self, messages: &'a [ChatMessage]) -> Result<(Vec<Prepared<'a>>, Vec<usize>)> {
        // Per message to store, in order: its role column and whether its data records its id.
        let mut columns: Vec<(String, bool)> = Vec::with_capacity(messages.len());
        let batch = PreparedBatch::with_encoder(messages, None, Repeats::Collapse, |message| {
            // A row's id is not recorded: the row's message is written with its bytes.
            let value = if is_row_id(message.id.as_str()) {
                to_llamaindex(message, &self.inner.options.clone().with_id(false))
            } else {
                to_llamaindex(message, &self.inner.options)
            };
            let role = value
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or(message.role.as_str())
                .to_owned();
            columns.push((role, recorded_id(&value) == Some(message.id.as_str())));
            Ok(dumps(&value))
        })?;
        let unique = batch
            .unique
            .into_iter()
            .zip(columns)
            .map(|(p, (role, recorded))| Prepared {
                message: p.message,
                role,
                data: p.json,
                recorded,
                row: self.row_of(p.message.id.as_str()),
            })
            .collect();
        Ok((unique, batch.positions))
    }

    /// The positions of the rows of `key` that already hold messages of `batch`, by index
    /// in `batch`.
    async fn find_existing(
        &self,
        tx: &mut Tx<'_>,
        key: &str,
        batch: &[Prepared<'_>],
    ) -> Result<HashMap<usize, u64>> {
        let ctx = "look up a batch among a LlamaIndex session";
        let sql = &self.inner.sql;
        let mut found = HashMap::new();
        for (chunk_no, chunk) in batch.chunks(ROWS_PER_STATEMENT).enumerate() {
            let ids: Vec<&str> = chunk
                .iter()
                .filter(|p| p.recorded)
                .map(|p| p.message.id.as_str())
                .collect();
            let rows: Vec<i64> = chunk.iter().filter_map(|p| p.row).collect();
            let datas: Vec<&str> = chunk
                .iter()
                .filter(|p| !p.recorded)
                .map(|p| p.data.as_str())
                .collect();
            let with_data = !datas.is_empty();
            let mut conds = Vec::new();
            let mut args: Vec<Arg<'_>> = vec![Arg::Text(key)];
            if !ids.is_empty() {
                conds.push(format!("w.mid IN ({})", placeholders(ids.len())));
                args.extend(ids.iter().map(|id| Arg::Text(id)));
            }
            if !rows.is_empty() {
                conds.push(format!("w.rid IN ({})", placeholders(rows.len())));
                args.extend(rows.iter().map(|r| Arg::Int(*r)));
            }
            if with_data {
                conds.push(format!(
                    "(w.mid IS NULL AND w.data IN ({}))",
                    placeholders(datas.len())
                ));
                args.extend(datas.iter().map(|d| Arg::Text(d)));
            }
            let template = format!(
                "SELECT w.seq, w.rid, w.mid{} FROM (SELECT ROW_NUMBER() OVER (ORDER BY \
                 \"timestamp\", id) AS seq, CAST(id AS BIGINT) AS rid, {} AS mid{} FROM {{t}} \
                 WHERE \"key\" = ?) AS w WHERE {}",
                if with_data { ", w.data" } else { "" },
                sql.recorded_id(),
                if with_data {
                    ", CAST(data AS TEXT) AS data"
                } else {
                    ""
                },
                conds.join(" OR ")
            );
            let cache = chunk.len() <= 2;
            let q = Query::built(sql.render(&template), cache).args(args);
            let mut cols = vec![Col::Int, Col::Int, Col::Text];
            if with_data {
                cols.push(Col::Text);
            }
            let mut by_mid: HashMap<String, u64> = HashMap::new();
            let mut by_row: HashMap<i64, u64> = HashMap::new();
            let mut by_data: HashMap<String, u64> = HashMap::new();
            for mut row in tx.fetch(ctx, q, &cols).await? {
                let seq = row.uint(0)?;
                by_row.insert(row.int(1)?, seq);
                let mid = row.take_opt_text(2)?;
                let keep_min = |map: &mut HashMap<String, u64>, k: String| {
                    let e = map.entry(k).or_insert(seq);
                    *e = (*e).min(seq);
                };
                match mid {
                    Some(mid) => keep_min(&mut by_mid, mid),
                    None if with_data => keep_min(&mut by_data, row.take_text(3)?),
                    None => {}
                }
            }
            for (i, p) in chunk.iter().enumerate() {
                let hit = if p.recorded {
                    by_mid.get(p.message.id.as_str())
                } else {
                    by_data.get(&p.data)
                }
                .or_else(|| p.row.and_then(|r| by_row.get(&r)));
                if let Some(&seq) = hit {
                    found.insert(
                        chunk_no
                            .saturating_mul(ROWS_PER_STATEMENT)
                            .saturating_add(i),
                        seq,
                    );
                }
            }
        }
        Ok(found)
    }

    /// Appends the distinct messages of a batch; returns their positions and how many were new.
    async fn append_tx(&self, key: &str, batch: &[Prepared<'_>]) -> Result<(Vec<u64>, usize)> {
        let ctx = "append to a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let stats = tx
            .fetch(
                ctx,
                self.query(&inner.sql.stats).text(key),
                &[Col::Int, Col::Int],
            )
            .await?;
        let (total, last_ts) = match stats.first() {
            Some(row) => (row.uint(0)?, row.opt_int(1)?),
            None => (0, None),
        };
        let existing = if total == 0 {
            HashMap::new()
        } else {
            self.find_existing(&mut tx, key, batch).await?
        };
        let base = last_ts.map_or(now_ns(), |t| now_ns().max(t.saturating_add(1)));
        let mut seqs = Vec::with_capacity(batch.len());
        let mut fresh: Vec<(&Prepared<'_>, i64)> = Vec::new();
        for (i, p) in batch.iter().enumerate() {
            match existing.get(&i) {
                Some(&seq) => seqs.push(seq),
                None => {
                    let n = fresh.len() as u64;
                    seqs.push(total.saturating_add(n).saturating_add(1));
                    fresh.push((p, base.saturating_add(to_i64(n))));
                }
            }
        }
        let mut rest = fresh.as_slice();
        while !rest.is_empty() {
            // At most ROWS_PER_STATEMENT rows and BYTES_PER_STATEMENT bytes, at least one row.
            let mut take = 0usize;
            let mut bytes = 0usize;
            for (p, _) in rest.iter().take(ROWS_PER_STATEMENT) {
                let with = bytes.saturating_add(p.data.len());
                if take > 0 && with > BYTES_PER_STATEMENT {
                    break;
                }
                bytes = with;
                take = take.saturating_add(1);
            }
            let (rows, after) = rest.split_at(take);
            let values =
                vec![format!("(?, ?, ?, 'active', {})", inner.sql.data_param()); rows.len()];
            let template = format!(
                "INSERT INTO {{t}} (\"key\", \"timestamp\", role, status, data) VALUES {}",
                values.join(", ")
            );
            let mut q = Query::built(inner.sql.render(&template), rows.len() <= 2);
            for (p, ts) in rows {
                q = q.text(key).int(*ts).text(&p.role).text(&p.data);
            }
            tx.execute(ctx, q).await?;
            rest = after;
        }
        tx.commit(ctx).await?;
        Ok((seqs, fresh.len()))
    }

    async fn count_tx(&self, key: &str) -> Result<ThreadCount> {
        let ctx = "count a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin_read(ctx).await?;
        let rows = tx
            .fetch(ctx, self.query(&inner.sql.read_all).text(key), &ROW_COLS)
            .await?;
        let counts = tx
            .fetch(
                ctx,
                self.query(&inner.sql.counts).text(key),
                &[Col::Int, Col::Int],
            )
            .await?;
        tx.commit(ctx).await?;
        let mut active_tokens = 0u64;
        for row in rows {
            if let Some(message) = self.decode_or_skip(key, row) {
                active_tokens = active_tokens.saturating_add(u64::from(message.tokens));
            }
        }
        let (total, active) = match counts.first() {
            Some(row) => (row.uint(0)?, row.uint(1)?),
            None => (0, 0),
        };
        Ok(ThreadCount {
            active,
            archived: total.saturating_sub(active),
            active_tokens,
            last_seq: total,
        })
    }

    async fn archive_tx(&self, key: &str, first: i64, last: i64) -> Result<u64> {
        let ctx = "archive messages of a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let q = self
            .query(&inner.sql.archive)
            .text(key)
            .int(first)
            .int(last);
        let n = tx.execute(ctx, q).await?;
        tx.commit(ctx).await?;
        Ok(n)
    }

    async fn clear_tx(&self, key: &str) -> Result<u64> {
        let ctx = "clear a LlamaIndex session";
        let inner = &self.inner;
        let mut tx = inner.db.begin(ctx).await?;
        self.lock_key(&mut tx, ctx, key).await?;
        let n = tx
            .execute(ctx, self.query(&inner.sql.clear).text(key))
            .await?;
        tx.commit(ctx).await?;
        Ok(n)
    }

    /// A page of the scopes that the keys of the table give: every key (or, with `prefix`,
    /// those that start with it) for which `scope_of` gives a scope.
    async fn list_keys(
        &self,
        page: PageRequest,
        prefix: Option<&str>,
        scope_of: impl Fn(&str) -> Option<Scope>,
    ) -> Result<Page<Scope>> {
        let ctx = "list LlamaIndex sessions";
        let inner = &self.inner;
        let limit = page.limit.max(1);
        let mut cursor = page.cursor.unwrap_or_default();
        let mut items = Vec::with_capacity(limit.min(1024));
        let mut last_key: Option<String> = None;
        let batch = to_i64(limit).saturating_add(1).min(10_000);
        loop {
            let q = match prefix {
                None => self.query(&inner.sql.list).text(&cursor).int(batch),
                Some(prefix) => self
                    .query(&inner.sql.list_prefixed)
                    .text(&cursor)
                    .int(to_i64(prefix.chars().count()))
                    .text(prefix)
                    .int(batch),
            };
            let rows = inner.db.fetch(ctx, q, &[Col::Text]).await?;
            let exhausted = (rows.len() as i64) < batch;
            for mut row in rows {
                let key = row.take_text(0)?;
                cursor.clone_from(&key);
                let Some(scope) = scope_of(&key) else {
                    tracing::debug!(
                        key = %key.escape_debug(),
                        "LlamaIndex session key skipped: not one of a listed scope"
                    );
                    continue;
                };
                if items.len() == limit {
                    return Ok(Page {
                        items,
                        next_cursor: last_key,
                    });
                }
                items.push(scope);
                last_key = Some(key);
            }
            if exhausted {
                return Ok(Page {
                    items,
                    next_cursor: None,
                });
            }
        }
    }
}

#[async_trait]
impl HistoryStore for LlamaIndexHistoryStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_multi_process(!self.inner.private_memory)
            .with_dedupes_ids(true)
            // Under `SessionIdOnly`, a thread written through a scope other than
            // `Scope::session`'s is not listed under that scope's tenant.
            .with_lists_every_thread(self.inner.key_mapping == KeyMapping::Strict)
            // No epochs in a table Python writes too (see the type's docs).
            .with_cursor_reads(false)
            .with_paged_reads(true)
            // Only under `Strict` does every key name its tenant (the default one); see the
            // type's docs.
            .with_lists_tenants(self.inner.key_mapping == KeyMapping::Strict)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let key = self.key_for(scope)?;
        if messages.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let (batch, positions) = self.prepare(messages)?;
        let (unique_seqs, inserted) = self
            .bounded(
                "append",
                "append to a LlamaIndex session",
                self.append_tx(&key, &batch),
            )
            .await?;
        let seqs = positions
            .iter()
            .map(|&i| unique_seqs.get(i).copied().unwrap_or_default())
            .collect();
        Ok(AppendOutcome { seqs, inserted })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        self.bounded(
            "read",
            "read a LlamaIndex session",
            self.read_rows(&key, window),
        )
        .await
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let key = self.key_for(scope)?;
        self.bounded("count", "count a LlamaIndex session", self.count_tx(&key))
            .await
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let key = self.key_for(scope)?;
        let first = to_i64((*seqs.start()).max(1));
        let last = to_i64(*seqs.end());
        if first > last {
            return Ok(0);
        }
        self.bounded(
            "archive",
            "archive messages of a LlamaIndex session",
            self.archive_tx(&key, first, last),
        )
        .await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = self.key_for(scope)?;
        self.bounded("clear", "clear a LlamaIndex session", self.clear_tx(&key))
            .await
    }

    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        self.bounded(
            "read_page",
            "read a page of a LlamaIndex session",
            self.read_page_rows(&key, after, limit),
        )
        .await
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        if self.inner.key_mapping != KeyMapping::Strict {
            return Err(Error::unsupported(
                "the LlamaIndex store lists tenants only with KeyMapping::Strict: under \
                 SessionIdOnly a key does not say which tenant wrote it, and under ScopeKey \
                 the tenants could only be found by reading every key of the table",
            ));
        }
        // Every thread is a `Scope::session` one: the default tenant holds them all, and it
        // holds one when the table has a key that is a session id.
        let done = Page {
            items: Vec::new(),
            next_cursor: None,
        };
        if page.cursor.as_deref().is_some_and(|c| c >= DEFAULT_TENANT) {
            return Ok(done);
        }
        let any = self
            .bounded(
                "list_tenants",
                "list the tenants of LlamaIndex sessions",
                self.list_keys(PageRequest::first(1), None, |key| Scope::session(key).ok()),
            )
            .await?;
        if any.items.is_empty() {
            return Ok(done);
        }
        Ok(Page {
            items: vec![TenantId::new(DEFAULT_TENANT)?],
            next_cursor: None,
        })
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        if self.inner.key_mapping == KeyMapping::ScopeKey {
            let prefix = format!("{}|", filter.tenant);
            let scope_of = |key: &str| parse_scope_key(key).filter(|s| s.matches(filter));
            return self
                .bounded(
                    "list_threads",
                    "list LlamaIndex sessions",
                    self.list_keys(page, Some(&prefix), scope_of),
                )
                .await;
        }
        // Listed scopes are those of `Scope::session`: the default tenant and source.
        let listed = filter.tenant.as_str() == DEFAULT_TENANT
            && filter.user.is_none()
            && filter.agent.is_none()
            && filter
                .source
                .as_ref()
                .is_none_or(|s| s.as_str() == DEFAULT_SOURCE);
        if !listed {
            return Ok(Page {
                items: Vec::new(),
                next_cursor: None,
            });
        }
        let scope_of = |key: &str| Scope::session(key).ok();
        self.bounded(
            "list_threads",
            "list LlamaIndex sessions",
            self.list_keys(page, None, scope_of),
        )
        .await
    }
}

fn mysql_unsupported() -> Error {
    Error::unsupported(
        "LlamaIndex's SQLAlchemyChatStore cannot create its table on MySQL/MariaDB (VARCHAR \
         requires a length there); the LlamaIndex store supports SQLite and PostgreSQL",
    )
}

/// The id recorded in a LlamaIndex message (`additional_kwargs.agent_memory.id`), if it is a
/// valid message id (what [`from_llamaindex`] takes as the id).
fn recorded_id(value: &Value) -> Option<&str> {
    value
        .get("additional_kwargs")?
        .get(AGENT_MEMORY_KEY)?
        .get("id")?
        .as_str()
        .filter(|id| MessageId::new(*id).is_ok())
}

/// The scope whose canonical key ([`Scope::key`]) is `key`, if there is one.
fn parse_scope_key(key: &str) -> Option<Scope> {
    let mut parts = key.split('|');
    let (tenant, user, agent, source, session) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if parts.next().is_some() {
        return None;
    }
    let tenant = memory_core::TenantId::new(tenant).ok()?;
    let session = memory_core::SessionId::new(session).ok()?;
    let mut scope = Scope::new(tenant, session).with_source(source).ok()?;
    if user != "~" {
        scope = scope.with_user(user).ok()?;
    }
    if agent != "~" {
        scope = scope.with_agent(agent).ok()?;
    }
    (scope.key() == key).then_some(scope)
}

/// Whether `id` is one that a LlamaIndex store gives a row that records none:
/// `llamaindex:<table>:<row id>`, whatever the table.
fn is_row_id(id: &str) -> bool {
    let Some((table, row)) = id
        .strip_prefix("llamaindex:")
        .and_then(|rest| rest.rsplit_once(':'))
    else {
        return false;
    };
    ddl::validate_name(
        "table name",
        table,
        LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN,
    )
    .is_ok()
        && row.parse::<i64>().is_ok_and(|n| n.to_string() == row)
}

/// Substitutes the table for `{t}` and, on PostgreSQL, numbers the placeholders (`$1`, `$2`,
/// …). Templates hold no `?` but placeholders, and the table name is validated.
fn render(postgres: bool, table: &str, template: &str) -> String {
    let sql = template.replace("{t}", table);
    if !postgres {
        return sql;
    }
    let mut out = String::with_capacity(sql.len().saturating_add(16));
    let mut n = 0u32;
    for c in sql.chars() {
        if c == '?' {
            n = n.saturating_add(1);
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn validate_config(config: &LlamaIndexConfig) -> Result<()> {
    if config.sql.default_ttl.is_some() {
        return Err(Error::unsupported(
            "LlamaIndex's table has no expiry: the LlamaIndex store takes no default TTL",
        ));
    }
    ddl::validate_name(
        "table name",
        &config.table_name,
        LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN,
    )?;
    if let Some(schema) = &config.schema {
        ddl::validate_name(
            "schema name",
            schema,
            LlamaIndexHistoryStore::MAX_TABLE_NAME_LEN,
        )?;
    }
    Ok(())
}

/// `url` in sqlx's form: SQLAlchemy's `dialect+driver://` URLs (what LlamaIndex is given)
/// translated, any other URL as it is. SQLAlchemy's `sqlite:///relative.db`,
/// `sqlite:////abs.db` and `sqlite://` (memory) differ from sqlx's, so they are translated
/// only with a `+driver`.
fn sqlx_url(url: &str) -> Cow<'_, str> {
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

/// Nanoseconds since the Unix epoch (Python's `time.time_ns()`).
fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| to_i64(d.as_nanos()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn row_ids_are_recognised() {
        for id in [
            "llamaindex:llama_index_memory:1",
            "llamaindex:T_2:-3",
            "llamaindex:x:0",
        ] {
            assert!(is_row_id(id), "{id}");
        }
        for id in [
            "llamaindex:llama_index_memory:01",
            "llamaindex:llama_index_memory:x",
            "llamaindex::1",
            "llamaindex:a-b:1",
            "llamaindex:1",
            "m-1",
        ] {
            assert!(!is_row_id(id), "{id}");
        }
    }

    #[test]
    fn recorded_ids_are_read_like_from_llamaindex() {
        let v: Value = serde_json::json!({"additional_kwargs": {"agent_memory": {"id": "m-1"}}});
        assert_eq!(recorded_id(&v), Some("m-1"));
        let bad: Value = serde_json::json!({"additional_kwargs": {"agent_memory": {"id": "a b"}}});
        assert_eq!(recorded_id(&bad), None);
        assert_eq!(
            recorded_id(&serde_json::json!({"additional_kwargs": {}})),
            None
        );
    }
}
