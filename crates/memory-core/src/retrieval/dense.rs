//! [`DenseRetriever`]: items embedded and found by cosine similarity.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryItem, RetrievalQuery, Retrieved, Retriever, retrieved_across};
use crate::error::{Error, ErrorKind, Result};
use crate::model::Embedder;
use crate::scope::{Scope, ScopeFilter, ScopedHit};
use crate::vector::{VectorPoint, VectorQuery, VectorStore};

/// Embeds each item's [indexed text](MemoryItem::indexed_text) (its context and text) with an
/// [`Embedder`] and keeps it as a point of a [`VectorStore`]; a query is embedded the same way
/// and answered with the nearest points (score: cosine similarity).
#[derive(Debug, Clone)]
pub struct DenseRetriever {
    embedder: Arc<dyn Embedder>,
    store: Arc<dyn VectorStore>,
}

impl DenseRetriever {
    /// A retriever embedding with `embedder` into `store`.
    pub fn new(embedder: Arc<dyn Embedder>, store: Arc<dyn VectorStore>) -> Self {
        Self { embedder, store }
    }

    /// The vector store it writes to.
    pub fn store(&self) -> &Arc<dyn VectorStore> {
        &self.store
    }

    /// The vector search for `query`: its text embedded, its `top_k` and filter.
    async fn vector_query(&self, query: &RetrievalQuery) -> Result<VectorQuery> {
        let vector = self.embed_one(query.text.clone()).await?;
        let mut search = VectorQuery::new(vector, query.top_k);
        search.filter.clone_from(&query.filter);
        Ok(search)
    }

    async fn embed_one(&self, text: String) -> Result<Vec<f32>> {
        self.embedder
            .embed(&[text])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorKind::Backend, "the embedder returned no vector"))
    }
}

#[async_trait]
impl Retriever for DenseRetriever {
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = items
            .iter()
            .map(|i| i.indexed_text().into_owned())
            .collect();
        let vectors = self.embedder.embed(&texts).await?;
        if vectors.len() != items.len() {
            return Err(Error::new(
                ErrorKind::Backend,
                format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    items.len()
                ),
            ));
        }
        let points: Vec<VectorPoint> = items
            .iter()
            .zip(vectors)
            .map(|(item, vector)| VectorPoint {
                id: item.id,
                vector,
                payload: item.stored_payload(),
            })
            .collect();
        self.store.upsert(scope, &points).await
    }

    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let points = self
            .store
            .search(scope, &self.vector_query(query).await?)
            .await?;
        Ok(points.into_iter().map(Retrieved::from).collect())
    }

    async fn retrieve_matching(
        &self,
        filter: &ScopeFilter,
        query: &RetrievalQuery,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        retrieved_across(query, async {
            let search = self.vector_query(query).await?;
            self.store.search_matching(filter, &search).await
        })
        .await
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.store.delete(scope, ids).await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.store.clear(scope).await
    }
}
