//! Cursor reads (`HistoryStore::read_since`) of `SqlStore` on every engine: the answers match
//! the in-memory reference store step by step, a reader that applies them holds the window,
//! epochs move exactly when the thread changes otherwise than by appends, bad cursors are
//! refused, and a read is one statement (a long token-budget window read whole excepted).
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    ChatMessage, CursorRead, Delta, ErrorKind, FnTokenCounter, HistoryStore, InMemoryHistoryStore,
    NO_EPOCH, Scope, StoredMessage, ThreadCursor, TokenCounter, Window,
};
use memory_sql::SqlStore;
use memory_testkit::history::{CURSOR_WINDOWS, expect_emptied_thread, expect_nothing_new};

use crate::support;

/// Characters as tokens, so both stores count alike and budgets are easy to reason about.
fn char_counter() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|text: &str| text.len() as u32))
}

fn scope() -> Scope {
    Scope::session("cursor")
        .unwrap()
        .with_tenant(format!("t-{}", uuid::Uuid::new_v4().simple()))
        .unwrap()
}

async fn sqlite_memory() -> SqlStore {
    SqlStore::builder("sqlite::memory:")
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap()
}

async fn sqlite_file() -> SqlStore {
    SqlStore::builder(support::temp_sqlite_url().0)
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap()
}

async fn postgres() -> SqlStore {
    SqlStore::builder(support::postgres_url())
        .table_prefix(support::shared_prefix())
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap()
}

async fn mysql() -> SqlStore {
    SqlStore::builder(support::mysql_url())
        .table_prefix(support::shared_prefix())
        .token_counter(char_counter())
        .connect()
        .await
        .unwrap()
}

/// Messages of varied lengths (token counts), distinct per call through `tag`.
fn batch(tag: &str, n: usize) -> Vec<ChatMessage> {
    (0..n)
        .map(|i| ChatMessage::user(format!("{tag} {i} {}", "x".repeat(i % 7 * 3))))
        .collect()
}

fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// What a reader holds after applying `read` to `held`: the whole window, or the earlier one
/// plus the appended messages trimmed to the window.
fn apply(window: Window, held: &mut Vec<StoredMessage>, read: &CursorRead) {
    match read.delta {
        Delta::Whole => *held = read.messages.clone(),
        Delta::Appended => {
            held.extend(read.messages.iter().cloned());
            match window {
                Window::Last(n) => {
                    let from = held.len().saturating_sub(n);
                    held.drain(..from);
                }
                Window::TokenBudget(budget) => {
                    let mut used = 0u64;
                    let keep = held
                        .iter()
                        .rev()
                        .take_while(|m| {
                            used += u64::from(m.tokens);
                            used <= budget
                        })
                        .count();
                    let from = held.len() - keep;
                    held.drain(..from);
                }
                _ => {}
            }
        }
        _ => panic!("unknown delta {:?}", read.delta),
    }
}

/// One step of the script run on both stores.
#[derive(Debug, Clone)]
enum Step {
    Append(&'static str, usize),
    Archive(u64, u64),
    Clear,
}

async fn run(store: &dyn HistoryStore, scope: &Scope, step: &Step, messages: &[ChatMessage]) {
    match step {
        Step::Append(..) => {
            store.append(scope, messages).await.unwrap();
        }
        Step::Archive(first, last) => {
            store.archive(scope, *first..=*last).await.unwrap();
        }
        Step::Clear => {
            store.clear(scope).await.unwrap();
        }
    }
}

/// A scripted life of a thread, read after every step through every window with the cursor
/// of the previous read: the SQL store answers as the in-memory reference does (the same
/// delta, messages and counts), and a reader applying the answers holds what `read` returns.
async fn matches_the_reference(store: SqlStore) {
    assert!(store.capabilities().cursor_reads);
    let reference = InMemoryHistoryStore::with_token_counter(char_counter());
    let scope = scope();
    let steps = [
        Step::Append("a", 3),
        Step::Append("b", 2),
        Step::Append("c", 1),
        Step::Archive(1, 2),
        Step::Append("d", 4),
        // Moves nothing: the epoch stays.
        Step::Archive(1, 2),
        Step::Append("e", 2),
        Step::Archive(5, 6),
        Step::Archive(3, 100),
        Step::Append("f", 5),
        Step::Clear,
        Step::Append("g", 3),
        Step::Append("h", 9),
    ];
    let mut sql_cursors: Vec<Option<ThreadCursor>> = vec![None; CURSOR_WINDOWS.len()];
    let mut ref_cursors: Vec<Option<ThreadCursor>> = vec![None; CURSOR_WINDOWS.len()];
    let mut held: Vec<Vec<StoredMessage>> = vec![Vec::new(); CURSOR_WINDOWS.len()];
    // An empty thread first.
    let empty = store.read_since(&scope, Window::All, None).await.unwrap();
    assert_eq!(empty.delta, Delta::Whole);
    assert_eq!(empty.cursor.epoch(), NO_EPOCH);
    assert!(empty.messages.is_empty());
    for (n, step) in steps.iter().enumerate() {
        // The same messages (ids included) for both stores.
        let messages = match step {
            Step::Append(tag, n) => batch(tag, *n),
            _ => Vec::new(),
        };
        run(&store, &scope, step, &messages).await;
        run(&reference, &scope, step, &messages).await;
        for (i, window) in CURSOR_WINDOWS.iter().enumerate() {
            let got = store
                .read_since(&scope, *window, sql_cursors[i])
                .await
                .unwrap();
            let want = reference
                .read_since(&scope, *window, ref_cursors[i])
                .await
                .unwrap();
            let at = format!("step {n} {step:?}, window {window:?}");
            assert_eq!(got.delta, want.delta, "{at}");
            assert_eq!(got.messages, want.messages, "{at}");
            assert_eq!(got.count, want.count, "{at}");
            assert_eq!(got.cursor.seq(), want.cursor.seq(), "{at}");
            assert_eq!(
                got.cursor.epoch() == NO_EPOCH,
                want.cursor.epoch() == NO_EPOCH,
                "{at}"
            );
            assert!(got.cursor.is_for(&scope), "{at}");
            if let Some(before) = sql_cursors[i] {
                // The epoch moves exactly when the answer is whole.
                assert_eq!(
                    before.epoch() == got.cursor.epoch(),
                    got.delta == Delta::Appended,
                    "{at}"
                );
            }
            apply(*window, &mut held[i], &got);
            let read = store.read(&scope, *window).await.unwrap();
            assert_eq!(seqs(&held[i]), seqs(&read), "{at}: the reader's window");
            assert_eq!(got.count, store.count(&scope).await.unwrap(), "{at}");
            sql_cursors[i] = Some(got.cursor);
            ref_cursors[i] = Some(want.cursor);
        }
    }
}

/// A read with a current cursor, and a whole read of a short window, are one statement.
async fn one_statement_per_read(store: SqlStore) {
    let scope = scope();
    store.append(&scope, &batch("a", 5)).await.unwrap();
    for window in CURSOR_WINDOWS {
        let before = store.round_trips();
        let whole = store.read_since(&scope, window, None).await.unwrap();
        assert_eq!(store.round_trips() - before, 1, "{window:?}: whole");
        assert_eq!(whole.delta, Delta::Whole);
        store.append(&scope, &batch("b", 2)).await.unwrap();
        let before = store.round_trips();
        let delta = store
            .read_since(&scope, window, Some(whole.cursor))
            .await
            .unwrap();
        assert_eq!(store.round_trips() - before, 1, "{window:?}: appended");
        assert_eq!(delta.delta, Delta::Appended, "{window:?}");
        // Nothing new: still one statement, an empty delta.
        let before = store.round_trips();
        let nothing = store
            .read_since(&scope, window, Some(delta.cursor))
            .await
            .unwrap();
        assert_eq!(store.round_trips() - before, 1, "{window:?}: nothing new");
        assert_eq!(nothing.delta, Delta::Appended);
        assert!(nothing.messages.is_empty());
        assert_eq!(nothing.cursor, delta.cursor);
    }
    // An unknown thread, too.
    let before = store.round_trips();
    let unknown = store.read_since(&self::scope(), Window::All, None).await;
    assert_eq!(store.round_trips() - before, 1);
    assert_eq!(unknown.unwrap().cursor.epoch(), NO_EPOCH);
}

/// Archive (when it moves a message), clear, expiry and re-creation each give the thread an
/// epoch it never had; appends and an archive that moves nothing keep it.
async fn epochs_move_when_the_thread_changes_otherwise(store: SqlStore) {
    let scope = scope();
    let mut seen = Vec::new();
    store.append(&scope, &batch("a", 3)).await.unwrap();
    let first = store.read_since(&scope, Window::All, None).await.unwrap();
    assert_ne!(first.cursor.epoch(), NO_EPOCH);
    seen.push(first.cursor.epoch());

    store.append(&scope, &batch("b", 1)).await.unwrap();
    let appended = store
        .read_since(&scope, Window::All, Some(first.cursor))
        .await
        .unwrap();
    assert_eq!(appended.delta, Delta::Appended);
    assert_eq!(seqs(&appended.messages), vec![4]);
    assert_eq!(appended.cursor.epoch(), first.cursor.epoch());

    // An archive of archived or missing messages moves nothing and keeps the epoch.
    assert_eq!(store.archive(&scope, 50..=60).await.unwrap(), 0);
    let kept = expect_nothing_new(&store, &scope, Window::All, appended.cursor, "kept").await;

    assert_eq!(store.archive(&scope, 1..=1).await.unwrap(), 1);
    let archived = store
        .read_since(&scope, Window::All, Some(kept))
        .await
        .unwrap();
    assert_eq!(archived.delta, Delta::Whole);
    assert_eq!(seqs(&archived.messages), vec![2, 3, 4]);
    assert!(!seen.contains(&archived.cursor.epoch()));
    seen.push(archived.cursor.epoch());

    store.clear(&scope).await.unwrap();
    // Whole and empty at NO_EPOCH; the empty thread's cursor is current while it stays empty.
    let cleared = expect_emptied_thread(&store, &scope, archived.cursor, "cleared").await;

    store.append(&scope, &batch("c", 2)).await.unwrap();
    let recreated = store
        .read_since(&scope, Window::All, Some(archived.cursor))
        .await
        .unwrap();
    assert_eq!(recreated.delta, Delta::Whole);
    assert_eq!(seqs(&recreated.messages), vec![1, 2]);
    assert!(!seen.contains(&recreated.cursor.epoch()));
    seen.push(recreated.cursor.epoch());
    // A cursor of the empty thread is not current once it holds messages.
    let from_empty = store
        .read_since(&scope, Window::All, Some(cleared))
        .await
        .unwrap();
    assert_eq!(from_empty.delta, Delta::Whole);

    // Expiry (by the database's clock): empty at NO_EPOCH, then a new thread and epoch.
    store
        .set_ttl(&scope, Some(Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    expect_emptied_thread(&store, &scope, recreated.cursor, "expired").await;
    store.append(&scope, &batch("d", 1)).await.unwrap();
    let restarted = store
        .read_since(&scope, Window::All, Some(recreated.cursor))
        .await
        .unwrap();
    assert_eq!(restarted.delta, Delta::Whole);
    assert_eq!(seqs(&restarted.messages), vec![1]);
    assert!(!seen.contains(&restarted.cursor.epoch()));
    assert_ne!(restarted.cursor.epoch(), NO_EPOCH);
}

/// A cursor of another thread, or of the current epoch past the thread's end, is refused.
async fn foreign_and_future_cursors_are_refused(store: SqlStore) {
    let scope = scope();
    let other = self::scope();
    store.append(&scope, &batch("a", 3)).await.unwrap();
    store.append(&other, &batch("b", 5)).await.unwrap();
    let mine = store.read_since(&scope, Window::All, None).await.unwrap();
    let theirs = store.read_since(&other, Window::All, None).await.unwrap();
    for window in CURSOR_WINDOWS {
        let err = store
            .read_since(&scope, window, Some(theirs.cursor))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{window:?}: {err}");
        let future = ThreadCursor::new(&scope, mine.cursor.epoch(), 4);
        let err = store
            .read_since(&scope, window, Some(future))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{window:?}: {err}");
        // Past the end but of another epoch: simply the whole window.
        let stale = ThreadCursor::new(&scope, mine.cursor.epoch() ^ 1, 99);
        let whole = store.read_since(&scope, window, Some(stale)).await.unwrap();
        assert_eq!(whole.delta, Delta::Whole, "{window:?}");
        assert_eq!(whole.messages, store.read(&scope, window).await.unwrap());
        // Epochs no store makes.
        for epoch in [u64::MAX, i64::MAX as u64 + 1] {
            let forged = ThreadCursor::new(&scope, epoch, 1);
            let read = store
                .read_since(&scope, window, Some(forged))
                .await
                .unwrap();
            assert_eq!(read.delta, Delta::Whole, "{window:?}");
        }
    }
    // Nothing changed.
    assert_eq!(
        seqs(&store.read(&scope, Window::All).await.unwrap()),
        [1, 2, 3]
    );
}

/// A token-budget window longer than one statement scans: read whole it falls back to the
/// paged snapshot read (the same answer as `read`); read with a current cursor it is one
/// statement however many messages were appended.
async fn long_budget_windows(store: SqlStore) {
    let scope = scope();
    for chunk in 0..3 {
        store
            .append(&scope, &batch(&format!("long {chunk}"), 500))
            .await
            .unwrap();
    }
    let window = Window::TokenBudget(u64::MAX);
    let whole = store.read_since(&scope, window, None).await.unwrap();
    assert_eq!(whole.delta, Delta::Whole);
    assert_eq!(whole.messages.len(), 1500);
    assert_eq!(whole.messages, store.read(&scope, window).await.unwrap());
    assert_eq!(whole.count.last_seq, 1500);
    // A budget the newest messages spend: one statement.
    let before = store.round_trips();
    let small = store
        .read_since(&scope, Window::TokenBudget(500), None)
        .await
        .unwrap();
    assert_eq!(store.round_trips() - before, 1);
    assert_eq!(
        small.messages,
        store.read(&scope, Window::TokenBudget(500)).await.unwrap()
    );
    store.append(&scope, &batch("more", 1100)).await.unwrap();
    let before = store.round_trips();
    let delta = store
        .read_since(&scope, window, Some(whole.cursor))
        .await
        .unwrap();
    assert_eq!(store.round_trips() - before, 1);
    assert_eq!(delta.delta, Delta::Appended);
    assert_eq!(seqs(&delta.messages), (1501..=2600).collect::<Vec<_>>());
    // Archived messages below the span: the whole window starts after them.
    store.archive(&scope, 1..=2000).await.unwrap();
    let before = store.round_trips();
    let after_archive = store.read_since(&scope, window, None).await.unwrap();
    assert_eq!(
        store.round_trips() - before,
        1,
        "the span covers the window"
    );
    assert_eq!(
        seqs(&after_archive.messages),
        (2001..=2600).collect::<Vec<_>>()
    );
}

macro_rules! on_every_engine {
    ($($check:ident),* $(,)?) => {
        mod sqlite_memory {
            $(#[tokio::test] async fn $check() { super::$check(super::sqlite_memory().await).await; })*
        }
        mod sqlite_file {
            $(#[tokio::test] async fn $check() { super::$check(super::sqlite_file().await).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $check() { super::$check(super::postgres().await).await; })*
        }
        mod mysql {
            $(#[tokio::test] async fn $check() { super::$check(super::mysql().await).await; })*
        }
    };
}

on_every_engine!(
    matches_the_reference,
    one_statement_per_read,
    epochs_move_when_the_thread_changes_otherwise,
    foreign_and_future_cursors_are_refused,
    long_budget_windows,
);
