//! The HTTP API: axum routes over [`Ops`], errors as `application/problem+json` (RFC 9457),
//! the OpenAPI 3.1 document at `/openapi.json`, and [`serve`] with its connection timeouts,
//! connection cap and bounded graceful shutdown.
//!
//! Every route (the MCP endpoint's too) goes through the same layers, outermost first: the
//! access log and request id ([`access`]), the `Host` / `Origin` check of a server without
//! tokens ([`AllowedHosts`]), and the declared body size (a `Content-Length` over the limit is
//! 413 before anything is read).

pub mod access;
mod body_limit;
mod connection;
mod deadline;
mod extract;
mod forget;
mod head_refusal;
mod health;
mod hosts;
mod memory;
mod openapi;
mod openapi_request_id;
mod problem;
mod refusals;
mod server;
mod sessions;
mod threads;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};

use crate::auth::Authenticator;
use crate::config::{AllowedHosts, McpConfig};
use crate::error::OpError;
use crate::ops::Ops;

use problem::problem_response;

pub use extract::ScopeQuery;
pub use health::StatusView;
pub use memory::{MemoryQuery, SearchBody, UserQuery};
pub use openapi::ApiDoc;
pub use problem::{ApiError, PROBLEM_JSON, Problem, status_of};
pub use server::{ServeError, Server, serve};
pub use sessions::{DeletedView, SaveBody, VersionView};
pub use threads::{AffectedView, AppendBody, ArchiveBody, ListQuery, MessagesView, ReadQuery};

/// What every handler shares.
#[derive(Debug, Clone)]
struct AppState {
    ops: Ops,
    auth: Arc<Authenticator>,
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
/// ([`mcp::router`](crate::mcp::router)); without tokens it answers only to the loopback
/// host names ([`AllowedHosts`]).
pub fn router(ops: Ops, auth: Authenticator, max_body_bytes: usize) -> Router {
    let hosts = AllowedHosts::loopback(std::net::SocketAddr::from((
        std::net::Ipv4Addr::LOCALHOST,
        0,
    )));
    router_with(ops, auth, max_body_bytes, &McpConfig::default(), &hosts)
}

/// As [`router`], with the `[mcp]` settings (no `/mcp` endpoint when `mcp.enabled` is false)
/// and the host names a server without tokens answers to (`hosts`; with tokens every host
/// is answered).
pub fn router_with(
    ops: Ops,
    auth: Authenticator,
    max_body_bytes: usize,
    mcp: &McpConfig,
    hosts: &AllowedHosts,
) -> Router {
    let open = matches!(auth, Authenticator::Open(_));
    let state = AppState {
        ops,
        auth: Arc::new(auth),
    };
    let api = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/v1/threads", get(threads::list_threads))
        .route(
            "/v1/threads/{session}",
            axum::routing::delete(threads::clear),
        )
        .route(
            "/v1/threads/{session}/messages",
            post(threads::append).get(threads::read),
        )
        .route("/v1/threads/{session}/count", get(threads::count))
        .route("/v1/threads/{session}/archive", post(threads::archive))
        .route("/v1/sessions", get(sessions::list_sessions))
        .route(
            "/v1/sessions/{session}",
            get(sessions::load_session)
                .put(sessions::save_session)
                .delete(sessions::delete_session),
        )
        .route("/v1/forget", post(forget::forget))
        .route("/v1/memory/{session}/context", get(memory::memory_context))
        .route("/v1/memory/{session}/messages", post(memory::memory_put))
        .route("/v1/memory/{session}/search", post(memory::memory_search))
        .route("/v1/memory/search", post(memory::user_memory_search))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state.clone());
    let mut app = if mcp.enabled {
        api.merge(crate::mcp::router_with(
            state.ops,
            Arc::clone(&state.auth),
            max_body_bytes,
            Arc::new(mcp.clone()),
        ))
    } else {
        api
    };
    app = app.layer(axum::middleware::from_fn_with_state(
        max_body_bytes,
        body_limit::refuse_declared_oversize,
    ));
    if open {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts.clone()),
            hosts::only_allowed_hosts,
        ));
    }
    app.layer(axum::middleware::from_fn_with_state(
        state.auth,
        access::access_log,
    ))
}
