//! The [`HistoryStore`] conformance suite.
//!
//! Each check is an async function taking the store under test; it writes under its own random
//! tenant (see [`random_scope`]), so checks can run in parallel against one shared server and
//! one store instance can run them all ([`run_all_history_checks`]). A check panics, with a
//! message saying what was expected, when the store breaks the contract.
//!
//! The checks follow the `# Behavior` contract of [`HistoryStore`] line by line, plus what
//! every store must survive: concurrent writers to one thread, retried appends, scopes that
//! differ in one part only, 1 MiB and non-ASCII messages, and ids of every valid shape.
//!
//! # Capabilities
//! The checks select by [`capabilities`](HistoryStore::capabilities), honestly: a check of an
//! optional operation runs in full when the store declares it, and otherwise asserts that the
//! operation answers [`ErrorKind::Unsupported`] and changes nothing, so a store that lies
//! about a capability, either way, fails.
//! - `archive`: the checks of archiving (and the parts of other checks that archive) run when
//!   it is declared; otherwise every `archive` call must be refused, and the thread must read
//!   and count as before, with no archived message.
//! - `ttl`: the TTL and purge checks run when it is declared; otherwise `set_ttl` and
//!   `purge_expired` must be refused and the thread left as it was.
//! - `cursor_reads`: the cursor-read checks (`cursor_*`, with [`assemble`], what a reader does
//!   with an answer) run when it is declared; otherwise every `read_since` must be refused and
//!   the thread left as it was.
//! - `paged_reads`, `lists_tenants`: the checks of `read_page` and `list_tenants` run when they
//!   are declared; otherwise each call must be refused and change nothing.
//!
//! The guarantees a store may keep or not select too: when one is declared its checks run in
//! full; otherwise they assert the weaker behaviour the trait's `# Behavior` list gives for it,
//! so a store that declares a guarantee it does not keep fails.
//! - `dedupes_ids`: the deduplication checks run in full when it is declared; otherwise a
//!   retry of the thread's last batch must still store nothing, and every other append must
//!   report truly what it stored, whatever it stored again.
//! - `counts_purged`: `purge_expired` must count the threads it removed when it is declared;
//!   otherwise only the removal is checked.
//! - `lists_every_thread`: a thread with max-length ids must be listed when it is declared;
//!   otherwise it may be left out, and no other scope may be listed in its place.
//!
//! # Assumptions
//! - The store counts tokens with [`memory_core::default_token_counter`] (every backend's
//!   default): [`token_counts_match_the_counter`] compares the stored counts with it. Build the
//!   store under test with its default counter.
//! - TTL checks sleep for a few hundred milliseconds, so the store's expiry must be precise to
//!   about 100 ms.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::{
    AgentId, AppendOutcome, ChatMessage, ErrorKind, HistoryStore, MAX_BATCH_MESSAGES, MAX_ID_LEN,
    MAX_MESSAGE_BYTES, MAX_READ_PAGE, Media, MessageId, Part, Role, Scope, ScopeFilter, SessionId,
    SourceId, StoredMessage, TenantId, ThreadCount, UserId, Window, default_token_counter,
};

use crate::fixtures::{
    ExpectOk, ID_PUNCTUATION, chat_messages, every_page, expect_error_kind, message_with_id,
    numbered_messages, random_scope, random_tenant, scope_in, scope_keys, seqs, tenant_filter,
    text_of_bytes, texts, tricky_messages,
};

mod cursor;
mod paging;

pub use cursor::{
    assemble, cursor_from_the_future_is_refused, cursor_of_another_scope_is_refused,
    cursor_read_after_archive_is_whole, cursor_read_after_clear_is_whole,
    cursor_read_after_expiry_is_whole, cursor_read_of_unknown_thread_is_whole_and_empty,
    cursor_read_returns_what_was_appended, cursor_read_without_cursor_is_the_whole_window,
    cursor_reads_racing_appends_skip_no_message,
};
pub(crate) use paging::check_tenant_listings;
pub use paging::{
    list_tenants_pages_each_tenant_once, read_page_pages_every_message_once,
    read_page_racing_appends_reads_a_gap_free_prefix,
};

/// A short TTL the expiry checks wait out.
const SHORT_TTL: Duration = Duration::from_millis(300);
/// How long the expiry checks sleep to be past [`SHORT_TTL`].
const PAST_SHORT_TTL: Duration = Duration::from_millis(600);

/// Appends `messages` and checks every one was new.
async fn append_new(store: &dyn HistoryStore, scope: &Scope, messages: &[ChatMessage]) -> Vec<u64> {
    let out = store
        .append(scope, messages)
        .await
        .expect_ok("append a batch of new messages");
    assert_eq!(
        out.inserted,
        messages.len(),
        "append of {} new messages should insert all of them, got {out:?}",
        messages.len()
    );
    out.seqs
}

async fn read(store: &dyn HistoryStore, scope: &Scope, window: Window) -> Vec<StoredMessage> {
    store
        .read(scope, window)
        .await
        .expect_ok(&format!("read {window:?}"))
}

async fn count(store: &dyn HistoryStore, scope: &Scope) -> ThreadCount {
    store.count(scope).await.expect_ok("count")
}

/// Every scope `list_threads` returns for `filter`, paging with `limit`, in listing order.
async fn list_all(store: &dyn HistoryStore, filter: &ScopeFilter, limit: usize) -> Vec<Scope> {
    every_page("list_threads", limit, async |request| {
        store
            .list_threads(filter, request)
            .await
            .expect_ok("list_threads")
    })
    .await
}

async fn is_listed(store: &dyn HistoryStore, scope: &Scope) -> bool {
    let filter = tenant_filter(scope.tenant());
    list_all(store, &filter, 100).await.contains(scope)
}

/// The store supports TTL; otherwise checks that the TTL calls answer `Unsupported`.
async fn ttl_supported(store: &dyn HistoryStore) -> bool {
    if store.capabilities().ttl {
        return true;
    }
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("ttl", 1)).await;
    expect_error_kind(
        store.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        ErrorKind::Unsupported,
        "set_ttl on a store without the ttl capability",
    );
    expect_error_kind(
        store.set_ttl(&scope, None).await,
        ErrorKind::Unsupported,
        "set_ttl(None) on a store without the ttl capability",
    );
    expect_error_kind(
        store.purge_expired().await,
        ErrorKind::Unsupported,
        "purge_expired on a store without the ttl capability",
    );
    assert_eq!(
        count(store, &scope).await.active,
        1,
        "a refused set_ttl must leave the thread as it was"
    );
    false
}

/// Appends `batch` and checks that the outcome is true, whatever the store's deduplication
/// rule: one seq per message given; the thread's earlier messages are left as they were; the
/// messages it gained are the batch's messages reported at a seq past the thread's end (each
/// once, at its first occurrence), in the order given, with the next seqs, and their number is
/// `inserted`; every reported seq holds a message with the given message's id.
///
/// The checks of deduplication use it on stores without `dedupes_ids`, whose rule may store a
/// known id again.
async fn append_checked(
    store: &dyn HistoryStore,
    scope: &Scope,
    batch: &[ChatMessage],
    what: &str,
) -> AppendOutcome {
    let before = read(store, scope, Window::Everything).await;
    let last = count(store, scope).await.last_seq;
    let out = store.append(scope, batch).await.expect_ok(what);
    let after = read(store, scope, Window::Everything).await;
    assert_eq!(
        out.seqs.len(),
        batch.len(),
        "{what}: the outcome gives one seq per message given, got {out:?}"
    );
    assert_eq!(
        after.get(..before.len()),
        Some(&before[..]),
        "{what}: the thread's earlier messages are left as they were"
    );
    let gained = &after[before.len()..];
    assert_eq!(
        gained.len(),
        out.inserted,
        "{what}: inserted ({}) is the number of messages the thread gained ({})",
        out.inserted,
        gained.len()
    );
    let mut new = Vec::new();
    let mut reported = HashSet::new();
    for (message, &seq) in batch.iter().zip(&out.seqs) {
        assert!(
            after
                .iter()
                .any(|held| held.seq == seq && held.message.id == message.id),
            "{what}: the thread holds a message with id {} at its reported seq {seq}",
            message.id
        );
        if seq > last && reported.insert(seq) {
            new.push((seq, message.clone()));
        }
    }
    let expected_seqs: Vec<u64> = (last + 1..).take(gained.len()).collect();
    assert_eq!(
        gained.iter().map(|m| m.seq).collect::<Vec<_>>(),
        expected_seqs,
        "{what}: the new messages take the next seqs"
    );
    assert_eq!(
        gained
            .iter()
            .map(|m| (m.seq, (*m.message).clone()))
            .collect::<Vec<_>>(),
        new,
        "{what}: the thread gained exactly the messages reported new, in the order given"
    );
    assert_eq!(
        count(store, scope).await.last_seq,
        after.last().map_or(0, |m| m.seq),
        "{what}: count's last_seq is the thread's last seq"
    );
    out
}

/// Archives `seqs` of `scope` when the store has the archive capability, and returns how many
/// messages it moved. Otherwise checks that `archive` answers `Unsupported` and changes nothing
/// (the thread reads and counts as before and holds no archived message), and returns `None`:
/// the caller skips what depends on archiving.
async fn archive_if_capable(
    store: &dyn HistoryStore,
    scope: &Scope,
    seqs: RangeInclusive<u64>,
    what: &str,
) -> Option<u64> {
    if store.capabilities().archive {
        return Some(store.archive(scope, seqs).await.expect_ok(what));
    }
    let before = (
        read(store, scope, Window::Everything).await,
        count(store, scope).await,
    );
    expect_error_kind(
        store.archive(scope, seqs).await,
        ErrorKind::Unsupported,
        &format!("{what} on a store without the archive capability"),
    );
    let after = (
        read(store, scope, Window::Everything).await,
        count(store, scope).await,
    );
    assert_eq!(
        after, before,
        "a refused archive must leave the thread as it was"
    );
    assert!(
        after.1.archived == 0 && after.0.iter().all(|m| !m.archived),
        "a store without the archive capability holds no archived message"
    );
    None
}

/// Contract: the store assigns per-thread sequence numbers, 1 for a thread's first message, then
/// consecutive, in the order given; `read` returns them in sequence order.
pub async fn append_assigns_consecutive_seqs(store: &dyn HistoryStore) {
    let scope = random_scope();
    let first = numbered_messages("a", 3);
    let out = store
        .append(&scope, &first)
        .await
        .expect_ok("append the first batch");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 3
        },
        "a thread's first batch of 3 gets seqs 1, 2, 3"
    );
    let second = numbered_messages("b", 2);
    assert_eq!(
        append_new(store, &scope, &second).await,
        vec![4, 5],
        "the next batch continues at 4"
    );
    let third = numbered_messages("c", 1);
    assert_eq!(
        append_new(store, &scope, &third).await,
        vec![6],
        "a batch of one continues at 6"
    );
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        (1..=6).collect::<Vec<_>>(),
        "read(All) returns seqs 1..=6 in order"
    );
    let expected: Vec<ChatMessage> = first.into_iter().chain(second).chain(third).collect();
    assert_eq!(
        chat_messages(&all),
        expected,
        "read(All) returns the messages exactly as appended, in the order given"
    );
    assert!(
        all.iter().all(|m| !m.archived),
        "new messages are not archived"
    );
}

/// Contract: an unknown thread reads as empty (every window), counts zero, is not listed, and
/// archiving or clearing it changes nothing.
pub async fn unknown_thread_reads_empty(store: &dyn HistoryStore) {
    let sibling = random_scope();
    append_new(store, &sibling, &numbered_messages("sibling", 2)).await;
    let scope = scope_in(sibling.tenant(), "never-written");
    for window in [
        Window::All,
        Window::Last(10),
        Window::After(0),
        Window::TokenBudget(1_000_000),
        Window::Everything,
    ] {
        assert!(
            read(store, &scope, window).await.is_empty(),
            "a thread never written reads empty with {window:?}"
        );
    }
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "a thread never written counts zero"
    );
    if let Some(moved) = archive_if_capable(store, &scope, 1..=10, "archive unknown thread").await {
        assert_eq!(moved, 0, "archiving a thread never written moves nothing");
    }
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear unknown thread"),
        0,
        "clearing a thread never written deletes nothing"
    );
    assert!(
        !is_listed(store, &scope).await,
        "a thread never written is not listed"
    );
    assert_eq!(
        count(store, &sibling).await.active,
        2,
        "calls on an unknown thread leave its sibling alone"
    );
}

/// Contract: an empty batch is a no-op (it creates no thread and assigns no seq).
pub async fn empty_batch_is_a_no_op(store: &dyn HistoryStore) {
    let scope = random_scope();
    let out = store
        .append(&scope, &[])
        .await
        .expect_ok("append an empty batch to a new thread");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![],
            inserted: 0
        },
        "an empty batch inserts nothing"
    );
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "an empty batch leaves a new thread at zero"
    );
    assert!(
        !is_listed(store, &scope).await,
        "an empty batch does not create a listed thread"
    );
    append_new(store, &scope, &numbered_messages("m", 2)).await;
    let before = count(store, &scope).await;
    let out = store
        .append(&scope, &[])
        .await
        .expect_ok("append an empty batch to an existing thread");
    assert_eq!(out.inserted, 0, "an empty batch inserts nothing");
    assert!(out.seqs.is_empty(), "an empty batch returns no seqs");
    assert_eq!(
        count(store, &scope).await,
        before,
        "an empty batch changes no count"
    );
    assert_eq!(
        append_new(store, &scope, &numbered_messages("n", 1)).await,
        vec![3],
        "an empty batch consumes no sequence number"
    );
}

/// Contract: `Window::All` returns every active message in sequence order, and no archived one.
pub async fn window_all_returns_active_messages(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 5);
    append_new(store, &scope, &messages).await;
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        messages,
        "All returns every message of a thread with nothing archived"
    );
    if archive_if_capable(store, &scope, 2..=3, "archive 2..=3")
        .await
        .is_none()
    {
        return;
    }
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        vec![1, 4, 5],
        "All skips archived messages, keeps order"
    );
    assert_eq!(
        texts(&all),
        vec!["m-1", "m-4", "m-5"],
        "All returns the right messages"
    );
}

/// Contract: `Window::Last(n)` returns the last `n` active messages in sequence order.
pub async fn window_last_returns_newest_active(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 5)).await;
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(2)).await),
        vec![4, 5],
        "Last(2) is the two newest, oldest first"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(1)).await),
        vec![5],
        "Last(1) is the newest"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(5)).await),
        vec![1, 2, 3, 4, 5],
        "Last(len) is everything"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(50)).await),
        vec![1, 2, 3, 4, 5],
        "Last(more than len) is everything"
    );
    assert!(
        read(store, &scope, Window::Last(0)).await.is_empty(),
        "Last(0) is empty"
    );
    if archive_if_capable(store, &scope, 4..=4, "archive 4")
        .await
        .is_none()
    {
        return;
    }
    let last = read(store, &scope, Window::Last(2)).await;
    assert_eq!(
        seqs(&last),
        vec![3, 5],
        "Last(2) counts only active messages"
    );
    assert_eq!(texts(&last), vec!["m-3", "m-5"], "Last(2) content");
}

/// Contract: `Window::After(seq)` returns the active messages with a greater sequence number.
pub async fn window_after_returns_later_active(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 5)).await;
    assert_eq!(
        seqs(&read(store, &scope, Window::After(0)).await),
        vec![1, 2, 3, 4, 5],
        "After(0) is everything"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::After(2)).await),
        vec![3, 4, 5],
        "After(2) starts at 3"
    );
    assert!(
        read(store, &scope, Window::After(5)).await.is_empty(),
        "After(last seq) is empty"
    );
    assert!(
        read(store, &scope, Window::After(u64::MAX))
            .await
            .is_empty(),
        "After(u64::MAX) is empty"
    );
    if archive_if_capable(store, &scope, 3..=3, "archive 3")
        .await
        .is_none()
    {
        return;
    }
    let after = read(store, &scope, Window::After(1)).await;
    assert_eq!(seqs(&after), vec![2, 4, 5], "After skips archived messages");
    assert_eq!(texts(&after), vec!["m-2", "m-4", "m-5"], "After(1) content");
}

/// Contract: `Window::TokenBudget(b)` returns the newest active messages whose *stored* token
/// counts add up to at most `b`; the window is contiguous and ends before the first message
/// (from the newest) that does not fit, even when older, smaller messages would.
pub async fn window_token_budget_is_contiguous_from_newest(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = vec![
        ChatMessage::user("one"),
        ChatMessage::assistant("two"),
        ChatMessage::user(text_of_bytes(2_000)),
        ChatMessage::assistant("four"),
        ChatMessage::user("five is the newest message and a little longer than four"),
    ];
    append_new(store, &scope, &messages).await;
    let stored = read(store, &scope, Window::Everything).await;
    let t: Vec<u64> = stored.iter().map(|m| u64::from(m.tokens)).collect();
    assert!(
        t[2] > t[0] + t[1] + 10,
        "fixture: the big message ({}) must outweigh the two oldest ({} + {})",
        t[2],
        t[0],
        t[1]
    );
    assert!(
        t[3] < t[4],
        "fixture: message 4 ({}) must be smaller than 5 ({})",
        t[3],
        t[4]
    );
    let budget = |b: u64| Window::TokenBudget(b);
    let cases: Vec<(u64, Vec<u64>, &str)> = vec![
        (0, vec![], "a zero budget fits nothing"),
        (
            t[4] - 1,
            vec![],
            "when the newest does not fit, nothing is returned (not an older, smaller one)",
        ),
        (t[4], vec![5], "a budget of exactly the newest"),
        (t[4] + t[3], vec![4, 5], "a budget of the two newest"),
        (
            t[4] + t[3] + t[2] - 1,
            vec![4, 5],
            "the window stops at the first message that does not fit, though 1 and 2 would",
        ),
        (
            t[4] + t[3] + t[2],
            vec![3, 4, 5],
            "a budget of the three newest",
        ),
        (t.iter().sum(), vec![1, 2, 3, 4, 5], "a budget of all"),
        (u64::MAX, vec![1, 2, 3, 4, 5], "an unlimited budget"),
    ];
    for (b, expected, why) in cases {
        assert_eq!(
            seqs(&read(store, &scope, budget(b)).await),
            expected,
            "TokenBudget({b}) with stored counts {t:?}: {why}"
        );
    }
    if archive_if_capable(store, &scope, 4..=4, "archive 4")
        .await
        .is_none()
    {
        return;
    }
    assert_eq!(
        seqs(&read(store, &scope, budget(t[4] + t[2])).await),
        vec![3, 5],
        "archived messages are skipped and not counted against the budget"
    );
}

/// Contract: `Window::Everything` returns every message, active and archived, in sequence
/// order, with the `archived` flag set on archived ones (on a store without the archive
/// capability: every message, none flagged).
pub async fn window_everything_includes_archived(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 4);
    append_new(store, &scope, &messages).await;
    let archived = archive_if_capable(store, &scope, 1..=2, "archive 1..=2")
        .await
        .is_some();
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        seqs(&everything),
        vec![1, 2, 3, 4],
        "Everything returns every seq in order"
    );
    assert_eq!(
        everything.iter().map(|m| m.archived).collect::<Vec<_>>(),
        vec![archived, archived, false, false],
        "Everything flags archived messages"
    );
    assert_eq!(
        chat_messages(&everything),
        messages,
        "archived messages keep their content"
    );
}

/// Contract: a window larger than [`MAX_READ_PAGE`] is returned whole, in sequence order, each
/// message once, exactly as a short one: a store that reads it in pages (Redis) joins the pages
/// without a gap or a repeat, also where archived messages sit across a page boundary, for
/// every window (`All`, `After`, `Last`, `TokenBudget`, `Everything`).
pub async fn large_windows_are_read_whole(store: &dyn HistoryStore) {
    let scope = random_scope();
    let n = 2 * MAX_READ_PAGE + 345;
    let messages = numbered_messages("big", n);
    append_new(store, &scope, &messages).await;
    let page = MAX_READ_PAGE as u64;
    // Archived runs at the start, across the first page boundary and alone near the end.
    let mut archived: BTreeSet<u64> = BTreeSet::new();
    for range in [1..=10, page - 5..=page + 5, 2 * page + 7..=2 * page + 7] {
        if archive_if_capable(store, &scope, range.clone(), "archive a run")
            .await
            .is_some()
        {
            archived.extend(range);
        }
    }
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        seqs(&everything),
        (1..=n as u64).collect::<Vec<_>>(),
        "Everything of {n} messages returns every seq once, in order"
    );
    assert_eq!(
        chat_messages(&everything),
        messages,
        "Everything of {n} messages returns them exactly as appended"
    );
    assert!(
        everything
            .iter()
            .all(|m| m.archived == archived.contains(&m.seq)),
        "Everything of {n} messages flags exactly the archived ones"
    );
    let active: Vec<StoredMessage> = everything.into_iter().filter(|m| !m.archived).collect();
    let tail = |k: usize| active[active.len().saturating_sub(k)..].to_vec();
    assert_eq!(
        read(store, &scope, Window::All).await,
        active,
        "All of {} active messages returns each once, in order",
        active.len()
    );
    let after = page / 2;
    assert_eq!(
        read(store, &scope, Window::After(after)).await,
        active
            .iter()
            .filter(|m| m.seq > after)
            .cloned()
            .collect::<Vec<_>>(),
        "After({after}) returns every later active message"
    );
    for k in [
        MAX_READ_PAGE,
        MAX_READ_PAGE + 1,
        MAX_READ_PAGE + 500,
        usize::MAX,
    ] {
        assert_eq!(
            read(store, &scope, Window::Last(k)).await,
            tail(k),
            "Last({k}) returns the newest {k} active messages, in order"
        );
    }
    assert_eq!(
        read(store, &scope, Window::TokenBudget(u64::MAX)).await,
        active,
        "an unlimited TokenBudget returns every active message"
    );
    let k = MAX_READ_PAGE + 200;
    let budget: u64 = tail(k).iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(
        seqs(&read(store, &scope, Window::TokenBudget(budget)).await),
        seqs(&tail(k)),
        "TokenBudget({budget}), the stored counts of the newest {k} active messages, returns \
         exactly those"
    );
}

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

/// Contract: `list_threads` pages through the threads of the filter, each once, in a stable
/// order: the same order for every page size, the last page has no cursor, and every page
/// holds at most `limit` scopes.
pub async fn list_threads_pages_each_thread_once(store: &dyn HistoryStore) {
    let tenant = random_tenant();
    let mut expected = BTreeSet::new();
    for i in 1..=7 {
        let scope = scope_in(&tenant, &format!("s-{i}"));
        append_new(store, &scope, &numbered_messages("m", 1)).await;
        expected.insert(scope.key());
    }
    let filter = tenant_filter(&tenant);
    let reference = list_all(store, &filter, 2).await;
    assert_eq!(
        reference.len(),
        7,
        "paging by 2 lists 7 threads, each once: {reference:?}"
    );
    assert_eq!(
        scope_keys(&reference),
        expected,
        "the listing is exactly the tenant's threads"
    );
    for limit in [1, 2, 3, 7, 100] {
        assert_eq!(
            list_all(store, &filter, limit).await,
            reference,
            "paging by {limit} lists the same threads in the same order as paging by 2"
        );
    }
    let one_page = store
        .list_threads(&filter, memory_core::PageRequest::first(100))
        .await
        .expect_ok("list one big page");
    assert_eq!(one_page.items, reference, "one big page lists everything");
    assert_eq!(
        one_page.next_cursor, None,
        "a page holding the last thread has no next cursor"
    );
}

/// Contract: `list_threads` lists only the threads matching the filter's user, agent and source.
pub async fn list_threads_filters_by_user_agent_source(store: &dyn HistoryStore) {
    let tenant = random_tenant();
    let other_source = SourceId::new("other-src").expect("valid source");
    let mk = |session: &str, user: Option<&str>, agent: Option<&str>, source: Option<&SourceId>| {
        let mut scope = scope_in(&tenant, session);
        if let Some(u) = user {
            scope = scope.with_user(u).expect("valid user");
        }
        if let Some(a) = agent {
            scope = scope.with_agent(a).expect("valid agent");
        }
        if let Some(s) = source {
            scope = scope.with_source_id(s.clone());
        }
        scope
    };
    let s1 = mk("s-1", Some("u1"), Some("a1"), None);
    let s2 = mk("s-2", Some("u1"), Some("a2"), None);
    let s3 = mk("s-3", Some("u2"), Some("a1"), Some(&other_source));
    let s4 = mk("s-4", None, None, None);
    let s5 = mk("s-5", Some("u1"), Some("a1"), Some(&other_source));
    for scope in [&s1, &s2, &s3, &s4, &s5] {
        append_new(store, scope, &numbered_messages("m", 1)).await;
    }
    let u1 = UserId::new("u1").expect("valid");
    let a1 = AgentId::new("a1").expect("valid");
    let history = SourceId::new(memory_core::scope::DEFAULT_SOURCE).expect("valid");
    let base = tenant_filter(&tenant);
    let cases: Vec<(ScopeFilter, Vec<&Scope>, &str)> = vec![
        (base.clone(), vec![&s1, &s2, &s3, &s4, &s5], "tenant only"),
        (
            base.clone().with_user(u1.clone()),
            vec![&s1, &s2, &s5],
            "user u1",
        ),
        (
            base.clone().with_agent(a1.clone()),
            vec![&s1, &s3, &s5],
            "agent a1",
        ),
        (
            base.clone().with_source(other_source.clone()),
            vec![&s3, &s5],
            "source other-src",
        ),
        (
            base.clone().with_source(history),
            vec![&s1, &s2, &s4],
            "the default source",
        ),
        (
            base.clone().with_user(u1.clone()).with_agent(a1.clone()),
            vec![&s1, &s5],
            "user u1 and agent a1",
        ),
        (
            base.clone()
                .with_user(u1)
                .with_agent(a1)
                .with_source(other_source),
            vec![&s5],
            "user u1, agent a1 and source other-src",
        ),
        (
            base.with_user(UserId::new("nobody").expect("valid")),
            vec![],
            "a user with no thread",
        ),
    ];
    for (filter, want, why) in cases {
        let got = list_all(store, &filter, 2).await;
        assert_eq!(
            got.len(),
            want.len(),
            "filter {why}: each thread once, got {got:?}"
        );
        assert_eq!(
            scope_keys(&got),
            want.iter().map(|s| s.key()).collect(),
            "filter {why}"
        );
    }
}

/// Contract: a listing never crosses tenants: threads of another tenant with the very same
/// user, agent, source and session are not listed.
pub async fn list_threads_never_crosses_tenants(store: &dyn HistoryStore) {
    let (t1, t2) = (random_tenant(), random_tenant());
    let mut by_tenant = Vec::new();
    for tenant in [&t1, &t2] {
        let mut scopes = Vec::new();
        for i in 1..=3 {
            let scope = scope_in(tenant, &format!("s-{i}"))
                .with_user("same-user")
                .expect("valid user");
            append_new(store, &scope, &numbered_messages("m", 1)).await;
            scopes.push(scope);
        }
        by_tenant.push(scopes);
    }
    for (tenant, scopes) in [&t1, &t2].into_iter().zip(&by_tenant) {
        let got = list_all(store, &tenant_filter(tenant), 2).await;
        assert_eq!(
            scope_keys(&got),
            scope_keys(scopes),
            "tenant {tenant} lists exactly its own 3 threads"
        );
        assert!(
            got.iter().all(|s| s.tenant() == tenant),
            "no scope of another tenant is listed for {tenant}"
        );
    }
    assert!(
        list_all(store, &tenant_filter(&random_tenant()), 10)
            .await
            .is_empty(),
        "a tenant with no thread lists nothing"
    );
}

/// Contract: a retried append never duplicates: the same batch appended again inserts nothing
/// and returns the original seqs, even after other appends, and even when the retried message's
/// content differs (the first stored version stays).
///
/// Without `dedupes_ids`: a retry of the thread's last batch still inserts nothing and returns
/// the original seqs; the later retry and the changed content may be stored again, and each
/// append reports truly what it stored.
pub async fn retried_append_is_idempotent(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        retried_append_without_id_dedupe(store).await;
        return;
    }
    let scope = random_scope();
    let batch = numbered_messages("m", 3);
    append_new(store, &scope, &batch).await;
    let again = store
        .append(&scope, &batch)
        .await
        .expect_ok("append the same batch again");
    assert_eq!(
        again,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 0
        },
        "a retried batch inserts nothing and returns the original seqs"
    );
    append_new(store, &scope, &numbered_messages("n", 2)).await;
    let later = store
        .append(&scope, &batch)
        .await
        .expect_ok("retry after other appends");
    assert_eq!(
        later.seqs,
        vec![1, 2, 3],
        "a retry after other appends returns the original seqs"
    );
    assert_eq!(
        later.inserted, 0,
        "a retry after other appends inserts nothing"
    );
    let changed = batch[0].clone();
    let changed = ChatMessage {
        parts: vec![Part::text("changed text under the same id")],
        ..changed
    };
    let out = store
        .append(&scope, &[changed])
        .await
        .expect_ok("append a known id with new content");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1],
            inserted: 0
        },
        "a known id with new content is not stored again"
    );
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), 5, "retries added no message");
    assert_eq!(
        *all[0].message, batch[0],
        "the first stored version of a message stays"
    );
    assert_eq!(
        count(store, &scope).await.last_seq,
        5,
        "retries consumed no seq"
    );
}

/// [`retried_append_is_idempotent`] on a store without `dedupes_ids`.
async fn retried_append_without_id_dedupe(store: &dyn HistoryStore) {
    let scope = random_scope();
    let batch = numbered_messages("m", 3);
    append_new(store, &scope, &batch).await;
    let again = append_checked(store, &scope, &batch, "append the same batch again").await;
    assert_eq!(
        again,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 0
        },
        "a retried batch inserts nothing and returns the original seqs (it is the thread's \
         tail, which even a store without dedupes_ids skips)"
    );
    let others = numbered_messages("n", 2);
    append_new(store, &scope, &others).await;
    append_checked(store, &scope, &batch, "retry after other appends").await;
    let changed = ChatMessage {
        parts: vec![Part::text("changed text under the same id")],
        ..batch[0].clone()
    };
    append_checked(
        store,
        &scope,
        &[changed],
        "append a known id with new content",
    )
    .await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        chat_messages(&all[..5]),
        [&batch[..], &others[..]].concat(),
        "the first stored versions of the messages stay, in order"
    );
}

/// Contract: a batch overlapping what the thread holds inserts only the new messages; the known
/// ones keep their seqs and the new ones continue the sequence in the order given.
///
/// Without `dedupes_ids`: a batch that starts with the thread's last message skips it and
/// appends the rest; the batch that repeats older messages reports truly what it stored.
pub async fn overlapping_batches_insert_only_new_messages(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        let scope = random_scope();
        let m = numbered_messages("m", 5);
        append_new(store, &scope, &m[0..2]).await;
        let out = append_checked(store, &scope, &m[1..4], "append [b, c, d] over [a, b]").await;
        assert_eq!(
            out,
            AppendOutcome {
                seqs: vec![2, 3, 4],
                inserted: 2
            },
            "b, the thread's tail, keeps 2; c and d get 3 and 4"
        );
        append_checked(
            store,
            &scope,
            &[m[0].clone(), m[3].clone(), m[4].clone()],
            "append [a, d, e]",
        )
        .await;
        assert_eq!(
            chat_messages(&read(store, &scope, Window::All).await[..4]),
            m[..4],
            "the thread starts with a..d once each, in order"
        );
        return;
    }
    let scope = random_scope();
    let m = numbered_messages("m", 5);
    append_new(store, &scope, &m[0..2]).await;
    let out = store
        .append(&scope, &m[1..4])
        .await
        .expect_ok("append [b, c, d] over [a, b]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![2, 3, 4],
            inserted: 2
        },
        "b keeps 2; c and d get 3 and 4"
    );
    let out = store
        .append(&scope, &[m[0].clone(), m[3].clone(), m[4].clone()])
        .await
        .expect_ok("append [a, d, e]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 4, 5],
            inserted: 1
        },
        "a and d keep 1 and 4; e gets 5"
    );
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        m,
        "the thread holds a..e once each, in order"
    );
}

/// Contract: a message that repeats an earlier id of the same batch is not stored again; its
/// seq is that of the first occurrence, whose content is the one kept.
///
/// Without `dedupes_ids`: a repeated id may be stored again; each append reports truly what it
/// stored, and the first occurrence is stored with its content.
pub async fn duplicate_ids_within_a_batch_are_stored_once(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        let scope = random_scope();
        let a = message_with_id("dup-a", "first a");
        let b = message_with_id("dup-b", "b");
        let a_again = message_with_id("dup-a", "second a");
        let out = append_checked(
            store,
            &scope,
            &[a.clone(), b.clone(), a_again],
            "append [a, b, a']",
        )
        .await;
        assert_eq!(
            out.seqs[..2],
            [1, 2],
            "a and b, new to an empty thread, get 1 and 2"
        );
        let c = message_with_id("dup-c", "c");
        append_checked(
            store,
            &scope,
            &[c.clone(), c, b.clone()],
            "append [c, c, b]",
        )
        .await;
        assert_eq!(
            chat_messages(&read(store, &scope, Window::All).await[..2]),
            vec![a, b],
            "a and b are stored first, a with its first content"
        );
        return;
    }
    let scope = random_scope();
    let a = message_with_id("dup-a", "first a");
    let b = message_with_id("dup-b", "b");
    let a_again = message_with_id("dup-a", "second a");
    let out = store
        .append(&scope, &[a.clone(), b.clone(), a_again])
        .await
        .expect_ok("append [a, b, a']");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2, 1],
            inserted: 2
        },
        "the repeated id gets the first occurrence's seq and is not counted as inserted"
    );
    let c = message_with_id("dup-c", "c");
    let out = store
        .append(&scope, &[c.clone(), c.clone(), b.clone()])
        .await
        .expect_ok("append [c, c, b]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![3, 3, 2],
            inserted: 1
        },
        "[c, c, b]: c once at 3, b known at 2"
    );
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        vec![a, b, c],
        "each id stored once, with its first content"
    );
}

/// Contract: under concurrent writers to one thread, seqs have no gap or repeat and each batch
/// lands contiguously; concurrent readers always see a gap-free prefix, in one order.
///
/// Eight tasks (spawned with `tokio::spawn`, so they run in parallel on a multi-thread runtime)
/// each append 25 batches of two messages while two readers read the thread in a loop.
pub async fn concurrent_writers_to_one_thread(store: Arc<dyn HistoryStore>) {
    const WRITERS: usize = 8;
    const BATCHES: usize = 25;
    let scope = Arc::new(random_scope());
    let done = Arc::new(AtomicBool::new(false));
    // seq -> message id, as the readers saw it.
    let seen: Arc<Mutex<HashMap<u64, String>>> = Arc::new(Mutex::new(HashMap::new()));
    let reads = Arc::new(AtomicUsize::new(0));

    let mut readers = Vec::new();
    for _ in 0..2 {
        let (store, scope, done, seen, reads) = (
            store.clone(),
            scope.clone(),
            done.clone(),
            seen.clone(),
            reads.clone(),
        );
        readers.push(tokio::spawn(async move {
            loop {
                let finished = done.load(Ordering::SeqCst);
                let got = store
                    .read(&scope, Window::All)
                    .await
                    .expect_ok("read during concurrent appends");
                let got_seqs = seqs(&got);
                let n = got_seqs.len() as u64;
                assert_eq!(
                    got_seqs,
                    (1..=n).collect::<Vec<_>>(),
                    "a read during concurrent appends must see a gap-free prefix 1..={n}"
                );
                {
                    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                    for m in &got {
                        let id = m.message.id.as_str();
                        let first = seen.entry(m.seq).or_insert_with(|| id.to_owned());
                        assert_eq!(
                            first, id,
                            "seq {} held message {first} in one read and {id} in another",
                            m.seq
                        );
                    }
                }
                reads.fetch_add(1, Ordering::SeqCst);
                if finished {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }));
    }

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, scope) = (store.clone(), scope.clone());
        writers.push(tokio::spawn(async move {
            let mut outcomes = Vec::with_capacity(BATCHES);
            for b in 0..BATCHES {
                let batch = [
                    ChatMessage::user(format!("w{w}-b{b}-0")),
                    ChatMessage::assistant(format!("w{w}-b{b}-1")),
                ];
                let out = store
                    .append(&scope, &batch)
                    .await
                    .expect_ok("concurrent append");
                assert_eq!(
                    out.inserted, 2,
                    "writer {w} batch {b}: both messages are new"
                );
                assert_eq!(out.seqs.len(), 2, "one seq per message");
                assert_eq!(
                    out.seqs[1],
                    out.seqs[0] + 1,
                    "writer {w} batch {b} must land contiguously, got {:?}",
                    out.seqs
                );
                outcomes.push((batch, out.seqs));
            }
            outcomes
        }));
    }
    let mut all_batches = Vec::new();
    for (w, handle) in writers.into_iter().enumerate() {
        let outcomes = join(handle).await;
        let firsts: Vec<u64> = outcomes.iter().map(|(_, s)| s[0]).collect();
        assert!(
            firsts.windows(2).all(|p| p[0] < p[1]),
            "writer {w}'s sequential batches must get increasing seqs: {firsts:?}"
        );
        all_batches.extend(outcomes);
    }
    done.store(true, Ordering::SeqCst);
    for handle in readers {
        join(handle).await;
    }

    let total = (WRITERS * BATCHES * 2) as u64;
    let all = read(&*store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        (1..=total).collect::<Vec<_>>(),
        "after {WRITERS} writers x {BATCHES} batches x 2 the seqs are exactly 1..={total}"
    );
    let unique: HashSet<&str> = all.iter().map(|m| m.message.id.as_str()).collect();
    assert_eq!(unique.len(), all.len(), "no message is stored twice");
    for (batch, batch_seqs) in &all_batches {
        for (message, seq) in batch.iter().zip(batch_seqs) {
            let at = &all[(*seq - 1) as usize];
            assert_eq!(
                &*at.message, message,
                "the message at seq {seq} is the one its append reported"
            );
        }
    }
    let c = count(&*store, &scope).await;
    assert_eq!(
        (c.active, c.last_seq),
        (total, total),
        "count after concurrent appends"
    );
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    for (seq, id) in seen.iter() {
        assert_eq!(
            all[(*seq - 1) as usize].message.id.as_str(),
            id,
            "readers saw at seq {seq} the message that is there in the end"
        );
    }
    assert!(reads.load(Ordering::SeqCst) >= 2, "the readers did read");
}

async fn join<T>(handle: tokio::task::JoinHandle<T>) -> T {
    match handle.await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("a spawned check task failed: {err}"),
    }
}

/// Contract: data of one scope is never visible through another: threads with the same session
/// id under a different tenant, user, agent or source are separate threads, the same message
/// ids are inserted in each, and archive and clear of one leave the others alone.
pub async fn scopes_are_isolated(store: &dyn HistoryStore) {
    let base = random_scope();
    let session = base.session_id().as_str().to_owned();
    let variants: Vec<(&str, Scope)> = vec![
        ("base", base.clone()),
        ("other tenant", scope_in(&random_tenant(), &session)),
        ("user x", base.clone().with_user("x").expect("valid")),
        ("user y", base.clone().with_user("y").expect("valid")),
        ("agent x", base.clone().with_agent("x").expect("valid")),
        (
            "user x agent x",
            base.clone()
                .with_user("x")
                .expect("valid")
                .with_agent("x")
                .expect("valid"),
        ),
        (
            "source other",
            base.clone().with_source("other").expect("valid"),
        ),
    ];
    let shared = numbered_messages("shared", 2);
    for (name, scope) in &variants {
        let mut batch = shared.clone();
        batch.push(ChatMessage::user(format!("only in {name}")));
        let out = store
            .append(scope, &batch)
            .await
            .expect_ok(&format!("append to {name}"));
        assert_eq!(
            out,
            AppendOutcome {
                seqs: vec![1, 2, 3],
                inserted: 3
            },
            "scope {name}: the same message ids are new in every scope"
        );
    }
    for (name, scope) in &variants {
        let got = texts(&read(store, scope, Window::Everything).await);
        assert_eq!(
            got,
            vec![
                "shared-1".to_owned(),
                "shared-2".to_owned(),
                format!("only in {name}")
            ],
            "scope {name} sees only its own messages"
        );
    }
    let archived = archive_if_capable(store, &variants[0].1, 1..=3, "archive base")
        .await
        .is_some();
    store.clear(&variants[2].1).await.expect_ok("clear user x");
    for (i, (name, scope)) in variants.iter().enumerate() {
        let c = count(store, scope).await;
        let expected = match i {
            0 if archived => (0, 3),
            0 => (3, 0),
            2 => (0, 0),
            _ => (3, 0),
        };
        assert_eq!(
            (c.active, c.archived),
            expected,
            "scope {name} after archiving base and clearing user x"
        );
    }
}

/// Contract: every valid id works as a key: ids of the maximum length, made of every allowed
/// character, in every part of the scope and as a message id, round-trip through the store.
/// Without `lists_every_thread`, the scope may be missing from the listing (and nothing else
/// may be there).
pub async fn longest_ids_round_trip(store: &dyn HistoryStore) {
    let long = |prefix: &str| -> String {
        let mut s = format!("{prefix}{ID_PUNCTUATION}AZaz09");
        while s.len() < MAX_ID_LEN {
            s.push(ID_PUNCTUATION.as_bytes()[s.len() % ID_PUNCTUATION.len()] as char);
        }
        s
    };
    // Still a fresh tenant per run, padded to the maximum length.
    let tenant =
        TenantId::new(long(random_tenant().as_str())).expect("a max-length tenant id is valid");
    assert_eq!(
        tenant.as_str().len(),
        MAX_ID_LEN,
        "fixture: a max-length tenant"
    );
    let scope = Scope::new(
        tenant.clone(),
        SessionId::new(long("s")).expect("a max-length session id is valid"),
    )
    .with_user(long("u"))
    .expect("a max-length user id is valid")
    .with_agent(long("a"))
    .expect("a max-length agent id is valid")
    .with_source(long("src"))
    .expect("a max-length source id is valid");
    let message = ChatMessage::user("long ids")
        .with_id(MessageId::new(long("m")).expect("a max-length message id is valid"));
    append_new(store, &scope, std::slice::from_ref(&message)).await;
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        vec![message.clone()],
        "a thread with max-length ids reads back"
    );
    assert_eq!(
        store
            .append(&scope, std::slice::from_ref(&message))
            .await
            .expect_ok("retry")
            .inserted,
        0,
        "a max-length message id dedupes"
    );
    let listed = list_all(store, &tenant_filter(&tenant), 10).await;
    if store.capabilities().lists_every_thread {
        assert_eq!(
            listed,
            vec![scope],
            "a scope with max-length ids is listed exactly"
        );
    } else {
        assert!(
            listed.iter().all(|s| *s == scope),
            "a store without lists_every_thread may leave out a scope with max-length ids, but \
             lists no other scope in its place; got {listed:?}"
        );
        assert_eq!(
            count(store, &scope).await.active,
            1,
            "a thread with max-length ids counts its message"
        );
    }
}

/// Contract (ids): invalid ids are refused when they are built, with
/// `InvalidInput`: empty, longer than `MAX_ID_LEN`, or holding a character outside the id set.
/// No store call can receive one.
pub async fn invalid_ids_are_refused(_store: &dyn HistoryStore) {
    let too_long = "a".repeat(MAX_ID_LEN + 1);
    let bad: Vec<&str> = vec![
        "", " ", "a b", "a|b", "{tag}", "a*", "a?", "[x]", "~", "é", "日本", "a\nb", "a\u{0}b",
        "a'b", "a\"b", "a\\b", &too_long,
    ];
    for value in bad {
        let what = |kind: &str| format!("{kind} {value:?}");
        expect_error_kind(
            TenantId::new(value),
            ErrorKind::InvalidInput,
            &what("tenant id"),
        );
        expect_error_kind(
            UserId::new(value),
            ErrorKind::InvalidInput,
            &what("user id"),
        );
        expect_error_kind(
            AgentId::new(value),
            ErrorKind::InvalidInput,
            &what("agent id"),
        );
        expect_error_kind(
            SessionId::new(value),
            ErrorKind::InvalidInput,
            &what("session id"),
        );
        expect_error_kind(
            SourceId::new(value),
            ErrorKind::InvalidInput,
            &what("source id"),
        );
        expect_error_kind(
            MessageId::new(value),
            ErrorKind::InvalidInput,
            &what("message id"),
        );
        expect_error_kind(
            Scope::session(value),
            ErrorKind::InvalidInput,
            &what("Scope::session"),
        );
        let base = random_scope();
        expect_error_kind(
            base.clone().with_tenant(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_tenant"),
        );
        expect_error_kind(
            base.clone().with_user(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_user"),
        );
        expect_error_kind(
            base.clone().with_agent(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_agent"),
        );
        expect_error_kind(
            base.with_source(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_source"),
        );
    }
    let json = ChatMessage::user("x")
        .to_json()
        .expect_ok("encode a message")
        .replacen("\"id\":\"", "\"id\":\"bad id ", 1);
    assert!(
        ChatMessage::from_json(&json).is_err(),
        "a message decoded with an invalid id is refused"
    );
}

/// Contract: TTL. `set_ttl` makes a thread expire; an expired thread reads as empty, counts
/// zero, is not listed, and is gone for appends (they start a new thread at seq 1, where its
/// old ids are new). Stores without TTL answer `Unsupported`.
pub async fn ttl_expires_a_thread(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    let messages = numbered_messages("m", 3);
    append_new(store, &scope, &messages).await;
    store
        .set_ttl(&scope, Some(SHORT_TTL))
        .await
        .expect_ok("set_ttl");
    assert_eq!(
        count(store, &scope).await.active,
        3,
        "a thread with a TTL is there until it expires"
    );
    tokio::time::sleep(PAST_SHORT_TTL).await;
    for window in [Window::All, Window::Everything, Window::Last(10)] {
        assert!(
            read(store, &scope, window).await.is_empty(),
            "an expired thread reads empty with {window:?}"
        );
    }
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "an expired thread counts zero"
    );
    assert!(
        !is_listed(store, &scope).await,
        "an expired thread is not listed"
    );
    let out = store
        .append(&scope, &[messages[0].clone()])
        .await
        .expect_ok("append after expiry");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1],
            inserted: 1
        },
        "an append after expiry starts a new thread at seq 1, where the old id is new"
    );
    assert_eq!(
        count(store, &scope).await.active,
        1,
        "the new thread holds only the new append"
    );
}

/// Contract: `set_ttl(None)` removes the expiry.
pub async fn ttl_none_removes_the_expiry(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 2)).await;
    store
        .set_ttl(&scope, Some(SHORT_TTL))
        .await
        .expect_ok("set_ttl");
    store.set_ttl(&scope, None).await.expect_ok("set_ttl(None)");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    assert_eq!(
        count(store, &scope).await.active,
        2,
        "after set_ttl(None) the thread does not expire"
    );
    assert!(is_listed(store, &scope).await, "and it is still listed");
}

/// Contract: a thread expires `ttl` after its last append: each append restarts the clock.
pub async fn ttl_is_refreshed_by_append(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let ttl = Duration::from_millis(1200);
    let step = Duration::from_millis(700);
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 1)).await;
    store.set_ttl(&scope, Some(ttl)).await.expect_ok("set_ttl");
    tokio::time::sleep(step).await;
    append_new(store, &scope, &numbered_messages("n", 1)).await;
    tokio::time::sleep(step).await;
    assert_eq!(
        count(store, &scope).await.active,
        2,
        "{:?} after set_ttl({ttl:?}) but {step:?} after an append the thread is alive",
        step * 2
    );
}

/// Contract: `set_ttl` on a thread that does not exist is `NotFound`.
pub async fn ttl_on_unknown_thread_is_not_found(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    expect_error_kind(
        store.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        ErrorKind::NotFound,
        "set_ttl on a thread never written",
    );
    assert!(
        !is_listed(store, &scope).await,
        "a refused set_ttl creates no thread"
    );
}

/// Contract: a TTL under 1 ms or over `MAX_TTL` is `InvalidInput`, and the thread keeps the
/// expiry it had.
pub async fn ttl_out_of_range_is_refused(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    store
        .append(&scope, &[ChatMessage::user("keep me")])
        .await
        .expect("append");
    for ttl in [
        Duration::ZERO,
        memory_core::MAX_TTL + Duration::from_secs(1),
        Duration::MAX,
    ] {
        expect_error_kind(
            store.set_ttl(&scope, Some(ttl)).await,
            ErrorKind::InvalidInput,
            "set_ttl out of range",
        );
    }
    store
        .append(&scope, &[ChatMessage::user("still writable")])
        .await
        .expect("the thread stays writable after a refused set_ttl");
    assert_eq!(store.count(&scope).await.expect("count").active, 2);
}

/// Contract: `purge_expired` deletes expired threads' data now and returns how many threads it
/// removed; threads that did not expire stay.
///
/// On a store shared with other running checks, other expired threads may be purged too, so the
/// check asserts at least the two threads it let expire. Without `counts_purged` the number is
/// not checked; the rest is.
pub async fn purge_expired_removes_expired_threads(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let tenant = random_tenant();
    let expiring = [
        scope_in(&tenant, "expiring-1"),
        scope_in(&tenant, "expiring-2"),
    ];
    let kept = scope_in(&tenant, "kept");
    let long_lived = scope_in(&tenant, "long-lived");
    for scope in expiring.iter().chain([&kept, &long_lived]) {
        append_new(store, scope, &numbered_messages("m", 2)).await;
    }
    for scope in &expiring {
        store
            .set_ttl(scope, Some(SHORT_TTL))
            .await
            .expect_ok("set_ttl");
    }
    store
        .set_ttl(&long_lived, Some(Duration::from_secs(3600)))
        .await
        .expect_ok("set_ttl long");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    let purged = store.purge_expired().await.expect_ok("purge_expired");
    if store.capabilities().counts_purged {
        assert!(
            purged >= 2,
            "purge_expired must count the 2 expired threads it removed, returned {purged}"
        );
    }
    let listed = list_all(store, &tenant_filter(&tenant), 10).await;
    assert_eq!(
        scope_keys(&listed),
        scope_keys(&[kept.clone(), long_lived.clone()]),
        "after the purge only the threads that did not expire are listed"
    );
    for scope in [&kept, &long_lived] {
        assert_eq!(
            count(store, scope).await.active,
            2,
            "a thread that did not expire keeps its messages"
        );
    }
    for scope in &expiring {
        assert_eq!(
            count(store, scope).await,
            ThreadCount::default(),
            "a purged thread counts zero"
        );
    }
}

/// Contract: a 1 MiB message (under [`MAX_MESSAGE_BYTES`]) round-trips exactly, and has a real
/// token count.
pub async fn large_message_round_trips(store: &dyn HistoryStore) {
    let scope = random_scope();
    let big = ChatMessage::user(text_of_bytes(1 << 20));
    let small = ChatMessage::assistant("after the big one");
    append_new(store, &scope, &[big.clone(), small.clone()]).await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), 2, "both messages are stored");
    assert!(
        *all[0].message == big,
        "a 1 MiB message reads back exactly (got {} bytes of text)",
        all[0].message.text().len()
    );
    assert_eq!(*all[1].message, small, "the message after it is intact");
    assert!(
        all[0].tokens > 1000,
        "a 1 MiB message has a real token count"
    );
}

/// Contract: messages are stored exactly as given: CJK, emoji, right-to-left text, combining
/// marks, NUL and control characters, in text, author names, metadata and tool calls, round-trip
/// exactly (no normalization, no truncation at NUL).
pub async fn non_ascii_messages_round_trip(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = tricky_messages();
    append_new(store, &scope, &messages).await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), messages.len(), "every tricky message is stored");
    for (stored, original) in all.iter().zip(&messages) {
        assert_eq!(
            &*stored.message,
            original,
            "message {:?} must round-trip exactly",
            original.metadata.get("case")
        );
    }
}

/// Contract: a message over `MAX_MESSAGE_BYTES` is refused with `LimitExceeded` and nothing of
/// the batch is written, not even its valid messages.
pub async fn oversized_message_is_refused_atomically(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 2)).await;
    let before = read(store, &scope, Window::Everything).await;
    let valid = ChatMessage::user("valid, but in a refused batch");
    let oversized = ChatMessage::user(text_of_bytes(MAX_MESSAGE_BYTES + 1));
    expect_error_kind(
        store
            .append(&scope, &[valid.clone(), oversized.clone()])
            .await,
        ErrorKind::LimitExceeded,
        "append of a batch holding a message over MAX_MESSAGE_BYTES",
    );
    assert_eq!(
        read(store, &scope, Window::Everything).await,
        before,
        "a refused batch leaves the thread unchanged"
    );
    assert_eq!(
        count(store, &scope).await.last_seq,
        2,
        "a refused batch consumes no seq"
    );
    assert_eq!(
        store
            .append(&scope, std::slice::from_ref(&valid))
            .await
            .expect_ok("append the valid message alone"),
        AppendOutcome {
            seqs: vec![3],
            inserted: 1
        },
        "the valid message of the refused batch was not recorded"
    );
    let fresh = random_scope();
    expect_error_kind(
        store.append(&fresh, &[oversized]).await,
        ErrorKind::LimitExceeded,
        "append of an oversized message to a new thread",
    );
    assert_eq!(
        count(store, &fresh).await,
        ThreadCount::default(),
        "a refused first batch creates no thread"
    );
    assert!(
        !is_listed(store, &fresh).await,
        "a refused first batch is not listed"
    );
}

/// Contract: a batch over `MAX_BATCH_MESSAGES` is refused with `LimitExceeded` and nothing is
/// written.
pub async fn oversized_batch_is_refused(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 1)).await;
    let batch = numbered_messages("x", MAX_BATCH_MESSAGES + 1);
    expect_error_kind(
        store.append(&scope, &batch).await,
        ErrorKind::LimitExceeded,
        "append of a batch over MAX_BATCH_MESSAGES",
    );
    assert_eq!(
        count(store, &scope).await,
        ThreadCount {
            active: 1,
            archived: 0,
            active_tokens: u64::from(read(store, &scope, Window::All).await[0].tokens),
            last_seq: 1
        },
        "a refused batch writes nothing"
    );
}

/// Contract: each message's token count is computed once, at append, and stored: it equals the
/// counter's count (the default counter, see the module docs), does not change on read or
/// archive, and `count().active_tokens` sums it.
pub async fn token_counts_match_the_counter(store: &dyn HistoryStore) {
    let counter = default_token_counter();
    let scope = random_scope();
    let messages = vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("What is the weather in Lisbon tomorrow?"),
        ChatMessage::assistant("Let me check.").with_author("planner"),
        ChatMessage::tool_call("call-1", "weather", "{\"city\":\"Lisbon\"}"),
        ChatMessage::tool_result("call-1", "18 °C and sunny"),
        ChatMessage::new(
            Role::User,
            vec![
                Part::text("and this picture?"),
                Part::Image(Media::url("https://example.com/a.png")),
            ],
        ),
        ChatMessage::new(
            Role::Assistant,
            vec![Part::Data {
                media_type: "application/json".into(),
                data: serde_json::json!({"k": [1, 2, 3]}),
            }],
        ),
        ChatMessage::user(text_of_bytes(5_000)),
    ];
    append_new(store, &scope, &messages).await;
    let first = read(store, &scope, Window::Everything).await;
    for (stored, original) in first.iter().zip(&messages) {
        assert_eq!(
            stored.tokens,
            counter.count_message(original),
            "seq {}: the stored count equals the default counter's count",
            stored.seq
        );
    }
    let sum: u64 = first.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(
        count(store, &scope).await.active_tokens,
        sum,
        "active_tokens sums the stored counts"
    );
    // Without the archive capability the counts are compared after the refused archive.
    archive_if_capable(store, &scope, 1..=3, "archive 1..=3").await;
    let second = read(store, &scope, Window::Everything).await;
    assert_eq!(
        second.iter().map(|m| m.tokens).collect::<Vec<_>>(),
        first.iter().map(|m| m.tokens).collect::<Vec<_>>(),
        "stored counts do not change on read or archive"
    );
    let active_sum: u64 = second
        .iter()
        .filter(|m| !m.archived)
        .map(|m| u64::from(m.tokens))
        .sum();
    assert_eq!(
        count(store, &scope).await.active_tokens,
        active_sum,
        "active_tokens sums only active messages"
    );
}

/// Runs every check of the suite, one after the other, on `store`.
pub async fn run_all_history_checks(store: Arc<dyn HistoryStore>) {
    crate::__history_checks!(run_all(store));
}
