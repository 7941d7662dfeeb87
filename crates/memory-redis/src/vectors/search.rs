//! [`VectorStore::search`](memory_core::VectorStore::search) on Redis: the scope's vectors in
//! one `HGETALL`, scored and ranked in the client, then payloads only for the best points.

use std::cmp::Ordering;

use futures::{StreamExt, TryStreamExt};
use memory_core::vector::{check_vectors, cosine_similarity, keep_best_by};
use memory_core::{Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorQuery};
use uuid::Uuid;

use super::RedisVectorStore;
use super::codec::{array, bulk, decode_id, decode_payload, decode_vector_into, hash_pairs};
use crate::error::bad_reply;
use crate::keys::VectorKeys;

/// The fewest payloads a filtered search reads per `HMGET` while it looks for `top_k` points
/// whose payload matches, so that a small `top_k` with a selective filter takes few trips.
const FILTER_PAGE_MIN: usize = 64;
/// The most.
const FILTER_PAGE_MAX: usize = 1024;

/// How many scopes (sessions) a search across scopes reads at a time.
const SCOPES_AT_ONCE: usize = 16;

/// A point's score and id, before its payload is read.
type Ranked = (f32, Uuid);

/// Decreasing score, then ascending id.
fn rank_order(a: &Ranked, b: &Ranked) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

impl RedisVectorStore {
    pub(super) async fn search_points(
        &self,
        scope: &Scope,
        query: &VectorQuery,
    ) -> Result<Vec<ScoredPoint>> {
        let what = format!("search the points of {scope}");
        let dimensions = self.dimensions(&what).await?;
        check_vectors([query.vector.as_slice()], dimensions)?;
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let keys = VectorKeys::new(self.prefix(), scope);
        let ranked = self.ranked(&what, &keys, query, dimensions).await?;
        self.with_payloads(&what, &keys, query, &ranked).await
    }

    /// `search` over every scope `filter` selects: each selected scope of each of its users
    /// searched as `search` does (its vectors, then the payloads of its best), several scopes
    /// at a time, the hits merged and the best `top_k` kept (ties by id, then scope key).
    pub(super) async fn search_matching_points(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        let what = format!("search the points matching {filter}");
        let dimensions = self.dimensions(&what).await?;
        check_vectors([query.vector.as_slice()], dimensions)?;
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let what = &what;
        let users = self.users_of(what, filter).await?;
        let scopes: Vec<Vec<Scope>> = futures::stream::iter(users)
            .map(|user| async move {
                let (scopes, _) = self.selected_scopes(what, filter, &user).await?;
                Ok::<_, memory_core::Error>(scopes)
            })
            .buffer_unordered(super::matching::USERS_AT_ONCE)
            .try_collect()
            .await?;
        let found: Vec<Vec<ScopedHit<ScoredPoint>>> =
            futures::stream::iter(scopes.into_iter().flatten())
                .map(|scope| async move {
                    let keys = VectorKeys::new(self.prefix(), &scope);
                    let ranked = self.ranked(what, &keys, query, dimensions).await?;
                    let best = self.with_payloads(what, &keys, query, &ranked).await?;
                    Ok::<_, memory_core::Error>(
                        best.into_iter()
                            .map(|hit| ScopedHit::new(scope.clone(), hit))
                            .collect(),
                    )
                })
                .buffer_unordered(SCOPES_AT_ONCE)
                .try_collect()
                .await?;
        let mut found: Vec<ScopedHit<ScoredPoint>> = found.into_iter().flatten().collect();
        keep_best_by(&mut found, query.top_k, |a, b| {
            b.hit
                .score
                .total_cmp(&a.hit.score)
                .then(a.hit.id.cmp(&b.hit.id))
                .then(a.scope.key().cmp(&b.scope.key()))
        });
        Ok(found)
    }

    /// Every point of the scope scoring at least the query's `min_score`, best first.
    async fn ranked(
        &self,
        what: &str,
        keys: &VectorKeys,
        query: &VectorQuery,
        dimensions: Option<usize>,
    ) -> Result<Vec<Ranked>> {
        let mut all = redis::cmd("HGETALL");
        all.arg(&keys.vectors);
        let pairs = hash_pairs(what, self.store.query(what, &all).await?)?;
        let mut ranked = Vec::with_capacity(pairs.len());
        let mut vector = Vec::new();
        for (field, value) in &pairs {
            let id = decode_id(what, field)?;
            let bytes = bulk(value).ok_or_else(|| bad_reply(what, "a vector is not a string"))?;
            decode_vector_into(what, &id, bytes, dimensions, &mut vector)?;
            let score = cosine_similarity(&query.vector, &vector);
            if query.min_score.is_none_or(|min| score >= min) {
                ranked.push((score, id));
            }
        }
        ranked.sort_unstable_by(rank_order);
        Ok(ranked)
    }

    /// The first `top_k` of `ranked` whose payload exists (a point deleted since the vectors
    /// were read has none) and matches the query's filter, with their payloads: without a
    /// filter one `HMGET` of the `top_k` best (more only when some were deleted meanwhile),
    /// with one pages of the ranking.
    async fn with_payloads(
        &self,
        what: &str,
        keys: &VectorKeys,
        query: &VectorQuery,
        ranked: &[Ranked],
    ) -> Result<Vec<ScoredPoint>> {
        let top_k = query.top_k;
        let page = match query.filter {
            None => top_k,
            Some(_) => top_k
                .saturating_mul(4)
                .clamp(FILTER_PAGE_MIN, FILTER_PAGE_MAX),
        };
        let mut found = Vec::with_capacity(top_k.min(ranked.len()));
        let mut rest = ranked;
        while found.len() < top_k && !rest.is_empty() {
            let wanted = match query.filter {
                None => top_k.saturating_sub(found.len()),
                Some(_) => page,
            };
            let (chunk, after) = rest.split_at(wanted.min(rest.len()));
            rest = after;
            let mut get = redis::cmd("HMGET");
            get.arg(&keys.payloads);
            for (_, id) in chunk {
                get.arg(id.to_string());
            }
            let payloads = array(what, self.store.query(what, &get).await?, "HMGET")?;
            if payloads.len() != chunk.len() {
                return Err(bad_reply(what, "HMGET returned another number of values"));
            }
            for (&(score, id), payload) in chunk.iter().zip(&payloads) {
                let Some(bytes) = bulk(payload) else {
                    continue;
                };
                let payload = decode_payload(what, &id, bytes)?;
                if query.filter.as_ref().is_none_or(|f| f.matches(&payload)) {
                    found.push(ScoredPoint { id, score, payload });
                }
            }
        }
        found.truncate(top_k);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_score_then_id() {
        let id = Uuid::from_u128;
        let mut ranked = vec![(0.5, id(3)), (0.9, id(2)), (0.5, id(1)), (-1.0, id(0))];
        ranked.sort_unstable_by(rank_order);
        assert_eq!(
            ranked,
            vec![(0.9, id(2)), (0.5, id(1)), (0.5, id(3)), (-1.0, id(0))]
        );
    }
}
