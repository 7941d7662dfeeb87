//! The self-hosted server's requests.
//!
//! Follows `server/main.py` of the mem0 repository (github.com/mem0ai/mem0, the FastAPI app
//! "Mem0 REST APIs", version 1.0.0, as shipped with mem0ai 1.x and 2.x): `POST /memories` with a
//! `MemoryCreate` body (`messages`, `user_id`, `agent_id`, `run_id`, `metadata`; at least one
//! id), `GET /memories?user_id=&run_id=&agent_id=`, `GET | PUT | DELETE /memories/{memory_id}`,
//! `GET /memories/{memory_id}/history`, `POST /search` with a `SearchRequest` body (`query`,
//! `user_id`, `run_id`, `agent_id`, `filters`), `DELETE /memories?…` and `POST /reset`. Paths
//! have no trailing `/`.
//!
//! The server's models have no `app_id`, `infer`, `top_k`, `threshold` or `rerank`, and
//! pydantic drops fields a model does not declare: a request that sets one of them is refused
//! here rather than silently widened (an `app_id` dropped from a search would search every
//! application). `top_k` is the exception: the answer is cut to it here.
//!
//! Search sends the ids at the top level, as `SearchRequest` declares them. The server of
//! mem0ai 2.0.3 and later moves them into `filters` itself and logs them as deprecated (its
//! release notes: 2.0.0 to 2.0.2 answered 502 to top-level ids, a bug fixed in 2.0.3).

use memory_core::{Error, Result};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::http::Call;
use crate::request::{AddRequest, ListRequest, MemoryUpdate, SearchRequest};
use crate::scope::Mem0Scope;

/// `POST /memories`.
pub(crate) fn add(request: &AddRequest) -> Result<Call> {
    if request.infer.is_some() || request.async_mode.is_some() {
        return Err(unsupported(
            "infer and async_mode are platform settings; the self-hosted server's MemoryCreate has neither",
        ));
    }
    let mut body = Map::new();
    body.insert("messages".into(), json!(request.messages));
    insert_ids(&mut body, &request.scope, "add")?;
    if let Some(metadata) = &request.metadata {
        body.insert("metadata".into(), Value::Object(metadata.clone()));
    }
    Ok(Call::new(Method::POST, "add", &["memories"]).body(Value::Object(body)))
}

/// `POST /search`.
pub(crate) fn search(request: &SearchRequest) -> Result<Call> {
    if request.threshold.is_some() || request.rerank.is_some() {
        return Err(unsupported(
            "threshold and rerank are platform settings; the self-hosted server's SearchRequest has neither",
        ));
    }
    let mut body = Map::new();
    body.insert("query".into(), Value::String(request.query.clone()));
    insert_ids(&mut body, &request.scope, "search")?;
    if let Some(filters) = &request.filters {
        body.insert("filters".into(), filters.to_value());
    }
    // A read sent as a POST: safe to repeat.
    Ok(Call::new(Method::POST, "search", &["search"])
        .body(Value::Object(body))
        .idempotent())
}

/// `GET /memories?user_id=&agent_id=&run_id=`.
pub(crate) fn list(request: &ListRequest) -> Result<Call> {
    if request.filters.is_some() {
        return Err(unsupported(
            "the self-hosted server lists by user_id, agent_id and run_id only; it takes no filters",
        ));
    }
    scope_query(
        Call::new(Method::GET, "list", &["memories"]),
        &request.scope,
    )
}

/// `GET /memories/{memory_id}`.
pub(crate) fn get(id: &str) -> Call {
    Call::new(Method::GET, "get", &["memories", id])
}

/// `PUT /memories/{memory_id}` with `{"text", "metadata"}`.
pub(crate) fn update(id: &str, update: &MemoryUpdate) -> Call {
    Call::new(Method::PUT, "update", &["memories", id]).body(json!(update))
}

/// `DELETE /memories/{memory_id}`.
pub(crate) fn delete(id: &str) -> Call {
    Call::new(Method::DELETE, "delete", &["memories", id])
}

/// `DELETE /memories?user_id=&agent_id=&run_id=`.
pub(crate) fn delete_all(scope: &Mem0Scope) -> Result<Call> {
    scope_query(
        Call::new(Method::DELETE, "delete all", &["memories"]),
        scope,
    )
}

/// `GET /memories/{memory_id}/history`.
pub(crate) fn history(id: &str) -> Call {
    Call::new(Method::GET, "history", &["memories", id, "history"])
}

/// `POST /reset`.
pub(crate) fn reset() -> Call {
    Call::new(Method::POST, "reset", &["reset"])
}

fn insert_ids(body: &mut Map<String, Value>, scope: &Mem0Scope, what: &str) -> Result<()> {
    reject_app_id(scope, what)?;
    for (name, id) in scope.wire_ids() {
        body.insert(name.into(), Value::String(id));
    }
    Ok(())
}

fn scope_query(mut call: Call, scope: &Mem0Scope) -> Result<Call> {
    reject_app_id(scope, call.what)?;
    for (name, id) in scope.wire_ids() {
        call = call.query(name, id);
    }
    Ok(call)
}

fn reject_app_id(scope: &Mem0Scope, what: &str) -> Result<()> {
    if scope.app_id().is_some() {
        return Err(unsupported(&format!(
            "the self-hosted server has no app_id, so a {what} scoped by one would not be limited to it; \
             scope by user_id, agent_id or run_id"
        )));
    }
    Ok(())
}

fn unsupported(message: &str) -> Error {
    Error::unsupported(format!("Mem0 (self-hosted): {message}"))
}
