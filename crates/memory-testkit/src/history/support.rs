//! What the history checks share: reads and appends that fail the check on an error, listing
//! every page, and the probes of optional operations (`archive`, TTL) that check a refusal when
//! the capability is off.

use std::collections::HashSet;
use std::ops::RangeInclusive;
use std::time::Duration;

use memory_core::{
    AppendOutcome, ChatMessage, ErrorKind, HistoryStore, Scope, ScopeFilter, StoredMessage,
    ThreadCount, Window,
};

use crate::fixtures::{
    ExpectOk, assert_ttl_unsupported, every_page, expect_error_kind, numbered_messages,
    random_scope, tenant_filter,
};

/// Appends `messages` and checks every one was new.
pub(super) async fn append_new(
    store: &dyn HistoryStore,
    scope: &Scope,
    messages: &[ChatMessage],
) -> Vec<u64> {
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

pub(super) async fn read(
    store: &dyn HistoryStore,
    scope: &Scope,
    window: Window,
) -> Vec<StoredMessage> {
    store
        .read(scope, window)
        .await
        .expect_ok(&format!("read {window:?}"))
}

pub(super) async fn count(store: &dyn HistoryStore, scope: &Scope) -> ThreadCount {
    store.count(scope).await.expect_ok("count")
}

/// Every scope `list_threads` returns for `filter`, paging with `limit`, in listing order.
pub(super) async fn list_all(
    store: &dyn HistoryStore,
    filter: &ScopeFilter,
    limit: usize,
) -> Vec<Scope> {
    every_page("list_threads", limit, async |request| {
        store
            .list_threads(filter, request)
            .await
            .expect_ok("list_threads")
    })
    .await
}

pub(super) async fn is_listed(store: &dyn HistoryStore, scope: &Scope) -> bool {
    let filter = tenant_filter(scope.tenant());
    list_all(store, &filter, 100).await.contains(scope)
}

/// The store supports TTL; otherwise checks that the TTL calls answer `Unsupported`.
pub(super) async fn ttl_supported(store: &dyn HistoryStore) -> bool {
    if store.capabilities().ttl {
        return true;
    }
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("ttl", 1)).await;
    assert_ttl_unsupported(
        store.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        store.set_ttl(&scope, None).await,
        store.purge_expired().await,
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
pub(super) async fn append_checked(
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
pub(super) async fn archive_if_capable(
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

pub(super) async fn join<T>(handle: tokio::task::JoinHandle<T>) -> T {
    match handle.await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("a spawned check task failed: {err}"),
    }
}
