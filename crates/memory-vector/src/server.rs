//! [`QdrantStore`]: a Qdrant server over gRPC (`qdrant-client`).

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memory_core::redact::scrub_error;
use memory_core::vector::VectorCapabilities;
use memory_core::vector::check_vectors;
use memory_core::{
    Error, ErrorKind, Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorPoint, VectorQuery,
    VectorStore, url_secrets,
};
use qdrant_client::qdrant::{
    self, Condition, CountPointsBuilder, CreateCollectionBuilder,
    CreateFieldIndexCollectionBuilder, DeletePointsBuilder, Distance, FieldCondition, FieldType,
    Filter, GetPointsBuilder, PointId, PointStruct, PointsIdsList, SearchPointsBuilder,
    UpsertPointsBuilder, VectorParamsBuilder, r#match::MatchValue, point_id::PointIdOptions,
    vectors_config::Config,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::config::QdrantStoreConfig;
use crate::error::backend;
use crate::schema::{
    Cond, INDEXED_FIELDS, MatchScalar, Ranked, Round, check_norms, matching, points_in_scope,
    qdrant_point_id, scoped, scoped_hit, scored_hit, settle, stored_payload,
};

/// The backend name the errors of this store carry.
const BACKEND: &str = "qdrant";

/// A [`VectorStore`] on a Qdrant server, over gRPC.
///
/// Every scope shares one collection, created at first use with the configured dimension (or
/// the first upsert's) and cosine distance, with keyword payload indexes on the scope fields so
/// filtered searches stay fast. Each point stores its scope key in the payload field
/// `scope_key` and every read requires it, whatever filter the caller passes; the Qdrant point
/// id is derived from the scope key and the caller's id, so a retried upsert rewrites the same
/// points. Upserts are sent in batches of
/// [`upsert_batch_size`](QdrantStoreConfig::upsert_batch_size) points and wait for the write
/// to be applied. The whole batch is validated before the first request, so an invalid vector
/// writes nothing; a transport failure between two requests can leave the earlier ones
/// written, and retrying the same upsert completes it without duplicates.
///
/// A vector with a NaN, an infinity or a norm that overflows `f32` (components near `1e20` and
/// above) is `InvalidInput`, at upsert and at search. Points tied at the `top_k` boundary are
/// ordered by id; to find them, a search asks for twice as many points while the last one
/// ties, up to `max(4 × top_k, top_k + 256)`: past that, ties are ordered among the points
/// fetched. Errors never show the URL's password (a raw `/ ? # @` in it is refused).
///
/// [`delete_matching`](VectorStore::delete_matching) and
/// [`count_matching`](VectorStore::count_matching) are supported: a forget counts the points
/// whose `tenant` (and `user`, `agent`, `session` when named) payload fields match, with one
/// exact count, then deletes them with one delete-by-filter request that waits for the write.
/// [`search_matching`](VectorStore::search_matching) is supported too: one search request
/// over the points whose scope fields the filter selects (ties by id, then scope key), each hit
/// with the scope it was stored in (a user's memory across their sessions).
///
/// Cloning shares the client and its connection pool.
#[derive(Clone)]
pub struct QdrantStore {
    client: Qdrant,
    config: QdrantStoreConfig,
    /// What the URL holds that no error may show (`memory_core::url_secrets`).
    secrets: Arc<[String]>,
    state: Arc<Mutex<State>>,
}

/// What the store knows of its collection.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// The vectors' dimension: configured, or read from the collection.
    dimensions: Option<usize>,
    /// Whether the collection is known to exist.
    ready: bool,
}

impl fmt::Debug for QdrantStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QdrantStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl QdrantStore {
    /// A store for `config`. Connects lazily: no request is sent before the first call.
    ///
    /// # Errors
    /// [`InvalidInput`](ErrorKind::InvalidInput) when the client rejects the URL.
    pub fn connect(config: QdrantStoreConfig) -> Result<Self> {
        crate::config::check_user_info(&config.url)?;
        let mut client_config = qdrant_client::config::QdrantConfig::from_url(&config.url)
            .timeout(config.timeout)
            .skip_compatibility_check();
        if let Some(key) = &config.api_key {
            client_config.set_api_key(key);
        }
        let client = client_config.build().map_err(|e| {
            scrub_error(
                backend(BACKEND, ErrorKind::InvalidInput, "building the client", e),
                &url_secrets(&config.url),
            )
        })?;
        Ok(Self::from_client(client, config))
    }

    /// A store on an application's existing client; `config`'s URL and key are not used.
    pub fn from_client(client: Qdrant, config: QdrantStoreConfig) -> Self {
        Self {
            client,
            secrets: url_secrets(&config.url).into(),
            state: Arc::new(Mutex::new(State {
                dimensions: config.dimensions,
                ready: false,
            })),
            config,
        }
    }

    /// The underlying client, for what this store does not cover (snapshots, collection
    /// management).
    pub fn client(&self) -> &Qdrant {
        &self.client
    }

    /// The configuration.
    pub fn config(&self) -> &QdrantStoreConfig {
        &self.config
    }

    /// `err` without the URL's secrets: the client quotes its URL in connection errors.
    fn scrub(&self, err: Error) -> Error {
        scrub_error(err, &self.secrets)
    }

    fn collection(&self) -> &str {
        &self.config.collection
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| Error::new(ErrorKind::Backend, "the Qdrant store's lock was poisoned"))
    }

    fn set_ready(&self, dimensions: usize) -> Result<()> {
        *self.state()? = State {
            dimensions: Some(dimensions),
            ready: true,
        };
        Ok(())
    }

    /// The collection's dimension, or `None` when the collection does not exist yet.
    async fn existing_dimensions(&self) -> Result<Option<usize>> {
        let exists = self
            .client
            .collection_exists(self.collection())
            .await
            .map_err(|e| map_error("collection exists", e))?;
        if !exists {
            return Ok(None);
        }
        let info = self
            .client
            .collection_info(self.collection())
            .await
            .map_err(|e| map_error("collection info", e))?;
        let size = info
            .result
            .and_then(|r| r.config)
            .and_then(|c| c.params)
            .and_then(|p| p.vectors_config)
            .and_then(|v| v.config)
            .and_then(|c| match c {
                Config::Params(p) => Some(p.size as usize),
                Config::ParamsMap(_) => None,
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Backend,
                    format!(
                        "the Qdrant collection {} has no single unnamed vector",
                        self.collection()
                    ),
                )
            })?;
        Ok(Some(size))
    }

    /// The dimension of the collection, or `None` when it does not exist yet.
    async fn known_dimensions(&self) -> Result<Option<usize>> {
        let state = *self.state()?;
        if state.ready {
            return Ok(state.dimensions);
        }
        match self.existing_dimensions().await? {
            Some(d) => {
                self.set_ready(d)?;
                Ok(Some(d))
            }
            None => Ok(None),
        }
    }

    /// Creates the collection with `dims` and its payload indexes, if it does not exist.
    async fn ensure_collection(&self, dims: usize) -> Result<usize> {
        if let Some(existing) = self.existing_dimensions().await? {
            self.set_ready(existing)?;
            return Ok(existing);
        }
        let created = self
            .client
            .create_collection(
                CreateCollectionBuilder::new(self.collection())
                    .vectors_config(VectorParamsBuilder::new(dims as u64, Distance::Cosine)),
            )
            .await;
        if let Err(e) = created {
            // Another writer may have created it meanwhile.
            match self.existing_dimensions().await? {
                Some(existing) => {
                    self.set_ready(existing)?;
                    return Ok(existing);
                }
                None => return Err(map_error("create collection", e)),
            }
        }
        for field in INDEXED_FIELDS {
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(
                        self.collection(),
                        field,
                        FieldType::Keyword,
                    )
                    .wait(true),
                )
                .await
                .map_err(|e| map_error("create payload index", e))?;
        }
        self.set_ready(dims)?;
        Ok(dims)
    }

    async fn retrieve(&self, scope_key: &str, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        let qids: Vec<PointId> = ids
            .iter()
            .map(|id| PointId::from(qdrant_point_id(scope_key, *id).to_string()))
            .collect();
        let response = self
            .client
            .get_points(GetPointsBuilder::new(self.collection(), qids).with_payload(true))
            .await
            .map_err(|e| map_error("get points", e))?;
        Ok(points_in_scope(
            scope_key,
            ids,
            response.result.into_iter().map(|r| json_payload(r.payload)),
        ))
    }

    async fn count_key(&self, scope_key: &str) -> Result<u64> {
        self.count_where(&Cond::scope(scope_key)).await
    }

    /// The exact number of points meeting `cond`.
    async fn count_where(&self, cond: &Cond) -> Result<u64> {
        let response = self
            .client
            .count(
                CountPointsBuilder::new(self.collection())
                    .filter(to_filter(cond))
                    .exact(true),
            )
            .await
            .map_err(|e| map_error("count", e))?;
        Ok(response.result.map_or(0, |r| r.count))
    }
}

/// Maps a client error into the library's error: temporary when the server is unreachable,
/// slow, overloaded or rate limiting (`UNAVAILABLE`, `DEADLINE_EXCEEDED`,
/// `RESOURCE_EXHAUSTED`, `ABORTED`, a refused connection), whatever the kind.
fn map_error(action: &'static str, err: QdrantError) -> Error {
    let kind = match &err {
        QdrantError::ResponseError { status } => match status.code() {
            tonic::Code::Unavailable => ErrorKind::Unavailable,
            tonic::Code::DeadlineExceeded => ErrorKind::Timeout,
            tonic::Code::InvalidArgument => ErrorKind::InvalidInput,
            tonic::Code::NotFound => ErrorKind::NotFound,
            tonic::Code::ResourceExhausted => ErrorKind::LimitExceeded,
            tonic::Code::Unimplemented => ErrorKind::Unsupported,
            // The client reports a refused connection as an internal status.
            tonic::Code::Internal if status.message().starts_with("Failed to connect") => {
                ErrorKind::Unavailable
            }
            _ => ErrorKind::Backend,
        },
        QdrantError::ResourceExhaustedError { .. } => ErrorKind::LimitExceeded,
        QdrantError::InvalidUri(_) => ErrorKind::InvalidInput,
        QdrantError::Io(_) => ErrorKind::Unavailable,
        _ => ErrorKind::Backend,
    };
    let temporary = kind.is_temporary()
        || match &err {
            QdrantError::ResponseError { status } => matches!(
                status.code(),
                tonic::Code::Unavailable
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::Aborted
            ),
            QdrantError::ResourceExhaustedError { .. } => true,
            _ => false,
        };
    backend(BACKEND, kind, action, err).with_temporary(temporary)
}

fn json_payload(payload: std::collections::HashMap<String, qdrant::Value>) -> Map<String, Value> {
    Map::from(Payload::from(payload))
}

/// Converts a condition into a Qdrant gRPC condition.
fn to_condition(cond: &Cond) -> Condition {
    match cond {
        Cond::Match { path, value } => {
            let value = match value {
                MatchScalar::Keyword(s) => MatchValue::Keyword(s.clone()),
                MatchScalar::Integer(i) => MatchValue::Integer(*i),
                MatchScalar::Bool(b) => MatchValue::Boolean(*b),
            };
            Condition::from(FieldCondition {
                key: path.clone(),
                r#match: Some(qdrant::Match {
                    match_value: Some(value),
                }),
                ..FieldCondition::default()
            })
        }
        Cond::All(all) => Condition::from(Filter::must(all.iter().map(to_condition))),
        Cond::Any(any) => Condition::from(Filter::should(any.iter().map(to_condition))),
        Cond::Not(inner) => Condition::from(Filter::must_not([to_condition(inner)])),
    }
}

fn to_filter(cond: &Cond) -> Filter {
    Filter::must([to_condition(cond)])
}

fn uuid_of(id: Option<PointId>) -> Option<Uuid> {
    match id?.point_id_options? {
        PointIdOptions::Uuid(s) => s.parse().ok(),
        PointIdOptions::Num(_) => None,
    }
}

#[async_trait]
impl VectorStore for QdrantStore {
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.upsert_op(scope, points)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("upsert")))
    }

    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        self.search_op(scope, query)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("search")))
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        self.get_op(scope, ids)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("get")))
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.delete_op(scope, ids)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("delete")))
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.count_op(scope)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("count")))
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.clear_op(scope)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("clear")))
    }

    fn capabilities(&self) -> VectorCapabilities {
        VectorCapabilities::none()
            .with_deletes_matching(true)
            .with_searches_matching(true)
    }

    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        self.search_matching_op(filter, query)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("search_matching")))
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.delete_matching_op(filter)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("delete_matching")))
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.count_matching_op(filter)
            .await
            .map_err(|e| self.scrub(e.with_backend(BACKEND).with_operation("count_matching")))
    }
}

// The operations of `VectorStore`: the trait impl above names the backend and the
// operation on their errors.
impl QdrantStore {
    async fn upsert_op(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        let known = match self.known_dimensions().await? {
            Some(d) => Some(d),
            None => self.state()?.dimensions,
        };
        let Some(batch_dims) = check_vectors(points.iter().map(|p| p.vector.as_slice()), known)?
        else {
            return Ok(());
        };
        check_norms(points.iter().map(|p| p.vector.as_slice()))?;
        if points.is_empty() {
            return Ok(());
        }
        let dims = self.ensure_collection(batch_dims).await?;
        if dims != batch_dims {
            return Err(Error::invalid_input(format!(
                "a vector has {batch_dims} dimensions; this store holds {dims}"
            )));
        }
        let key = scope.key();
        for chunk in points.chunks(self.config.upsert_batch_size.max(1)) {
            let batch: Vec<PointStruct> = chunk
                .iter()
                .map(|p| {
                    PointStruct::new(
                        qdrant_point_id(&key, p.id).to_string(),
                        p.vector.clone(),
                        Payload::from(stored_payload(scope, &key, p)),
                    )
                })
                .collect();
            self.client
                .upsert_points(UpsertPointsBuilder::new(self.collection(), batch).wait(true))
                .await
                .map_err(|e| map_error("upsert", e))?;
        }
        Ok(())
    }

    async fn search_op(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        let key = scope.key();
        let cond = scoped(&key, query.filter.as_ref())?;
        self.search_where(&cond, query, |score, payload| {
            scored_hit(&key, score, payload)
        })
        .await
    }

    async fn search_matching_op(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        let cond = matching(filter, query.filter.as_ref())?;
        self.search_where(&cond, query, |score, payload| {
            scoped_hit(filter, score, payload)
        })
        .await
    }

    /// The best `query.top_k` points meeting `cond`, each read by `hit` (which leaves out a
    /// point it cannot read), ties at the boundary settled by fetching more.
    async fn search_where<H: Ranked>(
        &self,
        cond: &Cond,
        query: &VectorQuery,
        hit: impl Fn(f32, Map<String, Value>) -> Option<H>,
    ) -> Result<Vec<H>> {
        let known = self.known_dimensions().await?;
        check_vectors([query.vector.as_slice()], known)?;
        check_norms([query.vector.as_slice()])?;
        if query.top_k == 0 || known.is_none() {
            return Ok(Vec::new());
        }
        let filter = to_filter(cond);
        let mut limit = query.top_k;
        loop {
            let mut request =
                SearchPointsBuilder::new(self.collection(), query.vector.clone(), limit as u64)
                    .filter(filter.clone())
                    .with_payload(true);
            if let Some(min) = query.min_score {
                request = request.score_threshold(min);
            }
            let found = self
                .client
                .search_points(request)
                .await
                .map_err(|e| map_error("search", e))?
                .result;
            let hits = found
                .into_iter()
                .map(|p| {
                    let found = uuid_of(p.id).and_then(|_| hit(p.score, json_payload(p.payload)));
                    (p.score, found)
                })
                .collect();
            match settle(hits, limit, query) {
                Round::Done(results) => return Ok(results),
                Round::Again(next) => limit = next,
            }
        }
    }

    async fn get_op(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        if ids.is_empty() || self.known_dimensions().await?.is_none() {
            return Ok(Vec::new());
        }
        self.retrieve(&scope.key(), ids).await
    }

    async fn delete_op(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        if ids.is_empty() || self.known_dimensions().await?.is_none() {
            return Ok(0);
        }
        let key = scope.key();
        let existing = self.retrieve(&key, ids).await?;
        if existing.is_empty() {
            return Ok(0);
        }
        let qids: Vec<PointId> = existing
            .iter()
            .map(|p| PointId::from(qdrant_point_id(&key, p.id).to_string()))
            .collect();
        self.client
            .delete_points(
                DeletePointsBuilder::new(self.collection())
                    .points(PointsIdsList { ids: qids })
                    .wait(true),
            )
            .await
            .map_err(|e| map_error("delete", e))?;
        Ok(existing.len() as u64)
    }

    async fn count_op(&self, scope: &Scope) -> Result<u64> {
        if self.known_dimensions().await?.is_none() {
            return Ok(0);
        }
        self.count_key(&scope.key()).await
    }

    async fn count_matching_op(&self, filter: &ScopeFilter) -> Result<u64> {
        if self.known_dimensions().await?.is_none() {
            return Ok(0);
        }
        self.count_where(&Cond::forget(filter)).await
    }

    async fn delete_matching_op(&self, filter: &ScopeFilter) -> Result<u64> {
        if self.known_dimensions().await?.is_none() {
            return Ok(0);
        }
        let cond = Cond::forget(filter);
        let n = self.count_where(&cond).await?;
        if n > 0 {
            self.client
                .delete_points(
                    DeletePointsBuilder::new(self.collection())
                        .points(to_filter(&cond))
                        .wait(true),
                )
                .await
                .map_err(|e| map_error("delete matching", e))?;
        }
        Ok(n)
    }

    async fn clear_op(&self, scope: &Scope) -> Result<u64> {
        if self.known_dimensions().await?.is_none() {
            return Ok(0);
        }
        let key = scope.key();
        let n = self.count_key(&key).await?;
        if n > 0 {
            self.client
                .delete_points(
                    DeletePointsBuilder::new(self.collection())
                        .points(to_filter(&Cond::scope(&key)))
                        .wait(true),
                )
                .await
                .map_err(|e| map_error("clear", e))?;
        }
        Ok(n)
    }
}
