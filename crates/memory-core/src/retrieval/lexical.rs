//! [`LexicalRetriever`]: items found by their words, through a [`TextIndex`].

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryItem, RetrievalQuery, Retrieved, Retriever};
use crate::error::Result;
use crate::lexical::{TextDocument, TextIndex, TextQuery};
use crate::scope::Scope;

/// Keeps each item as a document of a [`TextIndex`] and answers a query with the documents
/// whose words match it best (BM25 or the engine's full-text ranking). An item sharing no word
/// with the query is not retrieved, so a search may return fewer than `top_k` items.
#[derive(Debug, Clone)]
pub struct LexicalRetriever {
    index: Arc<dyn TextIndex>,
}

impl LexicalRetriever {
    /// A retriever over `index`.
    pub fn new(index: Arc<dyn TextIndex>) -> Self {
        Self { index }
    }

    /// The text index it writes to.
    pub fn text_index(&self) -> &Arc<dyn TextIndex> {
        &self.index
    }
}

#[async_trait]
impl Retriever for LexicalRetriever {
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let documents: Vec<TextDocument> = items
            .iter()
            .map(|item| TextDocument {
                id: item.id,
                text: item.text.clone(),
                payload: item.stored_payload(),
            })
            .collect();
        self.index.upsert(scope, &documents).await
    }

    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let mut search = TextQuery::new(query.text.clone(), query.top_k);
        search.filter.clone_from(&query.filter);
        let documents = self.index.search(scope, &search).await?;
        Ok(documents
            .into_iter()
            .map(|d| Retrieved {
                id: d.id,
                score: d.score,
                payload: d.payload,
            })
            .collect())
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.index.delete(scope, ids).await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.index.clear(scope).await
    }
}
