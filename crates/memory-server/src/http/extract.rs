//! The extractors: the caller's principal, and JSON bodies, query strings and path
//! parameters whose rejections are problem documents.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;

use super::AppState;
use super::deadline::is_body_timeout;
use super::problem::{ApiError, ApiResult, problem_response};
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError};
use crate::ops::Address;

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let header = match parts.headers.get(AUTHORIZATION) {
            Some(value) => Some(value.to_str().map_err(|_| {
                OpError::new(
                    ErrorCode::Unauthorized,
                    "the Authorization header is not visible ASCII",
                )
            })?),
            None => None,
        };
        Ok(state.auth.authenticate(header)?)
    }
}

/// A JSON body whose rejections are problem documents (413 past the body limit, 408 when it
/// does not arrive within the body timeout).
///
/// The body must be a JSON object, as every request schema says: serde would also read a
/// struct from a JSON array of its fields in order (so `[null, null]` was a `POST /v1/forget`
/// of the whole tenant), and that form is refused before decoding.
pub(super) struct Body<T>(pub(super) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        if !is_json_content_type(req.headers()) {
            return Err(ApiError(OpError::invalid(
                "the request body must be JSON (Content-Type: application/json)",
            ))
            .into_response());
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| {
                if is_body_timeout(&rejection) {
                    let mut response = problem_response(
                        StatusCode::REQUEST_TIMEOUT,
                        "request_timeout",
                        "the request body did not arrive within the server's body timeout"
                            .to_owned(),
                    );
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                    response
                } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError(OpError::new(
                        ErrorCode::LimitExceeded,
                        "the request body is larger than the server's limit",
                    ))
                    .into_response()
                } else {
                    ApiError(OpError::invalid("the request body could not be read")).into_response()
                }
            })?;
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(
                ApiError(OpError::invalid("the request body must be a JSON object"))
                    .into_response(),
            );
        }
        match Json::<T>::from_bytes(&bytes) {
            Ok(Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(json_rejection(&rejection).into_response()),
        }
    }
}

/// Whether the `Content-Type` is JSON (`application/json` or `application/*+json`), as axum's
/// `Json` extractor decides it.
pub(super) fn is_json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

pub(super) fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError(OpError::new(
            ErrorCode::LimitExceeded,
            "the request body is larger than the server's limit",
        ));
    } else {
        ErrorCode::InvalidInput
    };
    let detail = match rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "the request body must be JSON (Content-Type: application/json)".to_owned()
        }
        JsonRejection::JsonSyntaxError(_) => "the request body is not valid JSON".to_owned(),
        other => format!("the request body is invalid: {}", other.body_text()),
    };
    ApiError(OpError::new(code, detail))
}

/// A query string whose rejections are problem documents.
pub(super) struct Q<T>(pub(super) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Q(q.0))
            .map_err(|e: QueryRejection| {
                ApiError(OpError::invalid(format!(
                    "the query string is invalid: {}",
                    e.body_text()
                )))
            })
    }
}

/// A path parameter whose rejections are problem documents.
pub(super) struct P<T>(pub(super) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| P(p.0))
            .map_err(|e: PathRejection| {
                ApiError(OpError::invalid(format!(
                    "the path is invalid: {}",
                    e.body_text()
                )))
            })
    }
}

/// The optional parts of a thread's or session's scope, from the query string.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScopeQuery {
    /// The user (a user-bound token's user when omitted; another one is 403).
    pub user: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The source (default `history`).
    pub source: Option<String>,
}

impl ScopeQuery {
    pub(super) fn address(self, session: String) -> Address {
        Address {
            session,
            user: self.user,
            agent: self.agent,
            source: self.source,
        }
    }
}

/// Refuses a value the OpenAPI document does not allow: it gives every `u64` as an `int64`
/// (utoipa's mapping), so a larger one is invalid input, as clients read the document.
pub(super) fn at_most_int64(name: &str, value: Option<u64>) -> Result<(), OpError> {
    match value {
        Some(v) if i64::try_from(v).is_err() => Err(OpError::invalid(format!(
            "`{name}` must be at most {}",
            i64::MAX
        ))),
        _ => Ok(()),
    }
}
