//! The [`VectorStore`] conformance suite.
//!
//! Each check is an async function taking the store under test; it writes under its own random
//! scope (see [`random_scope`]), so checks can run in parallel against one shared server and one
//! store instance can run them all ([`run_all_vector_checks`]). A check panics, with a message
//! saying what was expected, when the store breaks the contract.
//!
//! Every vector has [`VECTOR_DIM`] (4) dimensions, since a store fixes one dimension (at its
//! first upsert). Scores are compared with a tolerance of [`SCORE_TOLERANCE`], as stores compute
//! them in `f32`, some on normalized vectors.

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::{
    ErrorKind, PayloadFilter, Result, Scope, ScopeFilter, ScoredPoint, VectorPoint, VectorQuery,
    VectorStore,
};
use serde_json::json;
use uuid::Uuid;

use crate::delete_matching::ScopedItems;
use crate::fixtures::{
    ExpectOk, VECTOR_DIM, expect_error_kind, payload, point, random_scope, sorted_ids,
};
use crate::search_matching::ScopedSearch;

/// How far a returned score may be from the exact cosine similarity.
pub const SCORE_TOLERANCE: f32 = 1e-4;

async fn upsert(store: &dyn VectorStore, scope: &Scope, points: &[VectorPoint]) {
    store
        .upsert(scope, points)
        .await
        .expect_ok(&format!("upsert {} points", points.len()));
}

async fn search(store: &dyn VectorStore, scope: &Scope, query: VectorQuery) -> Vec<ScoredPoint> {
    store
        .search(scope, &query)
        .await
        .expect_ok(&format!("search {query:?}"))
}

async fn count(store: &dyn VectorStore, scope: &Scope) -> u64 {
    store.count(scope).await.expect_ok("count")
}

/// The points of `ids` in `scope`, sorted by id (the contract does not order `get`).
async fn get_sorted(store: &dyn VectorStore, scope: &Scope, ids: &[Uuid]) -> Vec<VectorPoint> {
    let mut points = store.get(scope, ids).await.expect_ok("get");
    points.sort_by_key(|p| p.id);
    points
}

fn result_ids(results: &[ScoredPoint]) -> Vec<Uuid> {
    results.iter().map(|r| r.id).collect()
}

fn id_set(results: &[ScoredPoint]) -> BTreeSet<Uuid> {
    results.iter().map(|r| r.id).collect()
}

const QUERY: [f32; VECTOR_DIM] = [1.0, 0.0, 0.0, 0.0];

/// Six points at known cosine similarities to [`QUERY`], with their expected scores, in
/// decreasing order of similarity.
fn graded_points() -> Vec<(VectorPoint, f32)> {
    let vectors: [([f32; VECTOR_DIM], f32); 6] = [
        ([2.0, 0.0, 0.0, 0.0], 1.0),
        ([1.0, 1.0, 0.0, 0.0], std::f32::consts::FRAC_1_SQRT_2),
        ([1.0, 1.0, 1.0, 0.0], 1.0 / 3f32.sqrt()),
        ([1.0, 1.0, 1.0, 1.0], 0.5),
        ([0.0, 1.0, 0.0, 0.0], 0.0),
        ([-1.0, 0.0, 0.0, 0.0], -1.0),
    ];
    vectors
        .iter()
        .enumerate()
        .map(|(i, (v, score))| (point(Uuid::new_v4(), *v, json!({"rank": i})), *score))
        .collect()
}

/// Upserts [`graded_points`] in a shuffled order; returns them in decreasing similarity.
async fn upsert_graded(store: &dyn VectorStore, scope: &Scope) -> Vec<(VectorPoint, f32)> {
    let graded = graded_points();
    let shuffled: Vec<VectorPoint> = [3, 0, 5, 1, 4, 2]
        .iter()
        .map(|&i| graded[i].0.clone())
        .collect();
    upsert(store, scope, &shuffled).await;
    graded
}

fn assert_scores(results: &[ScoredPoint], expected: &[(VectorPoint, f32)], what: &str) {
    assert_eq!(
        result_ids(results),
        expected.iter().map(|(p, _)| p.id).collect::<Vec<_>>(),
        "{what}: ids in decreasing similarity"
    );
    for (r, (p, score)) in results.iter().zip(expected) {
        assert!(
            (r.score - score).abs() <= SCORE_TOLERANCE,
            "{what}: point {} scores {}, expected cosine similarity {score}",
            r.id,
            r.score
        );
        assert_eq!(r.payload, p.payload, "{what}: a result carries its payload");
    }
}

/// Contract: `upsert` inserts points and `get` returns the points of the given ids that exist in
/// the scope, with their exact vectors and payloads.
pub async fn upsert_then_get_returns_points(store: &dyn VectorStore) {
    let scope = random_scope();
    let ids = sorted_ids(3);
    let points = vec![
        point(ids[0], [0.1, 0.2, 0.3, 0.4], json!({"text": "a", "n": 1})),
        point(
            ids[1],
            [-1.5, 0.0, 2.25, 1e-3],
            json!({"text": "ü 日本 🎉", "tags": ["x", "y"], "nested": {"k": true}}),
        ),
        point(ids[2], [1.0, 1.0, 1.0, 1.0], json!({})),
    ];
    upsert(store, &scope, &points).await;
    assert_eq!(
        get_sorted(store, &scope, &ids).await,
        points,
        "get returns every upserted point with its exact vector and payload"
    );
    let unknown = Uuid::new_v4();
    assert_eq!(
        get_sorted(store, &scope, &[ids[1], unknown]).await,
        vec![points[1].clone()],
        "get skips ids that do not exist"
    );
    assert!(
        store
            .get(&scope, &[])
            .await
            .expect_ok("get no ids")
            .is_empty(),
        "get of no ids is empty"
    );
    assert_eq!(
        count(store, &scope).await,
        3,
        "count after upserting 3 points"
    );
}

/// Contract: a scope never written is empty: search, get and count find nothing.
pub async fn unknown_scope_is_empty(store: &dyn VectorStore) {
    let sibling = random_scope();
    upsert(
        store,
        &sibling,
        &[point(Uuid::new_v4(), [1.0, 0.0, 0.0, 0.0], json!({}))],
    )
    .await;
    let scope = random_scope();
    assert!(
        search(store, &scope, VectorQuery::new(QUERY.to_vec(), 10))
            .await
            .is_empty(),
        "search in a scope never written is empty"
    );
    assert_eq!(
        count(store, &scope).await,
        0,
        "count of a scope never written"
    );
    assert!(
        store
            .get(&scope, &[Uuid::new_v4()])
            .await
            .expect_ok("get")
            .is_empty(),
        "get in a scope never written is empty"
    );
}

/// Contract: `search` returns at most `top_k` points by decreasing cosine similarity.
pub async fn search_orders_by_cosine_similarity(store: &dyn VectorStore) {
    let scope = random_scope();
    let graded = upsert_graded(store, &scope).await;
    assert_scores(
        &search(store, &scope, VectorQuery::new(QUERY.to_vec(), 3)).await,
        &graded[..3],
        "top 3",
    );
    assert_scores(
        &search(store, &scope, VectorQuery::new(QUERY.to_vec(), 6)).await,
        &graded,
        "top 6 of 6",
    );
    assert_scores(
        &search(store, &scope, VectorQuery::new(QUERY.to_vec(), 1)).await,
        &graded[..1],
        "top 1",
    );
    // The query's length does not matter to cosine similarity.
    assert_scores(
        &search(store, &scope, VectorQuery::new(vec![7.0, 0.0, 0.0, 0.0], 2)).await,
        &graded[..2],
        "a scaled query",
    );
    let reversed: Vec<(VectorPoint, f32)> =
        graded.iter().rev().map(|(p, s)| (p.clone(), -s)).collect();
    assert_scores(
        &search(
            store,
            &scope,
            VectorQuery::new(vec![-1.0, 0.0, 0.0, 0.0], 2),
        )
        .await,
        &reversed[..2],
        "the opposite query ranks in reverse",
    );
}

/// Contract: equal similarities are ordered by id (ascending).
pub async fn search_breaks_ties_by_id(store: &dyn VectorStore) {
    let scope = random_scope();
    let ids = sorted_ids(5);
    // Upserted in descending id order, so insertion order is not id order.
    let tied: Vec<VectorPoint> = ids
        .iter()
        .rev()
        .map(|id| point(*id, [0.0, 0.0, 1.0, 1.0], json!({"tied": true})))
        .collect();
    upsert(store, &scope, &tied).await;
    let best = point(Uuid::new_v4(), [0.0, 0.0, 1.0, 1.1], json!({"tied": false}));
    upsert(store, &scope, std::slice::from_ref(&best)).await;
    let results = search(store, &scope, VectorQuery::new(vec![0.0, 0.0, 1.0, 1.1], 4)).await;
    let mut expected = vec![best.id];
    expected.extend(&ids[..3]);
    assert_eq!(
        result_ids(&results),
        expected,
        "the best match first, then the tied points by ascending id"
    );
}

/// Contract: `search` returns *at most* `top_k` points: every point when `top_k` is larger
/// than the scope, none when it is 0.
pub async fn search_top_k_larger_than_count(store: &dyn VectorStore) {
    let scope = random_scope();
    let graded = upsert_graded(store, &scope).await;
    assert_scores(
        &search(store, &scope, VectorQuery::new(QUERY.to_vec(), 100)).await,
        &graded,
        "top_k 100 of 6 points",
    );
    assert!(
        search(store, &scope, VectorQuery::new(QUERY.to_vec(), 0))
            .await
            .is_empty(),
        "top_k 0 returns nothing"
    );
}

/// Contract (`VectorQuery::min_score`): only points scoring at least `min_score` are returned.
pub async fn search_min_score_drops_lower_scores(store: &dyn VectorStore) {
    let scope = random_scope();
    let graded = upsert_graded(store, &scope).await;
    for (min, keep) in [(0.9, 1), (0.6, 2), (0.55, 3), (0.45, 4), (-0.5, 5)] {
        assert_scores(
            &search(
                store,
                &scope,
                VectorQuery::new(QUERY.to_vec(), 10).with_min_score(min),
            )
            .await,
            &graded[..keep],
            &format!("min_score {min}"),
        );
    }
}

/// Four points with payloads for the filter checks, with distinct similarities to [`QUERY`].
fn filter_points() -> Vec<VectorPoint> {
    vec![
        point(
            Uuid::new_v4(),
            [1.0, 0.1, 0.0, 0.0],
            json!({"kind": "fact", "lang": "en", "n": 1, "pinned": true}),
        ),
        point(
            Uuid::new_v4(),
            [1.0, 0.2, 0.0, 0.0],
            json!({"kind": "fact", "lang": "pt", "n": 2, "pinned": false}),
        ),
        point(
            Uuid::new_v4(),
            [1.0, 0.3, 0.0, 0.0],
            json!({"kind": "note", "lang": "en", "n": 3}),
        ),
        point(
            Uuid::new_v4(),
            [1.0, 0.4, 0.0, 0.0],
            json!({"kind": "note", "lang": "pt"}),
        ),
    ]
}

/// Upserts [`filter_points`] in a new scope and checks each case `(filter, expected, what)`:
/// a search with `filter` finds exactly the points at the indexes `expected`, in decreasing
/// similarity.
async fn filter_cases(store: &dyn VectorStore, cases: Vec<(PayloadFilter, &[usize], &str)>) {
    let scope = random_scope();
    let points = filter_points();
    upsert(store, &scope, &points).await;
    for (filter, expected, what) in cases {
        let results = search(
            store,
            &scope,
            VectorQuery::new(QUERY.to_vec(), 10).with_filter(filter.clone()),
        )
        .await;
        assert_eq!(
            result_ids(&results),
            expected.iter().map(|&i| points[i].id).collect::<Vec<_>>(),
            "{what}: filter {filter:?} matches points {expected:?}, in decreasing similarity"
        );
    }
}

/// Contract (`PayloadFilter::Eq`): only points whose payload field equals the value (strings,
/// integers, booleans); a missing field never equals.
pub async fn filter_eq_matches_field_values(store: &dyn VectorStore) {
    filter_cases(
        store,
        vec![
            (PayloadFilter::eq("kind", json!("fact")), &[0, 1], "string"),
            (PayloadFilter::eq("n", json!(2)), &[1], "integer"),
            (PayloadFilter::eq("pinned", json!(true)), &[0], "boolean"),
            (PayloadFilter::eq("kind", json!("none")), &[], "no match"),
            (
                PayloadFilter::eq("absent", json!("x")),
                &[],
                "missing field",
            ),
        ],
    )
    .await;
}

/// Contract (`PayloadFilter::And`): every sub-filter matches.
pub async fn filter_and_requires_every_condition(store: &dyn VectorStore) {
    let fact = || PayloadFilter::eq("kind", json!("fact"));
    let en = || PayloadFilter::eq("lang", json!("en"));
    filter_cases(
        store,
        vec![
            (fact().and(en()), &[0], "fact and en"),
            (
                PayloadFilter::And(vec![fact(), en(), PayloadFilter::eq("n", json!(2))]),
                &[],
                "contradictory",
            ),
        ],
    )
    .await;
}

/// Contract (`PayloadFilter::Or`): at least one sub-filter matches.
pub async fn filter_or_accepts_any_condition(store: &dyn VectorStore) {
    filter_cases(
        store,
        vec![
            (
                PayloadFilter::eq("n", json!(1)).or(PayloadFilter::eq("lang", json!("pt"))),
                &[0, 1, 3],
                "n = 1 or pt",
            ),
            (
                PayloadFilter::eq("kind", json!("note"))
                    .and(PayloadFilter::eq("lang", json!("en")))
                    .or(PayloadFilter::eq("pinned", json!(false))),
                &[1, 2],
                "(note and en) or not pinned",
            ),
        ],
    )
    .await;
}

/// Contract (`PayloadFilter::Not`): the sub-filter does not match, including for points that
/// lack the field.
pub async fn filter_not_negates(store: &dyn VectorStore) {
    filter_cases(
        store,
        vec![
            (
                PayloadFilter::eq("lang", json!("en")).not(),
                &[1, 3],
                "not en",
            ),
            (
                PayloadFilter::eq("n", json!(1)).not(),
                &[1, 2, 3],
                "not n = 1 (a point without n matches)",
            ),
            (
                PayloadFilter::eq("kind", json!("fact"))
                    .and(PayloadFilter::eq("lang", json!("pt")).not()),
                &[0],
                "fact and not pt",
            ),
        ],
    )
    .await;
}

/// Contract: `search` returns points *of the scope*, enforced by the store whatever filter is
/// passed; `get`, `delete`, `count` and `clear` are scoped too.
pub async fn scope_is_enforced_whatever_the_filter(store: &dyn VectorStore) {
    let (a, b) = (
        random_scope(),
        random_scope().with_user("other").expect("valid"),
    );
    let a_points = vec![
        point(Uuid::new_v4(), [1.0, 0.0, 0.0, 0.0], json!({"owner": "a"})),
        point(Uuid::new_v4(), [0.9, 0.1, 0.0, 0.0], json!({"owner": "a"})),
    ];
    let b_points = vec![
        point(Uuid::new_v4(), [1.0, 0.0, 0.0, 0.0], json!({"owner": "b"})),
        point(Uuid::new_v4(), [1.0, 0.0, 0.0, 0.0], json!({"owner": "b"})),
    ];
    upsert(store, &a, &a_points).await;
    upsert(store, &b, &b_points).await;
    let owner_b = PayloadFilter::eq("owner", json!("b"));
    assert!(
        search(
            store,
            &a,
            VectorQuery::new(QUERY.to_vec(), 10).with_filter(owner_b.clone())
        )
        .await
        .is_empty(),
        "a filter matching only another scope's payloads finds nothing"
    );
    let either = PayloadFilter::eq("owner", json!("a")).or(owner_b);
    assert_eq!(
        id_set(
            &search(
                store,
                &a,
                VectorQuery::new(QUERY.to_vec(), 10).with_filter(either)
            )
            .await
        ),
        a_points.iter().map(|p| p.id).collect(),
        "a filter matching both scopes returns only the searched scope's points"
    );
    assert_eq!(
        id_set(&search(store, &a, VectorQuery::new(QUERY.to_vec(), 10)).await),
        a_points.iter().map(|p| p.id).collect(),
        "an unfiltered search returns only the scope's points"
    );
    let b_ids: Vec<Uuid> = b_points.iter().map(|p| p.id).collect();
    assert!(
        store.get(&a, &b_ids).await.expect_ok("get").is_empty(),
        "get does not return another scope's points"
    );
    assert_eq!(
        store.delete(&a, &b_ids).await.expect_ok("delete"),
        0,
        "delete does not remove another scope's points"
    );
    assert_eq!(
        count(store, &b).await,
        2,
        "the other scope keeps its points"
    );
    assert_eq!(
        store.clear(&a).await.expect_ok("clear a"),
        2,
        "clear removes only the scope's own points"
    );
    assert_eq!(
        get_sorted(store, &b, &b_ids).await,
        {
            let mut sorted = b_points.clone();
            sorted.sort_by_key(|p| p.id);
            sorted
        },
        "clearing one scope leaves another's points intact"
    );
}

/// The points of [`search_ranks_exactly_beyond_a_few_candidates`]: `n` pseudo-random vectors
/// (a fixed sequence, so a failure reproduces), with random ids.
fn scattered_points(seed: u64, n: usize) -> Vec<VectorPoint> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 20_001) as f32 / 10_000.0 - 1.0
    };
    (0..n)
        .map(|i| {
            let v = [next(), next(), next(), next()];
            point(Uuid::new_v4(), v, json!({"i": i}))
        })
        .collect()
}

/// The exact top `top_k` of `points` for `query` (decreasing cosine similarity, ties by id).
fn brute_force(points: &[VectorPoint], query: &[f32], top_k: usize) -> Vec<(Uuid, f32)> {
    let mut scored: Vec<(Uuid, f32)> = points
        .iter()
        .map(|p| {
            (
                p.id,
                memory_core::vector::cosine_similarity(query, &p.vector),
            )
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(top_k);
    scored
}

/// Contract: a search returns the exact top `top_k` by cosine similarity with exact scores,
/// also when a scope holds many more points than `top_k` (a store may rank in two passes, an
/// approximate one over every point and an exact one over the best candidates: what it
/// returns is still the exact ranking); and so does `search_matching` over a user's scopes.
pub async fn search_ranks_exactly_beyond_a_few_candidates(store: &dyn VectorStore) {
    let tenant = random_scope().tenant().clone();
    let scopes = ["first", "second", "third"].map(|session| {
        Scope::session(session)
            .and_then(|s| s.with_tenant(tenant.as_str()))
            .and_then(|s| s.with_user("ranked"))
            .expect("a valid scope")
    });
    let mut all = Vec::new();
    for (i, scope) in scopes.iter().enumerate() {
        let points = scattered_points(11 + i as u64, 150);
        upsert(store, scope, &points).await;
        all.push(points);
    }
    let check = |got: Vec<(Uuid, f32)>, expected: Vec<(Uuid, f32)>, what: &str| {
        assert_eq!(
            got.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            expected.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            "{what}: the exact top points, best first"
        );
        for ((id, score), (_, exact)) in got.iter().zip(&expected) {
            assert!(
                (score - exact).abs() <= SCORE_TOLERANCE,
                "{what}: point {id} scores {score}, its cosine similarity is {exact}"
            );
        }
    };
    for (q, query) in scattered_points(99, 8).iter().enumerate() {
        for top_k in [1, 10, 40] {
            let what = format!("query {q}, top {top_k}");
            let found = search(
                store,
                &scopes[0],
                VectorQuery::new(query.vector.clone(), top_k),
            )
            .await
            .into_iter()
            .map(|hit| (hit.id, hit.score))
            .collect();
            check(found, brute_force(&all[0], &query.vector, top_k), &what);
            if !store.capabilities().searches_matching {
                continue;
            }
            let user = ScopeFilter::tenant(tenant.clone())
                .with_user(scopes[0].user().cloned().expect("the scope has a user"));
            let found = store
                .search_matching(&user, &VectorQuery::new(query.vector.clone(), top_k))
                .await
                .expect_ok("search_matching")
                .into_iter()
                .map(|hit| (hit.hit.id, hit.hit.score))
                .collect();
            let every: Vec<VectorPoint> = all.iter().flatten().cloned().collect();
            check(
                found,
                brute_force(&every, &query.vector, top_k),
                &format!("{what}, across the user's scopes"),
            );
        }
    }
}

/// Contract: point ids are unique *within a scope*: the same id in two scopes is two points,
/// with their own vectors and payloads.
pub async fn same_point_id_in_two_scopes(store: &dyn VectorStore) {
    let base = random_scope();
    let scopes = [
        base.clone(),
        base.clone().with_agent("other").expect("valid"),
        base.clone().with_source("other").expect("valid"),
    ];
    let id = Uuid::new_v4();
    for (i, scope) in scopes.iter().enumerate() {
        let mut v = [0.0; VECTOR_DIM];
        v[i] = 1.0;
        upsert(store, scope, &[point(id, v, json!({"scope": i}))]).await;
    }
    for (i, scope) in scopes.iter().enumerate() {
        let got = store.get(scope, &[id]).await.expect_ok("get");
        assert_eq!(
            got.len(),
            1,
            "scope {i} holds its own point of the shared id"
        );
        assert_eq!(
            got[0].payload,
            payload(json!({"scope": i})),
            "scope {i}'s point keeps its own payload"
        );
        assert_eq!(count(store, scope).await, 1, "scope {i} counts one point");
    }
    assert_eq!(
        store.delete(&scopes[0], &[id]).await.expect_ok("delete"),
        1,
        "deleting the shared id in one scope"
    );
    for (i, scope) in scopes.iter().enumerate().skip(1) {
        assert_eq!(
            count(store, scope).await,
            1,
            "scope {i} keeps its point after the delete in scope 0"
        );
    }
}

/// Contract: a retried upsert of the same points changes nothing (count and points unchanged).
pub async fn reupsert_is_idempotent(store: &dyn VectorStore) {
    let scope = random_scope();
    let graded = graded_points();
    let points: Vec<VectorPoint> = graded.iter().map(|(p, _)| p.clone()).collect();
    upsert(store, &scope, &points).await;
    let mut ids: Vec<Uuid> = points.iter().map(|p| p.id).collect();
    ids.sort();
    let before = get_sorted(store, &scope, &ids).await;
    upsert(store, &scope, &points).await;
    upsert(store, &scope, &points[1..3]).await;
    assert_eq!(
        count(store, &scope).await,
        points.len() as u64,
        "a retried upsert adds no point"
    );
    assert_eq!(
        get_sorted(store, &scope, &ids).await,
        before,
        "a retried upsert changes no point"
    );
    assert_scores(
        &search(store, &scope, VectorQuery::new(QUERY.to_vec(), 10)).await,
        &graded,
        "search after retried upserts returns each point once",
    );
}

/// Contract: `upsert` replaces a point by id: a changed payload and vector replace the old
/// ones (count unchanged), and searches see the new vector.
pub async fn reupsert_replaces_payload_and_vector(store: &dyn VectorStore) {
    let scope = random_scope();
    let (id, other) = (Uuid::new_v4(), Uuid::new_v4());
    upsert(
        store,
        &scope,
        &[
            point(id, [1.0, 0.0, 0.0, 0.0], json!({"v": 1, "old_only": true})),
            point(other, [0.0, 1.0, 0.0, 0.0], json!({"v": 1})),
        ],
    )
    .await;
    let replacement = point(id, [0.0, 0.0, 0.0, 1.0], json!({"v": 2}));
    upsert(store, &scope, std::slice::from_ref(&replacement)).await;
    assert_eq!(
        count(store, &scope).await,
        2,
        "replacing a point keeps the count"
    );
    assert_eq!(
        store.get(&scope, &[id]).await.expect_ok("get"),
        vec![replacement],
        "the payload is replaced, not merged, and the vector is the new one"
    );
    let top = search(store, &scope, VectorQuery::new(vec![0.0, 0.0, 0.0, 1.0], 1)).await;
    assert_eq!(result_ids(&top), vec![id], "search sees the new vector");
    assert!(
        search(
            store,
            &scope,
            VectorQuery::new(QUERY.to_vec(), 10)
                .with_filter(PayloadFilter::eq("old_only", json!(true)))
        )
        .await
        .is_empty(),
        "the old payload no longer matches filters"
    );
}

/// Contract: a vector of another dimension, an empty vector, or a non-finite value is
/// `InvalidInput`, and nothing of that batch is written (not even its valid points).
pub async fn invalid_vectors_are_refused_atomically(store: &dyn VectorStore) {
    let scope = random_scope();
    let existing = point(Uuid::new_v4(), [1.0, 0.0, 0.0, 0.0], json!({"n": 0}));
    upsert(store, &scope, std::slice::from_ref(&existing)).await;
    let valid_id = Uuid::new_v4();
    let valid = point(valid_id, [0.0, 1.0, 0.0, 0.0], json!({"n": 1}));
    let replaced = point(existing.id, [0.0, 0.0, 1.0, 0.0], json!({"n": "replaced"}));
    let bad = |vector: Vec<f32>| VectorPoint {
        id: Uuid::new_v4(),
        vector,
        payload: payload(json!({"bad": true})),
    };
    let cases: Vec<(&str, VectorPoint)> = vec![
        ("a shorter vector", bad(vec![1.0, 0.0, 0.0])),
        ("a longer vector", bad(vec![1.0, 0.0, 0.0, 0.0, 0.0])),
        ("an empty vector", bad(vec![])),
        ("a NaN", bad(vec![1.0, f32::NAN, 0.0, 0.0])),
        ("an infinity", bad(vec![f32::INFINITY, 0.0, 0.0, 0.0])),
        (
            "a negative infinity",
            bad(vec![0.0, 0.0, 0.0, f32::NEG_INFINITY]),
        ),
    ];
    for (what, invalid) in cases {
        for batch in [
            vec![valid.clone(), replaced.clone(), invalid.clone()],
            vec![invalid.clone(), valid.clone()],
        ] {
            expect_error_kind(
                store.upsert(&scope, &batch).await,
                ErrorKind::InvalidInput,
                &format!("upsert of a batch holding {what}"),
            );
            assert_eq!(
                count(store, &scope).await,
                1,
                "a batch refused for {what} writes nothing"
            );
            assert!(
                store
                    .get(&scope, &[valid_id, invalid.id])
                    .await
                    .expect_ok("get")
                    .is_empty(),
                "no point of a batch refused for {what} is stored"
            );
            assert_eq!(
                store.get(&scope, &[existing.id]).await.expect_ok("get"),
                vec![existing.clone()],
                "a batch refused for {what} replaces nothing"
            );
        }
    }
}

/// Contract: `delete` removes points by id and returns how many existed.
pub async fn delete_returns_how_many_existed(store: &dyn VectorStore) {
    let scope = random_scope();
    let ids = sorted_ids(4);
    let points: Vec<VectorPoint> = ids
        .iter()
        .map(|id| point(*id, [1.0, 2.0, 3.0, 4.0], json!({})))
        .collect();
    upsert(store, &scope, &points).await;
    assert_eq!(
        store
            .delete(&scope, &[ids[0], ids[2], Uuid::new_v4()])
            .await
            .expect_ok("delete"),
        2,
        "delete of two existing ids and an unknown one returns 2"
    );
    assert_eq!(
        store
            .delete(&scope, &[ids[0]])
            .await
            .expect_ok("delete again"),
        0,
        "delete of an already deleted id returns 0"
    );
    assert_eq!(
        store.delete(&scope, &[]).await.expect_ok("delete nothing"),
        0,
        "delete of no ids returns 0"
    );
    assert_eq!(count(store, &scope).await, 2, "two points remain");
    assert_eq!(
        get_sorted(store, &scope, &ids).await,
        vec![points[1].clone(), points[3].clone()],
        "the undeleted points remain"
    );
    assert_eq!(
        id_set(&search(store, &scope, VectorQuery::new(QUERY.to_vec(), 10)).await),
        [ids[1], ids[3]].into_iter().collect(),
        "deleted points are not found by search"
    );
}

/// Contract: `count` counts a scope's points.
pub async fn count_counts_the_scope_points(store: &dyn VectorStore) {
    let scope = random_scope();
    assert_eq!(count(store, &scope).await, 0, "an empty scope counts 0");
    for n in 1..=3u64 {
        upsert(
            store,
            &scope,
            &[point(
                Uuid::new_v4(),
                [n as f32, 1.0, 0.0, 0.0],
                json!({"n": n}),
            )],
        )
        .await;
        assert_eq!(count(store, &scope).await, n, "count after {n} upserts");
    }
    store.upsert(&scope, &[]).await.expect_ok("upsert no point");
    assert_eq!(
        count(store, &scope).await,
        3,
        "an empty upsert adds nothing"
    );
}

/// Contract: `clear` removes every point of the scope and returns how many.
pub async fn clear_removes_the_scope_points(store: &dyn VectorStore) {
    let scope = random_scope();
    let graded = upsert_graded(store, &scope).await;
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear"),
        graded.len() as u64,
        "clear returns how many points it removed"
    );
    assert_eq!(count(store, &scope).await, 0, "a cleared scope counts 0");
    assert!(
        search(store, &scope, VectorQuery::new(QUERY.to_vec(), 10))
            .await
            .is_empty(),
        "a cleared scope finds nothing"
    );
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear again"),
        0,
        "clearing twice removes nothing the second time"
    );
    upsert(store, &scope, &[graded[0].0.clone()]).await;
    assert_eq!(
        count(store, &scope).await,
        1,
        "a cleared scope takes new points"
    );
}

/// Contract: `delete_matching` (optional: `deletes_matching`) removes every point of every
/// scope a forget filter selects (its tenant, and its user, agent and session when it names
/// them; any source) and no other, and returns how many; `count_matching` returns that number
/// beforehand and changes nothing; repeating the delete removes nothing. Without the
/// capability both answer `Unsupported` and change nothing. (The check is the one every
/// trait with `delete_matching` runs, written once for both.)
pub async fn delete_matching_removes_the_selected_scopes(store: &dyn VectorStore) {
    crate::delete_matching::delete_matching_removes_the_selected_scopes(store).await;
}

/// A vector store as the `delete_matching` check sees it: each scope's points lie close to
/// [`QUERY`], so a search finds them all.
#[async_trait::async_trait]
impl ScopedItems for dyn VectorStore {
    const ITEM: &'static str = "point";
    const HOLDER: &'static str = "store";

    fn deletes_matching(&self) -> bool {
        self.capabilities().deletes_matching
    }
    async fn reseed(&self, scope: &Scope, n: usize) {
        self.clear(scope).await.expect_ok("clear before seeding");
        let points: Vec<VectorPoint> = (0..n)
            .map(|k| point(Uuid::new_v4(), [1.0, k as f32, 0.5, 0.0], json!({ "k": k })))
            .collect();
        upsert(self, scope, &points).await;
    }
    async fn count(&self, scope: &Scope) -> u64 {
        count(self, scope).await
    }
    async fn found(&self, scope: &Scope) -> u64 {
        search(self, scope, VectorQuery::new(QUERY.to_vec(), 10))
            .await
            .len() as u64
    }
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        VectorStore::delete_matching(self, filter).await
    }
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        VectorStore::count_matching(self, filter).await
    }
}

/// Contract: `search_matching` (optional: `searches_matching`) finds the points of every scope
/// a filter selects and of no other, each with its scope, at most `top_k`, by decreasing
/// cosine similarity; without the capability it is `Unsupported`. (The check is the one every
/// trait with `search_matching` runs, written once for both.)
pub async fn search_matching_finds_exactly_the_selected_scopes(store: &dyn VectorStore) {
    crate::search_matching::search_matching_finds_exactly_the_selected_scopes(store).await;
}

/// A vector store as the `search_matching` check sees it: a point of rank `r` lies further from
/// [`QUERY`] as `r` grows.
#[async_trait::async_trait]
impl ScopedSearch for dyn VectorStore {
    const ITEM: &'static str = "point";

    fn searches_matching(&self) -> bool {
        self.capabilities().searches_matching
    }
    async fn put(&self, scope: &Scope, id: Uuid, rank: usize) {
        let vector = [1.0, rank as f32, 0.25, 0.0];
        upsert(self, scope, &[point(id, vector, json!({"rank": rank}))]).await;
    }
    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        top_k: usize,
    ) -> Result<Vec<(Scope, Uuid, f32)>> {
        let query = VectorQuery::new(QUERY.to_vec(), top_k);
        let hits = VectorStore::search_matching(self, filter, &query).await?;
        Ok(hits
            .into_iter()
            .map(|h| (h.scope, h.hit.id, h.hit.score))
            .collect())
    }
}

/// Runs every check of the suite, one after the other, on `store`.
pub async fn run_all_vector_checks(store: Arc<dyn VectorStore>) {
    crate::__vector_checks!(run_all(store));
}
