//! How Mem0's HTTP failures map to [`ErrorKind`]s, and which are worth retrying.
//!
//! Both flavours answer failures with a JSON body: the platform (Django REST framework) with
//! `{"detail": "..."}` or `{"error": "..."}`, the self-hosted FastAPI server with
//! `{"detail": "..."}` or, for a body it cannot validate, `{"detail": [{"loc", "msg", "type"}]}`.
//!
//! | status | kind | retried |
//! | --- | --- | --- |
//! | 400, 422 | `InvalidInput` | no |
//! | 401, 403 | `InvalidInput` (the key is invalid or lacks permission) | no |
//! | 402, or 403 / 429 whose message speaks of a quota or usage limit | `LimitExceeded` (quota) | no |
//! | 404 | `NotFound` | no |
//! | 408 | `Timeout` | yes |
//! | 409 | `Conflict` | no |
//! | 413 | `LimitExceeded` | no |
//! | 429 | `LimitExceeded` (rate limit) | yes, honouring `Retry-After` |
//! | 500 whose message is `Memory with id … not found…` | `NotFound` | no |
//! | 500, 502, 503, 504 | `Unavailable` | yes, honouring `Retry-After` |
//!
//! Mem0's API reference documents no dedicated quota code, so a quota is recognised by status
//! 402 or by the words of the message; waiting does not help with it, so it is not retried.
//!
//! The self-hosted server answers every exception of the library with 500 and its text: for
//! `DELETE` or `PUT /memories/{memory_id}` of an unknown id, mem0ai (checked with 2.2.1)
//! raises `Memory with id … not found`, which is recognised by those words as `NotFound`
//! rather than retried as an outage.

use memory_core::ErrorKind;
use memory_http::quote_body;
use reqwest::StatusCode;

/// What to make of a failed status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Classified {
    pub(crate) kind: ErrorKind,
    pub(crate) retry: bool,
    pub(crate) lead: String,
}

/// Classifies `status` with the server's `detail` text.
pub(crate) fn classify(status: StatusCode, detail: Option<&str>, has_key: bool) -> Classified {
    let quota = is_quota(status, detail);
    let missing = is_missing_memory(status, detail);
    let (kind, retry, lead) = match status.as_u16() {
        _ if missing => (ErrorKind::NotFound, false, "not found"),
        _ if quota => (
            ErrorKind::LimitExceeded,
            false,
            "the Mem0 account has used up its quota",
        ),
        401 | 403 if !has_key => (
            ErrorKind::InvalidInput,
            false,
            "the server requires an API key and none is configured",
        ),
        401 | 403 => (
            ErrorKind::InvalidInput,
            false,
            "the Mem0 API key is invalid or lacks permission for this request",
        ),
        404 => (ErrorKind::NotFound, false, "not found"),
        408 => (ErrorKind::Timeout, true, "the server timed out"),
        409 => (ErrorKind::Conflict, false, "the server reported a conflict"),
        413 => (ErrorKind::LimitExceeded, false, "the request is too large"),
        429 => (
            ErrorKind::LimitExceeded,
            true,
            "the rate limit was exceeded",
        ),
        500 | 502 | 503 | 504 => (ErrorKind::Unavailable, true, "the server is unavailable"),
        code if (400..500).contains(&code) => (
            ErrorKind::InvalidInput,
            false,
            "the server refused the request",
        ),
        code if code >= 500 => (ErrorKind::Unavailable, false, "the server failed"),
        _ => (ErrorKind::Backend, false, "unexpected answer"),
    };
    Classified {
        kind,
        retry,
        lead: lead.to_owned(),
    }
}

/// The self-hosted server's 500 for an unknown memory id (the library's `ValueError`).
fn is_missing_memory(status: StatusCode, detail: Option<&str>) -> bool {
    status == StatusCode::INTERNAL_SERVER_ERROR
        && detail.is_some_and(|detail| {
            let lower = detail.trim_start().to_ascii_lowercase();
            lower.starts_with("memory with id") && lower.contains("not found")
        })
}

fn is_quota(status: StatusCode, detail: Option<&str>) -> bool {
    if status == StatusCode::PAYMENT_REQUIRED {
        return true;
    }
    if !matches!(status.as_u16(), 403 | 429) {
        return false;
    }
    let Some(detail) = detail else {
        return false;
    };
    let lower = detail.to_ascii_lowercase();
    [
        "quota",
        "usage limit",
        "monthly limit",
        "plan limit",
        "upgrade your plan",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The server's message in an error body, or the start of a body that is not JSON.
pub(crate) fn detail(body: &[u8]) -> Option<String> {
    let as_text = |value: &serde_json::Value| -> Option<String> {
        match value {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) if s.trim().is_empty() => None,
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(items) => {
                // FastAPI validation errors: [{"loc": [...], "msg": "...", "type": "..."}].
                let msgs: Vec<String> = items
                    .iter()
                    .map(|item| match (item.get("loc"), item.get("msg")) {
                        (Some(loc), Some(serde_json::Value::String(msg))) => {
                            format!("{msg} at {loc}")
                        }
                        _ => item.to_string(),
                    })
                    .collect();
                (!msgs.is_empty()).then(|| msgs.join("; "))
            }
            serde_json::Value::Object(map) => map
                .get("message")
                .and_then(|m| m.as_str().map(str::to_owned))
                .or_else(|| Some(value.to_string())),
            other => Some(other.to_string()),
        }
    };
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) => ["detail", "error", "message", "errors"]
            .iter()
            .find_map(|key| map.get(*key).and_then(as_text)),
        Ok(other) => as_text(&other),
        Err(_) => quote_body(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(code: u16, detail: Option<&str>) -> (ErrorKind, bool) {
        let c = classify(StatusCode::from_u16(code).unwrap(), detail, true);
        (c.kind, c.retry)
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(kind_of(400, None), (ErrorKind::InvalidInput, false));
        assert_eq!(kind_of(401, None), (ErrorKind::InvalidInput, false));
        assert_eq!(
            kind_of(403, Some("forbidden")),
            (ErrorKind::InvalidInput, false)
        );
        assert_eq!(kind_of(404, None), (ErrorKind::NotFound, false));
        assert_eq!(kind_of(408, None), (ErrorKind::Timeout, true));
        assert_eq!(kind_of(409, None), (ErrorKind::Conflict, false));
        assert_eq!(kind_of(422, None), (ErrorKind::InvalidInput, false));
        assert_eq!(kind_of(429, None), (ErrorKind::LimitExceeded, true));
        assert_eq!(kind_of(503, None), (ErrorKind::Unavailable, true));
        assert_eq!(kind_of(501, None), (ErrorKind::Unavailable, false));
        assert_eq!(kind_of(402, None), (ErrorKind::LimitExceeded, false));
        assert_eq!(
            kind_of(429, Some("Monthly usage limit reached")),
            (ErrorKind::LimitExceeded, false)
        );
        assert_eq!(
            kind_of(403, Some("You have exceeded your quota")),
            (ErrorKind::LimitExceeded, false)
        );
        assert_eq!(
            kind_of(500, Some("Memory with id 0b3c6a3e not found")),
            (ErrorKind::NotFound, false)
        );
        assert_eq!(
            kind_of(
                500,
                Some("Memory with id 0b3c6a3e not found. Please provide a valid 'memory_id'")
            ),
            (ErrorKind::NotFound, false)
        );
        assert_eq!(
            kind_of(500, Some("Collection not found")),
            (ErrorKind::Unavailable, true)
        );
        assert_eq!(
            kind_of(502, Some("Memory with id x not found")),
            (ErrorKind::Unavailable, true)
        );
        let no_key = classify(StatusCode::UNAUTHORIZED, None, false);
        assert!(no_key.lead.contains("none is configured"));
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            detail(br#"{"detail":"Invalid API key"}"#).as_deref(),
            Some("Invalid API key")
        );
        assert_eq!(detail(br#"{"error":"boom"}"#).as_deref(), Some("boom"));
        assert_eq!(
            detail(
                br#"{"detail":[{"loc":["body","query"],"msg":"Field required","type":"missing"}]}"#
            )
            .as_deref(),
            Some(r#"Field required at ["body","query"]"#)
        );
        assert_eq!(
            detail(b"<html>Bad Gateway</html>").as_deref(),
            Some("<html>Bad Gateway</html>")
        );
        assert!(detail(&[b'x'; 1000]).unwrap().len() < 400);
        assert_eq!(detail(b""), None);
        assert_eq!(detail(b"{}"), None);
    }
}
