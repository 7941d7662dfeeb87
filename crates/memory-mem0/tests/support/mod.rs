//! Shared helpers of the test modules: configs pointing at a wiremock fake, the test key,
//! short backoffs, captured tracing output, an agent and a memory over a Mem0 provider or
//! block.

use std::sync::Arc;
use std::time::Duration;

use memory_core::memory::Memory;
use memory_core::{
    Agent, ChatMessage, FnTokenCounter, InMemoryHistoryStore, InMemorySessionStore, Role, Scope,
    TokenCounter,
};
use memory_testkit::ScriptedChatModel;

use memory_mem0::{HttpClientConfig, Mem0Client, Mem0Config, Mem0MemoryBlock, Mem0Provider};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockBuilder, MockServer, ResponseTemplate};

/// A key that must never show up in any output.
pub(crate) const KEY: &str = "m0-test-SECRET-0123456789abcdef";

/// Retries, with backoffs short enough for tests.
pub(crate) fn quick(config: Mem0Config) -> Mem0Config {
    config
        .with_max_retries(2)
        .with_initial_backoff(Duration::from_millis(5))
        .with_max_backoff(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5))
}

/// The platform flavour at `server`, with the test key.
pub(crate) fn platform_config(server: &MockServer) -> Mem0Config {
    quick(Mem0Config::platform(KEY).with_base_url(server.uri()))
}

/// The self-hosted flavour at `server`, without a key.
pub(crate) fn self_hosted_config(server: &MockServer) -> Mem0Config {
    quick(Mem0Config::self_hosted(server.uri()))
}

/// A platform client at `server`.
pub(crate) fn platform(server: &MockServer) -> Mem0Client {
    Mem0Client::new(platform_config(server)).unwrap()
}

/// A self-hosted client at `server`.
pub(crate) fn self_hosted(server: &MockServer) -> Mem0Client {
    Mem0Client::new(self_hosted_config(server)).unwrap()
}

/// How many requests `server` received.
pub(crate) async fn request_count(server: &MockServer) -> usize {
    server
        .received_requests()
        .await
        .map_or(0, |requests| requests.len())
}

/// A mock of the platform search, which must take exactly `body` when one is given.
pub(crate) fn search_mock(body: Option<serde_json::Value>) -> MockBuilder {
    let mock = Mock::given(method("POST")).and(path("/v3/memories/search/"));
    match body {
        Some(body) => mock.and(body_json(body)),
        None => mock,
    }
}

/// Mounts `mock` at `server` answering 200 with `answer`, and expects `times` requests when
/// that is given.
pub(crate) async fn mount_answer(
    server: &MockServer,
    mock: MockBuilder,
    answer: serde_json::Value,
    times: Option<u64>,
) {
    let mut mock = mock.respond_with(ResponseTemplate::new(200).set_body_json(answer));
    if let Some(times) = times {
        mock = mock.expect(times);
    }
    mock.mount(server).await;
}

/// Asserts that neither the error's text nor its Debug shows the key.
pub(crate) fn assert_no_key(err: &memory_core::Error) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
}

/// Formatted tracing output, collected.
pub(crate) use memory_http::testing::CapturedLogs as Captured;

/// An agent with the instructions "Be brief." whose context provider is `provider`.
pub(crate) fn agent(provider: Mem0Provider, model: Arc<ScriptedChatModel>) -> Agent {
    Agent::builder("assistant", model, Arc::new(InMemoryHistoryStore::new()))
        .instructions("Be brief.")
        .context_provider(Arc::new(provider))
        .build()
        .unwrap()
}

/// The system message the model was last sent (it must lead the request).
pub(crate) fn system_text(model: &ScriptedChatModel) -> String {
    let request = model.last_request().unwrap();
    assert_eq!(request.messages[0].role, Role::System);
    request.messages[0].text()
}

/// One token per word, as memory-core's own tests count: a message costs 4 + its words.
pub(crate) fn words() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|t| {
        u32::try_from(t.split_whitespace().count()).unwrap()
    }))
}

/// A memory of the session `chat-1` whose short-term window flushes past 50 tokens, at
/// least 20 at a time.
pub(crate) fn memory(block: Mem0MemoryBlock) -> Memory {
    memory_for(Scope::session("chat-1").unwrap(), block)
}

/// A memory of `scope` whose short-term window flushes past 50 tokens, at least 20 at a time.
pub(crate) fn memory_for(scope: Scope, block: Mem0MemoryBlock) -> Memory {
    Memory::builder(
        scope,
        Arc::new(InMemoryHistoryStore::with_token_counter(words())),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(100)
    .chat_history_token_ratio(0.5)
    .token_flush_size(20)
    .token_counter(words())
    .block(Arc::new(block))
    .build()
    .unwrap()
}

/// Six messages of 10 tokens each (six words): the sixth passes the threshold of
/// [`memory`], and the first two (one user turn) are flushed.
pub(crate) fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("I love green tea very much"),
        ChatMessage::assistant("Green tea it is then friend"),
        ChatMessage::user("I also avoid coffee after noon"),
        ChatMessage::assistant("Noted no coffee after noon"),
        ChatMessage::user("Please plan my Lisbon trip soon"),
        ChatMessage::assistant("Sure I will plan Lisbon soon"),
    ]
}
