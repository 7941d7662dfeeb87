//! The `Memory` routes: a session's context, and a put of messages.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::extract::{Body, P, Q, ScopeQuery};
use super::problem::{ApiResult, Problem};
use super::refusals::ScopeRefusals;
use super::threads::AppendBody;
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError};
use crate::ops::{Address, MemoryContextView, MemoryPutView, SearchView};

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
    pub(super) fn split(self, session: String) -> (Address, Option<u64>) {
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn memory_context(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<MemoryQuery>,
) -> ApiResult<Json<MemoryContextView>> {
    let (address, limit) = query.split(session);
    Ok(Json(state.ops.memory_context(&who, &address, limit).await?))
}

/// Puts messages into the session's `Memory`: appended, indexed for search at once (unless
/// `[memory] index_on_append = false`), then flushed past its threshold.
#[utoipa::path(post, path = "/v1/memory/{session}/messages", tag = "memory",
    params(("session" = String, Path, description = "The session id"), MemoryQuery),
    request_body = AppendBody,
    responses(
        (status = 200, description = "Put", body = MemoryPutView),
        ScopeRefusals,
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn memory_put(
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

/// The body of a memory search.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What to look for (any text; matched by meaning with dense retrieval, by its words with
    /// lexical retrieval, both with hybrid).
    #[schema(min_length = 1)]
    pub query: String,
    /// How many results at most (default 5, at most 100).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub top_k: Option<usize>,
}

/// Searches the session's memory: the batches of the addressed thread its `Memory` indexed
/// (as soon as they were put, by default; else when flushed), best first, ranked as `[memory] retrieval` says (dense: by meaning, with
/// an embedder; lexical: by words, with a text index; hybrid: both fused). 501 when neither an
/// embedder nor lexical retrieval is configured.
#[utoipa::path(post, path = "/v1/memory/{session}/search", tag = "memory",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    request_body = SearchBody,
    responses(
        (status = 200, description = "The results, best first", body = SearchView),
        ScopeRefusals,
        (status = 501, description = "Search unavailable: no embedder and no lexical retrieval configured", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn memory_search(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
    Body(body): Body<SearchBody>,
) -> ApiResult<Json<SearchView>> {
    let address = query.address(session);
    Ok(Json(
        state
            .ops
            .search_memory(&who, &address, &body.query, body.top_k)
            .await?,
    ))
}

/// Whose memory a search across sessions reads, from the query string.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserQuery {
    /// The user (a user-bound token's user when omitted; another one is 403; required with a
    /// tenant token).
    pub user: Option<String>,
    /// Only this agent's sessions.
    pub agent: Option<String>,
}

/// Searches a user's memory across all their sessions: the batches every session's `Memory`
/// indexed (as soon as they were put, by default), best first, ranked as `[memory] retrieval` says, each naming
/// the session it came from. What Dana said last week is found today. 400 for a tenant token
/// that names no user; 501 when neither an embedder nor lexical retrieval is configured.
#[utoipa::path(post, path = "/v1/memory/search", tag = "memory",
    params(UserQuery),
    request_body = SearchBody,
    responses(
        (status = 200, description = "The results, best first", body = SearchView),
        ScopeRefusals,
        (status = 501, description = "Search unavailable: no embedder and no lexical retrieval configured", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn user_memory_search(
    State(state): State<AppState>,
    who: Principal,
    Q(query): Q<UserQuery>,
    Body(body): Body<SearchBody>,
) -> ApiResult<Json<SearchView>> {
    Ok(Json(
        state
            .ops
            .search_user_memory(
                &who,
                query.user.as_deref(),
                query.agent.as_deref(),
                &body.query,
                body.top_k,
            )
            .await?,
    ))
}
