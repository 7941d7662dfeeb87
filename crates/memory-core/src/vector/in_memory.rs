//! The exact in-memory [`VectorStore`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use super::{ScoredPoint, VectorPoint, VectorQuery, VectorStore, check_vectors};
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
        // Score without copying payloads, keep the best top_k, and copy only those.
        let query_norm = query.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let mut scored: Vec<(f32, &VectorPoint)> = points
            .values()
            .filter(|p| query.filter.as_ref().is_none_or(|f| f.matches(&p.payload)))
            .map(|p| (cosine_with_norm(&query.vector, query_norm, &p.vector), p))
            .filter(|(score, _)| query.min_score.is_none_or(|min| *score >= min))
            .collect();
        let order = |a: &(f32, &VectorPoint), b: &(f32, &VectorPoint)| {
            b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id))
        };
        if query.top_k < scored.len() {
            if query.top_k > 0 {
                scored.select_nth_unstable_by(query.top_k.saturating_sub(1), order);
            }
            scored.truncate(query.top_k);
        }
        scored.sort_by(order);
        let scored = scored
            .into_iter()
            .map(|(score, p)| ScoredPoint {
                id: p.id,
                score,
                payload: p.payload.clone(),
            })
            .collect();
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

/// Cosine similarity when the first vector's norm is already known (0 for a zero vector).
fn cosine_with_norm(a: &[f32], a_norm: f32, b: &[f32]) -> f32 {
    let (mut dot, mut b_sq) = (0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        b_sq += y * y;
    }
    let denom = a_norm * b_sq.sqrt();
    if denom == 0.0 { 0.0 } else { dot / denom }
}
