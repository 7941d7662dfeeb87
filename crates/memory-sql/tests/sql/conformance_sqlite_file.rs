//! The whole memory-testkit suite on SQLite files (a new file per store).
#![cfg(feature = "sqlite")]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(
    mod sql_store_on_sqlite_file_history,
    async { support::sqlite_file_store().await }
);
memory_testkit::session_store_tests!(
    mod sql_store_on_sqlite_file_session,
    async { support::sqlite_file_store().await }
);
memory_testkit::memory_suite_tests!(mod sql_store_on_sqlite_file_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(support::sqlite_file_store().await);
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod sql_store_on_sqlite_file_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(support::sqlite_file_store().await);
    (store.clone(), store)
});

memory_testkit::hostile_input_tests!(
    mod sql_store_on_sqlite_file_hostile,
    history: async { support::sqlite_file_store().await },
    raw: async {
        let (url, _path) = support::temp_sqlite_url();
        let store = memory_sql::SqlStore::connect(&url).await.expect("open a SQLite file");
        let raw = support::SqlRaw::sqlite_file(&url, &store).await;
        (store, raw)
    },
    sessions: async { support::sqlite_file_store().await },
);
