//! The refusals every scoped route documents: invalid input, no valid token and another
//! user's scope, each a problem document.

use utoipa::IntoResponses;

use super::problem::Problem;

/// The 400, 401 and 403 answers of a route on a caller's scope, for the OpenAPI document: a
/// route names it in its `responses(...)` beside its own answers. Never built: it only
/// documents.
#[derive(IntoResponses)]
#[expect(dead_code, reason = "documents responses; never built")]
pub(super) enum ScopeRefusals {
    #[response(
        status = 400,
        description = "Invalid input",
        content_type = "application/problem+json"
    )]
    InvalidInput(Problem),
    #[response(
        status = 401,
        description = "No valid token",
        content_type = "application/problem+json"
    )]
    NoValidToken(Problem),
    #[response(
        status = 403,
        description = "Another user's scope",
        content_type = "application/problem+json"
    )]
    AnotherUsersScope(Problem),
}
