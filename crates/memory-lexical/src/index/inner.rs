//! The state every handle of one index shares ([`Inner`]): the reader, the writer behind its
//! mutex with what it has not committed, and the queries and reads run on them (always on
//! tokio's blocking pool).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use memory_core::ScopeFilter;
use memory_core::lexical::query_words;
use memory_core::{Error, ErrorKind, PayloadFilter, Result, Scope, ScoredDocument, TextDocument};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, IndexReader, IndexWriter, Searcher, TantivyDocument, Term};
use uuid::Uuid;

use crate::analyzer::Analyzer;
use crate::commit::{CommitPolicy, MAX_PENDING_WRITES};
use crate::error::backend;
use crate::schema::{Fields, document_key};

/// The fewest candidates a search fetches at first; it fetches more while the `top_k`-th
/// result may still tie with, or lose to, a document it has not fetched (filters and ties).
const MIN_CANDIDATES: usize = 32;

/// The writer and what it holds that no commit has made searchable yet.
pub(super) struct Pending {
    pub(super) writer: IndexWriter,
    /// Documents added or deleted (by term or query: one each) since the last commit.
    pub(super) operations: usize,
}

/// What every handle of one index shares: the reader, the writer, and how texts are
/// analyzed.
pub(super) struct Inner {
    pub(super) reader: IndexReader,
    pub(super) writer: Mutex<Pending>,
    /// Whether the writer holds operations the reader does not see yet: set (under the writer
    /// lock) by every write before it returns, cleared (under the lock) after a commit and a
    /// reload. A read that finds it set commits first.
    pub(super) dirty: AtomicBool,
    pub(super) fields: Fields,
    pub(super) analyzer: Analyzer,
    /// The directory, or `None` in memory.
    pub(super) path: Option<PathBuf>,
    /// The analyzer, for query words (a clone per search: analyzers hold per-call state).
    pub(super) text_analyzer: tantivy::tokenizer::TextAnalyzer,
}

impl Drop for Inner {
    /// The last handle is gone: a directory's pending writes are committed (best effort:
    /// a failure here has no caller to tell; the writes are then lost as in a crash).
    fn drop(&mut self) {
        if self.path.is_none() || !*self.dirty.get_mut() {
            return;
        }
        let pending = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.writer.commit().is_err() {
            let _ = pending.writer.rollback();
        }
    }
}

impl Inner {
    pub(super) fn writer(&self) -> Result<MutexGuard<'_, Pending>> {
        self.writer.lock().map_err(|_| {
            Error::new(
                ErrorKind::Backend,
                "tantivy: the index writer was poisoned by a panic in another thread",
            )
            .with_backend("tantivy")
        })
    }

    /// Commits the writer's pending operations and reloads the reader, so every read that
    /// starts afterwards sees them; on a failed commit, rolls them back (they are lost, and
    /// the error says so). Called with the writer lock held.
    pub(super) fn commit(&self, pending: &mut Pending, action: &'static str) -> Result<()> {
        if let Err(e) = pending.writer.commit() {
            let lost = pending.operations;
            let _ = pending.writer.rollback();
            pending.operations = 0;
            self.dirty.store(false, Ordering::Release);
            return Err(Error::new(
                ErrorKind::Backend,
                format!(
                    "tantivy: {action}: the commit failed, and the {lost} uncommitted \
                     operations (documents added or deleted) since the last commit were \
                     discarded"
                ),
            )
            .with_backend("tantivy")
            .with_operation(action)
            .with_source(e));
        }
        pending.operations = 0;
        // Committed: a failed reload leaves the index dirty, so the next read reloads again.
        self.reader
            .reload()
            .map_err(|e| backend(ErrorKind::Backend, action, e))?;
        self.dirty.store(false, Ordering::Release);
        Ok(())
    }

    /// Commits what is pending, if anything (the writer lock is taken only then): what a read
    /// does first, so it sees every write that returned before it started.
    pub(super) fn commit_pending(&self, action: &'static str) -> Result<()> {
        if !self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut pending = self.writer()?;
        // Another read may have committed while this one waited for the lock.
        if self.dirty.load(Ordering::Acquire) {
            self.commit(&mut pending, action)?;
        }
        Ok(())
    }

    /// Marks `operations` more as pending, then commits when `policy` or the size cap says
    /// so. Called with the writer lock held, after the operations went into the writer.
    pub(super) fn wrote(
        &self,
        pending: &mut Pending,
        operations: usize,
        policy: CommitPolicy,
        action: &'static str,
    ) -> Result<()> {
        pending.operations = pending.operations.saturating_add(operations);
        self.dirty.store(true, Ordering::Release);
        if policy == CommitPolicy::EveryWrite || pending.operations > MAX_PENDING_WRITES {
            self.commit(pending, action)?;
        }
        Ok(())
    }

    /// A searcher that sees every write that returned before this call.
    pub(super) fn fresh_searcher(&self, action: &'static str) -> Result<Searcher> {
        self.commit_pending(action)?;
        Ok(self.reader.searcher())
    }

    pub(super) fn scope_query(&self, scope: &Scope) -> TermQuery {
        TermQuery::new(
            Term::from_field_text(self.fields.scope, &scope.key()),
            IndexRecordOption::Basic,
        )
    }

    /// The documents of `ids` in `scope`.
    pub(super) fn keys_query(&self, scope: &Scope, ids: &BTreeSet<Uuid>) -> BooleanQuery {
        BooleanQuery::new(
            ids.iter()
                .map(|id| -> (Occur, Box<dyn Query>) {
                    (
                        Occur::Should,
                        Box::new(TermQuery::new(
                            Term::from_field_text(self.fields.key, &document_key(scope, *id)),
                            IndexRecordOption::Basic,
                        )),
                    )
                })
                .collect(),
        )
    }

    /// The documents of every scope `filter` selects.
    pub(super) fn forget_query(&self, filter: &ScopeFilter) -> BooleanQuery {
        let f = &self.fields;
        let mut terms = vec![Term::from_field_text(f.tenant, filter.tenant.as_str())];
        if let Some(user) = filter.user.as_ref() {
            terms.push(Term::from_field_text(f.user, user.as_str()));
        }
        if let Some(agent) = filter.agent.as_ref() {
            terms.push(Term::from_field_text(f.agent, agent.as_str()));
        }
        if let Some(session) = filter.session.as_ref() {
            terms.push(Term::from_field_text(f.session, session.as_str()));
        }
        BooleanQuery::new(
            terms
                .into_iter()
                .map(|t| -> (Occur, Box<dyn Query>) {
                    (
                        Occur::Must,
                        Box::new(TermQuery::new(t, IndexRecordOption::Basic)),
                    )
                })
                .collect(),
        )
    }

    pub(super) fn count(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        action: &'static str,
    ) -> Result<u64> {
        searcher
            .search(query, &Count)
            .map(|n| n as u64)
            .map_err(|e| backend(ErrorKind::Backend, action, e))
    }

    /// The analyzed words of a query, each once.
    pub(super) fn query_terms(&self, text: &str) -> BTreeSet<String> {
        let words = query_words(text).join(" ");
        let mut analyzer = self.text_analyzer.clone();
        let mut stream = analyzer.token_stream(&words);
        let mut terms = BTreeSet::new();
        while stream.advance() {
            terms.insert(stream.token().text.clone());
        }
        terms
    }

    /// The id, text and payload of a stored document.
    pub(super) fn stored(&self, searcher: &Searcher, address: DocAddress) -> Result<TextDocument> {
        let doc: TantivyDocument = searcher
            .doc(address)
            .map_err(|e| backend(ErrorKind::Backend, "reading a stored document", e))?;
        let field = |field| {
            doc.get_first(field)
                .and_then(|v| v.as_str().map(str::to_owned))
        };
        let corrupt = |what: &str| {
            Error::new(
                ErrorKind::Serialization,
                format!("tantivy: a stored document has no valid {what}"),
            )
            .with_backend("tantivy")
        };
        let id = field(self.fields.id)
            .and_then(|id| Uuid::parse_str(&id).ok())
            .ok_or_else(|| corrupt("id"))?;
        let text = field(self.fields.text).unwrap_or_default();
        let payload = match field(self.fields.payload) {
            Some(json) => match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => return Err(corrupt("payload")),
            },
            None => return Err(corrupt("payload")),
        };
        Ok(TextDocument { id, text, payload })
    }

    /// The best `top_k` documents of `scope` for `terms` whose payload matches `filter`, by
    /// (score descending, id ascending).
    pub(super) fn search(
        &self,
        scope: &Scope,
        terms: &BTreeSet<String>,
        top_k: usize,
        filter: Option<&PayloadFilter>,
    ) -> Result<Vec<ScoredDocument>> {
        let words = BooleanQuery::new(
            terms
                .iter()
                .map(|t| -> (Occur, Box<dyn Query>) {
                    (
                        Occur::Should,
                        Box::new(TermQuery::new(
                            Term::from_field_text(self.fields.text, t),
                            IndexRecordOption::WithFreqs,
                        )),
                    )
                })
                .collect(),
        );
        let query = BooleanQuery::new(vec![
            (Occur::Must, Box::new(words)),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(self.scope_query(scope)), 0.0)),
            ),
        ]);
        let searcher = self.fresh_searcher("search")?;
        let mut limit = top_k.saturating_add(1).max(MIN_CANDIDATES);
        let mut loaded: HashMap<DocAddress, Option<ScoredDocument>> = HashMap::new();
        loop {
            let hits = searcher
                .search(&query, &TopDocs::with_limit(limit).order_by_score())
                .map_err(|e| backend(ErrorKind::Backend, "search", e))?;
            for (score, address) in &hits {
                if loaded.contains_key(address) {
                    continue;
                }
                let doc = self.stored(&searcher, *address)?;
                let kept = filter.is_none_or(|f| f.matches(&doc.payload));
                loaded.insert(
                    *address,
                    kept.then_some(ScoredDocument {
                        id: doc.id,
                        score: *score,
                        payload: doc.payload,
                    }),
                );
            }
            let exhausted = hits.len() < limit;
            let lowest = hits.last().map(|(score, _)| *score);
            let mut kept: Vec<&ScoredDocument> = loaded.values().flatten().collect();
            kept.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
            // Every document not fetched scores at most `lowest`: the top_k are certain when
            // the top_k-th kept scores strictly more (or nothing is left to fetch).
            let certain = exhausted
                || match (kept.get(top_k.saturating_sub(1)), lowest) {
                    (Some(last), Some(lowest)) => kept.len() >= top_k && last.score > lowest,
                    _ => false,
                };
            if certain {
                return Ok(kept.into_iter().take(top_k).cloned().collect());
            }
            limit = limit.saturating_mul(4);
        }
    }
}
