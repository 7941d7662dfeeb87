//! The thread routes: append, read, count, archive, clear, list.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::extract::{Body, P, Q, ScopeQuery, at_most_int64};
use super::problem::{ApiResult, Problem};
use super::refusals::ScopeRefusals;
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError};
use crate::ops::{
    Address, AppendView, CountView, ListRequest, MessageInput, MessageView, ScopePage, WindowSpec,
};

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
    pub(super) fn window(&self) -> Result<WindowSpec, OpError> {
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
        at_most_int64("after", self.after)?;
        at_most_int64("token_budget", self.token_budget)?;
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

/// Appends messages to a thread, atomically (idempotent by message id).
#[utoipa::path(post, path = "/v1/threads/{session}/messages", tag = "threads",
    params(("session" = String, Path, description = "The session id"), ScopeQuery),
    request_body = AppendBody,
    responses(
        (status = 200, description = "Appended", body = AppendView),
        ScopeRefusals,
        (status = 413, description = "Too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn append(
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn read(
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn count(
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
        ScopeRefusals,
        (status = 501, description = "The store cannot archive", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn archive(
    State(state): State<AppState>,
    who: Principal,
    P(session): P<String>,
    Q(query): Q<ScopeQuery>,
    Body(body): Body<ArchiveBody>,
) -> ApiResult<Json<AffectedView>> {
    at_most_int64("from", Some(body.from))?;
    at_most_int64("to", Some(body.to))?;
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn clear(
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
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn list_threads(
    State(state): State<AppState>,
    who: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<ScopePage>> {
    Ok(Json(state.ops.list_threads(&who, query.into()).await?))
}
