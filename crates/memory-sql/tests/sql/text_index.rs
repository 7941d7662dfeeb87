//! `SqlTextIndex` on each engine: the behaviour every engine shares (scopes, replace, delete,
//! filters, forget), and what each engine's full-text search does differently (FTS5 syntax
//! characters and stemming, PostgreSQL stop words, InnoDB's short words, stop words and
//! visibility after commit).
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::ScopeFilter;
use memory_core::lexical::{MAX_QUERY_BYTES, TextDocument, TextIndex, TextQuery};
use memory_core::{ErrorKind, PayloadFilter, Scope, TenantId, UserId};
use memory_sql::{Backend, SqlConfig, SqlStore, SqlTextIndex};
use serde_json::json;
use uuid::Uuid;

use crate::support;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    SqliteMemory,
    SqliteFile,
    Postgres,
    MySql,
}

const ENGINES: [Engine; 4] = [
    Engine::SqliteMemory,
    Engine::SqliteFile,
    Engine::Postgres,
    Engine::MySql,
];

async fn store(engine: Engine) -> SqlStore {
    match engine {
        Engine::SqliteMemory => SqlStore::in_memory().await.unwrap(),
        Engine::SqliteFile => support::sqlite_file_store().await,
        Engine::Postgres => support::postgres_store().await,
        Engine::MySql => support::mysql_store().await,
    }
}

async fn index(engine: Engine) -> SqlTextIndex {
    store(engine).await.text_index().unwrap()
}

/// A scope of a fresh tenant, so tests sharing the server tables never meet.
fn scope(user: &str) -> Scope {
    Scope::session("s1")
        .unwrap()
        .with_tenant(format!("t-{}", Uuid::new_v4().simple()))
        .unwrap()
        .with_user(user)
        .unwrap()
}

fn doc(n: u128, text: &str, payload: serde_json::Value) -> TextDocument {
    TextDocument {
        id: Uuid::from_u128(n),
        text: text.to_owned(),
        payload: payload.as_object().cloned().unwrap_or_default(),
    }
}

async fn ids(index: &SqlTextIndex, scope: &Scope, query: TextQuery) -> Vec<u128> {
    index
        .search(scope, &query)
        .await
        .unwrap_or_else(|e| panic!("search {:?}: {e}", query.text))
        .iter()
        .map(|d| {
            assert!(d.score > 0.0, "{d:?}");
            d.id.as_u128()
        })
        .collect()
}

#[tokio::test]
async fn documents_are_found_replaced_deleted_and_forgotten_on_every_engine() {
    for engine in ENGINES {
        let index = index(engine).await;
        assert!(index.capabilities().deletes_matching);
        let dana = scope("dana");
        let other = Scope::session("s2")
            .unwrap()
            .with_tenant(dana.tenant().as_str())
            .unwrap()
            .with_user("eve")
            .unwrap();
        let docs = [
            doc(
                1,
                "Caroline went to a pottery class on Sunday",
                json!({"kind": "fact"}),
            ),
            doc(
                2,
                "Melanie painted a sunrise over the lake",
                json!({"kind": "event"}),
            ),
            doc(
                3,
                "Caroline and Melanie talked about pottery glazes",
                json!({"kind": "fact", "n": 1}),
            ),
        ];
        index.upsert(&dana, &docs).await.unwrap();
        // A retried upsert changes nothing.
        index.upsert(&dana, &docs).await.unwrap();
        index
            .upsert(&other, &[doc(1, "Eve's pottery studio", json!({}))])
            .await
            .unwrap();
        assert_eq!(index.count(&dana).await.unwrap(), 3, "{engine:?}");
        assert_eq!(index.count(&other).await.unwrap(), 1, "{engine:?}");

        // More of the query's words rank first; the other scope's document never shows.
        let got = ids(&index, &dana, TextQuery::new("Caroline pottery glazes", 10)).await;
        assert_eq!(got.first(), Some(&3), "{engine:?}: {got:?}");
        assert_eq!(got.len(), 2, "{engine:?}: {got:?}");
        assert_eq!(
            ids(&index, &other, TextQuery::new("pottery", 10)).await,
            [1],
            "{engine:?}"
        );
        // Case folds; top_k bounds; a query of punctuation or top_k 0 finds nothing.
        assert_eq!(
            ids(&index, &dana, TextQuery::new("MELANIE", 1)).await.len(),
            1
        );
        assert!(
            ids(&index, &dana, TextQuery::new("?!  ...", 5))
                .await
                .is_empty()
        );
        assert!(
            ids(&index, &dana, TextQuery::new("pottery", 0))
                .await
                .is_empty()
        );
        assert!(
            ids(&index, &dana, TextQuery::new("xylophone", 5))
                .await
                .is_empty()
        );

        // Filters are exact: a number or a missing key never matches a string.
        let fact = PayloadFilter::eq("kind", json!("fact"));
        let got = ids(
            &index,
            &dana,
            TextQuery::new("Caroline Melanie", 10).with_filter(fact.clone()),
        )
        .await;
        assert_eq!(got.len(), 2, "{engine:?}");
        assert!(!got.contains(&2));
        let event_or_n =
            PayloadFilter::eq("kind", json!("event")).or(PayloadFilter::eq("n", json!(1)));
        let mut got = ids(
            &index,
            &dana,
            TextQuery::new("Melanie", 10).with_filter(event_or_n),
        )
        .await;
        got.sort();
        assert_eq!(got, [2, 3], "{engine:?}");
        let none = PayloadFilter::eq("n", json!("1"));
        assert!(
            ids(
                &index,
                &dana,
                TextQuery::new("Melanie", 10).with_filter(none)
            )
            .await
            .is_empty()
        );

        // Get returns exact text and payload, skips unknown ids, keeps the asked order.
        let got = index
            .get(
                &dana,
                &[Uuid::from_u128(3), Uuid::from_u128(99), Uuid::from_u128(1)],
            )
            .await
            .unwrap();
        assert_eq!(got, [docs[2].clone(), docs[0].clone()], "{engine:?}");

        // A replaced document loses its old words.
        index
            .upsert(
                &dana,
                &[doc(1, "Caroline adopted a dog", json!({"kind": "pet"}))],
            )
            .await
            .unwrap();
        assert_eq!(ids(&index, &dana, TextQuery::new("pottery", 10)).await, [3]);
        assert_eq!(ids(&index, &dana, TextQuery::new("dog", 10)).await, [1]);
        assert_eq!(
            index.get(&dana, &[Uuid::from_u128(1)]).await.unwrap()[0].payload["kind"],
            json!("pet")
        );

        // Delete counts what existed.
        assert_eq!(
            index
                .delete(
                    &dana,
                    &[Uuid::from_u128(2), Uuid::from_u128(2), Uuid::from_u128(42)]
                )
                .await
                .unwrap(),
            1
        );
        assert!(
            ids(&index, &dana, TextQuery::new("sunrise", 10))
                .await
                .is_empty()
        );

        // Forget by user: dana's scope only.
        let tenant = TenantId::new(dana.tenant().as_str()).unwrap();
        let only_dana = ScopeFilter::tenant(tenant.clone()).with_user(UserId::new("dana").unwrap());
        assert_eq!(index.count_matching(&only_dana).await.unwrap(), 2);
        assert_eq!(index.delete_matching(&only_dana).await.unwrap(), 2);
        assert_eq!(index.count(&dana).await.unwrap(), 0);
        assert_eq!(index.count(&other).await.unwrap(), 1);
        let whole = ScopeFilter::tenant(tenant);
        assert_eq!(index.count_matching(&whole).await.unwrap(), 1);
        assert_eq!(index.clear(&other).await.unwrap(), 1);
        assert_eq!(index.count_matching(&whole).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn query_syntax_is_never_interpreted_on_any_engine() {
    let hostile = [
        "\"unbalanced",
        "NEAR(caroline pottery, 2)",
        "caroline AND NOT pottery",
        "-pottery +caroline*",
        "body:caroline",
        "caroline ^ pottery | ! & <-> :*",
        "'single' 'quotes''",
        "(((",
        "\\ / {} [] ~ @ # $ % = ?",
        "NULL; DROP TABLE x; --",
    ];
    for engine in ENGINES {
        let index = index(engine).await;
        let s = scope("dana");
        index
            .upsert(
                &s,
                &[
                    doc(1, "Caroline went to a pottery class", json!({})),
                    doc(2, "body and soul", json!({})),
                ],
            )
            .await
            .unwrap();
        for q in hostile {
            let got = ids(&index, &s, TextQuery::new(q, 10)).await;
            let words = memory_core::lexical::query_words(q);
            if words
                .iter()
                .any(|w| ["caroline", "pottery"].contains(&w.as_str()))
            {
                assert!(got.contains(&1), "{engine:?} {q:?}: {got:?}");
            }
        }
        // Operators are plain words: NOT does not exclude, and `body` is a word, not a column.
        let got = ids(&index, &s, TextQuery::new("body:caroline", 10)).await;
        assert_eq!(got.len(), 2, "{engine:?}: {got:?}");
        // The longest query: thousands of distinct words, no error.
        let mut long = String::new();
        let mut n = 0u32;
        while long.len() + 12 < MAX_QUERY_BYTES {
            long.push_str(&format!("w{n}x "));
            n += 1;
        }
        long.push_str("pottery");
        assert_eq!(
            ids(&index, &s, TextQuery::new(&long, 3)).await,
            [1],
            "{engine:?}"
        );
        let too_long = "a".repeat(MAX_QUERY_BYTES + 1);
        let err = index
            .search(&s, &TextQuery::new(too_long, 3))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
}

#[tokio::test]
async fn bad_documents_write_nothing_and_large_ones_are_kept() {
    let words: Vec<String> = (0..2000).map(|i| format!("word{i}")).collect();
    let mut large = String::new();
    let mut i = 0;
    while large.len() < memory_core::lexical::MAX_TEXT_BYTES - 16 {
        large.push_str(&words[i % words.len()]);
        large.push(' ');
        i += 1;
    }
    for engine in ENGINES {
        let index = index(engine).await;
        let s = scope("dana");
        let err = index
            .upsert(
                &s,
                &[doc(1, "fine", json!({})), doc(2, "nul\0here", json!({}))],
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(index.count(&s).await.unwrap(), 0);
        index
            .upsert(
                &s,
                &[doc(1, &large, json!({"big": true})), doc(2, "", json!({}))],
            )
            .await
            .unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        assert_eq!(
            ids(&index, &s, TextQuery::new("word1999", 5)).await,
            [1],
            "{engine:?}"
        );
        assert_eq!(
            index.get(&s, &[Uuid::from_u128(1)]).await.unwrap()[0].text,
            large
        );
        // A batch of many documents (several statements on every engine).
        let many: Vec<TextDocument> = (10..1210)
            .map(|n| {
                doc(
                    n,
                    &format!("note number{n} about gardens"),
                    json!({"n": n as u64}),
                )
            })
            .collect();
        index.upsert(&s, &many).await.unwrap();
        assert_eq!(index.count(&s).await.unwrap(), 1202);
        assert_eq!(ids(&index, &s, TextQuery::new("number700", 5)).await, [700]);
        let filtered = ids(
            &index,
            &s,
            TextQuery::new("gardens", 3).with_filter(PayloadFilter::eq("n", json!(1209))),
        )
        .await;
        assert_eq!(
            filtered,
            [1209],
            "{engine:?}: a filter past the first pages"
        );
        let all: Vec<Uuid> = (10..1210).map(Uuid::from_u128).collect();
        assert_eq!(index.get(&s, &all).await.unwrap().len(), 1200);
        assert_eq!(index.delete(&s, &all).await.unwrap(), 1200);
        assert_eq!(index.clear(&s).await.unwrap(), 2);
    }
}

/// Equal scores come by ascending id.
#[tokio::test]
async fn ties_come_by_ascending_id() {
    for engine in ENGINES {
        let index = index(engine).await;
        let s = scope("dana");
        let docs: Vec<TextDocument> = [7u128, 3, 9, 1]
            .iter()
            .map(|&n| doc(n, "identical words here", json!({})))
            .collect();
        index.upsert(&s, &docs).await.unwrap();
        let got = ids(&index, &s, TextQuery::new("identical", 10)).await;
        assert_eq!(got, [1, 3, 7, 9], "{engine:?}");
        assert_eq!(
            ids(&index, &s, TextQuery::new("identical", 2)).await,
            [1, 3]
        );
    }
}

#[tokio::test]
async fn sqlite_stems_and_folds_diacritics() {
    let index = index(Engine::SqliteMemory).await;
    let s = scope("dana");
    index
        .upsert(
            &s,
            &[
                doc(1, "She paints landscapes", json!({})),
                doc(2, "Un café au lait", json!({})),
            ],
        )
        .await
        .unwrap();
    assert_eq!(ids(&index, &s, TextQuery::new("painting", 5)).await, [1]);
    assert_eq!(ids(&index, &s, TextQuery::new("CAFE", 5)).await, [2]);
}

#[tokio::test]
async fn postgres_stop_words_alone_find_nothing_without_error() {
    let index = index(Engine::Postgres).await;
    let s = scope("dana");
    index
        .upsert(&s, &[doc(1, "the cat sat on the mat", json!({}))])
        .await
        .unwrap();
    assert!(
        ids(&index, &s, TextQuery::new("the a of", 5))
            .await
            .is_empty()
    );
    // Stemming: `sitting` and `cats` are `sit` and `cat`.
    assert_eq!(ids(&index, &s, TextQuery::new("the cats", 5)).await, [1]);
}

/// InnoDB indexes no word shorter than `innodb_ft_min_token_size` (3) and none of its stop
/// words: such a query word finds nothing (documented). The index sees the text split where
/// the query splits it: `Caroline's` and `foo_bar` are found by `caroline` and `foo`.
#[tokio::test]
async fn mysql_short_words_and_stop_words_are_not_indexed() {
    let index = index(Engine::MySql).await;
    let s = scope("dana");
    index
        .upsert(
            &s,
            &[
                doc(1, "an ox in the barn", json!({})),
                doc(2, "Caroline's foo_bar", json!({})),
            ],
        )
        .await
        .unwrap();
    assert!(ids(&index, &s, TextQuery::new("ox", 5)).await.is_empty());
    assert!(ids(&index, &s, TextQuery::new("the", 5)).await.is_empty());
    assert_eq!(ids(&index, &s, TextQuery::new("ox barn", 5)).await, [1]);
    assert_eq!(ids(&index, &s, TextQuery::new("caroline", 5)).await, [2]);
    assert_eq!(ids(&index, &s, TextQuery::new("foo", 5)).await, [2]);
    assert_eq!(ids(&index, &s, TextQuery::new("BAR", 5)).await, [2]);
}

/// InnoDB applies `FULLTEXT` changes at commit: every write is visible to the next search,
/// from any connection of the pool.
#[tokio::test]
async fn mysql_writes_are_visible_to_the_next_search() {
    let index = index(Engine::MySql).await;
    let s = scope("dana");
    for n in 0..20u128 {
        index
            .upsert(&s, &[doc(n, &format!("round{n} visible"), json!({}))])
            .await
            .unwrap();
        assert_eq!(
            ids(&index, &s, TextQuery::new(format!("round{n}"), 5)).await,
            [n]
        );
        index
            .upsert(&s, &[doc(n, &format!("changed{n}"), json!({}))])
            .await
            .unwrap();
        assert!(
            ids(&index, &s, TextQuery::new(format!("round{n}"), 5))
                .await
                .is_empty()
        );
        assert_eq!(index.delete(&s, &[Uuid::from_u128(n)]).await.unwrap(), 1);
        assert!(
            ids(&index, &s, TextQuery::new(format!("changed{n}"), 5))
                .await
                .is_empty()
        );
    }
}

/// A store held at schema version 5 has no text table: asking for the index is a typed
/// error, not a failing query later.
#[tokio::test]
async fn an_old_schema_has_no_text_index() {
    let (url, _path) = support::temp_sqlite_url();
    let old = SqlStore::builder(&url)
        .config(SqlConfig::new().__schema_version(5))
        .connect()
        .await
        .unwrap();
    let err = old.text_index().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(err.message().contains("version 6"), "{err}");
    old.close().await;
    // The default open upgrades it, and the index works.
    let store = SqlStore::connect(&url).await.unwrap();
    assert_eq!(store.backend(), Backend::Sqlite);
    let index = store.text_index().unwrap();
    let s = scope("dana");
    index
        .upsert(&s, &[doc(1, "upgraded", json!({}))])
        .await
        .unwrap();
    assert_eq!(ids(&index, &s, TextQuery::new("upgraded", 1)).await, [1]);
}

/// The table prefix applies: two prefixes are two indexes.
#[tokio::test]
async fn the_table_prefix_separates_indexes() {
    let (url, _path) = support::temp_sqlite_url();
    let a = SqlStore::builder(&url)
        .table_prefix("a_")
        .connect()
        .await
        .unwrap();
    let b = SqlStore::builder(&url)
        .table_prefix("b_")
        .connect()
        .await
        .unwrap();
    let s = scope("dana");
    a.text_index()
        .unwrap()
        .upsert(&s, &[doc(1, "only in a", json!({}))])
        .await
        .unwrap();
    assert_eq!(b.text_index().unwrap().count(&s).await.unwrap(), 0);
    assert_eq!(a.text_index().unwrap().count(&s).await.unwrap(), 1);
    let err = SqlStore::builder(&url)
        .table_prefix("bad;name")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// PostgreSQL's `tsvector` holds at most 1 MB: a text of distinct tokens under
/// `MAX_TEXT_BYTES` can exceed it. The upsert is `LimitExceeded` (documented), and nothing of
/// its batch is written.
#[tokio::test]
async fn postgres_refuses_a_tsvector_over_its_limit_as_limit_exceeded() {
    let index = index(Engine::Postgres).await;
    let s = scope("dana");
    let mut text = String::new();
    let mut n = 0u64;
    while text.len() + 40 < memory_core::lexical::MAX_TEXT_BYTES {
        text.push_str(&format!("{:x} ", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        n += 1;
    }
    let err = index
        .upsert(&s, &[doc(1, "small", json!({})), doc(2, &text, json!({}))])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    assert_eq!(index.count(&s).await.unwrap(), 0);
}
