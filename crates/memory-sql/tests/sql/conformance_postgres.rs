//! The whole memory-testkit suite on the PostgreSQL server (`AGENT_MEMORY_POSTGRES_URL`).
#![cfg(feature = "postgres")]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(
    mod sql_store_on_postgres_history,
    async { support::postgres_store().await }
);
memory_testkit::session_store_tests!(
    mod sql_store_on_postgres_session,
    async { support::postgres_store().await }
);
memory_testkit::memory_suite_tests!(mod sql_store_on_postgres_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(support::postgres_store().await);
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod sql_store_on_postgres_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(support::postgres_store().await);
    (store.clone(), store)
});

memory_testkit::hostile_input_tests!(
    mod sql_store_on_postgres_hostile,
    history: async { support::postgres_store().await },
    raw: async { (support::postgres_store().await, support::SqlRaw::postgres().await) },
    sessions: async { support::postgres_store().await },
);
