//! `SqlVectorStore` on each engine, beyond the shared suite: what being in the database gives
//! (every store object on one database — a second replica, a process after a restart — sees
//! the same points and the same dimension), what it refuses (an old schema, a corrupt row),
//! and forget across a user's sessions.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::{
    ErrorKind, Scope, ScopeFilter, TenantId, UserId, VectorPoint, VectorQuery, VectorStore,
};
use memory_sql::{SqlConfig, SqlStore};
use serde_json::json;
use uuid::Uuid;

use crate::support::{self, Raw};

/// A database URL of each engine and a table prefix no other test uses (the dimension is
/// recorded per prefix), for a test that opens several store objects on one database.
fn databases() -> Vec<(String, String)> {
    let fresh = || format!("amvec_{}_", &Uuid::new_v4().simple().to_string()[..12]);
    let (sqlite, _) = support::temp_sqlite_url();
    vec![
        (sqlite, fresh()),
        (support::postgres_url(), fresh()),
        (support::mysql_url(), fresh()),
    ]
}

fn scope(tenant: &str, user: &str, session: &str) -> Scope {
    let tenant = TenantId::new(tenant).unwrap();
    memory_testkit::fixtures::scope_owned_by(&tenant, Some(user), None, session)
}

fn point(n: u128, vector: Vec<f32>) -> VectorPoint {
    VectorPoint {
        id: Uuid::from_u128(n),
        vector,
        payload: json!({"n": n.to_string()}).as_object().unwrap().clone(),
    }
}

/// Two store objects on one database — two replicas of a server, or one before and one after
/// a restart — read the same points, and the dimension the first upsert recorded binds both.
#[tokio::test]
async fn every_store_object_on_a_database_sees_the_same_points_and_dimension() {
    for (url, prefix) in databases() {
        let first = support::open(&url, &prefix).await;
        let second = support::open(&url, &prefix).await;
        let (a, b) = (
            first.vector_store().unwrap(),
            second.vector_store().unwrap(),
        );
        let s = scope("t1", "dana", "monday");
        a.upsert(
            &s,
            &[point(1, vec![1.0, 0.0, 0.0]), point(2, vec![0.0, 1.0, 0.0])],
        )
        .await
        .unwrap();
        let hits = b
            .search(&s, &VectorQuery::new(vec![0.9, 0.1, 0.0], 1))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1, "{url}");
        assert_eq!(hits[0].id, Uuid::from_u128(1), "{url}");
        assert_eq!(hits[0].payload["n"], json!("1"), "{url}");
        // The second object never wrote, yet knows the dimension from the database.
        let err = b
            .upsert(&s, &[point(3, vec![1.0, 0.0, 0.0, 0.0])])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
        assert!(err.message().contains("holds 3"), "{url}: {err}");
        let err = b
            .search(&s, &VectorQuery::new(vec![1.0, 0.0], 1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
        first.close().await;
        // A store opened after the first closed (a restart) finds every point.
        let reopened = support::open(&url, &prefix).await;
        assert_eq!(
            reopened.vector_store().unwrap().count(&s).await.unwrap(),
            2,
            "{url}"
        );
        reopened.close().await;
        second.close().await;
        let raw = Raw::connect(&url).await;
        raw.drop_tables(&prefix).await;
        raw.close().await;
    }
}

/// A stored vector that is not a whole number of `f32`s, or of another dimension, is a
/// `Serialization` error naming the point, on every read that meets it; never a panic and
/// never a wrong score.
#[tokio::test]
async fn a_corrupt_stored_vector_is_an_error_naming_the_point() {
    for (url, prefix) in databases() {
        let store = support::open(&url, &prefix).await;
        let vectors = store.vector_store().unwrap();
        let s = scope("t1", "dana", "monday");
        vectors
            .upsert(&s, &[point(7, vec![1.0, 0.0]), point(8, vec![0.0, 1.0])])
            .await
            .unwrap();
        let raw = Raw::connect(&url).await;
        let point_id = Uuid::from_u128(7).hyphenated().to_string();
        let bytes = if url.starts_with("postgres") {
            "'\\x010203'"
        } else {
            "X'010203'"
        };
        raw.exec(&format!(
            "UPDATE {prefix}vectors SET vector = {bytes} WHERE point_id = '{point_id}'"
        ))
        .await;
        let err = vectors
            .search(&s, &VectorQuery::new(vec![1.0, 0.0], 2))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{url}: {err}");
        assert!(err.message().contains(&point_id), "{url}: {err}");
        let err = vectors.get(&s, &[Uuid::from_u128(7)]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{url}: {err}");
        // The healthy point is still read.
        assert_eq!(
            vectors.get(&s, &[Uuid::from_u128(8)]).await.unwrap().len(),
            1
        );
        store.close().await;
        raw.drop_tables(&prefix).await;
        raw.close().await;
    }
}

/// Points written at schema v7 (no compact copy of their vector) are found with exact scores
/// after the upgrade to v8, beside points written since; a store held at v7 searches its own
/// tables too; a point written again after the upgrade gains its compact copy.
#[tokio::test]
async fn points_written_before_compact_vectors_are_still_found_exactly() {
    for (url, prefix) in databases() {
        // The prefix after the config, which carries a prefix of its own.
        let old = SqlStore::builder(&url)
            .config(SqlConfig::new().__schema_version(7))
            .table_prefix(&prefix)
            .connect()
            .await
            .unwrap();
        let s = scope("t1", "dana", "monday");
        let before: Vec<VectorPoint> = (0..40u8)
            .map(|i| point(u128::from(i), vec![1.0, f32::from(i) / 10.0]))
            .collect();
        let vectors = old.vector_store().unwrap();
        vectors.upsert(&s, &before).await.unwrap();
        let query = VectorQuery::new(vec![1.0, 0.0], 3);
        let ids = |hits: &[memory_core::ScoredPoint]| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        let at_v7 = vectors.search(&s, &query).await.unwrap();
        assert_eq!(ids(&at_v7), [0, 1, 2].map(Uuid::from_u128), "{url}");
        old.close().await;

        let store = support::open(&url, &prefix).await;
        assert_eq!(store.schema_version().await.unwrap(), 8, "{url}");
        let vectors = store.vector_store().unwrap();
        let raw = Raw::connect(&url).await;
        let without = raw
            .int(&format!(
                "SELECT COUNT(*) FROM {prefix}vectors WHERE quantized IS NULL"
            ))
            .await;
        assert_eq!(without, 40, "{url}: the old rows have no compact copy");
        // A new point, closer to the query than any old one but the first.
        let newer = point(100, vec![1.0, 0.05]);
        vectors.upsert(&s, &[newer]).await.unwrap();
        // An old point written again gains its compact copy.
        vectors.upsert(&s, &before[39..]).await.unwrap();
        assert_eq!(
            raw.int(&format!(
                "SELECT COUNT(*) FROM {prefix}vectors WHERE quantized IS NULL"
            ))
            .await,
            39,
            "{url}"
        );
        let found = vectors.search(&s, &query).await.unwrap();
        assert_eq!(
            ids(&found),
            [0, 100, 1].map(Uuid::from_u128),
            "{url}: old and new points ranked together"
        );
        let expected_new = 1.0 / (1.0f32 + 0.05 * 0.05).sqrt();
        assert!(
            (found[0].score - 1.0).abs() < 1e-6,
            "{url}: {}",
            found[0].score
        );
        assert!(
            (found[1].score - expected_new).abs() < 1e-6,
            "{url}: {} against {expected_new}",
            found[1].score
        );
        assert_eq!(
            found[0].score, at_v7[0].score,
            "{url}: the same exact score as before"
        );
        assert_eq!(found[2].score, at_v7[1].score, "{url}");
        store.close().await;
        raw.drop_tables(&prefix).await;
        raw.close().await;
    }
}

/// A store held at schema version 6 has no vector table: asking for the store is a typed
/// error; the default open upgrades the tables, and it works.
#[tokio::test]
async fn an_old_schema_has_no_vector_store() {
    let (url, _path) = support::temp_sqlite_url();
    let old = SqlStore::builder(&url)
        .config(SqlConfig::new().__schema_version(6))
        .connect()
        .await
        .unwrap();
    let err = old.vector_store().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(err.message().contains("version 7"), "{err}");
    old.close().await;
    let store = SqlStore::connect(&url).await.unwrap();
    let s = scope("t1", "dana", "monday");
    let vectors = store.vector_store().unwrap();
    vectors.upsert(&s, &[point(1, vec![1.0])]).await.unwrap();
    assert_eq!(vectors.count(&s).await.unwrap(), 1);
}

/// Forgetting a user removes the points of every session of theirs, and nothing of another
/// user or tenant.
#[tokio::test]
async fn forgetting_a_user_removes_every_session_of_theirs_only() {
    for (url, prefix) in databases() {
        let store = support::open(&url, &prefix).await;
        let vectors = store.vector_store().unwrap();
        let tenant = support::random_tenant();
        let dana = [
            scope(&tenant, "dana", "monday"),
            scope(&tenant, "dana", "friday"),
        ];
        let kept = [
            scope(&tenant, "ravi", "monday"),
            scope("other", "dana", "monday"),
        ];
        for (n, s) in dana.iter().chain(&kept).enumerate() {
            vectors
                .upsert(s, &[point(n as u128, vec![1.0, 1.0])])
                .await
                .unwrap();
        }
        let filter = ScopeFilter::tenant(TenantId::new(&tenant).unwrap())
            .with_user(UserId::new("dana").unwrap());
        assert_eq!(vectors.count_matching(&filter).await.unwrap(), 2, "{url}");
        assert_eq!(vectors.delete_matching(&filter).await.unwrap(), 2, "{url}");
        for s in &dana {
            assert_eq!(vectors.count(s).await.unwrap(), 0, "{url}");
        }
        for s in &kept {
            assert_eq!(vectors.count(s).await.unwrap(), 1, "{url}");
        }
        store.close().await;
        let raw = Raw::connect(&url).await;
        raw.drop_tables(&prefix).await;
        raw.close().await;
    }
}
