//! `existing_only` (`SchemaMode::RequireCurrent`): an open that creates nothing and migrates
//! nothing. A missing SQLite file, a prefix without tables, tables at an old version are typed
//! errors whose sentences say what to check, and the database is left exactly as it was; a
//! current database opens and works as with the default open.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod common;

use memory_core::{ChatMessage, ErrorKind, HistoryStore, Scope, Window};
use memory_sql::{SCHEMA_VERSION, SchemaMode, SqlConfig, SqlStore};

/// A table prefix no other test uses.
fn fresh_prefix() -> String {
    format!(
        "amexo_{}_",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

#[tokio::test]
async fn a_missing_sqlite_file_is_not_found_and_is_not_created() {
    let (url, path) = common::temp_sqlite_url();
    let err = SqlStore::builder(&url)
        .existing_only()
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains("there is no SQLite file at"),
        "{err}"
    );
    assert!(!path.exists(), "the file was created");
    let wal = path.with_extension("db-wal");
    assert!(!wal.exists());
}

#[tokio::test]
async fn a_sqlite_file_without_the_tables_is_not_found_and_gets_none() {
    let (url, path) = common::temp_sqlite_url();
    // A file of another application: the tables of prefix `app_` only.
    SqlStore::builder(&url)
        .table_prefix("app_")
        .connect()
        .await
        .unwrap()
        .close()
        .await;
    let err = SqlStore::builder(&url)
        .table_prefix("apq_")
        .existing_only()
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string()
            .contains("no agent-memory tables with prefix \"apq_\""),
        "{err}"
    );
    assert!(err.to_string().contains("check the URL and the prefix"));
    let pool = memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap();
    let n: i64 = memory_sql::sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'apq_%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(n, 0, "tables were created");
    drop(path);
}

#[tokio::test]
async fn an_old_schema_is_refused_and_stays_old() {
    let (url, _path) = common::temp_sqlite_url();
    let config = SqlConfig::new().with_table_prefix("old_");
    let store = SqlStore::builder(&url)
        .config(config.clone().__schema_version(3))
        .connect()
        .await
        .unwrap();
    store.close().await;
    let err = SqlStore::builder(&url)
        .config(config.clone().existing_only())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "at schema version 3 and this build needs version {SCHEMA_VERSION}"
        )),
        "{text}"
    );
    assert!(text.contains("4 (session_nonce)"), "{text}");
    assert!(text.contains("agent-memory upgrade"), "{text}");
    let pool = memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap();
    let max: i64 = memory_sql::sqlx::query_scalar("SELECT MAX(version) FROM old_schema_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(max, 3, "the schema was migrated");
    pool.close().await;
    // The default open still migrates it; then existing_only opens it.
    SqlStore::builder(&url)
        .config(config.clone())
        .connect()
        .await
        .unwrap()
        .close()
        .await;
    let store = SqlStore::builder(&url)
        .config(config.existing_only())
        .connect()
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let (url, _path) = common::temp_sqlite_url();
    SqlStore::builder(&url)
        .table_prefix("new_")
        .connect()
        .await
        .unwrap()
        .close()
        .await;
    let pool = memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap();
    memory_sql::sqlx::query(
        "INSERT INTO new_schema_migrations (version, name, applied_at) VALUES (999, 'x', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let err = SqlStore::builder(&url)
        .table_prefix("new_")
        .existing_only()
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(
        err.to_string().contains("schema version 999, newer"),
        "{err}"
    );
}

async fn current_database_works(url: &str, prefix: &str) {
    let seeded = SqlStore::builder(url)
        .table_prefix(prefix)
        .connect()
        .await
        .unwrap();
    let scope = Scope::session("s1").unwrap();
    seeded
        .append(&scope, &[ChatMessage::user("hello")])
        .await
        .unwrap();
    seeded.close().await;
    let config = SqlConfig::new().with_table_prefix(prefix).existing_only();
    assert_eq!(config.schema_mode(), SchemaMode::RequireCurrent);
    let store = SqlStore::builder(url)
        .config(config)
        .connect()
        .await
        .unwrap();
    let read = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(read.len(), 1);
    store
        .append(&scope, &[ChatMessage::assistant("hi")])
        .await
        .unwrap();
    assert_eq!(store.read(&scope, Window::All).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_current_sqlite_file_opens_and_works() {
    let (url, _path) = common::temp_sqlite_url();
    current_database_works(&url, "cur_").await;
}

#[tokio::test]
async fn in_memory_sqlite_has_no_tables() {
    let err = SqlStore::builder("sqlite::memory:")
        .existing_only()
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers {
    use super::*;
    use memory_sql::sqlx;

    /// The names of the tables of `prefix` on the server of `url` (information_schema).
    async fn tables(url: &str, prefix: &str) -> Vec<String> {
        let like = format!("{prefix}%");
        if url.starts_with("postgres") {
            #[cfg(feature = "postgres")]
            {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                return sqlx::query_scalar(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = ANY(current_schemas(false)) AND table_name LIKE $1",
                )
                .bind(&like)
                .fetch_all(&pool)
                .await
                .unwrap();
            }
        }
        #[cfg(feature = "mysql")]
        {
            let pool = sqlx::MySqlPool::connect(url).await.unwrap();
            return sqlx::query_scalar(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name LIKE ?",
            )
            .bind(&like)
            .fetch_all(&pool)
            .await
            .unwrap();
        }
        #[allow(unreachable_code)]
        Vec::new()
    }

    async fn whole_story(url: &str) {
        let prefix = fresh_prefix();
        let err = SqlStore::builder(url)
            .table_prefix(&prefix)
            .existing_only()
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(
            err.to_string()
                .contains(&format!("no agent-memory tables with prefix {prefix:?}")),
            "{err}"
        );
        assert!(tables(url, &prefix).await.is_empty(), "tables were created");

        let old = fresh_prefix();
        SqlStore::builder(url)
            .config(SqlConfig::new().with_table_prefix(&old).__schema_version(3))
            .connect()
            .await
            .unwrap()
            .close()
            .await;
        let before = tables(url, &old).await;
        let err = SqlStore::builder(url)
            .table_prefix(&old)
            .existing_only()
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("at schema version 3"), "{err}");
        assert_eq!(tables(url, &old).await, before);
        let check = SqlStore::builder(url)
            .config(SqlConfig::new().with_table_prefix(&old).__schema_version(3))
            .connect()
            .await
            .unwrap();
        assert_eq!(check.schema_version().await.unwrap(), 3);

        current_database_works(url, &fresh_prefix()).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres() {
        whole_story(&common::postgres_url()).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mariadb() {
        whole_story(&common::mysql_url()).await;
    }
}
