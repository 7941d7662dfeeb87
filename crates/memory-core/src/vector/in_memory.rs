//! The exact in-memory [`VectorStore`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use super::{ScoredPoint, VectorPoint, VectorQuery, VectorStore, check_vectors, cosine_similarity};
use crate::error::{Error, ErrorKind, Result};
use crate::scope::Scope;

/// A [`VectorStore`] in process memory with exact (brute-force) cosine search: the reference
/// that approximate backends are measured against. Cloning shares the same data.
#[derive(Debug, Clone, Default)]
pub struct InMemoryVectorStore {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    dimensions: Option<usize>,
    scopes: HashMap<String, BTreeMap<Uuid, VectorPoint>>,
}

impl InMemoryVectorStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| {
            Error::new(
                ErrorKind::Backend,
                "the in-memory vector store was poisoned by a panic in another thread",
            )
        })
    }
}

#[async_trait]
impl VectorStore for InMemoryVectorStore {
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        let mut inner = self.lock()?;
        let dim = check_vectors(points.iter().map(|p| p.vector.as_slice()), inner.dimensions)?;
        if points.is_empty() {
            return Ok(());
        }
        inner.dimensions = dim;
        let map = inner.scopes.entry(scope.key()).or_default();
        for p in points {
            map.insert(p.id, p.clone());
        }
        Ok(())
    }

    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        let inner = self.lock()?;
        check_vectors([query.vector.as_slice()], inner.dimensions)?;
        let Some(points) = inner.scopes.get(&scope.key()) else {
            return Ok(Vec::new());
        };
        let mut scored: Vec<ScoredPoint> = points
            .values()
            .filter(|p| query.filter.as_ref().is_none_or(|f| f.matches(&p.payload)))
            .map(|p| ScoredPoint {
                id: p.id,
                score: cosine_similarity(&query.vector, &p.vector),
                payload: p.payload.clone(),
            })
            .filter(|s| query.min_score.is_none_or(|min| s.score >= min))
            .collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        scored.truncate(query.top_k);
        Ok(scored)
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        let inner = self.lock()?;
        let Some(points) = inner.scopes.get(&scope.key()) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| points.get(id).cloned())
            .collect())
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let mut inner = self.lock()?;
        let Some(points) = inner.scopes.get_mut(&scope.key()) else {
            return Ok(0);
        };
        Ok(ids.iter().filter(|id| points.remove(id).is_some()).count() as u64)
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        let inner = self.lock()?;
        Ok(inner.scopes.get(&scope.key()).map_or(0, |p| p.len() as u64))
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let mut inner = self.lock()?;
        Ok(inner
            .scopes
            .remove(&scope.key())
            .map_or(0, |p| p.len() as u64))
    }
}
