//! `Mem0Provider` in a real agent run (memory-core's `Agent` with memory-testkit's
//! `ScriptedChatModel`), against a local fake of Mem0 (wiremock) answering as the platform API
//! reference and the self-hosted `server/main.py` describe: the scoping rules (no search scope,
//! no search request), what is searched and remembered, the degrade and fail paths, and the
//! session state (the scoping ids, never the key).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::{AgentSession, ChatMessage, ErrorKind, Scope, SourceId};
use memory_mem0::{Mem0Client, Mem0Provider, Mem0Scope, Mem0SessionState, OnError};
use memory_testkit::ScriptedChatModel;
use serde_json::json;
use support::{
    Captured, KEY, agent, mount_answer, platform, request_count, search_mock, self_hosted,
    system_text,
};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockBuilder, MockServer, ResponseTemplate};

use crate::support;

/// The platform's search and add paths.
const SEARCH: &str = "/v3/memories/search/";
const ADD: &str = "/v3/memories/add/";

const AUTH: &str = "Token m0-test-SECRET-0123456789abcdef";

fn alice() -> Mem0Scope {
    Mem0Scope::user("alice").unwrap()
}

fn session() -> AgentSession {
    AgentSession::new(Scope::session("chat-1").unwrap())
}

/// One turn as Mem0's add takes it: the user's and the assistant's text, then the scoping `ids`.
fn turn(user: &str, assistant: &str, ids: serde_json::Value) -> serde_json::Value {
    let mut body = json!({"messages": [
        {"role": "user", "content": user},
        {"role": "assistant", "content": assistant}
    ]});
    body.as_object_mut()
        .unwrap()
        .extend(ids.as_object().unwrap().clone());
    body
}

/// The platform add at `server`, taking exactly `body` (with the test key), `times` times.
async fn mount_add(server: &MockServer, body: serde_json::Value, times: u64) {
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .and(header("authorization", AUTH))
        .and(body_json(body))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"event_id": "e1", "status": "PENDING"})),
        )
        .expect(times)
        .mount(server)
        .await;
}

/// A platform search body: `query`, the `filters` ANDed, `top_k`.
fn search_body(query: &str, filters: serde_json::Value, top_k: u32) -> serde_json::Value {
    json!({"query": query, "filters": {"AND": filters}, "top_k": top_k})
}

/// The platform search with the test key, taking exactly `body` when one is given.
fn keyed_search(body: Option<serde_json::Value>) -> MockBuilder {
    search_mock(body).and(header("authorization", AUTH))
}

/// A `status` answer whose JSON body carries `text` as its `detail`, as Mem0's errors do.
fn detail(status: u16, text: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({ "detail": text }))
}

/// Answers every POST to `route` at `server` with `response`, and expects `times` requests.
async fn mount_answering(server: &MockServer, route: &str, response: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(response)
        .expect(times)
        .mount(server)
        .await;
}

/// Runs `input` through an agent over `provider` in `session`, with a model that replies
/// `reply`; asserts the run answered `reply` and hands back the model.
async fn run_turn(
    provider: Mem0Provider,
    input: &str,
    reply: &str,
    session: &mut AgentSession,
) -> Arc<ScriptedChatModel> {
    let model = Arc::new(ScriptedChatModel::new().reply_text(reply));
    let run = agent(provider, model.clone())
        .run(input, session)
        .await
        .unwrap();
    assert_eq!(run.text(), reply);
    model
}

#[tokio::test]
async fn without_a_search_scope_nothing_is_searched_but_the_turn_is_remembered() {
    let server = MockServer::start().await;
    mount_answer(&server, keyed_search(None), json!({"results": []}), Some(0)).await;
    let body = turn("I love green tea.", "Noted!", json!({"user_id": "alice"}));
    mount_add(&server, body, 1).await;
    let provider = Mem0Provider::new(platform(&server), alice());
    let model = run_turn(provider, "I love green tea.", "Noted!", &mut session()).await;
    assert_eq!(system_text(&model), "Be brief.");
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn with_a_search_scope_memories_become_one_instruction() {
    let server = MockServer::start().await;
    let query = "What should I drink?";
    let answer = json!({"results": [
        {"id": "m1", "memory": "Loves green tea", "score": 0.9},
        {"id": "m2", "memory": "Avoids\ncoffee", "score": 0.7}
    ]});
    let search = keyed_search(Some(search_body(query, json!([{"user_id": "alice"}]), 3)));
    mount_answer(&server, search, answer, Some(1)).await;
    mount_add(
        &server,
        turn(query, "Green tea.", json!({"user_id": "alice"})),
        1,
    )
    .await;
    let provider = Mem0Provider::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_top_k(3);
    let model = run_turn(provider, query, "Green tea.", &mut session()).await;
    assert_eq!(
        system_text(&model),
        "Be brief.\n\n## Memories\nConsider the following memories when answering user questions:\n\
         - Loves green tea\n- Avoids coffee"
    );
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn storage_and_search_scopes_are_used_separately() {
    let server = MockServer::start().await;
    let filters = json!([{"user_id": "alice"}, {"app_id": "shop"}]);
    let search = keyed_search(Some(search_body("hi", filters, 10)));
    mount_answer(&server, search, json!([]), Some(1)).await;
    let ids = json!({"user_id": "alice", "app_id": "shop", "run_id": "chat-1"});
    mount_add(&server, turn("hi", "hello", ids), 1).await;
    let storage = alice()
        .with_app_id("shop")
        .unwrap()
        .with_run_id("chat-1")
        .unwrap();
    let search = alice().with_app_id("shop").unwrap();
    let provider = Mem0Provider::new(platform(&server), storage).with_search_scope(search);
    let model = run_turn(provider, "hi", "hello", &mut session()).await;
    // No memories found: no instruction added.
    assert_eq!(system_text(&model), "Be brief.");
}

#[tokio::test]
async fn only_user_and_assistant_text_is_remembered_and_failed_runs_not_at_all() {
    let server = MockServer::start().await;
    let body = turn("Weather in Lisbon?", "Sunny.", json!({"user_id": "alice"}));
    mount_add(&server, body, 1).await;
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_text("Sunny.")
            .reply_error(ErrorKind::Unavailable, "model down"),
    );
    let agent = agent(Mem0Provider::new(platform(&server), alice()), model);
    let mut session = session();
    agent
        .run(
            vec![
                ChatMessage::system("Use metric units."),
                ChatMessage::user("Weather in Lisbon?"),
                ChatMessage::tool_result("call-1", "{\"temp\": 21}"),
            ],
            &mut session,
        )
        .await
        .unwrap();
    let err = agent.run("And tomorrow?", &mut session).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_outage_degrades_the_run_with_a_warning() {
    let server = MockServer::start().await;
    mount_answering(&server, SEARCH, detail(503, "maintenance"), 3).await;
    mount_answering(&server, ADD, ResponseTemplate::new(503), 3).await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("Hello!"));
    let provider = Mem0Provider::new(platform(&server), alice()).with_search_scope(alice());
    let agent = agent(provider, model.clone());
    let captured = Captured::default();
    let run = {
        let _guard = tracing::subscriber::set_default(captured.subscriber());
        agent.run("hi", &mut session()).await
    };
    assert_eq!(run.unwrap().text(), "Hello!");
    assert_eq!(system_text(&model), "Be brief.");
    let output = captured.text();
    for expected in [
        "WARN",
        "Mem0 search failed; the run goes on without it",
        "Mem0 add failed; the run goes on without it",
        "kind=\"unavailable\"",
    ] {
        assert!(output.contains(expected), "{expected}: {output}");
    }
    assert!(!output.contains("SECRET"), "{output}");
}

/// Runs "hi" through an agent over `provider` with a model that would reply `reply`, and
/// hands back the run's error and the model.
async fn run_fails(
    provider: Mem0Provider,
    reply: &str,
) -> (memory_core::Error, Arc<ScriptedChatModel>) {
    let model = Arc::new(ScriptedChatModel::new().reply_text(reply));
    let err = agent(provider, model.clone())
        .run("hi", &mut session())
        .await
        .unwrap_err();
    (err, model)
}

#[tokio::test]
async fn on_error_fail_fails_the_run_before_the_model() {
    let server = MockServer::start().await;
    mount_answering(&server, SEARCH, detail(401, "Invalid API key"), 1).await;
    let provider = Mem0Provider::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_on_error(OnError::Fail);
    let (err, model) = run_fails(provider, "never").await;
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!err.to_string().contains(KEY));
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn on_error_fail_fails_the_run_when_the_add_fails() {
    let server = MockServer::start().await;
    mount_answering(&server, ADD, detail(429, "quota exceeded"), 1).await;
    let provider = Mem0Provider::new(platform(&server), alice()).with_on_error(OnError::Fail);
    let (err, _) = run_fails(provider, "ok").await;
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("quota"), "{err}");
}

#[tokio::test]
async fn the_session_state_holds_the_scoping_ids_and_never_the_key() {
    let server = MockServer::start().await;
    mount_answer(&server, keyed_search(None), json!({"results": []}), None).await;
    let ids = json!({"user_id": "alice", "agent_id": "assistant"});
    mount_add(&server, turn("hi", "hey", ids), 1).await;
    let provider = Mem0Provider::new(
        platform(&server),
        alice().with_agent_id("assistant").unwrap(),
    )
    .with_search_scope(alice());
    assert!(!format!("{provider:?}").contains(KEY));
    let mut session = session();
    run_turn(provider, "hi", "hey", &mut session).await;
    let state = session.serialize().unwrap();
    let text = state.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    let source = SourceId::new("mem0").unwrap();
    assert_eq!(
        session.provider_state(&source).unwrap(),
        &json!({
            "storage_scope": {"user_id": "alice", "agent_id": "assistant"},
            "search_scope": {"user_id": "alice"}
        })
    );
    let restored = AgentSession::deserialize(&state).unwrap();
    assert_eq!(
        restored.provider_state(&source),
        session.provider_state(&source)
    );
}

#[tokio::test]
async fn a_restored_session_keeps_its_own_ids() {
    let server = MockServer::start().await;
    let search = keyed_search(Some(search_body("hi", json!([{"user_id": "bob"}]), 10)));
    mount_answer(&server, search, json!({"results": []}), Some(1)).await;
    mount_add(&server, turn("hi", "hey", json!({"user_id": "bob"})), 1).await;
    // The session was Bob's; the provider's defaults (Alice's) do not apply to it.
    let mut session = session();
    let bob = Mem0Scope::user("bob").unwrap();
    session.set_provider_state(
        SourceId::new("mem0").unwrap(),
        Mem0SessionState::new(bob.clone(), Some(bob)).to_value(),
    );
    let mut session = AgentSession::deserialize(&session.serialize().unwrap()).unwrap();
    let provider = Mem0Provider::new(platform(&server), alice()).with_search_scope(alice());
    run_turn(provider, "hi", "hey", &mut session).await;
}

#[tokio::test]
async fn a_malformed_session_state_is_a_serialization_error() {
    let server = MockServer::start().await;
    let mut session = session();
    session.set_provider_state(
        SourceId::new("memories").unwrap(),
        json!({"storage_scope": {"user_id": "*"}}),
    );
    let model = Arc::new(ScriptedChatModel::new().reply_text("x"));
    let provider = Mem0Provider::new(platform(&server), alice())
        .with_source_id("memories")
        .unwrap();
    let err = agent(provider, model)
        .run("hi", &mut session)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn the_self_hosted_flavour_searches_and_adds_with_top_level_ids() {
    let server = MockServer::start().await;
    let ids = json!({"user_id": "alice", "agent_id": "assistant"});
    let mut search = json!({"query": "hi"});
    search
        .as_object_mut()
        .unwrap()
        .extend(ids.as_object().unwrap().clone());
    let answer = json!({"results": [{"id": "m1", "memory": "Name is Alice"}]});
    let added = json!({"results": []});
    for (route, body, answer) in [
        ("/search", search, answer),
        ("/memories", turn("hi", "Hi Alice", ids), added),
    ] {
        Mock::given(method("POST"))
            .and(path(route))
            .and(body_json(body))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(1)
            .mount(&server)
            .await;
    }
    let scope = alice().with_agent_id("assistant").unwrap();
    let provider = Mem0Provider::new(self_hosted(&server), scope.clone()).with_search_scope(scope);
    let model = run_turn(provider, "hi", "Hi Alice", &mut session()).await;
    assert!(system_text(&model).ends_with("\n- Name is Alice"));
}

#[tokio::test]
async fn the_context_prompt_can_be_replaced() {
    let server = MockServer::start().await;
    let answer = json!({"results": [{"id": "m1", "memory": "Likes tea"}]});
    mount_answer(&server, keyed_search(None), answer, None).await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"event_id": "e"})))
        .mount(&server)
        .await;
    let client: Mem0Client = platform(&server);
    let provider = Mem0Provider::new(client, alice())
        .with_search_scope(alice())
        .with_context_prompt("Known facts:");
    let model = run_turn(provider, "hi", "ok", &mut session()).await;
    assert_eq!(
        system_text(&model),
        "Be brief.\n\nKnown facts:\n- Likes tea"
    );
}

#[tokio::test]
async fn the_sessions_tenant_namespaces_what_mem0_sees() {
    let server = MockServer::start().await;
    let query = "What should I drink?";
    let search = keyed_search(Some(search_body(
        query,
        json!([{"user_id": "acme~alice"}]),
        10,
    )));
    mount_answer(&server, search, json!({"results": []}), Some(1)).await;
    mount_add(
        &server,
        turn(query, "Tea.", json!({"user_id": "acme~alice"})),
        1,
    )
    .await;
    let provider = Mem0Provider::new(platform(&server), alice()).with_search_scope(alice());
    let mut session = AgentSession::new(
        Scope::session("chat-1")
            .unwrap()
            .with_tenant("acme")
            .unwrap(),
    );
    run_turn(provider, query, "Tea.", &mut session).await;
    // The session keeps the ids as configured, without the tenant.
    let state = session
        .provider_state(&SourceId::new("mem0").unwrap())
        .unwrap();
    assert_eq!(state["storage_scope"], json!({"user_id": "alice"}));
}
