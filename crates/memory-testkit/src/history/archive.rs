//! The checks of [`archive`](memory_core::HistoryStore::archive) (optional:
//! `HistoryCapabilities::archive`).

use memory_core::{AppendOutcome, ChatMessage, HistoryStore, Window};

use super::support::{append_checked, append_new, archive_if_capable, count, read};
use crate::fixtures::{ExpectOk, chat_messages, numbered_messages, random_scope, seqs};

/// Contract: `archive` moves the active messages whose seqs fall in the range out of the active
/// window; they stay stored and readable with `Everything`; it returns how many it moved, and
/// later appends continue the sequence.
pub async fn archive_moves_a_range_out_of_the_window(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 6);
    append_new(store, &scope, &messages).await;
    let Some(moved) = archive_if_capable(store, &scope, 2..=4, "archive 2..=4").await else {
        return;
    };
    assert_eq!(moved, 3, "archive(2..=4) of 6 active messages moves 3");
    assert_eq!(
        seqs(&read(store, &scope, Window::All).await),
        vec![1, 5, 6],
        "archived messages leave the active window"
    );
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        chat_messages(&everything),
        messages,
        "archived messages stay stored, unchanged"
    );
    assert_eq!(
        everything
            .iter()
            .filter(|m| m.archived)
            .map(|m| m.seq)
            .collect::<Vec<_>>(),
        vec![2, 3, 4],
        "exactly 2..=4 are flagged archived"
    );
    assert_eq!(
        append_new(store, &scope, &numbered_messages("n", 1)).await,
        vec![7],
        "archiving does not reuse sequence numbers"
    );
}

/// Contract: `archive` counts only the messages it moved: ranges past the end, empty ranges,
/// ranges starting at 0 and already archived messages are handled without error.
pub async fn archive_edge_ranges(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 6)).await;
    #[allow(clippy::reversed_empty_ranges)]
    let cases: Vec<(std::ops::RangeInclusive<u64>, u64, &str)> = vec![
        (0..=1, 1, "a range starting at 0 moves seq 1"),
        (5..=100, 2, "a range past the end moves what exists (5, 6)"),
        (4..=2, 0, "an empty range (start > end) moves nothing"),
        (0..=0, 0, "the range 0..=0 holds no seq"),
        (100..=200, 0, "a range wholly past the end moves nothing"),
        (5..=6, 0, "already archived messages are not moved again"),
        (1..=u64::MAX, 3, "the whole range moves the rest (2, 3, 4)"),
        (1..=u64::MAX, 0, "archiving everything twice moves nothing"),
    ];
    // Without the capability, every range (empty ones included) must be refused.
    let capable = store.capabilities().archive;
    for (range, moved, why) in cases {
        let what = format!("archive {range:?}");
        if let Some(got) = archive_if_capable(store, &scope, range.clone(), &what).await {
            assert_eq!(got, moved, "archive({range:?}): {why}");
        }
    }
    if !capable {
        return;
    }
    let c = count(store, &scope).await;
    assert_eq!(
        (c.active, c.archived, c.last_seq),
        (0, 6, 6),
        "after the ranges every message is archived, none lost"
    );
    assert_eq!(
        read(store, &scope, Window::Everything).await.len(),
        6,
        "archived messages are still stored"
    );
}

/// Contract: the ids of archived messages stay known: re-appending them does not store them
/// again, returns their original seqs and leaves them archived.
pub async fn archived_ids_still_dedupe(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 3);
    append_new(store, &scope, &messages).await;
    if archive_if_capable(store, &scope, 1..=2, "archive 1..=2")
        .await
        .is_none()
    {
        return;
    }
    let fresh = ChatMessage::user("fresh");
    let batch = vec![messages[0].clone(), messages[1].clone(), fresh];
    if !store.capabilities().dedupes_ids {
        // The archived messages are not the thread's tail: the store's rule may store them
        // again; what it reports is true, and the archived ones stay as they were.
        append_checked(store, &scope, &batch, "re-append archived messages").await;
        return;
    }
    let out = store
        .append(&scope, &batch)
        .await
        .expect_ok("re-append archived messages");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2, 4],
            inserted: 1
        },
        "archived ids keep their seqs; only the fresh message is new"
    );
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        everything.iter().map(|m| m.archived).collect::<Vec<_>>(),
        vec![true, true, false, false],
        "re-appended archived messages stay archived and are not duplicated"
    );
    let c = count(store, &scope).await;
    assert_eq!(
        (c.active, c.archived, c.last_seq),
        (2, 2, 4),
        "count after re-appending archived ids"
    );
}
