//! MCP over streamable HTTP: the `/mcp` endpoint of the HTTP server, each request
//! authenticated by its bearer token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::{MCP_PATH, MemoryMcp};
use crate::auth::Authenticator;
use crate::config::McpConfig;
use crate::ops::Ops;

/// The streamable HTTP endpoint at [`MCP_PATH`], for the HTTP server to merge into its router.
///
/// Every request is authenticated by `authenticator` (a missing or unknown bearer token is a
/// 401 with `WWW-Authenticate: Bearer`, before any MCP processing); its [`Principal`] is the
/// identity of the tools it calls. The endpoint is stateless (no `Mcp-Session-Id`; any instance
/// answers any request) and answers plain JSON, so the server's graceful shutdown waits for
/// the calls in flight like any request. Bodies over `max_body_bytes` are refused (413). With an [`Authenticator::Open`] server (no
/// tokens, loopback only) the `Host` header must be a loopback name, against DNS rebinding;
/// with tokens any `Host` is accepted, since a request without a token is refused anyway.
pub fn router(ops: Ops, authenticator: Arc<Authenticator>, max_body_bytes: usize) -> axum::Router {
    router_with(
        ops,
        authenticator,
        max_body_bytes,
        Arc::new(McpConfig::default()),
    )
}

/// As [`router`], introducing itself with `settings`' name and instructions.
pub fn router_with(
    ops: Ops,
    authenticator: Arc<Authenticator>,
    max_body_bytes: usize,
    settings: Arc<McpConfig>,
) -> axum::Router {
    let mut http = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(max_body_bytes);
    if matches!(*authenticator, Authenticator::Tokens(_)) {
        http = http.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(MemoryMcp::per_request(ops.clone()).with_settings(Arc::clone(&settings))),
        Arc::new(NeverSessionManager::default()),
        http,
    );
    axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            authenticator,
            authenticate,
        ))
}

/// Puts the request's [`Principal`] in its extensions, or answers 401.
async fn authenticate(
    State(authenticator): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or_default());
    match authenticator.authenticate(header) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => (
            axum::http::StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(json!({ "error": error.code.as_str(), "detail": error.detail })),
        )
            .into_response(),
    }
}
