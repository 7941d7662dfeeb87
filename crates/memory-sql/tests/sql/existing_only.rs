//! `existing_only` (`SchemaMode::RequireCurrent`): an open that creates nothing and migrates
//! nothing. A missing SQLite file, a prefix without tables, tables at an old version are typed
//! errors whose sentences say what to check, and the database is left exactly as it was; a
//! current database opens and works as with the default open.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::{ChatMessage, ErrorKind, HistoryStore, Scope, Window};
use memory_sql::{SCHEMA_VERSION, SchemaMode, SqlConfig, SqlStore, sqlx};

use crate::support;
use crate::support::Raw;

/// A table prefix no other test uses.
fn fresh_prefix() -> String {
    format!(
        "amexo_{}_",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

#[tokio::test]
async fn a_missing_sqlite_file_is_not_found_and_is_not_created() {
    let (url, path) = support::temp_sqlite_url();
    let err = refused(&url, SqlConfig::new(), ErrorKind::NotFound).await;
    assert!(err.contains("there is no SQLite file at"), "{err}");
    assert!(!path.exists(), "the file was created");
    let wal = path.with_extension("db-wal");
    assert!(!wal.exists());
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let (url, _path) = support::temp_sqlite_url();
    let config = SqlConfig::new().with_table_prefix("new_");
    open_default(&url, config.clone()).await;
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO new_schema_migrations (version, name, applied_at) VALUES (999, 'x', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let err = refused(&url, config, ErrorKind::Unsupported).await;
    assert!(err.contains("schema version 999, newer"), "{err}");
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
async fn in_memory_sqlite_has_no_tables() {
    refused("sqlite::memory:", SqlConfig::new(), ErrorKind::NotFound).await;
}

/// The names of the tables of `prefix` in the database of `url`.
async fn tables(url: &str, prefix: &str) -> Vec<String> {
    let sql = if url.starts_with("sqlite") {
        format!("SELECT name FROM sqlite_master WHERE name LIKE '{prefix}%' ORDER BY name")
    } else if url.starts_with("postgres") {
        format!(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = ANY(current_schemas(false)) AND table_name LIKE '{prefix}%' \
             ORDER BY table_name"
        )
    } else {
        format!(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name LIKE '{prefix}%' ORDER BY table_name"
        )
    };
    let raw = Raw::connect(url).await;
    let names = raw.texts(&sql).await;
    raw.close().await;
    names
}

/// Opens `url` with `config` as the default open does (creating or migrating its tables), and
/// closes it.
async fn open_default(url: &str, config: SqlConfig) {
    SqlStore::builder(url)
        .config(config)
        .connect()
        .await
        .unwrap()
        .close()
        .await;
}

/// Opens `url` with `config` made `existing_only`, which must be refused with an error of
/// `kind`; returns the error's sentence.
async fn refused(url: &str, config: SqlConfig, kind: ErrorKind) -> String {
    let err = SqlStore::builder(url)
        .config(config.existing_only())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
    err.to_string()
}

/// The whole story on the engine of `url`: tables of another prefix only, tables at an old
/// version, and current tables.
async fn whole_story(url: &str) {
    // A database of another application: the tables of another prefix only.
    let prefix = fresh_prefix();
    open_default(url, SqlConfig::new().with_table_prefix(fresh_prefix())).await;
    let err = refused(
        url,
        SqlConfig::new().with_table_prefix(&prefix),
        ErrorKind::NotFound,
    )
    .await;
    assert!(
        err.contains(&format!("no agent-memory tables with prefix {prefix:?}")),
        "{err}"
    );
    assert!(err.contains("check the URL and the prefix"), "{err}");
    assert!(tables(url, &prefix).await.is_empty(), "tables were created");

    // Tables at an old version: refused, and they stay old.
    let old = SqlConfig::new().with_table_prefix(fresh_prefix());
    open_default(url, old.clone().__schema_version(3)).await;
    let before = tables(url, old.table_prefix()).await;
    let err = refused(url, old.clone(), ErrorKind::Unsupported).await;
    assert!(
        err.contains(&format!(
            "at schema version 3 and this build needs version {SCHEMA_VERSION}"
        )),
        "{err}"
    );
    assert!(err.contains("4 (session_nonce)"), "{err}");
    assert!(err.contains("agent-memory upgrade"), "{err}");
    assert_eq!(tables(url, old.table_prefix()).await, before);
    let check = SqlStore::builder(url)
        .config(old.clone().__schema_version(3))
        .connect()
        .await
        .unwrap();
    assert_eq!(
        check.schema_version().await.unwrap(),
        3,
        "the schema was migrated"
    );
    check.close().await;
    // The default open still migrates them; then existing_only opens them.
    open_default(url, old.clone()).await;
    let store = SqlStore::builder(url)
        .config(old.existing_only())
        .connect()
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    store.close().await;

    current_database_works(url, &fresh_prefix()).await;
}

#[tokio::test]
async fn sqlite() {
    let (url, _path) = support::temp_sqlite_url();
    whole_story(&url).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres() {
    whole_story(&support::postgres_url()).await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mariadb() {
    whole_story(&support::mysql_url()).await;
}
