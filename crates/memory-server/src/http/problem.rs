//! Errors as `application/problem+json` (RFC 9457) documents with the error's `kind`.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ErrorCode, OpError};

/// The media type of error bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An error body (RFC 9457), with the error's `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`urn:agent-memory:problem:<kind>`).
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, as a sentence.
    pub detail: String,
    /// The error kind (`invalid_input`, `not_found`, `forbidden`, `precondition_failed`, ...).
    pub kind: String,
}

/// An error as an HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(pub OpError);

impl From<OpError> for ApiError {
    fn from(error: OpError) -> Self {
        Self(error)
    }
}

/// The HTTP status of an error code.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidInput => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        ErrorCode::LimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::Serialization => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Unsupported => StatusCode::NOT_IMPLEMENTED,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(super) fn problem_response(status: StatusCode, kind: &str, detail: String) -> Response {
    let problem = Problem {
        problem_type: format!("urn:agent-memory:problem:{kind}"),
        title: status.canonical_reason().unwrap_or("Error").to_owned(),
        status: status.as_u16(),
        detail,
        kind: kind.to_owned(),
    };
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.code);
        if status.is_server_error() {
            tracing::warn!(kind = self.0.code.as_str(), detail = %self.0.detail, "request failed");
        }
        problem_response(status, self.0.code.as_str(), self.0.detail)
    }
}

pub(super) type ApiResult<T> = Result<T, ApiError>;
