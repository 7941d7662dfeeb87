//! Every suite against memory-core's in-memory stores, the reference implementations.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

memory_testkit::history_store_tests!(
    mod in_memory_history_store,
    async { memory_core::InMemoryHistoryStore::new() }
);
memory_testkit::session_store_tests!(
    mod in_memory_session_store,
    async { memory_core::InMemorySessionStore::new() }
);
memory_testkit::hostile_input_tests!(
    mod in_memory_hostile,
    history: async { memory_core::InMemoryHistoryStore::new() },
    sessions: async { memory_core::InMemorySessionStore::new() },
);
memory_testkit::vector_store_tests!(
    mod in_memory_vector_store,
    async { memory_core::InMemoryVectorStore::new() }
);
memory_testkit::memory_suite_tests!(mod in_memory_memory, async {
    (
        memory_core::InMemoryHistoryStore::new(),
        memory_core::InMemorySessionStore::new(),
    )
});
memory_testkit::forget_tests!(mod in_memory_forget, async {
    (
        memory_core::InMemoryHistoryStore::new(),
        memory_core::InMemorySessionStore::new(),
        memory_core::InMemoryVectorStore::new(),
    )
});
// Without a vector store.
memory_testkit::forget_tests!(mod in_memory_forget_without_vectors, async {
    (
        memory_core::InMemoryHistoryStore::new(),
        memory_core::InMemorySessionStore::new(),
    )
});

/// The `run_all_*` entry points run every check, one after the other, on one shared store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all_checks_on_one_store_each() {
    use std::sync::Arc;
    memory_testkit::run_all_history_checks(Arc::new(memory_core::InMemoryHistoryStore::new()))
        .await;
    memory_testkit::run_all_session_checks(Arc::new(memory_core::InMemorySessionStore::new()))
        .await;
    memory_testkit::run_all_vector_checks(Arc::new(memory_core::InMemoryVectorStore::new())).await;
    memory_testkit::run_all_forget_checks(memory_testkit::forget::ForgetStores {
        history: Arc::new(memory_core::InMemoryHistoryStore::new()),
        sessions: Arc::new(memory_core::InMemorySessionStore::new()),
        vectors: Some(Arc::new(memory_core::InMemoryVectorStore::new())),
    })
    .await;
    memory_testkit::run_all_memory_checks(
        Arc::new(memory_core::InMemoryHistoryStore::new()),
        Arc::new(memory_core::InMemorySessionStore::new()),
    )
    .await;
}

/// Long-term memory at the user's level on the in-memory stores (the reference for the
/// engines' runs): recall across sessions, memory searchable as soon as stored, and facts
/// shared by a user's sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_user_memory() {
    use std::sync::Arc;
    let history = || Arc::new(memory_core::InMemoryHistoryStore::new());
    let sessions = || Arc::new(memory_core::InMemorySessionStore::new());
    let vectors = || Arc::new(memory_core::InMemoryVectorStore::new());
    memory_testkit::user_memory::user_memory_recalls_across_sessions_never_across_users(
        history(),
        sessions(),
        vectors(),
        None,
    )
    .await;
    memory_testkit::indexed_on_append::appended_messages_are_found_at_once_and_indexed_once(
        history(),
        sessions(),
        vectors(),
        None,
    )
    .await;
    memory_testkit::user_facts::user_facts_are_shared_by_a_users_sessions_only(
        history(),
        sessions(),
    )
    .await;
}
