//! Helpers shared by the test files (each includes it with `mod support;`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use memory_sql::SqlStore;

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

/// Writes the `body` column of a store's messages table directly, for the hostile suite's
/// checks of undecodable rows.
#[derive(Debug, Clone)]
pub(crate) struct SqlRaw {
    pool: RawPool,
    prefix: String,
}

#[derive(Debug, Clone)]
enum RawPool {
    #[cfg(feature = "sqlite")]
    Sqlite(memory_sql::sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(memory_sql::sqlx::PgPool),
    #[cfg(feature = "mysql")]
    MySql(memory_sql::sqlx::MySqlPool),
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
            pool: RawPool::Sqlite(pool),
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
            pool: RawPool::Postgres(pool),
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
            pool: RawPool::MySql(pool),
            prefix: shared_prefix(),
        }
    }
}

#[async_trait::async_trait]
impl memory_testkit::hostile::RawWriter for SqlRaw {
    async fn overwrite(
        &self,
        scope: &memory_core::Scope,
        seq: u64,
        body: &[u8],
    ) -> memory_core::Result<bool> {
        use memory_sql::sqlx::{self, AssertSqlSafe};
        let table = format!("{}messages", self.prefix);
        let key = scope.key();
        let seq = i64::try_from(seq).unwrap();
        let text = std::str::from_utf8(body);
        let affected = match &self.pool {
            // SQLite keeps the bytes of a blob cast to text as they are.
            #[cfg(feature = "sqlite")]
            RawPool::Sqlite(pool) => sqlx::query(AssertSqlSafe(format!(
                "UPDATE {table} SET body = CAST(? AS TEXT) WHERE thread_key = ? AND seq = ?"
            )))
            .bind(body)
            .bind(&key)
            .bind(seq)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
            // Their text columns hold UTF-8 only.
            #[cfg(feature = "postgres")]
            RawPool::Postgres(pool) => {
                let Ok(text) = text else { return Ok(false) };
                sqlx::query(AssertSqlSafe(format!(
                    "UPDATE {table} SET body = $1 WHERE thread_key = $2 AND seq = $3"
                )))
                .bind(text)
                .bind(&key)
                .bind(seq)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
            #[cfg(feature = "mysql")]
            RawPool::MySql(pool) => {
                let Ok(text) = text else { return Ok(false) };
                sqlx::query(AssertSqlSafe(format!(
                    "UPDATE {table} SET body = ? WHERE thread_key = ? AND seq = ?"
                )))
                .bind(text)
                .bind(&key)
                .bind(seq)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
        }
        .unwrap_or_else(|e| panic!("overwrite message {seq} of {scope}: {e}"));
        let _ = text;
        assert_eq!(affected, 1, "message {seq} of {scope} exists");
        Ok(true)
    }
}
