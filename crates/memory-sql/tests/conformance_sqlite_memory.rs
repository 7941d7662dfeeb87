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
