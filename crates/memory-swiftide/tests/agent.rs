//! A real swiftide agent whose history is agent-memory, against a local fake OpenAI server:
//! two processes continue one conversation (SQLite file, PostgreSQL, Redis), a tool call round
//! trips, and an overwrite archives what it replaces.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::process::Command;
use std::sync::Arc;

use memory_core::{HistoryStore, InMemoryHistoryStore, Role, Scope, Window};
use memory_swiftide::SwiftideHistory;
use memory_swiftide::swiftide_core::MessageHistory;
use memory_swiftide::swiftide_core::chat_completion::{ChatMessage as SwiftMessage, ToolOutput};
use support::{
    agent, fake_server, open_store, postgres_url, received_messages, redis_url, roles_and_texts,
    sqlite_file_url, text_answer, tool_call_answer, unique_scope,
};

const CHILD_ENGINE: &str = "MEMORY_SWIFTIDE_CHILD_ENGINE";
const CHILD_URL: &str = "MEMORY_SWIFTIDE_CHILD_URL";
const CHILD_SCOPE: &str = "MEMORY_SWIFTIDE_CHILD_SCOPE";

/// The second process: opens the same store and scope, sends turn 2 to its own fake, and checks
/// that the fake received turn 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_sends_turn_two() {
    let (Ok(engine), Ok(url), Ok(scope)) = (
        std::env::var(CHILD_ENGINE),
        std::env::var(CHILD_URL),
        std::env::var(CHILD_SCOPE),
    ) else {
        return;
    };
    let store = open_store(&engine, &url).await;
    let scope = Scope::from_key(&scope).unwrap();
    let history = SwiftideHistory::for_scope(store, scope).unwrap();
    let server = fake_server(&[text_answer("Your name is Ada.")]).await;
    let mut agent = agent(&server, history);
    agent.query("What is my name?").await.unwrap();

    let requests = received_messages(&server).await;
    assert_eq!(requests.len(), 1);
    let sent = roles_and_texts(&requests[0]);
    let users: Vec<&str> = sent
        .iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(users, ["My name is Ada.", "What is my name?"], "{sent:?}");
    assert!(
        sent.contains(&("assistant".to_owned(), "Hello Ada!".to_owned())),
        "{sent:?}"
    );
    // The system prompt this second agent pushed again is stored once.
    let systems = sent.iter().filter(|(role, _)| role == "system").count();
    assert_eq!(systems, 1, "{sent:?}");
}

async fn two_processes_continue_one_conversation(engine: &str, url: &str) {
    let store = open_store(engine, url).await;
    let scope = unique_scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let server = fake_server(&[text_answer("Hello Ada!")]).await;
    agent(&server, history.clone())
        .query("My name is Ada.")
        .await
        .unwrap();
    assert_eq!(received_messages(&server).await.len(), 1);

    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_sends_turn_two",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENGINE, engine)
        .env(CHILD_URL, url)
        .env(CHILD_SCOPE, scope.key())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the second process failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");

    // Both turns are in the thread, once each, and read back as swiftide messages.
    let texts: Vec<String> = history
        .history()
        .await
        .unwrap()
        .iter()
        .filter(|m| !m.is_system())
        .map(|m| AsRef::<str>::as_ref(m).to_owned())
        .collect();
    assert_eq!(
        texts,
        [
            "My name is Ada.",
            "Hello Ada!",
            "What is my name?",
            "Your name is Ada."
        ]
    );
    store.clear(&scope).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_sqlite() {
    two_processes_continue_one_conversation("sqlite", &sqlite_file_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_postgres() {
    two_processes_continue_one_conversation("postgres", &postgres_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continue_one_conversation_on_redis() {
    two_processes_continue_one_conversation("redis", &redis_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trips_and_reloads_identically() {
    let store = open_store("sqlite", &sqlite_file_url()).await;
    let scope = unique_scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let server = fake_server(&[
        tool_call_answer("call_add_1", r#"{"a":2,"b":3}"#),
        text_answer("2 + 3 = 5"),
    ])
    .await;
    let mut agent = agent(&server, history);
    agent.query("What is 2 + 3?").await.unwrap();

    // The fake got the tool's output back, under its call id, in the second request.
    let requests = received_messages(&server).await;
    assert_eq!(requests.len(), 2);
    let tool = requests[1]
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool output was sent back");
    assert_eq!(tool["tool_call_id"], "call_add_1");
    assert_eq!(tool["content"], "5");
    let call = requests[1]
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the tool call was sent back");
    assert_eq!(
        call["tool_calls"][0]["function"]["arguments"],
        r#"{"a":2,"b":3}"#
    );

    // The store holds the call and its output.
    let stored = store.read(&scope, Window::All).await.unwrap();
    let roles: Vec<Role> = stored.iter().map(|m| m.message.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    assert_eq!(
        stored[2].message.tool_call_ids().collect::<Vec<_>>(),
        ["call_add_1"]
    );
    assert_eq!(
        stored[3].message.tool_result_ids().collect::<Vec<_>>(),
        ["call_add_1"]
    );

    // Reloaded from the store by a new history, it is what the agent holds.
    let held = agent.history().await.unwrap();
    let again = SwiftideHistory::for_scope(store.clone(), scope.clone())
        .unwrap()
        .history()
        .await
        .unwrap();
    assert_eq!(again, held);
    let SwiftMessage::ToolOutput(call, ToolOutput::Text(output)) = &again[3] else {
        panic!("expected the tool output, got {:?}", again[3]);
    };
    assert_eq!(
        (call.id(), call.name(), call.args()),
        ("call_add_1", "add", Some(r#"{"a":2,"b":3}"#))
    );
    assert_eq!(output, "5");
}

#[tokio::test]
async fn overwrite_archives_what_it_replaces() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = unique_scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let first = vec![
        SwiftMessage::new_system("Be brief."),
        SwiftMessage::new_user("Hi"),
        SwiftMessage::new_assistant(Some("Hello!"), None),
        SwiftMessage::new_user("Plan a trip"),
    ];
    history.extend(&first).await.unwrap();
    let replacement = vec![
        SwiftMessage::new_system("Be brief."),
        SwiftMessage::new_summary("The user greeted us and asked for a trip."),
    ];
    history.overwrite(replacement.clone()).await.unwrap();

    assert_eq!(history.history().await.unwrap(), replacement);
    assert_eq!(history.archived().await.unwrap(), first[1..].to_vec());
    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.active, count.archived), (2, 3));

    // The archived words said again are a new message, not the archived one.
    history.push(&SwiftMessage::new_user("Hi")).await.unwrap();
    assert_eq!(history.history().await.unwrap().len(), 3);
}

#[tokio::test]
async fn pushes_are_idempotent_and_repeated_words_are_kept() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = unique_scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let system = SwiftMessage::new_system("Be brief.");
    let yes = SwiftMessage::new_user("yes");
    let ok = SwiftMessage::new_assistant(Some("ok"), None);
    history.push(&system).await.unwrap();
    history.push(&yes).await.unwrap();
    history.push(&yes).await.unwrap(); // a retry of the last push
    history.extend(&[ok.clone(), yes.clone()]).await.unwrap();
    history.extend(&[ok.clone(), yes.clone()]).await.unwrap(); // a retried batch
    history.push(&system).await.unwrap(); // a new agent's system prompt
    assert_eq!(
        history.history().await.unwrap(),
        [system, yes.clone(), ok, yes]
    );
    assert_eq!(store.count(&scope).await.unwrap().active, 4);
}

/// A conversation that repeats itself (the user says "ok", the assistant "Sure.", again and
/// again), pushed as one batch and one message at a time: every message is kept, in order,
/// each under an id of its own (derived from the message and the one before it).
#[tokio::test]
async fn a_conversation_that_repeats_itself_keeps_every_message() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = unique_scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let ok = SwiftMessage::new_user("ok");
    let sure = SwiftMessage::new_assistant(Some("Sure."), None);
    history
        .extend(&[ok.clone(), sure.clone(), ok.clone(), sure.clone()])
        .await
        .unwrap();
    for _ in 0..3 {
        history.push(&ok).await.unwrap();
        history.push(&sure).await.unwrap();
    }
    let expected: Vec<SwiftMessage> = (0..5).flat_map(|_| [ok.clone(), sure.clone()]).collect();
    assert_eq!(history.history().await.unwrap(), expected);
    let stored = store.read(&scope, Window::All).await.unwrap();
    let ids: std::collections::HashSet<_> = stored.iter().map(|m| m.message.id.clone()).collect();
    assert_eq!(ids.len(), 10);
}

#[tokio::test]
async fn a_scope_without_a_user_is_refused() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = Scope::session("s-1").unwrap();
    let err = SwiftideHistory::for_scope(store, scope).unwrap_err();
    assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn the_token_budget_window_keeps_the_system_prompt_and_the_newest_turns() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = unique_scope();
    let all = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    all.push(&SwiftMessage::new_system("Be brief."))
        .await
        .unwrap();
    for i in 0..20 {
        all.push(&SwiftMessage::new_user(format!(
            "question {i} with some words"
        )))
        .await
        .unwrap();
        all.push(&SwiftMessage::new_assistant(
            Some(format!("answer {i} with some words")),
            None,
        ))
        .await
        .unwrap();
    }
    let windowed = all.clone().with_token_budget(60).history().await.unwrap();
    assert!(windowed.len() < 41, "{}", windowed.len());
    assert_eq!(windowed[0], SwiftMessage::new_system("Be brief."));
    assert_eq!(
        windowed.last(),
        Some(&SwiftMessage::new_assistant(
            Some("answer 19 with some words"),
            None
        ))
    );
}

/// Drops the two oldest messages after the system prompt once the thread holds more than four.
#[derive(Debug)]
struct DropTwoOldest;

#[async_trait::async_trait]
impl memory_core::ChatReducer for DropTwoOldest {
    async fn reduce(
        &self,
        messages: &[memory_core::StoredMessage],
    ) -> memory_core::Result<memory_core::Reduction> {
        Ok(if messages.len() > 4 {
            memory_core::Reduction::new(Some(0), 3)
        } else {
            memory_core::Reduction::keep_all()
        })
    }
}

/// Regression: a window that drops as many messages as were pushed since swiftide's last
/// completion left the list as long as before, and swiftide's DefaultContext saw nothing new:
/// the tool's output was never sent.
#[tokio::test]
async fn a_window_that_moves_by_what_was_added_does_not_hide_it_from_swiftide() {
    use memory_swiftide::swiftide_core::AgentContext;
    use memory_swiftide::swiftide_core::chat_completion::ToolCall;

    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let history = SwiftideHistory::for_scope(store, unique_scope())
        .unwrap()
        .with_reducer(Arc::new(DropTwoOldest));
    let mut context = swiftide_agents::DefaultContext::default();
    context.with_message_history(history);
    context
        .add_messages(vec![
            SwiftMessage::new_system("Be brief."),
            SwiftMessage::new_user("Hi"),
            SwiftMessage::new_assistant(Some("Hello!"), None),
            SwiftMessage::new_user("What is 2 + 3?"),
        ])
        .await
        .unwrap();
    assert_eq!(context.next_completion().await.unwrap().unwrap().len(), 4);

    let call = ToolCall::builder()
        .id("call_1")
        .name("add")
        .args(r#"{"a":2,"b":3}"#)
        .build()
        .unwrap();
    let output = SwiftMessage::new_tool_output(call.clone(), ToolOutput::text("5"));
    context
        .add_messages(vec![
            SwiftMessage::new_assistant(None::<String>, Some(vec![call])),
            output.clone(),
        ])
        .await
        .unwrap();
    let next = context
        .next_completion()
        .await
        .unwrap()
        .expect("the tool's output is new to swiftide");
    assert_eq!(next.last(), Some(&output));

    // Later reads apply the window again.
    context
        .add_message(SwiftMessage::new_assistant(Some("5"), None))
        .await
        .unwrap();
    let next = context.next_completion().await.unwrap();
    assert!(next.is_none(), "an assistant answer ends the run: {next:?}");
    assert_eq!(context.history().await.unwrap().len(), 5);
}
