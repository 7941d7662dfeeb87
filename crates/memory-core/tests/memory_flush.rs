//! A `Memory`'s flush as its reports and its blocks see it: a window far over the threshold is
//! handed to the blocks in batches bounded by `token_flush_size`, each message exactly once,
//! and concurrent puts report what each flushed (their reports add up to what was archived).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};

use memory_core::memory::{BlockContent, BlockGetContext, BlockPutContext, Memory, MemoryBlock};
use memory_core::{
    ChatMessage, FnTokenCounter, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, Result,
    Role, Scope, TokenCounter, Window, async_trait,
};

/// One token per whitespace-separated word.
fn words() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|t| t.split_whitespace().count() as u32))
}

/// Records each batch it is given, as the first words of its messages.
#[derive(Debug, Default)]
struct Batches {
    seen: Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl MemoryBlock for Batches {
    fn name(&self) -> &str {
        "batches"
    }
    fn priority(&self) -> u32 {
        1
    }
    async fn get(&self, _ctx: BlockGetContext<'_>) -> Result<BlockContent> {
        Ok(BlockContent::Text(String::new()))
    }
    async fn put(&self, ctx: BlockPutContext<'_>) -> Result<()> {
        let tags = ctx
            .messages
            .iter()
            .map(|m| m.message.text().split(' ').next().unwrap_or("").to_owned())
            .collect();
        self.seen.lock().unwrap().push(tags);
        Ok(())
    }
}

/// A message of `words` words, the first one `tag`.
fn message(role: Role, tag: &str, words: usize) -> ChatMessage {
    let mut text = tag.to_owned();
    for _ in 1..words {
        text.push_str(" w");
    }
    ChatMessage::text_message(role, text)
}

fn alternating(from: usize, n: usize, words: usize) -> Vec<ChatMessage> {
    (from..from + n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            message(role, &format!("m{i}"), words)
        })
        .collect()
}

/// 200 messages put at once, far over the threshold: the blocks get several batches, each of
/// `token_flush_size` to under three times that many tokens, and every flushed message once.
/// (Before: one batch of every message past the threshold, 268,299 characters on a server.)
#[tokio::test]
async fn a_flush_of_much_is_several_bounded_batches_each_message_once() {
    let history = Arc::new(InMemoryHistoryStore::with_token_counter(words()));
    let block = Arc::new(Batches::default());
    let memory = Memory::builder(
        Scope::session("bounded").unwrap(),
        history.clone(),
        Arc::new(InMemorySessionStore::new()),
    )
    .token_limit(1_000)
    .token_flush_size(100)
    .token_counter(words())
    .block(block.clone())
    .build()
    .unwrap();
    let report = memory.put_messages(&alternating(0, 200, 20)).await.unwrap();
    let batches = block.seen.lock().unwrap().clone();
    let per_message = history
        .read(memory.scope(), Window::Everything)
        .await
        .unwrap()[0]
        .tokens as u64;
    assert!(batches.len() > 1, "one batch of everything: {batches:?}");
    for batch in &batches {
        let tokens = batch.len() as u64 * per_message;
        assert!(
            (100..300 + per_message).contains(&tokens),
            "a batch of {tokens} tokens is not within the flush size and three times it: {batch:?}"
        );
    }
    let flushed: Vec<String> = batches.concat();
    let expected: Vec<String> = (0..report.messages).map(|i| format!("m{i}")).collect();
    assert_eq!(flushed, expected, "each flushed message once, in order");
    assert_eq!(report.deliveries, batches.len(), "one delivery per batch");
    let count = history.count(memory.scope()).await.unwrap();
    assert_eq!(count.archived, report.messages as u64);
    assert!(count.active_tokens <= memory.config().flush_threshold());
}

/// 8 writers × 25 puts on one session (no blocks: a flush archives): each put reports what it
/// flushed, so the reports add up to the messages archived (before: each racing put reported
/// the same flush again).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_report_only_what_each_flushed() {
    let history = Arc::new(InMemoryHistoryStore::with_token_counter(words()));
    let states = Arc::new(InMemorySessionStore::new());
    let mut writers = Vec::new();
    for writer in 0..8 {
        let memory = Memory::builder(
            Scope::session("racing").unwrap(),
            history.clone(),
            states.clone(),
        )
        .token_limit(150)
        .token_flush_size(30)
        .token_counter(words())
        .build()
        .unwrap();
        writers.push(tokio::spawn(async move {
            let mut flushed = 0usize;
            let mut tokens = 0u64;
            for i in 0..25 {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                let report = memory
                    .put(message(role, &format!("w{writer}-{i}"), 12))
                    .await
                    .unwrap();
                flushed += report.messages;
                tokens += report.tokens;
                tokio::task::yield_now().await;
            }
            (flushed, tokens)
        }));
    }
    let mut flushed = 0usize;
    let mut tokens = 0u64;
    for writer in writers {
        let (m, t) = writer.await.unwrap();
        flushed += m;
        tokens += t;
    }
    let scope = Scope::session("racing").unwrap();
    let archived: Vec<_> = history
        .read(&scope, Window::Everything)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.archived)
        .collect();
    assert!(!archived.is_empty(), "the puts flushed");
    assert_eq!(flushed, archived.len(), "reported flushed = archived");
    let archived_tokens: u64 = archived.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(tokens, archived_tokens, "reported tokens = archived tokens");
}
