//! Helpers shared by the test modules (`tests/sql/main.rs` and the binaries that stand
//! apart include it with `mod support;`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use memory_core::{Result, Scope};
use memory_sql::SqlStore;
use memory_sql::sqlx::{self, AssertSqlSafe};

/// The PostgreSQL server of the tests: `AGENT_MEMORY_POSTGRES_URL`, or the local one.
pub(crate) fn postgres_url() -> String {
    std::env::var("AGENT_MEMORY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The MySQL/MariaDB server of the tests: `AGENT_MEMORY_MYSQL_URL`, or the local one.
pub(crate) fn mysql_url() -> String {
    std::env::var("AGENT_MEMORY_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// The table prefix the server suites share (they use random tenants, so runs never collide).
/// It names the schema version, so a build with another schema (an older checkout, a later
/// session) never meets these tables: it would rightly refuse tables newer than it knows.
pub(crate) fn shared_prefix() -> String {
    format!("amtest_v{}_", memory_sql::SCHEMA_VERSION)
}

/// The store at `url` with tables of `prefix` (created or migrated as any open does).
pub(crate) async fn open(url: &str, prefix: &str) -> SqlStore {
    SqlStore::builder(url)
        .table_prefix(prefix)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"))
}

/// A tenant no other test uses.
pub(crate) fn random_tenant() -> String {
    format!("t-{}", uuid::Uuid::new_v4().simple())
}

/// The folder of the tests' SQLite files. Files older than an hour (left by earlier runs) are
/// removed whenever a new one is made.
fn sqlite_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("memory-sql-tests");
    std::fs::create_dir_all(&dir).unwrap();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < hour_ago);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    dir
}

/// A URL (and its path) for a new SQLite file.
pub(crate) fn temp_sqlite_url() -> (String, PathBuf) {
    let path = sqlite_dir().join(format!("{}.db", uuid::Uuid::new_v4()));
    (format!("sqlite://{}", path.display()), path)
}

/// A store on a new SQLite file.
pub(crate) async fn sqlite_file_store() -> SqlStore {
    let (url, _path) = temp_sqlite_url();
    SqlStore::connect(&url).await.expect("open a SQLite file")
}

/// A store on the test PostgreSQL server; fails (never skips) when it is unreachable.
pub(crate) async fn postgres_store() -> SqlStore {
    SqlStore::builder(postgres_url())
        .table_prefix(shared_prefix())
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!("the PostgreSQL server (AGENT_MEMORY_POSTGRES_URL) is required: {e}")
        })
}

/// A store on the test MariaDB/MySQL server; fails (never skips) when it is unreachable.
pub(crate) async fn mysql_store() -> SqlStore {
    SqlStore::builder(mysql_url())
        .table_prefix(shared_prefix())
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!("the MySQL/MariaDB server (AGENT_MEMORY_MYSQL_URL) is required: {e}")
        })
}

/// A plain sqlx connection to a test database, to look under a store or change its tables
/// behind its back.
#[derive(Debug, Clone)]
pub(crate) enum Raw {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
    #[cfg(feature = "mysql")]
    MySql(sqlx::MySqlPool),
}

impl Raw {
    /// A connection to the database of `url` (a SQLite file is created if it is missing).
    pub(crate) async fn connect(url: &str) -> Raw {
        #[cfg(feature = "sqlite")]
        if url.starts_with("sqlite") {
            let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true));
            return Raw::Sqlite(pool.await.unwrap());
        }
        #[cfg(feature = "postgres")]
        if url.starts_with("postgres") {
            return Raw::Postgres(sqlx::PgPool::connect(url).await.unwrap());
        }
        #[cfg(feature = "mysql")]
        if url.starts_with("mysql") {
            return Raw::MySql(sqlx::MySqlPool::connect(url).await.unwrap());
        }
        panic!("no engine of this build opens {url}")
    }

    /// Runs `sql`.
    pub(crate) async fn exec(&self, sql: &str) {
        let q = AssertSqlSafe(sql.to_owned());
        match self {
            #[cfg(feature = "sqlite")]
            Raw::Sqlite(p) => sqlx::query(q).execute(p).await.map(drop),
            #[cfg(feature = "postgres")]
            Raw::Postgres(p) => sqlx::query(q).execute(p).await.map(drop),
            #[cfg(feature = "mysql")]
            Raw::MySql(p) => sqlx::query(q).execute(p).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The one integer `sql` selects.
    pub(crate) async fn int(&self, sql: &str) -> i64 {
        let q = AssertSqlSafe(sql.to_owned());
        match self {
            #[cfg(feature = "sqlite")]
            Raw::Sqlite(p) => sqlx::query_scalar(q).fetch_one(p).await,
            #[cfg(feature = "postgres")]
            Raw::Postgres(p) => sqlx::query_scalar(q).fetch_one(p).await,
            #[cfg(feature = "mysql")]
            Raw::MySql(p) => sqlx::query_scalar(q).fetch_one(p).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The texts of the first column of the rows `sql` selects.
    pub(crate) async fn texts(&self, sql: &str) -> Vec<String> {
        let q = AssertSqlSafe(sql.to_owned());
        match self {
            #[cfg(feature = "sqlite")]
            Raw::Sqlite(p) => sqlx::query_scalar(q).fetch_all(p).await,
            #[cfg(feature = "postgres")]
            Raw::Postgres(p) => sqlx::query_scalar(q).fetch_all(p).await,
            #[cfg(feature = "mysql")]
            Raw::MySql(p) => sqlx::query_scalar(q).fetch_all(p).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Closes the connections.
    pub(crate) async fn close(&self) {
        match self {
            #[cfg(feature = "sqlite")]
            Raw::Sqlite(p) => p.close().await,
            #[cfg(feature = "postgres")]
            Raw::Postgres(p) => p.close().await,
            #[cfg(feature = "mysql")]
            Raw::MySql(p) => p.close().await,
        }
    }

    /// Drops every table of the store's schema with `prefix`.
    pub(crate) async fn drop_tables(&self, prefix: &str) {
        for table in [
            "vectors",
            "vector_dimensions",
            "texts_fts",
            "texts",
            "messages",
            "threads",
            "sessions",
            "schema_migrations",
        ] {
            self.exec(&format!("DROP TABLE IF EXISTS {prefix}{table}"))
                .await;
        }
    }
}

/// Writes the `body` column of a store's messages table directly, for the hostile suite's
/// checks of undecodable rows.
#[derive(Debug, Clone)]
pub(crate) struct SqlRaw {
    pool: Raw,
    prefix: String,
}

impl SqlRaw {
    /// A writer on the SQLite database of `url` (a file), for tables of `store`.
    #[cfg(feature = "sqlite")]
    pub(crate) async fn sqlite_file(url: &str, store: &SqlStore) -> Self {
        let pool = memory_sql::sqlx::SqlitePool::connect(url).await.unwrap();
        Self::sqlite(pool, store)
    }

    /// A writer on `pool`, for tables of `store`.
    #[cfg(feature = "sqlite")]
    pub(crate) fn sqlite(pool: memory_sql::sqlx::SqlitePool, store: &SqlStore) -> Self {
        Self {
            pool: Raw::Sqlite(pool),
            prefix: store.table_prefix().to_owned(),
        }
    }

    /// A writer on the test PostgreSQL server, for the shared tables.
    #[cfg(feature = "postgres")]
    pub(crate) async fn postgres() -> Self {
        let pool = memory_sql::sqlx::PgPool::connect(&postgres_url())
            .await
            .unwrap();
        Self {
            pool: Raw::Postgres(pool),
            prefix: shared_prefix(),
        }
    }

    /// A writer on the test MySQL/MariaDB server, for the shared tables.
    #[cfg(feature = "mysql")]
    pub(crate) async fn mysql() -> Self {
        let pool = memory_sql::sqlx::MySqlPool::connect(&mysql_url())
            .await
            .unwrap();
        Self {
            pool: Raw::MySql(pool),
            prefix: shared_prefix(),
        }
    }
}

#[async_trait::async_trait]
impl memory_testkit::hostile::RawWriter for SqlRaw {
    async fn overwrite(&self, scope: &Scope, seq: u64, body: &[u8]) -> Result<bool> {
        let table = format!("{}messages", self.prefix);
        let key = scope.key();
        let seq = i64::try_from(seq).unwrap();
        let text = std::str::from_utf8(body);
        // The statement `sql` with the new body, the thread's key and the seq bound in turn.
        macro_rules! update {
            ($pool:expr, $sql:expr, $body:expr) => {
                sqlx::query(AssertSqlSafe($sql))
                    .bind($body)
                    .bind(&key)
                    .bind(seq)
                    .execute($pool)
                    .await
                    .map(|r| r.rows_affected())
            };
        }
        let affected = match &self.pool {
            // SQLite keeps the bytes of a blob cast to text as they are.
            #[cfg(feature = "sqlite")]
            Raw::Sqlite(pool) => update!(
                pool,
                format!(
                    "UPDATE {table} SET body = CAST(? AS TEXT) WHERE thread_key = ? AND seq = ?"
                ),
                body
            ),
            // Their text columns hold UTF-8 only.
            #[cfg(feature = "postgres")]
            Raw::Postgres(pool) => {
                let Ok(text) = text else { return Ok(false) };
                let sql =
                    format!("UPDATE {table} SET body = $1 WHERE thread_key = $2 AND seq = $3");
                update!(pool, sql, text)
            }
            #[cfg(feature = "mysql")]
            Raw::MySql(pool) => {
                let Ok(text) = text else { return Ok(false) };
                let sql = format!("UPDATE {table} SET body = ? WHERE thread_key = ? AND seq = ?");
                update!(pool, sql, text)
            }
        }
        .unwrap_or_else(|e| panic!("overwrite message {seq} of {scope}: {e}"));
        let _ = text;
        assert_eq!(affected, 1, "message {seq} of {scope} exists");
        Ok(true)
    }
}

/// Checks that the thread's seqs are exactly 1..=n and every id is stored once.
pub(crate) fn assert_gap_free(all: &[memory_core::StoredMessage]) {
    let seqs: Vec<u64> = all.iter().map(|m| m.seq).collect();
    let n = all.len() as u64;
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "seqs are gap-free");
    let ids: std::collections::HashSet<&str> = all.iter().map(|m| m.message.id.as_str()).collect();
    assert_eq!(ids.len(), all.len(), "every message is stored once");
}
