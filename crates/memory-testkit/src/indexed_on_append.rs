//! Memory that is searchable as soon as it is stored, over an engine's stores: a
//! [`Memory`](memory_core::Memory) whose [`VectorMemoryBlock`] indexes on append
//! ([`with_index_on_append`](VectorMemoryBlock::with_index_on_append)). A message is found by
//! a user-level search right after its put, before any flush; a repeated put, concurrent puts
//! and the flush that later archives the messages index nothing twice; and what is still in the
//! window is not recalled into `<memory>` beside it.
//!
//! Run it on every engine with a vector store that searches across scopes:
//! [`appended_messages_are_found_at_once_and_indexed_once`].

use std::sync::Arc;

use memory_core::memory::blocks::{SESSION_KEY, VectorMemoryBlock};
use memory_core::memory::{MemoryBlock, Recall};
use memory_core::{HistoryStore, Scope, ScopeFilter, SessionStore, TextIndex, UserId, VectorStore};
use serde_json::Value;

use crate::fixtures::{ExpectOk, random_tenant, scope_in};
use crate::memory::support::{RARE, memory_over, shown_for, tagged_message, word_hash_block};

/// A token limit no put of this check reaches: nothing is flushed unless a check asks.
const ROOMY: u64 = 1_000_000;

/// How many of `block`'s results for `word` across `user`'s sessions hold it.
async fn found(block: &VectorMemoryBlock, user: &ScopeFilter, word: &str) -> usize {
    block
        .search_across(user.clone(), &format!("the {word}"), 20)
        .await
        .expect_ok("search the user's memory")
        .iter()
        .filter(|hit| hit.text().is_some_and(|text| text.contains(word)))
        .count()
}

/// A user's memory searched while it is written, each message indexed once:
/// - a message put into a session (far below the flush threshold) is found by the user-level
///   search at once, naming its session and seq; the put reports one delivery;
/// - the same message put again (the same id) is not indexed again: one result, no delivery;
/// - two sessions' memories putting messages concurrently, and two memories of one session
///   racing, leave exactly one result per message;
/// - a flush that later archives the messages delivers nothing more to the block, and each
///   message is still found once;
/// - a session-level block leaves out of `<memory>` what the window already shows, and recalls
///   it once the flush moved it out of the window.
///
/// `vectors` must hold no vectors of another dimension than the embedder's 64 (a fresh store,
/// or SQL tables of a fresh prefix).
pub async fn appended_messages_are_found_at_once_and_indexed_once(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    vectors: Arc<dyn VectorStore>,
    text: Option<Arc<dyn TextIndex>>,
) {
    let block = |recall| {
        Arc::new(word_hash_block(&vectors, text.as_ref(), recall).with_index_on_append(true))
    };
    let user_level = block(Recall::User);
    let memory = |scope: &Scope, block: &Arc<VectorMemoryBlock>, limit: u64| {
        let blocks = [block.clone() as Arc<dyn MemoryBlock>];
        memory_over(scope, history.clone(), sessions.clone(), &blocks, limit)
    };
    let tenant = random_tenant();
    let of = |session: &str| {
        scope_in(&tenant, session)
            .with_user("dana")
            .expect_ok("a user scope")
    };
    let dana = ScopeFilter::tenant(tenant.clone()).with_user(UserId::new("dana").unwrap());

    let monday = of("monday");
    let first = tagged_message(0, RARE[0]);
    let report = memory(&monday, &user_level, ROOMY)
        .put(first.clone())
        .await
        .expect_ok("put a message");
    assert_eq!(report.messages, 0, "nothing is flushed below the threshold");
    assert_eq!(report.deliveries, 1, "the put indexed its message");
    let hits = user_level
        .search_across(dana.clone(), &format!("the {}", RARE[0]), 3)
        .await
        .expect_ok("search the user's memory");
    let hit = hits
        .first()
        .expect("a message is found as soon as it is put");
    assert!(hit.text().is_some_and(|t| t.contains(RARE[0])), "{hit:?}");
    assert_eq!(
        hit.payload.get(SESSION_KEY),
        Some(&Value::String("monday".to_owned())),
        "{hit:?}"
    );
    assert_eq!(
        hit.payload.get("first_seq"),
        Some(&Value::from(1)),
        "{hit:?}"
    );

    let again = memory(&monday, &user_level, ROOMY)
        .put(first)
        .await
        .expect_ok("put the same message again");
    assert_eq!(
        again.deliveries, 0,
        "a repeated message is not indexed again"
    );
    assert_eq!(found(&user_level, &dana, RARE[0]).await, 1);

    // Monday's second memory object races the first; Tuesday writes beside them.
    let (words_a, rest) = RARE[1..].split_at(3);
    let (words_b, words_c) = rest.split_at(3);
    let tuesday = of("tuesday");
    let write = |scope: Scope, words: &'static [&'static str], offset: usize| {
        let memory = memory(&scope, &user_level, ROOMY);
        async move {
            for (i, word) in words.iter().enumerate() {
                memory
                    .put(tagged_message(offset + i, word))
                    .await
                    .expect_ok("put a message");
            }
        }
    };
    tokio::join!(
        write(monday.clone(), words_a, 1),
        write(monday.clone(), words_b, 11),
        write(tuesday.clone(), words_c, 1),
    );
    for word in &RARE[..10] {
        assert_eq!(
            found(&user_level, &dana, word).await,
            1,
            "{word:?}: every message is indexed once, concurrent puts included"
        );
    }

    let flushed = memory(&monday, &user_level, 400)
        .flush()
        .await
        .expect_ok("flush Monday");
    assert!(
        flushed.messages > 0,
        "the small window flushes: {flushed:?}"
    );
    assert_eq!(
        flushed.deliveries, 0,
        "what the block took on append is not handed to it again"
    );
    for word in &RARE[..10] {
        assert_eq!(found(&user_level, &dana, word).await, 1, "{word:?}");
    }

    let session_level = block(Recall::Session);
    let friday = of("friday");
    let word = RARE[10];
    let roomy = memory(&friday, &session_level, ROOMY);
    roomy
        .put(tagged_message(0, word))
        .await
        .expect_ok("put a message");
    roomy
        .put(tagged_message(1, RARE[11]))
        .await
        .expect_ok("put a message");
    let shown = shown_for(&roomy, &format!("what about the {word}?")).await;
    assert!(
        !shown.contains(word),
        "a batch still in the window is not recalled beside it: {shown:?}"
    );
    for i in 2..8 {
        roomy
            .put(tagged_message(i, "filler"))
            .await
            .expect_ok("put a message");
    }
    let small = memory(&friday, &session_level, 400);
    let moved = small.flush().await.expect_ok("flush Friday");
    assert!(moved.messages > 0, "{moved:?}");
    let recalled = shown_for(&small, &format!("what about the {word}?")).await;
    assert!(
        recalled.contains(word),
        "once flushed out of the window, the batch is recalled: {recalled:?}"
    );
}
