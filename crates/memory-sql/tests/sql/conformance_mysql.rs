//! The whole memory-testkit suite on the MySQL/MariaDB server (`AGENT_MEMORY_MYSQL_URL`).
#![cfg(feature = "mysql")]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(
    mod sql_store_on_mysql_history,
    async { support::mysql_store().await }
);
memory_testkit::session_store_tests!(
    mod sql_store_on_mysql_session,
    async { support::mysql_store().await }
);
memory_testkit::memory_suite_tests!(mod sql_store_on_mysql_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(support::mysql_store().await);
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod sql_store_on_mysql_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(support::mysql_store().await);
    (store.clone(), store)
});

memory_testkit::hostile_input_tests!(
    mod sql_store_on_mysql_hostile,
    history: async { support::mysql_store().await },
    raw: async { (support::mysql_store().await, support::SqlRaw::mysql().await) },
    sessions: async { support::mysql_store().await },
);
