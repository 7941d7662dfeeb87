//! The memory-testkit suites against a standalone Redis: the machine's, or the one
//! `AGENT_MEMORY_REDIS_URL` names. Data is written under a per-process key prefix with a TTL,
//! so runs never collide and leave nothing behind for long (vector points, which have no TTL,
//! are deleted by a later run: see `support::standalone_vectors_under`).

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(
    mod redis_store_on_standalone_redis_history,
    async { support::standalone_store().await }
);
memory_testkit::session_store_tests!(
    mod redis_store_on_standalone_redis_session,
    async { support::standalone_store().await }
);
memory_testkit::vector_store_tests!(
    mod redis_vector_store_on_standalone_redis,
    async { support::standalone_vectors().await }
);
memory_testkit::memory_suite_tests!(mod redis_store_on_standalone_redis_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(support::standalone_store().await);
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod redis_store_on_standalone_redis_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(support::standalone_store().await);
    (store.clone(), store)
});
memory_testkit::hostile_input_tests!(
    mod redis_store_on_standalone_redis_hostile,
    history: async { support::standalone_store().await },
    raw: async {
        (
            support::standalone_store().await,
            support::RedisRaw(support::RawConn::standalone().await),
        )
    },
    sessions: async { support::standalone_store().await },
);
