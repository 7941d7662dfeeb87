//! A tool call round trips through a real rig agent and agent-memory: the fake model calls a
//! tool, rig runs it and sends the result back, the model answers; the stored thread holds the
//! call and the result as agent-memory parts, and loading it back into rig gives exactly the
//! messages rig appended. On a SQLite file, PostgreSQL and Redis.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use memory_core::{Part, Role, TenantId, UserId, Window};
use memory_rig::RigMemory;
use rig_agent::AgentBuilder;
use rig_core::completion::message::ToolName;
use rig_core::memory::ConversationMemory;
use rig_core::tool::{DynamicTool, ToolOutput};
use serde_json::json;
use support::{
    Engine, fake_openai, model, open_store, request_bodies, request_messages, text_reply,
    tool_call_reply, unique,
};

fn add_tool() -> DynamicTool {
    DynamicTool::new(
        ToolName::new("add").unwrap(),
        "Adds two integers.",
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }),
        |args| {
            Box::pin(async move {
                let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                Ok(ToolOutput::text(sum.to_string()))
            })
        },
    )
}

async fn a_tool_call_round_trips(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("memory.db").display().to_string();
    let store = open_store(engine, &sqlite).await;
    let tenant = TenantId::new(unique("rig")).unwrap();
    let memory =
        RigMemory::builder(store.clone(), tenant.clone(), UserId::new("bob").unwrap()).build();
    let conversation = unique("tools");

    let server = fake_openai(vec![
        tool_call_reply("call_add_1", "add", r#"{"a":2,"b":3}"#),
        text_reply("2 + 3 = 5"),
    ])
    .await;
    let agent = AgentBuilder::new(model(&server))
        .dynamic_tool(add_tool())
        .memory(memory)
        .build();
    let response = agent
        .prompt("What is 2 + 3?")
        .conversation(conversation.as_str())
        .max_turns(4)
        .await
        .unwrap();
    assert_eq!(response.output(), "2 + 3 = 5");

    // The tool's result went back to the model in the second request.
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let second = request_messages(&bodies[1]);
    let result = second
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the second request carries the tool result");
    assert_eq!(result["tool_call_id"], "call_add_1");
    let content = match &result["content"] {
        serde_json::Value::String(s) => s.clone(),
        other => other[0]["text"].as_str().unwrap_or_default().to_owned(),
    };
    assert_eq!(content, "5");

    // The thread holds the call and its result as agent-memory's own parts.
    let memory = RigMemory::builder(store.clone(), tenant, UserId::new("bob").unwrap()).build();
    let scope = memory.scope(&conversation.as_str().into()).unwrap();
    let stored = store.read(&scope, Window::All).await.unwrap();
    let roles: Vec<Role> = stored.iter().map(|m| m.message.role).collect();
    assert_eq!(
        roles,
        vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        stored[1].message.parts,
        vec![Part::ToolCall {
            id: "call_add_1".into(),
            name: "add".into(),
            arguments: r#"{"a":2,"b":3}"#.into(),
        }]
    );
    assert_eq!(
        stored[2].message.parts,
        vec![Part::ToolResult {
            call_id: "call_add_1".into(),
            content: "5".into(),
        }]
    );

    // Loading it back gives rig exactly the messages it appended.
    let loaded = memory.load(&conversation.as_str().into()).await.unwrap();
    assert_eq!(loaded, response.messages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trips_on_sqlite() {
    a_tool_call_round_trips(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trips_on_postgres() {
    a_tool_call_round_trips(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trips_on_redis() {
    a_tool_call_round_trips(Engine::Redis).await;
}
