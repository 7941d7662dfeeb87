//! Shared by the agent tests: swiftide's `ChatCompletion` over memory-openai's client pointed
//! at a local fake OpenAI server (wiremock), the fake's answers, a tool, and the stores.
//!
//! swiftide's own OpenAI integration (swiftide-integrations, on async-openai) is not used: it
//! would add a second HTTP stack and OpenAI client to the build for the tests alone; the model
//! here speaks the same wire format through memory-openai, and converts with this crate.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::{ChatModel, ChatRequest, HistoryStore, Scope, ToolDefinition};
use memory_openai::{HttpClientConfig, OpenAiChatModel, OpenAiConfig};
use memory_swiftide::swiftide_core::chat_completion::errors::{LanguageModelError, ToolError};
use memory_swiftide::swiftide_core::chat_completion::{
    ChatCompletionRequest, ChatCompletionResponse, ChatMessage as SwiftMessage, ToolCall,
    ToolOutput, ToolSpec,
};
use memory_swiftide::swiftide_core::{AgentContext, ChatCompletion, Tool};
use memory_swiftide::{SwiftideHistory, from_swiftide, to_swiftide};
use serde_json::{Value, json};
use swiftide_agents::{Agent, DefaultContext};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// swiftide's `ChatCompletion` over an OpenAI-compatible server.
#[derive(Clone, Debug)]
pub(crate) struct FakeOpenAi {
    model: Arc<OpenAiChatModel>,
}

impl FakeOpenAi {
    pub(crate) fn new(server: &MockServer) -> Self {
        let config = OpenAiConfig::new("fake-model")
            .with_base_url(format!("{}/v1", server.uri()))
            .with_api_key("sk-test-not-a-real-key")
            .with_timeout(Duration::from_secs(10));
        Self {
            model: Arc::new(OpenAiChatModel::new(config).unwrap()),
        }
    }
}

#[async_trait]
impl ChatCompletion for FakeOpenAi {
    async fn complete(
        &self,
        request: &ChatCompletionRequest,
    ) -> Result<ChatCompletionResponse, LanguageModelError> {
        let ours = ChatRequest {
            messages: request.messages().iter().map(from_swiftide).collect(),
            tools: request
                .tools_spec
                .iter()
                .map(|spec| ToolDefinition {
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    parameters: json!({"type": "object", "properties": {}}),
                })
                .collect(),
            conversation_id: None,
        };
        let answer = self
            .model
            .complete(&ours)
            .await
            .map_err(LanguageModelError::permanent)?;
        let message = answer
            .messages
            .first()
            .ok_or_else(|| LanguageModelError::permanent("the fake model answered nothing"))?;
        let SwiftMessage::Assistant(text, calls) =
            to_swiftide(message).map_err(LanguageModelError::permanent)?
        else {
            return Err(LanguageModelError::permanent("not an assistant answer"));
        };
        Ok(ChatCompletionResponse {
            message: text,
            tool_calls: calls,
            ..Default::default()
        })
    }
}

/// An OpenAI chat-completions answer with text.
pub(crate) fn text_answer(text: &str) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}]
    })
}

/// An OpenAI chat-completions answer that calls `add` with `arguments`.
pub(crate) fn tool_call_answer(call_id: &str, arguments: &str) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": [
                        {"id": call_id, "type": "function",
                         "function": {"name": "add", "arguments": arguments}}]}}]
    })
}

/// A fake server that gives `answers` in order, one per request.
pub(crate) async fn fake_server(answers: &[Value]) -> MockServer {
    let server = MockServer::start().await;
    for answer in answers {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    server
}

/// The `messages` of each chat request the fake received, as JSON.
pub(crate) async fn received_messages(server: &MockServer) -> Vec<Vec<Value>> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["messages"].as_array().unwrap().clone()
        })
        .collect()
}

/// The `(role, content)` of request messages, content as text (`""` for none).
pub(crate) fn roles_and_texts(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A tool that adds `a` and `b`.
#[derive(Clone, Debug)]
pub(crate) struct AddTool;

#[async_trait]
impl Tool for AddTool {
    async fn invoke(
        &self,
        _context: &dyn AgentContext,
        call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(call.args().unwrap_or("{}"))?;
        let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
        Ok(ToolOutput::text(sum.to_string()))
    }

    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("add")
    }

    fn tool_spec(&self) -> ToolSpec {
        ToolSpec::builder()
            .name("add")
            .description("Adds two integers a and b.")
            .build()
            .unwrap()
    }
}

/// A swiftide agent whose model is the fake at `server` and whose history is `history`.
pub(crate) fn agent(server: &MockServer, history: SwiftideHistory) -> Agent {
    let mut context = DefaultContext::default();
    context.with_message_history(history);
    Agent::builder()
        .context(context)
        .llm(&FakeOpenAi::new(server))
        .add_tool(AddTool)
        .build()
        .unwrap()
}

/// The test PostgreSQL server: `AGENT_MEMORY_POSTGRES_URL`, or the local one.
pub(crate) fn postgres_url() -> String {
    std::env::var("AGENT_MEMORY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The test Redis server: `AGENT_MEMORY_REDIS_URL`, or the local one.
pub(crate) fn redis_url() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A new SQLite file's URL.
pub(crate) fn sqlite_file_url() -> String {
    let dir = std::env::temp_dir().join("memory-swiftide-tests");
    std::fs::create_dir_all(&dir).unwrap();
    format!(
        "sqlite://{}",
        dir.join(format!("{}.db", uuid::Uuid::new_v4())).display()
    )
}

/// Opens the store of `engine` (`sqlite`, `postgres`, `redis`) at `url`.
pub(crate) async fn open_store(engine: &str, url: &str) -> Arc<dyn HistoryStore> {
    match engine {
        "sqlite" => Arc::new(memory_sql::SqlStore::connect(url).await.unwrap()),
        "postgres" => Arc::new(
            memory_sql::SqlStore::builder(url)
                .table_prefix(format!("amtest_v{}_", memory_sql::SCHEMA_VERSION))
                .connect()
                .await
                .unwrap_or_else(|e| panic!("the PostgreSQL server is required: {e}")),
        ),
        "redis" => Arc::new(
            memory_redis::RedisStore::connect(url)
                .await
                .unwrap_or_else(|e| panic!("the Redis server is required: {e}")),
        ),
        other => panic!("unknown engine {other}"),
    }
}

/// A scope of its own: a fresh tenant, user and session.
pub(crate) fn unique_scope() -> Scope {
    let id = uuid::Uuid::new_v4().simple().to_string();
    Scope::session(format!("s-{id}"))
        .unwrap()
        .with_tenant(format!("tk-{id}"))
        .unwrap()
        .with_user(format!("u-{id}"))
        .unwrap()
}
