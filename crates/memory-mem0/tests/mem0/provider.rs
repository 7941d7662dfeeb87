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
use support::{Captured, KEY, agent, platform, request_count, self_hosted, system_text};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support;

const AUTH: &str = "Token m0-test-SECRET-0123456789abcdef";

fn alice() -> Mem0Scope {
    Mem0Scope::user("alice").unwrap()
}

fn session() -> AgentSession {
    AgentSession::new(Scope::session("chat-1").unwrap())
}

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

#[tokio::test]
async fn without_a_search_scope_nothing_is_searched_but_the_turn_is_remembered() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(0)
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [
                {"role": "user", "content": "I love green tea."},
                {"role": "assistant", "content": "Noted!"}
            ],
            "user_id": "alice"
        }),
        1,
    )
    .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("Noted!"));
    let agent = agent(Mem0Provider::new(platform(&server), alice()), model.clone());
    let run = agent
        .run("I love green tea.", &mut session())
        .await
        .unwrap();
    assert_eq!(run.text(), "Noted!");
    assert_eq!(system_text(&model), "Be brief.");
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn with_a_search_scope_memories_become_one_instruction() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(header("authorization", AUTH))
        .and(body_json(json!({
            "query": "What should I drink?",
            "filters": {"AND": [{"user_id": "alice"}]},
            "top_k": 3
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
            {"id": "m1", "memory": "Loves green tea", "score": 0.9},
            {"id": "m2", "memory": "Avoids\ncoffee", "score": 0.7}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [
                {"role": "user", "content": "What should I drink?"},
                {"role": "assistant", "content": "Green tea."}
            ],
            "user_id": "alice"
        }),
        1,
    )
    .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("Green tea."));
    let provider = Mem0Provider::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_top_k(3);
    agent(provider, model.clone())
        .run("What should I drink?", &mut session())
        .await
        .unwrap();
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
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "hi",
            "filters": {"AND": [{"user_id": "alice"}, {"app_id": "shop"}]},
            "top_k": 10
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .expect(1)
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "user_id": "alice",
            "app_id": "shop",
            "run_id": "chat-1"
        }),
        1,
    )
    .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("hello"));
    let storage = alice()
        .with_app_id("shop")
        .unwrap()
        .with_run_id("chat-1")
        .unwrap();
    let search = alice().with_app_id("shop").unwrap();
    let provider = Mem0Provider::new(platform(&server), storage).with_search_scope(search);
    agent(provider, model.clone())
        .run("hi", &mut session())
        .await
        .unwrap();
    // No memories found: no instruction added.
    assert_eq!(system_text(&model), "Be brief.");
}

#[tokio::test]
async fn only_user_and_assistant_text_is_remembered_and_failed_runs_not_at_all() {
    let server = MockServer::start().await;
    mount_add(
        &server,
        json!({
            "messages": [
                {"role": "user", "content": "Weather in Lisbon?"},
                {"role": "assistant", "content": "Sunny."}
            ],
            "user_id": "alice"
        }),
        1,
    )
    .await;
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
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(ResponseTemplate::new(503).set_body_json(json!({"detail": "maintenance"})))
        .expect(3)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .respond_with(ResponseTemplate::new(503))
        .expect(3)
        .mount(&server)
        .await;
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
    assert!(output.contains("WARN"), "{output}");
    assert!(
        output.contains("Mem0 search failed; the run goes on without it"),
        "{output}"
    );
    assert!(
        output.contains("Mem0 add failed; the run goes on without it"),
        "{output}"
    );
    assert!(output.contains("kind=\"unavailable\""), "{output}");
    assert!(!output.contains("SECRET"), "{output}");
}

#[tokio::test]
async fn on_error_fail_fails_the_run_before_the_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(
            ResponseTemplate::new(401).set_body_json(json!({"detail": "Invalid API key"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("never"));
    let provider = Mem0Provider::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_on_error(OnError::Fail);
    let err = agent(provider, model.clone())
        .run("hi", &mut session())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!err.to_string().contains(KEY));
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn on_error_fail_fails_the_run_when_the_add_fails() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .respond_with(ResponseTemplate::new(429).set_body_json(json!({"detail": "quota exceeded"})))
        .expect(1)
        .mount(&server)
        .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("ok"));
    let provider = Mem0Provider::new(platform(&server), alice()).with_on_error(OnError::Fail);
    let err = agent(provider, model)
        .run("hi", &mut session())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("quota"), "{err}");
}

#[tokio::test]
async fn the_session_state_holds_the_scoping_ids_and_never_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}],
            "user_id": "alice",
            "agent_id": "assistant"
        }),
        1,
    )
    .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("hey"));
    let provider = Mem0Provider::new(
        platform(&server),
        alice().with_agent_id("assistant").unwrap(),
    )
    .with_search_scope(alice());
    assert!(!format!("{provider:?}").contains(KEY));
    let mut session = session();
    agent(provider, model)
        .run("hi", &mut session)
        .await
        .unwrap();
    let state = session.serialize().unwrap();
    let text = state.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    assert_eq!(
        session
            .provider_state(&SourceId::new("mem0").unwrap())
            .unwrap(),
        &json!({
            "storage_scope": {"user_id": "alice", "agent_id": "assistant"},
            "search_scope": {"user_id": "alice"}
        })
    );
    let restored = AgentSession::deserialize(&state).unwrap();
    assert_eq!(
        restored.provider_state(&SourceId::new("mem0").unwrap()),
        session.provider_state(&SourceId::new("mem0").unwrap())
    );
}

#[tokio::test]
async fn a_restored_session_keeps_its_own_ids() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "hi",
            "filters": {"AND": [{"user_id": "bob"}]},
            "top_k": 10
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(1)
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}],
            "user_id": "bob"
        }),
        1,
    )
    .await;
    // The session was Bob's; the provider's defaults (Alice's) do not apply to it.
    let mut session = session();
    let bob = Mem0Scope::user("bob").unwrap();
    session.set_provider_state(
        SourceId::new("mem0").unwrap(),
        Mem0SessionState::new(bob.clone(), Some(bob)).to_value(),
    );
    let mut session = AgentSession::deserialize(&session.serialize().unwrap()).unwrap();
    let model = Arc::new(ScriptedChatModel::new().reply_text("hey"));
    let provider = Mem0Provider::new(platform(&server), alice()).with_search_scope(alice());
    agent(provider, model)
        .run("hi", &mut session)
        .await
        .unwrap();
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
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(body_json(
            json!({"query": "hi", "user_id": "alice", "agent_id": "assistant"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
            {"id": "m1", "memory": "Name is Alice"}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/memories"))
        .and(body_json(json!({
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hi Alice"}],
            "user_id": "alice",
            "agent_id": "assistant"
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(1)
        .mount(&server)
        .await;
    let scope = alice().with_agent_id("assistant").unwrap();
    let model = Arc::new(ScriptedChatModel::new().reply_text("Hi Alice"));
    let provider = Mem0Provider::new(self_hosted(&server), scope.clone()).with_search_scope(scope);
    agent(provider, model.clone())
        .run("hi", &mut session())
        .await
        .unwrap();
    assert!(system_text(&model).ends_with("\n- Name is Alice"));
}

#[tokio::test]
async fn the_context_prompt_can_be_replaced() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
            {"id": "m1", "memory": "Likes tea"}
        ]})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"event_id": "e"})))
        .mount(&server)
        .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("ok"));
    let client: Mem0Client = platform(&server);
    let provider = Mem0Provider::new(client, alice())
        .with_search_scope(alice())
        .with_context_prompt("Known facts:");
    agent(provider, model.clone())
        .run("hi", &mut session())
        .await
        .unwrap();
    assert_eq!(
        system_text(&model),
        "Be brief.\n\nKnown facts:\n- Likes tea"
    );
}

#[tokio::test]
async fn the_sessions_tenant_namespaces_what_mem0_sees() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "What should I drink?",
            "filters": {"AND": [{"user_id": "acme~alice"}]},
            "top_k": 10
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(1)
        .mount(&server)
        .await;
    mount_add(
        &server,
        json!({
            "messages": [
                {"role": "user", "content": "What should I drink?"},
                {"role": "assistant", "content": "Tea."}
            ],
            "user_id": "acme~alice"
        }),
        1,
    )
    .await;
    let model = Arc::new(ScriptedChatModel::new().reply_text("Tea."));
    let provider = Mem0Provider::new(platform(&server), alice()).with_search_scope(alice());
    let mut session = AgentSession::new(
        Scope::session("chat-1")
            .unwrap()
            .with_tenant("acme")
            .unwrap(),
    );
    agent(provider, model)
        .run("What should I drink?", &mut session)
        .await
        .unwrap();
    // The session keeps the ids as configured, without the tenant.
    let state = session
        .provider_state(&SourceId::new("mem0").unwrap())
        .unwrap();
    assert_eq!(state["storage_scope"], json!({"user_id": "alice"}));
}
