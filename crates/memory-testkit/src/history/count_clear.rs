//! The checks of [`count`](memory_core::HistoryStore::count) and
//! [`clear`](memory_core::HistoryStore::clear).

use memory_core::{AppendOutcome, ChatMessage, HistoryStore, ThreadCount, Window};

use super::support::{append_new, archive_if_capable, count, is_listed, read};
use crate::fixtures::{ExpectOk, numbered_messages, random_scope, texts};

/// Contract: `count` returns the active and archived counts, the sum of the active messages'
/// stored token counts and the highest sequence number assigned.
pub async fn count_reports_active_archived_tokens_and_last_seq(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 6)).await;
    let stored = read(store, &scope, Window::Everything).await;
    let tokens = |range: std::ops::RangeInclusive<usize>| -> u64 {
        stored[range.start() - 1..*range.end()]
            .iter()
            .map(|m| u64::from(m.tokens))
            .sum()
    };
    assert_eq!(
        count(store, &scope).await,
        ThreadCount {
            active: 6,
            archived: 0,
            active_tokens: tokens(1..=6),
            last_seq: 6
        },
        "count of a thread of 6 active messages"
    );
    if archive_if_capable(store, &scope, 2..=3, "archive 2..=3")
        .await
        .is_none()
    {
        return;
    }
    assert_eq!(
        count(store, &scope).await,
        ThreadCount {
            active: 4,
            archived: 2,
            active_tokens: tokens(1..=1) + tokens(4..=6),
            last_seq: 6
        },
        "count after archiving 2..=3"
    );
    store.archive(&scope, 1..=6).await.expect_ok("archive all");
    assert_eq!(
        count(store, &scope).await,
        ThreadCount {
            active: 0,
            archived: 6,
            active_tokens: 0,
            last_seq: 6
        },
        "count after archiving everything: last_seq stays"
    );
}

/// Contract: `clear` deletes the thread (active and archived messages) and returns how many it
/// deleted; the thread then reads empty and is not listed; a later append starts a new thread
/// at sequence number 1, where the old ids are new again.
pub async fn clear_deletes_the_thread(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 5);
    append_new(store, &scope, &messages).await;
    // Without the archive capability the thread is cleared with every message active.
    archive_if_capable(store, &scope, 1..=2, "archive 1..=2").await;
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear"),
        5,
        "clear returns every deleted message, archived ones included"
    );
    assert!(
        read(store, &scope, Window::Everything).await.is_empty(),
        "a cleared thread reads empty"
    );
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "a cleared thread counts zero (last_seq 0)"
    );
    assert!(
        !is_listed(store, &scope).await,
        "a cleared thread is not listed"
    );
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear again"),
        0,
        "clearing twice deletes nothing the second time"
    );
    let out = store
        .append(
            &scope,
            &[messages[0].clone(), ChatMessage::user("after clear")],
        )
        .await
        .expect_ok("append after clear");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2],
            inserted: 2
        },
        "after clear a new thread starts at seq 1 and old ids are new again"
    );
    assert_eq!(
        texts(&read(store, &scope, Window::Everything).await),
        vec!["m-1", "after clear"],
        "the new thread holds only what was appended after clear"
    );
}
