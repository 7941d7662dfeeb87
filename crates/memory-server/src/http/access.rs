//! The access log and the request id, on every route (`/mcp` included).
//!
//! Each request gets an id: the client's `x-request-id` when it is a short token
//! ([`is_usable_request_id`]), else a new UUID; it is echoed in the response's `x-request-id`
//! and names the request's span, so every line logged while it runs (a store error's, say)
//! carries it. When the response is ready one line is logged at `info` on the target
//! [`ACCESS_LOG_TARGET`]: the method, the route template (`/v1/threads/{session}/messages`,
//! never the path with its ids), the status, the duration, the request id and the tenant. No
//! token, query string or body is ever logged.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use tokio::time::Instant;
use tracing::Instrument;

use crate::auth::Authenticator;

/// The header of the request id, in requests and responses.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The `tracing` target of the access log lines (`RUST_LOG=memory_server::access=off` hides
/// them).
pub const ACCESS_LOG_TARGET: &str = "memory_server::access";
/// The longest request id taken from a client.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// Whether a client's request id is used as given: 1 to [`MAX_REQUEST_ID_LEN`] ASCII letters,
/// digits, `-`, `_`, `.`, `:` or `@`.
pub fn is_usable_request_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'))
}

/// Logs the request and echoes its id (see the module's documentation).
pub(super) async fn access_log(
    State(auth): State<Arc<Authenticator>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|value| is_usable_request_id(value))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_owned(), |path| path.as_str().to_owned());
    let tenant = tenant_of(&auth, &request);
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let mut response = next.run(request).instrument(span).await;
    let status = response.status().as_u16();
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        target: ACCESS_LOG_TARGET,
        method = %method,
        route = %route,
        status,
        duration_ms,
        request_id = %id,
        tenant = %tenant.as_deref().unwrap_or("-"),
        "request"
    );
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// The tenant the request's credentials name, if they name one (nothing for a missing or
/// unknown token).
fn tenant_of(auth: &Authenticator, request: &Request) -> Option<String> {
    let header = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    auth.authenticate(header)
        .ok()
        .map(|principal| principal.tenant.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_taken() {
        let longest = "a".repeat(MAX_REQUEST_ID_LEN);
        let too_long = "a".repeat(MAX_REQUEST_ID_LEN + 1);
        for ok in ["abc", "0f8e-42", "req_1.2:3@x", longest.as_str()] {
            assert!(is_usable_request_id(ok), "{ok}");
        }
        for bad in [
            "",
            "has space",
            "line\nbreak",
            "é",
            "a/b",
            too_long.as_str(),
        ] {
            assert!(!is_usable_request_id(bad), "{bad:?}");
        }
    }
}
