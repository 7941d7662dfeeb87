//! [`RedisVectorStore`](memory_redis::RedisVectorStore) beyond the testkit's suite (which
//! `conformance_standalone` and `conformance_cluster` run): several store objects on one
//! server share points and the recorded dimension, the key layout on a cluster (a user's
//! points in one slot), what `delete_matching` leaves behind, stored data the store did not
//! write, round trips, and exact search on embeddings of a realistic size.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic, casts and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Instant;

use memory_core::{
    ErrorKind, InMemoryVectorStore, PayloadFilter, Scope, ScopeFilter, TenantId, UserId,
    VectorPoint, VectorQuery, VectorStore,
};
use memory_redis::RedisVectorStore;
use memory_redis::redis::AsyncCommands;
use serde_json::json;
use uuid::Uuid;

use crate::support::{
    self, fresh_prefix, raw, standalone_store_for_vectors, standalone_vectors,
    standalone_vectors_under,
};

/// A point with an id, a vector and `{"n": n}`.
fn point(n: u128, vector: Vec<f32>) -> VectorPoint {
    VectorPoint {
        id: Uuid::from_u128(n),
        vector,
        payload: json!({ "n": n as u64 }).as_object().unwrap().clone(),
    }
}

/// A scope of `session` for `user` (none: `None`) in `tenant`.
fn scope_of(tenant: &str, user: Option<&str>, session: &str) -> Scope {
    let scope = Scope::session(session)
        .unwrap()
        .with_tenant(tenant)
        .unwrap();
    match user {
        Some(user) => scope.with_user(user).unwrap(),
        None => scope,
    }
}

fn tenant() -> String {
    format!("t-{}", Uuid::new_v4().simple())
}

fn kind<T: std::fmt::Debug>(result: memory_core::Result<T>) -> ErrorKind {
    result.unwrap_err().kind()
}

/// Two store objects (two "replicas" of an application) on one server and prefix: each sees
/// the other's points, and the dimension the first upsert recorded binds both.
#[tokio::test]
async fn two_stores_share_points_and_the_recorded_dimension() {
    let prefix = fresh_prefix();
    let a = standalone_vectors_under(&prefix).await;
    let b = standalone_vectors_under(&prefix).await;
    let scope = scope_of(&tenant(), Some("u"), "s");
    let points = vec![
        point(1, vec![1.0, 0.0, 0.0]),
        point(2, vec![0.0, 1.0, 0.0]),
        point(3, vec![1.0, 1.0, 0.0]),
    ];
    assert_eq!(b.known_dimensions(), None);
    a.upsert(&scope, &points).await.unwrap();
    assert_eq!(a.known_dimensions(), Some(3));

    let mut got = b.get(&scope, &[points[2].id, points[0].id]).await.unwrap();
    got.sort_by_key(|p| p.id);
    assert_eq!(got, vec![points[0].clone(), points[2].clone()]);
    assert_eq!(b.count(&scope).await.unwrap(), 3);
    let top = b
        .search(&scope, &VectorQuery::new(vec![1.0, 0.1, 0.0], 2))
        .await
        .unwrap();
    assert_eq!(
        top.iter().map(|p| p.id).collect::<Vec<_>>(),
        [points[0].id, points[2].id]
    );
    assert_eq!(
        b.known_dimensions(),
        Some(3),
        "b read the recorded dimension"
    );

    // The dimension binds every store object on the prefix.
    let five = point(9, vec![1.0; 5]);
    assert_eq!(
        kind(b.upsert(&scope, std::slice::from_ref(&five)).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(b.search(&scope, &VectorQuery::new(vec![1.0; 5], 1)).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(a.search(&scope, &VectorQuery::new(vec![1.0; 2], 1)).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        a.count(&scope).await.unwrap(),
        3,
        "the refused batch wrote nothing"
    );
    let mut conn = raw().await;
    let recorded: String = conn
        .get(format!("{prefix}:{{|vectors}}:vdims"))
        .await
        .unwrap();
    assert_eq!(recorded, "3");

    // Writes of one are seen by the other.
    assert_eq!(b.delete(&scope, &[points[1].id]).await.unwrap(), 1);
    assert_eq!(a.count(&scope).await.unwrap(), 2);
    assert_eq!(a.clear(&scope).await.unwrap(), 2);
    assert_eq!(b.count(&scope).await.unwrap(), 0);
    // The dimension stays when the points go: a third object still may not write another.
    let c = standalone_vectors_under(&prefix).await;
    assert_eq!(
        kind(c.upsert(&scope, &[point(4, vec![1.0; 4])]).await),
        ErrorKind::InvalidInput
    );
    c.upsert(&scope, &[point(4, vec![1.0; 3])]).await.unwrap();
    assert_eq!(a.count(&scope).await.unwrap(), 1);
}

/// The first upserts of several processes race to fix the dimension: one wins, every other
/// batch of another dimension is refused, and every store ends up knowing the winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_first_upserts_fix_one_dimension() {
    let prefix = fresh_prefix();
    let tenant = tenant();
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(standalone_vectors_under(&prefix).await);
    }
    let results = futures::future::join_all(stores.iter().enumerate().map(|(i, store)| {
        let scope = scope_of(&tenant, None, &format!("s-{i}"));
        async move {
            let dims = i + 2;
            store
                .upsert(&scope, &[point(i as u128, vec![0.5; dims])])
                .await
                .map(|()| dims)
        }
    }))
    .await;
    let won: Vec<usize> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .copied()
        .collect();
    assert_eq!(won.len(), 1, "exactly one dimension wins: {results:?}");
    for result in &results {
        if let Err(err) = result {
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        }
    }
    for store in &stores {
        assert_eq!(store.known_dimensions(), Some(won[0]));
    }
}

/// Search is exact: on 600 points of 384 dimensions it returns what the in-memory reference
/// returns (ids, scores and payloads), with and without a filter or a minimum score. Prints
/// the time of a search (run with `--nocapture` to see it).
#[tokio::test]
async fn search_matches_the_exact_reference_on_600_points_of_384_dimensions() {
    const POINTS: usize = 600;
    const DIMS: usize = 384;
    let prefix = fresh_prefix();
    let store = standalone_store_for_vectors(&prefix).await;
    let redis = store.vector_store();
    let reference = InMemoryVectorStore::new();
    let scope = scope_of(&tenant(), Some("u"), "s");
    // A fixed pseudo-random sequence (an LCG), so every run compares the same data.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let points: Vec<VectorPoint> = (0..POINTS)
        .map(|i| VectorPoint {
            id: Uuid::from_u128(i as u128 * 7_919),
            vector: (0..DIMS).map(|_| next()).collect(),
            payload: json!({ "i": i, "even": i % 2 == 0, "tag": format!("t{}", i % 7) })
                .as_object()
                .unwrap()
                .clone(),
        })
        .collect();
    redis.upsert(&scope, &points).await.unwrap();
    reference.upsert(&scope, &points).await.unwrap();
    assert_eq!(redis.count(&scope).await.unwrap(), POINTS as u64);

    let queries: Vec<Vec<f32>> = (0..5)
        .map(|_| (0..DIMS).map(|_| next()).collect())
        .collect();
    let filters = [
        None,
        Some(PayloadFilter::eq("even", json!(true))),
        Some(PayloadFilter::eq("tag", json!("t3")).or(PayloadFilter::eq("i", json!(5)))),
        Some(PayloadFilter::eq("tag", json!("t1")).not()),
    ];
    for vector in &queries {
        for filter in &filters {
            for (top_k, min_score) in [(10, None), (1, None), (600, None), (50, Some(0.05))] {
                let mut query = VectorQuery::new(vector.clone(), top_k);
                query.filter = filter.clone();
                query.min_score = min_score;
                let got = redis.search(&scope, &query).await.unwrap();
                let want = reference.search(&scope, &query).await.unwrap();
                assert_eq!(
                    got.iter().map(|p| p.id).collect::<Vec<_>>(),
                    want.iter().map(|p| p.id).collect::<Vec<_>>(),
                    "{filter:?}, top {top_k}, min {min_score:?}"
                );
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.score - w.score).abs() <= 1e-6,
                        "{} vs {}",
                        g.score,
                        w.score
                    );
                    assert_eq!(g.payload, w.payload);
                }
            }
        }
    }

    // Once the dimension is known, a search is two requests: the vectors, then the payloads
    // of the top_k.
    let query = VectorQuery::new(queries[0].clone(), 10);
    let before = store.round_trips();
    redis.search(&scope, &query).await.unwrap();
    assert_eq!(store.round_trips() - before, 2);
    // A minimum score no point nears ends the search after the first pass, rather than
    // reading every point's f32 vector to find none.
    let before = store.round_trips();
    let none = redis
        .search(&scope, &query.clone().with_min_score(0.99))
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(store.round_trips() - before, 1);
    let runs = 20u32;
    let started = Instant::now();
    for _ in 0..runs {
        redis.search(&scope, &query).await.unwrap();
    }
    let each = started.elapsed() / runs;
    let filtered = query.with_filter(PayloadFilter::eq("even", json!(true)));
    let started = Instant::now();
    for _ in 0..runs {
        redis.search(&scope, &filtered).await.unwrap();
    }
    let each_filtered = started.elapsed() / runs;
    eprintln!(
        "redis vector search, {POINTS} points of {DIMS} dimensions, top 10: {each:?} a search, \
         {each_filtered:?} with a filter"
    );
}

/// Round trips of each call once the scripts are cached and the dimension known: an upsert is
/// three requests (the dimension, the tenant's set, the script) and four for a user's first
/// points; get, count, delete and clear are one each.
#[tokio::test]
async fn calls_take_few_round_trips() {
    let prefix = fresh_prefix();
    let store = standalone_store_for_vectors(&prefix).await;
    let vectors = store.vector_store();
    let tenant = tenant();
    let warm = scope_of(&tenant, Some("warm"), "s");
    // Caches every script on the server.
    vectors
        .upsert(&warm, &[point(1, vec![1.0, 2.0])])
        .await
        .unwrap();
    vectors.get(&warm, &[Uuid::from_u128(1)]).await.unwrap();
    vectors.delete(&warm, &[Uuid::from_u128(1)]).await.unwrap();
    vectors.clear(&warm).await.unwrap();

    let scope = scope_of(&tenant, Some("u"), "s");
    let trips = |before: u64| store.round_trips() - before;
    let before = store.round_trips();
    vectors
        .upsert(&scope, &[point(1, vec![1.0, 2.0])])
        .await
        .unwrap();
    assert_eq!(trips(before), 4, "a user's first upsert");
    let before = store.round_trips();
    vectors
        .upsert(&scope, &[point(2, vec![2.0, 1.0])])
        .await
        .unwrap();
    assert_eq!(trips(before), 3, "an upsert");
    let before = store.round_trips();
    assert_eq!(
        vectors
            .get(&scope, &[Uuid::from_u128(2)])
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(vectors.count(&scope).await.unwrap(), 2);
    assert_eq!(
        vectors.delete(&scope, &[Uuid::from_u128(2)]).await.unwrap(),
        1
    );
    assert_eq!(vectors.clear(&scope).await.unwrap(), 1);
    assert_eq!(trips(before), 4, "get, count, delete and clear");
    let before = store.round_trips();
    vectors.upsert(&scope, &[]).await.unwrap();
    assert_eq!(vectors.get(&scope, &[]).await.unwrap(), vec![]);
    assert_eq!(vectors.delete(&scope, &[]).await.unwrap(), 0);
    assert!(
        vectors
            .search(&scope, &VectorQuery::new(vec![1.0, 0.0], 0))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(trips(before), 0, "nothing to do is no request");
}

/// `delete_matching` leaves nothing of a forgotten user: no point, no scope set, and no member
/// of the tenant's set of users (only the acknowledgement of the call, for five minutes).
#[tokio::test]
async fn delete_matching_leaves_no_trace_of_the_user() {
    let prefix = fresh_prefix();
    let vectors = standalone_vectors_under(&prefix).await;
    let tenant = tenant();
    for (user, session) in [
        (Some("u1"), "a"),
        (Some("u1"), "b"),
        (Some("u2"), "a"),
        (None, "c"),
    ] {
        vectors
            .upsert(
                &scope_of(&tenant, user, session),
                &[point(1, vec![1.0, 0.0]), point(2, vec![0.0, 1.0])],
            )
            .await
            .unwrap();
    }
    let mut conn = raw().await;
    let users_key = format!("{prefix}:{{{tenant}}}:vusers");
    let mut users: Vec<String> = conn.smembers(&users_key).await.unwrap();
    users.sort();
    assert_eq!(users, ["u1", "u2", "~"]);

    let filter = ScopeFilter::tenant(TenantId::new(tenant.as_str()).unwrap())
        .with_user(UserId::new("u1").unwrap());
    assert_eq!(vectors.count_matching(&filter).await.unwrap(), 4);
    assert_eq!(vectors.delete_matching(&filter).await.unwrap(), 4);
    let mut users: Vec<String> = conn.smembers(&users_key).await.unwrap();
    users.sort();
    assert_eq!(
        users,
        ["u2", "~"],
        "the forgotten user left the tenant's set"
    );
    let left: Vec<String> =
        support::scan_all(&mut conn, &format!("{prefix}:{{{tenant}|u1}}*")).await;
    for key in &left {
        assert!(key.ends_with(":vack"), "{key} is left after forgetting u1");
        let ttl: i64 = conn.pttl(key).await.unwrap();
        assert!(ttl > 0, "{key} expires");
    }

    // A user whose points were deleted one by one stays in the set until a delete_matching
    // finds it empty.
    let u2 = scope_of(&tenant, Some("u2"), "a");
    vectors
        .delete(&u2, &[Uuid::from_u128(1), Uuid::from_u128(2)])
        .await
        .unwrap();
    let whole = ScopeFilter::tenant(TenantId::new(tenant.as_str()).unwrap());
    assert_eq!(vectors.count_matching(&whole).await.unwrap(), 2);
    assert_eq!(vectors.delete_matching(&whole).await.unwrap(), 2);
    let exists: bool = conn.exists(&users_key).await.unwrap();
    assert!(
        !exists,
        "the tenant's set of users is gone with its last user"
    );
    let left: Vec<String> = support::scan_all(&mut conn, &format!("{prefix}:{{{tenant}*")).await;
    assert!(
        left.iter().all(|key| key.contains(":vack")),
        "only acknowledgements are left: {left:?}"
    );
    // A new upsert indexes the user again.
    vectors
        .upsert(&u2, &[point(3, vec![1.0, 1.0])])
        .await
        .unwrap();
    assert_eq!(vectors.count_matching(&whole).await.unwrap(), 1);
}

/// Points stored before the store kept compact vectors (a vector and a payload, no compact
/// copy) are still found, with exact scores, beside points written since, by `search` and by
/// `search_matching`.
#[tokio::test]
async fn points_without_a_compact_copy_are_still_found_exactly() {
    // Vectors of 2 dimensions: a prefix of the test's own.
    let prefix = fresh_prefix();
    let vectors = standalone_store_for_vectors(&prefix).await.vector_store();
    let tenant = tenant();
    let scope = scope_of(&tenant, Some("u"), "s");
    // The store records the dimension and the scope; then older points are written as a
    // store of an earlier version wrote them.
    vectors
        .upsert(&scope, &[point(100, vec![1.0, 0.05])])
        .await
        .unwrap();
    let mut conn = raw().await;
    let base = format!("{prefix}:{{{tenant}|u}}");
    for n in 0..40u8 {
        let old = point(u128::from(n), vec![1.0, f32::from(n) / 10.0]);
        let bytes: Vec<u8> = old.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        let id = old.id.to_string();
        let () = conn
            .hset(format!("{base}:vvec:{}", scope.key()), &id, bytes)
            .await
            .unwrap();
        let () = conn
            .hset(
                format!("{base}:vpay:{}", scope.key()),
                &id,
                serde_json::to_string(&old.payload).unwrap(),
            )
            .await
            .unwrap();
    }
    let query = VectorQuery::new(vec![1.0, 0.0], 3);
    let found = vectors.search(&scope, &query).await.unwrap();
    let ids: Vec<Uuid> = found.iter().map(|p| p.id).collect();
    assert_eq!(ids, [0, 100, 1].map(Uuid::from_u128));
    let expected = [
        1.0,
        1.0 / (1.0f32 + 0.0025).sqrt(),
        1.0 / (1.0f32 + 0.01).sqrt(),
    ];
    for (hit, score) in found.iter().zip(expected) {
        assert!((hit.score - score).abs() < 1e-6, "{} vs {score}", hit.score);
    }
    assert_eq!(found[0].payload, point(0, vec![]).payload);
    let user =
        ScopeFilter::tenant(TenantId::new(&tenant).unwrap()).with_user(UserId::new("u").unwrap());
    let across = vectors.search_matching(&user, &query).await.unwrap();
    assert_eq!(across.iter().map(|h| h.hit.id).collect::<Vec<_>>(), ids);
    assert_eq!(vectors.clear(&scope).await.unwrap(), 41);
}

/// Stored data the store did not write (a vector of the wrong length, a payload that is not
/// an object) is `Serialization`, never a wrong answer; `clear` still removes it.
#[tokio::test]
async fn damaged_points_are_serialization_errors() {
    let vectors = standalone_vectors().await;
    let scope = scope_of(&tenant(), Some("u"), "s");
    vectors
        .upsert(&scope, &[point(1, vec![1.0, 0.0, 0.0, 0.0])])
        .await
        .unwrap();
    let mut conn = raw().await;
    let base = format!("{}:{{{}|u}}", support::prefix(), scope.tenant());
    let id = Uuid::from_u128(2).to_string();
    let () = conn
        .hset(format!("{base}:vvec:{}", scope.key()), &id, vec![0u8; 7])
        .await
        .unwrap();
    let () = conn
        .hset(format!("{base}:vpay:{}", scope.key()), &id, "[1]")
        .await
        .unwrap();
    let query = VectorQuery::new(vec![1.0, 0.0, 0.0, 0.0], 5);
    assert_eq!(
        kind(vectors.search(&scope, &query).await),
        ErrorKind::Serialization
    );
    assert_eq!(
        kind(vectors.get(&scope, &[Uuid::from_u128(2)]).await),
        ErrorKind::Serialization
    );
    assert_eq!(vectors.clear(&scope).await.unwrap(), 2);
    assert!(vectors.search(&scope, &query).await.unwrap().is_empty());
}

/// On a cluster every key of one user's points is in one slot (so a later call can read all of
/// a user's sessions at once), users spread over the masters, and `delete_matching` of a tenant
/// finds them on every master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_points_share_one_slot_and_tenants_span_the_cluster() {
    let vectors: RedisVectorStore = support::cluster_vectors().await;
    let tenant = tenant();
    let users: Vec<String> = (0..12).map(|u| format!("u{u}")).collect();
    for user in &users {
        for session in ["a", "b", "c"] {
            vectors
                .upsert(
                    &scope_of(&tenant, Some(user), session),
                    &[
                        point(1, vec![1.0, 0.0, 0.0, 0.0]),
                        point(2, vec![0.0, 1.0, 0.0, 0.0]),
                    ],
                )
                .await
                .unwrap();
        }
    }
    let prefix = support::prefix();
    let mut masters_used = std::collections::BTreeSet::new();
    for user in &users {
        let pattern = format!("{prefix}:{{{tenant}|{user}}}:*");
        let holders: Vec<u16> = support::cluster()
            .ports()
            .into_iter()
            .filter(|&port| {
                support::command_reply(port, &["SCAN", "0", "MATCH", &pattern, "COUNT", "100000"])
                    .unwrap()
                    .contains(":vvec:")
            })
            .collect();
        assert_eq!(holders.len(), 1, "the keys of {user} are on one master");
        masters_used.insert(holders[0]);
    }
    assert!(
        masters_used.len() >= 2,
        "12 users should spread over the masters"
    );
    let filter = ScopeFilter::tenant(TenantId::new(tenant.as_str()).unwrap());
    assert_eq!(vectors.count_matching(&filter).await.unwrap(), 72);
    assert_eq!(vectors.delete_matching(&filter).await.unwrap(), 72);
    for user in &users {
        assert_eq!(
            vectors
                .count(&scope_of(&tenant, Some(user), "b"))
                .await
                .unwrap(),
            0
        );
    }
    assert_eq!(vectors.count_matching(&filter).await.unwrap(), 0);
}
