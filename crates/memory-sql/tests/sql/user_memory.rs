//! Long-term memory at the user's level on each engine (`memory_testkit::user_memory`;
//! `memory_testkit::indexed_on_append`: searchable as soon as stored;
//! `memory_testkit::user_facts`: facts shared by the user's sessions): the engine's history,
//! session, vector and text stores under a `Memory` per session whose vector block recalls
//! across the user's sessions. Each run has tables of its own prefix (the vector
//! store records one dimension per prefix; the suites' shared tables hold 4-dimension points),
//! dropped afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_sql::SqlStore;

use crate::support::{self, Raw};

/// Runs the check on the store at `url` with tables of a fresh prefix: with the engine's text
/// index fused in (`hybrid`), or dense alone.
async fn user_memory(url: &str, hybrid: bool) {
    let prefix = format!(
        "amuser_{}_",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let store: SqlStore = support::open(url, &prefix).await;
    let text = hybrid
        .then(|| -> Arc<dyn memory_core::TextIndex> { Arc::new(store.text_index().unwrap()) });
    memory_testkit::user_memory::user_memory_recalls_across_sessions_never_across_users(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
        Arc::new(store.vector_store().unwrap()),
        text.clone(),
    )
    .await;
    memory_testkit::indexed_on_append::appended_messages_are_found_at_once_and_indexed_once(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
        Arc::new(store.vector_store().unwrap()),
        text,
    )
    .await;
    if !hybrid {
        memory_testkit::user_facts::user_facts_are_shared_by_a_users_sessions_only(
            Arc::new(store.clone()),
            Arc::new(store.clone()),
        )
        .await;
    }
    store.close().await;
    let raw = Raw::connect(url).await;
    raw.drop_tables(&prefix).await;
    raw.close().await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_sqlite_dense_and_hybrid() {
    let (url, _path) = support::temp_sqlite_url();
    user_memory(&url, false).await;
    let (url, _path) = support::temp_sqlite_url();
    user_memory(&url, true).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_dense_and_hybrid() {
    user_memory(&support::postgres_url(), false).await;
    user_memory(&support::postgres_url(), true).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_mysql_dense_and_hybrid() {
    user_memory(&support::mysql_url(), false).await;
    user_memory(&support::mysql_url(), true).await;
}
