//! Long-term memory at the user's level on Redis (`memory_testkit::user_memory`): the store's
//! history, sessions and vector store under a `Memory` per session whose vector block recalls
//! across the user's sessions (and `memory_testkit::indexed_on_append`: searchable as soon as
//! stored; `memory_testkit::user_facts`: facts shared by the user's sessions), on a standalone Redis and on the test cluster (where a user's
//! sessions are in one slot). Each run has a prefix of its own (the vector store records one
//! dimension per prefix).

use std::sync::Arc;

use memory_redis::RedisStore;

use crate::support;

async fn user_memory(store: RedisStore) {
    memory_testkit::user_memory::user_memory_recalls_across_sessions_never_across_users(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
        Arc::new(store.vector_store()),
        None,
    )
    .await;
    memory_testkit::indexed_on_append::appended_messages_are_found_at_once_and_indexed_once(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
        Arc::new(store.vector_store()),
        None,
    )
    .await;
    memory_testkit::user_facts::user_facts_are_shared_by_a_users_sessions_only(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_standalone_redis() {
    let store = support::standalone_store_for_vectors(&support::fresh_prefix()).await;
    user_memory(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_redis_cluster() {
    let store = RedisStore::builder(&support::cluster().url())
        .key_prefix(support::fresh_prefix())
        .connect()
        .await
        .unwrap();
    user_memory(store).await;
}
