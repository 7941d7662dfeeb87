//! Helpers shared by the test files (each includes it with `mod common;`).
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
