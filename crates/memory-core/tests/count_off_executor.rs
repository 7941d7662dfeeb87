//! H3: a large append is counted on Tokio's blocking pool, so that the executor's thread keeps
//! running other tasks; a small one is counted inline.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memory_core::tokens::{INLINE_COUNT_BYTES, precount};
use memory_core::{
    ChatMessage, FnTokenCounter, HistoryStore, InMemoryHistoryStore, Scope, TokenCounter, Window,
};

/// A counter that, for a long text, waits (at most 10 s) for the ticker to move while it counts:
/// it sees the ticker move only when it runs off the executor's thread.
fn watching_counter(ticks: Arc<AtomicU64>, saw_ticks: Arc<AtomicBool>) -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(move |text| {
        if text.len() > INLINE_COUNT_BYTES / 2 {
            let start = ticks.load(Ordering::SeqCst);
            let give_up = Instant::now() + Duration::from_secs(10);
            while Instant::now() < give_up {
                if ticks.load(Ordering::SeqCst) > start + 3 {
                    saw_ticks.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        u32::try_from(text.len() / 4).unwrap()
    }))
}

#[tokio::test(flavor = "current_thread")]
async fn a_large_append_does_not_stall_the_executor() {
    let ticks = Arc::new(AtomicU64::new(0));
    let saw_ticks = Arc::new(AtomicBool::new(false));
    let ticker = {
        let ticks = Arc::clone(&ticks);
        tokio::spawn(async move {
            loop {
                ticks.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let store =
        InMemoryHistoryStore::with_token_counter(watching_counter(ticks, Arc::clone(&saw_ticks)));
    let scope = Scope::session("big").unwrap();
    let big = ChatMessage::user("x".repeat(INLINE_COUNT_BYTES * 2));
    store.append(&scope, &[big]).await.unwrap();
    ticker.abort();
    assert!(
        saw_ticks.load(Ordering::SeqCst),
        "the ticker task never ran while the large batch was counted"
    );
    let stored = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(
        stored[0].tokens,
        u32::try_from(INLINE_COUNT_BYTES * 2 / 4).unwrap() + 4
    );
}

#[tokio::test(flavor = "current_thread")]
async fn precount_counts_large_batches_ahead_and_small_ones_inline() {
    let words: Arc<dyn TokenCounter> = Arc::new(FnTokenCounter::new(|t| {
        u32::try_from(t.split_whitespace().count()).unwrap()
    }));
    let small = [ChatMessage::user("two words")];
    let counted = precount(&words, &small).await.unwrap();
    assert!(!counted.counted_ahead());
    assert_eq!(
        counted.count_message(&small[0]),
        words.count_message(&small[0])
    );
    let large = [
        ChatMessage::user("a ".repeat(INLINE_COUNT_BYTES)),
        ChatMessage::assistant("b c"),
    ];
    let counted = precount(&words, &large).await.unwrap();
    assert!(counted.counted_ahead());
    for message in &large {
        assert_eq!(counted.count_message(message), words.count_message(message));
    }
    // A message that is not one of the batch's is counted by the wrapped counter.
    let other = ChatMessage::user("b c");
    assert_eq!(counted.count_message(&other), words.count_message(&other));
}

/// Issue 29 (3): a message over `MAX_MESSAGE_BYTES` was counted (seconds of tokenizing per MiB)
/// before the batch refused it. The limits are checked first: nothing is counted, on every
/// path a store prepares a batch through (`precount`, then `PreparedBatch::new`).
#[tokio::test(flavor = "current_thread")]
async fn a_batch_over_a_byte_limit_is_refused_before_any_counting() {
    use memory_core::ErrorKind;
    use memory_core::history::{MAX_MESSAGE_BYTES, over_limits};
    use std::sync::atomic::AtomicUsize;

    let counted_bytes = Arc::new(AtomicUsize::new(0));
    let counter: Arc<dyn TokenCounter> = {
        let counted_bytes = Arc::clone(&counted_bytes);
        Arc::new(FnTokenCounter::new(move |text| {
            counted_bytes.fetch_add(text.len(), Ordering::SeqCst);
            1
        }))
    };
    let oversized = [ChatMessage::user("x".repeat(MAX_MESSAGE_BYTES + 1024))];
    assert!(over_limits(&oversized));
    let counted = precount(&counter, &oversized).await.unwrap();
    assert!(!counted.counted_ahead());
    let store = InMemoryHistoryStore::with_token_counter(Arc::clone(&counter));
    let scope = Scope::session("big").unwrap();
    let error = store.append(&scope, &oversized).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::LimitExceeded, "{error}");
    // Escaping makes the JSON larger than the text: the limit is on the JSON form.
    let escaped = [ChatMessage::user("\"".repeat(MAX_MESSAGE_BYTES / 2 + 1024))];
    assert!(over_limits(&escaped));
    let error = store.append(&scope, &escaped).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::LimitExceeded, "{error}");
    assert_eq!(
        counted_bytes.load(Ordering::SeqCst),
        0,
        "a refused batch was tokenized"
    );
    // Under the limits, a large message is counted (ahead, off the executor).
    let fine = [ChatMessage::user("x".repeat(INLINE_COUNT_BYTES * 2))];
    assert!(!over_limits(&fine));
    assert!(precount(&counter, &fine).await.unwrap().counted_ahead());
    assert!(counted_bytes.load(Ordering::SeqCst) > 0);
}
