//! Points tied on score, shared by the stores' tests: a tie at the `top_k` boundary is ordered
//! by id.

use memory_core::{Scope, VectorPoint, VectorQuery, VectorStore};
use uuid::Uuid;

/// Upserts 600 points with the same vector (ids 1 to 600, shuffled) into a new scope of
/// `store`, and returns the scope.
pub(crate) async fn six_hundred_equal_points(store: &dyn VectorStore) -> Scope {
    let scope = Scope::session(format!("s-{}", Uuid::new_v4().simple())).unwrap();
    let points: Vec<VectorPoint> = (0..600u128)
        .map(|i| VectorPoint {
            id: Uuid::from_u128(i * 7919 % 600 + 1),
            vector: vec![0.5, 0.5, 0.5],
            payload: serde_json::Map::new(),
        })
        .collect();
    store.upsert(&scope, &points).await.unwrap();
    scope
}

/// Searches `scope` for the top 3 of `query` and checks that the three tied points come
/// ordered by id, none with a NaN score.
pub(crate) async fn assert_top_three_ordered_by_id(
    store: &dyn VectorStore,
    scope: &Scope,
    query: Vec<f32>,
) {
    let found = store
        .search(scope, &VectorQuery::new(query, 3))
        .await
        .unwrap();
    assert_eq!(found.len(), 3);
    let ids: Vec<Uuid> = found.iter().map(|p| p.id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ties are ordered by id");
    assert!(found.iter().all(|p| !p.score.is_nan()));
}
