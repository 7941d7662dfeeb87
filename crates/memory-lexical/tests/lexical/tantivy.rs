//! What is particular to the tantivy index: persistence across opens, the directory lock,
//! the analyzer options and the analyzer a directory remembers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use memory_core::{ErrorKind, Scope, TextDocument, TextIndex, TextQuery};
use memory_lexical::{Analyzer, TantivyTextIndex};
use uuid::Uuid;

fn document(text: &str) -> TextDocument {
    TextDocument {
        id: Uuid::new_v4(),
        text: text.into(),
        payload: serde_json::json!({"text": text})
            .as_object()
            .cloned()
            .unwrap(),
    }
}

async fn found(index: &TantivyTextIndex, scope: &Scope, query: &str) -> Vec<Uuid> {
    index
        .search(scope, &TextQuery::new(query, 10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let scope = Scope::session("persisted")
        .unwrap()
        .with_user("dana")
        .unwrap();
    let doc = document("The walrus keeps a lantern");
    {
        let index = TantivyTextIndex::open_async(dir.path()).await.unwrap();
        index
            .upsert(&scope, std::slice::from_ref(&doc))
            .await
            .unwrap();
        let error = TantivyTextIndex::open(dir.path()).unwrap_err();
        assert_eq!(
            error.kind(),
            ErrorKind::Backend,
            "a directory open in another index is refused: {error}"
        );
    }
    let index = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(index.path(), Some(dir.path()));
    assert_eq!(
        index.get(&scope, &[doc.id]).await.unwrap(),
        vec![doc.clone()]
    );
    assert_eq!(found(&index, &scope, "lantern").await, vec![doc.id]);
    assert_eq!(index.count(&scope).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_refuses_another_analyzer() {
    let dir = tempfile::tempdir().unwrap();
    drop(TantivyTextIndex::open_with(dir.path(), Analyzer::english()).unwrap());
    let error = TantivyTextIndex::open_with(dir.path(), Analyzer::plain()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.message().contains("analyzer"), "{error}");
    let index = TantivyTextIndex::open_with(dir.path(), Analyzer::english()).unwrap();
    assert_eq!(index.analyzer(), Analyzer::english());
}

/// Upserts "she walked home" and "the end of it" into the scope `s` of `index`; returns the
/// scope and the two documents.
async fn walked_and_the_end(index: &TantivyTextIndex) -> (Scope, TextDocument, TextDocument) {
    let scope = Scope::session("s").unwrap();
    let (walked, the) = (document("she walked home"), document("the end of it"));
    index
        .upsert(&scope, &[walked.clone(), the.clone()])
        .await
        .unwrap();
    (scope, walked, the)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn english_stems_and_drops_stop_words() {
    let index = TantivyTextIndex::in_memory().unwrap();
    let (scope, walked, the) = walked_and_the_end(&index).await;
    assert_eq!(
        found(&index, &scope, "walking").await,
        vec![walked.id],
        "stemmed"
    );
    assert!(
        found(&index, &scope, "the of").await.is_empty(),
        "stop words"
    );
    assert_eq!(found(&index, &scope, "end").await, vec![the.id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_matches_words_as_written() {
    let index = TantivyTextIndex::in_memory_with(Analyzer::plain()).unwrap();
    let (scope, walked, the) = walked_and_the_end(&index).await;
    assert!(
        found(&index, &scope, "walking").await.is_empty(),
        "no stemming"
    );
    assert_eq!(
        found(&index, &scope, "WALKED").await,
        vec![walked.id],
        "lowercased"
    );
    assert_eq!(
        found(&index, &scope, "the").await,
        vec![the.id],
        "no stop words"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ascii_folding_and_long_words_are_options() {
    let analyzer = Analyzer::plain()
        .with_ascii_folding(true)
        .with_max_word_bytes(8);
    assert_ne!(analyzer.name(), Analyzer::plain().name());
    let index = TantivyTextIndex::in_memory_with(analyzer).unwrap();
    let scope = Scope::session("s").unwrap();
    let (cafe, long) = (
        document("un café noir"),
        document("supercalifragilistic short"),
    );
    index
        .upsert(&scope, &[cafe.clone(), long.clone()])
        .await
        .unwrap();
    assert_eq!(found(&index, &scope, "cafe").await, vec![cafe.id], "folded");
    assert_eq!(found(&index, &scope, "CAFÉ").await, vec![cafe.id], "folded");
    assert!(
        found(&index, &scope, "supercalifragilistic")
            .await
            .is_empty(),
        "a word past max_word_bytes is not indexed"
    );
    assert_eq!(found(&index, &scope, "short").await, vec![long.id]);
}

#[test]
fn analyzer_names_differ_by_option() {
    let names: std::collections::BTreeSet<String> = [
        Analyzer::english(),
        Analyzer::plain(),
        Analyzer::english().with_stemming(false),
        Analyzer::english().with_stop_words(false),
        Analyzer::english().with_ascii_folding(true),
        Analyzer::english().with_max_word_bytes(12),
    ]
    .iter()
    .map(Analyzer::name)
    .collect();
    assert_eq!(names.len(), 6);
    assert_eq!(Analyzer::default(), Analyzer::english());
    assert_eq!(Analyzer::plain().with_max_word_bytes(0).max_word_bytes(), 1);
}

/// The index keeps no source: a forget narrowed by source is refused and deletes nothing
/// (it would otherwise delete every source's documents of the scopes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_naming_a_source_is_refused_and_deletes_nothing() {
    use memory_core::{ScopeFilter, SourceId};

    let index = TantivyTextIndex::in_memory().unwrap();
    let scope = Scope::session("s1").unwrap().with_tenant("acme").unwrap();
    index
        .upsert(&scope, &[document("kept whatever the filter")])
        .await
        .unwrap();
    let filter =
        ScopeFilter::tenant(scope.tenant().clone()).with_source(SourceId::new("history").unwrap());
    for refused in [
        index.delete_matching(&filter).await,
        index.count_matching(&filter).await,
    ] {
        let err = refused.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("source"), "{err}");
    }
    assert_eq!(index.count(&scope).await.unwrap(), 1, "nothing was deleted");
    let whole = ScopeFilter::tenant(scope.tenant().clone());
    assert_eq!(index.count_matching(&whole).await.unwrap(), 1);
}
