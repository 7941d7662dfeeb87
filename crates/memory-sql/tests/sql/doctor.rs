//! `inspect`: a read-only look at real databases (SQLite files, PostgreSQL, MariaDB). It reports
//! the schema version and pending migrations, the journal mode of a SQLite file, and never
//! creates or migrates anything; a server it cannot reach is a typed error, never the URL.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::ErrorKind;
use memory_core::doctor::{Check, CheckStatus};
use memory_sql::{Backend, SCHEMA_VERSION, SqlConfig, SqlInspection, SqlStore, inspect};
use memory_testkit::error_text;

use crate::support;

/// A table prefix no other test uses.
fn fresh_prefix() -> String {
    format!(
        "amdoc_{}_",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

fn config(prefix: &str) -> SqlConfig {
    SqlConfig::new().with_table_prefix(prefix)
}

fn status(found: &SqlInspection, name: &str) -> Option<CheckStatus> {
    found
        .checks()
        .into_iter()
        .find(|c| c.name == name)
        .map(|c| c.status)
}

fn all_versions() -> Vec<u32> {
    (1..=SCHEMA_VERSION).collect()
}

fn pending_versions(found: &SqlInspection) -> Vec<u32> {
    found.pending.iter().map(|(v, _)| *v).collect()
}

#[tokio::test]
async fn sqlite_file_at_the_current_schema_in_wal_mode_is_all_ok() {
    let (url, _path) = support::temp_sqlite_url();
    let store = SqlStore::builder(&url)
        .table_prefix("doc_")
        .busy_timeout(Duration::from_millis(2500))
        .connect()
        .await
        .unwrap();
    store.close().await;
    let found = inspect(
        &url,
        &config("doc_").with_busy_timeout(Duration::from_millis(2500)),
    )
    .await
    .unwrap();
    assert_eq!(found.backend, Backend::Sqlite);
    assert_eq!(found.schema_version, SCHEMA_VERSION);
    assert!(found.pending.is_empty());
    assert_eq!(found.journal_mode.as_deref(), Some("wal"));
    assert_eq!(found.busy_timeout, Some(Duration::from_millis(2500)));
    assert!(
        found
            .server_version
            .as_deref()
            .unwrap()
            .starts_with("SQLite 3.")
    );
    let checks = found.checks();
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "connection",
            "schema version",
            "pending migrations",
            "journal mode",
            "busy timeout"
        ]
    );
    assert!(
        checks.iter().all(|c| c.status == CheckStatus::Ok),
        "{checks:?}"
    );
    assert!(checks[4].detail.contains("2500 ms"), "{}", checks[4].detail);
}

#[tokio::test]
async fn sqlite_file_at_an_old_version_reports_its_pending_migrations_and_stays_old() {
    let (url, _path) = support::temp_sqlite_url();
    let store = SqlStore::builder(&url)
        .config(config("old_").__schema_version(3))
        .connect()
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 3);
    store.close().await;
    let found = inspect(&url, &config("old_")).await.unwrap();
    assert_eq!(found.schema_version, 3);
    assert_eq!(pending_versions(&found), [4, 5, 6, 7, 8]);
    assert_eq!(found.pending[1].1, "thread_epoch");
    assert_eq!(status(&found, "schema version"), Some(CheckStatus::Ok));
    let pending = found
        .checks()
        .into_iter()
        .find(|c| c.name == "pending migrations")
        .unwrap();
    assert!(
        pending
            .detail
            .contains("4 (session_nonce), 5 (thread_epoch)"),
        "{pending}"
    );
    // Nothing was migrated: the raw table still says 3.
    let pool = memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap();
    let max: i64 = memory_sql::sqlx::query_scalar("SELECT MAX(version) FROM old_schema_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(max, 3);
}

#[tokio::test]
async fn sqlite_file_not_in_wal_mode_is_a_warning_and_is_left_as_it_is() {
    use memory_sql::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let (url, path) = support::temp_sqlite_url();
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Delete);
    let pool = memory_sql::sqlx::SqlitePool::connect_with(options)
        .await
        .unwrap();
    memory_sql::sqlx::query("CREATE TABLE other_app (id INTEGER)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let prefix = fresh_prefix();
    let found = inspect(&url, &config(&prefix)).await.unwrap();
    assert_eq!(found.journal_mode.as_deref(), Some("delete"));
    assert_eq!(status(&found, "journal mode"), Some(CheckStatus::Warning));
    assert_eq!(found.schema_version, 0);
    assert_eq!(pending_versions(&found), all_versions());
    assert_eq!(status(&found, "schema version"), Some(CheckStatus::Warning));

    // The file is as it was: still in rollback-journal mode, no table of ours.
    let pool = memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap();
    let mode: String = memory_sql::sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "delete");
    let tables: Vec<String> =
        memory_sql::sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(tables, ["other_app"]);
}

#[tokio::test]
async fn a_missing_sqlite_file_is_a_warning_and_is_not_created() {
    let (url, path) = support::temp_sqlite_url();
    let found = inspect(&url, &SqlConfig::new()).await.unwrap();
    assert_eq!(found.missing_file.as_deref(), Some(path.as_path()));
    assert_eq!(pending_versions(&found), all_versions());
    assert_eq!(status(&found, "connection"), Some(CheckStatus::Warning));
    assert!(!path.exists(), "inspect created {}", path.display());
    for suffix in ["-wal", "-shm", "-journal"] {
        let side = format!("{}{suffix}", path.display());
        assert!(!std::path::Path::new(&side).exists(), "{side}");
    }
}

#[tokio::test]
async fn in_memory_sqlite_is_reported_as_such() {
    let found = inspect("sqlite::memory:", &SqlConfig::new()).await.unwrap();
    assert!(found.in_memory);
    let checks = found.checks();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].status, CheckStatus::Ok);
    assert!(checks[0].detail.contains("in-memory"), "{}", checks[0]);
}

#[tokio::test]
async fn bad_urls_and_prefixes_are_invalid_input_without_the_url() {
    let err = inspect("redis://:hunter2@127.0.0.1:1", &SqlConfig::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");
    let (url, _) = support::temp_sqlite_url();
    let err = inspect(&url, &config("Bad Prefix")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn dead_port_is_unavailable_with_a_sentence(url: &str) {
    let config = SqlConfig::new().with_acquire_timeout(Duration::from_secs(2));
    let err = inspect(url, &config).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let text = error_text(&err);
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(!text.contains("://"), "the URL was repeated: {text}");
    assert!(err.to_string().contains("the database"), "{err}");
}

/// The server tests: the shared tables are current; a fresh prefix has everything pending and
/// is left without a table; an old version reports what the next open applies; a password is
/// never printed.
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers {
    use super::*;
    use memory_sql::sqlx::{self, AssertSqlSafe};

    /// The names of the tables of `prefix` on the server of `url`.
    async fn tables(url: &str, prefix: &str) -> Vec<String> {
        let like = format!("{prefix}%");
        if url.starts_with("postgres") {
            #[cfg(feature = "postgres")]
            {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let names: Vec<String> = sqlx::query_scalar(
                    "SELECT tablename::text FROM pg_catalog.pg_tables \
                     WHERE schemaname = ANY(current_schemas(false)) AND tablename LIKE $1",
                )
                .bind(&like)
                .fetch_all(&pool)
                .await
                .unwrap();
                return names;
            }
        }
        #[cfg(feature = "mysql")]
        {
            let pool = sqlx::MySqlPool::connect(url).await.unwrap();
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name LIKE ?",
            )
            .bind(&like)
            .fetch_all(&pool)
            .await
            .unwrap();
            return names;
        }
        #[allow(unreachable_code)]
        Vec::new()
    }

    async fn drop_tables(url: &str, prefix: &str) {
        for table in tables(url, prefix).await {
            let sql = format!("DROP TABLE IF EXISTS {table}");
            if url.starts_with("postgres") {
                #[cfg(feature = "postgres")]
                {
                    let pool = sqlx::PgPool::connect(url).await.unwrap();
                    sqlx::query(AssertSqlSafe(format!("{sql} CASCADE")))
                        .execute(&pool)
                        .await
                        .unwrap();
                }
            } else {
                #[cfg(feature = "mysql")]
                {
                    let pool = sqlx::MySqlPool::connect(url).await.unwrap();
                    sqlx::query(AssertSqlSafe(sql))
                        .execute(&pool)
                        .await
                        .unwrap();
                }
            }
        }
    }

    async fn whole_story(url: &str, server: &str) {
        // The shared tables, opened (so migrated) by the suites: current.
        let store = SqlStore::builder(url)
            .table_prefix(support::shared_prefix())
            .connect()
            .await
            .unwrap();
        store.close().await;
        let found = inspect(url, &config(&support::shared_prefix()))
            .await
            .unwrap();
        assert_eq!(found.schema_version, SCHEMA_VERSION);
        assert!(found.pending.is_empty());
        assert!(found.journal_mode.is_none() && found.busy_timeout.is_none());
        let version = found.server_version.clone().unwrap();
        assert!(version.starts_with(server), "{version}");
        let checks: Vec<Check> = found.checks();
        assert_eq!(checks.len(), 3, "{checks:?}");
        assert!(
            checks.iter().all(|c| c.status == CheckStatus::Ok),
            "{checks:?}"
        );

        // A fresh prefix: everything pending, and still no table afterwards.
        let prefix = fresh_prefix();
        let found = inspect(url, &config(&prefix)).await.unwrap();
        assert_eq!(found.schema_version, 0);
        assert_eq!(pending_versions(&found), all_versions());
        assert_eq!(status(&found, "schema version"), Some(CheckStatus::Warning));
        assert_eq!(tables(url, &prefix).await, Vec::<String>::new());

        // An old version: the next open's migrations, and nothing applied.
        let store = SqlStore::builder(url)
            .config(config(&prefix).__schema_version(2))
            .connect()
            .await
            .unwrap();
        store.close().await;
        let before = tables(url, &prefix).await;
        assert!(!before.is_empty());
        let found = inspect(url, &config(&prefix)).await.unwrap();
        assert_eq!(found.schema_version, 2);
        assert_eq!(pending_versions(&found), [3, 4, 5, 6, 7, 8]);
        let store = SqlStore::builder(url)
            .config(config(&prefix).__schema_version(2))
            .connect()
            .await
            .unwrap();
        assert_eq!(store.schema_version().await.unwrap(), 2);
        store.close().await;
        let mut after = tables(url, &prefix).await;
        let mut before = before;
        before.sort();
        after.sort();
        assert_eq!(before, after);
        drop_tables(url, &prefix).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres() {
        whole_story(&support::postgres_url(), "PostgreSQL ").await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mariadb() {
        whole_story(&support::mysql_url(), "Maria").await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_dead_port_and_password() {
        dead_port_is_unavailable_with_a_sentence("postgres://postgres:hunter2@127.0.0.1:1/test")
            .await;
        // The local server trusts every connection: the password is accepted and never shown.
        let url = support::postgres_url().replacen("postgres@", "postgres:hunter2@", 1);
        assert!(url.contains("hunter2"), "{url}");
        let found = inspect(&url, &config(&support::shared_prefix()))
            .await
            .unwrap();
        let text = format!("{found:?} {:?}", found.checks());
        assert!(!text.contains("hunter2"), "{text}");
        // A database that does not exist: a sentence, not the URL.
        let missing = url.replacen("/test", "/no_such_database_amdoc", 1);
        let err = inspect(&missing, &SqlConfig::new()).await.unwrap_err();
        let text = error_text(&err);
        assert!(!text.contains("hunter2") && !text.contains("://"), "{text}");
        assert!(err.to_string().contains("no_such_database_amdoc"), "{err}");
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mariadb_dead_port() {
        dead_port_is_unavailable_with_a_sentence("mysql://root:hunter2@127.0.0.1:1/test").await;
        dead_port_is_unavailable_with_a_sentence("mariadb://root:hunter2@127.0.0.1:1/test").await;
    }
}
