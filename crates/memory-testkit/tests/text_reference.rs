//! The text index suite run on a naive reference index (every word counts, scored by inverse
//! document frequency within the scope): it shows that the suite can pass, and that it fails
//! an index that breaks the contract (a case-sensitive one, an unscoped one).

// The reference index is a test double: unwrapping a poisoned lock and counting with plain
// arithmetic on its own small maps is the simplest correct thing.
#![allow(
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::cast_precision_loss
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;
use memory_core::forget::ForgetFilter;
use memory_core::lexical::{check_documents, check_query, query_words};
use memory_core::{
    Result, Scope, ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery,
};
use uuid::Uuid;

/// A naive in-memory text index.
#[derive(Debug, Default)]
struct ReferenceIndex {
    documents: Mutex<BTreeMap<(String, Uuid), (Scope, TextDocument)>>,
    /// Breaks case folding (for the self-test).
    case_sensitive: bool,
}

impl ReferenceIndex {
    fn words(&self, text: &str) -> Vec<String> {
        if self.case_sensitive {
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        } else {
            query_words(text)
        }
    }
}

#[async_trait]
impl TextIndex for ReferenceIndex {
    fn capabilities(&self) -> TextCapabilities {
        TextCapabilities::none().with_deletes_matching(true)
    }

    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        check_documents(documents)?;
        let mut all = self.documents.lock().unwrap();
        for d in documents {
            all.insert((scope.key(), d.id), (scope.clone(), d.clone()));
        }
        Ok(())
    }

    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        check_query(query)?;
        let words: BTreeSet<String> = self.words(&query.text).into_iter().collect();
        let all = self.documents.lock().unwrap();
        let key = scope.key();
        let in_scope: Vec<(&TextDocument, BTreeSet<String>)> = all
            .iter()
            .filter(|((k, _), _)| *k == key)
            .map(|(_, (_, d))| (d, self.words(&d.text).into_iter().collect()))
            .collect();
        let n = in_scope.len() as f32;
        let mut results: Vec<ScoredDocument> = in_scope
            .iter()
            .filter(|(d, _)| query.filter.as_ref().is_none_or(|f| f.matches(&d.payload)))
            .filter_map(|(d, doc_words)| {
                let score: f32 = words
                    .iter()
                    .filter(|w| doc_words.contains(*w))
                    .map(|w| {
                        let holding = in_scope.iter().filter(|(_, ws)| ws.contains(w)).count();
                        (1.0 + n / holding as f32).ln()
                    })
                    .sum();
                (score > 0.0).then(|| ScoredDocument {
                    id: d.id,
                    score,
                    payload: d.payload.clone(),
                })
            })
            .collect();
        results.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        results.truncate(query.top_k);
        Ok(results)
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        let all = self.documents.lock().unwrap();
        Ok(ids
            .iter()
            .filter_map(|id| all.get(&(scope.key(), *id)).map(|(_, d)| d.clone()))
            .collect())
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let mut all = self.documents.lock().unwrap();
        Ok(ids
            .iter()
            .filter(|id| all.remove(&(scope.key(), **id)).is_some())
            .count() as u64)
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        let all = self.documents.lock().unwrap();
        Ok(all.keys().filter(|(k, _)| *k == key).count() as u64)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        let mut all = self.documents.lock().unwrap();
        let before = all.len();
        all.retain(|(k, _), _| *k != key);
        Ok((before - all.len()) as u64)
    }

    async fn delete_matching(&self, filter: &ForgetFilter) -> Result<u64> {
        let mut all = self.documents.lock().unwrap();
        let before = all.len();
        all.retain(|_, (scope, _)| !filter.matches(scope));
        Ok((before - all.len()) as u64)
    }

    async fn count_matching(&self, filter: &ForgetFilter) -> Result<u64> {
        let all = self.documents.lock().unwrap();
        Ok(all
            .values()
            .filter(|(scope, _)| filter.matches(scope))
            .count() as u64)
    }
}

/// The same index without the optional operations.
#[derive(Debug, Default)]
struct WithoutDeletesMatching(ReferenceIndex);

#[async_trait]
impl TextIndex for WithoutDeletesMatching {
    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        self.0.upsert(scope, documents).await
    }
    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        self.0.search(scope, query).await
    }
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        self.0.get(scope, ids).await
    }
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.0.delete(scope, ids).await
    }
    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.0.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
}

memory_testkit::text_index_tests!(mod reference, async { ReferenceIndex::default() });

memory_testkit::text_index_tests!(mod reference_without_deletes_matching, async {
    WithoutDeletesMatching::default()
});

#[test]
#[should_panic(expected = "finds both documents")]
fn a_case_sensitive_index_fails_the_suite() {
    memory_testkit::__private::block_on(async {
        let index = ReferenceIndex {
            case_sensitive: true,
            ..ReferenceIndex::default()
        };
        memory_testkit::lexical::search_folds_case(&index).await;
    });
}

#[test]
fn one_index_runs_the_whole_suite() {
    memory_testkit::__private::block_on(async {
        memory_testkit::run_all_text_index_checks(std::sync::Arc::new(ReferenceIndex::default()))
            .await;
    });
}
