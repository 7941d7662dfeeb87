//! The body limit checked before the body is read: a `Content-Length` over it is answered
//! 413 at once, so a client that sent `Expect: 100-continue` never gets `100 Continue` (hyper
//! sends that only when a handler starts reading the body) and no handler starts.

use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::problem::problem_response;

/// Refuses a request whose declared body is over `max_body_bytes` (413 and the connection
/// closes: its body is never read): a problem document, or on the MCP endpoint the JSON-RPC
/// error that endpoint answers every refusal with. Passes the others on (a chunked body is cut
/// at the limit as it is read).
pub(super) async fn refuse_declared_oversize(
    State(max_body_bytes): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    let limit = u64::try_from(max_body_bytes).unwrap_or(u64::MAX);
    match declared {
        Some(length) if length > limit => {
            let mut response = if request.uri().path() == crate::mcp::MCP_PATH {
                crate::mcp::oversized_body(
                    usize::try_from(length).unwrap_or(usize::MAX),
                    max_body_bytes,
                )
            } else {
                problem_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "limit_exceeded",
                    format!(
                        "the request body is {length} bytes, over the server's limit of {max_body_bytes}"
                    ),
                )
            };
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
        _ => next.run(request).await,
    }
}
