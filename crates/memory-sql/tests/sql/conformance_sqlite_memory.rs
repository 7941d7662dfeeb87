//! The whole memory-testkit suite on an in-memory SQLite store.
#![cfg(feature = "sqlite")]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(mod sql_store_on_sqlite_memory_history, async {
    memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store")
});
memory_testkit::session_store_tests!(mod sql_store_on_sqlite_memory_session, async {
    memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store")
});
memory_testkit::memory_suite_tests!(mod sql_store_on_sqlite_memory_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store"));
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod sql_store_on_sqlite_memory_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store"));
    (store.clone(), store)
});

memory_testkit::hostile_input_tests!(
    mod sql_store_on_sqlite_memory_hostile,
    history: async { memory_sql::SqlStore::in_memory().await.expect("open an in-memory SQLite store") },
    raw: async {
        // One connection, shared by the store and the raw writer: the same database.
        let pool = memory_sql::sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect("sqlite::memory:")
            .await
            .expect("open an in-memory SQLite database");
        let store = memory_sql::SqlStore::from_sqlite_pool(pool.clone(), Default::default())
            .await
            .expect("open the store on it");
        let raw = support::SqlRaw::sqlite(pool, &store);
        (store, raw)
    },
    sessions: async { memory_sql::SqlStore::in_memory().await.expect("open an in-memory SQLite store") },
);
