//! The session routes: load, save (`If-Match`), delete, list.

use axum::Json;
use axum::extract::State;
use axum::http::header::{ETAG, IF_MATCH};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::extract::{Body, P, Q, ScopeQuery};
use super::problem::{ApiResult, Problem};
use super::refusals::ScopeRefusals;
use super::threads::ListQuery;
use crate::auth::Principal;
use crate::error::OpError;
use crate::ops::{ScopePage, SessionView};

/// The body of a session save.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveBody {
    /// The state to save (any JSON value).
    #[schema(value_type = Value)]
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

pub(super) fn etag(version: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{version}\"")).unwrap_or(HeaderValue::from_static("\"0\""))
}

pub(super) fn if_match(headers: &HeaderMap) -> Result<Option<u64>, OpError> {
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
        ScopeRefusals,
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn load_session(
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
        ScopeRefusals,
        (status = 412, description = "Stale version, or the session exists", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn save_session(
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn delete_session(
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn list_sessions(
    State(state): State<AppState>,
    who: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<ScopePage>> {
    Ok(Json(state.ops.list_sessions(&who, query.into()).await?))
}
