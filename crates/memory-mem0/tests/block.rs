//! `Mem0MemoryBlock` inside memory-core's `Memory`, against a local fake of Mem0 (wiremock)
//! answering as the platform API reference describes `POST /v3/memories/add/` and
//! `POST /v3/memories/search/`: a flushed batch goes to Mem0 once with its sequence range as
//! metadata, recalled memories fill the block's section, the scoping rule holds, and failures
//! degrade or fail as configured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail loudly.

mod support;

use std::sync::Arc;

use memory_core::memory::{BlockContent, Memory, MemoryBlock};
use memory_core::{
    ChatMessage, ErrorKind, FnTokenCounter, InMemoryHistoryStore, InMemorySessionStore, Scope,
    TokenCounter,
};
use memory_mem0::{Mem0MemoryBlock, Mem0Scope, OnError};
use serde_json::json;
use support::{Captured, platform, request_count};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn alice() -> Mem0Scope {
    Mem0Scope::user("alice").unwrap()
}

/// One token per word, as memory-core's own tests count: a message costs 4 + its words.
fn words() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|t| {
        u32::try_from(t.split_whitespace().count()).unwrap()
    }))
}

/// A memory whose short-term window flushes past 50 tokens, at least 20 at a time.
fn memory(block: Mem0MemoryBlock) -> Memory {
    Memory::builder(
        Scope::session("chat-1").unwrap(),
        Arc::new(InMemoryHistoryStore::with_token_counter(words())),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(100)
    .chat_history_token_ratio(0.5)
    .token_flush_size(20)
    .token_counter(words())
    .block(Arc::new(block))
    .build()
    .unwrap()
}

/// Six messages of 10 tokens each (six words): the sixth passes the threshold, and the first
/// two (one user turn) are flushed.
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("I love green tea very much"),
        ChatMessage::assistant("Green tea it is then friend"),
        ChatMessage::user("I also avoid coffee after noon"),
        ChatMessage::assistant("Noted no coffee after noon"),
        ChatMessage::user("Please plan my Lisbon trip soon"),
        ChatMessage::assistant("Sure I will plan Lisbon soon"),
    ]
}

async fn mount_search_answer(server: &MockServer, expect: u64) {
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
            {"id": "m1", "memory": "Loves green tea", "score": 0.9},
            {"id": "m2", "memory": "Avoids coffee after noon", "score": 0.8}
        ]})))
        .expect(expect)
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_flushed_batch_is_added_once_with_its_sequence_range() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .and(body_json(json!({
            "messages": [
                {"role": "user", "content": "I love green tea very much"},
                {"role": "assistant", "content": "Green tea it is then friend"}
            ],
            "user_id": "alice",
            "metadata": {
                "agent_memory_first_seq": 1,
                "agent_memory_last_seq": 2,
                "agent_memory_batch": "chat-1#mem0_memory#1-2"
            }
        })))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"event_id": "e1", "status": "PENDING"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let memory = memory(Mem0MemoryBlock::new(platform(&server), alice()));
    let report = memory.put_messages(&conversation()).await.unwrap();
    assert_eq!((report.messages, report.deliveries), (2, 1));
    // Nothing more to flush: no second add.
    let again = memory.flush().await.unwrap();
    assert_eq!(again.messages, 0);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn recalled_memories_fill_the_block_section() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "What should I drink?",
            "filters": {"AND": [{"user_id": "alice"}]},
            "top_k": 4
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
            {"id": "m1", "memory": "Loves green tea", "score": 0.9},
            {"id": "m2", "memory": "Avoids\ncoffee", "score": 0.8}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let block = Mem0MemoryBlock::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_top_k(4);
    let messages = memory(block)
        .get(&[ChatMessage::user("What should I drink?")])
        .await
        .unwrap();
    assert_eq!(
        messages[0].text(),
        "<memory>\n<mem0_memory>\n- Loves green tea\n- Avoids coffee\n</mem0_memory>\n</memory>"
    );
}

#[tokio::test]
async fn the_query_is_the_recent_messages_within_the_window() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "Noted no coffee after noon\nAnything for tonight?",
            "filters": {"AND": [{"user_id": "alice"}]},
            "top_k": 10
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .expect(1)
        .mount(&server)
        .await;
    let block = Mem0MemoryBlock::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_retrieval_context_window(2);
    let memory = memory(block);
    memory.put_messages(&conversation()[..4]).await.unwrap();
    let messages = memory
        .get(&[ChatMessage::user("Anything for tonight?")])
        .await
        .unwrap();
    assert!(messages.iter().all(|m| !m.text().contains("<memory>")));
}

#[tokio::test]
async fn without_a_search_scope_nothing_is_searched() {
    let server = MockServer::start().await;
    mount_search_answer(&server, 0).await;
    let messages = memory(Mem0MemoryBlock::new(platform(&server), alice()))
        .get(&[ChatMessage::user("What should I drink?")])
        .await
        .unwrap();
    assert!(messages.iter().all(|m| !m.text().contains("<memory>")));
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn an_outage_degrades_with_a_warning() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .expect(6) // a search and an add, three attempts each
        .mount(&server)
        .await;
    let block = Mem0MemoryBlock::new(platform(&server), alice()).with_search_scope(alice());
    let memory = memory(block);
    let captured = Captured::default();
    {
        let _guard = tracing::subscriber::set_default(captured.subscriber());
        let messages = memory
            .get(&[ChatMessage::user("What should I drink?")])
            .await
            .unwrap();
        assert!(messages.iter().all(|m| !m.text().contains("<memory>")));
        let report = memory.put_messages(&conversation()).await.unwrap();
        assert_eq!(report.messages, 2);
    }
    let output = captured.text();
    assert!(
        output.contains("Mem0 search failed; the run goes on without it"),
        "{output}"
    );
    assert!(
        output.contains("Mem0 add of batch chat-1#mem0_memory#1-2 failed"),
        "{output}"
    );
}

#[tokio::test]
async fn on_error_fail_fails_get_and_the_flush() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let block = Mem0MemoryBlock::new(platform(&server), alice())
        .with_search_scope(alice())
        .with_on_error(OnError::Fail);
    let memory = memory(block);
    let err = memory
        .get(&[ChatMessage::user("What should I drink?")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let err = memory.put_messages(&conversation()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
}

#[tokio::test]
async fn truncation_drops_the_last_lines_first() {
    let server = MockServer::start().await;
    let block = Mem0MemoryBlock::new(platform(&server), alice());
    let counter = words();
    let content =
        BlockContent::Text("- Loves green tea\n- Avoids coffee\n- Lives in Lisbon".into());
    let shorter = block
        .truncate(content.clone(), 3, counter.as_ref())
        .await
        .unwrap();
    assert_eq!(
        shorter,
        Some(BlockContent::Text(
            "- Loves green tea\n- Avoids coffee".into()
        ))
    );
    assert_eq!(
        block
            .truncate(content, 100, counter.as_ref())
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn names_and_priorities() {
    let server = MockServer::start().await;
    let block = Mem0MemoryBlock::new(platform(&server), alice());
    assert_eq!(block.name(), "mem0_memory");
    assert_eq!(block.priority(), 2);
    let renamed = block
        .clone()
        .with_name("user_facts")
        .unwrap()
        .with_priority(0);
    assert_eq!((renamed.name(), renamed.priority()), ("user_facts", 0));
    assert!(block.with_name("Bad Name").is_err());
}
