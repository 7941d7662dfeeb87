//! [`TantivyTextIndex`]: a [`TextIndex`] on tantivy, in memory or in a directory. The state its
//! handles share, and the queries run on it, are [`inner`].

mod inner;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memory_core::ScopeFilter;
use memory_core::lexical::{check_documents, check_query};
use memory_core::{
    Error, ErrorKind, Result, Scope, ScoredDocument, TextCapabilities, TextDocument, TextIndex,
    TextQuery,
};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::{Index, ReloadPolicy, TantivyDocument, Term};
use uuid::Uuid;

use crate::analyzer::Analyzer;
use crate::commit::CommitPolicy;
use crate::error::{backend, join};
use crate::schema::{Fields, document_key};

use self::inner::{Inner, Pending};

/// The indexing memory budget of the one writer thread (tantivy's minimum is 15 MB).
const WRITER_HEAP_BYTES: usize = 32_000_000;

/// A BM25 [`TextIndex`] on [tantivy](https://docs.rs/tantivy): in memory
/// ([`in_memory`](Self::in_memory)) or persisted in a directory ([`open`](Self::open)).
///
/// One tantivy index holds every scope's documents; each document carries its scope's key
/// (every search, read and write is restricted to it by a term on that key, so no query text
/// or filter can reach another scope) and its tenant, user, agent and session (so
/// [`delete_matching`](TextIndex::delete_matching) deletes by a query on them). Texts are cut
/// into words by the [`Analyzer`] the index was created with, and ranked by BM25 (tantivy's
/// `k1 = 1.2`, `b = 0.75`; document frequencies are counted over the whole index, every
/// scope, so scores depend on other scopes' documents, but never the set of results).
///
/// - A query's words ([`query_words`](memory_core::lexical::query_words), then the analyzer)
///   become an OR of term queries: no query syntax exists, so no query text is an error.
/// - Payload filters are evaluated over the stored payloads of the best candidates
///   ([`PayloadFilter::matches`](memory_core::PayloadFilter::matches), exactly as every other
///   backend), fetching more candidates until the `top_k` matching documents are certain:
///   every filter is supported, a selective filter costs more candidates.
/// - Ties by ascending id: candidates are sorted by (score descending, id ascending), and more
///   are fetched while the lowest fetched score ties the `top_k`-th.
/// - Writes go through one tantivy `IndexWriter` behind a mutex (held only inside a blocking
///   task, never across an `await`). When they are committed is the [`CommitPolicy`] (see
///   [`with_commit_policy`](Self::with_commit_policy)): by default in memory
///   ([`BeforeRead`](CommitPolicy::BeforeRead)) a write only adds to the writer and marks the
///   index dirty, and the first read after it commits and reloads the reader once, for every
///   write since the last commit; with [`EveryWrite`](CommitPolicy::EveryWrite) (the default
///   in a directory) each upsert,
///   delete or clear is one commit (a batch of documents is one commit). Either way a read
///   that starts after a write returned sees it, and counts are exact. A commit costs a new
///   segment (tantivy merges them in the background) and, in a directory, an fsync.
/// - A delete, clear or `delete_matching` returns how many documents existed, so it commits
///   pending writes first (it counts on a fresh reader); its own deletion is then pending like
///   an upsert. A delete and a later upsert of the same id in one uncommitted run leave the new
///   document (tantivy orders them by their operation stamps).
/// - Durability in a directory: by default (`EveryWrite`) a write that returned is on disk.
///   Opted into `BeforeRead`, what was written since the last commit is
///   committed by the next read, by [`commit`](Self::commit), past
///   [`MAX_PENDING_WRITES`](crate::MAX_PENDING_WRITES) documents, and when the last handle of the index is dropped (the drop blocks on the
///   commit); a crash or a kill loses it. Call [`commit`](Self::commit) where a write must
///   survive a crash (at the end of a turn, before a shutdown that may not drop the index), or
///   use `EveryWrite`. The index is derived from the messages it was given, but nothing
///   re-indexes a lost document: it would be silently missing from lexical recall.
/// - A failed commit rolls the writer back to the last commit: the writes since then are
///   discarded, and the call that committed (a read, a write or [`commit`](Self::commit))
///   returns the error, saying so.
/// - Every tantivy call runs on tokio's blocking pool (`spawn_blocking`).
/// - A directory holds one index, opened by one `TantivyTextIndex` at a time (tantivy locks
///   it); it remembers its analyzer, and opening it with another is refused.
#[derive(Clone)]
pub struct TantivyTextIndex {
    inner: Arc<Inner>,
    policy: CommitPolicy,
}

impl fmt::Debug for TantivyTextIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TantivyTextIndex")
            .field("path", &self.inner.path)
            .field("analyzer", &self.inner.analyzer)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl TantivyTextIndex {
    /// A new empty index in memory, with the [English](Analyzer::english) analyzer.
    ///
    /// # Errors
    /// [`ErrorKind::Backend`] when tantivy cannot start its writer.
    pub fn in_memory() -> Result<Self> {
        Self::in_memory_with(Analyzer::default())
    }

    /// A new empty index in memory, with `analyzer`.
    ///
    /// # Errors
    /// As [`in_memory`](Self::in_memory).
    pub fn in_memory_with(analyzer: Analyzer) -> Result<Self> {
        let (schema, fields) = Fields::schema(&analyzer.name());
        let index = Index::create_in_ram(schema);
        Self::start(index, fields, analyzer, None)
    }

    /// Opens the index in the directory `dir`, creating the directory and the index when
    /// needed, with the [English](Analyzer::english) analyzer. Blocks on file I/O; see
    /// [`open_async`](Self::open_async).
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, Analyzer::default())
    }

    /// Opens (or creates) the index in `dir` with `analyzer`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the directory holds an index created with another
    /// analyzer (or is not a text index of this crate); [`ErrorKind::Backend`] when the
    /// directory cannot be created or read, or another `TantivyTextIndex` has it open.
    pub fn open_with(dir: impl AsRef<Path>, analyzer: Analyzer) -> Result<Self> {
        let path = dir.as_ref().to_path_buf();
        let shown = path.display().to_string();
        std::fs::create_dir_all(&path).map_err(|e| {
            backend(
                ErrorKind::Backend,
                format!("creating the directory {shown}"),
                e,
            )
        })?;
        let directory = MmapDirectory::open(&path).map_err(|e| {
            backend(
                ErrorKind::Backend,
                format!("opening the directory {shown}"),
                e,
            )
        })?;
        let (schema, fields) = Fields::schema(&analyzer.name());
        let index = Index::open_or_create(directory, schema).map_err(|e| match e {
            tantivy::TantivyError::SchemaError(_) => Error::invalid_input(format!(
                "the directory {shown} holds a text index of another schema or analyzer \
                 than {} (open it with the analyzer it was created with)",
                analyzer.name()
            ))
            .with_backend("tantivy")
            .with_source(e),
            other => backend(
                ErrorKind::Backend,
                format!("opening the index in {shown}"),
                other,
            ),
        })?;
        Self::start(index, fields, analyzer, Some(path))
    }

    /// As [`open`](Self::open), on tokio's blocking pool.
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub async fn open_async(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_async(dir, Analyzer::default()).await
    }

    /// As [`open_with`](Self::open_with), on tokio's blocking pool.
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub async fn open_with_async(dir: impl AsRef<Path>, analyzer: Analyzer) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || Self::open_with(dir, analyzer))
            .await
            .map_err(|e| join("opening the text index", e))?
    }

    /// The analyzer the index cuts texts and queries with.
    pub fn analyzer(&self) -> Analyzer {
        self.inner.analyzer
    }

    /// The directory, or `None` for an index in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// This handle with `policy`: when its writes are committed (the default is
    /// [`CommitPolicy::default_for`]: `EveryWrite` in a directory, `BeforeRead` in memory). The policy belongs to the handle; its clones keep the
    /// one it had when they were made, and every handle's reads see every handle's writes.
    #[must_use]
    pub fn with_commit_policy(mut self, policy: CommitPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// When this handle's writes are committed.
    pub fn commit_policy(&self) -> CommitPolicy {
        self.policy
    }

    /// Commits every write taken so far (by any handle) and reloads the reader: once it
    /// returned, they are on disk in a directory and survive a crash. Nothing to commit is a
    /// no-op.
    ///
    /// # Errors
    /// [`ErrorKind::Backend`] when the commit fails; the writes since the last commit are then
    /// discarded (see the type's documentation).
    pub async fn commit(&self) -> Result<()> {
        self.blocking("commit", |inner| inner.commit_pending("commit"))
            .await
    }

    fn start(
        index: Index,
        fields: Fields,
        analyzer: Analyzer,
        path: Option<PathBuf>,
    ) -> Result<Self> {
        let text_analyzer = analyzer.build();
        let policy = CommitPolicy::default_for(path.is_some());
        index
            .tokenizers()
            .register(&analyzer.name(), text_analyzer.clone());
        let writer = index
            .writer_with_num_threads(1, WRITER_HEAP_BYTES)
            .map_err(|e| match e {
                tantivy::TantivyError::LockFailure(..) => backend(
                    ErrorKind::Backend,
                    "starting the writer: another TantivyTextIndex has this directory open",
                    e,
                ),
                other => backend(ErrorKind::Backend, "starting the writer", other),
            })?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| backend(ErrorKind::Backend, "opening the reader", e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                reader,
                writer: Mutex::new(Pending {
                    writer,
                    operations: 0,
                }),
                dirty: AtomicBool::new(false),
                fields,
                analyzer,
                path,
                text_analyzer,
            }),
            policy,
        })
    }

    /// Runs `f` on the blocking pool.
    async fn blocking<T, F>(&self, action: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| join(action, e))?
    }
}

/// Refuses a filter that names a source: the index keeps no source field, so it could not
/// select only that source's documents (and a forget never deletes more than asked).
fn refuse_source(filter: &ScopeFilter, action: &str) -> Result<()> {
    match &filter.source {
        Some(source) => Err(Error::unsupported(format!(
            "the tantivy text index does not keep the source of its documents, so it cannot \
             {action} only those of source {source}; leave the source out of the filter"
        ))),
        None => Ok(()),
    }
}

#[async_trait]
impl TextIndex for TantivyTextIndex {
    fn capabilities(&self) -> TextCapabilities {
        TextCapabilities::none().with_deletes_matching(true)
    }

    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        check_documents(documents)?;
        if documents.is_empty() {
            return Ok(());
        }
        let fields = self.inner.fields;
        let batch: Vec<(Term, TantivyDocument)> = documents
            .iter()
            .map(|d| {
                (
                    Term::from_field_text(fields.key, &document_key(scope, d.id)),
                    fields.document(scope, d),
                )
            })
            .collect();
        let policy = self.policy;
        self.blocking("upsert", move |inner| {
            let mut pending = inner.writer()?;
            let operations = batch.len();
            for (key, doc) in batch {
                // The delete's stamp precedes the add's: it removes the older versions only.
                pending.writer.delete_term(key);
                if let Err(e) = pending.writer.add_document(doc) {
                    // The documents of this batch added so far stay pending with the rest; the
                    // caller gets the error and may retry the batch (an upsert is idempotent).
                    inner.dirty.store(true, Ordering::Release);
                    return Err(backend(ErrorKind::Backend, "upsert", e));
                }
            }
            inner.wrote(&mut pending, operations, policy, "upsert")
        })
        .await
    }

    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        check_query(query)?;
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let terms = self.inner.query_terms(&query.text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let (scope, top_k, filter) = (scope.clone(), query.top_k, query.filter.clone());
        self.blocking("search", move |inner| {
            inner.search(&scope, &terms, top_k, filter.as_ref())
        })
        .await
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        let wanted: BTreeSet<Uuid> = ids.iter().copied().collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let (scope, ids) = (scope.clone(), ids.to_vec());
        self.blocking("get", move |inner| {
            let searcher = inner.fresh_searcher("get")?;
            let hits = searcher
                .search(
                    &inner.keys_query(&scope, &wanted),
                    &TopDocs::with_limit(wanted.len()).order_by_score(),
                )
                .map_err(|e| backend(ErrorKind::Backend, "get", e))?;
            let mut found = HashMap::new();
            for (_, address) in hits {
                let doc = inner.stored(&searcher, address)?;
                found.insert(doc.id, doc);
            }
            // In the order asked, each once.
            Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
        })
        .await
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let wanted: BTreeSet<Uuid> = ids.iter().copied().collect();
        if wanted.is_empty() {
            return Ok(0);
        }
        let (scope, policy) = (scope.clone(), self.policy);
        self.blocking("delete", move |inner| {
            let mut pending = inner.writer()?;
            // The count must see the pending writes: commit them first (under the lock, so
            // no write slips between the count and the delete).
            if inner.dirty.load(Ordering::Acquire) {
                inner.commit(&mut pending, "delete")?;
            }
            let existing = inner.count(
                &inner.reader.searcher(),
                &inner.keys_query(&scope, &wanted),
                "delete",
            )?;
            if existing > 0 {
                for id in &wanted {
                    pending.writer.delete_term(Term::from_field_text(
                        inner.fields.key,
                        &document_key(&scope, *id),
                    ));
                }
                inner.wrote(&mut pending, wanted.len(), policy, "delete")?;
            }
            Ok(existing)
        })
        .await
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        let scope = scope.clone();
        self.blocking("count", move |inner| {
            inner.count(
                &inner.fresh_searcher("count")?,
                &inner.scope_query(&scope),
                "count",
            )
        })
        .await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let (scope, policy) = (scope.clone(), self.policy);
        self.blocking("clear", move |inner| {
            let mut pending = inner.writer()?;
            if inner.dirty.load(Ordering::Acquire) {
                inner.commit(&mut pending, "clear")?;
            }
            let existing = inner.count(
                &inner.reader.searcher(),
                &inner.scope_query(&scope),
                "clear",
            )?;
            if existing > 0 {
                pending
                    .writer
                    .delete_term(Term::from_field_text(inner.fields.scope, &scope.key()));
                inner.wrote(&mut pending, 1, policy, "clear")?;
            }
            Ok(existing)
        })
        .await
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        refuse_source(filter, "delete")?;
        let (filter, policy) = (filter.clone(), self.policy);
        self.blocking("delete_matching", move |inner| {
            let mut pending = inner.writer()?;
            if inner.dirty.load(Ordering::Acquire) {
                inner.commit(&mut pending, "delete_matching")?;
            }
            let query = inner.forget_query(&filter);
            let existing = inner.count(&inner.reader.searcher(), &query, "delete_matching")?;
            if existing > 0 {
                pending
                    .writer
                    .delete_query(Box::new(query))
                    .map_err(|e| backend(ErrorKind::Backend, "delete_matching", e))?;
                inner.wrote(&mut pending, 1, policy, "delete_matching")?;
            }
            Ok(existing)
        })
        .await
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        refuse_source(filter, "count")?;
        let filter = filter.clone();
        self.blocking("count_matching", move |inner| {
            inner.count(
                &inner.fresh_searcher("count_matching")?,
                &inner.forget_query(&filter),
                "count_matching",
            )
        })
        .await
    }
}
