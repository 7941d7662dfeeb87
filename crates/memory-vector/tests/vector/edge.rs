//! The vector conformance suite on the embedded Qdrant engine, plus persistence across opens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::{Scope, VectorPoint, VectorQuery, VectorStore};
use memory_vector::QdrantEdgeStore;
use serde_json::json;
use uuid::Uuid;

/// A store in a fresh directory under Cargo's test scratch directory (removed by `cargo clean`).
async fn fresh_store() -> QdrantEdgeStore {
    let dir = tempfile::Builder::new()
        .prefix("edge-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map(tempfile::TempDir::keep)
        .unwrap();
    QdrantEdgeStore::open(dir).await.unwrap()
}

memory_testkit::vector_store_tests!(
    mod qdrant_edge_store_on_embedded_engine,
    async { fresh_store().await }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_checks_on_one_store() {
    memory_testkit::run_all_vector_checks(std::sync::Arc::new(fresh_store().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let scope = Scope::session("persisted").unwrap();
    let point = VectorPoint {
        id: Uuid::new_v4(),
        vector: vec![0.25, -1.0, 3.5],
        payload: json!({"text": "kept"}).as_object().cloned().unwrap(),
    };
    {
        let store = QdrantEdgeStore::open_with_dimensions(dir.path(), 3)
            .await
            .unwrap();
        store
            .upsert(&scope, std::slice::from_ref(&point))
            .await
            .unwrap();
    }
    let store = QdrantEdgeStore::open(dir.path()).await.unwrap();
    assert_eq!(store.dimensions().unwrap(), Some(3));
    assert_eq!(
        store.get(&scope, &[point.id]).await.unwrap(),
        vec![point.clone()]
    );
    let hits = store
        .search(&scope, &VectorQuery::new(vec![0.25, -1.0, 3.5], 1))
        .await
        .unwrap();
    assert_eq!(hits[0].id, point.id);
    assert!(
        QdrantEdgeStore::open_with_dimensions(dir.path(), 4)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_vectors_are_invalid_input_at_upsert_and_query() {
    crate::support::overflow::overflowing_vectors_are_invalid_input(&fresh_store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_query_over_many_equal_vectors_answers_top_k_in_id_order() {
    let store = fresh_store().await;
    let scope = ties::six_hundred_equal_points(&store).await;
    for query in [vec![0.0, 0.0, 0.0], vec![1.0, 1.0, 1.0]] {
        ties::assert_top_three_ordered_by_id(&store, &scope, query).await;
    }
}

use crate::support::forget as forget_checks;
use crate::support::ties;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_deletes_exactly_the_filtered_scopes() {
    forget_checks::run_forget_checks(std::sync::Arc::new(fresh_store().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_survives_a_reopen() {
    use memory_core::ScopeFilter;
    let dir = tempfile::tempdir().unwrap();
    let scope = Scope::session("s").unwrap().with_tenant("gone").unwrap();
    let kept = Scope::session("s").unwrap().with_tenant("kept").unwrap();
    let point = VectorPoint {
        id: Uuid::new_v4(),
        vector: vec![1.0, 0.0],
        payload: serde_json::Map::new(),
    };
    let gone = ScopeFilter::tenant(memory_core::TenantId::new("gone").unwrap());
    {
        let store = QdrantEdgeStore::open(dir.path()).await.unwrap();
        for s in [&scope, &kept] {
            store.upsert(s, std::slice::from_ref(&point)).await.unwrap();
        }
        assert_eq!(store.delete_matching(&gone).await.unwrap(), 1);
    }
    let store = QdrantEdgeStore::open(dir.path()).await.unwrap();
    assert_eq!(store.count(&scope).await.unwrap(), 0);
    assert_eq!(store.count_matching(&gone).await.unwrap(), 0);
    assert_eq!(store.count(&kept).await.unwrap(), 1);
}

/// Long-term memory at the user's level with its vectors on the embedded engine
/// (`memory_testkit::user_memory` and `indexed_on_append`: recall across a user's sessions,
/// never another user's, and each put searchable at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn user_memory_on_the_embedded_engine() {
    use std::sync::Arc;
    let history = || Arc::new(memory_core::InMemoryHistoryStore::new());
    let sessions = || Arc::new(memory_core::InMemorySessionStore::new());
    memory_testkit::user_memory::user_memory_recalls_across_sessions_never_across_users(
        history(),
        sessions(),
        Arc::new(fresh_store().await),
        None,
    )
    .await;
    memory_testkit::indexed_on_append::appended_messages_are_found_at_once_and_indexed_once(
        history(),
        sessions(),
        Arc::new(fresh_store().await),
        None,
    )
    .await;
}
