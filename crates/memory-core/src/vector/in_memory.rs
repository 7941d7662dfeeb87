//! The exact in-memory [`VectorStore`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use super::{
    ScoredPoint, VectorCapabilities, VectorPoint, VectorQuery, VectorStore, check_vectors,
    keep_best, keep_best_by,
};
use crate::error::{Error, ErrorKind, Result};
use crate::scope::{Scope, ScopeFilter, ScopedHit};

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

/// Whether the scope of `key` (a [`Scope::key`]) is one `filter` selects. Every key of the map
/// was made by `Scope::key`, so it always parses; one that did not would not be selected.
fn key_matches(filter: &ScopeFilter, key: &str) -> bool {
    Scope::from_key(key).is_ok_and(|scope| filter.matches(&scope))
}

#[async_trait]
impl VectorStore for InMemoryVectorStore {
    fn capabilities(&self) -> VectorCapabilities {
        VectorCapabilities::none()
            .with_deletes_matching(true)
            .with_searches_matching(true)
    }

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
        let mut scored = score(points.values(), query);
        keep_best(&mut scored, query.top_k, |(score, p)| (*score, p.id));
        Ok(scored.into_iter().map(|(score, p)| hit(score, p)).collect())
    }

    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        let inner = self.lock()?;
        check_vectors([query.vector.as_slice()], inner.dimensions)?;
        let mut scored = Vec::new();
        for (key, points) in &inner.scopes {
            if key_matches(filter, key) {
                scored.extend(
                    score(points.values(), query)
                        .into_iter()
                        .map(|(s, p)| (s, p, key)),
                );
            }
        }
        // Ties by id, then by scope key (the same id in two scopes is two points).
        keep_best_by(&mut scored, query.top_k, |a, b| {
            b.0.total_cmp(&a.0)
                .then(a.1.id.cmp(&b.1.id))
                .then(a.2.cmp(b.2))
        });
        scored
            .into_iter()
            .map(|(score, p, key)| Ok(ScopedHit::new(Scope::from_key(key)?, hit(score, p))))
            .collect()
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

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let mut inner = self.lock()?;
        let mut removed = 0u64;
        inner.scopes.retain(|key, points| {
            if key_matches(filter, key) {
                removed = removed.saturating_add(points.len() as u64);
                false
            } else {
                true
            }
        });
        Ok(removed)
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let inner = self.lock()?;
        Ok(inner
            .scopes
            .iter()
            .filter(|(key, _)| key_matches(filter, key))
            .fold(0u64, |sum, (_, points)| {
                sum.saturating_add(points.len() as u64)
            }))
    }
}

/// The points matching the query's filter and `min_score`, with their scores (payloads not
/// copied: only the best are).
fn score<'p>(
    points: impl Iterator<Item = &'p VectorPoint>,
    query: &VectorQuery,
) -> Vec<(f32, &'p VectorPoint)> {
    let query_norm = query.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    points
        .filter(|p| query.filter.as_ref().is_none_or(|f| f.matches(&p.payload)))
        .map(|p| (cosine_with_norm(&query.vector, query_norm, &p.vector), p))
        .filter(|(score, _)| query.min_score.is_none_or(|min| *score >= min))
        .collect()
}

/// A scored point as a search result.
fn hit(score: f32, point: &VectorPoint) -> ScoredPoint {
    ScoredPoint {
        id: point.id,
        score,
        payload: point.payload.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{AgentId, SessionId, TenantId, UserId};
    use crate::scope::test_scope as scope;

    fn point(n: u128) -> VectorPoint {
        VectorPoint {
            id: Uuid::from_u128(n),
            vector: vec![1.0, 0.5],
            payload: serde_json::Map::new(),
        }
    }

    /// Six scopes over two tenants, `i + 1` points in the `i`th.
    async fn seeded() -> (InMemoryVectorStore, Vec<Scope>) {
        let store = InMemoryVectorStore::new();
        let scopes = vec![
            scope("a", Some("u1"), Some("g1"), "s1"),
            scope("a", Some("u1"), None, "s2"),
            scope("a", Some("u2"), Some("g1"), "s1"),
            scope("a", None, None, "s3")
                .with_source("memory.blocks")
                .unwrap(),
            scope("b", Some("u1"), Some("g1"), "s1"),
            scope("b", None, None, "s3"),
        ];
        let mut n = 0;
        for (i, s) in scopes.iter().enumerate() {
            let points: Vec<VectorPoint> = (0..=i)
                .map(|_| {
                    n += 1;
                    point(n)
                })
                .collect();
            store.upsert(s, &points).await.unwrap();
        }
        (store, scopes)
    }

    async fn counts(store: &InMemoryVectorStore, scopes: &[Scope]) -> Vec<u64> {
        let mut out = Vec::new();
        for s in scopes {
            out.push(store.count(s).await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn delete_matching_removes_exactly_the_selected_scopes() {
        let tenant = |t: &str| ScopeFilter::tenant(TenantId::new(t).unwrap());
        let cases = [
            (tenant("a"), vec![0, 0, 0, 0, 5, 6]),
            (
                tenant("a").with_user(UserId::new("u1").unwrap()),
                vec![0, 0, 3, 4, 5, 6],
            ),
            (
                tenant("a").with_agent(AgentId::new("g1").unwrap()),
                vec![0, 2, 0, 4, 5, 6],
            ),
            (
                tenant("a").with_session(SessionId::new("s1").unwrap()),
                vec![0, 2, 0, 4, 5, 6],
            ),
            (
                tenant("a")
                    .with_user(UserId::new("u1").unwrap())
                    .with_session(SessionId::new("s1").unwrap()),
                vec![0, 2, 3, 4, 5, 6],
            ),
            (tenant("c"), vec![1, 2, 3, 4, 5, 6]),
        ];
        for (filter, expected) in cases {
            let (store, scopes) = seeded().await;
            let before: u64 = counts(&store, &scopes).await.iter().sum();
            let left: u64 = expected.iter().sum();
            let would = store.count_matching(&filter).await.unwrap();
            assert_eq!(would, before - left, "{filter}: count_matching");
            assert_eq!(
                counts(&store, &scopes).await,
                vec![1, 2, 3, 4, 5, 6],
                "{filter}: count_matching changes nothing"
            );
            assert_eq!(
                store.delete_matching(&filter).await.unwrap(),
                would,
                "{filter}"
            );
            assert_eq!(counts(&store, &scopes).await, expected, "{filter}");
            assert_eq!(
                store.delete_matching(&filter).await.unwrap(),
                0,
                "{filter}: again"
            );
            assert_eq!(store.count_matching(&filter).await.unwrap(), 0, "{filter}");
        }
    }

    #[test]
    fn declares_deletes_matching() {
        assert!(InMemoryVectorStore::new().capabilities().deletes_matching);
    }
}
