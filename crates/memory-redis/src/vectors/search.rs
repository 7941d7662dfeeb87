//! [`VectorStore::search`](memory_core::VectorStore::search) and `search_matching` on Redis, in
//! two passes: the compact vectors of every searched scope scored in the client (pipelined, a
//! few round trips whatever the number of scopes), then the `f32` vectors and payloads of the
//! best candidates only, scored exactly.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use memory_core::vector::quantized::{QueryScorer, rescoring_candidates};
use memory_core::vector::{check_vectors, keep_best_by};
use memory_core::{Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorQuery};
use redis::Value;
use uuid::Uuid;

use super::RedisVectorStore;
use super::codec::{bulk, decode_id, decode_payload, hash_pairs};
use crate::conn::unsigned;
use crate::error::bad_reply;
use crate::keys::VectorKeys;

/// The most candidates one page of the exact pass reads while a filtered search looks for
/// `top_k` points whose payload matches.
const FILTER_PAGE_MAX: usize = 1024;
/// How many scopes of one user one pipeline of the first pass reads.
const SCOPES_PER_PIPELINE: usize = 256;
/// How many pipelines are in flight at once.
const PIPELINES_AT_ONCE: usize = 4;
/// How far below a query's `min_score` an approximate score may be and its point still be a
/// candidate: five times the approximation's error, so no point that meets `min_score`
/// exactly is dropped, and a search with `min_score` never pages through the points below.
const MIN_SCORE_SLACK: f32 = 0.05;

/// A point's score, id and the index of its scope among the searched ones.
type Ranked = (f32, Uuid, usize);

/// Decreasing score, then ascending id, then scope (by key: see [`Searched::new`]).
fn rank_order(a: &Ranked, b: &Ranked) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
}

/// The scopes a search reads, with their keys.
struct Searched {
    scopes: Vec<Scope>,
    keys: Vec<VectorKeys>,
}

impl Searched {
    /// The searched `scopes`, in the order of their keys (so ties between scopes rank by key).
    fn new(prefix: &str, mut scopes: Vec<Scope>) -> Self {
        scopes.sort_by_cached_key(Scope::key);
        let keys = scopes.iter().map(|s| VectorKeys::new(prefix, s)).collect();
        Self { scopes, keys }
    }

    /// The indexes `among` grouped by user (each group's keys lie in one slot), each group
    /// cut in pieces of at most `per_piece`.
    fn by_user(&self, among: impl IntoIterator<Item = usize>, per_piece: usize) -> Vec<Vec<usize>> {
        let mut users: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for at in among {
            if let Some(keys) = self.keys.get(at) {
                users.entry(keys.scopes.as_str()).or_default().push(at);
            }
        }
        users
            .into_values()
            .flat_map(|scopes| {
                scopes
                    .chunks(per_piece.max(1))
                    .map(<[usize]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The scopes at the indexes `piece`, with their keys.
    fn keys_of(&self, piece: &[usize]) -> Vec<(usize, &VectorKeys)> {
        piece
            .iter()
            .filter_map(|at| self.keys.get(*at).map(|keys| (*at, keys)))
            .collect()
    }
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
        let searched = Searched::new(self.prefix(), vec![scope.clone()]);
        let hits = self.search_scopes(&what, &searched, query).await?;
        Ok(hits.into_iter().map(|hit| hit.hit).collect())
    }

    /// `search` over every scope `filter` selects: the selected scopes of each of its users,
    /// searched together (ties by id, then scope).
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
        let searched = Searched::new(self.prefix(), scopes.into_iter().flatten().collect());
        self.search_scopes(what, &searched, query).await
    }

    /// The best `top_k` points of the searched scopes: every point scored from its compact
    /// vector, then pages of the best candidates scored exactly from their `f32` vectors,
    /// with their payloads, until `top_k` exist and match the filter (a point deleted between
    /// the passes has no payload and is left out).
    async fn search_scopes(
        &self,
        what: &str,
        searched: &Searched,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        let scorer = QueryScorer::new(&query.vector);
        let pieces = searched.by_user(0..searched.scopes.len(), SCOPES_PER_PIPELINE);
        let scored: Vec<Vec<Ranked>> = futures::stream::iter(pieces)
            .map(|piece| self.score_compact(what, searched, piece, &scorer))
            .buffer_unordered(PIPELINES_AT_ONCE)
            .try_collect()
            .await?;
        let mut ranked: Vec<Ranked> = scored
            .into_iter()
            .flatten()
            .filter(|(score, _, _)| {
                query
                    .min_score
                    .is_none_or(|min| *score >= min - MIN_SCORE_SLACK)
            })
            .collect();
        ranked.sort_unstable_by(rank_order);
        let first_page = rescoring_candidates(query.top_k);
        let later_pages = match query.filter {
            None => first_page,
            Some(_) => first_page.min(FILTER_PAGE_MAX),
        };
        let mut found: Vec<(f32, Uuid, usize, ScoredPoint)> = Vec::new();
        let mut rest = ranked.as_slice();
        let mut page = first_page;
        while found.len() < query.top_k && !rest.is_empty() {
            let (chunk, after) = rest.split_at(page.min(rest.len()));
            rest = after;
            page = later_pages;
            for (score, id, at, payload) in
                self.score_exactly(what, searched, chunk, &scorer).await?
            {
                let kept = query.min_score.is_none_or(|min| score >= min)
                    && query.filter.as_ref().is_none_or(|f| f.matches(&payload));
                if kept {
                    found.push((score, id, at, ScoredPoint { id, score, payload }));
                }
            }
        }
        keep_best_by(&mut found, query.top_k, |a, b| {
            rank_order(&(a.0, a.1, a.2), &(b.0, b.1, b.2))
        });
        Ok(found
            .into_iter()
            .filter_map(|(_, _, at, hit)| {
                searched
                    .scopes
                    .get(at)
                    .map(|scope| ScopedHit::new(scope.clone(), hit))
            })
            .collect())
    }

    /// The first pass over `piece` (scopes of one user): one pipeline of each scope's compact
    /// vectors and point count; a scope with points that have no compact vector (written
    /// before they were kept) is read again, its `f32` vectors, in a second one.
    async fn score_compact(
        &self,
        what: &str,
        searched: &Searched,
        piece: Vec<usize>,
        scorer: &QueryScorer<'_>,
    ) -> Result<Vec<Ranked>> {
        let piece = searched.keys_of(&piece);
        let Some(slot_key) = piece.first().map(|(_, keys)| keys.scopes.as_str()) else {
            return Ok(Vec::new());
        };
        let mut pipe = redis::pipe();
        for (_, keys) in &piece {
            pipe.cmd("HGETALL").arg(&keys.compact);
            pipe.cmd("HLEN").arg(&keys.vectors);
        }
        let mut replies = self
            .store
            .send_pipeline_in_slot_of(what, &pipe, slot_key)
            .await?
            .into_iter();
        let mut ranked = Vec::new();
        let mut without_compact = Vec::new();
        for (at, keys) in &piece {
            let (Some(compact), Some(count)) = (replies.next(), replies.next()) else {
                return Err(bad_reply(what, "a pipeline returned too few replies"));
            };
            let pairs = hash_pairs(what, compact)?;
            let points = unsigned(&count).ok_or_else(|| bad_reply(what, "HLEN is no count"))?;
            if u64::try_from(pairs.len()) != Ok(points) {
                without_compact.push((*at, *keys));
                continue;
            }
            score_pairs(what, &pairs, *at, scorer, &mut ranked)?;
        }
        if !without_compact.is_empty() {
            let mut pipe = redis::pipe();
            for (_, keys) in &without_compact {
                pipe.cmd("HGETALL").arg(&keys.vectors);
            }
            let replies = self
                .store
                .send_pipeline_in_slot_of(what, &pipe, slot_key)
                .await?;
            for ((at, _), reply) in without_compact.iter().zip(replies) {
                score_pairs(what, &hash_pairs(what, reply)?, *at, scorer, &mut ranked)?;
            }
        }
        Ok(ranked)
    }

    /// The exact pass over `candidates`: their `f32` vectors and payloads, one pipeline per
    /// user (two `HMGET`s a scope), scored exactly; a candidate deleted since the first pass
    /// is left out.
    async fn score_exactly(
        &self,
        what: &str,
        searched: &Searched,
        candidates: &[Ranked],
        scorer: &QueryScorer<'_>,
    ) -> Result<Vec<(f32, Uuid, usize, serde_json::Map<String, serde_json::Value>)>> {
        let mut ids: BTreeMap<usize, Vec<Uuid>> = BTreeMap::new();
        for (_, id, at) in candidates {
            ids.entry(*at).or_default().push(*id);
        }
        let pieces = searched.by_user(ids.keys().copied(), usize::MAX);
        let ids = &ids;
        let read: Vec<Vec<_>> = futures::stream::iter(pieces)
            .map(|piece| async move {
                let piece = searched.keys_of(&piece);
                let Some(slot_key) = piece.first().map(|(_, keys)| keys.scopes.as_str()) else {
                    return Ok(Vec::new());
                };
                let mut pipe = redis::pipe();
                for (at, keys) in &piece {
                    let wanted: Vec<String> = ids
                        .get(at)
                        .into_iter()
                        .flatten()
                        .map(Uuid::to_string)
                        .collect();
                    pipe.cmd("HMGET").arg(&keys.vectors).arg(&wanted);
                    pipe.cmd("HMGET").arg(&keys.payloads).arg(&wanted);
                }
                let mut replies = self
                    .store
                    .send_pipeline_in_slot_of(what, &pipe, slot_key)
                    .await?
                    .into_iter();
                let mut scored = Vec::new();
                for (at, _) in &piece {
                    let (Some(Value::Array(vectors)), Some(Value::Array(payloads))) =
                        (replies.next(), replies.next())
                    else {
                        return Err(bad_reply(what, "HMGET did not return an array"));
                    };
                    let wanted = ids.get(at).into_iter().flatten();
                    for ((id, vector), payload) in wanted.zip(&vectors).zip(&payloads) {
                        let (Some(vector), Some(payload)) = (bulk(vector), bulk(payload)) else {
                            continue;
                        };
                        let score = scorer.score_exactly(vector, &format_args!("point {id}"))?;
                        scored.push((score, *id, *at, decode_payload(what, id, payload)?));
                    }
                }
                Ok::<_, memory_core::Error>(scored)
            })
            .buffer_unordered(PIPELINES_AT_ONCE)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }
}

/// Scores the `HGETALL` pairs (point id → compact or `f32` vector) of the scope at `at`.
fn score_pairs(
    what: &str,
    pairs: &[(Value, Value)],
    at: usize,
    scorer: &QueryScorer<'_>,
    ranked: &mut Vec<Ranked>,
) -> Result<()> {
    for (field, value) in pairs {
        let id = decode_id(what, field)?;
        let bytes = bulk(value).ok_or_else(|| bad_reply(what, "a vector is not a string"))?;
        let score = scorer.score(bytes, &format_args!("point {id}"))?;
        ranked.push((score, id, at));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_score_then_id_then_scope() {
        let id = Uuid::from_u128;
        let mut ranked = vec![
            (0.5, id(3), 0),
            (0.9, id(2), 0),
            (0.5, id(1), 1),
            (0.5, id(1), 0),
            (-1.0, id(0), 0),
        ];
        ranked.sort_unstable_by(rank_order);
        assert_eq!(
            ranked,
            vec![
                (0.9, id(2), 0),
                (0.5, id(1), 0),
                (0.5, id(1), 1),
                (0.5, id(3), 0),
                (-1.0, id(0), 0)
            ]
        );
    }
}
