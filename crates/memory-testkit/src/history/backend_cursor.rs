//! What a backend's own cursor-read tests share, beyond the suite's checks: the windows they
//! compare with the reference store, and the answers a thread gives when nothing is new and
//! once it was emptied (cleared or expired) their own way.

use memory_core::{Delta, HistoryStore, NO_EPOCH, Scope, ThreadCount, ThreadCursor, Window};

use crate::fixtures::ExpectOk;

/// The windows a backend's cursor tests read at each step: every kind, sizes that cut a short
/// thread, and budgets of nothing and of everything.
pub const CURSOR_WINDOWS: [Window; 8] = [
    Window::All,
    Window::After(2),
    Window::Last(3),
    Window::Last(0),
    Window::TokenBudget(40),
    Window::TokenBudget(0),
    Window::TokenBudget(u64::MAX),
    Window::Everything,
];

/// Reads `window` of `scope` with `cursor`, current because nothing changed since: the answer
/// is [`Delta::Appended`] with no message. Returns its cursor.
///
/// # Panics
/// When the store answers otherwise, or the read fails. `what` names the step in the message.
pub async fn expect_nothing_new(
    store: &dyn HistoryStore,
    scope: &Scope,
    window: Window,
    cursor: ThreadCursor,
    what: &str,
) -> ThreadCursor {
    let read = store
        .read_since(scope, window, Some(cursor))
        .await
        .expect_ok(what);
    assert_eq!(
        (read.delta, read.messages.len()),
        (Delta::Appended, 0),
        "{what}: a current cursor reads nothing new ({window:?})"
    );
    read.cursor
}

/// Reads `scope`, just emptied, with `before`, a cursor of the thread's earlier life: the
/// answer is [`Delta::Whole`], holds no message, counts zero and has the epoch [`NO_EPOCH`];
/// and that answer's cursor stays current while the thread stays empty
/// ([`expect_nothing_new`]). Returns the cursor of the read that found the thread emptied,
/// which a later append makes stale.
///
/// # Panics
/// When the store answers otherwise, or a read fails. `what` names the step in the message.
pub async fn expect_emptied_thread(
    store: &dyn HistoryStore,
    scope: &Scope,
    before: ThreadCursor,
    what: &str,
) -> ThreadCursor {
    let gone = store
        .read_since(scope, Window::All, Some(before))
        .await
        .expect_ok(what);
    assert_eq!(
        gone.delta,
        Delta::Whole,
        "{what}: an emptied thread reads whole"
    );
    assert!(gone.messages.is_empty(), "{what}: {:?}", gone.messages);
    assert_eq!(gone.cursor.epoch(), NO_EPOCH, "{what}: the epoch");
    assert_eq!(gone.count, ThreadCount::default(), "{what}: the counts");
    expect_nothing_new(store, scope, Window::All, gone.cursor, what).await;
    gone.cursor
}
