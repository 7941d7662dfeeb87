//! The OpenAPI 3.1 document of the HTTP API, served at `/openapi.json`.

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::health::StatusView;
use super::memory::SearchBody;
use super::openapi_request_id::RequestIdHeader;
use super::problem::{ApiError, Problem};
use super::sessions::{DeletedView, SaveBody, VersionView};
use super::threads::{AffectedView, AppendBody, ArchiveBody, MessagesView};
use super::{forget, health, memory, sessions, threads};
use crate::error::{ErrorCode, OpError};
use crate::ops::{
    AppendView, CountView, ForgetReceiptView, ForgetRequest, MemoryContextView, MemoryPutView,
    MessageInput, MessageView, RoleName, ScopePage, ScopeView, SearchHitView, SearchView,
    SessionView, StoreReceiptView,
};

/// Adds the bearer security scheme.
pub(super) struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document of the HTTP API.
#[derive(OpenApi)]
#[openapi(
    info(title = "agent-memory server", description = "Conversation history, sessions and forget over HTTP. Errors are application/problem+json (RFC 9457) with a `kind`. Every response carries an `x-request-id`."),
    paths(health::healthz, health::readyz, threads::append, threads::read, threads::count,
        threads::archive, threads::clear, threads::list_threads, sessions::load_session,
        sessions::save_session, sessions::delete_session, sessions::list_sessions,
        forget::forget, memory::memory_context, memory::memory_put, memory::memory_search,
        memory::user_memory_search),
    components(schemas(Problem, AppendBody, AppendView, MessageInput, MessageView, MessagesView,
        CountView, ArchiveBody, AffectedView, ScopePage, ScopeView, SessionView, SaveBody,
        VersionView, DeletedView, ForgetRequest, ForgetReceiptView, StoreReceiptView, StatusView,
        MemoryContextView, MemoryPutView, SearchBody, SearchView, SearchHitView, RoleName)),
    modifiers(&BearerAuth, &RequestIdHeader),
)]
pub struct ApiDoc;

pub(super) async fn openapi_json() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(json) => ([(CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => ApiError(OpError::new(
            ErrorCode::Serialization,
            format!("the OpenAPI document could not be written: {e}"),
        ))
        .into_response(),
    }
}
