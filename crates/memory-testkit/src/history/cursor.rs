//! The cursor-read checks of the history suite: [`HistoryStore::read_since`], line by line of
//! its `# Behavior` entry, and [`assemble`], what a reader does with an answer.
//!
//! # Capability
//! The checks run in full when the store declares
//! [`cursor_reads`](memory_core::HistoryCapabilities::cursor_reads); otherwise every check
//! asserts that `read_since` answers [`ErrorKind::Unsupported`] for every window and cursor
//! (none, current, of another scope, from the future, on a known and an unknown thread) and
//! that the thread reads and counts as before. So a store that lies either way fails.
//!
//! Every answer the checks get is checked for what holds of any answer: the cursor names the
//! thread read, its sequence number is the counts' `last_seq`, its epoch is
//! [`NO_EPOCH`] exactly when the thread holds no message, and the messages are in sequence
//! order. A store that declares
//! [`reduces_on_append`](memory_core::HistoryCapabilities::reduces_on_append) may answer an
//! append with [`Delta::Whole`] (its appends may move messages out of the window); the whole
//! window must then be what `read` returns.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memory_core::{
    ChatMessage, CursorRead, Delta, ErrorKind, HistoryStore, NO_EPOCH, Scope, StoredMessage,
    ThreadCount, ThreadCursor, Window,
};

use super::support::{append_new, archive_if_capable, count, is_listed, join, read, ttl_supported};
use crate::fixtures::{
    ExpectOk, expect_error_kind, numbered_messages, random_scope, scope_in, seqs, text_message,
    text_of_bytes,
};
use crate::ttl::{PAST_SHORT_TTL, SHORT_TTL};

/// What a reader that held `cached`, the window `window` read at the cursor `since`, holds once
/// it applies `read`, the answer of `read_since(scope, window, since)`: the window now.
///
/// - [`Delta::Whole`]: the answer's messages.
/// - [`Delta::Appended`]: the cached messages up to the cursor, then the answer's messages,
///   trimmed to the window: [`Window::Last`] keeps the last `n`; [`Window::TokenBudget`] keeps
///   the newest messages whose stored token counts fit, stopping at the first that does not.
///   Under a current cursor every message after it is active (only appends happened), so a
///   budgeted answer that holds fewer messages than the thread gained stopped at a message that
///   did not fit: it is then the whole window, and nothing cached is kept.
///
/// # Panics
/// On an answer no store may give: [`Delta::Appended`] to a read without a cursor, or holding a
/// message at or below the cursor.
pub fn assemble(
    cached: &[StoredMessage],
    since: Option<&ThreadCursor>,
    read: &CursorRead,
    window: Window,
) -> Vec<StoredMessage> {
    if read.delta == Delta::Whole {
        return read.messages.clone();
    }
    let since = since.expect("a read without a cursor is answered Delta::Whole, never Appended");
    assert!(
        read.messages.iter().all(|m| m.seq > since.seq()),
        "an Appended answer holds only messages after the cursor's seq {}, got seqs {:?}",
        since.seq(),
        seqs(&read.messages)
    );
    let gained = read.cursor.seq().saturating_sub(since.seq());
    if matches!(window, Window::TokenBudget(_)) && (read.messages.len() as u64) < gained {
        return read.messages.clone();
    }
    let mut merged: Vec<StoredMessage> = cached
        .iter()
        .filter(|m| m.seq <= since.seq())
        .cloned()
        .chain(read.messages.iter().cloned())
        .collect();
    match window {
        Window::Last(n) => {
            let drop = merged.len().saturating_sub(n);
            merged.drain(..drop);
        }
        Window::TokenBudget(budget) => {
            let mut used = 0u64;
            let fitting = merged
                .iter()
                .rev()
                .take_while(|m| {
                    used = used.saturating_add(u64::from(m.tokens));
                    used <= budget
                })
                .count();
            let drop = merged.len() - fitting;
            merged.drain(..drop);
        }
        _ => {}
    }
    merged
}

/// `n` messages with fresh ids and texts of varied lengths (so token counts differ), the
/// `i`-th starting with `"{prefix}-{i}"`.
fn varied_messages(prefix: &str, n: usize) -> Vec<ChatMessage> {
    numbered_messages(prefix, n)
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let text = format!("{} {}", m.text(), text_of_bytes((i * 37) % 160 + 8));
            text_message(m.role, text)
        })
        .collect()
}

/// Every kind of window, with sizes that cut the checks' threads in their middle, hold all of
/// them, and hold nothing.
fn windows() -> Vec<Window> {
    vec![
        Window::All,
        Window::Everything,
        Window::Last(0),
        Window::Last(1),
        Window::Last(3),
        Window::Last(1_000),
        Window::After(0),
        Window::After(2),
        Window::After(1_000),
        Window::TokenBudget(0),
        Window::TokenBudget(40),
        Window::TokenBudget(120),
        Window::TokenBudget(u64::MAX),
    ]
}

/// The thread as a refused call must leave it: every message, and its counts.
async fn snapshot(store: &dyn HistoryStore, scope: &Scope) -> (Vec<StoredMessage>, ThreadCount) {
    (
        read(store, scope, Window::Everything).await,
        count(store, scope).await,
    )
}

/// `read_since`, checked for what holds of every answer.
async fn read_since(
    store: &dyn HistoryStore,
    scope: &Scope,
    window: Window,
    since: Option<ThreadCursor>,
    what: &str,
) -> CursorRead {
    let out = store
        .read_since(scope, window, since)
        .await
        .expect_ok(&format!("{what}: read_since({window:?})"));
    check_answer(scope, window, &out, what);
    out
}

/// What holds of every answer of `read_since`.
fn check_answer(scope: &Scope, window: Window, out: &CursorRead, what: &str) {
    assert!(
        out.cursor.is_for(scope),
        "{what}: read_since({window:?}) returns a cursor of the thread it read"
    );
    assert_eq!(
        out.cursor.seq(),
        out.count.last_seq,
        "{what}: read_since({window:?}) returns the cursor of the thread's last seq (counts {:?})",
        out.count
    );
    let holds_messages = out.count.active + out.count.archived > 0;
    assert_eq!(
        out.cursor.epoch() != NO_EPOCH,
        holds_messages,
        "{what}: read_since({window:?}): the epoch is NO_EPOCH exactly when the thread holds no \
         message (epoch {}, counts {:?})",
        out.cursor.epoch(),
        out.count
    );
    let got = seqs(&out.messages);
    assert!(
        got.windows(2).all(|p| p[0] < p[1]) && got.last().is_none_or(|&s| s <= out.cursor.seq()),
        "{what}: read_since({window:?}) returns messages in sequence order, none past the \
         cursor's seq {}: {got:?}",
        out.cursor.seq()
    );
}

/// Checks an answer that must be the whole window, as `read` and `count` return it now.
async fn expect_whole(
    store: &dyn HistoryStore,
    scope: &Scope,
    window: Window,
    out: &CursorRead,
    what: &str,
) {
    assert_eq!(
        out.delta,
        Delta::Whole,
        "{what}: read_since({window:?}) answers Delta::Whole"
    );
    let now = read(store, scope, window).await;
    assert_eq!(
        seqs(&out.messages),
        seqs(&now),
        "{what}: read_since({window:?}) returns the seqs read({window:?}) returns"
    );
    assert_eq!(
        out.messages, now,
        "{what}: read_since({window:?}) returns the messages read({window:?}) returns"
    );
    assert_eq!(
        out.count,
        count(store, scope).await,
        "{what}: read_since({window:?}) returns the counts count() returns"
    );
}

/// The store declares cursor reads; otherwise checks that every `read_since` answers
/// `Unsupported` and changes nothing.
async fn cursor_reads_supported(store: &dyn HistoryStore) -> bool {
    if store.capabilities().cursor_reads {
        return true;
    }
    let scope = random_scope();
    let unknown = scope_in(scope.tenant(), "never-written");
    append_new(store, &scope, &numbered_messages("m", 3)).await;
    let before = snapshot(store, &scope).await;
    let cursors = [
        None,
        Some(ThreadCursor::new(&scope, NO_EPOCH, 0)),
        Some(ThreadCursor::new(&scope, 1, 3)),
        Some(ThreadCursor::new(&scope, 1, 8)),
        Some(ThreadCursor::new(&unknown, 1, 1)),
    ];
    for window in windows() {
        for since in cursors {
            for thread in [&scope, &unknown] {
                expect_error_kind(
                    store.read_since(thread, window, since).await,
                    ErrorKind::Unsupported,
                    &format!(
                        "read_since({window:?}, {since:?}) on a store without the cursor_reads \
                         capability"
                    ),
                );
            }
        }
    }
    assert_eq!(
        snapshot(store, &scope).await,
        before,
        "a refused read_since must leave the thread as it was"
    );
    assert_eq!(
        count(store, &unknown).await,
        ThreadCount::default(),
        "a refused read_since of an unknown thread creates nothing"
    );
    false
}

/// Contract: without a cursor, `read_since` answers [`Delta::Whole`] with the messages `read`
/// returns for the window, for every kind of window (with archived messages in the thread when
/// the store can archive), the counts `count` returns and the cursor of the thread's last seq;
/// reads of an unchanged thread give the same cursor.
pub async fn cursor_read_without_cursor_is_the_whole_window(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let scope = random_scope();
    append_new(store, &scope, &varied_messages("m", 12)).await;
    archive_if_capable(store, &scope, 2..=4, "archive 2..=4").await;
    let mut cursors = HashSet::new();
    for window in windows() {
        let what = "a read without cursor";
        let out = read_since(store, &scope, window, None, what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert_eq!(
            out.cursor.seq(),
            12,
            "the cursor of a thread of 12 messages holds seq 12"
        );
        cursors.insert(out.cursor);
    }
    assert_eq!(
        cursors.len(),
        1,
        "reads of an unchanged thread return the same cursor, whatever the window: {cursors:?}"
    );
}

/// One reader of a window: what it holds and its cursor.
struct Reader {
    window: Window,
    cached: Vec<StoredMessage>,
    cursor: ThreadCursor,
}

/// Contract: with a current cursor, `read_since` answers [`Delta::Appended`] with exactly the
/// messages the window selects after the cursor (what other append calls wrote meanwhile), and
/// the epoch stays; the reader's window plus them, trimmed ([`assemble`]), is the window `read`
/// returns, for every kind of window, including an appended message too large for the token
/// budget. An unchanged thread gives an empty `Appended` answer and the same cursor.
pub async fn cursor_read_returns_what_was_appended(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let reduces = store.capabilities().reduces_on_append;
    let scope = random_scope();
    append_new(store, &scope, &varied_messages("start", 6)).await;
    let mut readers = Vec::new();
    for window in windows() {
        let out = read_since(store, &scope, window, None, "the first read").await;
        readers.push(Reader {
            window,
            cached: out.messages,
            cursor: out.cursor,
        });
    }
    let rounds: Vec<Vec<ChatMessage>> = vec![
        Vec::new(),
        varied_messages("one", 1),
        varied_messages("three", 3),
        vec![ChatMessage::user(text_of_bytes(2_000))],
        Vec::new(),
        varied_messages("two", 2),
        varied_messages("five", 5),
    ];
    for (round, batch) in rounds.iter().enumerate() {
        if !batch.is_empty() {
            append_new(store, &scope, batch).await;
        }
        for reader in &mut readers {
            let window = reader.window;
            let what = format!("round {round} (appended {})", batch.len());
            let out = read_since(store, &scope, window, Some(reader.cursor), &what).await;
            let now = read(store, &scope, window).await;
            if reduces && out.delta == Delta::Whole {
                expect_whole(store, &scope, window, &out, &what).await;
            } else {
                assert_eq!(
                    out.delta,
                    Delta::Appended,
                    "{what}: read_since({window:?}) with the current cursor answers \
                     Delta::Appended"
                );
                let expected: Vec<StoredMessage> = now
                    .iter()
                    .filter(|m| m.seq > reader.cursor.seq())
                    .cloned()
                    .collect();
                assert_eq!(
                    seqs(&out.messages),
                    seqs(&expected),
                    "{what}: read_since({window:?}) returns the window's messages after the \
                     cursor's seq {}",
                    reader.cursor.seq()
                );
                assert_eq!(
                    out.messages, expected,
                    "{what}: read_since({window:?}) returns the appended messages exactly"
                );
                assert_eq!(
                    out.cursor.epoch(),
                    reader.cursor.epoch(),
                    "{what}: appends never change the epoch"
                );
                assert_eq!(
                    out.count,
                    count(store, &scope).await,
                    "{what}: read_since({window:?}) returns the counts count() returns"
                );
                if batch.is_empty() {
                    assert!(
                        out.messages.is_empty() && out.cursor == reader.cursor,
                        "{what}: an unchanged thread gives an empty Appended answer and the same \
                         cursor, got {:?} and {:?} (had {:?})",
                        seqs(&out.messages),
                        out.cursor,
                        reader.cursor
                    );
                }
            }
            let assembled = assemble(&reader.cached, Some(&reader.cursor), &out, window);
            assert_eq!(
                seqs(&assembled),
                seqs(&now),
                "{what}: the reader's {window:?} window plus the answer, trimmed, is the window \
                 read returns"
            );
            assert_eq!(assembled, now, "{what}: the assembled {window:?} window");
            reader.cached = assembled;
            reader.cursor = out.cursor;
        }
    }
}

/// Contract: an archive that moves a message gives the thread a new epoch: a read with the
/// earlier cursor answers [`Delta::Whole`], equal to a fresh read, for every window; an archive
/// that moves nothing may keep the epoch (an empty `Appended` answer) or not (`Whole`). A thread
/// whose messages are all archived still holds them (its epoch is not `NO_EPOCH`). Stores
/// without archive must refuse it (checked) and the rest is skipped.
pub async fn cursor_read_after_archive_is_whole(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let scope = random_scope();
    append_new(store, &scope, &varied_messages("m", 8)).await;
    let before = read_since(store, &scope, Window::All, None, "before the archive").await;
    let Some(moved) = archive_if_capable(store, &scope, 2..=3, "archive 2..=3").await else {
        return;
    };
    assert_eq!(moved, 2, "archive 2..=3 of 8 active messages moves 2");
    let mut epochs = HashSet::from([before.cursor.epoch()]);
    for window in windows() {
        let what = "after an archive that moved 2 messages";
        let out = read_since(store, &scope, window, Some(before.cursor), what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert_ne!(
            out.cursor.epoch(),
            before.cursor.epoch(),
            "{what}: the epoch moves"
        );
        epochs.insert(out.cursor.epoch());
    }
    assert_eq!(
        epochs.len(),
        2,
        "the thread has one new epoch after the archive"
    );

    let settled = read_since(store, &scope, Window::All, None, "after the archive").await;
    for (range, what) in [
        (2..=3, "archive 2..=3 again"),
        (100..=200, "archive 100..=200"),
        #[allow(clippy::reversed_empty_ranges)]
        (5..=4, "archive an empty range"),
    ] {
        assert_eq!(
            store.archive(&scope, range).await.expect_ok(what),
            0,
            "{what} moves nothing"
        );
    }
    for window in windows() {
        let what = "after archives that moved nothing";
        let out = read_since(store, &scope, window, Some(settled.cursor), what).await;
        match out.delta {
            Delta::Whole => expect_whole(store, &scope, window, &out, what).await,
            _ => assert!(
                out.messages.is_empty() && out.cursor == settled.cursor,
                "{what}: an Appended answer is empty and keeps the cursor"
            ),
        }
    }

    let last = read_since(store, &scope, Window::All, None, "before archiving all").await;
    let moved = store
        .archive(&scope, 1..=8)
        .await
        .expect_ok("archive 1..=8");
    assert_eq!(moved, 6, "archive 1..=8 moves the 6 active messages");
    for window in windows() {
        let what = "after archiving every active message";
        let out = read_since(store, &scope, window, Some(last.cursor), what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert!(
            !epochs.contains(&out.cursor.epoch()) && out.cursor.epoch() != last.cursor.epoch(),
            "{what}: the epoch is one the thread never had"
        );
    }
}

/// Contract: a clear gives the thread [`NO_EPOCH`]: a read with an earlier cursor answers
/// [`Delta::Whole`], empty, with zero counts, for every window; the re-created thread has an
/// epoch it never had, so a read with the cursor of the empty thread, or of an earlier life of
/// the thread (even one ending past the new thread's end), answers `Whole` with the new
/// messages. Three lives of a thread have three epochs.
pub async fn cursor_read_after_clear_is_whole(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let scope = random_scope();
    let messages = varied_messages("m", 5);
    let mut epochs = Vec::new();
    let mut earlier: Vec<ThreadCursor> = Vec::new();
    for life in 0..3 {
        let what = format!("life {life}");
        // Each life starts with the same messages: their ids are new again after a clear.
        append_new(store, &scope, &messages[..5 - life]).await;
        let live = read_since(store, &scope, Window::All, None, &what).await;
        assert_eq!(
            live.cursor.seq(),
            (5 - life) as u64,
            "{what}: a re-created thread starts at seq 1"
        );
        for cursor in &earlier {
            for window in windows() {
                let what = format!("{what}, with the cursor {cursor:?} of an earlier life");
                let out = read_since(store, &scope, window, Some(*cursor), &what).await;
                expect_whole(store, &scope, window, &out, &what).await;
            }
        }
        epochs.push(live.cursor.epoch());
        earlier.push(live.cursor);
        assert!(
            store.clear(&scope).await.expect_ok("clear") > 0,
            "clear deletes the thread"
        );
        for window in windows() {
            let what = format!("{what}, after clear");
            let out = read_since(store, &scope, window, Some(live.cursor), &what).await;
            expect_whole(store, &scope, window, &out, &what).await;
            assert!(
                out.messages.is_empty() && out.count == ThreadCount::default(),
                "{what}: a cleared thread reads empty and counts zero"
            );
            assert_eq!(
                out.cursor.epoch(),
                NO_EPOCH,
                "{what}: a cleared thread's epoch is NO_EPOCH"
            );
        }
        earlier.push(ThreadCursor::new(&scope, NO_EPOCH, 0));
    }
    let distinct: HashSet<u64> = epochs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        epochs.len(),
        "each life of a thread has an epoch the thread never had: {epochs:?}"
    );
}

/// Contract: an expiry gives the thread [`NO_EPOCH`]: a read with an earlier cursor answers
/// [`Delta::Whole`], empty; the re-created thread has an epoch it never had, so the cursor of
/// its earlier life (ending past the new thread's end) answers `Whole` with the new messages.
/// Stores without TTL must refuse it (checked) and the rest is skipped.
pub async fn cursor_read_after_expiry_is_whole(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await || !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    append_new(store, &scope, &varied_messages("m", 4)).await;
    let before = read_since(store, &scope, Window::All, None, "before the expiry").await;
    store
        .set_ttl(&scope, Some(SHORT_TTL))
        .await
        .expect_ok("set_ttl");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    for window in windows() {
        let what = "after the expiry";
        let out = read_since(store, &scope, window, Some(before.cursor), what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert!(
            out.messages.is_empty() && out.count == ThreadCount::default(),
            "{what}: an expired thread reads empty and counts zero"
        );
        assert_eq!(
            out.cursor.epoch(),
            NO_EPOCH,
            "{what}: an expired thread's epoch is NO_EPOCH"
        );
    }
    append_new(store, &scope, &varied_messages("again", 2)).await;
    for window in windows() {
        let what = "after the expired thread was re-created";
        let out = read_since(store, &scope, window, Some(before.cursor), what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert!(
            out.cursor.epoch() != before.cursor.epoch(),
            "{what}: the re-created thread has an epoch it never had"
        );
    }
    // Expiry with no read in between: the reader's cursor of the earlier life is stale.
    let again = read_since(store, &scope, Window::All, None, "the second life").await;
    store
        .set_ttl(&scope, Some(SHORT_TTL))
        .await
        .expect_ok("set_ttl");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    append_new(store, &scope, &varied_messages("third", 3)).await;
    let what = "after a second expiry and re-creation, read with the second life's cursor";
    let out = read_since(store, &scope, Window::All, Some(again.cursor), what).await;
    expect_whole(store, &scope, Window::All, &out, what).await;
    assert!(
        out.cursor.epoch() != again.cursor.epoch() && out.cursor.epoch() != before.cursor.epoch(),
        "{what}: each life of a thread has an epoch the thread never had"
    );
}

/// Contract: a cursor made for another scope (a sibling of the same tenant, the same session
/// under a user, a thread never written) is [`InvalidInput`](ErrorKind::InvalidInput), whatever
/// the window, and changes nothing; the thread's own cursor still works afterwards.
pub async fn cursor_of_another_scope_is_refused(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let scope = random_scope();
    let sibling = scope_in(scope.tenant(), "sibling");
    let with_user = scope
        .clone()
        .with_user("u-1")
        .expect("a valid user id is accepted");
    let unknown = scope_in(scope.tenant(), "never-written");
    for s in [&scope, &sibling, &with_user] {
        append_new(store, s, &varied_messages("m", 3)).await;
    }
    let own = read_since(store, &scope, Window::All, None, "own cursor").await;
    // Each cursor with the scope it was made for.
    let mut foreign = Vec::new();
    for s in [&sibling, &with_user, &unknown] {
        let cursor = read_since(store, s, Window::All, None, "a cursor of another scope")
            .await
            .cursor;
        foreign.push((cursor, s.clone()));
    }
    // A cursor naming another scope, but of this thread's epoch and seq.
    foreign.push((
        ThreadCursor::new(&sibling, own.cursor.epoch(), own.cursor.seq()),
        sibling.clone(),
    ));
    let before = [
        snapshot(store, &scope).await,
        snapshot(store, &sibling).await,
        snapshot(store, &with_user).await,
    ];
    for (cursor, made_for) in &foreign {
        for window in windows() {
            for thread in [&scope, &unknown].into_iter().filter(|t| *t != made_for) {
                expect_error_kind(
                    store.read_since(thread, window, Some(*cursor)).await,
                    ErrorKind::InvalidInput,
                    &format!("read_since({window:?}) of {thread} with a cursor of another scope"),
                );
            }
        }
    }
    let after = [
        snapshot(store, &scope).await,
        snapshot(store, &sibling).await,
        snapshot(store, &with_user).await,
    ];
    assert_eq!(after, before, "a refused read_since changes nothing");
    assert_eq!(
        count(store, &unknown).await,
        ThreadCount::default(),
        "a refused read_since of an unknown thread creates nothing"
    );
    let out = read_since(
        store,
        &scope,
        Window::All,
        Some(own.cursor),
        "own cursor again",
    )
    .await;
    assert!(
        out.delta == Delta::Appended && out.messages.is_empty() && out.cursor == own.cursor,
        "the thread's own cursor still reads an empty Appended answer after refused reads"
    );
}

/// Contract: a cursor of the current epoch but past the thread's last seq (a cursor from the
/// future) is [`InvalidInput`](ErrorKind::InvalidInput), whatever the window, on a thread that
/// holds messages and on an unknown one, and changes nothing; a cursor past the end but of
/// another epoch is only stale: [`Delta::Whole`].
pub async fn cursor_from_the_future_is_refused(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let scope = random_scope();
    let unknown = scope_in(scope.tenant(), "never-written");
    append_new(store, &scope, &varied_messages("m", 3)).await;
    let now = read_since(store, &scope, Window::All, None, "the current cursor").await;
    let future = ThreadCursor::new(&scope, now.cursor.epoch(), now.cursor.seq() + 5);
    let before = snapshot(store, &scope).await;
    for window in windows() {
        expect_error_kind(
            store.read_since(&scope, window, Some(future)).await,
            ErrorKind::InvalidInput,
            &format!("read_since({window:?}) with a cursor 5 past the thread's end"),
        );
        expect_error_kind(
            store
                .read_since(
                    &unknown,
                    window,
                    Some(ThreadCursor::new(&unknown, NO_EPOCH, 5)),
                )
                .await,
            ErrorKind::InvalidInput,
            &format!("read_since({window:?}) of an unknown thread with a cursor at seq 5"),
        );
    }
    assert_eq!(
        snapshot(store, &scope).await,
        before,
        "a refused read_since changes nothing"
    );
    assert_eq!(
        count(store, &unknown).await,
        ThreadCount::default(),
        "a refused read_since of an unknown thread creates nothing"
    );
    let stale = ThreadCursor::new(&scope, now.cursor.epoch().wrapping_add(1), 8);
    for window in windows() {
        let what = "a cursor past the end, of another epoch";
        let out = read_since(store, &scope, window, Some(stale), what).await;
        expect_whole(store, &scope, window, &out, what).await;
    }
}

/// Contract: an unknown thread reads [`Delta::Whole`], empty, with zero counts, epoch
/// [`NO_EPOCH`] and seq 0, and the read creates nothing; its cursor is current while the thread
/// stays unknown (an empty `Appended` answer); the first append gives the thread an epoch, so
/// the next read with that cursor answers `Whole` with the new messages.
pub async fn cursor_read_of_unknown_thread_is_whole_and_empty(store: &dyn HistoryStore) {
    if !cursor_reads_supported(store).await {
        return;
    }
    let sibling = random_scope();
    append_new(store, &sibling, &numbered_messages("sibling", 2)).await;
    let scope = scope_in(sibling.tenant(), "never-written");
    let mut cursors = Vec::new();
    for window in windows() {
        let what = "an unknown thread";
        let out = read_since(store, &scope, window, None, what).await;
        assert!(
            out.delta == Delta::Whole
                && out.messages.is_empty()
                && out.count == ThreadCount::default()
                && out.cursor == ThreadCursor::new(&scope, NO_EPOCH, 0),
            "{what}: read_since({window:?}) answers Whole, empty, zero counts, NO_EPOCH and seq \
             0, got {out:?}"
        );
        let again = read_since(store, &scope, window, Some(out.cursor), what).await;
        assert!(
            again.delta == Delta::Appended
                && again.messages.is_empty()
                && again.cursor == out.cursor,
            "{what}: read_since({window:?}) with its own cursor answers an empty Appended \
             answer, got {again:?}"
        );
        cursors.push(out.cursor);
    }
    assert!(
        !is_listed(store, &scope).await,
        "read_since of an unknown thread creates no thread"
    );
    append_new(store, &scope, &varied_messages("first", 3)).await;
    for (window, cursor) in windows().into_iter().zip(cursors) {
        let what = "after the first append";
        let out = read_since(store, &scope, window, Some(cursor), what).await;
        expect_whole(store, &scope, window, &out, what).await;
        assert_ne!(
            out.cursor.epoch(),
            NO_EPOCH,
            "{what}: the thread has an epoch"
        );
    }
}

/// Contract: `read_since` is one snapshot and a reader following its cursors never misses a
/// message: while writer tasks append batches, readers of several windows each apply every
/// answer ([`assemble`]); every answer of the `All` reader holds exactly the seqs after its
/// cursor up to the answer's cursor (a cursor never runs ahead of the messages), and once the
/// writers are done each reader's window equals a fresh read.
pub async fn cursor_reads_racing_appends_skip_no_message(store: Arc<dyn HistoryStore>) {
    const WRITERS: usize = 2;
    const BATCHES: usize = 20;
    const BATCH: usize = 3;
    if !cursor_reads_supported(&*store).await {
        return;
    }
    let scope = Arc::new(random_scope());
    append_new(&*store, &scope, &varied_messages("start", 2)).await;
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for window in [
        Window::All,
        Window::Last(4),
        Window::TokenBudget(60),
        Window::After(3),
    ] {
        let (store, scope, done, reads) =
            (store.clone(), scope.clone(), done.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            let mut held: Option<(Vec<StoredMessage>, ThreadCursor)> = None;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let since = held.as_ref().map(|(_, cursor)| *cursor);
                let out = store
                    .read_since(&scope, window, since)
                    .await
                    .expect_ok("read_since during concurrent appends");
                check_answer(&scope, window, &out, "during concurrent appends");
                if window == Window::All {
                    let from = match (out.delta, since) {
                        (Delta::Appended, Some(cursor)) => cursor.seq() + 1,
                        _ => 1,
                    };
                    assert_eq!(
                        seqs(&out.messages),
                        (from..=out.cursor.seq()).collect::<Vec<_>>(),
                        "during concurrent appends, a {:?} answer to read_since(All) from \
                         {since:?} holds every seq from {from} to its cursor's seq {}",
                        out.delta,
                        out.cursor.seq()
                    );
                }
                let cached = held.as_ref().map(|(m, _)| m.as_slice()).unwrap_or_default();
                let assembled = assemble(cached, since.as_ref(), &out, window);
                held = Some((assembled, out.cursor));
                reads.fetch_add(1, Ordering::SeqCst);
                if finished {
                    break;
                }
                tokio::task::yield_now().await;
            }
            (window, held.expect("the reader read at least once"))
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, scope) = (store.clone(), scope.clone());
        writers.push(tokio::spawn(async move {
            for b in 0..BATCHES {
                append_new(
                    &*store,
                    &scope,
                    &varied_messages(&format!("w{w}-b{b}"), BATCH),
                )
                .await;
                tokio::task::yield_now().await;
            }
        }));
    }
    for handle in writers {
        join(handle).await;
    }
    done.store(true, Ordering::SeqCst);
    let total = (2 + WRITERS * BATCHES * BATCH) as u64;
    for handle in readers {
        let (window, (held, cursor)) = join(handle).await;
        assert_eq!(
            cursor.seq(),
            total,
            "a {window:?} reader's last read (after the writers) holds the thread's last seq"
        );
        assert_eq!(
            seqs(&held),
            seqs(&read(&*store, &scope, window).await),
            "the {window:?} window a reader assembled under concurrent appends is the window \
             read returns"
        );
        assert_eq!(
            held,
            read(&*store, &scope, window).await,
            "the {window:?} window a reader assembled under concurrent appends"
        );
    }
    assert!(reads.load(Ordering::SeqCst) >= 8, "the readers did read");
}

#[cfg(test)]
mod tests {
    use memory_core::{InMemoryHistoryStore, ThreadCount};

    use super::*;

    fn stored(seq: u64, tokens: u32) -> StoredMessage {
        StoredMessage {
            seq,
            tokens,
            archived: false,
            message: ChatMessage::user(format!("m{seq}")).into(),
        }
    }

    fn answer(scope: &Scope, delta: Delta, messages: Vec<StoredMessage>, last: u64) -> CursorRead {
        CursorRead::new(
            delta,
            messages,
            ThreadCursor::new(scope, 7, last),
            ThreadCount::default(),
        )
    }

    #[test]
    fn assemble_merges_and_trims_by_window() {
        let scope = random_scope();
        let since = ThreadCursor::new(&scope, 7, 3);
        let cached = vec![stored(1, 5), stored(2, 5), stored(3, 5)];
        let delta = vec![stored(4, 5), stored(5, 5)];
        let appended = answer(&scope, Delta::Appended, delta.clone(), 5);
        let all = assemble(&cached, Some(&since), &appended, Window::All);
        assert_eq!(seqs(&all), vec![1, 2, 3, 4, 5]);
        let last = assemble(&cached, Some(&since), &appended, Window::Last(3));
        assert_eq!(seqs(&last), vec![3, 4, 5]);
        let budget = assemble(&cached, Some(&since), &appended, Window::TokenBudget(17));
        assert_eq!(seqs(&budget), vec![3, 4, 5]);
        let whole = answer(&scope, Delta::Whole, delta, 5);
        assert_eq!(
            seqs(&assemble(&cached, Some(&since), &whole, Window::All)),
            vec![4, 5]
        );
    }

    #[test]
    fn assemble_keeps_nothing_cached_when_a_budgeted_answer_stopped_early() {
        let scope = random_scope();
        let since = ThreadCursor::new(&scope, 7, 1);
        let cached = vec![stored(1, 3)];
        // Seq 2 (9 tokens) did not fit after seq 3 (2 tokens): the window is [3], though seq 1
        // would fit.
        let appended = answer(&scope, Delta::Appended, vec![stored(3, 2)], 3);
        let got = assemble(&cached, Some(&since), &appended, Window::TokenBudget(10));
        assert_eq!(seqs(&got), vec![3]);
        // The newest did not fit: the window is empty.
        let empty = answer(&scope, Delta::Appended, Vec::new(), 2);
        assert!(assemble(&cached, Some(&since), &empty, Window::TokenBudget(10)).is_empty());
        // Nothing was appended: the cached window stays.
        let same = answer(&scope, Delta::Appended, Vec::new(), 1);
        assert_eq!(
            seqs(&assemble(
                &cached,
                Some(&since),
                &same,
                Window::TokenBudget(10)
            )),
            vec![1]
        );
    }

    #[test]
    #[should_panic(expected = "only messages after the cursor")]
    fn assemble_refuses_an_appended_answer_with_old_messages() {
        let scope = random_scope();
        let since = ThreadCursor::new(&scope, 7, 3);
        let appended = answer(&scope, Delta::Appended, vec![stored(3, 1)], 3);
        assemble(&[], Some(&since), &appended, Window::All);
    }

    #[tokio::test]
    async fn varied_messages_have_varied_token_counts() {
        let store = InMemoryHistoryStore::new();
        let scope = random_scope();
        append_new(&store, &scope, &varied_messages("m", 8)).await;
        let tokens: HashSet<u32> = read(&store, &scope, Window::All)
            .await
            .iter()
            .map(|m| m.tokens)
            .collect();
        assert!(tokens.len() >= 4, "{tokens:?}");
    }
}
