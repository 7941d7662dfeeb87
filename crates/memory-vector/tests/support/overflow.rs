//! The check that an overflowing vector is `InvalidInput`, shared by the stores' tests.

use memory_core::{ErrorKind, Scope, VectorPoint, VectorQuery, VectorStore};
use uuid::Uuid;

/// A vector whose norm overflows `f32` is `InvalidInput` at upsert (and nothing of its batch
/// is written) and at search; a good point is written and counted after the refusal.
pub(crate) async fn overflowing_vectors_are_invalid_input(store: &dyn VectorStore) {
    let scope = Scope::session(format!("s-{}", Uuid::new_v4().simple())).unwrap();
    let point = |vector: Vec<f32>| VectorPoint {
        id: Uuid::new_v4(),
        vector,
        payload: serde_json::Map::new(),
    };
    let (good, huge) = (point(vec![1.0, 0.0]), point(vec![1e30, 1e30]));
    let err = store
        .upsert(&scope, &[good.clone(), huge])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(
        store.count(&scope).await.unwrap(),
        0,
        "nothing of the batch"
    );
    store.upsert(&scope, &[good]).await.unwrap();
    assert_eq!(store.count(&scope).await.unwrap(), 1);
    let err = store
        .search(&scope, &VectorQuery::new(vec![1e30, 1e30], 1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}
