//! Focused tests of `RedisStore::read_since` (cursor reads) on the machine's Redis (or
//! `AGENT_MEMORY_REDIS_URL`) and on the test cluster: the epoch in the thread's meta, deltas
//! after appends, whole answers after archive, clear, expiry and `max_messages` overflow,
//! refused cursors, threads written before epochs, paged answers, and one round trip.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::{
    ChatMessage, CursorRead, Delta, ErrorKind, HistoryStore, InMemoryHistoryStore, MAX_READ_PAGE,
    NO_EPOCH, Scope, ThreadCursor, Window,
};
use memory_redis::redis::AsyncCommands;
use memory_redis::{Overflow, RedisStore};
use memory_testkit::history::{CURSOR_WINDOWS, expect_emptied_thread, expect_nothing_new};
use support::{message, prefix, raw, scope, standalone_store, store_with};

use crate::support;

fn batch(from: usize, to: usize) -> Vec<ChatMessage> {
    (from..to).map(|i| message(&format!("m{i}"))).collect()
}

fn seqs(read: &CursorRead) -> Vec<u64> {
    read.messages.iter().map(|m| m.seq).collect()
}

fn meta(scope: &Scope) -> String {
    format!("{}:{{{}}}:meta", prefix(), scope.key())
}

/// Reads every window of `scope` with its cursor on both stores and checks that the Redis
/// store answers as the reference (the in-memory store): same delta, messages and counts.
async fn same_answers(
    redis: &RedisStore,
    reference: &InMemoryHistoryStore,
    scope: &Scope,
    cursors: &mut [(Option<ThreadCursor>, Option<ThreadCursor>); CURSOR_WINDOWS.len()],
    step: &str,
) {
    for (window, (redis_cursor, reference_cursor)) in CURSOR_WINDOWS.iter().zip(cursors.iter_mut())
    {
        let got = redis
            .read_since(scope, *window, *redis_cursor)
            .await
            .unwrap();
        let want = reference
            .read_since(scope, *window, *reference_cursor)
            .await
            .unwrap();
        assert_eq!(got.delta, want.delta, "{step}: {window:?}");
        assert_eq!(got.messages, want.messages, "{step}: {window:?}");
        assert_eq!(got.count, want.count, "{step}: {window:?}");
        assert_eq!(got.count, redis.count(scope).await.unwrap(), "{step}");
        assert_eq!(got.cursor.seq(), got.count.last_seq);
        assert_eq!(
            got.cursor.epoch() == NO_EPOCH,
            want.cursor.epoch() == NO_EPOCH,
            "{step}: {window:?}"
        );
        assert!(got.cursor.is_for(scope));
        *redis_cursor = Some(got.cursor);
        *reference_cursor = Some(want.cursor);
    }
}

/// The store's answers follow the reference through appends, archives, clears and re-creation.
async fn answers_as_the_reference(redis: RedisStore) {
    assert!(redis.capabilities().cursor_reads);
    let reference = InMemoryHistoryStore::new();
    let scope = scope();
    let mut cursors = [(None, None); CURSOR_WINDOWS.len()];
    // Each operation on both stores with the same arguments (the same messages: same
    // timestamps).
    macro_rules! both {
        ($op:ident ( $($arg:expr),* )) => {{
            let a = redis.$op(&scope, $($arg),*).await.unwrap();
            let b = reference.$op(&scope, $($arg),*).await.unwrap();
            assert_eq!(a, b, stringify!($op));
        }};
    }
    same_answers(&redis, &reference, &scope, &mut cursors, "unknown thread").await;
    same_answers(&redis, &reference, &scope, &mut cursors, "unknown, again").await;
    let messages = batch(0, 5);
    both!(append(&messages));
    same_answers(&redis, &reference, &scope, &mut cursors, "created").await;
    same_answers(&redis, &reference, &scope, &mut cursors, "unchanged").await;
    let messages = batch(5, 7);
    both!(append(&messages));
    same_answers(&redis, &reference, &scope, &mut cursors, "appended 2").await;
    // A retried append stores nothing and changes no epoch.
    let messages = batch(5, 7);
    both!(append(&messages));
    same_answers(&redis, &reference, &scope, &mut cursors, "retried").await;
    both!(archive(1..=2));
    same_answers(&redis, &reference, &scope, &mut cursors, "archived 2").await;
    both!(archive(1..=2));
    same_answers(&redis, &reference, &scope, &mut cursors, "archived none").await;
    let messages = batch(7, 9);
    both!(append(&messages));
    same_answers(
        &redis,
        &reference,
        &scope,
        &mut cursors,
        "appended after archive",
    )
    .await;
    both!(clear());
    same_answers(&redis, &reference, &scope, &mut cursors, "cleared").await;
    let messages = batch(0, 3);
    both!(append(&messages));
    same_answers(&redis, &reference, &scope, &mut cursors, "created again").await;
    let messages = batch(3, 4);
    both!(append(&messages));
    same_answers(&redis, &reference, &scope, &mut cursors, "appended 1").await;
    redis.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn answers_as_the_reference_on_redis() {
    answers_as_the_reference(standalone_store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_as_the_reference_on_the_cluster() {
    answers_as_the_reference(support::cluster_store().await).await;
}

#[tokio::test]
async fn a_delta_after_appends_is_one_round_trip() {
    let store = standalone_store().await;
    let scope = scope();
    store.append(&scope, &batch(0, 10)).await.unwrap();
    let first = store.read_since(&scope, Window::All, None).await.unwrap();
    assert_eq!(first.delta, Delta::Whole);
    assert_eq!(seqs(&first), (1..=10).collect::<Vec<_>>());
    assert_ne!(first.cursor.epoch(), NO_EPOCH);
    store.append(&scope, &batch(10, 12)).await.unwrap();
    let before = store.round_trips();
    let next = store
        .read_since(&scope, Window::Last(5), Some(first.cursor))
        .await
        .unwrap();
    assert_eq!(store.round_trips() - before, 1, "one script call");
    assert_eq!(next.delta, Delta::Appended);
    assert_eq!(seqs(&next), [11, 12]);
    assert_eq!(next.cursor.epoch(), first.cursor.epoch(), "appends keep it");
    assert_eq!((next.count.active, next.count.last_seq), (12, 12));
    let same = store
        .read_since(&scope, Window::Last(5), Some(next.cursor))
        .await
        .unwrap();
    assert_eq!((same.delta, same.messages.len()), (Delta::Appended, 0));
    store.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn expiry_reads_whole_and_empty_then_a_fresh_epoch() {
    let store = standalone_store().await;
    let scope = scope();
    store.append(&scope, &batch(0, 3)).await.unwrap();
    let before = store.read_since(&scope, Window::All, None).await.unwrap();
    store
        .set_ttl(&scope, Some(Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Whole and empty at NO_EPOCH; the empty thread's cursor stays current while it is empty.
    let gone = expect_emptied_thread(&store, &scope, before.cursor, "expired").await;
    store.append(&scope, &batch(0, 2)).await.unwrap();
    let again = store
        .read_since(&scope, Window::All, Some(before.cursor))
        .await
        .unwrap();
    assert_eq!(again.delta, Delta::Whole, "the old life's cursor");
    assert_eq!(seqs(&again), [1, 2]);
    assert_ne!(again.cursor.epoch(), before.cursor.epoch());
    assert_ne!(again.cursor.epoch(), NO_EPOCH);
    let from_empty = store
        .read_since(&scope, Window::All, Some(gone))
        .await
        .unwrap();
    assert_eq!(from_empty.delta, Delta::Whole, "the empty thread's cursor");
    store.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn an_overflow_that_moves_messages_changes_the_epoch() {
    for overflow in [Overflow::Archive, Overflow::Delete] {
        let store = store_with(4, overflow).await;
        let scope = scope();
        store.append(&scope, &batch(0, 2)).await.unwrap();
        let first = store.read_since(&scope, Window::All, None).await.unwrap();
        // Up to max_messages: an append like any other.
        store.append(&scope, &batch(2, 4)).await.unwrap();
        let next = store
            .read_since(&scope, Window::All, Some(first.cursor))
            .await
            .unwrap();
        assert_eq!(next.delta, Delta::Appended, "{overflow:?}");
        assert_eq!(seqs(&next), [3, 4]);
        // Past it: seq 1 leaves the window.
        store.append(&scope, &batch(4, 5)).await.unwrap();
        let after = store
            .read_since(&scope, Window::All, Some(next.cursor))
            .await
            .unwrap();
        assert_eq!(after.delta, Delta::Whole, "{overflow:?}");
        assert_eq!(seqs(&after), [2, 3, 4, 5]);
        assert_ne!(after.cursor.epoch(), next.cursor.epoch());
        expect_nothing_new(
            &store,
            &scope,
            Window::Everything,
            after.cursor,
            "overflowed",
        )
        .await;
        // A thread created by an append that overflows at once.
        let other = self::scope();
        store.append(&other, &batch(0, 6)).await.unwrap();
        let whole = store.read_since(&other, Window::All, None).await.unwrap();
        assert_eq!(seqs(&whole), [3, 4, 5, 6]);
        store.clear(&scope).await.unwrap();
        store.clear(&other).await.unwrap();
    }
}

#[tokio::test]
async fn cursors_of_another_scope_or_from_the_future_are_refused() {
    let store = standalone_store().await;
    let (a, b) = (scope(), scope());
    store.append(&a, &batch(0, 3)).await.unwrap();
    store.append(&b, &batch(0, 3)).await.unwrap();
    let read = store.read_since(&a, Window::All, None).await.unwrap();
    let before = store.round_trips();
    let err = store
        .read_since(&b, Window::All, Some(read.cursor))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(store.round_trips(), before, "refused before any call");
    let future = ThreadCursor::new(&a, read.cursor.epoch(), 4);
    let err = store
        .read_since(&a, Window::All, Some(future))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Of another epoch, a cursor past the end is only old: the answer is whole.
    let old = ThreadCursor::new(&a, read.cursor.epoch() ^ 1, 99);
    let whole = store.read_since(&a, Window::All, Some(old)).await.unwrap();
    assert_eq!((whole.delta, whole.messages.len()), (Delta::Whole, 3));
    // An empty thread refuses a cursor past its end too.
    let empty = scope();
    let err = store
        .read_since(
            &empty,
            Window::All,
            Some(ThreadCursor::new(&empty, NO_EPOCH, 1)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    store.clear(&a).await.unwrap();
    store.clear(&b).await.unwrap();
}

/// A thread written by a build before epochs (its meta has no `epoch`, or one that is not a
/// u64) gets one from its first cursor read, kept from then on.
#[tokio::test]
async fn a_thread_without_an_epoch_gets_one_lazily() {
    let store = standalone_store().await;
    let mut conn = raw().await;
    for stored in [
        None,
        Some("not-a-number"),
        Some("0"),
        Some("18446744073709551616"),
    ] {
        let scope = scope();
        store.append(&scope, &batch(0, 3)).await.unwrap();
        let epoch: String = conn.hget(meta(&scope), "epoch").await.unwrap();
        assert!(epoch.parse::<u64>().unwrap() > 0, "{epoch}");
        match stored {
            None => conn.hdel::<_, _, ()>(meta(&scope), "epoch").await.unwrap(),
            Some(value) => conn
                .hset::<_, _, _, ()>(meta(&scope), "epoch", value)
                .await
                .unwrap(),
        }
        let first = store.read_since(&scope, Window::All, None).await.unwrap();
        assert_eq!((first.delta, first.messages.len()), (Delta::Whole, 3));
        let written: String = conn.hget(meta(&scope), "epoch").await.unwrap();
        assert_eq!(written, first.cursor.epoch().to_string(), "{stored:?}");
        assert_ne!(first.cursor.epoch(), NO_EPOCH);
        let ttl: i64 = conn.pttl(meta(&scope)).await.unwrap();
        assert!(ttl > 0, "the write keeps the thread's TTL");
        store.append(&scope, &batch(3, 4)).await.unwrap();
        let next = store
            .read_since(&scope, Window::All, Some(first.cursor))
            .await
            .unwrap();
        assert_eq!((next.delta, seqs(&next)), (Delta::Appended, vec![4]));
        assert_eq!(store.archive(&scope, 1..=1).await.unwrap(), 1);
        let after = store
            .read_since(&scope, Window::All, Some(next.cursor))
            .await
            .unwrap();
        assert_eq!((after.delta, seqs(&after)), (Delta::Whole, vec![2, 3, 4]));
        store.clear(&scope).await.unwrap();
    }
}

/// An answer of more than `MAX_READ_PAGE` messages is read in pages, bounded by the first call:
/// a whole window, and a delta of more than a page (still `Appended`).
#[tokio::test]
async fn answers_larger_than_a_page_are_read_in_pages() {
    let store = standalone_store().await;
    let scope = scope();
    let n = MAX_READ_PAGE + 200;
    store.append(&scope, &batch(0, n)).await.unwrap();
    // The first call of each script may have to send its source; warm them up.
    store.read(&scope, Window::Last(1)).await.unwrap();
    store
        .read_since(&scope, Window::Last(1), None)
        .await
        .unwrap();
    let windows = [
        Window::All,
        Window::Everything,
        Window::Last(usize::MAX),
        Window::TokenBudget(u64::MAX),
    ];
    let mut cursors = Vec::new();
    for window in windows {
        let before = store.round_trips();
        let read = store.read_since(&scope, window, None).await.unwrap();
        let calls = store.round_trips() - before;
        assert_eq!(read.delta, Delta::Whole);
        assert_eq!(
            seqs(&read),
            (1..=n as u64).collect::<Vec<_>>(),
            "{window:?}"
        );
        assert!((2..=4).contains(&calls), "{window:?}: {calls} calls");
        cursors.push(read.cursor);
    }
    store.append(&scope, &batch(n, 2 * n)).await.unwrap();
    for (window, cursor) in windows.into_iter().zip(cursors) {
        let read = store
            .read_since(&scope, window, Some(cursor))
            .await
            .unwrap();
        assert_eq!(read.delta, Delta::Appended, "{window:?}");
        assert_eq!(
            seqs(&read),
            (n as u64 + 1..=2 * n as u64).collect::<Vec<_>>(),
            "{window:?}"
        );
        assert_eq!(read.cursor.seq(), 2 * n as u64);
    }
    // A delta of a page or less, on the long thread: one call.
    let cursor = store
        .read_since(&scope, Window::Last(10), None)
        .await
        .unwrap()
        .cursor;
    store
        .append(&scope, &batch(2 * n, 2 * n + 2))
        .await
        .unwrap();
    let before = store.round_trips();
    let read = store
        .read_since(&scope, Window::All, Some(cursor))
        .await
        .unwrap();
    assert_eq!(store.round_trips() - before, 1);
    assert_eq!(read.delta, Delta::Appended);
    assert_eq!(read.messages.len(), 2);
    store.clear(&scope).await.unwrap();
}
