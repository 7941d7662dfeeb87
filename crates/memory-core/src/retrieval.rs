//! [`Retriever`]: what searches long-term memory, whatever ranks it — dense ([`DenseRetriever`]:
//! an [`Embedder`](crate::Embedder) and a [`VectorStore`](crate::VectorStore)), lexical
//! ([`LexicalRetriever`]: a [`TextIndex`](crate::TextIndex)) or both fused
//! ([`HybridRetriever`], by [`Fusion`]).
//!
//! A retriever indexes [`MemoryItem`]s (an id, a text and a payload) under a [`Scope`] and
//! answers a [`RetrievalQuery`] with [`Retrieved`] items, best first. The vector memory block
//! ([`VectorMemoryBlock`](crate::memory::blocks::VectorMemoryBlock)) stores and recalls its
//! batches through one, and so can anything else that searches memory.

mod dense;
mod fusion;
mod hybrid;
mod lexical;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::lexical::{ScoredDocument, TextQuery};
use crate::scope::{Scope, ScopeFilter, ScopedHit};
use crate::vector::ScoredPoint;

pub use dense::DenseRetriever;
pub use fusion::{DEFAULT_DENSE_WEIGHT, DEFAULT_LEXICAL_WEIGHT, DEFAULT_RRF_K, Fusion};
pub use hybrid::{DEFAULT_CANDIDATES, HybridRetriever};
pub use lexical::LexicalRetriever;

/// The payload key under which every retriever keeps an item's text.
pub const TEXT_KEY: &str = "text";

/// One item of memory: an id, the text that is searched, and a payload returned with it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryItem {
    /// The item's id, unique within its scope.
    pub id: Uuid,
    /// The text that is indexed (embedded, or split into words).
    pub text: String,
    /// Free-form payload, returned with results and matched by filters. Its `"text"` key is
    /// set to [`text`](Self::text) when the item is indexed.
    pub payload: Map<String, Value>,
    /// Text indexed before [`text`](Self::text) but not part of the item: it helps find the
    /// item and is never returned (the payload's `"text"` is the item's text alone). The
    /// vector memory block puts the message before a flushed batch here, so a batch that
    /// answers a question is found by the question's words (docs/quality.md has the figures).
    pub context: Option<String>,
}

impl MemoryItem {
    /// An item with an empty payload.
    pub fn new(id: Uuid, text: impl Into<String>) -> Self {
        Self {
            id,
            text: text.into(),
            payload: Map::new(),
            context: None,
        }
    }

    /// Sets the context indexed before the text (an empty context is none).
    #[must_use]
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        let context = context.into();
        self.context = (!context.is_empty()).then_some(context);
        self
    }

    /// What a retriever indexes: the [context](Self::context), a newline, then the text; the
    /// text alone when there is no context.
    pub fn indexed_text(&self) -> std::borrow::Cow<'_, str> {
        match &self.context {
            Some(context) => std::borrow::Cow::Owned(format!("{context}\n{}", self.text)),
            None => std::borrow::Cow::Borrowed(&self.text),
        }
    }

    /// Sets the payload.
    #[must_use]
    pub fn with_payload(mut self, payload: Map<String, Value>) -> Self {
        self.payload = payload;
        self
    }

    /// The payload as it is stored: the item's payload with `"text"` set to its text.
    pub(crate) fn stored_payload(&self) -> Map<String, Value> {
        let mut payload = self.payload.clone();
        payload.insert(TEXT_KEY.to_owned(), Value::String(self.text.clone()));
        payload
    }
}

/// A search of memory: its text (what is looked for, in words), how many results at most,
/// and the payload filter items must match. It is a [`TextQuery`] (the lexical index's query
/// has exactly these parts): `RetrievalQuery::new(text, top_k)` and
/// [`with_filter`](TextQuery::with_filter) build one.
pub type RetrievalQuery = TextQuery;

/// A retrieved item.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    /// The item's id.
    pub id: Uuid,
    /// The retriever's score: higher is better. Cosine similarity for a [`DenseRetriever`],
    /// the engine's relevance for a [`LexicalRetriever`], the fused score for a
    /// [`HybridRetriever`]; scores rank one search's results and are not comparable across
    /// retrievers.
    pub score: f32,
    /// The item's payload, its text under `"text"`.
    pub payload: Map<String, Value>,
}

impl Retrieved {
    /// The item's text (the payload's `"text"`), if it has one.
    pub fn text(&self) -> Option<&str> {
        self.payload.get(TEXT_KEY).and_then(Value::as_str)
    }
}

/// A text index's result is the retrieved item of a lexical search: the same id, payload and
/// score (the engine's relevance).
impl From<ScoredDocument> for Retrieved {
    fn from(document: ScoredDocument) -> Self {
        Self {
            id: document.id,
            score: document.score,
            payload: document.payload,
        }
    }
}

/// A vector store's result is the retrieved item of a dense search: the same id, payload and
/// score (the cosine similarity).
impl From<ScoredPoint> for Retrieved {
    fn from(point: ScoredPoint) -> Self {
        Self {
            id: point.id,
            score: point.score,
            payload: point.payload,
        }
    }
}

/// Indexes items of memory under scopes and finds the best for a query.
///
/// # Behavior
/// - Every call names a scope; no call on one scope reads or changes another's items, whatever
///   the query or filter. Ids are unique within a scope. A scope never indexed is empty.
/// - [`index`](Retriever::index) inserts or replaces items by id within the scope (a replaced
///   item is found by its new text only); indexing the same items again changes nothing; an
///   empty batch is a no-op. What is indexed is the item's
///   [`indexed_text`](MemoryItem::indexed_text) (its context, then its text); the stored
///   payload is the item's with `"text"` set to its text (never the context).
/// - [`retrieve`](Retriever::retrieve) returns at most `top_k` items of the scope (none for a
///   `top_k` of 0), best first, no id twice, each with its stored payload; only items whose
///   payload matches the query's filter. What "best" means is the retriever's: the nearest
///   embeddings, the most matching rare words, or both fused.
/// - [`delete`](Retriever::delete) removes items by id and returns how many existed; deleted
///   items are never retrieved. [`clear`](Retriever::clear) removes every item of the scope
///   and returns how many there were.
/// - Writes are visible to every retrieval that starts after the write returned. A retriever
///   over several indexes writes each in turn: a failed write may leave some indexes written,
///   and retrying it converges (writes are idempotent by id).
#[async_trait]
pub trait Retriever: Send + Sync + fmt::Debug + 'static {
    /// Inserts or replaces items.
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()>;

    /// The best items for the query.
    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>>;

    /// Removes items by id; returns how many existed.
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64>;

    /// Removes every item of the scope; returns how many.
    async fn clear(&self, scope: &Scope) -> Result<u64>;

    /// The best items across the scopes `filter` selects (a user's memory over all their
    /// sessions, say), each with the scope it lives in.
    ///
    /// # Behavior
    /// As [`retrieve`](Retriever::retrieve) over every item of every scope the filter
    /// [matches](crate::ScopeFilter::matches) and of no other scope, whatever the query: at
    /// most `top_k` items, best first, each with its scope. The default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported): a retriever supports it when its indexes
    /// can search across scopes (their `searches_matching` capability), and says so in its
    /// docs.
    async fn retrieve_matching(
        &self,
        filter: &ScopeFilter,
        query: &RetrievalQuery,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        let _ = (filter, query);
        Err(Error::unsupported(format!(
            "{} does not search across scopes (retrieve_matching)",
            std::any::type_name::<Self>()
        )))
    }
}

/// The hits of a search across scopes as retrieved items; nothing, without running `search`
/// (an async block is run only when awaited), when the query asks for none (`top_k` 0).
pub(crate) async fn retrieved_across<H>(
    query: &RetrievalQuery,
    search: impl Future<Output = Result<Vec<ScopedHit<H>>>>,
) -> Result<Vec<ScopedHit<Retrieved>>>
where
    Retrieved: From<H>,
{
    if query.top_k == 0 {
        return Ok(Vec::new());
    }
    Ok(search
        .await?
        .into_iter()
        .map(|found| found.map(Retrieved::from))
        .collect())
}

/// Forwards [`Retriever`] through smart pointers, so `Arc<dyn Retriever>` and
/// `Box<dyn Retriever>` are retrievers too. `clippy::missing_trait_methods` is denied: a
/// method added to the trait must be forwarded here.
macro_rules! forward_retriever {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: Retriever + ?Sized> Retriever for $pointer<T> {
            async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
                (**self).index(scope, items).await
            }
            async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
                (**self).retrieve(scope, query).await
            }
            async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
                (**self).delete(scope, ids).await
            }
            async fn clear(&self, scope: &Scope) -> Result<u64> {
                (**self).clear(scope).await
            }
            async fn retrieve_matching(
                &self,
                filter: &ScopeFilter,
                query: &RetrievalQuery,
            ) -> Result<Vec<ScopedHit<Retrieved>>> {
                (**self).retrieve_matching(filter, query).await
            }
        }
    )*};
}

forward_retriever!(Arc, Box);
