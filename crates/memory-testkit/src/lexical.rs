//! The [`TextIndex`] conformance suite.
//!
//! Each check is an async function taking the index under test; it writes under its own random
//! scopes (see [`random_scope`]), so checks can run in parallel against one shared server and
//! one index can run them all ([`run_all_text_index_checks`]). A check panics, with a message
//! saying what was expected, when the index breaks the contract.
//!
//! Engines normalise words differently (stemming, stop words, minimum word lengths: MariaDB
//! skips words shorter than 3 characters and has a stop-word list; PostgreSQL's `english`
//! configuration stems and drops stop words), so every check matches on distinctive words of
//! at least four letters that are no stop word and that no stemmer conflates ("walrus",
//! "lantern", "harbor", ...). Scores are only compared with each other: their scale is the
//! engine's. Every scope a ranking check writes holds filler documents that share no word with
//! the query, so that no query word is in half of the scope's documents (engines whose inverse
//! document frequency falls to zero there, like FTS5's BM25, would rank such words as noise).

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::lexical::{MAX_QUERY_BYTES, MAX_TEXT_BYTES};
use memory_core::{
    ErrorKind, PayloadFilter, Result, Scope, ScopeFilter, ScoredDocument, TextDocument, TextIndex,
    TextQuery,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::delete_matching::ScopedItems;
use crate::fixtures::{ExpectOk, expect_error_kind, payload, random_scope, sorted_ids};
use crate::search_matching::ScopedSearch;

/// A document with the given id, text and payload (a JSON object).
pub fn document(id: Uuid, text: impl Into<String>, payload_value: Value) -> TextDocument {
    TextDocument {
        id,
        text: text.into(),
        payload: payload(payload_value),
    }
}

/// Filler texts: distinctive words that no check queries.
const FILLERS: [&str; 8] = [
    "meadow orchid pebble",
    "glacier thimble saffron",
    "violin cobbler marble",
    "tundra falcon quartz",
    "bramble lagoon mitten",
    "cinnamon gravel puzzle",
    "parsley beacon velvet",
    "sparrow canyon ribbon",
];

async fn upsert(index: &dyn TextIndex, scope: &Scope, documents: &[TextDocument]) {
    index
        .upsert(scope, documents)
        .await
        .expect_ok(&format!("upsert {} documents", documents.len()));
}

/// Upserts the [`FILLERS`] under fresh ids.
async fn upsert_fillers(index: &dyn TextIndex, scope: &Scope) {
    let fillers: Vec<TextDocument> = FILLERS
        .iter()
        .map(|text| document(Uuid::new_v4(), *text, json!({"filler": true})))
        .collect();
    upsert(index, scope, &fillers).await;
}

async fn search(index: &dyn TextIndex, scope: &Scope, query: TextQuery) -> Vec<ScoredDocument> {
    let results = index
        .search(scope, &query)
        .await
        .expect_ok(&format!("search {query:?}"));
    assert!(
        results.len() <= query.top_k,
        "search {query:?} returned {} documents, more than top_k",
        results.len()
    );
    for r in &results {
        assert!(
            r.score > 0.0 && r.score.is_finite(),
            "search {query:?}: document {} has score {}, not a positive number",
            r.id,
            r.score
        );
    }
    for pair in results.windows(2) {
        assert!(
            pair[0].score > pair[1].score
                || (pair[0].score == pair[1].score && pair[0].id < pair[1].id),
            "search {query:?}: results are by decreasing score, ties by ascending id, got {} \
             ({}) before {} ({})",
            pair[0].id,
            pair[0].score,
            pair[1].id,
            pair[1].score
        );
    }
    results
}

/// The ids a search of `text` finds in `scope` (top 100).
async fn found(index: &dyn TextIndex, scope: &Scope, text: &str) -> Vec<Uuid> {
    result_ids(&search(index, scope, TextQuery::new(text, 100)).await)
}

async fn count(index: &dyn TextIndex, scope: &Scope) -> u64 {
    index.count(scope).await.expect_ok("count")
}

/// The documents of `ids` in `scope`, sorted by id (the contract does not order `get`).
async fn get_sorted(index: &dyn TextIndex, scope: &Scope, ids: &[Uuid]) -> Vec<TextDocument> {
    let mut documents = index.get(scope, ids).await.expect_ok("get");
    documents.sort_by_key(|d| d.id);
    documents
}

fn result_ids(results: &[ScoredDocument]) -> Vec<Uuid> {
    results.iter().map(|r| r.id).collect()
}

fn id_set(ids: &[Uuid]) -> BTreeSet<Uuid> {
    ids.iter().copied().collect()
}

/// Contract: `upsert` inserts documents and `get` returns the documents of the given ids that
/// exist in the scope, with their exact text and payload; unknown ids are skipped.
pub async fn upsert_then_get_returns_documents(index: &dyn TextIndex) {
    let scope = random_scope();
    let ids = sorted_ids(3);
    let documents = vec![
        document(
            ids[0],
            "The walrus sleeps in the harbor.",
            json!({"n": 1, "kind": "fact"}),
        ),
        document(
            ids[1],
            "  Ünïcode 日本語 🎉 \"quoted\" 'single' \\ back\tslash\nnew line  ",
            json!({"text": "ü 日本 🎉", "tags": ["x", "y"], "nested": {"k": true}, "f": 1.5}),
        ),
        document(ids[2], "lantern", json!({})),
    ];
    upsert(index, &scope, &documents).await;
    assert_eq!(
        get_sorted(index, &scope, &ids).await,
        documents,
        "get returns every upserted document with its exact text and payload"
    );
    assert_eq!(
        get_sorted(index, &scope, &[ids[1], Uuid::new_v4()]).await,
        vec![documents[1].clone()],
        "get skips ids that do not exist"
    );
    assert!(
        index
            .get(&scope, &[])
            .await
            .expect_ok("get no ids")
            .is_empty(),
        "get of no ids is empty"
    );
    assert_eq!(count(index, &scope).await, 3, "count after 3 documents");
    let results = search(index, &scope, TextQuery::new("walrus", 10)).await;
    assert_eq!(
        result_ids(&results),
        vec![ids[0]],
        "search finds the walrus"
    );
    assert_eq!(
        results[0].payload, documents[0].payload,
        "a result carries its payload"
    );
}

/// Contract: a scope never written is empty: search, get and count find nothing, even when
/// another scope holds matching documents.
pub async fn unknown_scope_is_empty(index: &dyn TextIndex) {
    let sibling = random_scope();
    let id = Uuid::new_v4();
    upsert(
        index,
        &sibling,
        &[document(id, "walrus lantern", json!({}))],
    )
    .await;
    let scope = random_scope();
    assert!(
        found(index, &scope, "walrus lantern").await.is_empty(),
        "search in a scope never written is empty"
    );
    assert_eq!(
        count(index, &scope).await,
        0,
        "count of a scope never written"
    );
    assert!(
        index.get(&scope, &[id]).await.expect_ok("get").is_empty(),
        "get in a scope never written is empty, even of another scope's id"
    );
}

/// Contract: no call on one scope reads or changes another's documents, whatever query or
/// filter is passed; the same id in two scopes is two documents. Scopes that differ only by
/// tenant, user, agent, session or source are each separate.
pub async fn scopes_are_isolated(index: &dyn TextIndex) {
    let base = random_scope();
    let other_tenant = Scope::new(crate::fixtures::random_tenant(), base.session_id().clone());
    let scopes = [
        base.clone(),
        other_tenant,
        base.clone().with_user("other").expect("valid"),
        base.clone().with_agent("other").expect("valid"),
        Scope::new(base.tenant().clone(), crate::fixtures::random_session_id()),
        base.clone().with_source("other").expect("valid"),
    ];
    let shared = Uuid::new_v4();
    let own: Vec<Uuid> = scopes.iter().map(|_| Uuid::new_v4()).collect();
    for (i, scope) in scopes.iter().enumerate() {
        upsert(
            index,
            scope,
            &[
                document(
                    shared,
                    format!("walrus lantern scope{i}marker"),
                    json!({"scope": i}),
                ),
                document(own[i], "walrus harbor", json!({"scope": i})),
            ],
        )
        .await;
    }
    for (i, scope) in scopes.iter().enumerate() {
        let results = search(index, scope, TextQuery::new("walrus lantern harbor", 100)).await;
        assert_eq!(
            id_set(&result_ids(&results)),
            id_set(&[shared, own[i]]),
            "scope {i} ({}) finds its own two documents only",
            scope.key()
        );
        assert!(
            results
                .iter()
                .all(|r| r.payload == payload(json!({"scope": i}))),
            "scope {i}'s results carry its own payloads"
        );
        for j in 0..scopes.len() {
            let crossing = search(
                index,
                scope,
                TextQuery::new(format!("walrus scope{j}marker"), 100)
                    .with_filter(PayloadFilter::eq("scope", json!(j))),
            )
            .await;
            let expected = if i == j { vec![shared, own[i]] } else { vec![] };
            assert_eq!(
                id_set(&result_ids(&crossing)),
                id_set(&expected),
                "a search of scope {i} filtered on scope {j}'s payload finds only scope {i}'s \
                 documents"
            );
        }
        let got = index.get(scope, &[shared]).await.expect_ok("get");
        assert_eq!(
            got,
            vec![document(
                shared,
                format!("walrus lantern scope{i}marker"),
                json!({"scope": i})
            )],
            "scope {i} holds its own document of the shared id"
        );
        assert!(
            index
                .get(scope, &[own[(i + 1) % scopes.len()]])
                .await
                .expect_ok("get")
                .is_empty(),
            "get in scope {i} of another scope's id finds nothing"
        );
        assert_eq!(count(index, scope).await, 2, "scope {i} counts its own two");
    }
    assert_eq!(
        index
            .delete(&scopes[0], &[shared, own[1]])
            .await
            .expect_ok("delete"),
        1,
        "deleting in scope 0 the shared id and scope 1's id removes scope 0's one document"
    );
    assert_eq!(
        index.clear(&scopes[2]).await.expect_ok("clear"),
        2,
        "clearing scope 2 removes its own two documents"
    );
    for (i, scope) in scopes.iter().enumerate() {
        let expected = match i {
            0 => vec![own[0]],
            2 => vec![],
            _ => vec![shared, own[i]],
        };
        assert_eq!(
            id_set(&found(index, scope, "walrus").await),
            id_set(&expected),
            "after a delete in scope 0 and a clear of scope 2, scope {i} finds its own documents"
        );
        assert_eq!(
            count(index, scope).await,
            expected.len() as u64,
            "count of scope {i} after a delete in scope 0 and a clear of scope 2"
        );
    }
}

/// Contract: `upsert` replaces a document by id: it takes the new text and payload (not
/// merged), its old words no longer match, the count is unchanged.
pub async fn upsert_replaces_text_and_payload(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let (id, other) = (Uuid::new_v4(), Uuid::new_v4());
    upsert(
        index,
        &scope,
        &[
            document(id, "walrus lantern", json!({"v": 1, "old_only": true})),
            document(other, "harbor anchor", json!({"v": 1})),
        ],
    )
    .await;
    let replacement = document(id, "compass anchor", json!({"v": 2}));
    upsert(index, &scope, std::slice::from_ref(&replacement)).await;
    assert_eq!(
        count(index, &scope).await,
        FILLERS.len() as u64 + 2,
        "replacing keeps the count"
    );
    assert_eq!(
        index.get(&scope, &[id]).await.expect_ok("get"),
        vec![replacement.clone()],
        "the text and payload are replaced, not merged"
    );
    assert!(
        found(index, &scope, "walrus lantern").await.is_empty(),
        "the old words no longer match"
    );
    assert_eq!(
        found(index, &scope, "compass").await,
        vec![id],
        "the new words match"
    );
    assert_eq!(
        id_set(&found(index, &scope, "anchor").await),
        id_set(&[id, other]),
        "a word of both documents finds both"
    );
    let results = search(index, &scope, TextQuery::new("compass", 10)).await;
    assert_eq!(
        results[0].payload, replacement.payload,
        "a result carries the new payload"
    );
    assert!(
        search(
            index,
            &scope,
            TextQuery::new("compass anchor", 10)
                .with_filter(PayloadFilter::eq("old_only", json!(true)))
        )
        .await
        .is_empty(),
        "the old payload no longer matches filters"
    );
}

/// Contract: a retried upsert of the same documents changes nothing.
pub async fn retried_upsert_is_idempotent(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let ids = sorted_ids(3);
    let documents = vec![
        document(ids[0], "walrus lantern harbor", json!({"n": 0})),
        document(ids[1], "walrus lantern", json!({"n": 1})),
        document(ids[2], "walrus", json!({"n": 2})),
    ];
    upsert(index, &scope, &documents).await;
    let before = get_sorted(index, &scope, &ids).await;
    let ranked = found(index, &scope, "walrus lantern harbor").await;
    upsert(index, &scope, &documents).await;
    upsert(index, &scope, &documents[1..]).await;
    assert_eq!(
        count(index, &scope).await,
        FILLERS.len() as u64 + 3,
        "a retried upsert adds no document"
    );
    assert_eq!(
        get_sorted(index, &scope, &ids).await,
        before,
        "a retried upsert changes no document"
    );
    assert_eq!(
        found(index, &scope, "walrus lantern harbor").await,
        ranked,
        "search after retried upserts finds each document once, in the same order"
    );
    assert_eq!(
        ranked, ids,
        "the documents rank by how many query words they hold"
    );
}

/// Contract: an empty batch is a no-op.
pub async fn empty_batch_is_a_no_op(index: &dyn TextIndex) {
    let scope = random_scope();
    index
        .upsert(&scope, &[])
        .await
        .expect_ok("upsert no document in an empty scope");
    assert_eq!(
        count(index, &scope).await,
        0,
        "an empty upsert creates nothing"
    );
    let doc = document(Uuid::new_v4(), "walrus", json!({}));
    upsert(index, &scope, std::slice::from_ref(&doc)).await;
    index
        .upsert(&scope, &[])
        .await
        .expect_ok("upsert no document");
    assert_eq!(
        count(index, &scope).await,
        1,
        "an empty upsert adds nothing"
    );
    assert_eq!(
        index.get(&scope, &[doc.id]).await.expect_ok("get"),
        vec![doc.clone()],
        "an empty upsert changes nothing"
    );
    assert_eq!(found(index, &scope, "walrus").await, vec![doc.id]);
}

/// Contract: a text longer than `MAX_TEXT_BYTES` or holding a NUL character is
/// `InvalidInput`, and nothing of that batch is written (not even its valid documents); a
/// text of exactly `MAX_TEXT_BYTES` is accepted.
pub async fn invalid_documents_are_refused_atomically(index: &dyn TextIndex) {
    let scope = random_scope();
    let existing = document(Uuid::new_v4(), "walrus", json!({"n": 0}));
    upsert(index, &scope, std::slice::from_ref(&existing)).await;
    let valid = document(Uuid::new_v4(), "lantern", json!({"n": 1}));
    let replaced = document(existing.id, "harbor", json!({"n": "replaced"}));
    let too_long = {
        let mut text = "compass ".repeat(MAX_TEXT_BYTES / 8);
        text.push_str("walrus");
        text
    };
    assert!(too_long.len() > MAX_TEXT_BYTES);
    let cases = [
        ("a text one past the limit", too_long),
        ("a NUL character", "compass\0walrus".to_owned()),
        ("a lone NUL character", "\0".to_owned()),
    ];
    for (what, text) in cases {
        let invalid = document(Uuid::new_v4(), text, json!({"bad": true}));
        for batch in [
            vec![valid.clone(), replaced.clone(), invalid.clone()],
            vec![invalid.clone(), valid.clone()],
        ] {
            expect_error_kind(
                index.upsert(&scope, &batch).await,
                ErrorKind::InvalidInput,
                &format!("upsert of a batch holding {what}"),
            );
            assert_eq!(
                count(index, &scope).await,
                1,
                "a batch refused for {what} writes nothing"
            );
            assert!(
                index
                    .get(&scope, &[valid.id, invalid.id])
                    .await
                    .expect_ok("get")
                    .is_empty(),
                "no document of a batch refused for {what} is stored"
            );
            assert_eq!(
                index.get(&scope, &[existing.id]).await.expect_ok("get"),
                vec![existing.clone()],
                "a batch refused for {what} replaces nothing"
            );
            assert!(
                found(index, &scope, "lantern harbor compass")
                    .await
                    .is_empty(),
                "no word of a batch refused for {what} is found"
            );
        }
    }
    // Exactly at the limit: accepted, stored exactly, searchable.
    let mut text = "compass ".repeat(MAX_TEXT_BYTES / 8 - 1);
    text.push_str("lantern ");
    assert_eq!(text.len(), MAX_TEXT_BYTES);
    let largest = document(Uuid::new_v4(), text, json!({"largest": true}));
    upsert(index, &scope, std::slice::from_ref(&largest)).await;
    assert_eq!(
        index.get(&scope, &[largest.id]).await.expect_ok("get"),
        vec![largest.clone()],
        "a text of exactly MAX_TEXT_BYTES is stored exactly"
    );
    assert_eq!(
        found(index, &scope, "lantern").await,
        vec![largest.id],
        "a text of exactly MAX_TEXT_BYTES is searchable"
    );
}

/// Contract: an empty text is allowed: it is stored, counted and returned by `get`, and
/// matches nothing.
pub async fn empty_text_is_allowed(index: &dyn TextIndex) {
    let scope = random_scope();
    let empty = document(Uuid::new_v4(), "", json!({"empty": true}));
    let blank = document(Uuid::new_v4(), " \t\n ", json!({"empty": false}));
    let walrus = document(Uuid::new_v4(), "walrus", json!({}));
    upsert(
        index,
        &scope,
        &[empty.clone(), blank.clone(), walrus.clone()],
    )
    .await;
    assert_eq!(count(index, &scope).await, 3, "empty texts are counted");
    assert_eq!(
        get_sorted(index, &scope, &[empty.id, blank.id]).await,
        {
            let mut expected = vec![empty.clone(), blank.clone()];
            expected.sort_by_key(|d| d.id);
            expected
        },
        "empty texts are returned exactly"
    );
    assert_eq!(
        found(index, &scope, "walrus empty true false").await,
        vec![walrus.id],
        "an empty text matches nothing, not even its payload's words"
    );
}

/// The ranking fixture: documents holding 3, 2 and 1 of the query's words (in this order),
/// one holding none of them, and the fillers. All documents have three words.
async fn upsert_ranked(index: &dyn TextIndex, scope: &Scope) -> (Vec<Uuid>, Uuid) {
    upsert_fillers(index, scope).await;
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let unrelated = Uuid::new_v4();
    // Upserted in an order that is neither the ranking nor the id order.
    let documents = vec![
        document(ids[2], "walrus meadow pebble", json!({"holds": 1})),
        document(unrelated, "meadow pebble orchid", json!({"holds": 0})),
        document(ids[0], "walrus lantern harbor", json!({"holds": 3})),
        document(ids[1], "walrus lantern pebble", json!({"holds": 2})),
    ];
    upsert(index, scope, &documents).await;
    (ids, unrelated)
}

/// Contract: `search` ranks a document holding more of the query's rare words above one
/// holding fewer, returns only documents sharing a word with the query, and at most `top_k`.
pub async fn search_ranks_by_shared_words(index: &dyn TextIndex) {
    let scope = random_scope();
    let (ids, _) = upsert_ranked(index, &scope).await;
    let query = "harbor lantern walrus";
    assert_eq!(
        found(index, &scope, query).await,
        ids,
        "the documents holding 3, 2 and 1 of the query's words, in this order, and no other"
    );
    for (top_k, expected) in [
        (1, &ids[..1]),
        (2, &ids[..2]),
        (3, &ids[..]),
        (1000, &ids[..]),
    ] {
        assert_eq!(
            result_ids(&search(index, &scope, TextQuery::new(query, top_k)).await),
            expected,
            "top {top_k}"
        );
    }
    assert!(
        search(index, &scope, TextQuery::new(query, 0))
            .await
            .is_empty(),
        "top_k 0 returns nothing"
    );
    assert_eq!(
        found(index, &scope, "harbor").await,
        vec![ids[0]],
        "a word held by one document finds that document only"
    );
    assert_eq!(
        id_set(&found(index, &scope, "lantern").await),
        id_set(&ids[..2]),
        "a word held by two documents finds both"
    );
    assert!(
        found(index, &scope, "zeppelin quokka").await.is_empty(),
        "words no document holds find nothing"
    );
    let results = search(index, &scope, TextQuery::new("walrus", 10)).await;
    assert_eq!(
        id_set(&result_ids(&results)),
        id_set(&ids),
        "the three walrus documents"
    );
}

/// Contract: equal scores are ordered by ascending id, whatever the insertion order.
pub async fn search_breaks_ties_by_id(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let ids = sorted_ids(5);
    // Identical texts tie exactly; upserted one by one in descending id order, so neither
    // insertion nor storage order is id order.
    for id in ids.iter().rev() {
        upsert(
            index,
            &scope,
            &[document(
                *id,
                "copper kettle whistle",
                json!({"tied": true}),
            )],
        )
        .await;
    }
    let best = document(
        Uuid::new_v4(),
        "copper lantern whistle",
        json!({"tied": false}),
    );
    upsert(index, &scope, std::slice::from_ref(&best)).await;
    let results = search(index, &scope, TextQuery::new("copper lantern", 4)).await;
    let mut expected = vec![best.id];
    expected.extend(&ids[..3]);
    assert_eq!(
        result_ids(&results),
        expected,
        "the best match first, then the tied documents by ascending id"
    );
    let all = search(index, &scope, TextQuery::new("copper lantern", 10)).await;
    let mut expected = vec![best.id];
    expected.extend(&ids);
    assert_eq!(result_ids(&all), expected, "all six, ties by ascending id");
    for pair in all[1..].windows(2) {
        assert_eq!(
            pair[0].score, pair[1].score,
            "identical texts score the same"
        );
    }
    let tied_only = search(index, &scope, TextQuery::new("kettle", 2)).await;
    assert_eq!(
        result_ids(&tied_only),
        ids[..2].to_vec(),
        "a cut through tied documents keeps the smallest ids"
    );
}

/// Contract: ties by ascending id and filters hold however many documents tie: a backend that
/// fetches candidates in rounds (to filter them, or to order ties) must not stop at a round's
/// edge.
pub async fn many_ties_and_a_selective_filter(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let ids = sorted_ids(120);
    // Identical texts, upserted in one batch in descending id order; every 10th is kept by
    // the filter.
    let documents: Vec<TextDocument> = ids
        .iter()
        .enumerate()
        .rev()
        .map(|(i, id)| document(*id, "copper kettle", json!({"keep": i % 10 == 9})))
        .collect();
    upsert(index, &scope, &documents).await;
    assert_eq!(
        result_ids(&search(index, &scope, TextQuery::new("kettle", 5)).await),
        ids[..5].to_vec(),
        "120 tied documents: the 5 smallest ids"
    );
    let kept: Vec<Uuid> = ids.iter().skip(9).step_by(10).copied().collect();
    assert_eq!(
        result_ids(
            &search(
                index,
                &scope,
                TextQuery::new("kettle copper", 3)
                    .with_filter(PayloadFilter::eq("keep", json!(true)))
            )
            .await
        ),
        kept[..3].to_vec(),
        "the 3 smallest ids of the tied documents the filter keeps"
    );
    assert_eq!(
        result_ids(
            &search(
                index,
                &scope,
                TextQuery::new("kettle", 100).with_filter(PayloadFilter::eq("keep", json!(true)))
            )
            .await
        ),
        kept,
        "every kept document, by ascending id"
    );
}

/// Contract: case folding always: a query matches words whatever their case.
pub async fn search_folds_case(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let (upper, lower) = (Uuid::new_v4(), Uuid::new_v4());
    upsert(
        index,
        &scope,
        &[
            document(upper, "WALRUS Lantern", json!({})),
            document(lower, "walrus harbor", json!({})),
        ],
    )
    .await;
    for query in ["walrus", "WALRUS", "Walrus", "wALRUs"] {
        assert_eq!(
            id_set(&found(index, &scope, query).await),
            id_set(&[upper, lower]),
            "{query:?} finds both documents"
        );
    }
    assert_eq!(found(index, &scope, "LANTERN").await, vec![upper]);
    assert_eq!(found(index, &scope, "HarBor").await, vec![lower]);
}

/// Contract: query text is words, never syntax: quotes, operators and punctuation are not
/// interpreted and never cause an error.
pub async fn query_syntax_is_never_interpreted(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let (walrus, lantern, both, lanternfish) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    upsert(
        index,
        &scope,
        &[
            document(walrus, "walrus harbor", json!({})),
            document(lantern, "lantern compass", json!({})),
            document(both, "walrus lantern", json!({})),
            document(lanternfish, "lanternfish abyss", json!({})),
        ],
    )
    .await;
    let either = id_set(&[walrus, lantern, both]);
    // Queries whose words are "walrus" and "lantern" (and words no document holds): an
    // operator interpreted would drop the walrus-only or the lantern-only document, or fail.
    let queries = [
        "walrus AND lantern",
        "walrus && lantern",
        "walrus OR lantern",
        "walrus NOT lantern",
        "walrus -lantern",
        "-walrus lantern",
        "walrus !lantern",
        "+walrus +lantern",
        "walrus NEAR lantern",
        "NEAR(walrus lantern)",
        "NEAR(walrus lantern, 2)",
        "\"walrus lantern\"",
        "\"walrus lantern",
        "walrus \"lantern",
        "'walrus' 'lantern'",
        "(walrus lantern",
        "walrus) lantern(",
        "walrus^2 lantern",
        "walrus~ lantern~2",
        "walrus* lantern*",
        "text:walrus id:lantern",
        "body:walrus payload:lantern",
        "{walrus} [lantern]",
        "walrus|lantern",
        "walrus&lantern",
        "walrus<->lantern",
        "walrus <-> lantern",
        "walrus:* lantern:*",
        "@walrus >lantern <",
        "walrus\\ lantern\\",
        "walrus / lantern",
        "walrus; lantern;",
        "walrus%lantern_",
        "walrus' OR '1'='1 lantern",
        "walrus'; DROP TABLE documents; -- lantern",
        "walrus\"); DELETE FROM x; -- lantern",
        "$walrus #lantern",
        "walrus lantern )))",
        "~walrus ^lantern",
    ];
    for query in queries {
        assert_eq!(
            id_set(&found(index, &scope, query).await),
            either,
            "{query:?} finds every document holding walrus or lantern, and no other"
        );
    }
    assert_eq!(
        id_set(&found(index, &scope, "lantern*").await),
        id_set(&[lantern, both]),
        "a trailing * is no prefix search: lanternfish is not found"
    );
    for query in [
        "'; DROP TABLE documents; --",
        "\" OR 1=1 --",
        "AND",
        "OR NOT",
        "NEAR",
        "text:",
        "*:*",
        "NOT (zeppelin)",
    ] {
        assert!(
            found(index, &scope, query).await.is_empty(),
            "{query:?} holds no word of any document and finds nothing"
        );
    }
    assert_eq!(
        count(index, &scope).await,
        FILLERS.len() as u64 + 4,
        "no query changed the index"
    );
}

/// Contract: a query with no word (empty, spaces, only punctuation) returns nothing.
pub async fn query_without_words_is_empty(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert(
        index,
        &scope,
        &[
            document(Uuid::new_v4(), "walrus lantern", json!({})),
            document(Uuid::new_v4(), "", json!({})),
            document(Uuid::new_v4(), "?! ... \"\" -- ()", json!({})),
        ],
    )
    .await;
    for query in [
        "", " ", "\t\n", "?!", "...", "\"\"", "--", "()", "* : ^ ~", "''",
    ] {
        assert!(
            found(index, &scope, query).await.is_empty(),
            "the query {query:?} holds no word and finds nothing"
        );
    }
}

/// Contract: a query longer than `MAX_QUERY_BYTES` is `InvalidInput`; one of exactly
/// `MAX_QUERY_BYTES` is answered.
pub async fn too_long_query_is_refused(index: &dyn TextIndex) {
    let scope = random_scope();
    let id = Uuid::new_v4();
    upsert(index, &scope, &[document(id, "walrus lantern", json!({}))]).await;
    let mut longest = "walrus ".repeat(MAX_QUERY_BYTES / 7);
    longest.push_str(&" ".repeat(MAX_QUERY_BYTES - longest.len()));
    assert_eq!(longest.len(), MAX_QUERY_BYTES);
    assert_eq!(
        result_ids(&search(index, &scope, TextQuery::new(longest.clone(), 5)).await),
        vec![id],
        "a query of exactly MAX_QUERY_BYTES is answered"
    );
    let too_long = format!("{longest}x");
    expect_error_kind(
        index.search(&scope, &TextQuery::new(too_long, 5)).await,
        ErrorKind::InvalidInput,
        "a query one byte past MAX_QUERY_BYTES",
    );
    let many_words: String = (0..MAX_QUERY_BYTES / 4)
        .map(|i| format!("w{i:02} "))
        .collect();
    assert!(many_words.len() > MAX_QUERY_BYTES);
    expect_error_kind(
        index.search(&scope, &TextQuery::new(many_words, 5)).await,
        ErrorKind::InvalidInput,
        "a query of many short words past MAX_QUERY_BYTES",
    );
}

/// Four documents with payloads for the filter checks, all holding "walrus".
fn filter_documents() -> Vec<TextDocument> {
    vec![
        document(
            Uuid::new_v4(),
            "walrus lantern harbor",
            json!({"kind": "fact", "lang": "en", "n": 1, "pinned": true}),
        ),
        document(
            Uuid::new_v4(),
            "walrus lantern",
            json!({"kind": "fact", "lang": "pt", "n": 2, "pinned": false}),
        ),
        document(
            Uuid::new_v4(),
            "walrus harbor",
            json!({"kind": "note", "lang": "en", "n": 3}),
        ),
        document(
            Uuid::new_v4(),
            "walrus",
            json!({"kind": "note", "lang": "pt"}),
        ),
    ]
}

async fn filtered(
    index: &dyn TextIndex,
    scope: &Scope,
    documents: &[TextDocument],
    filter: PayloadFilter,
    expected: &[usize],
    what: &str,
) {
    let results = search(
        index,
        scope,
        TextQuery::new("walrus", 10).with_filter(filter.clone()),
    )
    .await;
    assert_eq!(
        id_set(&result_ids(&results)),
        id_set(
            &expected
                .iter()
                .map(|&i| documents[i].id)
                .collect::<Vec<_>>()
        ),
        "{what}: filter {filter:?} matches documents {expected:?}"
    );
    for r in &results {
        assert!(
            filter.matches(&r.payload),
            "{what}: every result's payload matches the filter"
        );
    }
}

/// Contract: only documents whose payload matches the filter (`Eq` on strings, integers and
/// booleans; a missing field never equals) are returned.
pub async fn filter_eq_matches_field_values(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let d = filter_documents();
    upsert(index, &scope, &d).await;
    let eq = PayloadFilter::eq;
    filtered(
        index,
        &scope,
        &d,
        eq("kind", json!("fact")),
        &[0, 1],
        "string",
    )
    .await;
    filtered(index, &scope, &d, eq("n", json!(2)), &[1], "integer").await;
    filtered(index, &scope, &d, eq("pinned", json!(true)), &[0], "true").await;
    filtered(index, &scope, &d, eq("pinned", json!(false)), &[1], "false").await;
    filtered(
        index,
        &scope,
        &d,
        eq("kind", json!("none")),
        &[],
        "no match",
    )
    .await;
    filtered(
        index,
        &scope,
        &d,
        eq("absent", json!("x")),
        &[],
        "missing field",
    )
    .await;
    filtered(
        index,
        &scope,
        &d,
        eq("n", json!("1")),
        &[],
        "a string is no integer",
    )
    .await;
    let top = search(
        index,
        &scope,
        TextQuery::new("walrus lantern harbor", 1).with_filter(eq("lang", json!("pt"))),
    )
    .await;
    assert_eq!(
        result_ids(&top),
        vec![d[1].id],
        "top_k counts the filtered documents: the best pt document, not the best overall"
    );
}

/// Contract: `And`, `Or` and `Not` combine filters (`Not` matches documents lacking the field).
pub async fn filter_combinations(index: &dyn TextIndex) {
    let scope = random_scope();
    let d = filter_documents();
    upsert(index, &scope, &d).await;
    let eq = PayloadFilter::eq;
    let fact = || eq("kind", json!("fact"));
    let en = || eq("lang", json!("en"));
    filtered(index, &scope, &d, fact().and(en()), &[0], "fact and en").await;
    filtered(
        index,
        &scope,
        &d,
        PayloadFilter::And(vec![fact(), en(), eq("n", json!(2))]),
        &[],
        "contradictory",
    )
    .await;
    filtered(
        index,
        &scope,
        &d,
        eq("n", json!(1)).or(eq("lang", json!("pt"))),
        &[0, 1, 3],
        "n = 1 or pt",
    )
    .await;
    filtered(
        index,
        &scope,
        &d,
        eq("kind", json!("note"))
            .and(en())
            .or(eq("pinned", json!(false))),
        &[1, 2],
        "(note and en) or not pinned",
    )
    .await;
    filtered(index, &scope, &d, en().not(), &[1, 3], "not en").await;
    filtered(
        index,
        &scope,
        &d,
        eq("n", json!(1)).not(),
        &[1, 2, 3],
        "not n = 1 (a document without n matches)",
    )
    .await;
    filtered(
        index,
        &scope,
        &d,
        fact().and(eq("lang", json!("pt")).not()),
        &[0],
        "fact and not pt",
    )
    .await;
}

/// Contract: `delete` removes documents by id and returns how many existed; deleted documents
/// are not found by any read.
pub async fn delete_returns_how_many_existed(index: &dyn TextIndex) {
    let scope = random_scope();
    let ids = sorted_ids(4);
    let documents: Vec<TextDocument> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| document(*id, format!("walrus lantern number{i}"), json!({"i": i})))
        .collect();
    upsert(index, &scope, &documents).await;
    assert_eq!(
        index
            .delete(&scope, &[ids[0], ids[2], Uuid::new_v4()])
            .await
            .expect_ok("delete"),
        2,
        "delete of two existing ids and an unknown one returns 2"
    );
    assert_eq!(
        index
            .delete(&scope, &[ids[0]])
            .await
            .expect_ok("delete again"),
        0,
        "delete of an already deleted id returns 0"
    );
    assert_eq!(
        index.delete(&scope, &[]).await.expect_ok("delete nothing"),
        0,
        "delete of no ids returns 0"
    );
    assert_eq!(count(index, &scope).await, 2, "two documents remain");
    assert_eq!(
        get_sorted(index, &scope, &ids).await,
        vec![documents[1].clone(), documents[3].clone()],
        "the undeleted documents remain"
    );
    assert_eq!(
        id_set(&found(index, &scope, "walrus").await),
        id_set(&[ids[1], ids[3]]),
        "deleted documents are not found by search"
    );
    assert!(
        found(index, &scope, "number0 number2").await.is_empty(),
        "the deleted documents' own words find nothing"
    );
}

/// Contract: `count` counts a scope's documents; `clear` removes them all and returns how
/// many, and the scope takes new documents afterwards.
pub async fn count_and_clear(index: &dyn TextIndex) {
    let scope = random_scope();
    assert_eq!(count(index, &scope).await, 0, "an empty scope counts 0");
    for n in 1..=3u64 {
        upsert(
            index,
            &scope,
            &[document(Uuid::new_v4(), "walrus lantern", json!({"n": n}))],
        )
        .await;
        assert_eq!(count(index, &scope).await, n, "count after {n} upserts");
    }
    assert_eq!(
        index.clear(&scope).await.expect_ok("clear"),
        3,
        "clear returns how many documents it removed"
    );
    assert_eq!(count(index, &scope).await, 0, "a cleared scope counts 0");
    assert!(
        found(index, &scope, "walrus").await.is_empty(),
        "a cleared scope finds nothing"
    );
    assert_eq!(
        index.clear(&scope).await.expect_ok("clear again"),
        0,
        "clearing twice removes nothing the second time"
    );
    let id = Uuid::new_v4();
    upsert(index, &scope, &[document(id, "walrus", json!({}))]).await;
    assert_eq!(
        count(index, &scope).await,
        1,
        "a cleared scope takes new documents"
    );
    assert_eq!(found(index, &scope, "walrus").await, vec![id]);
}

/// Contract: writes are visible to every read that starts after the write returned: each
/// upsert, replacement, delete and clear is seen by the very next search, get and count.
pub async fn writes_are_visible_to_the_next_read(index: &dyn TextIndex) {
    let scope = random_scope();
    let mut ids = Vec::new();
    for i in 0..5u64 {
        let id = Uuid::new_v4();
        ids.push(id);
        upsert(
            index,
            &scope,
            &[document(id, format!("walrus token{i}x"), json!({}))],
        )
        .await;
        assert_eq!(
            found(index, &scope, &format!("token{i}x")).await,
            vec![id],
            "document {i} is found by the search right after its upsert"
        );
        assert_eq!(
            count(index, &scope).await,
            i + 1,
            "count right after upsert {i}"
        );
        upsert(
            index,
            &scope,
            &[document(id, format!("walrus replaced{i}x"), json!({}))],
        )
        .await;
        assert!(
            found(index, &scope, &format!("token{i}x")).await.is_empty(),
            "document {i}'s old words are gone right after its replacement"
        );
        assert_eq!(
            found(index, &scope, &format!("replaced{i}x")).await,
            vec![id]
        );
    }
    assert_eq!(index.delete(&scope, &ids[..2]).await.expect_ok("delete"), 2);
    assert!(
        index
            .get(&scope, &ids[..2])
            .await
            .expect_ok("get")
            .is_empty(),
        "deleted documents are gone right after the delete"
    );
    assert_eq!(found(index, &scope, "walrus").await.len(), 3);
    assert_eq!(index.clear(&scope).await.expect_ok("clear"), 3);
    assert!(found(index, &scope, "walrus").await.is_empty());
    assert_eq!(count(index, &scope).await, 0);
}

/// Contract: words are Unicode: non-ASCII letters are part of words, matched exactly.
pub async fn unicode_words_match(index: &dyn TextIndex) {
    let scope = random_scope();
    upsert_fillers(index, &scope).await;
    let (cafe, naive, plain) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    upsert(
        index,
        &scope,
        &[
            document(cafe, "Meet me at the café tomorrow", json!({})),
            document(naive, "a naïve smörgåsbord", json!({})),
            document(plain, "walrus lantern", json!({})),
        ],
    )
    .await;
    assert_eq!(found(index, &scope, "café").await, vec![cafe], "café");
    assert_eq!(found(index, &scope, "naïve").await, vec![naive], "naïve");
    assert_eq!(
        found(index, &scope, "smörgåsbord").await,
        vec![naive],
        "smörgåsbord"
    );
    assert_eq!(
        id_set(&found(index, &scope, "«café» — naïve!").await),
        id_set(&[cafe, naive]),
        "non-ASCII punctuation separates words"
    );
}

/// Contract: `delete_matching` (optional: `deletes_matching`) removes every document of every
/// scope a forget filter selects (its tenant, and its user, agent and session when it names
/// them; any source) and no other, and returns how many; `count_matching` returns that number
/// beforehand and changes nothing; repeating the delete removes nothing. Without the
/// capability both answer `Unsupported` and change nothing. (The check is the one every
/// trait with `delete_matching` runs, written once for both.)
pub async fn delete_matching_removes_the_selected_scopes(index: &dyn TextIndex) {
    crate::delete_matching::delete_matching_removes_the_selected_scopes(index).await;
}

/// A text index as the `delete_matching` check sees it: every document of a scope holds the
/// word "walrus", so a search for it finds them all.
#[async_trait::async_trait]
impl ScopedItems for dyn TextIndex {
    const ITEM: &'static str = "document";
    const HOLDER: &'static str = "index";

    fn deletes_matching(&self) -> bool {
        self.capabilities().deletes_matching
    }
    async fn reseed(&self, scope: &Scope, n: usize) {
        self.clear(scope).await.expect_ok("clear before seeding");
        let documents: Vec<TextDocument> = (0..n)
            .map(|k| {
                document(
                    Uuid::new_v4(),
                    format!("walrus lantern item{k}x"),
                    json!({"k": k}),
                )
            })
            .collect();
        upsert(self, scope, &documents).await;
    }
    async fn count(&self, scope: &Scope) -> u64 {
        count(self, scope).await
    }
    async fn found(&self, scope: &Scope) -> u64 {
        found(self, scope, "walrus").await.len() as u64
    }
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        TextIndex::delete_matching(self, filter).await
    }
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        TextIndex::count_matching(self, filter).await
    }
}

/// Contract: `search_matching` (optional: `searches_matching`) finds the documents of every
/// scope a filter selects and of no other, each with its scope, at most `top_k`, by decreasing
/// score; without the capability it is `Unsupported`. (The check is the one every trait with
/// `search_matching` runs, written once for both.)
pub async fn search_matching_finds_exactly_the_selected_scopes(index: &dyn TextIndex) {
    crate::search_matching::search_matching_finds_exactly_the_selected_scopes(index).await;
}

/// A text index as the `search_matching` check sees it: every document holds the query's word.
#[async_trait::async_trait]
impl ScopedSearch for dyn TextIndex {
    const ITEM: &'static str = "document";

    fn searches_matching(&self) -> bool {
        self.capabilities().searches_matching
    }
    async fn put(&self, scope: &Scope, id: Uuid, rank: usize) {
        let text = format!("walrus lantern rank{rank}x");
        upsert(self, scope, &[document(id, text, json!({"rank": rank}))]).await;
    }
    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        top_k: usize,
    ) -> Result<Vec<(Scope, Uuid, f32)>> {
        let hits =
            TextIndex::search_matching(self, filter, &TextQuery::new("walrus", top_k)).await?;
        Ok(hits
            .into_iter()
            .map(|h| (h.scope, h.hit.id, h.hit.score))
            .collect())
    }
}

/// Runs every check of the suite, one after the other, on `index`.
pub async fn run_all_text_index_checks(index: Arc<dyn TextIndex>) {
    crate::__text_index_checks!(run_all(index));
}
