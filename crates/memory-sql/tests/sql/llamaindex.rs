//! `LlamaIndexHistoryStore` on SQLite files and the PostgreSQL server: LlamaIndex's exact table,
//! the rows LlamaIndex wrote (docs/interop/vectors, and a demo session's six rows) read back,
//! Python's bytes written, our `Memory` reading and flushing a Python session, idempotent
//! appends and scope mapping (the conformance suite is in conformance_llamaindex.rs).
#![cfg(all(feature = "sqlite", feature = "postgres"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use memory_core::memory::{Memory, blocks::StaticMemoryBlock};
use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, InMemorySessionStore, Media, MessageId, PageRequest,
    Part, Role, Scope, ScopeFilter, TenantId, Window,
};
use memory_interop::llamaindex::{LiOptions, from_llamaindex, to_llamaindex};
use memory_interop::python_json::dumps;
use memory_sql::sqlx::{self, AssertSqlSafe, Row as _};
use memory_sql::{Backend, KeyMapping, LlamaIndexConfig, LlamaIndexHistoryStore};
use serde_json::Value;

use crate::support;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const VECTOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/interop/vectors/llamaindex_memory_get.json"
);

const SESSION: &str = "demo-session";

/// The six rows of a demo session, as LlamaIndex 0.14.25 wrote them:
/// `(id, timestamp, role, status, data)`.
const README_ROWS: [(i64, i64, &str, &str, &str); 6] = [
    (
        2001,
        1795334786392878527,
        "user",
        "archived",
        r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Hi, I am Dana. I am on call this week."}]}"#,
    ),
    (
        2002,
        1795334786403546148,
        "assistant",
        "archived",
        r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Noted, Dana. I will keep your on-call week in mind."}]}"#,
    ),
    (
        2003,
        1795334786410486658,
        "user",
        "archived",
        r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Remind me: which service paged me last night at 02:13 UTC?"}]}"#,
    ),
    (
        2004,
        1795334786419479949,
        "assistant",
        "archived",
        r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "The billing service paged you at 02:13 UTC for a slow query."}]}"#,
    ),
    (
        2005,
        1795334786427232216,
        "user",
        "active",
        r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Thanks. Please summarise the incident in one line."}]}"#,
    ),
    (
        2006,
        1795334786435126283,
        "assistant",
        "active",
        r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Billing latency spike from a slow query; mitigated by adding an index."}]}"#,
    ),
];

/// What SQLAlchemy 2.1.9 leaves in `sqlite_master` for LlamaIndex 0.14.25's table (captured from
/// a real `SQLAlchemyChatStore` on aiosqlite): `(type, name, sql)`, ordered by name.
const SQLITE_MASTER: [(&str, &str, &str); 4] = [
    (
        "index",
        "ix_llama_index_memory_key",
        "CREATE INDEX ix_llama_index_memory_key ON llama_index_memory (\"key\")",
    ),
    (
        "index",
        "ix_llama_index_memory_status",
        "CREATE INDEX ix_llama_index_memory_status ON llama_index_memory (status)",
    ),
    (
        "index",
        "ix_llama_index_memory_timestamp",
        "CREATE INDEX ix_llama_index_memory_timestamp ON llama_index_memory (timestamp)",
    ),
    (
        "table",
        "llama_index_memory",
        "CREATE TABLE llama_index_memory (\n\tid INTEGER NOT NULL, \n\t\"key\" VARCHAR NOT NULL, \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus VARCHAR NOT NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

/// A plain sqlx pool for looking under the store.
#[derive(Clone)]
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// One raw row: `(id, key, timestamp, role, status, data)`.
type RawRow = (i64, String, i64, String, String, String);

impl Raw {
    async fn exec(&self, sql: &str) {
        let q = AssertSqlSafe(sql.to_owned());
        match self {
            Raw::Sqlite(p) => sqlx::query(q).execute(p).await.map(drop),
            Raw::Postgres(p) => sqlx::query(q).execute(p).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Rows of text columns.
    async fn texts(&self, sql: &str) -> Vec<Vec<String>> {
        let q = AssertSqlSafe(sql.to_owned());
        match self {
            Raw::Sqlite(p) => sqlx::query(q)
                .fetch_all(p)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
                .collect(),
            Raw::Postgres(p) => sqlx::query(q)
                .fetch_all(p)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| r.get::<Option<String>, _>(i).unwrap_or_default())
                        .collect()
                })
                .collect(),
        }
    }

    /// Inserts a row as LlamaIndex writes it (with an explicit id when given).
    async fn insert(&self, table: &str, id: Option<i64>, key: &str, row: (i64, &str, &str, &str)) {
        let (ts, role, status, data) = row;
        let (cols, id_param) = match id {
            Some(_) => ("id, ", "?, "),
            None => ("", ""),
        };
        // `sql` with the id (when given) and then the row bound, run on `pool`.
        macro_rules! insert {
            ($pool:expr, $sql:expr, $id:expr) => {{
                let mut q = sqlx::query(AssertSqlSafe($sql));
                if let Some(id) = $id {
                    q = q.bind(id);
                }
                let row = q.bind(key).bind(ts).bind(role).bind(status).bind(data);
                row.execute($pool).await.unwrap();
            }};
        }
        match self {
            Raw::Sqlite(p) => {
                let sql = format!(
                    "INSERT INTO \"{table}\" ({cols}key, timestamp, role, status, data) \
                     VALUES ({id_param}?, ?, ?, ?, ?)"
                );
                insert!(p, sql, id)
            }
            Raw::Postgres(p) => {
                let sql = match id {
                    Some(_) => format!(
                        "INSERT INTO \"{table}\" (id, key, timestamp, role, status, data) \
                         VALUES ($1, $2, $3, $4, $5, CAST($6 AS json))"
                    ),
                    None => format!(
                        "INSERT INTO \"{table}\" (key, timestamp, role, status, data) \
                         VALUES ($1, $2, $3, $4, CAST($5 AS json))"
                    ),
                };
                insert!(p, sql, id.map(|id| i32::try_from(id).unwrap()))
            }
        }
    }

    /// The rows of `key`, ordered as LlamaIndex orders them.
    async fn rows(&self, table: &str, key: &str) -> Vec<RawRow> {
        let sql = format!(
            "SELECT CAST(id AS BIGINT), key, timestamp, role, status, CAST(data AS TEXT) \
             FROM \"{table}\" WHERE key = {} ORDER BY timestamp, id",
            match self {
                Raw::Sqlite(_) => "?",
                Raw::Postgres(_) => "$1",
            }
        );
        let q = sqlx::query_as::<_, RawRow>(AssertSqlSafe(sql));
        match self {
            Raw::Sqlite(p) => q.bind(key).fetch_all(p).await.unwrap(),
            Raw::Postgres(p) => {
                let q = sqlx::query_as::<_, RawRow>(AssertSqlSafe(format!(
                    "SELECT CAST(id AS BIGINT), key, timestamp, role, status, \
                     CAST(data AS TEXT) FROM \"{table}\" WHERE key = $1 ORDER BY timestamp, id"
                )));
                q.bind(key).fetch_all(p).await.unwrap()
            }
        }
    }
}

/// A store and a raw pool on the same database and table.
struct Env {
    kind: Kind,
    store: LlamaIndexHistoryStore,
    raw: Raw,
    table: String,
    schema: Option<String>,
}

impl Env {
    /// A fresh SQLite file with the default table, or a fresh table on the PostgreSQL server.
    async fn new(kind: Kind) -> Env {
        Env::with(kind, LlamaIndexConfig::new()).await
    }

    async fn with(kind: Kind, config: LlamaIndexConfig) -> Env {
        match kind {
            Kind::Sqlite => {
                let (url, _) = support::temp_sqlite_url();
                let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(4)
                    .connect_with(
                        options
                            .create_if_missing(true)
                            .busy_timeout(Duration::from_secs(10)),
                    )
                    .await
                    .unwrap();
                let store = LlamaIndexHistoryStore::from_sqlite_pool(pool.clone(), config)
                    .await
                    .unwrap();
                Env {
                    kind,
                    table: store.table_name().to_owned(),
                    schema: None,
                    store,
                    raw: Raw::Sqlite(pool),
                }
            }
            Kind::Postgres => {
                let table = unique_table();
                let pool = sqlx::PgPool::connect(&support::postgres_url())
                    .await
                    .unwrap_or_else(|e| panic!("the PostgreSQL server is required: {e}"));
                let store = LlamaIndexHistoryStore::from_postgres_pool(
                    pool.clone(),
                    config.with_table_name(&table),
                )
                .await
                .unwrap();
                Env {
                    kind,
                    table,
                    schema: store.schema().map(str::to_owned),
                    store,
                    raw: Raw::Postgres(pool),
                }
            }
        }
    }

    /// `Env::new(kind)` holding the README §2 rows under `SESSION`.
    async fn with_readme_rows(kind: Kind) -> Env {
        let env = Env::new(kind).await;
        env.insert_readme_rows(SESSION).await;
        env
    }

    /// The README §2 rows, inserted verbatim under `key`.
    async fn insert_readme_rows(&self, key: &str) {
        for (id, ts, role, status, data) in README_ROWS {
            self.raw
                .insert(&self.table, Some(id), key, (ts, role, status, data))
                .await;
        }
    }

    async fn rows(&self, key: &str) -> Vec<RawRow> {
        self.raw.rows(&self.qualified_for_raw(), key).await
    }

    /// The table for raw SQL (with its schema, already quoted apart from the outer quotes).
    fn qualified_for_raw(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{schema}\".\"{}", self.table),
            None => self.table.clone(),
        }
    }

    /// Drops what the test created on the shared server.
    async fn drop_table(&self) {
        if self.kind == Kind::Postgres {
            match &self.schema {
                Some(schema) => {
                    self.raw
                        .exec(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                        .await
                }
                None => {
                    self.raw
                        .exec(&format!("DROP TABLE IF EXISTS \"{}\"", self.table))
                        .await
                }
            }
        }
    }
}

fn unique_table() -> String {
    format!("li_{}", uuid::Uuid::new_v4().simple())
}

fn session() -> Scope {
    Scope::session(SESSION).unwrap()
}

/// Every message of `scope` in `store` (`Window::All`), without the stored fields.
async fn all_messages(store: &dyn HistoryStore, scope: &Scope) -> Vec<ChatMessage> {
    let stored = store.read(scope, Window::All).await.unwrap();
    stored.into_iter().map(|m| m.into_message()).collect()
}

const ROWS_VECTOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/interop/vectors/llamaindex_rows.json"
);

/// docs/interop/vectors/llamaindex_rows.json: rows and index names written by
/// llama-index-core 0.14.25 itself.
fn rows_vector() -> Value {
    serde_json::from_str(&std::fs::read_to_string(ROWS_VECTOR).unwrap()).unwrap()
}

fn vector() -> Value {
    let text = std::fs::read_to_string(VECTOR).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Our message for a row LlamaIndex wrote: `from_llamaindex` of its data, with the row's id
/// and its timestamp as the creation time.
fn expected_message(env: &Env, row_id: i64, timestamp: i64, data: &str) -> ChatMessage {
    let mut message = from_llamaindex(&serde_json::from_str(data).unwrap()).unwrap();
    message.id = MessageId::new(format!("llamaindex:{}:{row_id}", env.table)).unwrap();
    set_time(&mut message, timestamp);
    message
}

/// Sets a message's creation time to a `timestamp` column's time.
fn set_time(message: &mut ChatMessage, timestamp: i64) {
    let ns = u64::try_from(timestamp).unwrap();
    message.created_at = (std::time::UNIX_EPOCH + Duration::from_nanos(ns)).into();
}

/// One test per check and engine: `sqlite::<check>` and `postgres::<check>`.
macro_rules! on_both {
    (@engine $module:ident, $kind:ident, $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Kind::$kind).await;
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        on_both!(@engine sqlite, Sqlite, $($name),*);
        on_both!(@engine postgres, Postgres, $($name),*);
    };
}

on_both!(
    table_is_llamaindexs,
    existing_llamaindex_table_is_used_as_it_is,
    rows_llamaindex_wrote_read_back,
    rows_python_wrote_are_copied_byte_for_byte,
    repeated_rows_are_copied_apart,
    messages_write_the_bytes_llamaindex_writes,
    appends_write_pythons_bytes,
    memory_get_matches_llamaindex,
    memory_flush_archives_rows,
    retried_appends_are_idempotent,
    concurrent_appends_stay_consecutive,
    archive_and_clear_touch_one_key,
    scopes_map_to_session_ids,
    bad_table_names_are_refused,
    errors_name_backend_and_operation,
    exports_page_rows_and_list_the_default_tenant,
);

/// A store error names the backend and the `HistoryStore` operation, as `SqlStore`'s do.
async fn errors_name_backend_and_operation(kind: Kind) {
    let env = Env::new(kind).await;
    let store = &env.store;
    store.close().await;
    let err = store.read(&session(), Window::All).await.unwrap_err();
    let backend = match kind {
        Kind::Sqlite => "sqlite",
        Kind::Postgres => "postgres",
    };
    assert_eq!(
        (err.backend(), err.operation()),
        (Some(backend), Some("read")),
        "{err}"
    );
    let err = store
        .append(&session(), &[ChatMessage::user("x")])
        .await
        .unwrap_err();
    assert_eq!(
        (err.backend(), err.operation()),
        (Some(backend), Some("append")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

async fn table_is_llamaindexs(kind: Kind) {
    let env = Env::new(kind).await;
    match kind {
        Kind::Sqlite => {
            let master = env
                .raw
                .texts("SELECT type, name, sql FROM sqlite_master ORDER BY name")
                .await;
            let expected: Vec<Vec<String>> = SQLITE_MASTER
                .iter()
                .map(|(a, b, c)| vec![a.to_string(), b.to_string(), c.to_string()])
                .collect();
            assert_eq!(master, expected);
        }
        Kind::Postgres => {
            let t = &env.table;
            let columns = env
                .raw
                .texts(&format!(
                    "SELECT column_name::text, data_type::text, is_nullable::text, \
                     column_default::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = '{t}' \
                     ORDER BY ordinal_position"
                ))
                .await;
            let expected: Vec<Vec<String>> = [
                (
                    "id",
                    "integer",
                    "NO",
                    format!("nextval('{t}_id_seq'::regclass)"),
                ),
                ("key", "character varying", "NO", String::new()),
                ("timestamp", "bigint", "NO", String::new()),
                ("role", "character varying", "NO", String::new()),
                ("status", "character varying", "NO", String::new()),
                ("data", "json", "NO", String::new()),
            ]
            .into_iter()
            .map(|(a, b, c, d)| vec![a.to_owned(), b.to_owned(), c.to_owned(), d])
            .collect();
            assert_eq!(columns, expected);
            // pg_indexes as LlamaIndex 0.14.25 leaves it (captured from a real store).
            let indexes = env
                .raw
                .texts(&format!(
                    "SELECT indexname::text, indexdef FROM pg_indexes \
                     WHERE schemaname = current_schema() AND tablename = '{t}' ORDER BY indexname"
                ))
                .await;
            let s = "public";
            assert_eq!(
                indexes,
                vec![
                    vec![
                        format!("ix_{t}_key"),
                        format!("CREATE INDEX ix_{t}_key ON {s}.{t} USING btree (key)")
                    ],
                    vec![
                        format!("ix_{t}_status"),
                        format!("CREATE INDEX ix_{t}_status ON {s}.{t} USING btree (status)")
                    ],
                    vec![
                        format!("ix_{t}_timestamp"),
                        format!(
                            "CREATE INDEX ix_{t}_timestamp ON {s}.{t} USING btree (\"timestamp\")"
                        )
                    ],
                    vec![
                        format!("{t}_pkey"),
                        format!("CREATE UNIQUE INDEX {t}_pkey ON {s}.{t} USING btree (id)")
                    ],
                ]
            );
            env.drop_table().await;

            // A 63-character name in a schema: SQLAlchemy's MD5-cut index names, which name
            // the schema (captured from llama-index-core 0.14.25 with `db_schema="li_long"`).
            let _lock = lock_fixed_schemas().await;
            let schema = "li_long".to_owned();
            env.raw
                .exec(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await;
            let long = "a".repeat(63);
            let pool = match &env.raw {
                Raw::Postgres(p) => p.clone(),
                Raw::Sqlite(_) => unreachable!(),
            };
            let store = LlamaIndexHistoryStore::from_postgres_pool(
                pool,
                LlamaIndexConfig::new()
                    .with_table_name(&long)
                    .with_schema(&schema),
            )
            .await
            .unwrap();
            assert_eq!(store.schema(), Some(schema.as_str()));
            let names = env
                .raw
                .texts(&format!(
                    "SELECT indexname::text FROM pg_indexes WHERE schemaname = '{schema}' \
                     ORDER BY indexname"
                ))
                .await;
            let a44 = "a".repeat(44);
            assert_eq!(
                names.concat(),
                [
                    format!("{}_pkey", "a".repeat(58)),
                    format!("ix_li_long_{a44}_8344"),
                    format!("ix_li_long_{a44}_a6f6"),
                    format!("ix_li_long_{a44}_a931"),
                ]
            );
            store
                .append(&session(), &[ChatMessage::user("in a schema")])
                .await
                .unwrap();
            assert_eq!(store.count(&session()).await.unwrap().active, 1);
            env.raw
                .exec(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
                .await;
        }
    }
}

/// Serializes the tests that use fixed PostgreSQL schema names (the vectors'), also across
/// processes: a session-level advisory lock, held by a connection of its own until it closes.
async fn lock_fixed_schemas() -> sqlx::PgConnection {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&support::postgres_url())
        .await
        .unwrap();
    sqlx::query("SELECT pg_advisory_lock(hashtext('agent_memory.tests.llamaindex_schemas'))")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

/// `(name, definition)` of every index in `schema`, by name.
async fn pg_indexes(raw: &Raw, schema: &str) -> Vec<Vec<String>> {
    raw.texts(&format!(
        "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = '{schema}' \
         ORDER BY indexname"
    ))
    .await
}

/// With `db_schema`, SQLAlchemy names the indexes `ix_<schema>_<table>_<column>` (MD5-cut past
/// 63 characters). For the three schema/table pairs of the vectors (two of them cut): opening a
/// table LlamaIndex created in a schema adds no index, and a table the store creates in a
/// schema gets exactly LlamaIndex's indexes.
/// (PostgreSQL only: LlamaIndex ignores `db_schema` on SQLite, and so does the store.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_schema_tables_keep_sqlalchemys_indexes() {
    let env = Env::new(Kind::Postgres).await;
    let pool = match &env.raw {
        Raw::Postgres(p) => p.clone(),
        Raw::Sqlite(_) => unreachable!(),
    };
    let _lock = lock_fixed_schemas().await;
    let vectors = rows_vector();
    for pair in vectors["postgres_schema_indexes"].as_array().unwrap() {
        let schema = pair["schema"].as_str().unwrap();
        let table = pair["table"].as_str().unwrap();
        let written: Vec<Vec<String>> = pair["indexes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                vec![
                    i["name"].as_str().unwrap().to_owned(),
                    i["definition"].as_str().unwrap().to_owned(),
                ]
            })
            .collect();
        let drop = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
        let in_schema = [ChatMessage::user("in a schema")];
        let open = || async {
            let config = LlamaIndexConfig::new()
                .with_table_name(table)
                .with_schema(schema);
            LlamaIndexHistoryStore::from_postgres_pool(pool.clone(), config)
                .await
                .unwrap()
        };

        // The table as LlamaIndex created it: its DDL and the vectors' index definitions.
        env.raw.exec(&drop).await;
        env.raw.exec(&format!("CREATE SCHEMA {schema}")).await;
        env.raw
            .exec(&format!(
                "CREATE TABLE {schema}.{table} (\n\tid SERIAL NOT NULL, \n\tkey VARCHAR NOT \
                 NULL, \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus \
                 VARCHAR NOT NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)"
            ))
            .await;
        for index in &written {
            if index[0].starts_with("ix_") {
                env.raw.exec(&index[1]).await;
            }
        }
        let before = pg_indexes(&env.raw, schema).await;
        assert_eq!(before, written, "{schema}.{table}");
        let store = open().await;
        store.append(&session(), &in_schema).await.unwrap();
        assert_eq!(
            pg_indexes(&env.raw, schema).await,
            before,
            "opening {schema}.{table} added or changed an index"
        );

        // A table the store creates in a schema: LlamaIndex's indexes, name and definition.
        env.raw.exec(&drop).await;
        let store = open().await;
        assert_eq!(
            pg_indexes(&env.raw, schema).await,
            written,
            "{schema}.{table}"
        );
        store.append(&session(), &in_schema).await.unwrap();
        assert_eq!(store.count(&session()).await.unwrap().active, 1);
        env.raw.exec(&drop).await;
    }
    env.drop_table().await;
}

/// A table LlamaIndex created (its exact DDL, with rows in it) is used as it is, and a table of
/// another layout is refused.
async fn existing_llamaindex_table_is_used_as_it_is(kind: Kind) {
    let env = Env::new(kind).await;
    let table = unique_table();
    let ddl = match kind {
        Kind::Sqlite => format!(
            "CREATE TABLE {table} (\n\tid INTEGER NOT NULL, \n\t\"key\" VARCHAR NOT NULL, \
             \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus VARCHAR NOT \
             NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)"
        ),
        Kind::Postgres => format!(
            "CREATE TABLE {table} (\n\tid SERIAL NOT NULL, \n\tkey VARCHAR NOT NULL, \
             \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus VARCHAR NOT \
             NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)"
        ),
    };
    env.raw.exec(&ddl).await;
    for column in ["key", "status", "timestamp"] {
        env.raw
            .exec(&format!(
                "CREATE INDEX ix_{table}_{column} ON {table} (\"{column}\")"
            ))
            .await;
    }
    let (_, ts, role, status, data) = README_ROWS[4];
    env.raw
        .insert(&table, None, SESSION, (ts, role, status, data))
        .await;
    let config = LlamaIndexConfig::new().with_table_name(&table);
    let store = match &env.raw {
        Raw::Sqlite(p) => LlamaIndexHistoryStore::from_sqlite_pool(p.clone(), config).await,
        Raw::Postgres(p) => LlamaIndexHistoryStore::from_postgres_pool(p.clone(), config).await,
    }
    .unwrap();
    let read = store.read(&session(), Window::All).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(
        read[0].message.text(),
        "Thanks. Please summarise the incident in one line."
    );
    let out = store
        .append(&session(), &[ChatMessage::assistant("ok")])
        .await
        .unwrap();
    assert_eq!(out.seqs, [2]);

    // A table of the same name with another layout is not LlamaIndex's.
    let other = unique_table();
    env.raw
        .exec(&format!(
            "CREATE TABLE {other} (id INTEGER PRIMARY KEY, key VARCHAR)"
        ))
        .await;
    let config = LlamaIndexConfig::new().with_table_name(&other);
    let err = match &env.raw {
        Raw::Sqlite(p) => LlamaIndexHistoryStore::from_sqlite_pool(p.clone(), config).await,
        Raw::Postgres(p) => LlamaIndexHistoryStore::from_postgres_pool(p.clone(), config).await,
    }
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("status"), "{err}");
    if kind == Kind::Postgres {
        env.raw.exec(&format!("DROP TABLE {table}, {other}")).await;
    }
    env.drop_table().await;
}

// ---------------------------------------------------------------------------------------------
// Reading what LlamaIndex wrote, writing what LlamaIndex writes
// ---------------------------------------------------------------------------------------------

async fn rows_llamaindex_wrote_read_back(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let store = &env.store;
    let scope = session();

    let active = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(active.len(), 2);
    assert_eq!(active.iter().map(|m| m.seq).collect::<Vec<_>>(), [5, 6]);
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(everything.len(), 6);
    for (stored, (id, ts, _, status, data)) in everything.iter().zip(README_ROWS) {
        assert_eq!(*stored.message, expected_message(&env, id, ts, data));
        assert_eq!(stored.archived, status == "archived");
        // Written back with the store's options, the row is byte-identical.
        assert_eq!(
            dumps(&to_llamaindex(&stored.message, &LiOptions::minimal())),
            data
        );
    }
    assert_eq!(
        everything.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(active, everything[4..].to_vec());

    let last = store.read(&scope, Window::Last(1)).await.unwrap();
    assert_eq!(last, everything[5..].to_vec());
    assert_eq!(store.read(&scope, Window::Last(10)).await.unwrap(), active);
    assert!(
        store
            .read(&scope, Window::Last(0))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.read(&scope, Window::After(5)).await.unwrap(), last);
    assert_eq!(store.read(&scope, Window::After(0)).await.unwrap(), active);
    let newest = u64::from(everything[5].tokens);
    let both = newest + u64::from(everything[4].tokens);
    assert_eq!(
        store
            .read(&scope, Window::TokenBudget(newest))
            .await
            .unwrap(),
        last
    );
    assert_eq!(
        store.read(&scope, Window::TokenBudget(both)).await.unwrap(),
        active
    );
    assert!(
        store
            .read(&scope, Window::TokenBudget(newest - 1))
            .await
            .unwrap()
            .is_empty()
    );

    let count = store.count(&scope).await.unwrap();
    assert_eq!(count.active, 2);
    assert_eq!(count.archived, 4);
    assert_eq!(count.last_seq, 6);
    assert_eq!(count.active_tokens, both);
    let unknown = Scope::session("nobody").unwrap();
    assert!(
        store
            .read(&unknown, Window::Everything)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.count(&unknown).await.unwrap().last_seq, 0);
    env.drop_table().await;
}

/// The rows of docs/interop/vectors/llamaindex_rows.json (written by llama-index-core 0.14.25
/// itself): `(name, role, data)`.
fn vector_rows() -> Vec<(String, String, String)> {
    rows_vector()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap().to_owned();
            (text("name"), text("role"), text("data"))
        })
        .collect()
}

/// The `data` of the rows of `key`, in order.
async fn datas(env: &Env, key: &str) -> Vec<String> {
    env.rows(key).await.into_iter().map(|r| r.5).collect()
}

/// The `data` of the rows of `key` without our record, and the ids the records hold.
async fn datas_and_ids(env: &Env, key: &str) -> (Vec<String>, Vec<String>) {
    let mut datas = Vec::new();
    let mut ids = Vec::new();
    for data in self::datas(env, key).await {
        let mut value: Value = serde_json::from_str(&data).unwrap();
        let record = value["additional_kwargs"]
            .as_object_mut()
            .unwrap()
            .shift_remove("agent_memory")
            .unwrap_or_else(|| panic!("no record in {data}"));
        ids.push(record["id"].as_str().unwrap().to_owned());
        datas.push(memory_interop::python_json::dumps(&value));
    }
    (datas, ids)
}

/// A message read from a row Python wrote keeps the row's bytes wherever it goes, with the
/// record of the row's id and time: appended to another LlamaIndex session and table, read
/// back and appended again, or through a native `SqlStore` thread and back. Thinking and
/// cache-point blocks stay, a `tool_call` block stays a block, and every copy reads as the row
/// did.
async fn rows_python_wrote_are_copied_byte_for_byte(kind: Kind) {
    let env = Env::new(kind).await;
    let rows = vector_rows();
    let names: Vec<&str> = rows.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(names.contains(&"thinking_and_cache_point") && names.contains(&"tool_call_block"));
    let written: Vec<String> = rows.iter().map(|(_, _, d)| d.clone()).collect();
    for (i, (_, role, data)) in rows.iter().enumerate() {
        let ts = 1_795_334_786_392_878_527 + i as i64;
        env.raw
            .insert(&env.table, None, "python", (ts, role, "active", data))
            .await;
    }
    let store = &env.store;
    let scope = |key: &str| Scope::session(key).unwrap();
    let read = |key: &'static str| async move { all_messages(store, &scope(key)).await };
    let from_python = read("python").await;
    assert_eq!(from_python.len(), rows.len());
    assert!(from_python[0].id.as_str().starts_with("llamaindex:"));

    // Appended to another session: the rows' bytes, and their ids and times recorded.
    let out = store.append(&scope("copy"), &from_python).await.unwrap();
    assert_eq!(out.inserted, rows.len());
    let python_ids: Vec<String> = from_python
        .iter()
        .map(|m| m.id.as_str().to_owned())
        .collect();
    assert_eq!(
        datas_and_ids(&env, "copy").await,
        (written.clone(), python_ids.clone())
    );
    assert_eq!(read("copy").await, from_python);
    // A retry inserts nothing.
    let again = store.append(&scope("copy"), &from_python).await.unwrap();
    assert_eq!((again.inserted, again.seqs), (0, out.seqs));
    // Read back from there and appended once more.
    let copied = read("copy").await;
    store.append(&scope("copy-2"), &copied).await.unwrap();
    assert_eq!(datas(&env, "copy-2").await, datas(&env, "copy").await);

    // Through a native SqlStore thread and back.
    let native = memory_sql::SqlStore::in_memory().await.unwrap();
    let thread = Scope::session("native").unwrap();
    native.append(&thread, &from_python).await.unwrap();
    let through = all_messages(&native, &thread).await;
    assert_eq!(through, from_python);
    store.append(&scope("from-native"), &through).await.unwrap();
    assert_eq!(datas(&env, "from-native").await, datas(&env, "copy").await);

    // Into another LlamaIndex table.
    let other_table = unique_table();
    let config = LlamaIndexConfig::new().with_table_name(&other_table);
    let other = match &env.raw {
        Raw::Sqlite(p) => LlamaIndexHistoryStore::from_sqlite_pool(p.clone(), config).await,
        Raw::Postgres(p) => LlamaIndexHistoryStore::from_postgres_pool(p.clone(), config).await,
    }
    .unwrap();
    other.append(&scope("python"), &from_python).await.unwrap();
    let in_other: Vec<String> = env
        .raw
        .rows(&other_table, "python")
        .await
        .into_iter()
        .map(|r| r.5)
        .collect();
    assert_eq!(in_other, datas(&env, "copy").await);
    let read_other = all_messages(&other, &scope("python")).await;
    assert_eq!(read_other, from_python);
    if kind == Kind::Postgres {
        env.raw.exec(&format!("DROP TABLE \"{other_table}\"")).await;
    }
    env.drop_table().await;
}

/// A session where Python's user said "ok" three times, copied to another session in two
/// appends (as a bundle import resumed after a crash does): every row arrives, each under the
/// id of the row it copies, and a retry of either append inserts nothing.
async fn repeated_rows_are_copied_apart(kind: Kind) {
    let env = Env::new(kind).await;
    let ok = r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "ok"}]}"#;
    let sure = r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Sure."}]}"#;
    for (i, data) in [ok, sure, ok, sure, ok].into_iter().enumerate() {
        let role = if data == ok { "user" } else { "assistant" };
        env.raw
            .insert(
                &env.table,
                None,
                "python",
                (1_795_334_786_392_878_527 + i as i64, role, "active", data),
            )
            .await;
    }
    let store = &env.store;
    let python = Scope::session("python").unwrap();
    let copy = Scope::session("copy").unwrap();
    let from_python = all_messages(store, &python).await;
    let (head, tail) = from_python.split_at(2);
    for _ in 0..2 {
        assert_eq!(store.append(&copy, head).await.unwrap().seqs, [1, 2]);
        let out = store.append(&copy, tail).await.unwrap();
        assert_eq!(out.seqs, [3, 4, 5]);
    }
    let copied = all_messages(store, &copy).await;
    assert_eq!(copied, from_python);
    assert_eq!(env.rows("copy").await.len(), 5);
    env.drop_table().await;
}

/// Our store writes LlamaIndex's own bytes: for the message read from each row LlamaIndex
/// wrote, and for messages built in Rust with the same media (LlamaIndex fills in media types,
/// audio formats and document titles; so do we).
async fn messages_write_the_bytes_llamaindex_writes(kind: Kind) {
    let env = Env::new(kind).await;
    let store = &env.store;
    for (name, _, data) in vector_rows() {
        let message = from_llamaindex(&serde_json::from_str(&data).unwrap()).unwrap();
        store
            .append(&Scope::session(format!("conv-{name}")).unwrap(), &[message])
            .await
            .unwrap();
        assert_eq!(datas(&env, &format!("conv-{name}")).await, [data], "{name}");
    }

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let native: Vec<(&str, Vec<Part>)> = vec![
        (
            "image_url",
            vec![
                Part::text("What is in this picture?"),
                Part::Image(Media::url("https://example.com/cat.png")),
            ],
        ),
        (
            "image_data_url",
            vec![Part::Image(Media::url(format!(
                "data:image/png;base64,{PNG}"
            )))],
        ),
        (
            "video_mp4",
            vec![Part::Video(Media::url("https://example.com/clip.mp4"))],
        ),
        (
            "audio_url",
            vec![Part::Audio(Media::url("https://example.com/voice.wav"))],
        ),
        (
            "document_url",
            vec![Part::Document(Media::url("https://example.com/report.pdf"))],
        ),
    ];
    let rows = vector_rows();
    for (name, parts) in native {
        let python = &rows.iter().find(|(n, _, _)| n == name).unwrap().2;
        // With a fresh id: LlamaIndex's bytes, plus our id.
        let fresh = ChatMessage::new(Role::User, parts.clone());
        let key = format!("native-{name}");
        store
            .append(
                &Scope::session(key.as_str()).unwrap(),
                std::slice::from_ref(&fresh),
            )
            .await
            .unwrap();
        let with_id = python.replacen(
            r#""additional_kwargs": {}"#,
            &format!(
                r#""additional_kwargs": {{"agent_memory": {{"id": "{}"}}}}"#,
                fresh.id
            ),
            1,
        );
        assert_eq!(datas(&env, &key).await, [with_id], "{name}");
        // With the id LlamaIndex's content gets (what a message read from it has): exactly
        // LlamaIndex's bytes.
        let content_id = from_llamaindex(&serde_json::from_str(python).unwrap())
            .unwrap()
            .id;
        let key = format!("native-bare-{name}");
        store
            .append(
                &Scope::session(key.as_str()).unwrap(),
                &[fresh.with_id(content_id)],
            )
            .await
            .unwrap();
        assert_eq!(
            datas(&env, &key).await,
            std::slice::from_ref(python),
            "{name}"
        );
    }
    env.drop_table().await;
}

async fn appends_write_pythons_bytes(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let scope = session();
    let user = ChatMessage::user("Grüße 🎉 \"q\"").with_id(MessageId::new("m-bytes-1").unwrap());
    let assistant =
        ChatMessage::assistant("Noted.\nTwo lines.").with_id(MessageId::new("m-bytes-2").unwrap());
    let out = env
        .store
        .append(&scope, &[user.clone(), assistant.clone()])
        .await
        .unwrap();
    assert_eq!(out.seqs, [7, 8]);
    assert_eq!(out.inserted, 2);

    let rows = env.rows(SESSION).await;
    assert_eq!(rows.len(), 8);
    let (new_user, new_assistant) = (&rows[6], &rows[7]);
    // What Python's json.dumps writes for these messages (checked against CPython 3.11).
    assert_eq!(
        new_user.5,
        r#"{"role": "user", "additional_kwargs": {"agent_memory": {"id": "m-bytes-1"}}, "blocks": [{"block_type": "text", "text": "Gr\u00fc\u00dfe \ud83c\udf89 \"q\""}]}"#
    );
    assert_eq!(
        new_assistant.5,
        r#"{"role": "assistant", "additional_kwargs": {"agent_memory": {"id": "m-bytes-2"}}, "blocks": [{"block_type": "text", "text": "Noted.\nTwo lines."}]}"#
    );
    assert_eq!(
        (new_user.3.as_str(), new_user.4.as_str()),
        ("user", "active")
    );
    assert_eq!(new_assistant.3, "assistant");
    assert_eq!(new_user.1, SESSION);
    assert!(new_user.2 > README_ROWS[5].1, "after every row of the key");
    assert_eq!(new_assistant.2, new_user.2 + 1, "time_ns() + i in a batch");

    // Read back, they are the messages appended (minus what the minimal options leave out).
    let back = env.store.read(&scope, Window::Last(2)).await.unwrap();
    let mut expected_user = user.clone();
    set_time(&mut expected_user, new_user.2);
    assert_eq!(*back[0].message, expected_user);
    assert_eq!(back[1].message.id.as_str(), "m-bytes-2");

    // With LiOptions::default(), our messages read back exactly.
    let full = Env::with(
        kind,
        LlamaIndexConfig::new().with_message_options(LiOptions::default()),
    )
    .await;
    let rich = ChatMessage::user("hi")
        .with_author("dana")
        .with_metadata("k", serde_json::json!([1, "x"]));
    full.store
        .append(&scope, std::slice::from_ref(&rich))
        .await
        .unwrap();
    let back = full.store.read(&scope, Window::All).await.unwrap();
    assert_eq!(*back[0].message, rich);
    full.drop_table().await;
    env.drop_table().await;
}

/// Our `Memory` on the rows LlamaIndex wrote returns what LlamaIndex's `Memory.get()` returned.
async fn memory_get_matches_llamaindex(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let sample = vector();
    let memory = Memory::builder(
        session(),
        Arc::new(env.store.clone()),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(sample["token_limit"].as_u64().unwrap())
    .token_flush_size(sample["token_flush_size"].as_u64().unwrap())
    .block(Arc::new(
        StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.").unwrap(),
    ))
    .build()
    .unwrap();
    let got = memory.get(&[]).await.unwrap();
    let expected = sample["get_result"].as_array().unwrap();
    assert_eq!(got.len(), expected.len());
    for (ours, theirs) in got.iter().zip(expected) {
        assert_eq!(
            dumps(&to_llamaindex(ours, &LiOptions::minimal())),
            dumps(theirs)
        );
    }
    // `get` changes nothing.
    assert_eq!(env.rows(SESSION).await.len(), 6);
    env.drop_table().await;
}

/// Our `Memory`'s flush archives the oldest active rows as LlamaIndex's does: `status` becomes
/// `archived`, nothing is deleted, the data is untouched.
async fn memory_flush_archives_rows(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let memory = Memory::builder(
        session(),
        Arc::new(env.store.clone()),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(120)
    .token_flush_size(30)
    .block(Arc::new(
        StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.").unwrap(),
    ))
    .build()
    .unwrap();
    let before = env.rows(SESSION).await;
    let mut flushed = 0;
    for turn in 0..6 {
        let report = memory
            .put_messages(&[
                ChatMessage::user(format!(
                    "Turn {turn}: what else happened during the billing incident last night?"
                )),
                ChatMessage::assistant(format!(
                    "Turn {turn}: the slow query was retried by the batch job until the index landed."
                )),
            ])
            .await
            .unwrap();
        flushed += report.messages;
    }
    assert!(flushed > 0, "the memory flushed");
    let rows = env.rows(SESSION).await;
    assert_eq!(rows.len(), 6 + 12, "rows are never deleted");
    // The README rows are unchanged but for their status.
    for (old, new) in before.iter().zip(&rows) {
        assert_eq!((&old.0, &old.2, &old.5), (&new.0, &new.2, &new.5));
    }
    let archived = rows.iter().filter(|r| r.4 == "archived").count();
    assert_eq!(archived, 4 + flushed);
    // Archived rows are the oldest; the active ones start with a user message.
    assert!(rows[..archived].iter().all(|r| r.4 == "archived"));
    assert!(rows[archived..].iter().all(|r| r.4 == "active"));
    assert_eq!(rows[archived].3, "user");
    let count = env.store.count(&session()).await.unwrap();
    assert_eq!(count.archived, archived as u64);
    assert!(
        count.active_tokens <= 84,
        "within token_limit × 0.7: {count:?}"
    );
    env.drop_table().await;
}

// ---------------------------------------------------------------------------------------------
// Appends
// ---------------------------------------------------------------------------------------------

async fn retried_appends_are_idempotent(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let scope = session();
    let store = &env.store;
    let a = ChatMessage::user("a");
    let b = ChatMessage::assistant("b");
    let c = ChatMessage::user("c");
    let out = store.append(&scope, &[a.clone(), b.clone()]).await.unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![7, 8], 2));
    let out = store
        .append(&scope, &[a.clone(), b.clone(), c.clone()])
        .await
        .unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![7, 8, 9], 1));
    let out = store.append(&scope, &[c.clone(), c.clone()]).await.unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![9, 9], 0));

    // A row Python wrote, read and appended again, is a retry of that row.
    let first = store.read(&scope, Window::Everything).await.unwrap()[0]
        .clone()
        .into_message();
    let out = store.append(&scope, &[first]).await.unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![1], 0));

    // Archived messages still count.
    assert_eq!(store.archive(&scope, 7..=7).await.unwrap(), 1);
    let out = store
        .append(&scope, std::slice::from_ref(&a))
        .await
        .unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![7], 0));

    // A message whose id is the one derived from its content records no id (the bytes are
    // LlamaIndex's own); a retry is recognised by its data.
    let data = r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "content-id"}]}"#;
    let derived = from_llamaindex(&serde_json::from_str(data).unwrap()).unwrap();
    let out = store
        .append(&scope, std::slice::from_ref(&derived))
        .await
        .unwrap();
    assert_eq!((out.seqs.clone(), out.inserted), (vec![10], 1));
    let out = store.append(&scope, &[derived]).await.unwrap();
    assert_eq!((out.seqs, out.inserted), (vec![10], 0));
    let rows = env.rows(SESSION).await;
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[9].5, data);
    env.drop_table().await;
}

async fn concurrent_appends_stay_consecutive(kind: Kind) {
    let env = Env::new(kind).await;
    let scope = session();
    let mut tasks = Vec::new();
    for writer in 0..6 {
        let store = env.store.clone();
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            let batch: Vec<ChatMessage> = (0..5)
                .map(|i| ChatMessage::user(format!("writer {writer} message {i}")))
                .collect();
            let first = store.append(&scope, &batch).await.unwrap();
            // The same batch again, as a client retrying after a lost answer would.
            let retry = store.append(&scope, &batch).await.unwrap();
            assert_eq!(first.seqs, retry.seqs);
            assert_eq!(retry.inserted, 0);
            first.seqs
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let seqs = task.await.unwrap();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        all.extend(seqs);
    }
    all.sort_unstable();
    assert_eq!(all, (1..=30).collect::<Vec<u64>>());
    let read = env.store.read(&scope, Window::All).await.unwrap();
    assert_eq!(
        read.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=30).collect::<Vec<u64>>()
    );
    assert_eq!(env.rows(SESSION).await.len(), 30);
    env.drop_table().await;
}

async fn archive_and_clear_touch_one_key(kind: Kind) {
    let env = Env::with_readme_rows(kind).await;
    let other = Scope::session("other-session").unwrap();
    let store = &env.store;
    store
        .append(&other, &[ChatMessage::user("x"), ChatMessage::user("y")])
        .await
        .unwrap();
    let scope = session();
    // Only active rows in the range move.
    assert_eq!(store.archive(&scope, 1..=5).await.unwrap(), 1);
    assert_eq!(store.archive(&scope, 5..=5).await.unwrap(), 0);
    assert_eq!(store.archive(&scope, 9..=20).await.unwrap(), 0);
    #[allow(clippy::reversed_empty_ranges)]
    let empty = 6..=5;
    assert_eq!(store.archive(&scope, empty).await.unwrap(), 0);
    let statuses: Vec<String> = env.rows(SESSION).await.into_iter().map(|r| r.4).collect();
    assert_eq!(
        statuses,
        [
            "archived", "archived", "archived", "archived", "archived", "active"
        ]
    );
    assert_eq!(store.count(&other).await.unwrap().active, 2);

    assert_eq!(store.clear(&scope).await.unwrap(), 6);
    assert!(env.rows(SESSION).await.is_empty());
    assert_eq!(env.rows("other-session").await.len(), 2);
    let out = store
        .append(&scope, &[ChatMessage::user("again")])
        .await
        .unwrap();
    assert_eq!(out.seqs, [1], "a cleared thread starts again at 1");
    env.drop_table().await;
}

/// `read_page` pages through a session's rows, active and archived, exactly as
/// `Window::Everything` reads them, skipping a row it cannot decode; `list_tenants` is the
/// default tenant under `KeyMapping::Strict` and unsupported under the other mappings.
async fn exports_page_rows_and_list_the_default_tenant(kind: Kind) {
    let env = Env::new(kind).await;
    let store = &env.store;
    let caps = store.capabilities();
    assert!(caps.paged_reads && caps.lists_tenants);
    // Nothing yet, then a key that is no session id: no tenant.
    let page = store.list_tenants(PageRequest::first(10)).await.unwrap();
    assert_eq!((page.items.len(), page.next_cursor), (0, None));
    env.raw
        .insert(
            &env.qualified_for_raw(),
            None,
            "not a session id",
            (1, "user", "active", r#"{"role": "user", "blocks": []}"#),
        )
        .await;
    let page = store.list_tenants(PageRequest::first(10)).await.unwrap();
    assert!(page.items.is_empty());

    env.insert_readme_rows(SESSION).await;
    let scope = session();
    store
        .append(
            &scope,
            &[
                ChatMessage::user("q1"),
                ChatMessage::assistant("a1"),
                ChatMessage::user("q2"),
            ],
        )
        .await
        .unwrap();
    // A row no reader can decode, between two of ours (an unknown role).
    let last_ts = env.rows(SESSION).await.last().unwrap().2;
    env.raw
        .insert(
            &env.qualified_for_raw(),
            None,
            SESSION,
            (last_ts + 1, "user", "active", r#"{"role": 5}"#),
        )
        .await;
    store
        .append(&scope, &[ChatMessage::user("q3")])
        .await
        .unwrap();
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    let seen = |m: &memory_core::StoredMessage| {
        (
            m.seq,
            m.archived,
            m.message.id.as_str().to_owned(),
            m.message.text(),
        )
    };
    let expected: Vec<_> = everything.iter().map(seen).collect();
    // Eleven rows: the six README rows, our three, the undecodable one, our last.
    assert_eq!(
        expected.iter().map(|m| m.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 11]
    );
    for limit in [1, 2, 4, 100] {
        let mut got = Vec::new();
        let mut after = 0;
        loop {
            let page = store.read_page(&scope, after, limit).await.unwrap();
            assert!(page.len() <= limit.max(1));
            let Some(last) = page.last() else { break };
            after = last.seq;
            got.extend(page.iter().map(seen));
        }
        assert_eq!(got, expected, "limit {limit}");
    }
    // Archived rows are flagged; a page of undecodable rows only is followed by the next.
    let flags: Vec<(u64, bool)> = store
        .read_page(&scope, 3, 3)
        .await
        .unwrap()
        .iter()
        .map(|m| (m.seq, m.archived))
        .collect();
    assert_eq!(flags, [(4, true), (5, false), (6, false)]);
    let after_bad = store.read_page(&scope, 9, 1).await.unwrap();
    assert_eq!(after_bad.iter().map(|m| m.seq).collect::<Vec<_>>(), [11]);
    assert!(store.read_page(&scope, 11, 5).await.unwrap().is_empty());
    assert!(
        store
            .read_page(&Scope::session("nobody").unwrap(), 0, 5)
            .await
            .unwrap()
            .is_empty()
    );

    let page = store.list_tenants(PageRequest::first(1)).await.unwrap();
    let tenants: Vec<&str> = page.items.iter().map(TenantId::as_str).collect();
    assert_eq!((tenants, page.next_cursor), (vec!["default"], None));
    let after = store
        .list_tenants(PageRequest::after(1, "default"))
        .await
        .unwrap();
    assert!(after.items.is_empty());
    let before = store
        .list_tenants(PageRequest::after(1, "D"))
        .await
        .unwrap();
    assert_eq!(before.items.len(), 1);
    env.drop_table().await;

    for mapping in [KeyMapping::SessionIdOnly, KeyMapping::ScopeKey] {
        let env = Env::with(kind, LlamaIndexConfig::new().with_key_mapping(mapping)).await;
        let store = &env.store;
        assert!(store.capabilities().paged_reads);
        assert!(!store.capabilities().lists_tenants, "{mapping:?}");
        let err = store.list_tenants(PageRequest::first(1)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{mapping:?}: {err}");
        let scope = Scope::session("s").unwrap().with_tenant("acme").unwrap();
        store
            .append(&scope, &[ChatMessage::user("x")])
            .await
            .unwrap();
        let page = store.read_page(&scope, 0, 10).await.unwrap();
        assert_eq!(page.len(), 1, "{mapping:?}");
        env.drop_table().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Scopes, names, capabilities
// ---------------------------------------------------------------------------------------------

async fn scopes_map_to_session_ids(kind: Kind) {
    let env = Env::new(kind).await;
    let store = &env.store;
    let plain = session();
    assert_eq!(store.key_for(&plain).unwrap(), SESSION);
    store
        .append(&plain, &[ChatMessage::user("hi")])
        .await
        .unwrap();
    for scope in [
        plain.clone().with_user("u-1").unwrap(),
        plain.clone().with_agent("a-1").unwrap(),
        plain.clone().with_tenant("acme").unwrap(),
        plain.clone().with_source("memory").unwrap(),
    ] {
        let err = store.read(&scope, Window::All).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{scope}: {err}");
        let err = store
            .append(&scope, &[ChatMessage::user("x")])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    // Python writes keys that are no session id of ours: skipped by listings.
    let (_, ts, role, status, data) = README_ROWS[4];
    env.raw
        .insert(
            &env.qualified_for_raw(),
            None,
            "not a session id",
            (ts, role, status, data),
        )
        .await;
    for n in 2..=3 {
        env.store
            .append(
                &Scope::session(format!("s-{n}")).unwrap(),
                &[ChatMessage::user("x")],
            )
            .await
            .unwrap();
    }
    let tenant = TenantId::new("default").unwrap();
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let request = match cursor.take() {
            None => PageRequest::first(2),
            Some(c) => PageRequest::after(2, c),
        };
        let page = store
            .list_threads(&ScopeFilter::tenant(tenant.clone()), request)
            .await
            .unwrap();
        assert!(page.items.len() <= 2);
        listed.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let listed: HashSet<Scope> = listed.into_iter().collect();
    let expected: HashSet<Scope> = [SESSION, "s-2", "s-3"]
        .into_iter()
        .map(|s| Scope::session(s).unwrap())
        .collect();
    assert_eq!(listed, expected);
    let elsewhere = store
        .list_threads(
            &ScopeFilter::tenant(TenantId::new("acme").unwrap()),
            PageRequest::first(10),
        )
        .await
        .unwrap();
    assert!(elsewhere.items.is_empty());

    // Sharing by session id: every scope of the session reads the same rows.
    let shared = Env::with(
        kind,
        LlamaIndexConfig::new().with_key_mapping(KeyMapping::SessionIdOnly),
    )
    .await;
    let user_scope = plain.clone().with_user("u-1").unwrap();
    shared
        .store
        .append(&user_scope, &[ChatMessage::user("shared")])
        .await
        .unwrap();
    let seen = shared.store.read(&plain, Window::All).await.unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(shared.rows(SESSION).await.len(), 1);

    // ScopeKey: the key is the whole scope's canonical key; scopes stay apart and are listed.
    let keyed = Env::with(
        kind,
        LlamaIndexConfig::new().with_key_mapping(KeyMapping::ScopeKey),
    )
    .await;
    keyed
        .store
        .append(&user_scope, &[ChatMessage::user("the user's")])
        .await
        .unwrap();
    keyed
        .store
        .append(&plain, &[ChatMessage::user("the plain one's")])
        .await
        .unwrap();
    assert_eq!(keyed.store.key_for(&user_scope).unwrap(), user_scope.key());
    assert_eq!(keyed.rows(&user_scope.key()).await.len(), 1);
    assert_eq!(keyed.rows(&plain.key()).await.len(), 1);
    assert_eq!(keyed.rows(SESSION).await.len(), 0);
    let listed = keyed
        .store
        .list_threads(
            &ScopeFilter::tenant(plain.tenant().clone())
                .with_user(memory_core::UserId::new("u-1").unwrap()),
            PageRequest::first(10),
        )
        .await
        .unwrap();
    assert_eq!(listed.items, std::slice::from_ref(&user_scope));
    keyed.drop_table().await;

    // No TTL in this layout.
    assert!(!store.capabilities().ttl);
    assert!(store.capabilities().multi_process);
    let err = store
        .set_ttl(&plain, Some(Duration::from_secs(60)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert_eq!(
        store.purge_expired().await.unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    // No cursor reads: Python writers of the table would never move an epoch.
    assert!(!store.capabilities().cursor_reads);
    let err = store
        .read_since(&plain, memory_core::Window::All, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    shared.drop_table().await;
    env.drop_table().await;
}

async fn bad_table_names_are_refused(kind: Kind) {
    let url = match kind {
        Kind::Sqlite => support::temp_sqlite_url().0,
        Kind::Postgres => support::postgres_url(),
    };
    let too_long = "a".repeat(64);
    for bad in [
        "",
        "1abc",
        "a-b",
        "a b",
        "x; DROP TABLE y",
        "x\"y",
        "tä",
        too_long.as_str(),
    ] {
        let config = LlamaIndexConfig::new().with_table_name(bad);
        let err = LlamaIndexHistoryStore::connect_with(&url, config)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}: {err}");
        let config = LlamaIndexConfig::new().with_schema(bad);
        let err = LlamaIndexHistoryStore::connect_with(&url, config)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "schema {bad:?}: {err}");
    }
    // Upper case and reserved words are fine: quoted as SQLAlchemy quotes them.
    for good in ["Mixed_Case", "select", "_x"] {
        let name = match kind {
            Kind::Sqlite => good.to_owned(),
            Kind::Postgres => format!("{good}_{}", &unique_table()[3..15]),
        };
        let store = LlamaIndexHistoryStore::connect_with(
            &url,
            LlamaIndexConfig::new().with_table_name(&name),
        )
        .await
        .unwrap();
        assert_eq!(store.table_name(), name);
        store
            .append(&session(), &[ChatMessage::user("x")])
            .await
            .unwrap();
        assert_eq!(store.count(&session()).await.unwrap().active, 1);
        if kind == Kind::Postgres {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            Raw::Postgres(pool)
                .exec(&format!("DROP TABLE \"{name}\""))
                .await;
        }
        store.close().await;
    }
    if kind == Kind::Sqlite {
        // SQLAlchemy's form of the URL LlamaIndex is given works too.
        let path = url.trim_start_matches("sqlite://");
        let store = LlamaIndexHistoryStore::connect(&format!("sqlite+aiosqlite:///{path}"))
            .await
            .unwrap();
        assert_eq!(store.backend(), Backend::Sqlite);
        store.close().await;
        let memory = LlamaIndexHistoryStore::connect("sqlite+aiosqlite:///:memory:")
            .await
            .unwrap();
        assert!(!memory.capabilities().multi_process);
    }
    let err = LlamaIndexHistoryStore::connect("mysql://root@127.0.0.1:3306/test")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}
