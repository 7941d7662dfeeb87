//! `/healthz` and `/readyz`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::problem::{ApiError, ApiResult, Problem};
use crate::error::{ErrorCode, OpError};

/// A health answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct StatusView {
    /// `ok` or `ready`.
    pub status: String,
}

/// `/healthz`: the process is serving.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Serving", body = StatusView)))]
pub(super) async fn healthz() -> Json<StatusView> {
    Json(StatusView {
        status: "ok".to_owned(),
    })
}

/// `/readyz`: the stores answer.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "The stores answer", body = StatusView),
        (status = 503, description = "A store does not answer", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn readyz(State(state): State<AppState>) -> ApiResult<Json<StatusView>> {
    state.ops.ready().await.map_err(|e| {
        ApiError(OpError::new(
            ErrorCode::Unavailable,
            format!("a store does not answer: {}", e.detail),
        ))
    })?;
    Ok(Json(StatusView {
        status: "ready".to_owned(),
    }))
}
