//! The vector conformance suite on the embedded Qdrant engine, plus persistence across opens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Test helpers fail loudly.

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
