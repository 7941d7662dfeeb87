//! hyper's own answers to a request head it cannot read, given a body.
//!
//! hyper's HTTP/1 connection refuses some heads itself, before any handler (and so before the
//! router, its problem documents and its access log) runs: a malformed request line or header
//! (400), a URI over [`MAX_URI_BYTES`] (414), more than [`MAX_HEADERS`] headers or a head over
//! [`MAX_HEAD_BYTES`] (431). It answers them with an empty body and closes the connection.
//! [`rewrite`] recognises such an answer as hyper writes it (the connection knows no handler
//! has run: see `connection.rs`) and gives the whole answer the server sends instead: the same
//! status, with the server's problem document (`application/problem+json`), or on the MCP
//! endpoint the JSON-RPC error it answers every refusal with (invalid request, -32600, id
//! `null`), and `connection: close`.

use axum::http::StatusCode;

use super::access::{ACCESS_LOG_TARGET, REQUEST_ID_HEADER};
use super::problem::{PROBLEM_JSON, Problem};
use crate::error::ErrorCode;

/// The longest URI hyper reads (its `MAX_URI_LEN`); a longer one is answered 414.
pub(super) const MAX_URI_BYTES: usize = 65_534;
/// The most headers hyper reads in a request (its default); more are answered 431.
pub(super) const MAX_HEADERS: usize = 100;
/// The largest request head hyper reads (its default `max_buf_size`: 8 KiB + 100 × 4 KiB);
/// a larger one is answered 431.
pub(super) const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;

/// How many leading bytes of a request are kept to tell an MCP request (`POST /mcp`) apart.
pub(super) const REQUEST_START_BYTES: usize = 16;

/// The answer to send instead of `written`, when `written` is hyper's own empty answer to a
/// head it could not read (a status line of 400, 414 or 431 and `content-length: 0`);
/// `request_start` is the first bytes of the refused request, as far as they are known.
///
/// Call it only while no handler has run for the request (else a response body's bytes
/// could be mistaken for hyper's answer).
pub(super) fn rewrite(written: &[u8], request_start: &[u8]) -> Option<Vec<u8>> {
    let status = hyper_refusal_status(written)?;
    let (kind, detail) = match status {
        StatusCode::URI_TOO_LONG => (
            ErrorCode::LimitExceeded,
            format!(
                "the request's URI is over the server's limit of {MAX_URI_BYTES} bytes: send \
                 long data in the body."
            ),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            ErrorCode::LimitExceeded,
            format!(
                "the request's headers are over the server's limits of {MAX_HEADERS} headers \
                 and {MAX_HEAD_BYTES} bytes in all."
            ),
        ),
        _ => (
            ErrorCode::InvalidInput,
            "the request is not well-formed HTTP/1.1: its request line or a header could not \
             be read."
                .to_owned(),
        ),
    };
    let mcp = is_mcp_request(request_start);
    let (media_type, body) = if mcp {
        let body = crate::mcp::unreadable_request_body(detail);
        ("application/json", body.to_string())
    } else {
        let problem = Problem {
            problem_type: format!("urn:agent-memory:problem:{}", kind.as_str()),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail,
            kind: kind.as_str().to_owned(),
        };
        (
            PROBLEM_JSON,
            serde_json::to_string(&problem).unwrap_or_default(),
        )
    };
    let request_id = uuid::Uuid::new_v4().to_string();
    tracing::info!(
        target: ACCESS_LOG_TARGET,
        method = "-",
        route = if mcp { crate::mcp::MCP_PATH } else { "(unread)" },
        status = status.as_u16(),
        duration_ms = 0.0,
        request_id = %request_id,
        tenant = "-",
        "request"
    );
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {media_type}\r\ncontent-length: {}\r\n\
         {REQUEST_ID_HEADER}: {request_id}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        body.len(),
    );
    let mut answer = head.into_bytes();
    answer.extend_from_slice(body.as_bytes());
    Some(answer)
}

/// The status of `written` when it is hyper's answer to a head it could not read.
fn hyper_refusal_status(written: &[u8]) -> Option<StatusCode> {
    let rest = written
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| written.strip_prefix(b"HTTP/1.0 "))?;
    let status = match rest.get(..4)? {
        b"400 " => StatusCode::BAD_REQUEST,
        b"414 " => StatusCode::URI_TOO_LONG,
        b"431 " => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        _ => return None,
    };
    let empty = written
        .windows(b"\r\ncontent-length: 0\r\n".len())
        .any(|window| window.eq_ignore_ascii_case(b"\r\ncontent-length: 0\r\n"));
    empty.then_some(status)
}

/// Whether a request starting with `request_start` is a POST to the MCP endpoint.
fn is_mcp_request(request_start: &[u8]) -> bool {
    let Some(rest) = request_start
        .strip_prefix(b"POST ")
        .and_then(|rest| rest.strip_prefix(crate::mcp::MCP_PATH.as_bytes()))
    else {
        return false;
    };
    matches!(rest.first(), None | Some(b' ' | b'?' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYPER_414: &[u8] =
        b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Sun, 29 Nov 2026 02:00:00 GMT\r\n\r\n";

    fn parts(answer: &[u8]) -> (String, serde_json::Value) {
        let text = String::from_utf8(answer.to_vec()).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        let value = serde_json::from_str(body).unwrap_or_default();
        (head.to_owned(), value)
    }

    #[test]
    fn only_hyper_refusals_are_rewritten() {
        assert!(rewrite(HYPER_414, b"GET /v1").is_some());
        for other in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 12\r\n\r\n",
            b"{\"HTTP/1.1 414 \r\ncontent-length: 0\r\n",
            b"",
        ] {
            assert_eq!(rewrite(other, b"GET /"), None);
        }
    }

    #[test]
    fn the_answer_is_the_routes_document() {
        let (head, problem) = parts(&rewrite(HYPER_414, b"GET /v1/threads/").unwrap_or_default());
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains("content-type: application/problem+json"));
        assert!(head.contains("connection: close"));
        assert_eq!(problem["status"], 414);
        assert_eq!(problem["kind"], "limit_exceeded");
        for mcp in [&b"POST /mcp HTTP/1"[..], b"POST /mcp?x=1", b"POST /mcp"] {
            let (head, error) = parts(&rewrite(HYPER_414, mcp).unwrap_or_default());
            assert!(head.contains("content-type: application/json"), "{head}");
            assert_eq!(error["error"]["code"], -32600);
            assert_eq!(error["id"], serde_json::Value::Null);
        }
        for not_mcp in [
            &b"GET /mcp HTTP/1.1"[..],
            b"POST /mcpx",
            b"POST /v1/mcp",
            b"",
        ] {
            let (head, _) = parts(&rewrite(HYPER_414, not_mcp).unwrap_or_default());
            assert!(head.contains(PROBLEM_JSON), "{head}");
        }
    }
}
