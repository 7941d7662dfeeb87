//! The checks of [`set_ttl`](memory_core::HistoryStore::set_ttl) and
//! [`purge_expired`](memory_core::HistoryStore::purge_expired) (optional:
//! `HistoryCapabilities::ttl`).

use std::time::Duration;

use memory_core::{AppendOutcome, ChatMessage, HistoryStore, ThreadCount, Window};

use super::support::{
    PAST_SHORT_TTL, SHORT_TTL, append_new, count, is_listed, list_all, read, ttl_supported,
};
use crate::fixtures::{
    ExpectOk, assert_out_of_range_ttls_refused, assert_ttl_of_unknown_not_found, numbered_messages,
    random_scope, random_tenant, scope_in, scope_keys, tenant_filter, ttl_refresh_scenario,
};

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
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 1)).await;
    ttl_refresh_scenario(
        async |ttl| store.set_ttl(&scope, Some(ttl)).await.expect_ok("set_ttl"),
        async || {
            append_new(store, &scope, &numbered_messages("n", 1)).await;
        },
        async |when| {
            assert_eq!(
                count(store, &scope).await.active,
                2,
                "{when} (an append) the thread is alive"
            );
        },
    )
    .await;
}

/// Contract: `set_ttl` on a thread that does not exist is `NotFound`.
pub async fn ttl_on_unknown_thread_is_not_found(store: &dyn HistoryStore) {
    if !ttl_supported(store).await {
        return;
    }
    let scope = random_scope();
    assert_ttl_of_unknown_not_found(
        store.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        "thread",
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
    assert_out_of_range_ttls_refused(async |ttl| store.set_ttl(&scope, Some(ttl)).await).await;
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
