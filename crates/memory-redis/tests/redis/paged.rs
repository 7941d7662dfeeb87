//! `read_page` and `list_tenants` against the machine's Redis (or `AGENT_MEMORY_REDIS_URL`):
//! one script call per page, pages over seqs that `Overflow::Delete` deleted and over bodies
//! that do not decode, expiry, and tenant listings that leave out tenants whose threads or
//! sessions are gone. Each listing test writes under its own key prefix, so the scan sees its
//! data alone.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::{
    HistoryStore, MAX_READ_PAGE, PageRequest, Scope, SessionStore, StoredMessage, TenantId, Window,
};
use memory_redis::redis::AsyncCommands;
use memory_redis::{Overflow, RedisStore};
use support::{
    TEST_DATA_TTL, message, prefix, raw, scope, standalone_store, standalone_url, store_with,
};

use crate::support;

fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// A key prefix of its own (`ampg-<hex>`): a listing under it sees this test's data only.
fn own_prefix() -> String {
    format!("ampg-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

async fn store_under(prefix: &str) -> RedisStore {
    RedisStore::builder(&standalone_url())
        .key_prefix(prefix)
        .default_ttl(TEST_DATA_TTL)
        .connect()
        .await
        .unwrap()
}

/// Every page of `scope` from `after`, each `after` the last seq of the page before, with how
/// many round trips each page took.
async fn pages(store: &RedisStore, scope: &Scope, limit: usize) -> Vec<(Vec<StoredMessage>, u64)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let before = store.round_trips();
        let page = store.read_page(scope, after, limit).await.unwrap();
        let calls = store.round_trips() - before;
        let Some(last) = page.last() else {
            return out;
        };
        after = last.seq;
        out.push((page, calls));
    }
}

fn tenant(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

fn in_tenant(tenant: &str, session: &str) -> Scope {
    Scope::session(session)
        .unwrap()
        .with_tenant(tenant)
        .unwrap()
}

/// Every tenant `list` gives, page by page, with the cursors it returned.
async fn all_tenants<F, Fut>(limit: usize, list: F) -> (Vec<String>, Vec<Option<String>>)
where
    F: Fn(PageRequest) -> Fut,
    Fut: std::future::Future<Output = memory_core::Result<memory_core::Page<TenantId>>>,
{
    let mut tenants = Vec::new();
    let mut cursors = Vec::new();
    let mut request = PageRequest::first(limit);
    loop {
        let page = list(request).await.unwrap();
        assert!(
            page.items.len() <= limit.max(1),
            "a page holds at most its limit"
        );
        tenants.extend(page.items.iter().map(|t| t.as_str().to_owned()));
        cursors.push(page.next_cursor.clone());
        match page.next_cursor {
            Some(cursor) => request = PageRequest::after(limit, cursor),
            None => return (tenants, cursors),
        }
    }
}

/// A long thread with archived messages in the middle: pages of `MAX_READ_PAGE` are one
/// script call each and together are `Window::Everything`, flags included.
#[tokio::test]
async fn read_page_walks_a_long_thread_one_call_per_page() {
    let store = standalone_store().await;
    let scope = scope();
    let n = 2 * MAX_READ_PAGE + 345;
    let batch: Vec<_> = (0..n).map(|i| message(&format!("m{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();
    assert_eq!(store.archive(&scope, 500..=1500).await.unwrap(), 1001);
    // The first call of the script may have to send its source.
    store.read_page(&scope, 0, 1).await.unwrap();

    let walked = pages(&store, &scope, MAX_READ_PAGE).await;
    assert_eq!(
        walked.iter().map(|(p, _)| p.len()).collect::<Vec<_>>(),
        [MAX_READ_PAGE, MAX_READ_PAGE, 345]
    );
    assert!(
        walked.iter().all(|(_, calls)| *calls == 1),
        "one script call per page: {:?}",
        walked.iter().map(|(_, c)| c).collect::<Vec<_>>()
    );
    let paged: Vec<StoredMessage> = walked.into_iter().flat_map(|(p, _)| p).collect();
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(paged, everything);
    assert!(paged[499].archived && paged[1499].archived);
    assert!(!paged[498].archived && !paged[1500].archived);

    // Limits: 0 reads as 1, past MAX_READ_PAGE as MAX_READ_PAGE.
    assert_eq!(seqs(&store.read_page(&scope, 7, 0).await.unwrap()), [8]);
    let most = store.read_page(&scope, 0, usize::MAX).await.unwrap();
    assert_eq!(most.len(), MAX_READ_PAGE);
    assert_eq!(most.first().unwrap().seq, 1);
    // At or past the end, and an unknown thread: empty.
    let last = n as u64;
    assert_eq!(
        seqs(&store.read_page(&scope, last - 2, 10).await.unwrap()),
        [last - 1, last]
    );
    assert!(store.read_page(&scope, last, 10).await.unwrap().is_empty());
    assert!(
        store
            .read_page(&scope, u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .read_page(&self::scope(), 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.clear(&scope).await.unwrap(), n as u64);
    assert!(store.read_page(&scope, 0, 10).await.unwrap().is_empty());
}

/// `Overflow::Delete` leaves deleted seqs above an archived message: a page skips them and
/// still holds `limit` messages, in one call while they are fewer than the script probes, in
/// a few when a run of deleted seqs is longer.
#[tokio::test]
async fn read_page_skips_deleted_seqs() {
    let store = store_with(10, Overflow::Delete).await;
    for (n, most_calls) in [(2 * MAX_READ_PAGE + 500, 1), (9_000, 3)] {
        let scope = scope();
        store.append(&scope, &[message("first")]).await.unwrap();
        assert_eq!(store.archive(&scope, 1..=1).await.unwrap(), 1);
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let batch: Vec<_> = chunk.iter().map(|i| message(&format!("m{i}"))).collect();
            store.append(&scope, &batch).await.unwrap();
        }
        store.read_page(&scope, 0, 1).await.unwrap();
        let last = n as u64 + 1;
        let page = store.read_page(&scope, 0, 5).await.unwrap();
        assert!(page[0].archived && page[1..].iter().all(|m| !m.archived));
        if n < 4_000 {
            // One look reaches past the deleted run: a full page.
            assert_eq!(seqs(&page), [1, last - 9, last - 8, last - 7, last - 6]);
        } else {
            // The look ends inside the run: a short page, never an empty one.
            assert_eq!(seqs(&page), [1]);
        }
        // Right after the archived message, over the deleted run alone.
        let before = store.round_trips();
        let page = store.read_page(&scope, 1, 3).await.unwrap();
        let calls = store.round_trips() - before;
        assert_eq!(seqs(&page), [last - 9, last - 8, last - 7]);
        assert!(
            calls <= most_calls,
            "{n}: a page over {} deleted seqs took {calls} calls",
            last - 11
        );
        let walked: Vec<u64> = pages(&store, &scope, 4)
            .await
            .into_iter()
            .flat_map(|(p, _)| seqs(&p))
            .collect();
        assert_eq!(
            walked,
            [1].into_iter().chain(last - 9..=last).collect::<Vec<_>>()
        );
        store.clear(&scope).await.unwrap();
    }
}

/// A body that does not decode is left out; a page made only of such bodies does not end the
/// walk: the page goes on after them.
#[tokio::test]
async fn read_page_goes_on_past_undecodable_bodies() {
    let store = standalone_store().await;
    let mut conn = raw().await;
    let scope = scope();
    let batch: Vec<_> = (1..=8).map(|i| message(&format!("m{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();
    let msg = format!("{}:{{{}}}:msg", prefix(), scope.key());
    for seq in 2..=4 {
        let _: i64 = conn.hset(&msg, seq, "not json").await.unwrap();
    }
    assert_eq!(seqs(&store.read_page(&scope, 0, 3).await.unwrap()), [1]);
    // Seqs 2..=4 are the whole first look: the page comes from after them.
    assert_eq!(
        seqs(&store.read_page(&scope, 1, 3).await.unwrap()),
        [5, 6, 7]
    );
    let walked: Vec<u64> = pages(&store, &scope, 2)
        .await
        .into_iter()
        .flat_map(|(p, _)| seqs(&p))
        .collect();
    assert_eq!(walked, [1, 5, 6, 7, 8]);
    // Every body undecodable after seq 5: the end of the thread, empty.
    for seq in 6..=8 {
        let _: i64 = conn.hset(&msg, seq, "not json").await.unwrap();
    }
    assert!(store.read_page(&scope, 5, 2).await.unwrap().is_empty());
    store.clear(&scope).await.unwrap();
}

/// An expired thread reads as an empty page.
#[tokio::test]
async fn read_page_of_an_expired_thread_is_empty() {
    let store = standalone_store().await;
    let scope = scope();
    store
        .append(&scope, &[message("a"), message("b")])
        .await
        .unwrap();
    assert_eq!(seqs(&store.read_page(&scope, 0, 10).await.unwrap()), [1, 2]);
    HistoryStore::set_ttl(&store, &scope, Some(Duration::from_millis(30)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(store.read_page(&scope, 0, 10).await.unwrap().is_empty());
}

/// History tenants: every tenant with a thread once, sorted, in pages of any size; a tenant
/// whose threads were all cleared or expired is not listed, nor one that holds sessions only.
#[tokio::test]
async fn list_tenants_lists_tenants_with_threads() {
    let prefix = own_prefix();
    let store = store_under(&prefix).await;
    assert_eq!(
        HistoryStore::list_tenants(&store, PageRequest::first(10))
            .await
            .unwrap()
            .items,
        Vec::<TenantId>::new()
    );
    let live = ["t-a", "t-b", "t-c", "t-d", "t-e"];
    for (i, tenant) in live.iter().enumerate() {
        // Several threads in some tenants: each tenant is listed once.
        for s in 0..=i % 3 {
            store
                .append(&in_tenant(tenant, &format!("s-{s}")), &[message("m")])
                .await
                .unwrap();
        }
    }
    // Archived messages only: still a thread with messages.
    let archived = in_tenant("t-f", "s");
    store.append(&archived, &[message("m")]).await.unwrap();
    store.archive(&archived, 1..=1).await.unwrap();
    // Cleared: gone (its index key stays, empty of live threads).
    let cleared = in_tenant("t-cleared", "s");
    store.append(&cleared, &[message("m")]).await.unwrap();
    store.clear(&cleared).await.unwrap();
    // Expired.
    let expired = in_tenant("t-expired", "s");
    store.append(&expired, &[message("m")]).await.unwrap();
    HistoryStore::set_ttl(&store, &expired, Some(Duration::from_millis(30)))
        .await
        .unwrap();
    // Sessions only.
    store
        .save(&in_tenant("t-sessions", "s"), &serde_json::json!(1), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;

    let expected: Vec<String> = live
        .iter()
        .chain(&["t-f"])
        .map(|t| (*t).to_owned())
        .collect();
    for limit in [0, 1, 2, 4, 6, 100] {
        let (tenants, cursors) =
            all_tenants(limit, |page| HistoryStore::list_tenants(&store, page)).await;
        assert_eq!(tenants, expected, "limit {limit}");
        assert_eq!(cursors.last(), Some(&None), "the last page has no cursor");
        assert_eq!(
            cursors.len(),
            expected.len().div_ceil(limit.max(1)),
            "limit {limit}: full pages until the last"
        );
    }
    // After a cursor: the tenants above it.
    let page = HistoryStore::list_tenants(&store, PageRequest::after(2, "t-c"))
        .await
        .unwrap();
    assert_eq!(page.items, [tenant("t-d"), tenant("t-e")]);
    assert_eq!(page.next_cursor.as_deref(), Some("t-e"));

    // Clearing a tenant's last thread takes it off the list.
    store.clear(&in_tenant("t-a", "s-0")).await.unwrap();
    let (tenants, _) = all_tenants(3, |page| HistoryStore::list_tenants(&store, page)).await;
    assert_eq!(tenants, ["t-b", "t-c", "t-d", "t-e", "t-f"]);
}

/// Session tenants: every tenant with a live session once; a tenant whose sessions were all
/// deleted (only their tombstones left) or expired is not listed, nor one with threads only.
#[tokio::test]
async fn list_tenants_lists_tenants_with_sessions() {
    let prefix = own_prefix();
    let store = store_under(&prefix).await;
    let state = serde_json::json!({"k": 1});
    for tenant in ["t-3", "t-1", "t-2"] {
        for s in ["a", "b"] {
            store
                .save(&in_tenant(tenant, s), &state, None)
                .await
                .unwrap();
        }
    }
    let deleted = in_tenant("t-deleted", "a");
    store.save(&deleted, &state, None).await.unwrap();
    assert!(store.delete(&deleted).await.unwrap());
    let expired = in_tenant("t-expired", "a");
    store.save(&expired, &state, None).await.unwrap();
    SessionStore::set_ttl(&store, &expired, Some(Duration::from_millis(30)))
        .await
        .unwrap();
    store
        .append(&in_tenant("t-threads", "a"), &[message("m")])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;

    for limit in [1, 2, 3, 50] {
        let (tenants, cursors) =
            all_tenants(limit, |page| SessionStore::list_tenants(&store, page)).await;
        assert_eq!(tenants, ["t-1", "t-2", "t-3"], "limit {limit}");
        assert_eq!(cursors.len(), 3usize.div_ceil(limit), "limit {limit}");
    }
    // A deleted session's tenant comes back with a new session.
    store.save(&deleted, &state, None).await.unwrap();
    let (tenants, _) = all_tenants(10, |page| SessionStore::list_tenants(&store, page)).await;
    assert_eq!(tenants, ["t-1", "t-2", "t-3", "t-deleted"]);
}

/// Both listings are capabilities of the store, and so is `read_page`.
#[tokio::test]
async fn capabilities_name_the_new_operations() {
    let store = standalone_store().await;
    let history = HistoryStore::capabilities(&store);
    assert!(history.paged_reads && history.lists_tenants);
    assert!(SessionStore::capabilities(&store).lists_tenants);
}
