//! A rig agent whose conversation memory is agent-memory.
//!
//! The agent (rig's `AgentBuilder`) gets `RigMemory` as its memory: every turn is loaded from
//! and stored in an agent-memory thread, here a SQLite file in a temporary directory (or the
//! store `AGENT_MEMORY_URL` names). Turn 1 calls an `add` tool; turn 2 asks about turn 1, which
//! the model receives from memory. At the end the stored thread is printed: the tool call and
//! its result are agent-memory's own parts, readable by any agent-memory tool.
//!
//! Offline by default: the model is a local stand-in OpenAI server started in this process,
//! answering from a script. With `OPENAI_BASE_URL` (and `OPENAI_API_KEY`, `OPENAI_MODEL`) set, it
//! talks to that OpenAI-compatible server instead (plain HTTP, such as a local Ollama or vLLM).
//! Run it with `cargo run -p rig-memory`.

use std::error::Error as StdError;
use std::process::ExitCode;

use agent_memory::rig::RigMemory;
use agent_memory::{Part, TenantId, UserId, Window};
use rig_agent::AgentBuilder;
use rig_core::completion::message::ToolName;
use rig_core::providers::openai::OpenAIConfig;
use rig_core::tool::{DynamicTool, ToolOutput};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

type BoxError = Box<dyn StdError + Send + Sync>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), BoxError> {
    // The stores: AGENT_MEMORY_URL, or a SQLite file of our own.
    let dir = std::env::temp_dir().join(format!("rig-memory-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = std::env::var("AGENT_MEMORY_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.join("memory.db").display()));
    let stores = agent_memory::open(&url).await?;

    // The memory: the conversations of user "alice" of tenant "acme" (no default tenant).
    let memory = RigMemory::builder(
        stores.history.clone(),
        TenantId::new("acme")?,
        UserId::new("alice")?,
    )
    .build();
    // A new conversation each run (the store may be a shared one).
    let conversation = format!("rig-example-{}", std::process::id());
    let conversation = conversation.as_str();
    let scope = memory.scope(&conversation.into())?;

    // The model: the offline stand-in, or the server OPENAI_BASE_URL names.
    let stand_in = match std::env::var("OPENAI_BASE_URL") {
        Ok(_) => None,
        Err(_) => Some(stand_in_server().await),
    };
    let config = match &stand_in {
        Some(server) => OpenAIConfig::new("offline").with_base_url(format!("{}/v1", server.uri())),
        None => OpenAIConfig::from_env()?,
    };
    // reqwest built beside agent-memory's HTTP clients has `rustls-no-provider`: rig's client
    // then needs a process-wide rustls provider (ring, the one agent-memory uses).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let model_name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let agent = AgentBuilder::new(config.client().chat(model_name))
        .preamble("You are brief. Use the add tool for sums.")
        .dynamic_tool(add_tool()?)
        .memory(memory)
        .build();

    for question in ["What is 2 + 3?", "What did I just ask you?"] {
        let response = agent
            .prompt(question)
            .conversation(conversation)
            .max_turns(4)
            .await?;
        println!("user:      {question}");
        println!("assistant: {}", response.output());
    }

    if let Some(server) = &stand_in {
        let requests = server.received_requests().await.unwrap_or_default();
        if let Some(last) = requests.last() {
            let body: Value = serde_json::from_slice(&last.body)?;
            let sent = field(&body, "messages").as_array().map_or(0, Vec::len);
            println!("\nthe model's last request carried {sent} messages, turn 1 included");
        }
    }

    println!("\nthe stored thread ({url}):");
    for stored in stores.history.read(&scope, Window::All).await? {
        let message = &stored.message;
        for part in &message.parts {
            let shown = match part {
                Part::Text { text } => format!("text: {text}"),
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } => format!("tool call {id}: {name}({arguments})"),
                Part::ToolResult { call_id, content } => {
                    format!("tool result {call_id}: {content}")
                }
                other => format!("{other:?}"),
            };
            println!("  #{} {:<9} {shown}", stored.seq, message.role.as_str());
        }
    }
    if std::env::var("AGENT_MEMORY_URL").is_err() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// `value[key]`, or null (no indexing that could panic).
fn field<'a>(value: &'a Value, key: &str) -> &'a Value {
    value.get(key).unwrap_or(&Value::Null)
}

/// The `add` tool: the sum of two integers.
fn add_tool() -> Result<DynamicTool, BoxError> {
    Ok(DynamicTool::new(
        ToolName::new("add")?,
        "Adds two integers.",
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }),
        |args| {
            Box::pin(async move {
                let a = field(&args, "a").as_i64().unwrap_or(0);
                let b = field(&args, "b").as_i64().unwrap_or(0);
                Ok(ToolOutput::text(a.saturating_add(b).to_string()))
            })
        },
    ))
}

/// The offline stand-in for an OpenAI-compatible server: it calls `add` when the last message
/// is a question with a `+`, answers with a tool's result when the last message is one, and
/// otherwise says how many user messages it received (so the second turn shows the first was
/// remembered).
struct StandIn;

impl Respond for StandIn {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = field(&body, "messages")
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let text = |m: &Value| match field(m, "content") {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| field(p, "text").as_str())
                .collect(),
            _ => String::new(),
        };
        let message = if field(&last, "role") == "tool" {
            json!({"role": "assistant", "content": format!("The sum is {}.", text(&last))})
        } else if text(&last).contains('+') {
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_add_1", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}
            }]})
        } else {
            let earlier: Vec<String> = messages
                .iter()
                .filter(|m| field(m, "role") == "user")
                .map(text)
                .collect();
            let first = earlier.first().cloned().unwrap_or_default();
            json!({"role": "assistant", "content": format!("Before this you asked: \"{first}\"")})
        };
        let finish = if field(&message, "tool_calls").is_null() {
            "stop"
        } else {
            "tool_calls"
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-offline", "object": "chat.completion", "created": 0,
            "model": "offline-stand-in",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        }))
    }
}

async fn stand_in_server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(StandIn)
        .mount(&server)
        .await;
    server
}
