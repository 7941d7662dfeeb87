//! Helpers shared by the CLI's test files (each includes it with `mod support;`): stores of each
//! test's own on every engine (memory-testkit's `TestStore`), seeding through the library, and
//! reading a whole store back.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    unreachable_pub
)]

use std::collections::BTreeMap;

use agent_memory::{
    AgentSession, ChatMessage, OpenOptions, PageRequest, Scope, ScopeFilter, Stores, TenantId,
    Window,
};
pub use memory_testkit::engines::TestStore;
use serde_json::{Value, json};

/// The command under test.
pub fn cli() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("agent-memory").unwrap();
    cmd.env_remove(agent_memory::URL_ENV);
    cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    cmd
}

/// The stores, opened through the library (without the window cache, so every read is the
/// store's own).
pub async fn open(store: &TestStore) -> Stores {
    OpenOptions::new()
        .without_window_cache()
        .open(&store.url)
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", store.name()))
}

/// A message with an id, text and metadata of its own.
pub fn message(thread: usize, i: usize) -> ChatMessage {
    let text = format!(
        "thread {thread} message {i}: {}",
        "lorem ipsum ".repeat(i % 5)
    );
    let msg = if i.is_multiple_of(2) {
        ChatMessage::user(text)
    } else {
        ChatMessage::assistant(text)
    };
    msg.with_metadata("n", json!(i))
}

/// Appends `per_thread` messages to each of `scopes` in batches of 1000 (the threads
/// concurrently: token counting runs in parallel), archives the first `archived` of each
/// thread, and saves a session state for each scope.
pub async fn seed(stores: &Stores, scopes: &[Scope], per_thread: usize, archived: u64) {
    const BATCH: usize = 1000;
    let mut tasks = Vec::new();
    for (t, scope) in scopes.iter().enumerate() {
        let (stores, scope) = (stores.clone(), scope.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while i < per_thread {
                let end = (i + BATCH).min(per_thread);
                let batch: Vec<ChatMessage> = (i..end).map(|i| message(t, i)).collect();
                stores.history.append(&scope, &batch).await.unwrap();
                i = end;
            }
            if archived > 0 {
                stores.history.archive(&scope, 1..=archived).await.unwrap();
            }
            let mut session = AgentSession::new(scope.clone());
            session.update_snapshot("note", json!({"thread": t, "facts": ["a", "b"]}));
            let state = session.serialize().unwrap();
            stores.sessions.save(&scope, &state, None).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// One message as compared across stores: seq, tokens, archived, and the message's JSON.
pub type Row = (u64, u32, bool, Value);

/// Everything a store holds for the tenants: each thread's messages (active and archived) and
/// each session's state.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub threads: BTreeMap<String, Vec<Row>>,
    pub sessions: BTreeMap<String, Value>,
}

impl Snapshot {
    /// Messages in every thread.
    pub fn messages(&self) -> usize {
        self.threads.values().map(Vec::len).sum()
    }
}

/// Reads every thread and session of `tenants` through the library.
pub async fn snapshot(stores: &Stores, tenants: &[&str]) -> Snapshot {
    let mut threads = BTreeMap::new();
    let mut sessions = BTreeMap::new();
    for tenant in tenants {
        let filter = ScopeFilter::tenant(TenantId::new(*tenant).unwrap());
        let mut page = PageRequest::first(500);
        loop {
            let listed = stores.history.list_threads(&filter, page).await.unwrap();
            for scope in listed.items {
                let rows: Vec<Row> = stores
                    .history
                    .read(&scope, Window::Everything)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|m| {
                        (
                            m.seq,
                            m.tokens,
                            m.archived,
                            m.message.to_json_value().unwrap(),
                        )
                    })
                    .collect();
                threads.insert(scope.key(), rows);
            }
            match listed.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let mut page = PageRequest::first(500);
        loop {
            let listed = stores.sessions.list(&filter, page).await.unwrap();
            for scope in listed.items {
                let state = stores.sessions.load(&scope).await.unwrap().unwrap().state;
                sessions.insert(scope.key(), state);
            }
            match listed.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
    }
    Snapshot { threads, sessions }
}

/// The command's stdout, parsed as one JSON document.
pub fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
