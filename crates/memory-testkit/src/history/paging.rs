//! The checks of the administration reads: `read_page` (every message of a thread, a bounded
//! page at a time) and `list_tenants` (the tenants that hold threads). Both are optional
//! (`paged_reads`, `lists_tenants`): without the capability the call must answer
//! `Unsupported` and change nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, MAX_READ_PAGE, Page, PageRequest, Scope, StoredMessage,
    TenantId, Window,
};

use super::support::{append_new, archive_if_capable, count, join, read};
use crate::fixtures::{
    ExpectOk, every_page, expect_error_kind, numbered_messages, random_scope, random_tenant,
    scope_in, seqs,
};

/// Every message of `scope` read with `read_page`, `limit` at a time, and the pages' lengths.
async fn page_through(
    store: &dyn HistoryStore,
    scope: &Scope,
    limit: usize,
) -> (Vec<StoredMessage>, Vec<usize>) {
    let (mut all, mut lengths) = (Vec::new(), Vec::new());
    let mut after = 0;
    for _ in 0..100_000 {
        let page = store
            .read_page(scope, after, limit)
            .await
            .expect_ok(&format!("read_page(after {after}, limit {limit})"));
        if page.is_empty() {
            return (all, lengths);
        }
        lengths.push(page.len());
        after = page.last().map_or(after, |m| m.seq);
        all.extend(page);
    }
    panic!("read_page(limit {limit}) never reached the end of a thread");
}

/// Whether the store has `read_page`; otherwise checks that it answers `Unsupported` and
/// changes nothing.
async fn paged_reads_supported(store: &dyn HistoryStore, scope: &Scope) -> bool {
    if store.capabilities().paged_reads {
        return true;
    }
    let before = (
        read(store, scope, Window::Everything).await,
        count(store, scope).await,
    );
    expect_error_kind(
        store.read_page(scope, 0, 10).await,
        ErrorKind::Unsupported,
        "read_page on a store without the paged_reads capability",
    );
    let after = (
        read(store, scope, Window::Everything).await,
        count(store, scope).await,
    );
    assert_eq!(
        after, before,
        "a refused read_page must leave the thread as it was"
    );
    false
}

/// Contract: `read_page` returns the thread's messages, active and archived (flagged), above
/// `after`, in sequence order, at most `limit` (0 read as 1, past [`MAX_READ_PAGE`] as
/// `MAX_READ_PAGE`), each exactly as `Window::Everything` returns it; paging with the last
/// sequence number of each page reads every message once, whatever the page size; `after` at
/// or past the end, and an unknown thread, give an empty page.
pub async fn read_page_pages_every_message_once(store: &dyn HistoryStore) {
    let scope = random_scope();
    let n = MAX_READ_PAGE + 12;
    append_new(store, &scope, &numbered_messages("page", n)).await;
    if !paged_reads_supported(store, &scope).await {
        return;
    }
    // Archived runs in the middle, across the page boundary of MAX_READ_PAGE, and at the end.
    for range in [
        5..=7,
        MAX_READ_PAGE as u64 - 1..=MAX_READ_PAGE as u64 + 1,
        n as u64..=n as u64,
    ] {
        archive_if_capable(store, &scope, range, "archive a run").await;
    }
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(seqs(&everything), (1..=n as u64).collect::<Vec<_>>());
    for limit in [1, 3, 7, 500, MAX_READ_PAGE, MAX_READ_PAGE + 1, usize::MAX] {
        let (all, lengths) = page_through(store, &scope, limit).await;
        assert!(
            all == everything,
            "paging with limit {limit} reads every message once, in seq order, with its \
             archived flag and token count exactly as Everything does (got seqs {:?}..)",
            seqs(&all).iter().take(20).collect::<Vec<_>>()
        );
        let max = limit.clamp(1, MAX_READ_PAGE);
        assert!(
            lengths.iter().all(|&l| l <= max),
            "no page of limit {limit} is longer than {max}: {lengths:?}"
        );
        assert!(
            lengths[..lengths.len() - 1].iter().all(|&l| l == max),
            "every page of limit {limit} but the last is full ({max}): {lengths:?}"
        );
    }
    let one = store
        .read_page(&scope, 0, 0)
        .await
        .expect_ok("read_page(limit 0)");
    assert_eq!(one, everything[..1], "a limit of 0 reads one message");
    let middle = store
        .read_page(&scope, 4, 4)
        .await
        .expect_ok("read_page(after 4, limit 4)");
    assert_eq!(
        middle,
        everything[4..8],
        "a page from the middle, archived ones included"
    );
    assert!(
        middle.iter().filter(|m| m.archived).count() == 3 || !store.capabilities().archive,
        "seqs 5 to 7 are flagged archived"
    );
    let clamped = store
        .read_page(&scope, 0, MAX_READ_PAGE + 1)
        .await
        .expect_ok("read_page(limit MAX_READ_PAGE + 1)");
    assert_eq!(
        clamped,
        everything[..MAX_READ_PAGE],
        "a limit past MAX_READ_PAGE is clamped"
    );
    for after in [n as u64, n as u64 + 1, u64::MAX] {
        assert!(
            store
                .read_page(&scope, after, 10)
                .await
                .expect_ok("read_page past the end")
                .is_empty(),
            "read_page(after {after}) of a thread of {n} messages is empty"
        );
    }
    assert!(
        store
            .read_page(&random_scope(), 0, 10)
            .await
            .expect_ok("read_page of an unknown thread")
            .is_empty(),
        "read_page of an unknown thread is empty"
    );
    store.clear(&scope).await.expect_ok("clear");
    assert!(
        store
            .read_page(&scope, 0, 10)
            .await
            .expect_ok("read_page after clear")
            .is_empty(),
        "read_page of a cleared thread is empty"
    );
}

/// Contract: paging through a thread while another task appends to it reads a gap-free prefix:
/// each page starts right after the previous one and holds consecutive seqs, each message as
/// it is in the end.
pub async fn read_page_racing_appends_reads_a_gap_free_prefix(store: Arc<dyn HistoryStore>) {
    const BATCHES: usize = 40;
    let scope = Arc::new(random_scope());
    append_new(&*store, &scope, &numbered_messages("first", 3)).await;
    if !paged_reads_supported(&*store, &scope).await {
        return;
    }
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, scope, done) = (store.clone(), scope.clone(), done.clone());
        tokio::spawn(async move {
            for b in 0..BATCHES {
                let batch = [
                    ChatMessage::user(format!("b{b}-0")),
                    ChatMessage::assistant(format!("b{b}-1")),
                ];
                store
                    .append(&scope, &batch)
                    .await
                    .expect_ok("append while paging");
                tokio::task::yield_now().await;
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut read_so_far: Vec<StoredMessage> = Vec::new();
    let mut after = 0;
    loop {
        let finished = done.load(Ordering::SeqCst);
        let page = store
            .read_page(&scope, after, 3)
            .await
            .expect_ok("read_page while appending");
        assert_eq!(
            seqs(&page),
            (after + 1..=after + page.len() as u64).collect::<Vec<_>>(),
            "a page read during appends continues the previous one without a gap"
        );
        after = page.last().map_or(after, |m| m.seq);
        read_so_far.extend(page.iter().cloned());
        if page.is_empty() {
            if finished {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    join(writer).await;
    let everything = read(&*store, &scope, Window::Everything).await;
    assert_eq!(everything.len(), 3 + 2 * BATCHES);
    assert!(
        read_so_far == everything,
        "paging during appends ends with every message once, as Everything reads them"
    );
}

/// Every tenant `list_tenants` returns, paging with `limit`, in listing order; only the last
/// page may be empty.
async fn list_all_tenants(
    what: &str,
    limit: usize,
    mut list: impl AsyncFnMut(PageRequest) -> Page<TenantId>,
) -> Vec<TenantId> {
    every_page(what, limit, async |request| {
        let page = list(request).await;
        assert!(
            page.next_cursor.is_none() || !page.items.is_empty(),
            "{what}(limit {limit}) gave an empty page with a cursor: the last page has none"
        );
        page
    })
    .await
}

/// Checks the listings of `list` with every page size from 1 to the number of `listed`, and
/// a large one: each lists every tenant once, the `listed` ones among them in one order for
/// every page size, and none of `absent`. The store may hold other tenants (other checks',
/// on a shared server): only these are compared.
pub(crate) async fn check_tenant_listings(
    what: &str,
    listed: &[TenantId],
    absent: &[TenantId],
    mut list: impl AsyncFnMut(PageRequest) -> Page<TenantId>,
) {
    let mine: HashSet<&TenantId> = listed.iter().collect();
    let mut order: Option<Vec<TenantId>> = None;
    let sizes: Vec<usize> = (1..=listed.len()).chain([100, 1_000]).collect();
    for limit in sizes {
        let all = list_all_tenants(what, limit, &mut list).await;
        let mut seen = HashSet::new();
        for tenant in &all {
            assert!(
                seen.insert(tenant),
                "{what}(limit {limit}) listed tenant {tenant} twice"
            );
        }
        for tenant in absent {
            assert!(
                !seen.contains(tenant),
                "{what}(limit {limit}) listed tenant {tenant}, which holds nothing"
            );
        }
        let ours: Vec<TenantId> = all.into_iter().filter(|t| mine.contains(t)).collect();
        assert_eq!(
            ours.len(),
            listed.len(),
            "{what}(limit {limit}) lists each of the {} tenants that hold data: got {ours:?}",
            listed.len()
        );
        match &order {
            None => order = Some(ours),
            Some(first) => assert_eq!(
                &ours, first,
                "{what}(limit {limit}) lists the tenants in the same order as with page size 1"
            ),
        }
    }
}

/// Contract: `list_tenants` pages through the tenants that hold a thread with messages (active
/// or archived), each once, in the same order for every page size; a tenant whose threads
/// were all cleared, or that only ever got an empty append, is not listed.
pub async fn list_tenants_pages_each_tenant_once(store: &dyn HistoryStore) {
    let listed: Vec<TenantId> = (0..4).map(|_| random_tenant()).collect();
    for (i, tenant) in listed.iter().enumerate() {
        for s in 0..=i {
            append_new(
                store,
                &scope_in(tenant, &format!("s{s}")),
                &numbered_messages("t", 2),
            )
            .await;
        }
    }
    // A tenant whose only thread is archived whole still holds it.
    let archived = random_tenant();
    let archived_scope = scope_in(&archived, "s");
    append_new(store, &archived_scope, &numbered_messages("a", 2)).await;
    let archived_listed =
        archive_if_capable(store, &archived_scope, 1..=2, "archive a thread whole")
            .await
            .is_some();
    let cleared = random_tenant();
    for s in ["s1", "s2"] {
        let scope = scope_in(&cleared, s);
        append_new(store, &scope, &numbered_messages("c", 2)).await;
        store.clear(&scope).await.expect_ok("clear");
    }
    let empty = random_tenant();
    store
        .append(&scope_in(&empty, "s"), &[])
        .await
        .expect_ok("an empty append");
    if !store.capabilities().lists_tenants {
        let before = count(store, &scope_in(&listed[0], "s0")).await;
        expect_error_kind(
            store.list_tenants(PageRequest::first(10)).await,
            ErrorKind::Unsupported,
            "list_tenants on a store without the lists_tenants capability",
        );
        assert_eq!(
            count(store, &scope_in(&listed[0], "s0")).await,
            before,
            "a refused list_tenants changes nothing"
        );
        return;
    }
    let mut expected = listed.clone();
    if archived_listed {
        expected.push(archived);
    }
    check_tenant_listings("list_tenants", &expected, &[cleared, empty], async |page| {
        store.list_tenants(page).await.expect_ok("list_tenants")
    })
    .await;
}
