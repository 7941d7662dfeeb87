//! The whole memory-testkit suite on an in-memory SQLite store.
#![cfg(feature = "sqlite")]

memory_testkit::history_store_tests!(async {
    memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store")
});
memory_testkit::session_store_tests!(async {
    memory_sql::SqlStore::in_memory()
        .await
        .expect("open an in-memory SQLite store")
});
