//! What the memory checks share: the conversation they append, a memory over the stores under
//! test, and readers of what a memory holds.

use std::sync::Arc;

use memory_core::memory::blocks::VectorMemoryBlock;
use memory_core::memory::{FlushReport, MemoryBlock, Recall};
use memory_core::retrieval::{DenseRetriever, HybridRetriever, LexicalRetriever, Retriever};
use memory_core::{
    ChatMessage, FnTokenCounter, HistoryStore, InMemoryHistoryStore, InMemorySessionStore,
    InMemoryVectorStore, Memory, Role, Scope, SessionStore, StoredMessage, TextIndex, TokenCounter,
    VectorStore, Window,
};
use serde_json::Value;

use crate::doubles::{RecordingBlock, WordHashEmbedder};
use crate::fixtures::ExpectOk;

/// Filler that gives each message about 40 words.
pub(crate) const FILLER: &str = "and the notes go on about dashboards alerts queues retries budgets \
deploys rollbacks pagers runbooks owners timelines graphs latency errors saturation traffic \
capacity incidents reviews tickets";

/// `n` messages, alternating user and assistant from a user message, each of about 40 words
/// and tagged `{prefix}{i}` (its first word), with topic words that differ by message.
pub fn conversation(prefix: &str, n: usize) -> Vec<ChatMessage> {
    const TOPICS: [&str; 7] = [
        "billing outage postmortem",
        "database index migration",
        "kubernetes node upgrade",
        "certificate renewal cron",
        "payment gateway timeout",
        "search cluster reindex",
        "holiday oncall rotation",
    ];
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = format!("{prefix}{i} {} {FILLER}", TOPICS[i % TOPICS.len()]);
            ChatMessage::text_message(role, text)
        })
        .collect()
}

/// A memory of `scope` with `block`, over new in-memory stores that count one token per
/// whitespace-separated word (a message costs 3 + 1 for its role + its words): a token limit
/// of 400 and flushes of 50 tokens, so that a test's few turns of known sizes flush where it
/// expects.
pub fn word_counted_memory(block: Arc<dyn MemoryBlock>, scope: Scope) -> Memory {
    let words = || -> Arc<dyn TokenCounter> {
        Arc::new(FnTokenCounter::new(|text| {
            u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
        }))
    };
    Memory::builder(
        scope,
        Arc::new(InMemoryHistoryStore::with_token_counter(words())),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(400)
    .token_flush_size(50)
    .token_counter(words())
    .block(block)
    .build()
    .expect_ok("build a memory")
}

/// A memory over the stores with the suite's numbers (flush past 500 tokens, at least 100)
/// and `blocks`.
pub(crate) fn memory_over(
    scope: &Scope,
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    blocks: &[Arc<dyn MemoryBlock>],
    token_limit: u64,
) -> Memory {
    let mut builder = Memory::builder(scope.clone(), history, sessions)
        .token_limit(token_limit)
        .chat_history_token_ratio(0.5)
        .token_flush_size(100);
    for block in blocks {
        builder = builder.block(block.clone());
    }
    builder.build().expect_ok("build a memory")
}

/// One rare word per message (four letters or more, no stop word, no two alike after
/// stemming): a query naming one finds that message's batch by its words alone.
pub(crate) const RARE: [&str; 12] = [
    "okonkwo",
    "greyhound",
    "zanzibar",
    "marimba",
    "quokka",
    "tamarind",
    "xylophone",
    "kumquat",
    "wombat",
    "gondola",
    "nebula",
    "origami",
];

/// Message `i` of a conversation: `word`, the [`FILLER`] and `number{i}` (about 40 to 100
/// tokens), from the user for an even `i`, else from the assistant.
pub(crate) fn tagged_message(i: usize, word: &str) -> ChatMessage {
    let role = if i.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    ChatMessage::text_message(role, format!("{word} {FILLER} number{i}"))
}

/// What `memory` shows a model asked `question`: its system text (empty without one).
pub(crate) async fn shown_for(memory: &Memory, question: &str) -> String {
    let out = memory
        .get(&[ChatMessage::user(question)])
        .await
        .expect_ok("get");
    out.first()
        .filter(|m| m.role == Role::System)
        .map(ChatMessage::text)
        .unwrap_or_default()
}

/// The section `name` of the `<memory>` text, if there.
pub(super) fn section<'a>(memory_text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>\n");
    let close = format!("\n</{name}>");
    let start = memory_text.find(&open)? + open.len();
    let end = start + memory_text[start..].find(&close)?;
    Some(&memory_text[start..end])
}

/// The `<memory>` text of the memory's `get` (empty without one).
pub(super) async fn memory_text(memory: &Memory) -> String {
    let out = memory.get(&[]).await.expect_ok("get the memory");
    match out.first() {
        Some(m) if m.role == Role::System && m.text().starts_with("<memory>") => m.text(),
        _ => String::new(),
    }
}

/// What the recording block `name` holds in its durable state, read through `get`.
pub(super) async fn delivered(memory: &Memory, name: &str) -> Vec<u64> {
    let text = memory_text(memory).await;
    section(&text, name)
        .map(|s| {
            s.split_whitespace()
                .map(|n| n.parse().expect("a recorded seq"))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) async fn archived_seqs(history: &dyn HistoryStore, scope: &Scope) -> Vec<u64> {
    history
        .read(scope, Window::Everything)
        .await
        .expect_ok("read everything")
        .iter()
        .filter(|m| m.archived)
        .map(|m| m.seq)
        .collect()
}

pub(super) async fn active(history: &dyn HistoryStore, scope: &Scope) -> Vec<StoredMessage> {
    history
        .read(scope, Window::All)
        .await
        .expect_ok("read the active window")
}

pub(super) fn texts(messages: &[ChatMessage]) -> Vec<String> {
    messages.iter().map(ChatMessage::text).collect()
}

/// Asserts that a flush moved the oldest messages out and the rest starts with a user message.
pub(super) async fn assert_flushed(
    history: &dyn HistoryStore,
    scope: &Scope,
    report: &FlushReport,
    n: usize,
) {
    let archived = archived_seqs(history, scope).await;
    assert!(
        report.messages > 0,
        "{n} messages of about 40 words are past the flush threshold of 500 tokens, yet the flush \
         moved nothing"
    );
    assert_eq!(
        archived,
        (1..=archived.len() as u64).collect::<Vec<_>>(),
        "a flush archives the oldest messages, a prefix of the thread"
    );
    let count = history.count(scope).await.expect_ok("count");
    assert_eq!(count.archived, archived.len() as u64, "count.archived");
    assert_eq!(
        count.active + count.archived,
        n as u64,
        "a flush archives, never deletes"
    );
    let window = active(history, scope).await;
    assert_eq!(
        window.first().map(|m| m.message.role),
        Some(Role::User),
        "after a flush the short-term window starts with a user message"
    );
}

pub(crate) fn recorders(names: &[&str]) -> (Vec<Arc<RecordingBlock>>, Vec<Arc<dyn MemoryBlock>>) {
    let blocks: Vec<Arc<RecordingBlock>> = names.iter().map(|n| RecordingBlock::new(n)).collect();
    let dyns = blocks
        .iter()
        .map(|b| b.clone() as Arc<dyn MemoryBlock>)
        .collect();
    (blocks, dyns)
}

/// The vector block's points of the session (every one: the suite's sessions hold few), as
/// `(first_seq, last_seq, first message id)`, sorted.
pub(super) async fn vector_batches(
    vectors: &InMemoryVectorStore,
    scope: &Scope,
) -> Vec<(u64, u64, String)> {
    let vector_scope = scope
        .clone()
        .with_source("memory.vector.retrieval_based_memory")
        .expect_ok("the vector block's scope");
    let points = vectors
        .search(
            &vector_scope,
            &memory_core::VectorQuery::new(WordHashEmbedder::vector("anything at all"), 1000),
        )
        .await
        .expect_ok("list the vector points");
    let mut batches: Vec<(u64, u64, String)> = points
        .iter()
        .map(|p| {
            (
                p.payload["first_seq"].as_u64().unwrap_or(0),
                p.payload["last_seq"].as_u64().unwrap_or(0),
                p.payload
                    .get("first_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    batches.sort();
    batches
}

pub(super) async fn everything(history: &dyn HistoryStore, scope: &Scope) -> Vec<StoredMessage> {
    history
        .read(scope, Window::Everything)
        .await
        .expect_ok("read everything")
}

/// A vector block that recalls at `recall` the top 3 batches for the last message, through a
/// word-hashing dense retriever over `vectors` (64 dimensions), fused with a lexical one over
/// `text` where given.
pub(crate) fn word_hash_block(
    vectors: &Arc<dyn VectorStore>,
    text: Option<&Arc<dyn TextIndex>>,
    recall: Recall,
) -> VectorMemoryBlock {
    let dense: Arc<dyn Retriever> = Arc::new(DenseRetriever::new(
        Arc::new(WordHashEmbedder),
        vectors.clone(),
    ));
    let retriever: Arc<dyn Retriever> = match text {
        Some(text) => Arc::new(HybridRetriever::new(
            dense,
            Arc::new(LexicalRetriever::new(text.clone())),
        )),
        None => dense,
    };
    VectorMemoryBlock::with_retriever(retriever)
        .with_recall(recall)
        .with_similarity_top_k(3)
        .with_retrieval_context_window(1)
}
