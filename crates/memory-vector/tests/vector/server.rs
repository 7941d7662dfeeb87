//! The vector conformance suite on [`QdrantStore`], against a gRPC server started on 127.0.0.1
//! by the test: it implements the server traits qdrant-client itself generates (health check,
//! collections, upsert, search, query, get, delete, scroll, count, payload indexes) on top of
//! Qdrant's embedded engine, so requests travel through the real client, real protobuf and
//! real transport and are answered with Qdrant's own search semantics.
//!
//! With `QDRANT_URL` set (and `QDRANT_API_KEY` if the server needs one), the suite also runs
//! against that real server, in a fresh collection.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use memory_core::{ErrorKind, VectorStore};
use memory_vector::{QdrantStore, QdrantStoreConfig};
use qdrant_client::Payload;
use qdrant_client::qdrant::collections_server::{Collections, CollectionsServer};
use qdrant_client::qdrant::points_server::{Points, PointsServer};
use qdrant_client::qdrant::qdrant_server::{Qdrant as QdrantService, QdrantServer};
use qdrant_client::qdrant::{self as pb};
use qdrant_edge as edge;
use tonic::{Request, Response, Status};
use uuid::Uuid;

const API_KEY: &str = "test-api-key";

/// Qdrant's gRPC API over embedded engine shards, one per collection.
#[derive(Clone)]
struct FakeQdrant {
    root: PathBuf,
    collections: Arc<Mutex<CollectionMap>>,
}

/// The collections by name: their vector size and shard.
type CollectionMap = HashMap<String, (u64, Arc<edge::EdgeShard>)>;

/// A nearest-neighbour search, as `search` and `query` ask it.
struct Nearest<'a> {
    collection: &'a str,
    vector: Vec<f32>,
    filter: Option<&'a pb::Filter>,
    limit: u64,
    offset: u64,
    score_threshold: Option<f32>,
    with_payload: bool,
}

/// The [`Nearest`] search that the request `$r` (a `search` or a `query`: the fields have the
/// same names) asks with `vector` and `limit`.
macro_rules! nearest {
    ($r:expr, $vector:expr, $limit:expr) => {
        Nearest {
            collection: &$r.collection_name,
            vector: $vector,
            filter: $r.filter.as_ref(),
            limit: $limit,
            offset: $r.offset.unwrap_or(0),
            score_threshold: $r.score_threshold,
            with_payload: wants_payload($r.with_payload.as_ref()),
        }
    };
}

type Rpc<T> = Result<Response<T>, Status>;

/// The limit of every search each collection was asked, in order (collections are unique per
/// test).
static LIMITS: std::sync::LazyLock<Mutex<HashMap<String, Vec<u64>>>> =
    std::sync::LazyLock::new(Mutex::default);

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

impl FakeQdrant {
    /// The collections, locked.
    fn collections(&self) -> Result<std::sync::MutexGuard<'_, CollectionMap>, Status> {
        self.collections.lock().map_err(internal)
    }

    fn shard(&self, name: &str) -> Result<(u64, Arc<edge::EdgeShard>), Status> {
        self.collections()?
            .get(name)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("Collection `{name}` doesn't exist!")))
    }
}

fn point_id(id: &pb::PointId) -> Result<edge::PointId, Status> {
    match &id.point_id_options {
        Some(pb::point_id::PointIdOptions::Uuid(s)) => s
            .parse::<Uuid>()
            .map(edge::PointId::Uuid)
            .map_err(|e| Status::invalid_argument(e.to_string())),
        Some(pb::point_id::PointIdOptions::Num(n)) => Ok(edge::PointId::NumId(*n)),
        None => Err(Status::invalid_argument("a point id is empty")),
    }
}

fn pb_point_id(id: edge::PointId) -> pb::PointId {
    match id {
        edge::PointId::Uuid(u) => pb::PointId::from(u.to_string()),
        edge::PointId::NumId(n) => pb::PointId::from(n),
    }
}

fn to_edge_payload(payload: HashMap<String, pb::Value>) -> edge::Payload {
    edge::Payload(serde_json::Map::from(Payload::from(payload)))
}

fn to_pb_payload(payload: Option<edge::Payload>) -> HashMap<String, pb::Value> {
    HashMap::from(Payload::from(payload.map(|p| p.0).unwrap_or_default()))
}

fn condition(c: &pb::Condition) -> Result<edge::Condition, Status> {
    use pb::condition::ConditionOneOf;
    use pb::r#match::MatchValue;
    match &c.condition_one_of {
        Some(ConditionOneOf::Field(field)) => {
            let key = field
                .key
                .parse()
                .map_err(|()| Status::invalid_argument(format!("bad key {}", field.key)))?;
            let value = match field.r#match.as_ref().and_then(|m| m.match_value.as_ref()) {
                Some(MatchValue::Keyword(s)) => edge::ValueVariants::String(s.clone()),
                Some(MatchValue::Integer(i)) => edge::ValueVariants::Integer(*i),
                Some(MatchValue::Boolean(b)) => edge::ValueVariants::Bool(*b),
                _ => return Err(Status::unimplemented("only keyword/integer/bool matches")),
            };
            Ok(edge::Condition::Field(edge::FieldCondition::new_match(
                key,
                edge::Match::new_value(value),
            )))
        }
        Some(ConditionOneOf::Filter(f)) => Ok(edge::Condition::Filter(filter(f)?)),
        _ => Err(Status::unimplemented("only field and filter conditions")),
    }
}

fn filter(f: &pb::Filter) -> Result<edge::Filter, Status> {
    let list = |conds: &[pb::Condition]| -> Result<Option<Vec<edge::Condition>>, Status> {
        if conds.is_empty() {
            return Ok(None);
        }
        conds
            .iter()
            .map(condition)
            .collect::<Result<_, _>>()
            .map(Some)
    };
    if f.min_should.is_some() {
        return Err(Status::unimplemented("min_should"));
    }
    Ok(edge::Filter {
        should: list(&f.should)?,
        min_should: None,
        must: list(&f.must)?,
        must_not: list(&f.must_not)?,
    })
}

fn dense(vectors: Option<pb::Vectors>) -> Result<Vec<f32>, Status> {
    match vectors.and_then(|v| v.vectors_options) {
        Some(pb::vectors::VectorsOptions::Vector(v)) => match v.vector {
            Some(pb::vector::Vector::Dense(d)) => Ok(d.data),
            None =>
            {
                #[allow(deprecated)]
                Ok(v.data)
            }
            _ => Err(Status::unimplemented("only dense vectors")),
        },
        _ => Err(Status::invalid_argument(
            "a point needs one unnamed dense vector",
        )),
    }
}

/// The points of `records` as Qdrant returns them: id and payload, no vectors.
fn retrieved(records: Vec<edge::Record>) -> Vec<pb::RetrievedPoint> {
    records
        .into_iter()
        .map(|r| pb::RetrievedPoint {
            id: Some(pb_point_id(r.id)),
            payload: to_pb_payload(r.payload),
            vectors: None,
            shard_key: None,
            order_value: None,
        })
        .collect()
}

fn updated() -> pb::PointsOperationResponse {
    pb::PointsOperationResponse {
        result: Some(pb::UpdateResult {
            operation_id: Some(0),
            status: pb::UpdateStatus::Completed as i32,
        }),
        time: 0.0,
        usage: None,
    }
}

fn wants_payload(selector: Option<&pb::WithPayloadSelector>) -> bool {
    matches!(
        selector.and_then(|s| s.selector_options.as_ref()),
        Some(pb::with_payload_selector::SelectorOptions::Enable(true))
    )
}

impl FakeQdrant {
    fn search_shard(
        &self,
        Nearest {
            collection,
            vector,
            filter: f,
            limit,
            offset,
            score_threshold,
            with_payload,
        }: Nearest<'_>,
    ) -> Result<Vec<pb::ScoredPoint>, Status> {
        LIMITS
            .lock()
            .map_err(internal)?
            .entry(collection.to_owned())
            .or_default()
            .push(limit);
        let (size, shard) = self.shard(collection)?;
        if vector.len() as u64 != size {
            return Err(Status::invalid_argument(format!(
                "Wrong input: Vector dimension error: expected dim: {size}, got {}",
                vector.len()
            )));
        }
        let found = shard
            .search(edge::SearchRequest {
                query: edge::QueryEnum::Nearest(edge::NamedQuery {
                    query: edge::VectorInternal::Dense(vector),
                    using: None,
                }),
                filter: f.map(filter).transpose()?,
                params: None,
                limit: limit as usize,
                offset: offset as usize,
                with_payload: Some(edge::WithPayloadInterface::Bool(with_payload)),
                with_vector: Some(edge::WithVector::Bool(false)),
                score_threshold,
            })
            .map_err(internal)?;
        Ok(found
            .into_iter()
            .map(|p| pb::ScoredPoint {
                id: Some(pb_point_id(p.id)),
                payload: to_pb_payload(p.payload),
                score: p.score,
                version: p.version,
                vectors: None,
                shard_key: None,
                order_value: None,
            })
            .collect())
    }
}

/// `#[tonic::async_trait] impl $service for FakeQdrant`: the RPCs the store calls, each
/// answered by a method of `FakeQdrant`, and every other RPC of the service answering
/// `unimplemented` with its name.
macro_rules! fake_service {
    (
        impl $service:ident {
            $($rpc:ident($rpc_request:ident) -> $rpc_reply:ident = $handler:ident;)*
        }
        unimplemented { $($name:ident($request:ident) -> $reply:ident;)* }
    ) => {
        #[tonic::async_trait]
        impl $service for FakeQdrant {
            $(
                async fn $rpc(&self, request: Request<pb::$rpc_request>) -> Rpc<pb::$rpc_reply> {
                    self.$handler(request).await
                }
            )*
            $(
                async fn $name(&self, _: Request<pb::$request>) -> Rpc<pb::$reply> {
                    Err(Status::unimplemented(stringify!($name)))
                }
            )*
        }
    };
}

#[tonic::async_trait]
impl QdrantService for FakeQdrant {
    async fn health_check(&self, _: Request<pb::HealthCheckRequest>) -> Rpc<pb::HealthCheckReply> {
        Ok(Response::new(pb::HealthCheckReply {
            title: "fake qdrant over qdrant-edge".into(),
            version: "1.20.0".into(),
            commit: None,
        }))
    }
}

/// The Collections RPCs the store calls.
impl FakeQdrant {
    async fn collection_get(
        &self,
        request: Request<pb::GetCollectionInfoRequest>,
    ) -> Rpc<pb::GetCollectionInfoResponse> {
        let (size, shard) = self.shard(&request.into_inner().collection_name)?;
        let vectors_config = pb::VectorsConfig {
            config: Some(pb::vectors_config::Config::Params(pb::VectorParams {
                size,
                distance: pb::Distance::Cosine as i32,
                ..Default::default()
            })),
        };
        Ok(Response::new(pb::GetCollectionInfoResponse {
            result: Some(pb::CollectionInfo {
                status: pb::CollectionStatus::Green as i32,
                points_count: Some(shard.info().points_count as u64),
                config: Some(pb::CollectionConfig {
                    params: Some(pb::CollectionParams {
                        shard_number: 1,
                        vectors_config: Some(vectors_config),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            time: 0.0,
        }))
    }

    async fn collection_list(
        &self,
        _: Request<pb::ListCollectionsRequest>,
    ) -> Rpc<pb::ListCollectionsResponse> {
        let collections = self
            .collections()?
            .keys()
            .map(|name| pb::CollectionDescription { name: name.clone() })
            .collect();
        Ok(Response::new(pb::ListCollectionsResponse {
            collections,
            time: 0.0,
        }))
    }

    async fn collection_create(
        &self,
        request: Request<pb::CreateCollection>,
    ) -> Rpc<pb::CollectionOperationResponse> {
        let request = request.into_inner();
        let size = match request.vectors_config.and_then(|v| v.config) {
            Some(pb::vectors_config::Config::Params(p))
                if p.distance == pb::Distance::Cosine as i32 =>
            {
                p.size
            }
            _ => return Err(Status::unimplemented("only one unnamed cosine vector")),
        };
        let mut collections = self.collections()?;
        if collections.contains_key(&request.collection_name) {
            return Err(Status::already_exists(format!(
                "Collection `{}` already exists!",
                request.collection_name
            )));
        }
        let config = edge::EdgeConfigBuilder::new()
            .vector(
                edge::DEFAULT_VECTOR_NAME,
                edge::EdgeVectorParamsBuilder::new(size as usize, edge::Distance::Cosine).build(),
            )
            .build();
        let dir = self.root.join(&request.collection_name);
        std::fs::create_dir_all(&dir).map_err(internal)?;
        let shard = edge::EdgeShard::new(&dir, config).map_err(internal)?;
        collections.insert(request.collection_name, (size, Arc::new(shard)));
        Ok(Response::new(pb::CollectionOperationResponse {
            result: true,
            time: 0.0,
        }))
    }

    async fn collection_delete(
        &self,
        request: Request<pb::DeleteCollection>,
    ) -> Rpc<pb::CollectionOperationResponse> {
        let name = request.into_inner().collection_name;
        let removed = self.collections()?.remove(&name).is_some();
        Ok(Response::new(pb::CollectionOperationResponse {
            result: removed,
            time: 0.0,
        }))
    }

    async fn has_collection(
        &self,
        request: Request<pb::CollectionExistsRequest>,
    ) -> Rpc<pb::CollectionExistsResponse> {
        let name = request.into_inner().collection_name;
        let exists = self.collections()?.contains_key(&name);
        Ok(Response::new(pb::CollectionExistsResponse {
            result: Some(pb::CollectionExists { exists }),
            time: 0.0,
        }))
    }
}

fake_service! {
    impl Collections {
        get(GetCollectionInfoRequest) -> GetCollectionInfoResponse = collection_get;
        list(ListCollectionsRequest) -> ListCollectionsResponse = collection_list;
        create(CreateCollection) -> CollectionOperationResponse = collection_create;
        delete(DeleteCollection) -> CollectionOperationResponse = collection_delete;
        collection_exists(CollectionExistsRequest)
            -> CollectionExistsResponse = has_collection;
    }
    // Not used by QdrantStore.
    unimplemented {
        update(UpdateCollection) -> CollectionOperationResponse;
        update_aliases(ChangeAliases) -> CollectionOperationResponse;
        list_collection_aliases(ListCollectionAliasesRequest) -> ListAliasesResponse;
        list_aliases(ListAliasesRequest) -> ListAliasesResponse;
        collection_cluster_info(CollectionClusterInfoRequest) -> CollectionClusterInfoResponse;
        update_collection_cluster_setup(UpdateCollectionClusterSetupRequest)
            -> UpdateCollectionClusterSetupResponse;
        create_shard_key(CreateShardKeyRequest) -> CreateShardKeyResponse;
        delete_shard_key(DeleteShardKeyRequest) -> DeleteShardKeyResponse;
        list_shard_keys(ListShardKeysRequest) -> ListShardKeysResponse;
    }
}

/// The Points RPCs the store calls.
impl FakeQdrant {
    async fn points_upsert(
        &self,
        request: Request<pb::UpsertPoints>,
    ) -> Rpc<pb::PointsOperationResponse> {
        let request = request.into_inner();
        let (size, shard) = self.shard(&request.collection_name)?;
        let mut points = Vec::with_capacity(request.points.len());
        for p in request.points {
            let id = point_id(
                p.id.as_ref()
                    .ok_or_else(|| Status::invalid_argument("a point has no id"))?,
            )?;
            let vector = dense(p.vectors)?;
            if vector.len() as u64 != size {
                return Err(Status::invalid_argument(format!(
                    "Wrong input: Vector dimension error: expected dim: {size}, got {}",
                    vector.len()
                )));
            }
            points.push(edge::PointStructPersisted {
                id,
                vector: edge::VectorStructPersisted::Single(vector),
                payload: Some(to_edge_payload(p.payload)),
            });
        }
        shard
            .update(edge::UpdateOperation::PointOperation(
                edge::PointOperations::UpsertPoints(edge::PointInsertOperations::PointsList(
                    points,
                )),
            ))
            .map_err(internal)?;
        Ok(Response::new(updated()))
    }

    async fn points_delete(
        &self,
        request: Request<pb::DeletePoints>,
    ) -> Rpc<pb::PointsOperationResponse> {
        let request = request.into_inner();
        let (_, shard) = self.shard(&request.collection_name)?;
        let op = match request.points.and_then(|p| p.points_selector_one_of) {
            Some(pb::points_selector::PointsSelectorOneOf::Points(list)) => {
                edge::PointOperations::DeletePoints {
                    ids: list.ids.iter().map(point_id).collect::<Result<_, _>>()?,
                }
            }
            Some(pb::points_selector::PointsSelectorOneOf::Filter(f)) => {
                edge::PointOperations::DeletePointsByFilter(filter(&f)?)
            }
            None => return Err(Status::invalid_argument("no points selected")),
        };
        shard
            .update(edge::UpdateOperation::PointOperation(op))
            .map_err(internal)?;
        Ok(Response::new(updated()))
    }

    async fn points_get(&self, request: Request<pb::GetPoints>) -> Rpc<pb::GetResponse> {
        let request = request.into_inner();
        let (_, shard) = self.shard(&request.collection_name)?;
        let ids: Vec<edge::PointId> = request.ids.iter().map(point_id).collect::<Result<_, _>>()?;
        let with_payload = wants_payload(request.with_payload.as_ref());
        let records = shard
            .retrieve(
                &ids,
                Some(edge::WithPayloadInterface::Bool(with_payload)),
                Some(edge::WithVector::Bool(false)),
            )
            .map_err(internal)?;
        Ok(Response::new(pb::GetResponse {
            result: retrieved(records),
            time: 0.0,
            usage: None,
        }))
    }

    async fn points_create_field_index(
        &self,
        request: Request<pb::CreateFieldIndexCollection>,
    ) -> Rpc<pb::PointsOperationResponse> {
        let request = request.into_inner();
        let (_, shard) = self.shard(&request.collection_name)?;
        if request.field_type != Some(pb::FieldType::Keyword as i32) {
            return Err(Status::unimplemented("only keyword indexes"));
        }
        let field_name = request
            .field_name
            .parse()
            .map_err(|()| Status::invalid_argument("bad field name"))?;
        shard
            .update(edge::UpdateOperation::FieldIndexOperation(
                edge::FieldIndexOperations::CreateIndex(edge::CreateIndex {
                    field_name,
                    field_schema: Some(edge::PayloadFieldSchema::FieldType(
                        edge::PayloadSchemaType::Keyword,
                    )),
                }),
            ))
            .map_err(internal)?;
        Ok(Response::new(updated()))
    }

    async fn points_search(&self, request: Request<pb::SearchPoints>) -> Rpc<pb::SearchResponse> {
        let r = request.into_inner();
        if r.vector_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return Err(Status::unimplemented("named vectors"));
        }
        let result = self.search_shard(nearest!(r, r.vector, r.limit))?;
        Ok(Response::new(pb::SearchResponse {
            result,
            time: 0.0,
            usage: None,
        }))
    }

    async fn points_query(&self, request: Request<pb::QueryPoints>) -> Rpc<pb::QueryResponse> {
        let r = request.into_inner();
        let vector = match r.query.and_then(|q| q.variant) {
            Some(pb::query::Variant::Nearest(input)) => match input.variant {
                Some(pb::vector_input::Variant::Dense(d)) => d.data,
                _ => return Err(Status::unimplemented("only nearest dense queries")),
            },
            _ => return Err(Status::unimplemented("only nearest queries")),
        };
        if !r.prefetch.is_empty() || r.using.as_deref().is_some_and(|n| !n.is_empty()) {
            return Err(Status::unimplemented("prefetch and named vectors"));
        }
        let result = self.search_shard(nearest!(r, vector, r.limit.unwrap_or(10)))?;
        Ok(Response::new(pb::QueryResponse {
            result,
            time: 0.0,
            usage: None,
        }))
    }

    async fn points_scroll(&self, request: Request<pb::ScrollPoints>) -> Rpc<pb::ScrollResponse> {
        let r = request.into_inner();
        let (_, shard) = self.shard(&r.collection_name)?;
        let (records, next) = shard
            .scroll(edge::ScrollRequest {
                offset: r.offset.as_ref().map(point_id).transpose()?,
                limit: Some(r.limit.unwrap_or(10) as usize),
                filter: r.filter.as_ref().map(filter).transpose()?,
                with_payload: Some(edge::WithPayloadInterface::Bool(wants_payload(
                    r.with_payload.as_ref(),
                ))),
                with_vector: edge::WithVector::Bool(false),
                order_by: None,
            })
            .map_err(internal)?;
        Ok(Response::new(pb::ScrollResponse {
            next_page_offset: next.map(pb_point_id),
            result: retrieved(records),
            time: 0.0,
            usage: None,
        }))
    }

    async fn points_count(&self, request: Request<pb::CountPoints>) -> Rpc<pb::CountResponse> {
        let r = request.into_inner();
        let (_, shard) = self.shard(&r.collection_name)?;
        let count = shard
            .count(edge::CountRequest {
                filter: r.filter.as_ref().map(filter).transpose()?,
                exact: r.exact.unwrap_or(true),
            })
            .map_err(internal)?;
        Ok(Response::new(pb::CountResponse {
            result: Some(pb::CountResult {
                count: count as u64,
            }),
            time: 0.0,
            usage: None,
        }))
    }
}

fake_service! {
    impl Points {
        upsert(UpsertPoints) -> PointsOperationResponse = points_upsert;
        delete(DeletePoints) -> PointsOperationResponse = points_delete;
        get(GetPoints) -> GetResponse = points_get;
        create_field_index(CreateFieldIndexCollection)
            -> PointsOperationResponse = points_create_field_index;
        search(SearchPoints) -> SearchResponse = points_search;
        query(QueryPoints) -> QueryResponse = points_query;
        scroll(ScrollPoints) -> ScrollResponse = points_scroll;
        count(CountPoints) -> CountResponse = points_count;
    }
    // Not used by QdrantStore.
    unimplemented {
        update_vectors(UpdatePointVectors) -> PointsOperationResponse;
        delete_vectors(DeletePointVectors) -> PointsOperationResponse;
        set_payload(SetPayloadPoints) -> PointsOperationResponse;
        overwrite_payload(SetPayloadPoints) -> PointsOperationResponse;
        delete_payload(DeletePayloadPoints) -> PointsOperationResponse;
        clear_payload(ClearPayloadPoints) -> PointsOperationResponse;
        delete_field_index(DeleteFieldIndexCollection) -> PointsOperationResponse;
        create_vector_name(CreateVectorNameRequest) -> PointsOperationResponse;
        delete_vector_name(DeleteVectorNameRequest) -> PointsOperationResponse;
        search_batch(SearchBatchPoints) -> SearchBatchResponse;
        search_groups(SearchPointGroups) -> SearchGroupsResponse;
        recommend(RecommendPoints) -> RecommendResponse;
        recommend_batch(RecommendBatchPoints) -> RecommendBatchResponse;
        recommend_groups(RecommendPointGroups) -> RecommendGroupsResponse;
        discover(DiscoverPoints) -> DiscoverResponse;
        discover_batch(DiscoverBatchPoints) -> DiscoverBatchResponse;
        update_batch(UpdateBatchPoints) -> UpdateBatchResponse;
        query_batch(QueryBatchPoints) -> QueryBatchResponse;
        query_groups(QueryPointGroups) -> QueryGroupsResponse;
        facet(FacetCounts) -> FacetResponse;
        search_matrix_pairs(SearchMatrixPoints) -> SearchMatrixPairsResponse;
        search_matrix_offsets(SearchMatrixPoints) -> SearchMatrixOffsetsResponse;
    }
}

/// Requires the test API key on every request, as a Qdrant server configured with one does.
#[allow(clippy::result_large_err)]
fn check_api_key(request: Request<()>) -> Result<Request<()>, Status> {
    match request
        .metadata()
        .get("api-key")
        .and_then(|v| v.to_str().ok())
    {
        Some(API_KEY) => Ok(request),
        _ => Err(Status::unauthenticated("Must provide an API key")),
    }
}

/// Starts the fake server on 127.0.0.1 on the current runtime; returns its URL.
async fn start_fake_server() -> String {
    let root = tempfile::Builder::new()
        .prefix("fake-qdrant-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map(tempfile::TempDir::keep)
        .unwrap();
    let fake = FakeQdrant {
        root,
        collections: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(QdrantServer::with_interceptor(fake.clone(), check_api_key))
        .add_service(CollectionsServer::with_interceptor(
            fake.clone(),
            check_api_key,
        ))
        .add_service(PointsServer::with_interceptor(fake, check_api_key))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    format!("http://{addr}")
}

/// A store on a fresh fake server (a collection per test, as on a shared server).
async fn fake_server_store() -> QdrantStore {
    let url = start_fake_server().await;
    let config = QdrantStoreConfig::from_url(url)
        .unwrap()
        .with_api_key(API_KEY)
        .with_collection(format!("test_{}", Uuid::new_v4().simple()))
        .with_upsert_batch_size(2);
    QdrantStore::connect(config).unwrap()
}

memory_testkit::vector_store_tests!(
    mod qdrant_store_on_fake_grpc_server,
    async { fake_server_store().await }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_checks_on_one_fake_server_store() {
    memory_testkit::run_all_vector_checks(Arc::new(fake_server_store().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_key_is_refused_and_not_printed() {
    let url = start_fake_server().await;
    let config = QdrantStoreConfig::from_url(url)
        .unwrap()
        .with_api_key("wrong-key");
    let store = QdrantStore::connect(config).unwrap();
    assert!(!format!("{store:?}").contains("wrong-key"));
    let scope = memory_core::Scope::session("s").unwrap();
    let err = store.count(&scope).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let store = QdrantStore::connect(QdrantStoreConfig::from_url(url).unwrap()).unwrap();
    let scope = memory_core::Scope::session("s").unwrap();
    let err = store.count(&scope).await.unwrap_err();
    assert!(err.is_temporary(), "{err:?}");
    assert_eq!(err.backend(), Some("qdrant"), "{err}");
    assert_eq!(err.operation(), Some("count"), "{err}");
    assert!(err.to_string().contains("(qdrant count)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_dimension_creates_the_collection_with_indexes() {
    let url = start_fake_server().await;
    let collection = format!("dims_{}", Uuid::new_v4().simple());
    let store = QdrantStore::connect(
        QdrantStoreConfig::from_url(url.clone())
            .unwrap()
            .with_api_key(API_KEY)
            .with_collection(collection.clone())
            .with_dimensions(4),
    )
    .unwrap();
    let scope = memory_core::Scope::session("s").unwrap();
    let bad = memory_core::VectorPoint {
        id: Uuid::new_v4(),
        vector: vec![1.0, 0.0, 0.0],
        payload: serde_json::Map::new(),
    };
    let err = store.upsert(&scope, &[bad]).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::InvalidInput,
        "the configured dimension holds"
    );
    let client = qdrant_client::Qdrant::from_url(&url)
        .api_key(API_KEY)
        .skip_compatibility_check()
        .build()
        .unwrap();
    assert!(!client.collection_exists(&collection).await.unwrap());
}

/// The same suite against a real Qdrant server when `QDRANT_URL` is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_server_when_qdrant_url_is_set() {
    let Ok(config) = QdrantStoreConfig::from_env() else {
        eprintln!("QDRANT_URL is not set: the suite ran against the fake server only");
        return;
    };
    let collection = format!("agent_memory_test_{}", Uuid::new_v4().simple());
    let store = QdrantStore::connect(config.with_collection(collection.clone())).unwrap();
    memory_testkit::run_all_vector_checks(Arc::new(store.clone())).await;
    store.client().delete_collection(collection).await.unwrap();
}

/// Every text of `err` and its sources.
fn all_text(err: &memory_core::Error) -> String {
    let mut out = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        out.push_str(&format!(" | {s} | {s:?}"));
        source = s.source();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_password_never_shows_in_debug_or_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let live = start_fake_server().await;
    for url in [
        format!("http://admin:s3cr%2Ft%3Fpw@{addr}"),
        format!("http://admin:s3cr/t?pw#x@{addr}"),
        live.replace("http://", "http://admin:s3cr%2Ft%3Fpw@"),
    ] {
        let config = match QdrantStoreConfig::from_url(url.clone()) {
            Ok(config) => config,
            Err(err) => {
                assert!(!all_text(&err).contains("s3cr"), "{}", all_text(&err));
                continue;
            }
        };
        assert!(!format!("{config:?}").contains("s3cr"), "{config:?}");
        let store = match QdrantStore::connect(config) {
            Ok(store) => store,
            Err(err) => {
                assert!(!all_text(&err).contains("s3cr"), "{}", all_text(&err));
                continue;
            }
        };
        assert!(!format!("{store:?}").contains("s3cr"), "{store:?}");
        let scope = memory_core::Scope::session("s").unwrap();
        let err = store.count(&scope).await.unwrap_err();
        let text = all_text(&err);
        assert!(!text.contains("s3cr"), "{url}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tied_scores_fetch_a_bounded_number_of_points() {
    let store = fake_server_store().await;
    let scope = crate::support::ties::six_hundred_equal_points(&store).await;
    let collection = store.config().collection.clone();
    for query in [vec![0.0, 0.0, 0.0], vec![1.0, 1.0, 1.0]] {
        LIMITS.lock().unwrap().remove(&collection);
        crate::support::ties::assert_top_three_ordered_by_id(&store, &scope, query).await;
        let asked = LIMITS.lock().unwrap().remove(&collection).unwrap();
        // Doubling from 3 up to the cap, 3 + 256: never the whole scope of 600.
        assert_eq!(asked, [3, 6, 12, 24, 48, 96, 192, 259], "{asked:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_vectors_are_invalid_input_at_upsert_and_query() {
    crate::support::overflow::overflowing_vectors_are_invalid_input(&fake_server_store().await)
        .await;
}

use crate::support::forget as forget_checks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_deletes_exactly_the_filtered_scopes() {
    forget_checks::run_forget_checks(Arc::new(fake_server_store().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_in_a_collection_never_created_is_zero() {
    let store = fake_server_store().await;
    let filter = memory_core::ScopeFilter::tenant(memory_core::TenantId::new("acme").unwrap());
    assert_eq!(store.count_matching(&filter).await.unwrap(), 0);
    assert_eq!(store.delete_matching(&filter).await.unwrap(), 0);
}

/// The forget checks against a real Qdrant server when `QDRANT_URL` is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_on_a_real_server_when_qdrant_url_is_set() {
    let Ok(config) = QdrantStoreConfig::from_env() else {
        eprintln!("QDRANT_URL is not set: the forget checks ran against the fake server only");
        return;
    };
    let collection = format!("agent_memory_test_{}", Uuid::new_v4().simple());
    let store = QdrantStore::connect(config.with_collection(collection.clone())).unwrap();
    forget_checks::run_forget_checks(Arc::new(store.clone())).await;
    store.client().delete_collection(collection).await.unwrap();
}
