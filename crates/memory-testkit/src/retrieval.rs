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

use memory_core::lexical::{MAX_QUERY_BYTES, MAX_TEXT_BYTES};
use memory_core::retrieval::{MemoryItem, RetrievalQuery, Retrieved, Retriever};
use memory_core::{ErrorKind, PayloadFilter, Scope};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fixtures::{
    ExpectOk, payload, random_scope, random_session_id, random_tenant, sorted_ids,
};

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

/// Indexes the [`FILLER`] items (fresh ids) and `items` in one batch; returns every id
/// indexed.
async fn index_with_filler(r: &dyn Retriever, scope: &Scope, items: &[MemoryItem]) -> Vec<Uuid> {
    let mut all: Vec<MemoryItem> = FILLER
        .iter()
        .map(|t| item(Uuid::new_v4(), *t, json!({"filler": true})))
        .collect();
    all.extend_from_slice(items);
    r.index(scope, &all).await.expect_ok("index items");
    all.iter().map(|i| i.id).collect()
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

/// An item's context is indexed with it and never returned: a query sharing words only with
/// the context finds the item first, and its payload `"text"` is its own text alone.
pub async fn context_is_indexed_not_returned(r: &dyn Retriever) {
    let scope = random_scope();
    let answer = Uuid::new_v4();
    let with_context = item(answer, "it was rex", json!({"k": 1}))
        .with_context("what was the name of your childhood walrus");
    index_with_filler(r, &scope, std::slice::from_ref(&with_context)).await;
    let got = retrieve(r, &scope, RetrievalQuery::new("childhood walrus name", 5)).await;
    assert_eq!(
        got.first().map(|x| x.id),
        Some(answer),
        "the item was not found by its context's words: {got:?}"
    );
    assert_eq!(
        got[0].text(),
        Some("it was rex"),
        "the context was returned"
    );
    assert_eq!(got[0].payload["k"], 1);
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
    // Searched by its old text, the item is either not found (a lexical ranking) or found as
    // it is now (a dense ranking returns every item): never its old text or payload.
    for x in retrieve(r, &scope, RetrievalQuery::new("walrus lantern", 50))
        .await
        .iter()
        .filter(|x| x.id == id)
    {
        assert_eq!(
            (x.text(), &x.payload["v"]),
            (Some("harbor trumpet"), &json!(2)),
            "a search of the old text returned the replaced version"
        );
    }
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
    assert_eq!(
        r.delete(&scope, &[]).await.expect_ok("delete nothing"),
        0,
        "deleting no id deleted something"
    );
    assert_eq!(
        r.delete(&scope, &[ids[0]]).await.expect_ok("delete again"),
        0,
        "a second delete of the same id counted it again"
    );
    let got = ids_of(r, &scope).await;
    assert!(
        !got.contains(&ids[0]) && !got.contains(&ids[1]),
        "a deleted item was retrieved"
    );
    assert!(got.contains(&ids[2]));
    assert_eq!(r.clear(&scope).await.expect_ok("clear"), 7);
    assert_eq!(r.clear(&scope).await.expect_ok("clear again"), 0);
}

/// Scopes that differ from one another in one part only (tenant, user, agent, session or
/// source) are separate: each finds its own item of a shared id and text, with its own payload
/// and nothing of the others (not even through a filter naming another scope's payload); a
/// delete or a clear in one leaves the others whole.
pub async fn scopes_differing_in_one_part_are_isolated(r: &dyn Retriever) {
    let base = random_scope();
    let scopes = [
        base.clone(),
        Scope::new(random_tenant(), base.session_id().clone()),
        base.clone().with_user("other-user").expect("valid"),
        base.clone().with_agent("other-agent").expect("valid"),
        Scope::new(base.tenant().clone(), random_session_id()),
        base.clone().with_source("other.source").expect("valid"),
    ];
    let shared = Uuid::new_v4();
    let mut held: Vec<BTreeSet<Uuid>> = Vec::new();
    for (i, scope) in scopes.iter().enumerate() {
        let ids = index_with_filler(
            r,
            scope,
            &[item(
                shared,
                format!("walrus lantern harbor scope{i}marker"),
                json!({"scope": i}),
            )],
        )
        .await;
        held.push(ids.into_iter().collect());
    }
    let query = RetrievalQuery::new("walrus lantern harbor", 50);
    for (i, scope) in scopes.iter().enumerate() {
        let got = retrieve(r, scope, query.clone()).await;
        let mine: Vec<&Retrieved> = got.iter().filter(|x| x.id == shared).collect();
        assert_eq!(
            mine.len(),
            1,
            "scope {i} ({}) returned the shared id {} times, not once",
            scope.key(),
            mine.len()
        );
        assert_eq!(
            (mine[0].payload["scope"].clone(), mine[0].text()),
            (
                json!(i),
                Some(format!("walrus lantern harbor scope{i}marker").as_str())
            ),
            "scope {i} ({}) returned another scope's version of the shared id",
            scope.key()
        );
        assert!(
            got.iter().all(|x| held[i].contains(&x.id)),
            "scope {i} ({}) returned an item it never held: {got:?}",
            scope.key()
        );
        for j in 0..scopes.len() {
            let crossing = retrieve(
                r,
                scope,
                RetrievalQuery::new(format!("walrus scope{j}marker"), 50)
                    .with_filter(PayloadFilter::eq("scope", json!(j))),
            )
            .await;
            let expected = if i == j { vec![shared] } else { vec![] };
            assert_eq!(
                ids(&crossing),
                expected,
                "a search of scope {i} filtered on scope {j}'s payload"
            );
        }
    }
    assert_eq!(
        r.delete(&scopes[0], &[shared]).await.expect_ok("delete"),
        1,
        "a delete in scope 0 counts its own item only"
    );
    assert_eq!(
        r.clear(&scopes[2]).await.expect_ok("clear"),
        7,
        "a clear of scope 2 counts its own items only"
    );
    for (i, scope) in scopes.iter().enumerate() {
        let found = ids(&retrieve(r, scope, query.clone()).await).contains(&shared);
        assert_eq!(
            found,
            i != 0 && i != 2,
            "after a delete in scope 0 and a clear of scope 2, scope {i} ({}) has its item: {}",
            scope.key(),
            i != 0 && i != 2
        );
    }
    assert!(
        retrieve(r, &scopes[2], query).await.is_empty(),
        "the cleared scope still returns items"
    );
}

/// Payload filters combine (and, or, not), match the stored `"text"` too, and a filter no
/// item matches returns nothing, whatever the query.
pub async fn payload_filters_combine(r: &dyn Retriever) {
    let scope = random_scope();
    let ids = sorted_ids(4);
    let specs = [
        (json!("fact"), json!("en"), "walrus lantern fact english"),
        (json!("note"), json!("pt"), "walrus lantern note portuguese"),
        (json!("note"), json!("en"), "walrus lantern note english"),
        (json!("fact"), json!("pt"), "walrus lantern fact portuguese"),
    ];
    let items: Vec<MemoryItem> = ids
        .iter()
        .zip(&specs)
        .map(|(&id, (kind, lang, text))| item(id, *text, json!({"kind": kind, "lang": lang})))
        .collect();
    index_with_filler(r, &scope, &items).await;
    let eq = PayloadFilter::eq;
    let cases = [
        (
            eq("kind", json!("fact")).and(eq("lang", json!("en"))),
            vec![0],
            "fact and en",
        ),
        (
            eq("kind", json!("note")).or(eq("lang", json!("en"))),
            vec![0, 1, 2],
            "note or en",
        ),
        (
            eq("kind", json!("fact"))
                .or(eq("kind", json!("note")))
                .and(eq("lang", json!("en")).not()),
            vec![1, 3],
            "(fact or note) and not en (fillers have no kind)",
        ),
        (
            eq("filler", json!(true)).not().and(eq("lang", json!("pt"))),
            vec![1, 3],
            "not filler and pt",
        ),
        (
            eq("kind", json!("fact")).and(eq("kind", json!("note"))),
            vec![],
            "fact and note",
        ),
        (eq("kind", json!("poem")), vec![], "an absent value"),
        (
            eq("text", json!("walrus lantern note portuguese")),
            vec![1],
            "the stored text",
        ),
    ];
    for (filter, expected, what) in cases {
        let got = retrieve(
            r,
            &scope,
            RetrievalQuery::new("walrus lantern", 50).with_filter(filter),
        )
        .await;
        let want: BTreeSet<Uuid> = expected.iter().map(|&i| ids[i]).collect();
        assert_eq!(
            got.iter().map(|x| x.id).collect::<BTreeSet<Uuid>>(),
            want,
            "filter {what}: {got:?}"
        );
    }
}

/// Payload keys and values holding JSON-path and SQL syntax (dots, quotes, `$`, brackets,
/// spaces, `*`, NUL, non-ASCII) are plain keys and values: a filter on each selects exactly the
/// item holding it. A key holding a character a JSON path must escape (`"`, `\\`, NUL) may be
/// refused as a filter the backend cannot express (`Unsupported`, as the `VectorStore` and
/// `TextIndex` contracts allow); no other error, and never a wrong answer.
pub async fn hostile_payload_keys_are_plain_keys(r: &dyn Retriever) {
    let scope = random_scope();
    let keys = [
        "a.b",
        "it's",
        "say \"hi\"",
        "$.text",
        "$[0]",
        "x[0]",
        "with space",
        "*",
        "ü日本",
        "back\\slash",
        "') OR 1=1 --",
        "nul\0key",
    ];
    let item_ids = sorted_ids(keys.len());
    let items: Vec<MemoryItem> = item_ids
        .iter()
        .zip(keys)
        .enumerate()
        .map(|(i, (&id, key))| {
            let mut payload = serde_json::Map::new();
            payload.insert(key.to_owned(), json!(format!("v'{i}\"")));
            MemoryItem::new(id, format!("walrus lantern key{i}")).with_payload(payload)
        })
        .collect();
    index_with_filler(r, &scope, &items).await;
    for (i, key) in keys.iter().enumerate() {
        let query = RetrievalQuery::new("walrus lantern", 50)
            .with_filter(PayloadFilter::eq(*key, json!(format!("v'{i}\""))));
        let got = match r.retrieve(&scope, &query).await {
            Err(e) if e.kind() == ErrorKind::Unsupported && key.contains(['"', '\\', '\0']) => {
                continue;
            }
            other => other.expect_ok(&format!("retrieve filtered on the payload key {key:?}")),
        };
        assert_eq!(
            ids(&got),
            vec![item_ids[i]],
            "a filter on the payload key {key:?} selects the one item holding it"
        );
    }
}

/// Queries a user may type (quotes, full-text operators, punctuation, SQL, NUL characters,
/// texts past the text index's query limit) are words: each is answered without error, within
/// the scope; one holding the item's words finds it. Items with such texts are indexed and
/// returned with their exact text.
pub async fn hostile_text_is_words_within_the_scope(r: &dyn Retriever) {
    let (scope, neighbour) = {
        let base = random_scope();
        let neighbour = base.clone().with_user("neighbour").expect("valid");
        (base, neighbour)
    };
    let target = Uuid::new_v4();
    let hostile_texts = [
        "walrus\0lantern \"quoted\" AND (harbor) OR NOT NEAR* - : ^2 ~ {x}",
        "'; DROP TABLE documents; -- walrus",
        "\0",
        "",
    ];
    // Past the text index's limit: a lexical retriever indexes its beginning, keeps it whole.
    let long_text = format!(
        "lantern walrus {}",
        "zeppelin ".repeat(MAX_TEXT_BYTES / 9 + 16)
    );
    let mut items: Vec<MemoryItem> = hostile_texts
        .iter()
        .map(|t| item(Uuid::new_v4(), *t, json!({"hostile": true})))
        .collect();
    items.push(item(
        Uuid::new_v4(),
        long_text.clone(),
        json!({"long": true}),
    ));
    items.push(item(
        target,
        "walrus lantern harbor",
        json!({"target": true}),
    ));
    let held: BTreeSet<Uuid> = index_with_filler(r, &scope, &items)
        .await
        .into_iter()
        .collect();
    // The neighbour holds the same texts under other ids.
    let neighbour_items: Vec<MemoryItem> = items
        .iter()
        .map(|i| item(Uuid::new_v4(), i.text.clone(), json!({"neighbour": true})))
        .collect();
    index_with_filler(r, &neighbour, &neighbour_items).await;

    let long_query = format!(
        "{} walrus lantern",
        "zeppelin ".repeat(MAX_QUERY_BYTES / 9 + 16)
    );
    let finding = [
        "walrus AND lantern",
        "walrus OR lantern",
        "walrus NOT lantern",
        "walrus -lantern",
        "-walrus -lantern",
        "NEAR(walrus lantern, 2)",
        "\"walrus lantern",
        "\"walrus\" \"lantern\"",
        "'walrus' OR '1'='1'",
        "(walrus lantern",
        "walrus) lantern(",
        "walrus* lantern*",
        "text:walrus payload:lantern",
        "walrus:* & lantern:*",
        "walrus\0lantern",
        "\0walrus\0",
        "walrus\"); DELETE FROM x; --",
        long_query.as_str(),
    ];
    for query in finding {
        let got = retrieve(r, &scope, RetrievalQuery::new(query, 50)).await;
        let shown: String = query.chars().take(60).collect();
        assert!(
            got.iter().any(|x| x.id == target),
            "{shown:?} ({} bytes) holds the target's words and does not find it: {got:?}",
            query.len()
        );
        assert!(
            got.iter().all(|x| held.contains(&x.id)),
            "{shown:?} returned an item of another scope"
        );
    }
    let wordless_long = "\" ( ) : - * ".repeat(MAX_QUERY_BYTES / 4);
    for query in [
        "",
        "\0",
        "\"",
        "\"\"\"",
        "*",
        "*:*",
        "( ) : -",
        "NOT",
        "AND OR NOT NEAR",
        "'; DROP TABLE documents; --",
        wordless_long.as_str(),
    ] {
        let got = retrieve(r, &scope, RetrievalQuery::new(query, 50)).await;
        let shown: String = query.chars().take(60).collect();
        assert!(
            got.iter().all(|x| held.contains(&x.id)),
            "{shown:?} returned an item of another scope"
        );
    }
    // Every hostile item is stored with its exact text: a filter on it selects that item only,
    // and one holding "walrus" is found by it (the others hold no word a lexical ranking finds).
    for wanted in &items {
        let got = retrieve(
            r,
            &scope,
            RetrievalQuery::new("walrus", 50)
                .with_filter(PayloadFilter::eq("text", json!(wanted.text))),
        )
        .await;
        if wanted.text.contains("walrus") {
            assert_eq!(
                ids(&got),
                vec![wanted.id],
                "a search of walrus filtered on the exact text of {:?}",
                wanted.text.chars().take(60).collect::<String>()
            );
        }
        for x in &got {
            assert_eq!(
                x.id, wanted.id,
                "a filter on the exact text matched another item"
            );
            assert_eq!(
                x.text(),
                Some(wanted.text.as_str()),
                "the stored text changed"
            );
        }
    }
    let long = retrieve(
        r,
        &scope,
        RetrievalQuery::new("lantern walrus", 50)
            .with_filter(PayloadFilter::eq("long", json!(true))),
    )
    .await;
    assert_eq!(long.len(), 1, "the long item is found by its first words");
    assert_eq!(
        long[0].text().map(str::len),
        Some(long_text.len()),
        "the long item's stored text was cut"
    );
    assert_eq!(
        r.clear(&scope).await.expect_ok("clear"),
        (FILLER.len() + items.len()) as u64,
        "every hostile item was indexed once"
    );
    assert_eq!(
        r.clear(&neighbour).await.expect_ok("clear the neighbour"),
        (FILLER.len() + items.len()) as u64,
        "the neighbour kept every item"
    );
}

async fn ids_of(r: &dyn Retriever, scope: &Scope) -> Vec<Uuid> {
    ids(&retrieve(r, scope, RetrievalQuery::new("walrus lantern harbor", 50)).await)
}

/// Runs every retriever check on `retriever`.
pub async fn run_all_retriever_checks(retriever: Arc<dyn Retriever>) {
    crate::__retriever_checks!(run_all(retriever));
}
