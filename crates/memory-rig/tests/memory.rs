//! `RigMemory`'s contract on the in-memory store: scopes from the mapper, the window and the
//! reducer on load, clear = archive, typed errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, InMemoryHistoryStore, MessageCountReducer, Scope,
    TenantId, UserId, Window,
};
use memory_rig::{RigMemory, RigMemoryBuilder};
use memory_testkit::doubles::DeclaredHistory;
use rig_core::completion::message::{
    AssistantContent, AssistantMessage, CallId, Message, ToolCall, ToolFunction, ToolName,
    ToolResultContent,
};
use rig_core::id::ConversationId;
use rig_core::memory::{ConversationMemory, MemoryError};
use serde_json::json;

fn store() -> Arc<dyn HistoryStore> {
    Arc::new(InMemoryHistoryStore::new())
}

/// A builder of Alice's memory (tenant `acme`) over `store`.
fn alices(store: Arc<dyn HistoryStore>) -> RigMemoryBuilder {
    RigMemory::builder(
        store,
        TenantId::new("acme").unwrap(),
        UserId::new("alice").unwrap(),
    )
}

fn memory(store: Arc<dyn HistoryStore>) -> RigMemory {
    alices(store).build()
}

fn conv(id: &str) -> ConversationId {
    ConversationId::new(id)
}

fn turn(i: usize) -> Vec<Message> {
    vec![
        Message::user(format!("question {i}")),
        Message::assistant(format!("answer {i}")),
    ]
}

#[tokio::test]
async fn append_then_load_returns_the_messages_in_order() {
    let memory = memory(store());
    assert!(memory.load(&conv("t1")).await.unwrap().is_empty());
    memory.append(&conv("t1"), turn(1)).await.unwrap();
    memory.append(&conv("t1"), turn(2)).await.unwrap();
    let loaded = memory.load(&conv("t1")).await.unwrap();
    assert_eq!(loaded, [turn(1), turn(2)].concat());
    // Another conversation of the same user is another thread.
    assert!(memory.load(&conv("t2")).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_builder_scopes_threads_by_tenant_user_and_conversation() {
    let store = store();
    let memory = memory(store.clone());
    memory.append(&conv("t1"), turn(1)).await.unwrap();
    let scope = memory.scope(&conv("t1")).unwrap();
    assert_eq!(scope.tenant().as_str(), "acme");
    assert_eq!(scope.user().unwrap().as_str(), "alice");
    assert_eq!(scope.session_id().as_str(), "t1");
    assert_eq!(store.read(&scope, Window::All).await.unwrap().len(), 2);

    // Bob's memory with the same conversation id sees nothing of Alice's.
    let bob = RigMemory::builder(
        store.clone(),
        TenantId::new("acme").unwrap(),
        UserId::new("bob").unwrap(),
    )
    .build();
    assert!(bob.load(&conv("t1")).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_closure_maps_conversation_ids() {
    let store = store();
    let memory = RigMemory::with_mapper(store.clone(), |id: &ConversationId| {
        let (user, session) = id
            .as_str()
            .split_once('/')
            .ok_or_else(|| memory_core::Error::invalid_input("expected user/session"))?;
        Scope::session(session)?.with_tenant("t")?.with_user(user)
    })
    .build();
    memory.append(&conv("ann/s1"), turn(1)).await.unwrap();
    let scope = Scope::session("s1")
        .unwrap()
        .with_tenant("t")
        .unwrap()
        .with_user("ann")
        .unwrap();
    assert_eq!(store.read(&scope, Window::All).await.unwrap().len(), 2);
    assert!(memory.load(&conv("ben/s1")).await.unwrap().is_empty());
    // An id the mapper refuses is an error, and nothing is stored.
    let error = memory.append(&conv("no-slash"), turn(1)).await.unwrap_err();
    assert!(matches!(error, MemoryError::Backend(_)), "{error}");
}

#[tokio::test]
async fn an_invalid_conversation_id_is_a_typed_error() {
    let memory = memory(store());
    let error = memory.load_messages(&conv("has space")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.message().contains("with_mapper"), "{error}");
    let error = memory.load(&conv("")).await.unwrap_err();
    assert!(matches!(error, MemoryError::Backend(_)), "{error}");
}

#[tokio::test]
async fn load_reads_the_window() {
    let memory = alices(store()).window(Window::Last(2)).build();
    for i in 0..5 {
        memory.append(&conv("t"), turn(i)).await.unwrap();
    }
    assert_eq!(memory.load(&conv("t")).await.unwrap(), turn(4));
}

#[tokio::test]
async fn load_never_starts_with_a_tool_result_whose_call_fell_out() {
    let memory = alices(store()).window(Window::Last(2)).build();
    let call = ToolCall::new(
        CallId::from_wire("c1"),
        ToolFunction::new(ToolName::new("add").unwrap(), json!({"a": 1})),
    );
    memory
        .append(
            &conv("t"),
            vec![
                Message::user("add"),
                Message::Assistant(AssistantMessage::new(vec![AssistantContent::ToolCall(
                    call.clone(),
                )])),
                Message::tool_results(vec![call.result(vec![ToolResultContent::text("1")])]),
                Message::assistant("1"),
            ],
        )
        .await
        .unwrap();
    // The last two are the result and the answer: the result's call is out of the window.
    assert_eq!(
        memory.load(&conv("t")).await.unwrap(),
        vec![Message::assistant("1")]
    );
}

#[tokio::test]
async fn a_reducer_shapes_the_view_and_leaves_the_store_alone() {
    let store = store();
    let memory = alices(store.clone())
        .reducer(Arc::new(MessageCountReducer::new(2)))
        .build();
    for i in 0..4 {
        memory.append(&conv("t"), turn(i)).await.unwrap();
    }
    let loaded = memory.load(&conv("t")).await.unwrap();
    assert!(loaded.len() < 8, "the reducer dropped nothing: {loaded:?}");
    assert_eq!(loaded.last(), Some(&Message::assistant("answer 3")));
    let scope = memory.scope(&conv("t")).unwrap();
    assert_eq!(store.read(&scope, Window::All).await.unwrap().len(), 8);
}

#[tokio::test]
async fn clear_archives_and_deletes_nothing() {
    let store = store();
    let memory = memory(store.clone());
    memory.append(&conv("t"), turn(1)).await.unwrap();
    memory.clear(&conv("t")).await.unwrap();
    assert!(memory.load(&conv("t")).await.unwrap().is_empty());
    let scope = memory.scope(&conv("t")).unwrap();
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(everything.len(), 2);
    assert!(everything.iter().all(|m| m.archived));
    // Clearing again, or an unknown conversation, archives nothing and succeeds.
    assert_eq!(memory.archive_conversation(&conv("t")).await.unwrap(), 0);
    assert_eq!(memory.archive_conversation(&conv("none")).await.unwrap(), 0);
    // The conversation goes on after a clear.
    memory.append(&conv("t"), turn(2)).await.unwrap();
    assert_eq!(memory.load(&conv("t")).await.unwrap(), turn(2));
}

#[tokio::test]
async fn a_thread_rig_cannot_hold_is_a_typed_error_on_load() {
    let store = store();
    let memory = memory(store.clone());
    let scope = memory.scope(&conv("t")).unwrap();
    store
        .append(&scope, &[ChatMessage::tool_result("lost", "5")])
        .await
        .unwrap();
    store
        .append(
            &scope,
            &[
                ChatMessage::user("hi"),
                ChatMessage::tool_result("lost", "5"),
            ],
        )
        .await
        .unwrap();
    let error = memory.load_messages(&conv("t")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(matches!(
        memory.load(&conv("t")).await.unwrap_err(),
        MemoryError::Backend(_)
    ));
}

#[tokio::test]
async fn clear_on_a_store_without_archive_is_unsupported_and_deletes_nothing() {
    // The in-memory store without archive (its capability off, refused as the trait's default
    // body refuses it).
    let store = DeclaredHistory::new(
        InMemoryHistoryStore::new()
            .capabilities()
            .with_archive(false),
    );
    let memory = memory(Arc::new(store));
    memory.append(&conv("t"), turn(1)).await.unwrap();
    let error = memory.archive_conversation(&conv("t")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(memory.clear(&conv("t")).await.is_err());
    assert_eq!(memory.load(&conv("t")).await.unwrap(), turn(1));
}

/// A reducer that always fails.
#[derive(Debug)]
struct FailingReducer;

#[memory_core::async_trait]
impl memory_core::ChatReducer for FailingReducer {
    async fn reduce(
        &self,
        _messages: &[memory_core::StoredMessage],
    ) -> memory_core::Result<memory_core::Reduction> {
        Err(memory_core::Error::new(
            ErrorKind::Unavailable,
            "the summarizer is down",
        ))
    }
}

#[tokio::test]
async fn a_failing_reducer_is_a_policy_error_for_rig() {
    let memory = alices(store()).reducer(Arc::new(FailingReducer)).build();
    memory.append(&conv("t"), turn(1)).await.unwrap();
    match memory.load(&conv("t")).await.unwrap_err() {
        MemoryError::Policy(message) => assert!(message.contains("summarizer is down")),
        other => panic!("expected a policy error, got {other}"),
    }
    let error = memory.load_messages(&conv("t")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
}

/// A conversation that repeats itself (the user says "ok" three times, the assistant answers
/// "Sure." each time), appended one turn at a time and as one batch: every message is kept,
/// in order, each under an id of its own.
#[tokio::test]
async fn a_conversation_that_repeats_itself_keeps_every_message() {
    let store = store();
    let memory = memory(store.clone());
    let ok_turn = || vec![Message::user("ok"), Message::assistant("Sure.")];
    for _ in 0..3 {
        memory.append(&conv("repeats"), ok_turn()).await.unwrap();
    }
    memory
        .append(&conv("repeats"), [ok_turn(), ok_turn()].concat())
        .await
        .unwrap();
    let loaded = memory.load(&conv("repeats")).await.unwrap();
    assert_eq!(loaded, (0..5).flat_map(|_| ok_turn()).collect::<Vec<_>>());
    let scope = memory.scope(&conv("repeats")).unwrap();
    let stored = store.read(&scope, Window::All).await.unwrap();
    let ids: std::collections::HashSet<_> = stored.iter().map(|m| m.message.id.clone()).collect();
    assert_eq!(ids.len(), 10);
}
