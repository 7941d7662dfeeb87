//! [`HybridRetriever`]: a dense and a lexical retriever, their rankings fused.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{Fusion, MemoryItem, RetrievalQuery, Retrieved, Retriever};
use crate::error::Result;
use crate::scope::{Scope, ScopeFilter, ScopedHit};

/// How many candidates each retriever returns for a fused search by default (at least the
/// query's `top_k`): deep enough that an item ranked well by one retriever only still reaches
/// the fusion (docs/quality.md has the figures).
pub const DEFAULT_CANDIDATES: usize = 50;

/// Indexes every item in both a dense and a lexical retriever and answers a query by asking
/// both for their best `max(top_k, candidates)` items (concurrently) and [fusing](Fusion::fuse)
/// the two rankings. An item found by one retriever only is still retrieved.
///
/// [`delete`](Retriever::delete) and [`clear`](Retriever::clear) act on both and return the
/// larger of the two counts (the same when both hold the same items).
#[derive(Debug, Clone)]
pub struct HybridRetriever {
    dense: Arc<dyn Retriever>,
    lexical: Arc<dyn Retriever>,
    fusion: Fusion,
    candidates: usize,
}

impl HybridRetriever {
    /// Fuses `dense` and `lexical` by [`Fusion::default`], [`DEFAULT_CANDIDATES`] deep.
    pub fn new(dense: Arc<dyn Retriever>, lexical: Arc<dyn Retriever>) -> Self {
        Self {
            dense,
            lexical,
            fusion: Fusion::default(),
            candidates: DEFAULT_CANDIDATES,
        }
    }

    /// Sets the fusion.
    #[must_use]
    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// Sets how many candidates each retriever returns (at least 1; a query's `top_k` is used
    /// when larger).
    #[must_use]
    pub fn with_candidates(mut self, candidates: usize) -> Self {
        self.candidates = candidates.max(1);
        self
    }

    /// The fusion in use.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// How many candidates each retriever returns.
    pub fn candidates(&self) -> usize {
        self.candidates
    }
}

#[async_trait]
impl Retriever for HybridRetriever {
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.dense.index(scope, items).await?;
        self.lexical.index(scope, items).await
    }

    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let mut candidates = query.clone();
        candidates.top_k = query.top_k.max(self.candidates);
        let (dense, lexical) = futures::future::try_join(
            self.dense.retrieve(scope, &candidates),
            self.lexical.retrieve(scope, &candidates),
        )
        .await?;
        Ok(self.fusion.fuse(dense, lexical, query.top_k))
    }

    /// Both retrievers' best items across the scopes, fused. The fusion matches an item of
    /// one ranking to the other's by its scope and id together.
    async fn retrieve_matching(
        &self,
        filter: &ScopeFilter,
        query: &RetrievalQuery,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let mut candidates = query.clone();
        candidates.top_k = query.top_k.max(self.candidates);
        let (dense, lexical) = futures::future::try_join(
            self.dense.retrieve_matching(filter, &candidates),
            self.lexical.retrieve_matching(filter, &candidates),
        )
        .await?;
        // Fusion matches items by id: give each hit an id made of its scope and id, fuse, and
        // give each fused item its own id and scope back.
        let mut origin: HashMap<Uuid, (Scope, Uuid)> = HashMap::new();
        let mut keyed = |hits: Vec<ScopedHit<Retrieved>>| -> Vec<Retrieved> {
            hits.into_iter()
                .map(|found| {
                    let key = Uuid::new_v5(&found.hit.id, found.scope.key().as_bytes());
                    origin.insert(key, (found.scope, found.hit.id));
                    Retrieved {
                        id: key,
                        ..found.hit
                    }
                })
                .collect()
        };
        let (dense, lexical) = (keyed(dense), keyed(lexical));
        let fused = self.fusion.fuse(dense, lexical, query.top_k);
        Ok(fused
            .into_iter()
            .filter_map(|item| {
                let (scope, id) = origin.get(&item.id)?.clone();
                Some(ScopedHit::new(scope, Retrieved { id, ..item }))
            })
            .collect())
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let dense = self.dense.delete(scope, ids).await?;
        let lexical = self.lexical.delete(scope, ids).await?;
        Ok(dense.max(lexical))
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let dense = self.dense.clear(scope).await?;
        let lexical = self.lexical.clear(scope).await?;
        Ok(dense.max(lexical))
    }
}
