//! The one `Host` and `Origin` check of a server without tokens, on every route (`/mcp`
//! included): against DNS rebinding, where a page of another site whose name resolves to
//! 127.0.0.1 reaches the server with its own name in `Host`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{HOST, ORIGIN};
use axum::middleware::Next;
use axum::response::Response;

use super::problem::problem_response;
use crate::config::AllowedHosts;

/// Answers 403 (problem+json) to a request whose `Host` (or, from a browser, `Origin`) names
/// a host `hosts` does not allow, 400 to one without a `Host`; passes the others on.
pub(super) async fn only_allowed_hosts(
    State(hosts): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    match refusal(&hosts, &request) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    }
}

/// The answer refusing `request`, if `hosts` does not allow it.
fn refusal(hosts: &AllowedHosts, request: &Request) -> Option<Response> {
    let mut given = request.headers().get_all(HOST).iter();
    let header = given.next();
    if given.next().is_some() {
        return Some(problem_response(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "the request has more than one Host header".to_owned(),
        ));
    }
    let host = match (request.uri().authority(), header) {
        // An absolute-form request target names the host itself.
        (Some(authority), _) => Some(authority.as_str()),
        (None, Some(value)) => value.to_str().ok(),
        (None, None) => {
            return Some(problem_response(
                StatusCode::BAD_REQUEST,
                "invalid_input",
                "the request has no Host header".to_owned(),
            ));
        }
    };
    if !host.is_some_and(|host| hosts.allows_host(host)) {
        return Some(forbidden("Host header"));
    }
    for origin in request.headers().get_all(ORIGIN) {
        if !origin.to_str().is_ok_and(|o| hosts.allows_origin(o)) {
            return Some(forbidden("Origin header"));
        }
    }
    None
}

fn forbidden(what: &str) -> Response {
    problem_response(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "this server has no tokens, so it answers only to loopback host names and those of http.allowed_hosts (against DNS rebinding), and the {what} names another host"
        ),
    )
}
