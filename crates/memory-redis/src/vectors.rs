//! [`RedisVectorStore`]: a [`VectorStore`] in the Redis (or Redis Cluster) of a [`RedisStore`],
//! with exact cosine search computed in the client, on plain Redis commands and Lua scripts (no
//! module).
//!
//! The trait's methods are here; the parts they call are submodules: [`codec`] (how points are
//! stored), [`search`] (scoring and ranking) and [`matching`] (the tenant's users, for
//! `delete_matching` and `count_matching`). The key layout is in [`keys`](crate::keys).

mod codec;
mod matching;
mod search;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::vector::check_vectors;
use memory_core::vector::quantized::quantize;
use memory_core::{
    Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorCapabilities, VectorPoint,
    VectorQuery, VectorStore,
};
use redis::Value;
use uuid::Uuid;

use self::codec::{array, bulk, decode_payload, decode_vector_into, payload_json, vector_bytes};
use self::matching::Purge;
use crate::conn::unsigned;
use crate::error::{During, bad_reply};
use crate::keys::{self, VectorKeys};
use crate::scripts::SCRIPTS;
use crate::store::{RedisStore, request_nonce};

/// A [`VectorStore`] on the Redis or Redis Cluster of a [`RedisStore`]: durable vector memory
/// with no other service and no Redis module.
///
/// Get one with [`RedisStore::vector_store`]; it shares the store's connection, key prefix,
/// timeouts and [`round_trips`](RedisStore::round_trips) counter, and cloning it is cheap.
/// Every store object on the same server (or cluster) and prefix sees the same points.
///
/// # Storage
/// Each scope's points are three hashes, point id → vector (its f32 values as little-endian
/// bytes: 4 bytes a dimension), point id → payload (JSON) and point id → compact vector (one
/// byte a dimension: [`quantized`](memory_core::vector::quantized)); every key of one *user*
/// (tenant and user) is in one cluster slot, under the hash tag `{<tenant>|<user or ~>}`,
/// with a set of the user's scopes that hold points, and each tenant has a set of its users.
/// See the crate's README, "Vector store", for the key layout.
///
/// # Behavior
/// - **Search returns exact cosine similarities**, in two passes computed in the client (Lua
///   would block the server): one pipeline reads the compact vectors (and point count) of
///   every searched scope of a user, up to 256 scopes a pipeline (a scope with points stored
///   before compact vectors were kept has its f32 vectors read instead), and scores them;
///   then one pipeline per user reads the f32 vectors and payloads of the best
///   [`rescoring_candidates`](memory_core::vector::quantized::rescoring_candidates) (at
///   least four times `top_k`), which are scored exactly and ranked (ties by ascending id,
///   then scope key); with a [`PayloadFilter`](memory_core::PayloadFilter), pages of further
///   candidates follow until `top_k` match (with a `min_score`, among the points whose
///   approximate score is at most 0.05 below it). Every filter is supported (evaluated with
///   `PayloadFilter::matches`). The ranking is exact unless a point of the true top `top_k`
///   scores, approximately, below every candidate (the approximation errs by about 0.01).
///   Its cost grows with the scopes' points (a quarter of their f32 bytes are transferred,
///   not payloads): it suits one user's memory, tens of thousands of points, not millions.
///   The passes are not one snapshot: a point deleted between them is left out, one replaced
///   between them is ranked by its old compact vector and scored by its new one.
/// - **One dimension per store**, recorded in Redis by the first upsert (`SET` if absent, in a
///   script), so every process agrees: an upsert of another dimension is
///   [`InvalidInput`](memory_core::ErrorKind::InvalidInput), as is a search by another
///   dimension. A store object keeps the dimension it last read. The dimension stays when
///   points are deleted.
/// - **An upsert is one script** in the user's slot: all of its points or none; a retried (or
///   re-sent) upsert changes nothing. Before it, the store records the dimension and adds the
///   user to the tenant's set (concurrently: two round trips in sequence, three when the user
///   had no point yet, as it is added to the tenant's set again after the script).
/// - `get` is one script (vectors and payloads in one snapshot); `count` one `HLEN`; `delete`
///   and `clear` one script each, which remember their reply for five minutes so a request
///   re-sent by the cluster client returns it rather than 0 (see "Re-sent requests" on
///   [`RedisStore`]).
/// - `search_matching` is supported: the users of the filter as below, then their selected
///   scopes searched together as `search` searches one. A user's memory across their
///   sessions is one `SMEMBERS` and two pipelines (one more for each 256 sessions).
/// - `delete_matching` and `count_matching` are supported: the users of the filter (its user,
///   or every user in the tenant's set, read with `SSCAN`), then per user one `SMEMBERS` of
///   its scopes and one script over those the filter selects, several users at a time. A user
///   left without points leaves the tenant's set.
/// - Calls fail as the store's do (`Unavailable`, `Timeout`, within the store's timeouts);
///   messages never hold the URL's password.
#[derive(Clone)]
pub struct RedisVectorStore {
    store: RedisStore,
    /// The dimension last read from or recorded in Redis, shared by the clones (0: unknown).
    dimensions: Arc<AtomicUsize>,
}

impl RedisStore {
    /// The [`VectorStore`] in this store's Redis (or Redis Cluster), under its key prefix: see
    /// [`RedisVectorStore`]. It shares the connection; any number of them may be made.
    pub fn vector_store(&self) -> RedisVectorStore {
        RedisVectorStore {
            store: self.clone(),
            dimensions: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl fmt::Debug for RedisVectorStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisVectorStore")
            .field("store", &self.store)
            .field("dimensions", &self.known_dimensions())
            .finish()
    }
}

impl RedisVectorStore {
    /// The dimension of the store's vectors when this object has read it, else `None`.
    pub fn known_dimensions(&self) -> Option<usize> {
        match self.dimensions.load(Ordering::Relaxed) {
            0 => None,
            d => Some(d),
        }
    }

    fn prefix(&self) -> &str {
        self.store.prefix()
    }

    /// The store's dimension: as last read, else from Redis (`None` while no point was ever
    /// written).
    async fn dimensions(&self, what: &str) -> Result<Option<usize>> {
        if let Some(d) = self.known_dimensions() {
            return Ok(Some(d));
        }
        let mut get = redis::cmd("GET");
        get.arg(keys::vector_dimensions(self.prefix()));
        let found = match self.store.query(what, &get).await? {
            Value::Nil => None,
            reply => Some(
                unsigned(&reply)
                    .and_then(|d| usize::try_from(d).ok())
                    .filter(|&d| d > 0)
                    .ok_or_else(|| bad_reply(what, "the vector dimension is not a number"))?,
            ),
        };
        if let Some(d) = found {
            self.dimensions.store(d, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// Records `dimensions` as the store's if none is recorded; returns the recorded one.
    async fn record_dimensions(&self, what: &str, dimensions: usize) -> Result<usize> {
        let key = keys::vector_dimensions(self.prefix());
        let arg = dimensions.to_string();
        let reply = self
            .store
            .eval(what, &SCRIPTS.vector_dims, &[&key], &[arg.as_bytes()])
            .await?;
        let recorded = unsigned(&reply)
            .and_then(|d| usize::try_from(d).ok())
            .filter(|&d| d > 0)
            .ok_or_else(|| bad_reply(what, "the vector dimension is not a number"))?;
        self.dimensions.store(recorded, Ordering::Relaxed);
        Ok(recorded)
    }

    async fn upsert_points(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        // Each batch on its own first (empty, non-finite, mixed lengths), before any write.
        let Some(dimensions) = check_vectors(points.iter().map(|p| p.vector.as_slice()), None)?
        else {
            return Ok(());
        };
        let what = format!("upsert {} points in {scope}", points.len());
        let keys = VectorKeys::new(self.prefix(), scope);
        let mut encoded = Vec::with_capacity(points.len());
        for point in points {
            encoded.push((
                point.id.to_string(),
                vector_bytes(&point.vector),
                payload_json(&what, &point.payload)?,
                quantize(&point.vector),
            ));
        }
        // The user joins the tenant's set before any point is written (a stale member is
        // harmless, a missing one would hide the points from delete_matching).
        let (recorded, ()) = futures::future::try_join(
            self.record_dimensions(&what, dimensions),
            self.index_user(&what, scope),
        )
        .await?;
        check_vectors(points.iter().map(|p| p.vector.as_slice()), Some(recorded))?;
        let scope_key = scope.key();
        let mut args: Vec<&[u8]> =
            Vec::with_capacity(encoded.len().saturating_mul(4).saturating_add(1));
        args.push(scope_key.as_bytes());
        for (id, vector, payload, compact) in &encoded {
            args.extend([
                id.as_bytes(),
                vector.as_slice(),
                payload.as_bytes(),
                compact.as_slice(),
            ]);
        }
        let reply = self
            .store
            .eval(
                &what,
                &SCRIPTS.vector_upsert,
                &[&keys.scopes, &keys.vectors, &keys.payloads, &keys.compact],
                &args,
            )
            .await?;
        if unsigned(&reply) == Some(1) {
            // The user had no point: a delete_matching may have taken it out of the tenant's
            // set after this call added it (see `matching`); add it again.
            self.index_user(&what, scope).await?;
        }
        tracing::debug!(scope = %scope, points = points.len(), "vectors.upsert");
        Ok(())
    }

    async fn get_points(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let what = format!("get {} points of {scope}", ids.len());
        let keys = VectorKeys::new(self.prefix(), scope);
        let ids_text: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let args: Vec<&[u8]> = ids_text.iter().map(|id| id.as_bytes()).collect();
        let reply = self
            .store
            .eval(
                &what,
                &SCRIPTS.vector_get,
                &[&keys.vectors, &keys.payloads],
                &args,
            )
            .await?;
        let items = array(&what, reply, "the get script")?;
        if items.len() != ids.len().saturating_mul(2) {
            return Err(bad_reply(
                &what,
                format!("{} values for {} ids", items.len(), ids.len()),
            ));
        }
        let (vectors, payloads) = items.split_at(ids.len());
        let mut points = Vec::new();
        for ((id, vector), payload) in ids.iter().zip(vectors).zip(payloads) {
            let Some(vector) = bulk(vector) else {
                continue;
            };
            let payload = bulk(payload)
                .ok_or_else(|| bad_reply(&what, format!("point {id} has no payload")))?;
            let mut values = Vec::new();
            decode_vector_into(&what, id, vector, None, &mut values)?;
            points.push(VectorPoint {
                id: *id,
                vector: values,
                payload: decode_payload(&what, id, payload)?,
            });
        }
        Ok(points)
    }

    async fn delete_points(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let what = format!("delete {} points of {scope}", ids.len());
        let keys = VectorKeys::new(self.prefix(), scope);
        let nonce = request_nonce();
        let scope_key = scope.key();
        let ids_text: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let mut args: Vec<&[u8]> = vec![nonce.as_bytes(), scope_key.as_bytes()];
        args.extend(ids_text.iter().map(|id| id.as_bytes()));
        let reply = self
            .store
            .eval(
                &what,
                &SCRIPTS.vector_delete,
                &[
                    &keys.scopes,
                    &keys.vectors,
                    &keys.payloads,
                    &keys.ack,
                    &keys.compact,
                ],
                &args,
            )
            .await?;
        unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))
    }

    async fn count_points(&self, scope: &Scope) -> Result<u64> {
        let what = format!("count the points of {scope}");
        let mut hlen = redis::cmd("HLEN");
        hlen.arg(VectorKeys::new(self.prefix(), scope).vectors);
        let reply = self.store.query(&what, &hlen).await?;
        unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))
    }

    async fn clear_points(&self, scope: &Scope) -> Result<u64> {
        let what = format!("clear the points of {scope}");
        let keys = VectorKeys::new(self.prefix(), scope);
        let (removed, _) = self
            .purge(&what, Purge::Delete, &keys.scopes, &keys.ack, &[scope])
            .await?;
        Ok(removed)
    }
}

#[async_trait]
impl VectorStore for RedisVectorStore {
    fn capabilities(&self) -> VectorCapabilities {
        VectorCapabilities::none()
            .with_deletes_matching(true)
            .with_searches_matching(true)
    }

    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.upsert_points(scope, points).await.during("upsert")
    }

    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        self.search_points(scope, query).await.during("search")
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        self.get_points(scope, ids).await.during("get")
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.delete_points(scope, ids).await.during("delete")
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.count_points(scope).await.during("count")
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.clear_points(scope).await.during("clear")
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.purge_matching(filter, Purge::Delete)
            .await
            .during("delete_matching")
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.purge_matching(filter, Purge::Count)
            .await
            .during("count_matching")
    }

    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        self.search_matching_points(filter, query)
            .await
            .during("search_matching")
    }
}
