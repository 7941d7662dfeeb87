//! Two processes continue one rig conversation through agent-memory: process 1 sends turn 1,
//! process 2 (a fresh process with a fresh agent and a fresh fake model) sends turn 2, and the
//! model receives turn 1 in that request. On a SQLite file, PostgreSQL and Redis.
//!
//! The test binary runs itself as the child processes (`child_sends_one_turn`, selected by
//! environment variables; it does nothing when they are unset).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use memory_core::{TenantId, UserId, Window};
use memory_rig::RigMemory;
use rig_agent::AgentBuilder;
use serde_json::Value;
use support::{
    Engine, fake_openai, model, open_store, request_bodies, request_messages, text_reply, unique,
};

const CHILD_ENGINE: &str = "MEMORY_RIG_CHILD_ENGINE";
const CHILD_SQLITE: &str = "MEMORY_RIG_CHILD_SQLITE";
const CHILD_TENANT: &str = "MEMORY_RIG_CHILD_TENANT";
const CHILD_CONVERSATION: &str = "MEMORY_RIG_CHILD_CONVERSATION";
const CHILD_TURN: &str = "MEMORY_RIG_CHILD_TURN";

const TURN_1: &str = "My name is Alice.";
const REPLY_1: &str = "Nice to meet you, Alice.";
const TURN_2: &str = "What is my name?";
const REPLY_2: &str = "Your name is Alice.";

/// The text of a chat-completions message (a string, or an array of text parts).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn roles_and_texts(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").to_owned(), text_of(m)))
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

/// The child side: one turn of the conversation, in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_sends_one_turn() {
    let Ok(engine) = std::env::var(CHILD_ENGINE) else {
        return;
    };
    let engine = Engine::from_name(&engine);
    let sqlite = std::env::var(CHILD_SQLITE).unwrap();
    let tenant = std::env::var(CHILD_TENANT).unwrap();
    let conversation = std::env::var(CHILD_CONVERSATION).unwrap();
    let turn = std::env::var(CHILD_TURN).unwrap();

    let store = open_store(engine, &sqlite).await;
    let memory = RigMemory::builder(
        store,
        TenantId::new(tenant).unwrap(),
        UserId::new("alice").unwrap(),
    )
    .build();
    let (prompt, reply) = match turn.as_str() {
        "1" => (TURN_1, REPLY_1),
        _ => (TURN_2, REPLY_2),
    };
    let server = fake_openai(vec![text_reply(reply)]).await;
    let agent = AgentBuilder::new(model(&server))
        .preamble("Be brief.")
        .memory(memory)
        .build();
    let response = agent
        .prompt(prompt)
        .conversation(conversation.as_str())
        .await
        .unwrap();
    assert_eq!(response.output(), reply);
    assert!(
        response
            .memory_append
            .as_ref()
            .is_some_and(|a| a.is_acknowledged()),
        "the turn was not stored: {:?}",
        response.memory_append
    );

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "one model call per turn");
    let sent: Vec<(String, String)> = roles_and_texts(&request_messages(&bodies[0]))
        .into_iter()
        .filter(|(role, _)| role != "system" && role != "developer")
        .collect();
    let expected = if turn == "1" {
        vec![pair("user", TURN_1)]
    } else {
        // Turn 1, stored by the other process, reaches the model before turn 2.
        vec![
            pair("user", TURN_1),
            pair("assistant", REPLY_1),
            pair("user", TURN_2),
        ]
    };
    assert_eq!(sent, expected);
    println!("child turn {turn} ok");
}

fn run_child(engine: Engine, sqlite: &str, tenant: &str, conversation: &str, turn: &str) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_sends_one_turn",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENGINE, engine.name())
        .env(CHILD_SQLITE, sqlite)
        .env(CHILD_TENANT, tenant)
        .env(CHILD_CONVERSATION, conversation)
        .env(CHILD_TURN, turn)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(&format!("child turn {turn} ok")),
        "the child process of turn {turn} on {} failed:\n{stdout}\n{}",
        engine.name(),
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn two_processes_continue_one_conversation(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("memory.db").display().to_string();
    let tenant = unique("rig");
    let conversation = unique("conv");
    run_child(engine, &sqlite, &tenant, &conversation, "1");
    run_child(engine, &sqlite, &tenant, &conversation, "2");

    // The thread holds both turns, in order, and nothing of the preamble.
    let store = open_store(engine, &sqlite).await;
    let memory = RigMemory::builder(
        store.clone(),
        TenantId::new(tenant).unwrap(),
        UserId::new("alice").unwrap(),
    )
    .build();
    let scope = memory.scope(&conversation.as_str().into()).unwrap();
    let stored = store.read(&scope, Window::Everything).await.unwrap();
    let texts: Vec<(String, String)> = stored
        .iter()
        .map(|m| {
            (
                m.message.role.as_str().to_owned(),
                m.message.parts[0].as_text().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        vec![
            pair("user", TURN_1),
            pair("assistant", REPLY_1),
            pair("user", TURN_2),
            pair("assistant", REPLY_2),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_sqlite() {
    two_processes_continue_one_conversation(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_postgres() {
    two_processes_continue_one_conversation(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_redis() {
    two_processes_continue_one_conversation(Engine::Redis).await;
}
