//! `Mem0Forget` against a stateful local fake (wiremock) of both flavours:
//!
//! - the platform, as Mem0's platform API reference (docs.mem0.ai, "API Reference › Memory")
//!   describes `POST /v3/memories/add/`, `POST /v3/memories/search/` and
//!   `POST /v3/memories/?page=&page_size=` (entity ids inside `filters: {"AND": [...]}`),
//!   `DELETE /v1/memories/{id}/` (404 for an unknown id) and
//!   `DELETE /v1/memories/?user_id=&agent_id=&run_id=`;
//! - the self-hosted server, as `server/main.py` of github.com/mem0ai/mem0 ("Mem0 REST APIs")
//!   serves `POST /memories`, `GET /memories?user_id=&agent_id=&run_id=`, `POST /search`,
//!   `DELETE /memories/{id}` (500 "Memory with id … not found" for an unknown id) and
//!   `DELETE /memories?…` (400 without any id), where mem0ai's `get_all` and `delete_all` see
//!   at most the memories its vector store lists at once.
//!
//! Memories are filed under the ids each request carries; a read or delete selects those that
//! carry every id it names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};

use memory_core::ScopeFilter;
use memory_core::forget::{Forget, ForgetMode, Forgetter};
use memory_core::{AgentId, ErrorKind, InMemoryHistoryStore, SessionId, TenantId, UserId};
use memory_mem0::{
    AddRequest, ListRequest, Mem0Client, Mem0Forget, Mem0Message, Mem0Scope, SearchRequest,
};
use serde_json::{Value, json};
use support::{platform, self_hosted};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support;

const IDS: [&str; 3] = ["user_id", "agent_id", "run_id"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Platform,
    SelfHosted,
}

#[derive(Debug, Clone)]
struct Stored {
    id: String,
    memory: String,
    ids: Vec<(String, String)>,
}

impl Stored {
    fn carries(&self, wanted: &[(String, String)]) -> bool {
        wanted.iter().all(|w| self.ids.contains(w))
    }

    fn to_json(&self) -> Value {
        let mut record = json!({"id": self.id, "memory": self.memory, "metadata": null});
        for (field, id) in &self.ids {
            record[field] = Value::String(id.clone());
        }
        record
    }
}

#[derive(Debug, Default)]
struct State {
    memories: Vec<Stored>,
    next_id: usize,
    /// Self-hosted: how many memories mem0ai's vector store lists at once (get_all and
    /// delete_all see no more).
    list_cap: Option<usize>,
    /// The delete-all answers success and deletes nothing.
    delete_all_does_nothing: bool,
    /// The one-memory delete answers success and deletes nothing.
    delete_does_nothing: bool,
    /// The listing ignores its filter and lists every memory.
    list_ignores_filters: bool,
    /// Delete-all requests, and those without any id (which would wipe every user).
    delete_alls: usize,
    unscoped_delete_alls: usize,
    deletes: usize,
}

/// The fake Mem0, in one flavour.
#[derive(Clone)]
struct FakeMem0 {
    flavor: Flavor,
    state: Arc<Mutex<State>>,
}

fn query_ids(request: &Request) -> Vec<(String, String)> {
    request
        .url
        .query_pairs()
        .filter(|(name, _)| IDS.contains(&name.as_ref()))
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

fn top_level_ids(body: &Value) -> Vec<(String, String)> {
    IDS.iter()
        .filter_map(|f| body[*f].as_str().map(|v| ((*f).to_owned(), v.to_owned())))
        .collect()
}

/// The ids of `{"AND": [{"user_id": …}, …]}`.
fn filter_ids(body: &Value) -> Vec<(String, String)> {
    body["filters"]["AND"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c.as_object().unwrap().iter())
        .map(|(field, value)| {
            assert!(IDS.contains(&field.as_str()), "unexpected filter {field}");
            (field.clone(), value.as_str().unwrap().to_owned())
        })
        .collect()
}

fn query_u64(request: &Request, name: &str) -> Option<usize> {
    request
        .url
        .query_pairs()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.parse().ok())
}

impl State {
    fn add(&mut self, ids: Vec<(String, String)>, body: &Value) -> Vec<Value> {
        assert!(!ids.is_empty(), "an add without ids");
        let mut added = Vec::new();
        for message in body["messages"].as_array().unwrap() {
            if message["role"] != "user" {
                continue;
            }
            self.next_id += 1;
            let stored = Stored {
                id: format!("mem-{}", self.next_id),
                memory: message["content"].as_str().unwrap().to_owned(),
                ids: ids.clone(),
            };
            added.push(json!({"id": stored.id, "memory": stored.memory, "event": "ADD"}));
            self.memories.push(stored);
        }
        added
    }

    fn select(&self, ids: &[(String, String)]) -> Vec<Value> {
        self.memories
            .iter()
            .filter(|m| self.list_ignores_filters || m.carries(ids))
            .take(self.list_cap.unwrap_or(usize::MAX))
            .map(Stored::to_json)
            .collect()
    }

    fn delete_all(&mut self, ids: &[(String, String)]) {
        self.delete_alls += 1;
        if ids.is_empty() {
            self.unscoped_delete_alls += 1;
        }
        if self.delete_all_does_nothing {
            return;
        }
        let mut doomed: Vec<String> = self
            .memories
            .iter()
            .filter(|m| m.carries(ids))
            .map(|m| m.id.clone())
            .collect();
        doomed.truncate(self.list_cap.unwrap_or(usize::MAX));
        self.memories.retain(|m| !doomed.contains(&m.id));
    }

    /// Deletes one memory; whether it existed.
    fn delete(&mut self, id: &str) -> bool {
        self.deletes += 1;
        let existed = self.memories.iter().any(|m| m.id == id);
        if !self.delete_does_nothing {
            self.memories.retain(|m| m.id != id);
        }
        existed
    }
}

impl Respond for FakeMem0 {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.state.lock().unwrap();
        let path = request.url.path().to_owned();
        let ok = |v: Value| ResponseTemplate::new(200).set_body_json(v);
        match (self.flavor, request.method.as_str(), path.as_str()) {
            (Flavor::Platform, "POST", "/v3/memories/add/") => {
                let body = body(request);
                state.add(top_level_ids(&body), &body);
                ok(json!({"event_id": "e1", "status": "PENDING"}))
            }
            (Flavor::Platform, "POST", "/v3/memories/search/") => {
                ok(json!({"results": state.select(&filter_ids(&body(request)))}))
            }
            (Flavor::Platform, "POST", "/v3/memories/") => {
                let all = state.select(&filter_ids(&body(request)));
                let page = query_u64(request, "page").unwrap();
                let size = query_u64(request, "page_size").unwrap();
                let start = (page - 1) * size;
                let results: Vec<Value> = all.iter().skip(start).take(size).cloned().collect();
                let next = (start + results.len() < all.len()).then(|| {
                    format!(
                        "https://api.mem0.ai/v3/memories/?page={}&page_size={size}",
                        page + 1
                    )
                });
                ok(json!({"count": all.len(), "next": next, "previous": null, "results": results}))
            }
            (Flavor::Platform, "DELETE", "/v1/memories/") => {
                state.delete_all(&query_ids(request));
                ok(json!({"message": "Memories deleted successfully!"}))
            }
            (Flavor::Platform, "DELETE", p) if p.starts_with("/v1/memories/") => {
                let id = p.trim_start_matches("/v1/memories/").trim_end_matches('/');
                if state.delete(id) {
                    ok(json!({"message": "Memory deleted successfully!"}))
                } else {
                    ResponseTemplate::new(404).set_body_json(json!({"detail": "Memory not found"}))
                }
            }
            (Flavor::SelfHosted, "POST", "/memories") => {
                let body = body(request);
                let added = state.add(top_level_ids(&body), &body);
                ok(json!({"results": added}))
            }
            (Flavor::SelfHosted, "POST", "/search") => {
                ok(json!({"results": state.select(&top_level_ids(&body(request)))}))
            }
            (Flavor::SelfHosted, "GET", "/memories") => {
                let ids = query_ids(request);
                if ids.is_empty() {
                    return ResponseTemplate::new(400)
                        .set_body_json(json!({"detail": "At least one identifier is required."}));
                }
                ok(json!({"results": state.select(&ids)}))
            }
            (Flavor::SelfHosted, "DELETE", "/memories") => {
                let ids = query_ids(request);
                if ids.is_empty() {
                    return ResponseTemplate::new(400)
                        .set_body_json(json!({"detail": "At least one identifier is required."}));
                }
                state.delete_all(&ids);
                ok(json!({"message": "All relevant memories deleted"}))
            }
            (Flavor::SelfHosted, "DELETE", p) if p.starts_with("/memories/") => {
                let id = p.trim_start_matches("/memories/");
                if state.delete(id) {
                    ok(json!({"message": "Memory deleted successfully"}))
                } else {
                    ResponseTemplate::new(500)
                        .set_body_json(json!({"detail": format!("Memory with id {id} not found")}))
                }
            }
            _ => ResponseTemplate::new(404).set_body_json(json!({"detail": "Not Found"})),
        }
    }
}

/// A fake of `flavor` and a client of it.
async fn start(flavor: Flavor) -> (MockServer, FakeMem0, Mem0Client) {
    let server = MockServer::start().await;
    let fake = FakeMem0 {
        flavor,
        state: Arc::default(),
    };
    Mock::given(wiremock::matchers::any())
        .respond_with(fake.clone())
        .mount(&server)
        .await;
    let client = match flavor {
        Flavor::Platform => platform(&server),
        Flavor::SelfHosted => self_hosted(&server),
    };
    (server, fake, client)
}

fn mem0_scope(
    tenant: &str,
    user: Option<&str>,
    agent: Option<&str>,
    run: Option<&str>,
) -> Mem0Scope {
    let own = |v: Option<&str>| v.map(str::to_owned);
    Mem0Scope::new(own(user), own(agent), None, own(run))
        .unwrap()
        .with_tenant(tenant)
        .unwrap()
}

async fn remember(client: &Mem0Client, scope: &Mem0Scope, texts: &[&str]) {
    let messages = texts.iter().map(|t| Mem0Message::user(*t)).collect();
    client
        .add(&AddRequest::new(scope.clone(), messages))
        .await
        .unwrap();
}

/// What list and search return for `scope`, as memory texts (sorted).
async fn reads(client: &Mem0Client, scope: &Mem0Scope) -> (Vec<String>, Vec<String>) {
    let mut listed: Vec<String> = client
        .list(&ListRequest::new(scope.clone()))
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect();
    let mut found: Vec<String> = client
        .search(&SearchRequest::new("anything at all", scope.clone()))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.memory)
        .collect();
    listed.sort();
    found.sort();
    (listed, found)
}

async fn assert_empty(client: &Mem0Client, scope: &Mem0Scope) {
    let (listed, found) = reads(client, scope).await;
    assert!(listed.is_empty(), "listed {listed:?} of {scope:?}");
    assert!(found.is_empty(), "found {found:?} of {scope:?}");
}

async fn assert_holds(client: &Mem0Client, scope: &Mem0Scope, texts: &[&str]) {
    let (listed, found) = reads(client, scope).await;
    assert_eq!(listed, texts, "listed of {scope:?}");
    assert_eq!(found, texts, "found of {scope:?}");
}

fn acme() -> ScopeFilter {
    ScopeFilter::tenant(TenantId::new("acme").unwrap())
}

fn dana() -> UserId {
    UserId::new("dana").unwrap()
}

/// How many items `forget` counts (a dry run) or deletes for `filter`.
async fn items(forget: &Mem0Forget, filter: &ScopeFilter, mode: ForgetMode) -> u64 {
    forget.forget(filter, mode).await.unwrap().items
}

/// The error `forget` answers for `filter`.
async fn refused(
    forget: &Mem0Forget,
    filter: &ScopeFilter,
    mode: ForgetMode,
) -> memory_core::Error {
    forget.forget(filter, mode).await.unwrap_err()
}

async fn filters_of_each_kind_forget_exactly_their_memories(flavor: Flavor) {
    let (_server, fake, client) = start(flavor).await;
    let a = mem0_scope("acme", Some("dana"), Some("bot"), Some("s1"));
    let b = mem0_scope("acme", Some("dana"), None, Some("s2"));
    let c = mem0_scope("acme", Some("eve"), Some("bot"), Some("s1"));
    let d = mem0_scope("globex", Some("dana"), Some("bot"), Some("s1"));
    let e = mem0_scope("default", Some("dana"), None, None);
    remember(&client, &a, &["a1 tea", "a2 cat"]).await;
    remember(&client, &b, &["b1 lisbon"]).await;
    remember(&client, &c, &["c1 eve"]).await;
    remember(&client, &d, &["d1 globex"]).await;
    remember(&client, &e, &["e1 untenanted"]).await;
    let forget = Mem0Forget::new(client.clone());
    assert_eq!(forget.store_name(), "mem0");

    // A whole tenant is refused before any request.
    let err = refused(&forget, &acme(), ForgetMode::Delete).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("whole tenant"), "{err}");
    let err = refused(&forget, &acme(), ForgetMode::DryRun).await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(fake.state.lock().unwrap().memories.len(), 6);

    // A dry run counts and deletes nothing.
    let dana_s1 = acme()
        .with_user(dana())
        .with_session(SessionId::new("s1").unwrap());
    let dry = forget.forget(&dana_s1, ForgetMode::DryRun).await.unwrap();
    assert_eq!((dry.items, dry.unit.as_str()), (2, "memories"));
    assert_holds(&client, &a, &["a1 tea", "a2 cat"]).await;
    assert_eq!(fake.state.lock().unwrap().delete_alls, 0);

    // User and session: `a` only.
    let done = forget.forget(&dana_s1, ForgetMode::Delete).await.unwrap();
    assert_eq!(done.items, 2);
    assert_empty(&client, &a).await;
    assert_holds(&client, &b, &["b1 lisbon"]).await;
    assert_holds(&client, &c, &["c1 eve"]).await;
    // Idempotent.
    let again = forget.forget(&dana_s1, ForgetMode::Delete).await.unwrap();
    assert_eq!(again.items, 0);

    // An agent: `c` (eve's), not `d` (same agent id, other tenant).
    let bot = acme().with_agent(AgentId::new("bot").unwrap());
    assert_eq!(items(&forget, &bot, ForgetMode::DryRun).await, 1);
    assert_eq!(items(&forget, &bot, ForgetMode::Delete).await, 1);
    assert_empty(&client, &c).await;

    // A user, through a Forgetter with a history store: `b`; the same user id in tenant
    // globex and in the default tenant keeps its memories.
    let forgetter = Forgetter::new()
        .history(Arc::new(InMemoryHistoryStore::new()))
        .target(Arc::new(forget.clone()));
    let receipt = forgetter
        .forget(&acme().with_user(dana()), ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(receipt.stores[1].store, "mem0");
    assert_eq!(receipt.stores[1].items, 1);
    assert!(
        receipt.to_string().contains("mem0: deleted 1 memories"),
        "{receipt}"
    );
    assert_empty(&client, &b).await;
    assert_empty(&client, &mem0_scope("acme", Some("dana"), None, None)).await;
    assert_holds(&client, &d, &["d1 globex"]).await;
    assert_holds(&client, &e, &["e1 untenanted"]).await;

    // A whole tenant through the Forgetter: the error names the store and what was done.
    let err = forgetter
        .forget(&acme(), ForgetMode::Delete)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("mem0 store"), "{err}");

    // The default tenant's user is sent without a prefix.
    let plain = ScopeFilter::tenant(TenantId::new("default").unwrap()).with_user(dana());
    assert_eq!(items(&forget, &plain, ForgetMode::Delete).await, 1);
    assert_empty(&client, &e).await;
    assert_holds(&client, &d, &["d1 globex"]).await;

    let state = fake.state.lock().unwrap();
    assert_eq!(state.unscoped_delete_alls, 0);
    assert_eq!(state.memories.len(), 1);
}

#[tokio::test]
async fn platform_filters_of_each_kind_forget_exactly_their_memories() {
    filters_of_each_kind_forget_exactly_their_memories(Flavor::Platform).await;
}

#[tokio::test]
async fn self_hosted_filters_of_each_kind_forget_exactly_their_memories() {
    filters_of_each_kind_forget_exactly_their_memories(Flavor::SelfHosted).await;
}

#[tokio::test]
async fn the_platform_lists_page_by_page() {
    let (server, _fake, client) = start(Flavor::Platform).await;
    let scope = mem0_scope("acme", Some("dana"), None, None);
    let texts: Vec<String> = (0..250).map(|i| format!("fact {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    remember(&client, &scope, &refs).await;
    let forget = Mem0Forget::new(client.clone());
    let filter = acme().with_user(dana());
    assert_eq!(items(&forget, &filter, ForgetMode::DryRun).await, 250);
    assert_eq!(items(&forget, &filter, ForgetMode::Delete).await, 250);
    assert_empty(&client, &scope).await;
    let pages = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| {
            r.url.path() == "/v3/memories/" && r.url.query() == Some("page=3&page_size=100")
        })
        .count();
    assert!(pages >= 2, "page 3 was read {pages} times");
}

#[tokio::test]
async fn a_self_hosted_delete_all_that_stops_at_its_listing_limit_is_finished() {
    // mem0ai's delete_all deletes what its vector store lists at once: here 3 at a time.
    let (_server, fake, client) = start(Flavor::SelfHosted).await;
    fake.state.lock().unwrap().list_cap = Some(3);
    let scope = mem0_scope("acme", Some("dana"), None, None);
    remember(&client, &scope, &["1", "2", "3", "4", "5", "6", "7"]).await;
    let forget = Mem0Forget::new(client.clone());
    let filter = acme().with_user(dana());
    // The dry run sees what the server lists.
    assert_eq!(items(&forget, &filter, ForgetMode::DryRun).await, 3);
    assert_eq!(items(&forget, &filter, ForgetMode::Delete).await, 7);
    assert!(fake.state.lock().unwrap().memories.is_empty());
    assert_empty(&client, &scope).await;
}

#[tokio::test]
async fn memories_a_delete_all_left_behind_are_deleted_one_by_one() {
    // The delete-all answers success but list and search still return the memories: the
    // forget does not trust it, and deletes what is still listed by id.
    for flavor in [Flavor::Platform, Flavor::SelfHosted] {
        let (_server, fake, client) = start(flavor).await;
        fake.state.lock().unwrap().delete_all_does_nothing = true;
        let scope = mem0_scope("acme", Some("dana"), None, Some("s1"));
        let kept = mem0_scope("acme", Some("dana"), None, Some("s2"));
        remember(&client, &scope, &["x", "y"]).await;
        remember(&client, &kept, &["z"]).await;
        let filter = acme()
            .with_user(dana())
            .with_session(SessionId::new("s1").unwrap());
        let forget = Mem0Forget::new(client.clone());
        assert_eq!(items(&forget, &filter, ForgetMode::Delete).await, 2);
        assert_empty(&client, &scope).await;
        assert_holds(&client, &kept, &["z"]).await;
        let state = fake.state.lock().unwrap();
        assert_eq!((state.delete_alls, state.deletes), (1, 2), "{flavor:?}");
    }
}

#[tokio::test]
async fn memories_that_survive_every_delete_fail_the_forget_and_a_rerun_finishes() {
    let (_server, fake, client) = start(Flavor::Platform).await;
    {
        let mut state = fake.state.lock().unwrap();
        state.delete_all_does_nothing = true;
        state.delete_does_nothing = true;
    }
    let scope = mem0_scope("acme", Some("dana"), None, None);
    remember(&client, &scope, &["x"]).await;
    let forget = Mem0Forget::new(client.clone());
    let filter = acme().with_user(dana());
    let err = refused(&forget, &filter, ForgetMode::Delete).await;
    assert_eq!(err.kind(), ErrorKind::Backend);
    assert!(err.is_temporary());
    assert!(err.to_string().contains("still lists 1 memories"), "{err}");
    // The server recovers: running the forget again finishes it.
    {
        let mut state = fake.state.lock().unwrap();
        state.delete_all_does_nothing = false;
        state.delete_does_nothing = false;
    }
    assert_eq!(items(&forget, &filter, ForgetMode::Delete).await, 1);
    assert_empty(&client, &scope).await;
}

#[tokio::test]
async fn a_server_that_ignores_the_filter_deletes_nothing() {
    for flavor in [Flavor::Platform, Flavor::SelfHosted] {
        let (_server, fake, client) = start(flavor).await;
        let dana_scope = mem0_scope("acme", Some("dana"), None, None);
        let eve_scope = mem0_scope("acme", Some("eve"), None, None);
        remember(&client, &dana_scope, &["x"]).await;
        remember(&client, &eve_scope, &["y"]).await;
        fake.state.lock().unwrap().list_ignores_filters = true;
        let forget = Mem0Forget::new(client.clone());
        let err = refused(&forget, &acme().with_user(dana()), ForgetMode::Delete).await;
        assert_eq!(err.kind(), ErrorKind::Backend, "{flavor:?}");
        assert!(err.to_string().contains("nothing was deleted"), "{err}");
        let state = fake.state.lock().unwrap();
        assert_eq!((state.delete_alls, state.deletes), (0, 0));
        assert_eq!(state.memories.len(), 2);
    }
}
