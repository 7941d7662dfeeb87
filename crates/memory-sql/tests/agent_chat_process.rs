//! A multi-agent chat saved in SQLite by one process is restored by another, which continues it
//! where it stopped: the chat state goes through the SessionStore, each agent's sub-history
//! through the HistoryStore, both in one SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code fails loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::chat::{AgentChat, ChatParticipant, ChatSerializer, RestoreOutcome};
use memory_core::{Agent, ChatMessage, Scope, SessionStore};
use memory_sql::SqlStore;
use memory_testkit::ScriptedChatModel;

const CHILD_ENV: &str = "MEMORY_SQL_CHAT_CHILD_DB";

fn participant(
    store: &SqlStore,
    name: &str,
    replies: &[&str],
) -> (ChatParticipant, Arc<ScriptedChatModel>) {
    let mut model = ScriptedChatModel::new();
    for r in replies {
        model = model.reply_text(*r);
    }
    let model = Arc::new(model);
    let agent = Agent::builder(name, model.clone(), Arc::new(store.clone()))
        .build()
        .unwrap();
    (
        ChatParticipant::new(Arc::new(agent), "chat_completion"),
        model,
    )
}

fn scope() -> Scope {
    Scope::session("team-chat").unwrap()
}

/// The child side: restores the chat, lets the writer take one more turn, saves it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_continues_the_chat() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = SqlStore::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();
    let saved = SessionStore::load(&store, &scope()).await.unwrap().unwrap();
    let serializer =
        ChatSerializer::deserialize(serde_json::to_vec(&saved.state).unwrap().as_slice()).unwrap();
    let mut chat = AgentChat::new(scope());
    let (writer, writer_model) = participant(&store, "writer", &["draft 2"]);
    let (critic, _) = participant(&store, "critic", &[]);
    chat.add_agent(writer).unwrap();
    chat.add_agent(critic).unwrap();
    assert_eq!(
        serializer.restore(&mut chat).unwrap(),
        RestoreOutcome::Equivalent
    );
    chat.invoke_agent("writer").await.unwrap();
    // The writer's own sub-history came from the first process's run, through SQLite.
    let sent: Vec<String> = writer_model
        .last_request()
        .unwrap()
        .messages
        .iter()
        .map(ChatMessage::text)
        .collect();
    assert_eq!(sent, ["Write a haiku", "draft 1", "too long"]);
    let mut bytes = Vec::new();
    ChatSerializer::serialize(&chat, &mut bytes).unwrap();
    let state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    SessionStore::save(&store, &scope(), &state, Some(saved.version))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_restored_in_a_new_process_continues_where_it_stopped() {
    let dir = std::env::temp_dir().join("memory-sql-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("chat-{}.db", uuid::Uuid::new_v4().simple()));
    let path = path.to_str().unwrap().to_owned();
    let store = SqlStore::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();

    let mut chat = AgentChat::new(scope());
    let (writer, _) = participant(&store, "writer", &["draft 1"]);
    let (critic, _) = participant(&store, "critic", &["too long"]);
    chat.add_agent(writer).unwrap();
    chat.add_agent(critic).unwrap();
    chat.add_message(ChatMessage::user("Write a haiku"));
    chat.invoke().await.unwrap();
    chat.invoke().await.unwrap();
    let mut bytes = Vec::new();
    ChatSerializer::serialize(&chat, &mut bytes).unwrap();
    let state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    SessionStore::save(&store, &scope(), &state, None)
        .await
        .unwrap();
    store.close().await;

    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_continues_the_chat",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child process failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let store = SqlStore::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();
    let saved = SessionStore::load(&store, &scope()).await.unwrap().unwrap();
    assert_eq!(saved.version, 2);
    let serializer =
        ChatSerializer::deserialize(serde_json::to_vec(&saved.state).unwrap().as_slice()).unwrap();
    let texts: Vec<String> = serializer.history().iter().map(ChatMessage::text).collect();
    assert_eq!(texts, ["Write a haiku", "draft 1", "too long", "draft 2"]);
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
}
