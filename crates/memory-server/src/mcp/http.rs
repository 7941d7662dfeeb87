//! MCP over streamable HTTP: the `/mcp` endpoint of the HTTP server, each request
//! authenticated by its bearer token, and its body read and checked ([`super::jsonrpc`])
//! before rmcp's service sees it.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::jsonrpc::{self, Read, Refusal};
use super::{MCP_PATH, MemoryMcp};
use crate::auth::Authenticator;
use crate::config::McpConfig;
use crate::error::OpError;
use crate::ops::Ops;

/// The streamable HTTP endpoint at [`MCP_PATH`], for the HTTP server to merge into its router.
///
/// Every request is authenticated by `authenticator` (a missing or unknown bearer token is a
/// 401 with `WWW-Authenticate: Bearer`, before any MCP processing); its [`Principal`](crate::auth::Principal) is the
/// identity of the tools it calls (a 401 is a problem document, `application/problem+json`,
/// as the HTTP API's). The endpoint is stateless (no `Mcp-Session-Id`; any instance
/// answers any request) and answers plain JSON, so the server's graceful shutdown waits for
/// the calls in flight like any request. A POST body is read before rmcp sees it: over
/// `max_body_bytes` it is a 413, and a body that is not UTF-8, not JSON, nested too deep, a
/// batch or not a JSON-RPC message is a 400; both carry a JSON-RPC error (under the request's
/// id when it can be read), never rmcp's plain-text 415. The `Host` / `Origin` check of a server
/// without tokens (against DNS rebinding) is not made here but by the HTTP server's one rule for
/// every route ([`http::router_with`](crate::http::router_with),
/// [`AllowedHosts`](crate::config::AllowedHosts)): mount this router through it.
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
    // The HTTP server checks Host and Origin for every route, this one included.
    http = http.disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(MemoryMcp::per_request(ops.clone()).with_settings(Arc::clone(&settings))),
        Arc::new(NeverSessionManager::default()),
        http,
    );
    axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            max_body_bytes,
            read_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            authenticator,
            authenticate,
        ))
}

/// The 413 of an MCP request whose declared body (`length` bytes) is over `limit`, with the
/// JSON-RPC error as its body, as every refusal of this endpoint: for the HTTP server's check
/// made before any route runs.
pub(crate) fn oversized_body(length: usize, limit: usize) -> Response {
    refused(
        StatusCode::PAYLOAD_TOO_LARGE,
        &jsonrpc::too_large(Some(length), limit, &[]),
    )
}

/// The JSON-RPC error (invalid request, -32600, id `null`) saying `message`: the body of a
/// refusal made before the request could be read (the HTTP server's answer to a request head
/// it cannot read, on this endpoint).
pub(crate) fn unreadable_request_body(message: String) -> serde_json::Value {
    jsonrpc::invalid_request(message).to_response()
}

/// A refused request's answer: `status`, and the JSON-RPC error as the body.
fn refused(status: StatusCode, refusal: &Refusal) -> Response {
    (status, axum::Json(refusal.to_response())).into_response()
}

/// Reads a POST's body (at most `max_body_bytes`) and checks it is one JSON-RPC message
/// ([`jsonrpc::read`]) before rmcp's service gets it back; answers a refusal itself.
async fn read_body(State(max_body_bytes): State<usize>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > max_body_bytes) {
        return refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            &jsonrpc::too_large(declared, max_body_bytes, &[]),
        );
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) if over_the_limit(&error) => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                &jsonrpc::too_large(None, max_body_bytes, &[]),
            );
        }
        Err(error) => {
            tracing::debug!(%error, "an MCP request body could not be read");
            return refused(StatusCode::BAD_REQUEST, &jsonrpc::unreadable());
        }
    };
    match jsonrpc::read(&bytes) {
        Ok(Read::Message(_)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Read::Ignored) => StatusCode::ACCEPTED.into_response(),
        Err(refusal) => refused(StatusCode::BAD_REQUEST, &refusal),
    }
}

/// Whether reading a body failed on the size limit (`to_bytes`' limit error, "length limit
/// exceeded", somewhere in its chain) rather than on the connection.
fn over_the_limit(error: &axum::Error) -> bool {
    let mut cause: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = cause {
        if e.to_string().contains("length limit exceeded") {
            return true;
        }
        cause = e.source();
    }
    false
}

/// A 401 as a problem document (RFC 9457), as the HTTP API answers it, with
/// `WWW-Authenticate: Bearer`.
fn unauthorized(error: &OpError) -> Response {
    let status = StatusCode::UNAUTHORIZED;
    let kind = error.code.as_str();
    let body = json!({
        "type": format!("urn:agent-memory:problem:{kind}"),
        "title": status.canonical_reason().unwrap_or("Unauthorized"),
        "status": status.as_u16(),
        "detail": error.detail,
        "kind": kind,
    });
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Puts the request's [`Principal`](crate::auth::Principal) in its extensions, or answers 401.
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
        Err(error) => unauthorized(&error),
    }
}
