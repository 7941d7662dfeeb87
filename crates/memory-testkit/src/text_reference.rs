//! [`ReferenceTextIndex`]: a naive in-memory [`TextIndex`] (a test double), the reference the
//! text index suite is checked against, and a lexical side for retrievers in tests.
//!
//! Every word counts (words as [`query_words`] splits them: case folded, no stemming, no stop
//! words); a document scores, for each distinct query word it holds, `ln(1 + n / holding)`
//! (`n` documents in the scope, `holding` of them hold the word). It keeps everything in one
//! map under a mutex and scans it on every search: fine for tests, not for memory.
//!
//! It can be built broken on purpose ([`Flaw`]), so a suite's self-test shows the suite fails
//! an index that breaks the contract.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use memory_core::ScopeFilter;
use memory_core::lexical::{check_documents, check_query, query_words};
use memory_core::{
    Result, Scope, ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery,
};
use uuid::Uuid;

/// A contract break a [`ReferenceTextIndex`] can be built with, for self-tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flaw {
    /// Words are compared as written: "Walrus" does not match "walrus".
    CaseSensitive,
    /// A search looks at every scope's documents (writes, reads by id and counts stay
    /// scoped): another scope's documents leak into results.
    SearchesEveryScope,
}

/// A naive in-memory text index; see the [module](self) documentation.
///
/// [`new`](Self::new) keeps the whole contract, `delete_matching` and `count_matching`
/// included; [`without_deletes_matching`](Self::without_deletes_matching) declares them absent
/// (they return `Unsupported`); [`with_flaw`](Self::with_flaw) breaks it on purpose.
#[derive(Debug)]
pub struct ReferenceTextIndex {
    documents: Mutex<BTreeMap<(String, Uuid), (Scope, TextDocument)>>,
    deletes_matching: bool,
    flaw: Option<Flaw>,
}

impl Default for ReferenceTextIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl ReferenceTextIndex {
    /// An empty index with every operation, `delete_matching` included.
    pub fn new() -> Self {
        Self {
            documents: Mutex::new(BTreeMap::new()),
            deletes_matching: true,
            flaw: None,
        }
    }

    /// The same index without the optional operations: `capabilities` says so, and
    /// `delete_matching` and `count_matching` return `Unsupported` and change nothing.
    #[must_use]
    pub fn without_deletes_matching(mut self) -> Self {
        self.deletes_matching = false;
        self
    }

    /// The same index, broken by `flaw`.
    #[must_use]
    pub fn with_flaw(mut self, flaw: Flaw) -> Self {
        self.flaw = Some(flaw);
        self
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, Uuid), (Scope, TextDocument)>> {
        self.documents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn words(&self, text: &str) -> BTreeSet<String> {
        if self.flaw == Some(Flaw::CaseSensitive) {
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        } else {
            query_words(text).into_iter().collect()
        }
    }

    fn unsupported(operation: &str) -> memory_core::Error {
        memory_core::Error::unsupported(format!(
            "ReferenceTextIndex built without_deletes_matching does not support {operation} \
             (TextCapabilities::deletes_matching is off)"
        ))
    }
}

#[async_trait]
impl TextIndex for ReferenceTextIndex {
    fn capabilities(&self) -> TextCapabilities {
        TextCapabilities::none().with_deletes_matching(self.deletes_matching)
    }

    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        check_documents(documents)?;
        let mut all = self.lock();
        for d in documents {
            all.insert((scope.key(), d.id), (scope.clone(), d.clone()));
        }
        Ok(())
    }

    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        check_query(query)?;
        let words = self.words(&query.text);
        let all = self.lock();
        let key = scope.key();
        let every_scope = self.flaw == Some(Flaw::SearchesEveryScope);
        let in_scope: Vec<(&TextDocument, BTreeSet<String>)> = all
            .iter()
            .filter(|((k, _), _)| every_scope || *k == key)
            .map(|(_, (_, d))| (d, self.words(&d.text)))
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
        let all = self.lock();
        Ok(ids
            .iter()
            .filter_map(|id| all.get(&(scope.key(), *id)).map(|(_, d)| d.clone()))
            .collect())
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let mut all = self.lock();
        Ok(ids
            .iter()
            .filter(|id| all.remove(&(scope.key(), **id)).is_some())
            .count() as u64)
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        Ok(self.lock().keys().filter(|(k, _)| *k == key).count() as u64)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        let mut all = self.lock();
        let before = all.len();
        all.retain(|(k, _), _| *k != key);
        Ok((before - all.len()) as u64)
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        if !self.deletes_matching {
            return Err(Self::unsupported("delete_matching"));
        }
        let mut all = self.lock();
        let before = all.len();
        all.retain(|_, (scope, _)| !filter.matches(scope));
        Ok((before - all.len()) as u64)
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        if !self.deletes_matching {
            return Err(Self::unsupported("count_matching"));
        }
        Ok(self
            .lock()
            .values()
            .filter(|(scope, _)| filter.matches(scope))
            .count() as u64)
    }
}
