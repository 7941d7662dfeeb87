//! The agent's tool loop on real databases: a two-turn agent whose first turn calls a tool
//! stores each turn (input, call, result, answer) in one append, the second turn reads the call
//! and its result back from the store, and the stored thread reads back whole and in order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Test code fails loudly.

mod common;

use std::sync::Arc;

use memory_core::{
    Agent, AgentSession, FnTool, HistoryStore, Part, Role, Segmentation, StopReason, Window,
};
use memory_testkit::ScriptedChatModel;
use memory_testkit::fixtures::random_scope;
use serde_json::json;

async fn two_turns_with_a_tool(store: Arc<dyn HistoryStore>) {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_tool_call("call-1", "clock", r#"{"zone": "UTC"}"#)
            .reply_text("It is 12:00 UTC.")
            .reply_text("You are welcome."),
    );
    let clock = FnTool::new(
        "clock",
        "The current time in a time zone.",
        json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
        |args| async move {
            Ok(json!(format!(
                "12:00 {}",
                args["zone"].as_str().unwrap_or("?")
            )))
        },
    );
    let agent = Agent::builder("timekeeper", model.clone(), store.clone())
        .instructions("Tell the time.")
        .tool(Arc::new(clock))
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let first = agent.run("What time is it?", &mut session).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::Answered);
    assert_eq!(first.iterations, 2);
    assert_eq!(first.tool_calls[0].result, "12:00 UTC");
    let second = agent.run("Thanks.", &mut session).await.unwrap();
    assert_eq!(second.text(), "You are welcome.");

    // The second turn read the first one back from the store, group included.
    let sent = &model.requests()[2].messages;
    let roles: Vec<Role> = sent.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );

    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    let messages: Vec<_> = stored.into_iter().map(|m| m.message).collect();
    assert_eq!(
        messages[1].parts,
        [Part::ToolCall {
            id: "call-1".into(),
            name: "clock".into(),
            arguments: r#"{"zone": "UTC"}"#.into(),
        }]
    );
    assert_eq!(messages[1].author_name.as_deref(), Some("timekeeper"));
    assert_eq!(
        messages[2].parts,
        [Part::ToolResult {
            call_id: "call-1".into(),
            content: "12:00 UTC".into(),
        }]
    );
    let texts: Vec<String> = messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        [
            "What time is it?",
            "",
            "",
            "It is 12:00 UTC.",
            "Thanks.",
            "You are welcome."
        ]
    );
    // What was stored is exactly what the runs produced.
    assert_eq!(messages[1..4], first.messages[..]);
    assert_eq!(messages[5..], second.messages[..]);
    assert_eq!(
        Segmentation::of(&messages).groups,
        vec![0..1, 1..3, 3..4, 4..5, 5..6]
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_file_stores_the_tool_loop_whole() {
    two_turns_with_a_tool(Arc::new(common::sqlite_file_store().await)).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_stores_the_tool_loop_whole() {
    two_turns_with_a_tool(Arc::new(common::postgres_store().await)).await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_stores_the_tool_loop_whole() {
    two_turns_with_a_tool(Arc::new(common::mysql_store().await)).await;
}
