//! The tests that start this binary again as child processes, which run one test of it by its
//! exact name (`--exact child_appender`): they have a test binary of their own, so the children
//! start small and the names they are started with stay the binary's top-level names.
//!
//! - Several processes appending to one thread (SQLite file, PostgreSQL, MySQL/MariaDB): no
//!   message lost or stored twice, gap-free seqs, each writer's order kept.
//! - A multi-agent chat saved in SQLite by one process is restored by another, which continues
//!   it where it stopped: the chat state goes through the SessionStore, each agent's
//!   sub-history through the HistoryStore, both in one SQLite file.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::sync::Arc;

use memory_core::chat::{AgentChat, ChatParticipant, ChatSerializer, RestoreOutcome};
use memory_core::{Agent, ChatMessage, HistoryStore, Scope, SessionStore, Window};
use memory_sql::SqlStore;
use memory_testkit::ScriptedChatModel;
use support::{open, random_tenant};

// ---------------------------------------------------------------------------------------------
// Several processes appending to one thread
// ---------------------------------------------------------------------------------------------

const CHILD_ENV: &str = "MEMORY_SQL_CHILD_URL";
const APPENDS_PER_WRITER: usize = 100;

/// The child side of the multi-process tests: does nothing unless a parent test started this
/// binary with the environment below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_appender() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let prefix = std::env::var("MEMORY_SQL_CHILD_PREFIX").unwrap();
    let tenant = std::env::var("MEMORY_SQL_CHILD_TENANT").unwrap();
    let writer = std::env::var("MEMORY_SQL_CHILD_WRITER").unwrap();
    let store = open(&url, &prefix).await;
    append_as_writer(&store, &tenant, &writer).await;
}

fn shared_scope(tenant: &str) -> Scope {
    Scope::session("multi-process")
        .unwrap()
        .with_tenant(tenant)
        .unwrap()
}

/// Appends `APPENDS_PER_WRITER` messages one by one, re-sending every tenth batch (a retried
/// append must insert nothing).
async fn append_as_writer(store: &SqlStore, tenant: &str, writer: &str) {
    let scope = shared_scope(tenant);
    let mut previous: Option<ChatMessage> = None;
    for i in 0..APPENDS_PER_WRITER {
        let message = ChatMessage::user(format!("{writer}-{i:03}"));
        let out = store
            .append(&scope, std::slice::from_ref(&message))
            .await
            .unwrap();
        assert_eq!(out.inserted, 1, "{writer} {i}");
        if i % 10 == 9 {
            let again = store
                .append(&scope, &[previous.clone().unwrap(), message.clone()])
                .await
                .unwrap();
            assert_eq!(
                again.inserted, 0,
                "{writer} {i}: a retried append inserts nothing"
            );
            assert_eq!(again.seqs[1], out.seqs[0]);
        }
        previous = Some(message);
    }
}

async fn two_processes_append(url: String, prefix: String) {
    let tenant = random_tenant();
    // Create the schema first so the children do not all race to migrate a new file.
    let store = open(&url, &prefix).await;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<std::process::Child> = ["child-a", "child-b"]
        .into_iter()
        .map(|writer| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "child_appender",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, &url)
                .env("MEMORY_SQL_CHILD_PREFIX", &prefix)
                .env("MEMORY_SQL_CHILD_TENANT", &tenant)
                .env("MEMORY_SQL_CHILD_WRITER", writer)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    append_as_writer(&store, &tenant, "parent").await;
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("1 passed"),
            "the child ran its test:\n{stdout}"
        );
    }
    let scope = shared_scope(&tenant);
    let all = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(all.len(), 3 * APPENDS_PER_WRITER);
    support::assert_gap_free(&all);
    for writer in ["parent", "child-a", "child-b"] {
        let mine: Vec<String> = all
            .iter()
            .map(|m| m.message.text())
            .filter(|t| t.starts_with(&format!("{writer}-")))
            .collect();
        let expected: Vec<String> = (0..APPENDS_PER_WRITER)
            .map(|i| format!("{writer}-{i:03}"))
            .collect();
        assert_eq!(
            mine, expected,
            "{writer}'s messages, once each, in its order"
        );
    }
    let count = store.count(&scope).await.unwrap();
    assert_eq!(count.last_seq, 3 * APPENDS_PER_WRITER as u64);
    assert_eq!(count.active, 3 * APPENDS_PER_WRITER as u64);
    store.clear(&scope).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_append_to_one_thread_sqlite_file() {
    two_processes_append(support::temp_sqlite_url().0, "agent_memory_".to_owned()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_append_to_one_thread_postgres() {
    two_processes_append(support::postgres_url(), support::shared_prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_append_to_one_thread_mysql() {
    two_processes_append(support::mysql_url(), support::shared_prefix()).await;
}

// ---------------------------------------------------------------------------------------------
// A multi-agent chat continued by another process
// ---------------------------------------------------------------------------------------------

const CHAT_CHILD_ENV: &str = "MEMORY_SQL_CHAT_CHILD_DB";

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
    let Ok(path) = std::env::var(CHAT_CHILD_ENV) else {
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
        .env(CHAT_CHILD_ENV, &path)
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
