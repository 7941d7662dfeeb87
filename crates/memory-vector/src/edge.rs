//! [`QdrantEdgeStore`]: Qdrant's engine in-process (the `qdrant-edge` crate), persisted in a
//! directory.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use memory_core::vector::{VectorCapabilities, check_vectors};
use memory_core::{
    Error, ErrorKind, Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorPoint, VectorQuery,
    VectorStore,
};
use qdrant_edge::{
    Condition, DEFAULT_VECTOR_NAME, Distance, EdgeConfigBuilder, EdgeShard,
    EdgeVectorParamsBuilder, FieldCondition, FieldIndexOperations, Filter, Match, NamedQuery,
    Payload, PayloadFieldSchema, PayloadSchemaType, PointId, PointInsertOperations,
    PointOperations, PointStructPersisted, QueryEnum, SearchRequest, UpdateOperation,
    ValueVariants, VectorInternal, VectorStructPersisted, WithPayloadInterface, WithVector,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{backend, join};
use crate::schema::{
    Cond, INDEXED_FIELDS, MatchScalar, Ranked, Round, check_norms, matching, points_in_scope,
    qdrant_point_id, scoped, scoped_hit, scored_hit, settle, stored_payload,
};

/// The backend name the errors of this store carry.
const BACKEND: &str = "qdrant-edge";

/// The file `qdrant-edge` keeps its configuration in, inside the shard directory.
const EDGE_CONFIG_FILE: &str = "edge_config.json";

/// A [`VectorStore`] on Qdrant's own engine, in-process, persisted in a directory: one
/// `qdrant-edge` shard per directory, for a single process and no server.
///
/// The shard is created at the first upsert with that batch's dimension and cosine distance
/// (or at [`open_with_dimensions`](Self::open_with_dimensions)), and loaded again by
/// [`open`](Self::open) on the next run. Every call runs the engine's synchronous API on
/// Tokio's blocking thread pool, never on the async executor's threads, so a Tokio runtime
/// must be running.
///
/// Scopes share the shard: each point stores its scope key in the payload field `scope_key`
/// (keyword-indexed) and every read requires it, whatever filter the caller passes; the stored
/// point id is derived from the scope key and the caller's id (see the crate's storage layout).
///
/// Vectors and ties are handled as `QdrantStore`'s are: an overflowing
/// norm is `InvalidInput`, and ties at the `top_k` boundary are ordered by id among at most
/// `max(4 × top_k, top_k + 256)` points fetched.
///
/// [`delete_matching`](VectorStore::delete_matching) and
/// [`count_matching`](VectorStore::count_matching) are supported: a forget counts the points
/// whose `tenant` (and `user`, `agent`, `session` when named) payload fields match, then
/// deletes them with one delete-by-filter operation.
/// [`search_matching`](VectorStore::search_matching) is supported too: one search on the shard
/// over the points whose scope fields the filter selects (ties by id, then scope key), each hit
/// with the scope it was stored in (a user's memory across their sessions).
///
/// Only one process may open a directory at a time. Cloning shares the same shard.
#[derive(Clone)]
pub struct QdrantEdgeStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    shard: Mutex<Option<Arc<EdgeShard>>>,
}

impl fmt::Debug for QdrantEdgeStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QdrantEdgeStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl QdrantEdgeStore {
    /// Opens the store in `dir`, creating the directory if needed and loading the shard if one
    /// was created there before; otherwise the shard is created at the first upsert.
    ///
    /// # Errors
    /// [`ErrorKind::Backend`] when the directory cannot be created or the shard cannot be
    /// loaded (for example, when another process holds it).
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_inner(dir.as_ref().to_path_buf(), None).await
    }

    /// Opens the store in `dir` as [`open`](Self::open) does, and creates the shard now with
    /// `dimensions` (usually the embedder's) if there is none yet.
    ///
    /// # Errors
    /// As [`open`](Self::open); [`ErrorKind::InvalidInput`] when `dimensions` is 0 or an
    /// existing shard has other dimensions.
    pub async fn open_with_dimensions(dir: impl AsRef<Path>, dimensions: usize) -> Result<Self> {
        if dimensions == 0 {
            return Err(Error::invalid_input(
                "a vector store needs at least 1 dimension",
            ));
        }
        let store = Self::open_inner(dir.as_ref().to_path_buf(), Some(dimensions)).await?;
        if let Some(existing) = store.dimensions()?
            && existing != dimensions
        {
            return Err(Error::invalid_input(format!(
                "the Qdrant edge shard in {} holds vectors of {existing} dimensions, not \
                 {dimensions}",
                store.inner.path.display()
            )));
        }
        Ok(store)
    }

    async fn open_inner(path: PathBuf, dimensions: Option<usize>) -> Result<Self> {
        let dir = path.clone();
        let shard = tokio::task::spawn_blocking(move || -> Result<Option<EdgeShard>> {
            std::fs::create_dir_all(&dir).map_err(|e| {
                backend(
                    BACKEND,
                    ErrorKind::Backend,
                    format!("creating the directory {}", dir.display()),
                    e,
                )
            })?;
            if dir.join(EDGE_CONFIG_FILE).exists() {
                return EdgeShard::load(&dir, None).map(Some).map_err(|e| {
                    backend(BACKEND, ErrorKind::Backend, "loading the edge shard", e)
                });
            }
            dimensions.map(|d| create_shard(&dir, d)).transpose()
        })
        .await
        .map_err(|e| join("opening the Qdrant edge shard", e))??;
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                shard: Mutex::new(shard.map(Arc::new)),
            }),
        })
    }

    /// The directory of the shard.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The dimension of the stored vectors, once the shard exists.
    ///
    /// # Errors
    /// [`ErrorKind::Backend`] if a panic poisoned the store's lock.
    pub fn dimensions(&self) -> Result<Option<usize>> {
        Ok(self.lock()?.as_ref().and_then(|s| shard_dimensions(s)))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<Arc<EdgeShard>>>> {
        lock(&self.inner.shard)
    }

    fn shard(&self) -> Result<Option<Arc<EdgeShard>>> {
        Ok(self.lock()?.clone())
    }

    /// Runs `f` on the shard, on the blocking pool; `None` when there is no shard yet.
    async fn with_shard<T, F>(&self, action: &'static str, f: F) -> Result<Option<T>>
    where
        T: Send + 'static,
        F: FnOnce(&EdgeShard) -> Result<T> + Send + 'static,
    {
        let Some(shard) = self.shard()? else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || f(&shard).map(Some))
            .await
            .map_err(|e| join(action, e))?
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock().map_err(|_| {
        Error::new(
            ErrorKind::Backend,
            "the Qdrant edge store was poisoned by a panic in another thread",
        )
    })
}

fn shard_dimensions(shard: &EdgeShard) -> Option<usize> {
    shard
        .config()
        .vectors
        .get(DEFAULT_VECTOR_NAME)
        .map(|v| v.size)
}

fn create_shard(dir: &Path, dimensions: usize) -> Result<EdgeShard> {
    let config = EdgeConfigBuilder::new()
        .vector(
            DEFAULT_VECTOR_NAME,
            EdgeVectorParamsBuilder::new(dimensions, Distance::Cosine).build(),
        )
        .build();
    let shard = EdgeShard::new(dir, config)
        .map_err(|e| backend(BACKEND, ErrorKind::Backend, "creating the edge shard", e))?;
    for field in INDEXED_FIELDS {
        let field_name = field
            .parse()
            .map_err(|()| Error::new(ErrorKind::Backend, format!("bad field path {field}")))?;
        shard
            .update(UpdateOperation::FieldIndexOperation(
                FieldIndexOperations::CreateIndex(qdrant_edge::CreateIndex {
                    field_name,
                    field_schema: Some(PayloadFieldSchema::FieldType(PayloadSchemaType::Keyword)),
                }),
            ))
            .map_err(|e| backend(BACKEND, ErrorKind::Backend, "creating a payload index", e))?;
    }
    Ok(shard)
}

/// Converts a condition into a Qdrant edge filter condition.
fn to_condition(cond: &Cond) -> Result<Condition> {
    Ok(match cond {
        Cond::Match { path, value } => {
            let key = path.parse().map_err(|()| {
                Error::invalid_input(format!("Qdrant cannot address the payload path {path}"))
            })?;
            let value = match value {
                MatchScalar::Keyword(s) => ValueVariants::String(s.clone()),
                MatchScalar::Integer(i) => ValueVariants::Integer(*i),
                MatchScalar::Bool(b) => ValueVariants::Bool(*b),
            };
            Condition::Field(FieldCondition::new_match(key, Match::new_value(value)))
        }
        Cond::All(all) => Condition::Filter(filter(Some(all), None, None)?),
        Cond::Any(any) => Condition::Filter(filter(None, Some(any), None)?),
        Cond::Not(inner) => Condition::Filter(filter(None, None, Some(inner))?),
    })
}

fn filter(
    must: Option<&[Cond]>,
    should: Option<&[Cond]>,
    must_not: Option<&Cond>,
) -> Result<Filter> {
    let list = |conds: &[Cond]| conds.iter().map(to_condition).collect::<Result<Vec<_>>>();
    Ok(Filter {
        should: should.map(list).transpose()?,
        min_should: None,
        must: must.map(list).transpose()?,
        must_not: must_not
            .map(|c| to_condition(c).map(|c| vec![c]))
            .transpose()?,
    })
}

/// The filter of a whole condition.
fn to_filter(cond: &Cond) -> Result<Filter> {
    filter(Some(std::slice::from_ref(cond)), None, None)
}

fn json_map(payload: Option<Payload>) -> Map<String, Value> {
    payload.map(|p| p.0).unwrap_or_default()
}

/// Reads the points of `ids` in `scope_key`.
fn retrieve(shard: &EdgeShard, scope_key: &str, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
    let qids: Vec<PointId> = ids
        .iter()
        .map(|id| PointId::Uuid(qdrant_point_id(scope_key, *id)))
        .collect();
    let records = shard
        .retrieve(
            &qids,
            Some(WithPayloadInterface::Bool(true)),
            Some(WithVector::Bool(false)),
        )
        .map_err(|e| backend(BACKEND, ErrorKind::Backend, "retrieve", e))?;
    Ok(points_in_scope(
        scope_key,
        ids,
        records.into_iter().map(|r| json_map(r.payload)),
    ))
}

fn count(shard: &EdgeShard, scope_key: &str) -> Result<u64> {
    count_where(shard, &Cond::scope(scope_key))
}

/// The exact number of points meeting `cond`.
fn count_where(shard: &EdgeShard, cond: &Cond) -> Result<u64> {
    shard
        .count(qdrant_edge::CountRequest {
            filter: Some(to_filter(cond)?),
            exact: true,
        })
        .map(|n| n as u64)
        .map_err(|e| backend(BACKEND, ErrorKind::Backend, "count", e))
}

/// Deletes the points meeting `cond`; returns how many there were.
fn delete_where(shard: &EdgeShard, cond: &Cond, action: &'static str) -> Result<u64> {
    let n = count_where(shard, cond)?;
    if n > 0 {
        shard
            .update(UpdateOperation::PointOperation(
                PointOperations::DeletePointsByFilter(to_filter(cond)?),
            ))
            .map_err(|e| backend(BACKEND, ErrorKind::Backend, action, e))?;
    }
    Ok(n)
}

/// The best `query.top_k` points meeting `cond`, each read by `hit` (which leaves out a point
/// it cannot read), ties at the boundary settled by fetching more.
fn search_where<H: Ranked>(
    shard: &EdgeShard,
    cond: &Cond,
    query: &VectorQuery,
    hit: impl Fn(f32, Map<String, Value>) -> Option<H>,
) -> Result<Vec<H>> {
    let filter = to_filter(cond)?;
    let mut limit = query.top_k;
    loop {
        let found = shard
            .search(SearchRequest {
                query: QueryEnum::Nearest(NamedQuery {
                    query: VectorInternal::Dense(query.vector.clone()),
                    using: None,
                }),
                filter: Some(filter.clone()),
                params: None,
                limit,
                offset: 0,
                with_payload: Some(WithPayloadInterface::Bool(true)),
                with_vector: Some(WithVector::Bool(false)),
                score_threshold: query.min_score,
            })
            .map_err(|e| backend(BACKEND, ErrorKind::Backend, "search", e))?;
        let hits = found
            .into_iter()
            .map(|p| (p.score, hit(p.score, json_map(p.payload))))
            .collect();
        match settle(hits, limit, query) {
            Round::Done(results) => return Ok(results),
            Round::Again(next) => limit = next,
        }
    }
}

#[async_trait]
impl VectorStore for QdrantEdgeStore {
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.upsert_op(scope, points)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("upsert"))
    }

    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        self.search_op(scope, query)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("search"))
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        self.get_op(scope, ids)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("get"))
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.delete_op(scope, ids)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("delete"))
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.count_op(scope)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("count"))
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.clear_op(scope)
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("clear"))
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
            .map_err(|e| e.with_backend(BACKEND).with_operation("search_matching"))
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let cond = Cond::forget(filter);
        Ok(self
            .with_shard("delete_matching", move |shard| {
                delete_where(shard, &cond, "delete matching")
            })
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("delete_matching"))?
            .unwrap_or_default())
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let cond = Cond::forget(filter);
        Ok(self
            .with_shard("count_matching", move |shard| count_where(shard, &cond))
            .await
            .map_err(|e| e.with_backend(BACKEND).with_operation("count_matching"))?
            .unwrap_or_default())
    }
}

// The operations of `VectorStore`: the trait impl above names the backend and the
// operation on their errors.
impl QdrantEdgeStore {
    async fn upsert_op(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        let dims = self.dimensions()?;
        let Some(batch_dims) = check_vectors(points.iter().map(|p| p.vector.as_slice()), dims)?
        else {
            return Ok(());
        };
        check_norms(points.iter().map(|p| p.vector.as_slice()))?;
        if points.is_empty() {
            return Ok(());
        }
        let key = scope.key();
        let persisted: Vec<PointStructPersisted> = points
            .iter()
            .map(|p| PointStructPersisted {
                id: PointId::Uuid(qdrant_point_id(&key, p.id)),
                vector: VectorStructPersisted::Single(p.vector.clone()),
                payload: Some(Payload(stored_payload(scope, &key, p))),
            })
            .collect();
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || -> Result<()> {
            let shard = {
                let mut guard = lock(&inner.shard)?;
                match guard.as_ref() {
                    Some(shard) => Arc::clone(shard),
                    None => {
                        let shard = Arc::new(create_shard(&inner.path, batch_dims)?);
                        *guard = Some(Arc::clone(&shard));
                        shard
                    }
                }
            };
            if let Some(d) = shard_dimensions(&shard)
                && d != batch_dims
            {
                return Err(Error::invalid_input(format!(
                    "a vector has {batch_dims} dimensions; this store holds {d}"
                )));
            }
            shard
                .update(UpdateOperation::PointOperation(
                    PointOperations::UpsertPoints(PointInsertOperations::PointsList(persisted)),
                ))
                .map_err(|e| backend(BACKEND, ErrorKind::Backend, "upsert", e))
        })
        .await
        .map_err(|e| join("upsert", e))?
    }

    async fn search_op(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        check_vectors([query.vector.as_slice()], self.dimensions()?)?;
        check_norms([query.vector.as_slice()])?;
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let key = scope.key();
        let cond = scoped(&key, query.filter.as_ref())?;
        let query = query.clone();
        Ok(self
            .with_shard("search", move |shard| {
                search_where(shard, &cond, &query, |score, payload| {
                    scored_hit(&key, score, payload)
                })
            })
            .await?
            .unwrap_or_default())
    }

    async fn search_matching_op(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        check_vectors([query.vector.as_slice()], self.dimensions()?)?;
        check_norms([query.vector.as_slice()])?;
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let cond = matching(filter, query.filter.as_ref())?;
        let (filter, query) = (filter.clone(), query.clone());
        Ok(self
            .with_shard("search_matching", move |shard| {
                search_where(shard, &cond, &query, |score, payload| {
                    scoped_hit(&filter, score, payload)
                })
            })
            .await?
            .unwrap_or_default())
    }

    async fn get_op(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = scope.key();
        let ids = ids.to_vec();
        Ok(self
            .with_shard("get", move |shard| retrieve(shard, &key, &ids))
            .await?
            .unwrap_or_default())
    }

    async fn delete_op(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let key = scope.key();
        let ids = ids.to_vec();
        Ok(self
            .with_shard("delete", move |shard| {
                let existing = retrieve(shard, &key, &ids)?;
                if existing.is_empty() {
                    return Ok(0);
                }
                let qids = existing
                    .iter()
                    .map(|p| PointId::Uuid(qdrant_point_id(&key, p.id)))
                    .collect();
                shard
                    .update(UpdateOperation::PointOperation(
                        PointOperations::DeletePoints { ids: qids },
                    ))
                    .map_err(|e| backend(BACKEND, ErrorKind::Backend, "delete", e))?;
                Ok(existing.len() as u64)
            })
            .await?
            .unwrap_or_default())
    }

    async fn count_op(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        Ok(self
            .with_shard("count", move |shard| count(shard, &key))
            .await?
            .unwrap_or_default())
    }

    async fn clear_op(&self, scope: &Scope) -> Result<u64> {
        let key = scope.key();
        Ok(self
            .with_shard("clear", move |shard| {
                delete_where(shard, &Cond::scope(&key), "clear")
            })
            .await?
            .unwrap_or_default())
    }
}
