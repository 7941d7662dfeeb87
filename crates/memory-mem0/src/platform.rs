//! The hosted platform's requests.
//!
//! Follows Mem0's platform API reference (docs.mem0.ai, "API Reference › Memory"): the v3
//! endpoints for add (`POST /v3/memories/add/`, "V3 additive pipeline", processed in the
//! background and answered with an `event_id`), search (`POST /v3/memories/search/`) and list
//! (`POST /v3/memories/?page=&page_size=`), where the entity ids of a search or listing go
//! inside `filters` and those of an add at the top level; and the v1 endpoints for one memory
//! (`GET | PUT | DELETE /v1/memories/{id}/`), its history (`GET /v1/memories/{id}/history/`),
//! deleting a scope (`DELETE /v1/memories/?user_id=…`) and the key check (`GET /v1/ping/`).
//! Every path ends in `/`. Headers and the `org_id` / `project_id` parameters follow the mem0ai
//! Python package's `MemoryClient` (2.2): `Authorization: Token <key>`, and `org_id` /
//! `project_id` in the JSON body of a POST and in the query of other methods.

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::http::Call;
use crate::request::{AddRequest, ListRequest, MemoryUpdate, SearchRequest};
use crate::scope::Mem0Scope;

/// The platform's organization and project, sent with every request when set.
#[derive(Debug, Clone, Default)]
pub(crate) struct Platform {
    pub(crate) org_id: Option<String>,
    pub(crate) project_id: Option<String>,
}

impl Platform {
    /// `POST /v3/memories/add/`.
    pub(crate) fn add(&self, request: &AddRequest) -> Call {
        let mut body = Map::new();
        body.insert("messages".into(), json!(request.messages));
        for (name, id) in request.scope.wire_ids() {
            body.insert(name.into(), Value::String(id));
        }
        if let Some(metadata) = &request.metadata {
            body.insert("metadata".into(), Value::Object(metadata.clone()));
        }
        if let Some(infer) = request.infer {
            body.insert("infer".into(), Value::Bool(infer));
        }
        if let Some(async_mode) = request.async_mode {
            body.insert("async_mode".into(), Value::Bool(async_mode));
        }
        self.post("add", &["v3", "memories", "add", ""], body)
    }

    /// `POST /v3/memories/search/`.
    pub(crate) fn search(&self, request: &SearchRequest) -> Call {
        let mut body = Map::new();
        body.insert("query".into(), Value::String(request.query.clone()));
        body.insert(
            "filters".into(),
            filters(&request.scope, request.filters.as_ref()),
        );
        if let Some(top_k) = request.top_k {
            body.insert("top_k".into(), json!(top_k));
        }
        if let Some(threshold) = request.threshold {
            body.insert("threshold".into(), json!(threshold));
        }
        if let Some(rerank) = request.rerank {
            body.insert("rerank".into(), Value::Bool(rerank));
        }
        // A read sent as a POST: safe to repeat.
        self.post("search", &["v3", "memories", "search", ""], body)
            .idempotent()
    }

    /// `POST /v3/memories/?page=&page_size=`.
    pub(crate) fn list(&self, request: &ListRequest) -> Call {
        let mut body = Map::new();
        body.insert(
            "filters".into(),
            filters(&request.scope, request.filters.as_ref()),
        );
        // A read sent as a POST: safe to repeat.
        self.post("list", &["v3", "memories", ""], body)
            .idempotent()
            .query("page", request.page.to_string())
            .query("page_size", request.page_size.to_string())
    }

    /// `GET /v1/memories/{id}/`.
    pub(crate) fn get(&self, id: &str) -> Call {
        self.with_params(Call::new(Method::GET, "get", &["v1", "memories", id, ""]))
    }

    /// `PUT /v1/memories/{id}/` with `{"text", "metadata"}`.
    pub(crate) fn update(&self, id: &str, update: &MemoryUpdate) -> Call {
        self.with_params(
            Call::new(Method::PUT, "update", &["v1", "memories", id, ""]).body(json!(update)),
        )
    }

    /// `DELETE /v1/memories/{id}/`.
    pub(crate) fn delete(&self, id: &str) -> Call {
        self.with_params(Call::new(
            Method::DELETE,
            "delete",
            &["v1", "memories", id, ""],
        ))
    }

    /// `DELETE /v1/memories/?user_id=…&agent_id=…&app_id=…&run_id=…`.
    pub(crate) fn delete_all(&self, scope: &Mem0Scope) -> Call {
        let mut call = Call::new(Method::DELETE, "delete all", &["v1", "memories", ""]);
        for (name, id) in scope.wire_ids() {
            call = call.query(name, id);
        }
        self.with_params(call)
    }

    /// `GET /v1/memories/{id}/history/`.
    pub(crate) fn history(&self, id: &str) -> Call {
        self.with_params(Call::new(
            Method::GET,
            "history",
            &["v1", "memories", id, "history", ""],
        ))
    }

    /// `GET /v1/ping/`.
    pub(crate) fn ping(&self) -> Call {
        self.with_params(Call::new(Method::GET, "ping", &["v1", "ping", ""]))
    }

    fn post(&self, what: &'static str, segments: &[&str], mut body: Map<String, Value>) -> Call {
        for (name, value) in self.params() {
            body.insert(name.into(), Value::String(value.to_owned()));
        }
        Call::new(Method::POST, what, segments).body(Value::Object(body))
    }

    fn with_params(&self, mut call: Call) -> Call {
        for (name, value) in self.params() {
            call = call.query(name, value);
        }
        call
    }

    fn params(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [("org_id", &self.org_id), ("project_id", &self.project_id)]
            .into_iter()
            .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
    }
}

/// `{"AND": [<scope ids>..., <extra>]}`.
fn filters(scope: &Mem0Scope, extra: Option<&crate::Filters>) -> Value {
    let mut all = scope.to_filters();
    if let Some(extra) = extra {
        all = all.and_also(extra.clone());
    }
    all.to_value()
}
