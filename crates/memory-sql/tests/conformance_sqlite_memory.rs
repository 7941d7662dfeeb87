//! The whole memory-testkit suite on an in-memory SQLite store.
#![cfg(feature = "sqlite")]

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
