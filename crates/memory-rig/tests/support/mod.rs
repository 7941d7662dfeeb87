//! Shared by the tests: a local fake OpenAI chat-completions server that answers from a script,
//! a rig model pointed at it, and the stores of each engine.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::HistoryStore;
use rig_core::providers::openai::OpenAIConfig;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The engines the process tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// A SQLite file.
    Sqlite,
    /// The PostgreSQL server.
    Postgres,
    /// The Redis server.
    Redis,
}

impl Engine {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
            Engine::Redis => "redis",
        }
    }

    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "sqlite" => Engine::Sqlite,
            "postgres" => Engine::Postgres,
            "redis" => Engine::Redis,
            other => panic!("unknown engine {other}"),
        }
    }
}

/// Opens the store of `engine`; `sqlite_path` is the SQLite file.
pub(crate) async fn open_store(engine: Engine, sqlite_path: &str) -> Arc<dyn HistoryStore> {
    match engine {
        Engine::Sqlite => Arc::new(
            memory_sql::SqlStore::connect(&format!("sqlite://{sqlite_path}"))
                .await
                .unwrap(),
        ),
        Engine::Postgres => {
            let url = std::env::var("AGENT_MEMORY_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            Arc::new(
                memory_sql::SqlStore::builder(url)
                    .table_prefix(format!("amtest_v{}_", memory_sql::SCHEMA_VERSION))
                    .connect()
                    .await
                    .unwrap_or_else(|e| {
                        panic!("the PostgreSQL server (AGENT_MEMORY_POSTGRES_URL) is required: {e}")
                    }),
            )
        }
        Engine::Redis => {
            let url = std::env::var("AGENT_MEMORY_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            Arc::new(
                memory_redis::RedisStore::builder(&url)
                    .default_ttl(Duration::from_secs(2 * 3600))
                    .connect()
                    .await
                    .unwrap_or_else(|e| {
                        panic!("the Redis at {url} (AGENT_MEMORY_REDIS_URL) is required: {e}")
                    }),
            )
        }
    }
}

/// Answers each chat-completions request with the next scripted reply.
struct Script(Mutex<VecDeque<Value>>);

impl Respond for Script {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        match self.0.lock().unwrap().pop_front() {
            Some(body) => ResponseTemplate::new(200).set_body_json(body),
            None => ResponseTemplate::new(500).set_body_json(json!({
                "error": {"message": "the script has no more replies", "type": "server_error"}
            })),
        }
    }
}

/// A fake OpenAI server answering `POST /v1/chat/completions` with `replies`, in order.
pub(crate) async fn fake_openai(replies: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    server
}

fn completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// A reply with `text`.
pub(crate) fn text_reply(text: &str) -> Value {
    completion(json!({"role": "assistant", "content": text}), "stop")
}

/// A reply calling tool `name` with `arguments` (JSON text) under call id `id`.
pub(crate) fn tool_call_reply(id: &str, name: &str, arguments: &str) -> Value {
    completion(
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments}
            }]
        }),
        "tool_calls",
    )
}

/// A rig chat-completions model on `server`.
pub(crate) fn model(
    server: &MockServer,
) -> rig_core::Model<rig_core::providers::openai::wire::Chat> {
    // Built with the rest of the workspace, reqwest has `rustls-no-provider` (memory-http's
    // choice), so a client needs a process-wide rustls provider, even for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    OpenAIConfig::new("sk-test")
        .with_base_url(format!("{}/v1", server.uri()))
        .client()
        .chat("gpt-test")
}

/// The JSON bodies of the requests `server` received, in order.
pub(crate) async fn request_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// The `messages` of a chat-completions request body.
pub(crate) fn request_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// A unique name for a test's tenant or conversation.
pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
