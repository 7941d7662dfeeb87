//! The HTTP API: axum routes over [`Ops`], errors as `application/problem+json` (RFC 9457),
//! the OpenAPI 3.1 document at `/openapi.json`, and [`serve`] with graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, ETAG, IF_MATCH};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};

use crate::auth::{Authenticator, Principal};
use crate::config::{ConfigError, ServerConfig};
use crate::error::{ErrorCode, OpError};
use crate::ops::{
    Address, AppendView, CountView, ForgetReceiptView, ForgetRequest, ListRequest,
    MemoryContextView, MemoryPutView, MessageInput, MessageView, Ops, ScopePage, ScopeView,
    SessionView, StoreReceiptView, WindowSpec,
};

/// The media type of error bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// What every handler shares.
#[derive(Debug, Clone)]
struct AppState {
    ops: Ops,
    auth: Arc<Authenticator>,
}

/// An error body (RFC 9457), with the error's `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`urn:agent-memory:problem:<kind>`).
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, as a sentence.
    pub detail: String,
    /// The error kind (`invalid_input`, `not_found`, `forbidden`, `precondition_failed`, ...).
    pub kind: String,
}

/// An error as an HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(pub OpError);

impl From<OpError> for ApiError {
    fn from(error: OpError) -> Self {
        Self(error)
    }
}

/// The HTTP status of an error code.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidInput => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        ErrorCode::LimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::Serialization => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Unsupported => StatusCode::NOT_IMPLEMENTED,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn problem_response(status: StatusCode, kind: &str, detail: String) -> Response {
    let problem = Problem {
        problem_type: format!("urn:agent-memory:problem:{kind}"),
        title: status.canonical_reason().unwrap_or("Error").to_owned(),
        status: status.as_u16(),
        detail,
        kind: kind.to_owned(),
    };
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.code);
        if status.is_server_error() {
            tracing::warn!(kind = self.0.code.as_str(), detail = %self.0.detail, "request failed");
        }
        problem_response(status, self.0.code.as_str(), self.0.detail)
    }
}

type ApiResult<T> = Result<T, ApiError>;

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let header = match parts.headers.get(AUTHORIZATION) {
            Some(value) => Some(value.to_str().map_err(|_| {
                OpError::new(
                    ErrorCode::Unauthorized,
                    "the Authorization header is not visible ASCII",
                )
            })?),
            None => None,
        };
        Ok(state.auth.authenticate(header)?)
    }
}

/// A JSON body whose rejections are problem documents (413 past the body limit).
struct Body<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(json_rejection(&rejection)),
        }
    }
}

fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError(OpError::new(
            ErrorCode::LimitExceeded,
            "the request body is larger than the server's limit",
        ));
    } else {
        ErrorCode::InvalidInput
    };
    let detail = match rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "the request body must be JSON (Content-Type: application/json)".to_owned()
        }
        JsonRejection::JsonSyntaxError(_) => "the request body is not valid JSON".to_owned(),
        other => format!("the request body is invalid: {}", other.body_text()),
    };
    ApiError(OpError::new(code, detail))
}

/// A query string whose rejections are problem documents.
struct Q<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Q(q.0))
            .map_err(|e: QueryRejection| {
                ApiError(OpError::invalid(format!(
                    "the query string is invalid: {}",
                    e.body_text()
                )))
            })
    }
}

/// A path parameter whose rejections are problem documents.
struct P<T>(T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| P(p.0))
            .map_err(|e: PathRejection| {
                ApiError(OpError::invalid(format!(
                    "the path is invalid: {}",
                    e.body_text()
                )))
            })
    }
}

/// The optional parts of a thread's or session's scope, from the query string.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScopeQuery {
    /// The user (a user-bound token's user when omitted; another one is 403).
    pub user: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The source (default `history`).
    pub source: Option<String>,
}

impl ScopeQuery {
    fn address(self, session: String) -> Address {
        Address {
            session,
            user: self.user,
            agent: self.agent,
            source: self.source,
        }
    }
}

/// A read's scope and window: at most one of `last`, `after`, `token_budget`, `archived`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// The user.
    pub user: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The source.
    pub source: Option<String>,
    /// Only the last N active messages.
    pub last: Option<usize>,
    /// Only active messages with a seq greater than this.
    pub after: Option<u64>,
    /// The newest active messages within this many tokens.
    pub token_budget: Option<u64>,
    /// `true`: every message, archived ones included.
    pub archived: Option<bool>,
}

impl ReadQuery {
    fn window(&self) -> Result<WindowSpec, OpError> {
        let everything = self.archived == Some(true);
        let given = [
            self.last.is_some(),
            self.after.is_some(),
            self.token_budget.is_some(),
            everything,
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if given > 1 {
            return Err(OpError::invalid(
                "give at most one of `last`, `after`, `token_budget` and `archived=true`",
            ));
        }
        Ok(match (self.last, self.after, self.token_budget) {
            (Some(n), _, _) => WindowSpec::Last(n),
            (_, Some(seq), _) => WindowSpec::After(seq),
            (_, _, Some(tokens)) => WindowSpec::TokenBudget(tokens),
            _ if everything => WindowSpec::Everything,
            _ => WindowSpec::All,
        })
    }
}

/// A listing's filter and page, from the query string.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this user's (a user-bound token's user when omitted).
    pub user: Option<String>,
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this source's.
    pub source: Option<String>,
    /// Page size (1–1000, default 100).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl From<ListQuery> for ListRequest {
    fn from(q: ListQuery) -> Self {
        ListRequest {
            user: q.user,
            agent: q.agent,
            source: q.source,
            limit: q.limit,
            cursor: q.cursor,
        }
    }
}

/// The body of an append.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendBody {
    /// The messages, appended atomically in this order.
    pub messages: Vec<MessageInput>,
}

/// A read's messages.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct MessagesView {
    /// The messages, in seq order.
    pub messages: Vec<MessageView>,
}

/// The body of an archive: the seq range to archive, inclusive.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveBody {
    /// The first seq.
    pub from: u64,
    /// The last seq.
    pub to: u64,
}

/// How many messages an archive or clear affected.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
pub struct AffectedView {
    /// The number of messages.
    pub affected: u64,
}

/// The body of a session save.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveBody {
    /// The state to save (any JSON value).
    #[schema(value_type = Object)]
    pub state: Value,
}

/// A session save's new version (also in the `ETag` header).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
pub struct VersionView {
    /// The new version.
    pub version: u64,
}

/// Whether a delete found something.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
pub struct DeletedView {
    /// Whether it existed.
    pub deleted: bool,
}

/// A health answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct StatusView {
    /// `ok` or `ready`.
    pub status: String,
}

/// `/healthz`: the process is serving.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Serving", body = StatusView)))]
async fn healthz() -> Json<StatusView> {
    Json(StatusView {
        status: "ok".to_owned(),
    })
}

/// `/readyz`: the stores answer.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "The stores answer", body = StatusView),
        (status = 503, description = "A store does not answer", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<StatusView>> {
    state.ops.ready().await.map_err(|e| {
        ApiError(OpError::new(
            ErrorCode::Unavailable,
            format!("a store does not answer: {}", e.detail),
        ))
    })?;
    Ok(Json(StatusView {
        status: "ready".to_owned(),
    }))
}

/// Appends messages to a thread, atomically (idempotent by message id).
#[utoipa::path(post, path = "/v1/threads/{session}/messages", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    request_body = AppendBody,
    responses(
        (status = 200, description = "Appended", body = AppendView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn append(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
    Body(body): Body<AppendBody>,
) -> ApiResult<Json<AppendView>> {
    let address = query.address(session);
    // The append runs on its own task: a client that hangs up mid-request cannot cancel it
    // half-way (the store's append is atomic either way), and shutdown waits for it.
    let ops = state.ops.clone();
    let task = tokio::spawn(async move { ops.append(&who, &address, body.messages).await });
    let view = task
        .await
        .map_err(|_| OpError::new(ErrorCode::Backend, "the append task failed"))??;
    Ok(Json(view))
}

/// Reads a thread's window.
#[utoipa::path(get, path = "/v1/threads/{session}/messages", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ReadQuery),
    responses(
        (status = 200, description = "The messages", body = MessagesView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn read(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ReadQuery>,
) -> ApiResult<Json<MessagesView>> {
    let window = query.window()?;
    let address = Address {
        session,
        user: query.user,
        agent: query.agent,
        source: query.source,
    };
    let messages = state.ops.read(&who, &address, window).await?;
    Ok(Json(MessagesView { messages }))
}

/// Counts a thread's messages and tokens.
#[utoipa::path(get, path = "/v1/threads/{session}/count", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    responses(
        (status = 200, description = "The counts", body = CountView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn count(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
) -> ApiResult<Json<CountView>> {
    Ok(Json(state.ops.count(&who, &query.address(session)).await?))
}

/// Archives a range of seqs out of the active window.
#[utoipa::path(post, path = "/v1/threads/{session}/archive", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    request_body = ArchiveBody,
    responses(
        (status = 200, description = "Archived", body = AffectedView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
        (status = 501, description = "The store cannot archive", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn archive(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
    Body(body): Body<ArchiveBody>,
) -> ApiResult<Json<AffectedView>> {
    let affected = state
        .ops
        .archive(&who, &query.address(session), body.from..=body.to)
        .await?;
    Ok(Json(AffectedView { affected }))
}

/// Deletes every message of a thread.
#[utoipa::path(delete, path = "/v1/threads/{session}", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    responses(
        (status = 200, description = "Cleared", body = AffectedView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn clear(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
) -> ApiResult<Json<AffectedView>> {
    let affected = state.ops.clear(&who, &query.address(session)).await?;
    Ok(Json(AffectedView { affected }))
}

/// Lists the caller's threads.
#[utoipa::path(get, path = "/v1/threads", tag = "threads",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of threads", body = ScopePage),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn list_threads(
    State(state): State<AppState>,
    who: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<ScopePage>> {
    Ok(Json(state.ops.list_threads(&who, query.into()).await?))
}

fn etag(version: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{version}\"")).unwrap_or(HeaderValue::from_static("\"0\""))
}

fn if_match(headers: &HeaderMap) -> Result<Option<u64>, OpError> {
    let Some(value) = headers.get(IF_MATCH) else {
        return Ok(None);
    };
    let bad = || OpError::invalid("If-Match must be one quoted session version, such as \"3\"");
    let text = value.to_str().map_err(|_| bad())?.trim();
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .ok_or_else(bad)?;
    inner.parse::<u64>().map(Some).map_err(|_| bad())
}

/// Loads a session (its version also in `ETag`).
#[utoipa::path(get, path = "/v1/sessions/{session}", tag = "sessions",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    responses(
        (status = 200, description = "The session", body = SessionView,
            headers(("ETag" = String, description = "The version, quoted"))),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn load_session(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
) -> ApiResult<Response> {
    let view = state
        .ops
        .load_session(&who, &query.address(session))
        .await?
        .ok_or_else(|| OpError::not_found("no session is stored at this scope"))?;
    let tag = etag(view.version);
    let mut response = Json(view).into_response();
    response.headers_mut().insert(ETAG, tag);
    Ok(response)
}

/// Saves a session: with `If-Match: "<version>"` over that version, without it only if none
/// exists; a stale version is 412.
#[utoipa::path(put, path = "/v1/sessions/{session}", tag = "sessions",
    params(
        ("session" = String, Path, description = "The session id"),
        ScopeQuery,
        ("If-Match" = Option<String>, Header, description = "The quoted version to replace; omit to create"),
    ),
    request_body = SaveBody,
    responses(
        (status = 200, description = "Saved", body = VersionView,
            headers(("ETag" = String, description = "The new version, quoted"))),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "Stale version, or the session exists", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn save_session(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
    headers: HeaderMap,
    Body(body): Body<SaveBody>,
) -> ApiResult<Response> {
    let expected = if_match(&headers)?;
    let version = state
        .ops
        .save_session(&who, &query.address(session), &body.state, expected)
        .await?;
    let mut response = Json(VersionView { version }).into_response();
    response.headers_mut().insert(ETAG, etag(version));
    Ok(response)
}

/// Deletes a session.
#[utoipa::path(delete, path = "/v1/sessions/{session}", tag = "sessions",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    responses(
        (status = 200, description = "Deleted (or not found)", body = DeletedView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn delete_session(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
) -> ApiResult<Json<DeletedView>> {
    let deleted = state
        .ops
        .delete_session(&who, &query.address(session))
        .await?;
    Ok(Json(DeletedView { deleted }))
}

/// Lists the caller's sessions.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of sessions", body = ScopePage),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn list_sessions(
    State(state): State<AppState>,
    who: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<ScopePage>> {
    Ok(Json(state.ops.list_sessions(&who, query.into()).await?))
}

/// Deletes (or counts, with `dry_run`) the caller's threads and sessions the filter selects.
#[utoipa::path(post, path = "/v1/forget", tag = "forget",
    request_body = ForgetRequest,
    responses(
        (status = 200, description = "The receipt", body = ForgetReceiptView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn forget(
    State(state): State<AppState>,
    who: Principal,
    Body(body): Body<ForgetRequest>,
) -> ApiResult<Json<ForgetReceiptView>> {
    Ok(Json(state.ops.forget(&who, body).await?))
}

/// A memory request's scope and token limit, from the query string.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryQuery {
    /// The user.
    pub user: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The source (default `history`): the memory's window is the addressed thread.
    pub source: Option<String>,
    /// The token limit of the context (default 30,000).
    pub token_limit: Option<u64>,
}

impl MemoryQuery {
    fn split(self, session: String) -> (Address, Option<u64>) {
        (
            Address {
                session,
                user: self.user,
                agent: self.agent,
                source: self.source,
            },
            self.token_limit,
        )
    }
}

/// The context a `Memory` gives a model for the session, within the token limit.
#[utoipa::path(get, path = "/v1/memory/{session}/context", tag = "memory",
    params(("session" = String, Path, description = "The session id"), MemoryQuery),
    responses(
        (status = 200, description = "The messages to send a model", body = MemoryContextView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn memory_context(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<MemoryQuery>,
) -> ApiResult<Json<MemoryContextView>> {
    let (address, limit) = query.split(session);
    Ok(Json(state.ops.memory_context(&who, &address, limit).await?))
}

/// Puts messages into the session's `Memory` (appended, then flushed past its threshold).
#[utoipa::path(post, path = "/v1/memory/{session}/messages", tag = "memory",
    params(("session" = String, Path, description = "The session id"), MemoryQuery),
    request_body = AppendBody,
    responses(
        (status = 200, description = "Put", body = MemoryPutView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Another user's scope", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
async fn memory_put(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<MemoryQuery>,
    Body(body): Body<AppendBody>,
) -> ApiResult<Json<MemoryPutView>> {
    let (address, limit) = query.split(session);
    let ops = state.ops.clone();
    let task =
        tokio::spawn(async move { ops.memory_put(&who, &address, limit, body.messages).await });
    let view = task
        .await
        .map_err(|_| OpError::new(ErrorCode::Backend, "the put task failed"))??;
    Ok(Json(view))
}

/// Adds the bearer security scheme.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document of the HTTP API.
#[derive(OpenApi)]
#[openapi(
    info(title = "agent-memory server", description = "Conversation history, sessions and forget over HTTP. Errors are application/problem+json (RFC 9457) with a `kind`."),
    paths(healthz, readyz, append, read, count, archive, clear, list_threads,
        load_session, save_session, delete_session, list_sessions, forget, memory_context,
        memory_put),
    components(schemas(Problem, AppendBody, AppendView, MessageInput, MessageView, MessagesView,
        CountView, ArchiveBody, AffectedView, ScopePage, ScopeView, SessionView, SaveBody,
        VersionView, DeletedView, ForgetRequest, ForgetReceiptView, StoreReceiptView, StatusView,
        MemoryContextView, MemoryPutView)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

async fn openapi_json() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(json) => ([(CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => ApiError(OpError::new(
            ErrorCode::Serialization,
            format!("the OpenAPI document could not be written: {e}"),
        ))
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError(OpError::not_found("no route matches this path"))
}

async fn method_not_allowed() -> Response {
    problem_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this path does not take this method".to_owned(),
    )
}

/// The router of the HTTP API over `ops`, authenticating with `auth`, refusing bodies over
/// `max_body_bytes` (413), with the MCP endpoint at [`MCP_PATH`](crate::mcp::MCP_PATH)
/// ([`mcp::router`](crate::mcp::router)).
pub fn router(ops: Ops, auth: Authenticator, max_body_bytes: usize) -> Router {
    let state = AppState {
        ops,
        auth: Arc::new(auth),
    };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi_json))
        .route("/v1/threads", get(list_threads))
        .route("/v1/threads/{session}", axum::routing::delete(clear))
        .route("/v1/threads/{session}/messages", post(append).get(read))
        .route("/v1/threads/{session}/count", get(count))
        .route("/v1/threads/{session}/archive", post(archive))
        .route("/v1/sessions", get(list_sessions))
        .route(
            "/v1/sessions/{session}",
            get(load_session).put(save_session).delete(delete_session),
        )
        .route("/v1/forget", post(forget))
        .route("/v1/memory/{session}/context", get(memory_context))
        .route("/v1/memory/{session}/messages", post(memory_put))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state.clone())
        .merge(crate::mcp::router(state.ops, state.auth, max_body_bytes))
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened.
    #[error("could not open the store: {0}")]
    Store(#[from] agent_memory::Error),
    /// The listener failed.
    #[error("could not listen on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A bound server, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    router: Router,
}

impl Server {
    /// Checks `config`, opens its store and binds its listen address.
    ///
    /// # Errors
    /// [`ServeError`] for a configuration that cannot be used, a store that cannot be opened
    /// or an address that cannot be bound.
    pub async fn bind(config: &ServerConfig) -> Result<Self, ServeError> {
        let auth = config.authenticator()?;
        let limits = config.ops_limits()?;
        let max_body = config.max_body_bytes()?;
        let addr = config.listen_addr()?;
        let stores = agent_memory::open(config.store_url()).await?;
        Self::bind_with(addr, Ops::new(stores, limits), auth, max_body).await
    }

    /// Binds `addr` with already opened operations (for embedders and tests).
    ///
    /// # Errors
    /// [`ServeError::Io`] when the address cannot be bound.
    pub async fn bind_with(
        addr: SocketAddr,
        ops: Ops,
        auth: Authenticator,
        max_body_bytes: usize,
    ) -> Result<Self, ServeError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Io { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Io { addr, source })?;
        Ok(Self {
            listener,
            addr,
            router: router(ops, auth, max_body_bytes),
        })
    }

    /// The address it listens on (the chosen port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting connections and returns once
    /// every request in flight (appends included) has finished.
    ///
    /// # Errors
    /// [`ServeError::Io`] when serving fails.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let addr = self.addr;
        tracing::info!(%addr, "agent-memory server listening");
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|source| ServeError::Io { addr, source })
    }
}

/// Binds the server `config` describes and serves until `shutdown` completes (see
/// [`Server::run`]).
///
/// # Errors
/// As [`Server::bind`] and [`Server::run`].
pub async fn serve(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    Server::bind(&config).await?.run(shutdown).await
}
