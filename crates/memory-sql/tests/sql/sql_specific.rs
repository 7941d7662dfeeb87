//! Behaviour specific to the SQL stores (several processes writing one thread are in
//! `processes.rs`): schema upgrades and refusals, table prefix validation, secrets in errors,
//! large threads and batches, corrupt rows, round trips.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::{
    ChatMessage, ErrorKind, FnTokenCounter, HistoryStore, MessageId, PageRequest, Scope,
    SessionStore, StoredMessage, Window,
};
use memory_sql::sqlx::{self, AssertSqlSafe};
use memory_sql::{Backend, SCHEMA_VERSION, SqlConfig, SqlStore, SqlStoreBuilder};

use crate::support;
use crate::support::{Raw, open, random_tenant};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A database the SQL-specific tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    SqliteFile,
    Postgres,
    MySql,
}

impl Target {
    /// A URL for a fresh database (SQLite) or the test server.
    fn url(self) -> String {
        match self {
            Target::SqliteFile => support::temp_sqlite_url().0,
            Target::Postgres => support::postgres_url(),
            Target::MySql => support::mysql_url(),
        }
    }
}

/// One test per target, in a module named after what it checks (`$test::sqlite_file`,
/// `$test::postgres`, `$test::mysql`: those listed), each running `$check` on its target.
macro_rules! on_targets {
    (#[$attr:meta] $test:ident: $check:ident on $($case:ident: $target:ident),+ $(,)?) => {
        mod $test {
            $(
                #[$attr]
                async fn $case() {
                    super::$check(super::Target::$target).await;
                }
            )+
        }
    };
}

/// A prefix no other test uses, for tests that inspect or drop tables.
fn unique_prefix(tag: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{tag}_{}_", &id[..12])
}

/// Opening `builder` fails with `InvalidInput`; `case` names the case in the failure.
async fn refused_at_open(builder: SqlStoreBuilder, case: &str) {
    let err = builder.connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{case}: {err}");
}

/// Tables of a test's own on one database, with a thread already written.
struct Written {
    /// The tables' prefix.
    prefix: String,
    /// A store on the tables.
    store: SqlStore,
    /// A connection of its own to the same database.
    raw: Raw,
    /// The thread written.
    scope: Scope,
}

/// Tables of their own (`tag`) on `target`, where the thread `session` holds one user message
/// per text of `texts`.
async fn written(target: Target, tag: &str, session: &str, texts: &[&str]) -> Written {
    let url = target.url();
    let prefix = unique_prefix(tag);
    let store = open(&url, &prefix).await;
    let raw = Raw::connect(&url).await;
    let scope = Scope::session(session).unwrap();
    let messages: Vec<ChatMessage> = texts.iter().copied().map(ChatMessage::user).collect();
    store.append(&scope, &messages).await.unwrap();
    Written {
        prefix,
        store,
        raw,
        scope,
    }
}

/// Whether the index `name` of `table` exists.
async fn has_index(raw: &Raw, table: &str, name: &str) -> bool {
    let sql = match raw {
        Raw::Sqlite(_) => {
            format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = '{name}'")
        }
        Raw::Postgres(_) => format!("SELECT COUNT(*) FROM pg_indexes WHERE indexname = '{name}'"),
        Raw::MySql(_) => format!(
            "SELECT COUNT(*) FROM information_schema.statistics \
             WHERE table_schema = DATABASE() AND table_name = '{table}' \
             AND index_name = '{name}'"
        ),
    };
    raw.int(&sql).await > 0
}

// ---------------------------------------------------------------------------------------------
// Schema versions
// ---------------------------------------------------------------------------------------------

async fn upgrade_from_v1(target: Target) {
    let url = target.url();
    let prefix = unique_prefix("amup");
    let raw = Raw::connect(&url).await;
    let index = format!("{prefix}messages_active");
    let messages_table = format!("{prefix}messages");

    // A database that holds only schema v1.
    let v1 = SqlStore::builder(&url)
        .config(
            SqlConfig::new()
                .with_table_prefix(&prefix)
                .__schema_version(1),
        )
        .connect()
        .await
        .unwrap();
    assert_eq!(v1.schema_version().await.unwrap(), 1);
    assert!(!has_index(&raw, &messages_table, &index).await);
    v1.close().await;
    // This build's statements need the current schema: write the data with it, then take the
    // tables back to v1 (the v2 index, the v3, v4 and v5 columns and the v6 and v7 tables dropped,
    // their records removed).
    let v1 = open(&url, &prefix).await;
    let scope = Scope::session("upgrade")
        .unwrap()
        .with_tenant(random_tenant())
        .unwrap();
    let messages: Vec<ChatMessage> = (0..5)
        .map(|i| ChatMessage::user(format!("v1 message {i}")))
        .collect();
    v1.append(&scope, &messages).await.unwrap();
    v1.archive(&scope, 1..=2).await.unwrap();
    let state = serde_json::json!({"kept": true});
    v1.save(&scope, &state, None).await.unwrap();
    v1.close().await;
    raw.exec(&match target {
        Target::MySql => format!("DROP INDEX {index} ON {messages_table}"),
        _ => format!("DROP INDEX {index}"),
    })
    .await;
    raw.exec(&format!(
        "ALTER TABLE {prefix}threads DROP COLUMN first_active"
    ))
    .await;
    raw.exec(&format!(
        "ALTER TABLE {prefix}sessions DROP COLUMN last_nonce"
    ))
    .await;
    raw.exec(&format!("ALTER TABLE {prefix}threads DROP COLUMN epoch"))
        .await;
    // v7: the vector tables (and with them v8's compact vectors' column).
    raw.exec(&format!("DROP TABLE {prefix}vectors")).await;
    raw.exec(&format!("DROP TABLE {prefix}vector_dimensions"))
        .await;
    // v6: the text table (and, on SQLite, its FTS5 table; its triggers go with the table).
    raw.exec(&format!("DROP TABLE IF EXISTS {prefix}texts_fts"))
        .await;
    raw.exec(&format!("DROP TABLE {prefix}texts")).await;
    raw.exec(&format!(
        "DELETE FROM {prefix}schema_migrations WHERE version > 1"
    ))
    .await;
    assert!(!has_index(&raw, &messages_table, &index).await);

    // Opening with this build upgrades it and keeps the data.
    let store = open(&url, &prefix).await;
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 8);
    assert!(has_index(&raw, &messages_table, &index).await);
    let all = store.read(&scope, Window::Everything).await.unwrap();
    let got: Vec<&ChatMessage> = all.iter().map(|m| &*m.message).collect();
    assert_eq!(got, messages.iter().collect::<Vec<_>>());
    assert_eq!(store.read(&scope, Window::All).await.unwrap().len(), 3);
    let loaded = store.load(&scope).await.unwrap().unwrap();
    assert_eq!((loaded.state, loaded.version), (state.clone(), 1));
    let versions = raw
        .int(&format!("SELECT COUNT(*) FROM {prefix}schema_migrations"))
        .await;
    assert_eq!(versions, 8, "one row per applied version");
    // v6 made the text table again, with its index.
    {
        use memory_core::lexical::{TextDocument, TextIndex, TextQuery};
        let texts = store.text_index().unwrap();
        let doc = TextDocument {
            id: uuid::Uuid::from_u128(1),
            text: "upgraded lantern".into(),
            payload: serde_json::Map::new(),
        };
        texts.upsert(&scope, &[doc]).await.unwrap();
        let found = texts
            .search(&scope, &TextQuery::new("lantern", 3))
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{target:?}");
    }
    // v7 made the vector tables again.
    {
        use memory_core::{VectorPoint, VectorQuery, VectorStore};
        let vectors = store.vector_store().unwrap();
        let point = VectorPoint {
            id: uuid::Uuid::from_u128(1),
            vector: vec![1.0, 0.0],
            payload: serde_json::Map::new(),
        };
        vectors.upsert(&scope, &[point]).await.unwrap();
        let found = vectors
            .search(&scope, &VectorQuery::new(vec![1.0, 0.0], 3))
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{target:?}");
    }
    // v3 starts the thread's active window at its first active message.
    let first_active = raw
        .int(&format!("SELECT first_active FROM {prefix}threads"))
        .await;
    assert_eq!(first_active, 3);
    // v5 gives the existing thread an epoch (never 0) and keeps its indexes (SQLite rebuilds
    // the table).
    let epoch = raw.int(&format!("SELECT epoch FROM {prefix}threads")).await;
    assert!(epoch > 0, "{epoch}");
    for index in ["tenant", "expiry"] {
        let (table, index) = (
            format!("{prefix}threads"),
            format!("{prefix}threads_{index}"),
        );
        assert!(has_index(&raw, &table, &index).await, "{index}");
    }
    let read = store.read_since(&scope, Window::All, None).await.unwrap();
    assert_eq!(read.cursor.epoch(), epoch.unsigned_abs());
    assert_eq!(read.messages.len(), 3);
    // And it keeps working on the upgraded schema.
    let out = store
        .append(&scope, &[ChatMessage::assistant("after the upgrade")])
        .await
        .unwrap();
    assert_eq!(out.seqs, vec![6]);
    let since = store
        .read_since(&scope, Window::All, Some(read.cursor))
        .await
        .unwrap();
    assert_eq!(since.delta, memory_core::Delta::Appended);
    assert_eq!(since.messages.len(), 1);
    // v4: a session of the old schema saves on (its row has no nonce yet), and once deleted
    // it is re-created above its last version.
    assert_eq!(store.save(&scope, &state, Some(1)).await.unwrap(), 2);
    assert!(store.delete(&scope).await.unwrap());
    assert_eq!(store.save(&scope, &state, None).await.unwrap(), 3);
    store.close().await;
    raw.drop_tables(&prefix).await;
}

on_targets!(
    #[tokio::test]
    v1_database_is_upgraded_with_data_kept: upgrade_from_v1
        on sqlite_file: SqliteFile, postgres: Postgres, mysql: MySql
);

async fn newer_schema_is_refused(target: Target) {
    let url = target.url();
    let prefix = unique_prefix("amnew");
    let raw = Raw::connect(&url).await;
    let store = open(&url, &prefix).await;
    let scope = Scope::session("newer").unwrap();
    store
        .append(&scope, &[ChatMessage::user("written by this build")])
        .await
        .unwrap();
    store.close().await;
    // A newer build migrated the database to version 99.
    raw.exec(&format!(
        "INSERT INTO {prefix}schema_migrations (version, name, applied_at) \
         VALUES (99, 'from the future', 0)"
    ))
    .await;

    let err = SqlStore::builder(&url)
        .table_prefix(&prefix)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("99") && text.contains(&SCHEMA_VERSION.to_string()),
        "the error names both versions: {text}"
    );
    // Nothing was touched.
    assert_eq!(
        raw.int(&format!("SELECT COUNT(*) FROM {prefix}schema_migrations"))
            .await,
        i64::from(SCHEMA_VERSION) + 1
    );
    assert_eq!(
        raw.int(&format!(
            "SELECT MAX(version) FROM {prefix}schema_migrations"
        ))
        .await,
        99
    );
    assert_eq!(
        raw.int(&format!("SELECT COUNT(*) FROM {prefix}messages"))
            .await,
        1
    );
    raw.drop_tables(&prefix).await;
}

on_targets!(
    #[tokio::test]
    newer_schema_is_refused_and_untouched: newer_schema_is_refused
        on sqlite_file: SqliteFile, postgres: Postgres, mysql: MySql
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_opening_at_once_migrate_once() {
    for target in [Target::Postgres, Target::MySql, Target::SqliteFile] {
        let url = target.url();
        let prefix = unique_prefix("amrace");
        let opens = (0..4).map(|_| {
            let (url, prefix) = (url.clone(), prefix.clone());
            tokio::spawn(async move { open(&url, &prefix).await })
        });
        for handle in opens.collect::<Vec<_>>() {
            let store = handle.await.unwrap();
            assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        }
        let raw = Raw::connect(&url).await;
        assert_eq!(
            raw.int(&format!("SELECT COUNT(*) FROM {prefix}schema_migrations"))
                .await,
            i64::from(SCHEMA_VERSION),
            "{target:?}: each version applied once"
        );
        raw.drop_tables(&prefix).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and secrets
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn bad_table_prefixes_are_refused() {
    let too_long = "a".repeat(33);
    for bad in [
        "a'b",
        "a;drop table x",
        "A",
        "",
        too_long.as_str(),
        "a\"b",
        "a b",
        "1abc",
        "a-b",
    ] {
        // Checked before anything reaches a server: an unreachable one is not even tried.
        for url in ["sqlite::memory:", "postgres://postgres@127.0.0.1:1/test"] {
            refused_at_open(
                SqlStore::builder(url).table_prefix(bad),
                &format!("{url} {bad:?}"),
            )
            .await;
        }
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let err = SqlStore::from_sqlite_pool(pool, SqlConfig::new().with_table_prefix(bad))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}: {err}");
    }
    let ok = SqlStore::builder("sqlite::memory:")
        .table_prefix("a".repeat(32))
        .connect()
        .await
        .unwrap();
    assert_eq!(ok.table_prefix().len(), 32);
}

fn error_chain(err: &memory_core::Error) -> String {
    let mut text = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&format!(" | {s} | {s:?}"));
        source = s.source();
    }
    text
}

#[tokio::test]
async fn passwords_never_appear_in_errors() {
    for url in [
        "postgres://postgres:hunter2@127.0.0.1:1/test",
        "mysql://root:hunter2@127.0.0.1:1/test",
    ] {
        let started = Instant::now();
        let err = SqlStore::connect(url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{url}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a dead server fails fast"
        );
        let chain = error_chain(&err);
        assert!(!chain.contains("hunter2"), "{chain}");
        assert!(chain.contains("***"), "the URL is shown masked: {chain}");
        // A refused connection may pass; the error names the database and the operation.
        assert!(err.is_temporary(), "{url}: {err}");
        assert_eq!(err.operation(), Some("open"), "{err}");
        let backend = url.split(':').next().unwrap();
        assert_eq!(err.backend(), Some(backend), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("unavailable ({backend} open): ")),
            "{err}"
        );
    }
    // A server that refuses the password.
    let url = support::mysql_url().replacen("root@", "root:hunter2@", 1);
    let err = SqlStore::connect(&url).await.unwrap_err();
    let chain = error_chain(&err);
    assert!(!chain.contains("hunter2"), "{chain}");
    // A malformed URL with a password.
    let err = SqlStore::connect("postgres://u:hunter2@127.0.0.1:notaport/db")
        .await
        .unwrap_err();
    assert!(
        !error_chain(&err).contains("hunter2"),
        "{}",
        error_chain(&err)
    );
    let err = SqlStore::connect("oracle://u:hunter2@h/db")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!error_chain(&err).contains("hunter2"));
}

#[tokio::test]
async fn a_pool_that_cannot_connect_or_is_closed_is_unavailable() {
    // The application's pool, pointing at a dead server: nothing can be opened.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://postgres:hunter2@127.0.0.1:1/test")
        .unwrap();
    let err = SqlStore::from_postgres_pool(pool, SqlConfig::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(!error_chain(&err).contains("hunter2"));
    // A closed store.
    let store = SqlStore::in_memory().await.unwrap();
    store.close().await;
    let scope = Scope::session("closed").unwrap();
    let err = store.read(&scope, Window::All).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    // The application closed it: retrying cannot help.
    assert!(!err.is_temporary(), "{err}");
    assert_eq!(
        (err.backend(), err.operation()),
        (Some("sqlite"), Some("read"))
    );
    assert!(
        err.to_string()
            .starts_with("unavailable (sqlite read): read: "),
        "{err}"
    );
    let err = store
        .append(&scope, &[ChatMessage::user("x")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

#[tokio::test]
async fn debug_never_prints_passwords() {
    // The test server trusts local connections, so any password is accepted.
    let url = support::postgres_url().replacen("postgres@", "postgres:hunter2@", 1);
    let store = SqlStore::builder(&url)
        .table_prefix(support::shared_prefix())
        .connect()
        .await
        .unwrap();
    let debug = format!("{store:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("postgres:***@"), "{debug}");
    let builder = SqlStore::builder(&url);
    assert!(!format!("{builder:?}").contains("hunter2"));
    assert_eq!(store.backend(), Backend::Postgres);
}

// ---------------------------------------------------------------------------------------------
// SQLite specifics
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn sqlite_file_survives_a_restart_in_wal_mode() {
    let (url, path) = support::temp_sqlite_url();
    let scope = Scope::session("restart").unwrap();
    {
        let store = SqlStore::connect(&url).await.unwrap();
        store
            .append(&scope, &[ChatMessage::user("remember me")])
            .await
            .unwrap();
        store
            .save(&scope, &serde_json::json!({"n": 1}), None)
            .await
            .unwrap();
        store.close().await;
    }
    assert!(path.exists(), "the file was created");
    let store = SqlStore::connect(&url).await.unwrap();
    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(all[0].message.text(), "remember me");
    assert_eq!(store.load(&scope).await.unwrap().unwrap().version, 1);
    let raw = Raw::connect(&url).await;
    assert_eq!(raw.texts("PRAGMA journal_mode").await, ["wal"]);
}

/// Characters as tokens, so the expected windows are easy to compute.
fn char_counter() -> Arc<dyn memory_core::TokenCounter> {
    Arc::new(FnTokenCounter::new(|text: &str| text.len() as u32))
}

/// A store on `target`'s shared tables that counts characters (fast in a debug build), and
/// the scope `session` in a tenant of its own.
async fn char_counted(target: Target, session: &str) -> (SqlStore, Scope) {
    let store = SqlStore::builder(target.url())
        .table_prefix(support::shared_prefix())
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap();
    let scope = Scope::session(session)
        .unwrap()
        .with_tenant(random_tenant())
        .unwrap();
    (store, scope)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_budget_on_a_100k_message_thread_reads_the_window() {
    const TOTAL: usize = 100_000;
    let (url, _path) = support::temp_sqlite_url();
    let store = SqlStore::builder(&url)
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap();
    let scope = Scope::session("long").unwrap();
    let texts: Vec<String> = (0..TOTAL).map(|i| "x".repeat(i % 61)).collect();
    for chunk in texts.chunks(memory_core::MAX_BATCH_MESSAGES) {
        let batch: Vec<ChatMessage> = chunk.iter().map(ChatMessage::user).collect();
        store.append(&scope, &batch).await.unwrap();
    }
    // Archive the first half: the window is over active messages only.
    store.archive(&scope, 1..=50_000).await.unwrap();
    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.last_seq, count.active), (TOTAL as u64, 50_000));

    // The expected window: the newest run of messages whose counts fit in the budget.
    let tokens = |i: usize| 3 + "user".len() as u64 + (i % 61) as u64;
    for budget in [30_000u64, 0, 7, 1_000_000, 10_000_000] {
        let mut used = 0;
        let mut first = TOTAL;
        while first > 50_000 && used + tokens(first - 1) <= budget {
            used += tokens(first - 1);
            first -= 1;
        }
        let before = store.round_trips();
        let window = store
            .read(&scope, Window::TokenBudget(budget))
            .await
            .unwrap();
        let trips = store.round_trips() - before;
        let seqs: Vec<u64> = window.iter().map(|m| m.seq).collect();
        let expected: Vec<u64> = (first as u64 + 1..=TOTAL as u64).collect();
        assert_eq!(seqs, expected, "budget {budget}");
        let total: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
        assert_eq!(total, used, "budget {budget}");
        for m in &window {
            assert_eq!(m.message.text().len(), (m.seq as usize - 1) % 61);
        }
        if budget == 30_000 {
            // ~800 messages: one statement (the first page holds up to 1,024).
            assert!(trips <= 3, "a 30k-token window took {trips} queries");
        }
    }
}

#[tokio::test]
async fn corrupt_rows_are_skipped_or_serialization_errors() {
    for target in [Target::SqliteFile, Target::Postgres] {
        let Written {
            prefix,
            store,
            raw,
            scope,
        } = written(target, "amcor", "corrupt", &["a", "b"]).await;
        let empty = serde_json::json!({});
        store.save(&scope, &empty, None).await.unwrap();
        raw.exec(&format!(
            "UPDATE {prefix}messages SET body = 'not json' WHERE seq = 2"
        ))
        .await;
        raw.exec(&format!("UPDATE {prefix}sessions SET state = '{{broken'"))
            .await;
        // The undecodable message is left out of every read (with a warning); the intact one
        // is still read, so one bad row never makes the thread unreadable (D8).
        for window in [
            Window::All,
            Window::Last(1),
            Window::Last(2),
            Window::TokenBudget(1000),
            Window::Everything,
            Window::After(0),
        ] {
            let read = store.read(&scope, window).await.unwrap();
            let texts: Vec<String> = read.iter().map(|m| m.message.text()).collect();
            let expected: &[&str] = if window == Window::Last(1) {
                &[]
            } else {
                &["a"]
            };
            assert_eq!(texts, expected, "{window:?}");
        }
        store.archive(&scope, 2..=2).await.unwrap();
        let first = store.read(&scope, Window::All).await.unwrap();
        assert_eq!(first[0].message.text(), "a");
        let err = store.load(&scope).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
        // A scope whose stored parts are invalid ids.
        raw.exec(&format!("UPDATE {prefix}threads SET session_id = 'bad id'"))
            .await;
        let filter = memory_core::ScopeFilter::tenant(scope.tenant().clone());
        let err = store
            .list_threads(&filter, memory_core::PageRequest::first(10))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
        store.close().await;
        raw.drop_tables(&prefix).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Batches and round trips
// ---------------------------------------------------------------------------------------------

async fn large_batches(target: Target) {
    // The point is how statements are split, not token counting: count characters, which
    // is fast in a debug build.
    let (store, scope) = char_counted(target, "big").await;
    // 10,000 messages: 70,000 bind parameters, more than one statement may carry.
    let many: Vec<ChatMessage> = (0..memory_core::MAX_BATCH_MESSAGES)
        .map(|i| ChatMessage::user(format!("m{i}")))
        .collect();
    let out = store.append(&scope, &many).await.unwrap();
    assert_eq!(out.inserted, many.len());
    // 3 messages of 6 MiB: more than MariaDB's 16 MiB packet in one statement.
    let big: Vec<ChatMessage> = (0..3)
        .map(|i| ChatMessage::user(format!("{i}{}", "é".repeat(3 * 1024 * 1024))))
        .collect();
    let out = store.append(&scope, &big).await.unwrap();
    assert_eq!(out.inserted, 3);
    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(all.len(), many.len() + 3);
    support::assert_gap_free(&all);
    assert_eq!(*all.last().unwrap().message, big[2]);
    store.clear(&scope).await.unwrap();
}

on_targets!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    large_batches_are_split: large_batches
        on postgres: Postgres, mysql: MySql, sqlite_file: SqliteFile
);

/// Statements per operation, as documented in the README.
async fn round_trips(store: SqlStore, backend: Backend) {
    let scope = Scope::session("trips")
        .unwrap()
        .with_tenant(random_tenant())
        .unwrap();
    let mut measure = {
        let mut last = store.round_trips();
        move |now: u64| {
            let d = now - last;
            last = now;
            d
        }
    };
    let turn = |n: u32| {
        [
            ChatMessage::user(format!("q{n}")),
            ChatMessage::assistant(format!("a{n}")),
        ]
    };
    store.append(&scope, &turn(1)).await.unwrap();
    let new_thread = measure(store.round_trips());
    store.append(&scope, &turn(2)).await.unwrap();
    let existing = measure(store.round_trips());
    store
        .read(&scope, Window::TokenBudget(30_000))
        .await
        .unwrap();
    let budget = measure(store.round_trips());
    store.read(&scope, Window::Last(2)).await.unwrap();
    let last = measure(store.round_trips());
    store.count(&scope).await.unwrap();
    let count = measure(store.round_trips());
    let v = store
        .save(&scope, &serde_json::json!({}), None)
        .await
        .unwrap();
    let create = measure(store.round_trips());
    store
        .save(&scope, &serde_json::json!({"a": 1}), Some(v))
        .await
        .unwrap();
    let save = measure(store.round_trips());
    store.load(&scope).await.unwrap();
    let load = measure(store.round_trips());
    println!(
        "{backend}: append (new thread) {new_thread}, append {existing}, \
         TokenBudget read {budget}, Last read {last}, count {count}, session create {create}, \
         session save {save}, session load {load}"
    );
    // PostgreSQL: one statement between `BEGIN` and `COMMIT`.
    let (expected_new, expected_existing) = match backend {
        Backend::Postgres => (3, 3),
        Backend::MySql => (6, 6),
        _ => (5, 6),
    };
    assert_eq!((new_thread, existing), (expected_new, expected_existing));
    assert_eq!((budget, last, count), (1, 1, 1));
    // A create is one INSERT (a re-create after delete or expiry adds a probe and an UPDATE).
    assert_eq!((create, save, load), (1, 1, 1));
    // A cursor read is one statement, whole or appended.
    let whole = store
        .read_since(&scope, Window::TokenBudget(30_000), None)
        .await
        .unwrap();
    let read_whole = measure(store.round_trips());
    store
        .append(&scope, &[ChatMessage::user("q3")])
        .await
        .unwrap();
    measure(store.round_trips());
    let since = store
        .read_since(&scope, Window::TokenBudget(30_000), Some(whole.cursor))
        .await
        .unwrap();
    let read_appended = measure(store.round_trips());
    println!("{backend}: read_since whole {read_whole}, read_since appended {read_appended}");
    assert_eq!(since.messages.len(), 1);
    assert_eq!((read_whole, read_appended), (1, 1));
    // Export reads: one statement per page.
    let page = store.read_page(&scope, 1, 2).await.unwrap();
    let read_page = measure(store.round_trips());
    assert_eq!(page.iter().map(|m| m.seq).collect::<Vec<_>>(), [2, 3]);
    let tenants = HistoryStore::list_tenants(&store, PageRequest::first(2))
        .await
        .unwrap();
    let thread_tenants = measure(store.round_trips());
    assert!(!tenants.items.is_empty());
    let tenants = SessionStore::list_tenants(&store, PageRequest::first(2))
        .await
        .unwrap();
    let session_tenants = measure(store.round_trips());
    assert!(!tenants.items.is_empty());
    println!(
        "{backend}: read_page {read_page}, list_tenants (threads) {thread_tenants}, \
         list_tenants (sessions) {session_tenants}"
    );
    assert_eq!((read_page, thread_tenants, session_tenants), (1, 1, 1));
    store.clear(&scope).await.unwrap();
    SessionStore::delete(&store, &scope).await.unwrap();
}

#[tokio::test]
async fn round_trips_per_operation() {
    round_trips(support::sqlite_file_store().await, Backend::Sqlite).await;
    round_trips(SqlStore::in_memory().await.unwrap(), Backend::Sqlite).await;
    round_trips(support::postgres_store().await, Backend::Postgres).await;
    round_trips(support::mysql_store().await, Backend::MySql).await;
}

// ---------------------------------------------------------------------------------------------
// The application's pools
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn stores_wrap_the_applications_pools() {
    let config = || SqlConfig::new().with_table_prefix(support::shared_prefix());
    let (sqlite_url, _) = support::temp_sqlite_url();
    let sqlite = sqlx::sqlite::SqlitePoolOptions::new()
        .connect_with(
            sqlite_url
                .parse::<sqlx::sqlite::SqliteConnectOptions>()
                .unwrap()
                .create_if_missing(true),
        )
        .await
        .unwrap();
    let pg = sqlx::PgPool::connect(&support::postgres_url())
        .await
        .unwrap();
    let my = sqlx::MySqlPool::connect(&support::mysql_url())
        .await
        .unwrap();
    let stores = [
        SqlStore::from_sqlite_pool(sqlite, config()).await.unwrap(),
        SqlStore::from_postgres_pool(pg, config()).await.unwrap(),
        SqlStore::from_mysql_pool(my, config()).await.unwrap(),
    ];
    for store in stores {
        let scope = Scope::session("pool")
            .unwrap()
            .with_tenant(random_tenant())
            .unwrap();
        let message = ChatMessage::user("via the application's pool")
            .with_id(MessageId::new("fixed-id").unwrap());
        store
            .append(&scope, std::slice::from_ref(&message))
            .await
            .unwrap();
        let all = store.read(&scope, Window::All).await.unwrap();
        assert_eq!(*all[0].message, message);
        assert!(format!("{store:?}").contains("application's pool"));
        store.clear(&scope).await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Lock waits and operation timeouts
// ---------------------------------------------------------------------------------------------

/// A second connection that holds a lock on the store's tables until released.
enum Holder {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>),
    MySql(sqlx::pool::PoolConnection<sqlx::MySql>),
}

impl Holder {
    /// Takes SQLite's write lock, or locks every thread row of `prefix` on a server.
    async fn lock(raw: &Raw, prefix: &str) -> Holder {
        let lock_rows = format!("SELECT thread_key FROM {prefix}threads FOR UPDATE");
        let on_server = ["BEGIN", lock_rows.as_str()];
        // One pool connection of the engine's type, `statements` run on it, kept as `variant`.
        macro_rules! hold {
            ($variant:ident, $pool:expr, $statements:expr) => {{
                let mut conn = $pool.acquire().await.unwrap();
                for statement in $statements {
                    sqlx::query(AssertSqlSafe(statement))
                        .execute(&mut *conn)
                        .await
                        .unwrap();
                }
                Holder::$variant(conn)
            }};
        }
        match raw {
            Raw::Sqlite(p) => hold!(Sqlite, p, ["BEGIN IMMEDIATE"]),
            Raw::Postgres(p) => hold!(Postgres, p, on_server),
            Raw::MySql(p) => hold!(MySql, p, on_server),
        }
    }

    async fn release(self) {
        match self {
            Holder::Sqlite(mut c) => sqlx::query("ROLLBACK").execute(&mut *c).await.map(drop),
            Holder::Postgres(mut c) => sqlx::query("ROLLBACK").execute(&mut *c).await.map(drop),
            Holder::MySql(mut c) => sqlx::query("ROLLBACK").execute(&mut *c).await.map(drop),
        }
        .unwrap();
    }
}

/// An append blocked behind a lock another connection holds, on a store `configure`d from a
/// builder of `url` with tables of their own (tagged `tag`): it fails with `Timeout` after a
/// wait within `bounds`; once the lock is gone the thread is writable and holds nothing of the
/// refused append.
async fn blocked_append(
    target: Target,
    tag: &str,
    configure: impl FnOnce(SqlStoreBuilder) -> SqlStoreBuilder,
    bounds: std::ops::Range<Duration>,
    why: &str,
) {
    let url = target.url();
    let prefix = unique_prefix(tag);
    let store = configure(SqlStore::builder(&url).table_prefix(&prefix))
        .connect()
        .await
        .unwrap();
    let raw = Raw::connect(&url).await;
    let scope = Scope::session("blocked").unwrap();
    store
        .append(&scope, &[ChatMessage::user("first")])
        .await
        .unwrap();

    let holder = Holder::lock(&raw, &prefix).await;
    let started = Instant::now();
    let err = store
        .append(&scope, &[ChatMessage::user("blocked")])
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{target:?}: {err}");
    assert!(
        bounds.contains(&waited),
        "{target:?}: {why}; took {waited:?}"
    );
    holder.release().await;

    let out = store
        .append(&scope, &[ChatMessage::user("after")])
        .await
        .unwrap();
    assert_eq!(
        out.seqs,
        vec![2],
        "{target:?}: the refused append left nothing"
    );
    store.close().await;
    raw.drop_tables(&prefix).await;
}

/// A writer blocked by another transaction's lock fails with `Timeout` once its lock wait
/// (`busy_timeout`) is spent, at once: a lock-wait timeout is not retried like a deadlock.
async fn lock_wait_times_out_without_retries(target: Target) {
    let lock_wait = match target {
        // InnoDB counts its lock wait timeout in whole seconds.
        Target::MySql => Duration::from_secs(1),
        Target::SqliteFile | Target::Postgres => Duration::from_millis(400),
    };
    let why = format!("one lock wait of {lock_wait:?}, no retries");
    let bounds = lock_wait.mul_f32(0.8)..lock_wait * 3;
    blocked_append(
        target,
        "amlock",
        |b| b.busy_timeout(lock_wait),
        bounds,
        &why,
    )
    .await;
}

on_targets!(
    #[tokio::test]
    lock_wait_times_out_without_retries: lock_wait_times_out_without_retries
        on sqlite_file: SqliteFile, postgres: Postgres, mysql: MySql
);

/// An operation that cannot finish (here: stuck behind a lock held far longer than the lock
/// wait allows) fails with `Timeout` after the operation timeout, and the store recovers.
async fn operation_timeout_bounds_a_stuck_call(target: Target) {
    let limit = Duration::from_millis(400);
    let configure = |b: SqlStoreBuilder| {
        b.busy_timeout(Duration::from_secs(5))
            .operation_timeout(limit)
    };
    let why = "bounded by the operation timeout";
    blocked_append(
        target,
        "amstuck",
        configure,
        limit..Duration::from_secs(2),
        why,
    )
    .await;
}

on_targets!(
    #[tokio::test]
    operation_timeout_bounds_a_stuck_call: operation_timeout_bounds_a_stuck_call
        on postgres: Postgres, sqlite_file: SqliteFile
);

// ---------------------------------------------------------------------------------------------
// Multi-page windows, TTL bounds, corrupt counters
// ---------------------------------------------------------------------------------------------

/// A window longer than the first page is read again in one snapshot transaction: BEGIN, the
/// pages, COMMIT, after the first (full) page.
async fn long_window_reads_in_one_snapshot(target: Target) {
    const TOTAL: usize = 3000;
    let (store, scope) = char_counted(target, "long-window").await;
    let batch: Vec<ChatMessage> = (0..TOTAL)
        .map(|i| ChatMessage::user(format!("m{i}")))
        .collect();
    store.append(&scope, &batch).await.unwrap();
    store.archive(&scope, 1..=10).await.unwrap();
    let before = store.round_trips();
    let window = store
        .read(&scope, Window::TokenBudget(u64::MAX))
        .await
        .unwrap();
    let trips = store.round_trips() - before;
    let seqs: Vec<u64> = window.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (11..=TOTAL as u64).collect::<Vec<_>>(), "{target:?}");
    assert_eq!(trips, 4, "{target:?}: first page, BEGIN, one page, COMMIT");
    // A budget that ends inside the second page.
    let tokens: u64 = window[1500..].iter().map(|m| u64::from(m.tokens)).sum();
    let tail = store
        .read(&scope, Window::TokenBudget(tokens))
        .await
        .unwrap();
    assert_eq!(tail.len(), window.len() - 1500, "{target:?}");
    assert_eq!(tail[0].seq, window[1500].seq, "{target:?}");
    store.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn long_window_reads_in_one_snapshot_all_databases() {
    long_window_reads_in_one_snapshot(Target::SqliteFile).await;
    long_window_reads_in_one_snapshot(Target::Postgres).await;
    long_window_reads_in_one_snapshot(Target::MySql).await;
}

#[tokio::test]
async fn default_ttl_out_of_range_is_refused_at_open() {
    for ttl in [Duration::ZERO, memory_core::MAX_TTL * 2, Duration::MAX] {
        refused_at_open(
            SqlStore::builder("sqlite::memory:").default_ttl(ttl),
            &format!("{ttl:?}"),
        )
        .await;
    }
    let store = SqlStore::builder("sqlite::memory:")
        .default_ttl(memory_core::MAX_TTL)
        .connect()
        .await
        .unwrap();
    let scope = Scope::session("long-lived").unwrap();
    store
        .append(&scope, &[ChatMessage::user("x")])
        .await
        .unwrap();
    assert_eq!(store.count(&scope).await.unwrap().active, 1);
}

#[tokio::test]
async fn corrupt_counters_are_serialization_errors() {
    for target in [Target::SqliteFile, Target::Postgres, Target::MySql] {
        let Written {
            prefix,
            store,
            raw,
            scope,
        } = written(target, "amctr", "counters", &["a"]).await;
        let corrupt = [
            "last_seq = -1",
            "last_seq = 9223372036854775807",
            "active_count = 9223372036854775807",
            "active_tokens = 9223372036854775807",
            "active_count = -3",
        ];
        for set in corrupt {
            raw.exec(&format!("UPDATE {prefix}threads SET {set}")).await;
            let err = store
                .append(&scope, &[ChatMessage::user(format!("after {set}"))])
                .await
                .unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::Serialization,
                "{target:?} {set}: {err}"
            );
            raw.exec(&format!(
                "UPDATE {prefix}threads SET last_seq = 1, active_count = 1, active_tokens = 5"
            ))
            .await;
        }
        raw.exec(&format!("UPDATE {prefix}threads SET active_count = -3"))
            .await;
        let err = store.count(&scope).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{target:?}: {err}");

        // A session TTL stored before TTLs were bounded: a save still computes its expiry.
        let v = store
            .save(&scope, &serde_json::json!({}), None)
            .await
            .unwrap();
        raw.exec(&format!(
            "UPDATE {prefix}sessions SET ttl_ms = 9223372036854775807, expires_at = NULL"
        ))
        .await;
        let v = store
            .save(&scope, &serde_json::json!({"n": 2}), Some(v))
            .await
            .unwrap();
        assert_eq!(store.load(&scope).await.unwrap().unwrap().version, v);
        store.close().await;
        raw.drop_tables(&prefix).await;
    }
}

/// The active window starts at the thread's first active message (schema v3): archiving a
/// range that covers it moves it on, and a thread that starts again starts it again.
async fn first_active_window(store: SqlStore) {
    let scope = Scope::session("first-active")
        .unwrap()
        .with_tenant(random_tenant())
        .unwrap();
    let seqs = |window: Vec<StoredMessage>| window.iter().map(|m| m.seq).collect::<Vec<u64>>();
    let messages: Vec<ChatMessage> = (0..10)
        .map(|i| ChatMessage::user(format!("m{i}")))
        .collect();
    store.append(&scope, &messages).await.unwrap();
    // A range after the first active message leaves a hole.
    store.archive(&scope, 4..=5).await.unwrap();
    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(seqs(all), [1, 2, 3, 6, 7, 8, 9, 10]);
    // A range that covers it moves the start past the hole.
    store.archive(&scope, 1..=3).await.unwrap();
    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(seqs(all), [6, 7, 8, 9, 10]);
    let last = store.read(&scope, Window::Last(2)).await.unwrap();
    assert_eq!(seqs(last), [9, 10]);
    let after = store.read(&scope, Window::After(7)).await.unwrap();
    assert_eq!(seqs(after), [8, 9, 10]);
    let budget = store
        .read(&scope, Window::TokenBudget(u64::MAX))
        .await
        .unwrap();
    assert_eq!(seqs(budget), [6, 7, 8, 9, 10]);
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(everything.len(), 10);
    // Everything archived, then a new message.
    store.archive(&scope, 1..=u64::MAX).await.unwrap();
    assert!(store.read(&scope, Window::All).await.unwrap().is_empty());
    store
        .append(&scope, &[ChatMessage::user("m10")])
        .await
        .unwrap();
    assert_eq!(seqs(store.read(&scope, Window::All).await.unwrap()), [11]);
    // An expired thread starts again at 1.
    HistoryStore::set_ttl(&store, &scope, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    store.append(&scope, &messages[..3]).await.unwrap();
    HistoryStore::set_ttl(&store, &scope, None).await.unwrap();
    assert_eq!(
        seqs(store.read(&scope, Window::All).await.unwrap()),
        [1, 2, 3]
    );
    // And so does a cleared one.
    store.archive(&scope, 1..=2).await.unwrap();
    store.clear(&scope).await.unwrap();
    store.append(&scope, &messages[..2]).await.unwrap();
    assert_eq!(seqs(store.read(&scope, Window::All).await.unwrap()), [1, 2]);
    store.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn active_window_starts_at_the_first_active_message() {
    first_active_window(support::sqlite_file_store().await).await;
    first_active_window(support::postgres_store().await).await;
    first_active_window(support::mysql_store().await).await;
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL's one-statement append and the writer it waited for
// ---------------------------------------------------------------------------------------------

/// Tables of their own (`tag`) on PostgreSQL: their prefix, a store on them, and a pool for
/// another writer.
async fn postgres_tables(tag: &str) -> (String, Arc<SqlStore>, sqlx::PgPool) {
    let url = Target::Postgres.url();
    let prefix = unique_prefix(tag);
    let store = Arc::new(open(&url, &prefix).await);
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    (prefix, store, pool)
}

/// A writer of the thread that holds its row in an open transaction, as another process would.
async fn hold_thread(
    pool: &sqlx::PgPool,
    statements: &[String],
    key: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = pool.begin().await.unwrap();
    for sql in statements {
        sqlx::query(AssertSqlSafe(sql.clone()))
            .bind(key)
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    tx
}

/// Appends `batch` while `holder` holds the thread: checks that the append waits for it, then
/// commits `holder` and returns what the append did.
async fn append_behind(
    store: &Arc<SqlStore>,
    scope: &Scope,
    batch: Vec<ChatMessage>,
    holder: sqlx::Transaction<'static, sqlx::Postgres>,
) -> memory_core::AppendOutcome {
    let append = tokio::spawn({
        let store = Arc::clone(store);
        let scope = scope.clone();
        async move { store.append(&scope, &batch).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !append.is_finished(),
        "the append waits for the thread's lock"
    );
    holder.commit().await.unwrap();
    append.await.unwrap().unwrap()
}

/// The append's statement reads the messages in the snapshot of its start, and acts on the
/// thread row after waiting for the writer that held it: a message that writer committed
/// meanwhile is found (its sequence number returned, not stored twice), and the new ones follow.
#[tokio::test]
async fn an_append_sees_the_messages_of_the_writer_it_waited_for_postgres() {
    let (prefix, store, pool) = postgres_tables("amwaitw").await;
    let scope = Scope::session("waited").unwrap();
    let key = scope.key();
    store
        .append(&scope, &[ChatMessage::user("first")])
        .await
        .unwrap();
    let racing = ChatMessage::user("racing");
    let body = racing.to_json().unwrap().replace('\'', "''");
    let holder = hold_thread(
        &pool,
        &[
            format!(
                "UPDATE {prefix}threads SET last_seq = 2, active_count = 2 WHERE thread_key = $1"
            ),
            format!(
                "INSERT INTO {prefix}messages (thread_key, seq, message_id, role, tokens, \
                 archived, created_at, body) VALUES ($1, 2, '{}', 'user', 0, 0, 0, '{body}')",
                racing.id
            ),
        ],
        &key,
    )
    .await;
    let batch = vec![racing.clone(), ChatMessage::user("after")];
    let out = append_behind(&store, &scope, batch, holder).await;
    assert_eq!((out.seqs, out.inserted), (vec![2, 3], 1));
    let all = store.read(&scope, Window::Everything).await.unwrap();
    support::assert_gap_free(&all);
    assert_eq!(all.len(), 3);
    assert_eq!(store.count(&scope).await.unwrap().last_seq, 3);
    store.close().await;
    Raw::Postgres(pool).drop_tables(&prefix).await;
}

/// A clear that commits while the append waits: the append's snapshot still shows the cleared
/// messages, yet the append starts the thread again at 1 and stores every message, including
/// the one whose id the cleared thread held.
#[tokio::test]
async fn an_append_after_a_clear_it_waited_for_starts_again_postgres() {
    let (prefix, store, pool) = postgres_tables("amwaitc").await;
    let scope = Scope::session("cleared").unwrap();
    let key = scope.key();
    let old = [ChatMessage::user("a"), ChatMessage::user("b")];
    store.append(&scope, &old).await.unwrap();
    let holder = hold_thread(
        &pool,
        &[
            format!("DELETE FROM {prefix}threads WHERE thread_key = $1"),
            format!("DELETE FROM {prefix}messages WHERE thread_key = $1"),
        ],
        &key,
    )
    .await;
    let batch = vec![old[1].clone(), ChatMessage::user("c")];
    let out = append_behind(&store, &scope, batch, holder).await;
    assert_eq!((out.seqs, out.inserted), (vec![1, 2], 2));
    let all = store.read(&scope, Window::Everything).await.unwrap();
    support::assert_gap_free(&all);
    let ids: Vec<&str> = all.iter().map(|m| m.message.id.as_str()).collect();
    assert_eq!(ids, [old[1].id.as_str(), all[1].message.id.as_str()]);
    assert_eq!(all[1].message.text(), "c");
    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.last_seq, count.active), (2, 2));
    store.close().await;
    Raw::Postgres(pool).drop_tables(&prefix).await;
}
