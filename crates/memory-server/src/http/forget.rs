//! `POST /v1/forget`.

use axum::Json;
use axum::extract::State;

use super::AppState;
use super::extract::Body;
use super::problem::ApiResult;
use super::refusals::ScopeRefusals;
use crate::auth::Principal;
use crate::ops::{ForgetReceiptView, ForgetRequest};

/// Deletes (or counts, with `dry_run`) the caller's threads and sessions the filter selects.
#[utoipa::path(post, path = "/v1/forget", tag = "forget",
    request_body = ForgetRequest,
    responses(
        (status = 200, description = "The receipt", body = ForgetReceiptView),
        ScopeRefusals,
    ),
    security(("bearer" = [])))]
pub(super) async fn forget(
    State(state): State<AppState>,
    who: Principal,
    Body(body): Body<ForgetRequest>,
) -> ApiResult<Json<ForgetReceiptView>> {
    Ok(Json(state.ops.forget(&who, body).await?))
}
