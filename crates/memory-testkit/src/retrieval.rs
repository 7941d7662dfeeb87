//! The [`Retriever`] conformance suite: what every retriever (dense, lexical, hybrid, over any
//! engine) must do, whatever it ranks by.
//!
//! Each check is an async function taking the retriever under test and writing under its own
//! random scopes, so one retriever can run them all ([`run_all_retriever_checks`]). Texts use
//! distinctive words of at least four letters that no stemmer conflates and no engine drops as
//! stop words ("walrus", "lantern", "harbor", ...), and every scope a ranking check writes
//! holds filler items sharing no word with the query, so that a lexical engine whose inverse
//! document frequency falls to zero for a word in half the documents still ranks by it. The
//! checks hold for a dense retriever over [`WordHashEmbedder`](crate::memory::WordHashEmbedder)
//! (texts sharing words are similar) as for a real embedder.

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::retrieval::{MemoryItem, RetrievalQuery, Retrieved, Retriever};
use memory_core::{PayloadFilter, Scope};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fixtures::{ExpectOk, payload, random_scope, sorted_ids};

/// An item with the given id, text and payload (a JSON object).
pub fn item(id: Uuid, text: impl Into<String>, payload_value: Value) -> MemoryItem {
    MemoryItem::new(id, text).with_payload(payload(payload_value))
}

/// Filler texts: no word in common with the checks' queries, nor with each other's subjects.
const FILLER: [&str; 6] = [
    "quarterly budget spreadsheet review meeting",
    "kubernetes cluster upgrade scheduled tonight",
    "pizza lunch with marketing colleagues friday",
    "printer paper jammed again downstairs",
    "invoice numbers reconciled against ledger",
    "dentist appointment moved until november",
];

async fn index_with_filler(r: &dyn Retriever, scope: &Scope, items: &[MemoryItem]) {
    let mut all: Vec<MemoryItem> = FILLER
        .iter()
        .map(|t| item(Uuid::new_v4(), *t, json!({"filler": true})))
        .collect();
    all.extend_from_slice(items);
    r.index(scope, &all).await.expect_ok("index items");
}

async fn retrieve(r: &dyn Retriever, scope: &Scope, query: RetrievalQuery) -> Vec<Retrieved> {
    r.retrieve(scope, &query).await.expect_ok("retrieve")
}

fn ids(results: &[Retrieved]) -> Vec<Uuid> {
    results.iter().map(|r| r.id).collect()
}

/// An item indexed under one scope is never retrieved, deleted or cleared through another,
/// even with the same id; a scope never indexed is empty.
pub async fn scopes_are_isolated(r: &dyn Retriever) {
    let (a, b) = (random_scope(), random_scope());
    let id = Uuid::new_v4();
    index_with_filler(
        r,
        &a,
        &[item(id, "walrus lantern harbor", json!({"in": "a"}))],
    )
    .await;
    index_with_filler(
        r,
        &b,
        &[item(id, "walrus lantern harbor", json!({"in": "b"}))],
    )
    .await;
    let query = RetrievalQuery::new("walrus lantern harbor", 50);
    for (scope, name) in [(&a, "a"), (&b, "b")] {
        let got = retrieve(r, scope, query.clone()).await;
        assert!(got.iter().any(|x| x.id == id), "scope {name} lost its item");
        for x in got.iter().filter(|x| x.id == id) {
            assert_eq!(
                x.payload["in"], name,
                "scope {name} returned another scope's item"
            );
        }
        assert!(
            got.len() <= 7,
            "scope {name} returned items of another scope: {}",
            got.len()
        );
    }
    assert!(
        retrieve(r, &random_scope(), query.clone()).await.is_empty(),
        "a scope never indexed returned items"
    );
    assert_eq!(r.delete(&a, &[id]).await.expect_ok("delete"), 1);
    assert!(
        retrieve(r, &b, query.clone())
            .await
            .iter()
            .any(|x| x.id == id),
        "a delete in one scope removed another scope's item"
    );
    assert_eq!(r.clear(&a).await.expect_ok("clear"), 6);
    assert!(
        retrieve(r, &a, query.clone()).await.is_empty(),
        "clear left items"
    );
    assert!(
        retrieve(r, &b, query).await.iter().any(|x| x.id == id),
        "a clear in one scope removed another scope's item"
    );
}

/// The item sharing the query's distinctive words ranks first; the results are distinct,
/// best first, and each payload holds the item's text under `"text"` beside its own keys.
pub async fn the_matching_item_ranks_first(r: &dyn Retriever) {
    let scope = random_scope();
    let [lantern, walrus, harbor] = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    index_with_filler(
        r,
        &scope,
        &[
            item(lantern, "the brass lantern glowed", json!({"k": 1})),
            item(
                walrus,
                "a walrus slept on the harbor rocks",
                json!({"k": 2}),
            ),
            item(harbor, "harbor cranes unloaded containers", json!({"k": 3})),
        ],
    )
    .await;
    let got = retrieve(
        r,
        &scope,
        RetrievalQuery::new("where did the walrus sleep near the harbor", 5),
    )
    .await;
    assert_eq!(
        got.first().map(|x| x.id),
        Some(walrus),
        "the walrus item is not first: {got:?}"
    );
    let distinct: BTreeSet<Uuid> = got.iter().map(|x| x.id).collect();
    assert_eq!(distinct.len(), got.len(), "an item was returned twice");
    assert!(
        got.windows(2).all(|w| w[0].score >= w[1].score),
        "results are not best first: {got:?}"
    );
    let first = &got[0];
    assert_eq!(first.text(), Some("a walrus slept on the harbor rocks"));
    assert_eq!(first.payload["k"], 2);
}

/// `top_k` bounds the results (0 gives none) and a payload filter keeps only matching items.
pub async fn top_k_and_filter_are_honoured(r: &dyn Retriever) {
    let scope = random_scope();
    let ids = sorted_ids(4);
    let items: Vec<MemoryItem> = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            item(
                id,
                format!("walrus lantern number {i}"),
                json!({"even": i % 2 == 0}),
            )
        })
        .collect();
    index_with_filler(r, &scope, &items).await;
    assert!(
        retrieve(r, &scope, RetrievalQuery::new("walrus lantern", 0))
            .await
            .is_empty()
    );
    assert_eq!(
        retrieve(r, &scope, RetrievalQuery::new("walrus lantern", 2))
            .await
            .len(),
        2
    );
    let even = retrieve(
        r,
        &scope,
        RetrievalQuery::new("walrus lantern", 10)
            .with_filter(PayloadFilter::eq("even", json!(true))),
    )
    .await;
    let got: BTreeSet<Uuid> = even.iter().map(|x| x.id).collect();
    assert_eq!(
        got,
        BTreeSet::from([ids[0], ids[2]]),
        "the filter was not applied: {even:?}"
    );
}

/// Indexing an id again replaces its text and payload (found by its new text), indexing the
/// same items again changes nothing, and an empty batch is a no-op.
pub async fn index_replaces_by_id(r: &dyn Retriever) {
    let scope = random_scope();
    let id = Uuid::new_v4();
    index_with_filler(r, &scope, &[item(id, "walrus lantern", json!({"v": 1}))]).await;
    let new = [item(id, "harbor trumpet", json!({"v": 2}))];
    r.index(&scope, &new).await.expect_ok("replace");
    r.index(&scope, &new).await.expect_ok("retry");
    r.index(&scope, &[]).await.expect_ok("empty batch");
    let got = retrieve(r, &scope, RetrievalQuery::new("harbor trumpet", 50)).await;
    assert_eq!(
        got.first().map(|x| x.id),
        Some(id),
        "the replaced item is not found by its new text"
    );
    assert_eq!(got[0].payload["v"], 2);
    assert_eq!(got[0].text(), Some("harbor trumpet"));
    assert_eq!(ids(&got).iter().filter(|&&x| x == id).count(), 1);
    assert_eq!(
        r.clear(&scope).await.expect_ok("clear"),
        7,
        "a replace or a retry added an item"
    );
}

/// `delete` returns how many of the ids existed and deleted items are never retrieved;
/// `clear` returns how many items the scope held.
pub async fn delete_and_clear_count(r: &dyn Retriever) {
    let scope = random_scope();
    let ids = sorted_ids(3);
    let items: Vec<MemoryItem> = ids
        .iter()
        .map(|&id| item(id, "walrus lantern harbor", json!({})))
        .collect();
    index_with_filler(r, &scope, &items).await;
    let deleted = r
        .delete(&scope, &[ids[0], ids[1], Uuid::new_v4()])
        .await
        .expect_ok("delete");
    assert_eq!(deleted, 2, "delete counted ids that did not exist");
    let got = ids_of(r, &scope).await;
    assert!(
        !got.contains(&ids[0]) && !got.contains(&ids[1]),
        "a deleted item was retrieved"
    );
    assert!(got.contains(&ids[2]));
    assert_eq!(r.clear(&scope).await.expect_ok("clear"), 7);
    assert_eq!(r.clear(&scope).await.expect_ok("clear again"), 0);
}

async fn ids_of(r: &dyn Retriever, scope: &Scope) -> Vec<Uuid> {
    ids(&retrieve(r, scope, RetrievalQuery::new("walrus lantern harbor", 50)).await)
}

/// Runs every retriever check on `retriever`.
pub async fn run_all_retriever_checks(retriever: Arc<dyn Retriever>) {
    crate::__retriever_checks!(run_all(retriever));
}
