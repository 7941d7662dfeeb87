//! What the window cache does beyond the store contract: one round trip per refresh, no
//! trust in a delta that does not continue the window, a byte budget, the off switch.
// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use memory_core::{
    ChatMessage, CursorRead, Delta, HistoryCapabilities, HistoryStore, InMemoryHistoryStore,
    PageRequest, Result, Scope, StoredMessage, TenantId, ThreadCursor, Window,
};
use memory_layers::{WindowCache, WindowCacheConfig};
use memory_testkit::doubles::DeclaredHistory;

/// What a [`Spy`] does to the store's cursor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    /// Nothing: the store's answers as they are.
    None,
    /// Leaves the first message out of every `Appended` delta, as a store does with a row it
    /// cannot decode.
    DropFirstOfDelta,
    /// Hides the cursor reads: `capabilities().cursor_reads` is false.
    NoCursorReads,
}

/// A store that counts the calls the cache makes to it, and can tamper with them.
#[derive(Debug)]
struct Spy {
    inner: InMemoryHistoryStore,
    tamper: Tamper,
    reads: AtomicU64,
    cursor_reads: AtomicU64,
    page_reads: AtomicU64,
}

impl Spy {
    fn new(tamper: Tamper) -> Arc<Self> {
        Arc::new(Self {
            inner: InMemoryHistoryStore::new(),
            tamper,
            reads: AtomicU64::new(0),
            cursor_reads: AtomicU64::new(0),
            page_reads: AtomicU64::new(0),
        })
    }

    /// The (reads, cursor reads) made so far.
    fn calls(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::SeqCst),
            self.cursor_reads.load(Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl memory_core::LayeredHistory for Spy {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        let caps = self.inner.capabilities();
        if self.tamper == Tamper::NoCursorReads {
            let mut caps = caps;
            caps.cursor_reads = false;
            return caps;
        }
        caps
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(scope, window).await
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.cursor_reads.fetch_add(1, Ordering::SeqCst);
        let mut answer = self.inner.read_since(scope, window, since).await?;
        if self.tamper == Tamper::DropFirstOfDelta
            && answer.delta == Delta::Appended
            && !answer.messages.is_empty()
        {
            answer.messages.remove(0);
        }
        Ok(answer)
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.page_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_page(scope, after, limit).await
    }
}

fn scope() -> Scope {
    Scope::session(format!("s-{}", uuid::Uuid::new_v4().simple())).unwrap()
}

fn texts(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.text()).collect()
}

async fn append(store: &impl HistoryStore, scope: &Scope, texts: &[&str]) {
    let messages: Vec<ChatMessage> = texts.iter().map(|t| ChatMessage::user(*t)).collect();
    store.append(scope, &messages).await.unwrap();
}

#[tokio::test]
async fn a_refresh_after_an_append_is_one_cursor_read_and_no_plain_read() {
    let spy = Spy::new(Tamper::None);
    let cache = WindowCache::new(spy.clone());
    let scope = scope();
    append(&cache, &scope, &["a", "b", "c"]).await;
    assert_eq!(
        texts(&cache.read(&scope, Window::Last(2)).await.unwrap()),
        ["b", "c"]
    );
    assert_eq!(spy.calls(), (0, 1), "a miss is one cursor read");

    append(&cache, &scope, &["d"]).await;
    assert_eq!(
        texts(&cache.read(&scope, Window::Last(2)).await.unwrap()),
        ["c", "d"]
    );
    assert_eq!(
        spy.calls(),
        (0, 2),
        "a refresh is one more cursor read, nothing else"
    );
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.refetches), (1, 1, 0));

    // Nothing new: still one call, same window.
    assert_eq!(
        texts(&cache.read(&scope, Window::Last(2)).await.unwrap()),
        ["c", "d"]
    );
    assert_eq!(spy.calls(), (0, 3));
    assert_eq!(cache.stats().hits, 2);
}

#[tokio::test]
async fn an_archive_or_a_clear_replaces_the_window() {
    let spy = Spy::new(Tamper::None);
    let cache = WindowCache::new(spy.clone());
    let scope = scope();
    append(&cache, &scope, &["a", "b", "c"]).await;
    cache.read(&scope, Window::All).await.unwrap();
    cache.archive(&scope, 1..=2).await.unwrap();
    assert_eq!(
        texts(&cache.read(&scope, Window::All).await.unwrap()),
        ["c"]
    );
    assert_eq!(cache.stats().reloads, 1);

    assert_eq!(cache.cached_windows(), 1);
    cache.clear(&scope).await.unwrap();
    assert_eq!(
        cache.cached_windows(),
        0,
        "a clear drops the thread's windows"
    );
    append(&cache, &scope, &["x"]).await;
    assert_eq!(
        texts(&cache.read(&scope, Window::All).await.unwrap()),
        ["x"]
    );
}

#[tokio::test]
async fn a_delta_with_a_gap_is_not_merged() {
    // The store leaves the first appended message out of each delta: the cache must notice
    // and serve the whole window instead.
    let spy = Spy::new(Tamper::DropFirstOfDelta);
    let cache = WindowCache::new(spy.clone());
    let scope = scope();
    append(&cache, &scope, &["a", "b"]).await;
    cache.read(&scope, Window::Last(10)).await.unwrap();
    append(&cache, &scope, &["c", "d"]).await;
    let window = cache.read(&scope, Window::Last(10)).await.unwrap();
    assert_eq!(texts(&window), ["a", "b", "c", "d"]);
    assert_eq!(
        window,
        spy.inner.read(&scope, Window::Last(10)).await.unwrap()
    );
    assert_eq!(cache.stats().refetches, 1);
}

#[tokio::test]
async fn a_budget_that_stops_at_a_large_new_message_is_read_whole() {
    // The newest message fits, the one before it does not: the window is the newest alone,
    // though the cached window and the delta together would fit the budget.
    let store = InMemoryHistoryStore::new();
    let cache = WindowCache::new(store);
    let scope = scope();
    append(&cache, &scope, &["small"]).await;
    let budget = Window::TokenBudget(20);
    assert_eq!(texts(&cache.read(&scope, budget).await.unwrap()), ["small"]);
    let large = "many words in this message ".repeat(20);
    append(&cache, &scope, &[large.as_str(), "tail"]).await;
    let window = cache.read(&scope, budget).await.unwrap();
    assert_eq!(texts(&window), ["tail"]);
    assert_eq!(window, cache.inner().read(&scope, budget).await.unwrap());
    assert_eq!(cache.stats().refetches, 1);
}

#[tokio::test]
async fn without_cursor_reads_or_when_disabled_it_is_a_pass_through() {
    for (spy, config) in [
        (Spy::new(Tamper::NoCursorReads), WindowCacheConfig::new()),
        (Spy::new(Tamper::None), WindowCacheConfig::disabled()),
    ] {
        let cache = WindowCache::with_config(spy.clone(), config);
        assert!(!cache.is_caching());
        assert_eq!(cache.capabilities(), spy.capabilities());
        let scope = scope();
        append(&cache, &scope, &["a"]).await;
        cache.read(&scope, Window::All).await.unwrap();
        cache.read(&scope, Window::All).await.unwrap();
        assert_eq!(spy.calls(), (2, 0));
        assert_eq!(cache.stats().passed_through, 2);
        assert_eq!(cache.cached_windows(), 0);
    }
}

#[tokio::test]
async fn the_byte_budget_bounds_what_is_kept() {
    let budget = 64 * 1024;
    let cache = WindowCache::with_config(
        InMemoryHistoryStore::new(),
        WindowCacheConfig::new().with_max_bytes(budget),
    );
    let text = "x".repeat(1_000);
    for _ in 0..200 {
        let scope = scope();
        append(&cache, &scope, &[text.as_str(), text.as_str()]).await;
        assert_eq!(cache.read(&scope, Window::All).await.unwrap().len(), 2);
        assert!(cache.cached_bytes() <= budget, "{}", cache.cached_bytes());
    }
    assert!(cache.cached_windows() > 0 && cache.cached_windows() < 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_readers_of_one_thread_all_get_the_window() {
    let cache = Arc::new(WindowCache::new(InMemoryHistoryStore::new()));
    let scope = scope();
    let mut tasks = Vec::new();
    for writer in 0..4 {
        let (cache, scope) = (cache.clone(), scope.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let message = ChatMessage::user(format!("w{writer}-{i}"));
                let own = cache.append(&scope, &[message]).await.unwrap().seqs[0];
                let window = cache.read(&scope, Window::Last(7)).await.unwrap();
                // Read-your-writes: the window ends at or after this writer's own message (a
                // stale window would end before it), and it is a run of consecutive messages.
                // Other writers may append any number meanwhile (their thread may run while
                // this one is preempted), so `own` may already have left a `Last(7)`.
                assert!(window.len() <= 7);
                assert!(window.windows(2).all(|w| w[1].seq == w[0].seq + 1));
                let newest = window.last().map_or(0, |m| m.seq);
                assert!(
                    newest >= own,
                    "a stale window: it ends at {newest}, before {own}"
                );
                assert_eq!(window.len() as u64, newest.min(7), "a window cut short");
                if window.first().is_some_and(|m| m.seq <= own) {
                    assert!(window.iter().any(|m| m.seq == own), "{own} missing");
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let cached = cache.read(&scope, Window::Last(7)).await.unwrap();
    assert_eq!(
        cached,
        cache.inner().read(&scope, Window::Last(7)).await.unwrap()
    );
    assert_eq!(cached.last().unwrap().seq, 100);
}

#[tokio::test]
async fn a_zero_budget_keeps_nothing_and_still_reads_right() {
    let cache = WindowCache::with_config(
        InMemoryHistoryStore::new(),
        WindowCacheConfig::new().with_max_bytes(0),
    );
    let scope = scope();
    for text in ["a", "b", "c"] {
        append(&cache, &scope, &[text]).await;
        let window = cache.read(&scope, Window::Last(2)).await.unwrap();
        assert_eq!(
            window,
            cache.inner().read(&scope, Window::Last(2)).await.unwrap()
        );
    }
    assert_eq!(cache.cached_windows(), 0);
    assert_eq!(cache.cached_bytes(), 0);
}

#[tokio::test]
async fn a_cursor_read_without_a_cursor_is_served_from_the_cache_with_the_stores_counts() {
    // The Agent reads its window with `read_since(scope, window, None)`: the cache answers it
    // from the window it holds, with one cursor read to the store and the store's counts.
    let spy = Spy::new(Tamper::None);
    let cache = WindowCache::new(spy.clone());
    let scope = scope();
    append(&cache, &scope, &["a", "b", "c"]).await;
    let first = cache
        .read_since(&scope, Window::Last(2), None)
        .await
        .unwrap();
    assert_eq!(first.delta, Delta::Whole);
    assert_eq!(texts(&first.messages), ["b", "c"]);
    assert_eq!(spy.calls(), (0, 1));

    append(&cache, &scope, &["d"]).await;
    let second = cache
        .read_since(&scope, Window::Last(2), None)
        .await
        .unwrap();
    assert_eq!(
        second.delta,
        Delta::Whole,
        "no cursor given: the whole window"
    );
    assert_eq!(texts(&second.messages), ["c", "d"]);
    assert_eq!(second.count, spy.count(&scope).await.unwrap());
    assert_eq!(second.cursor.seq(), 4);
    assert_eq!(
        spy.calls(),
        (0, 2),
        "one cursor read with the cached cursor"
    );
    assert_eq!(cache.stats().hits, 1);

    // A caller with its own cursor is answered by the store itself.
    let own = cache
        .read_since(&scope, Window::Last(2), Some(second.cursor))
        .await
        .unwrap();
    assert_eq!((own.delta, own.messages.len()), (Delta::Appended, 0));
    assert_eq!(spy.calls(), (0, 3));
    assert_eq!(
        cache.stats().hits,
        1,
        "forwarded, not served from the cache"
    );
}

#[tokio::test]
async fn paged_reads_and_tenant_listings_are_forwarded_with_their_capabilities() {
    let spy = Spy::new(Tamper::None);
    let cache = WindowCache::new(spy.clone());
    let caps = cache.capabilities();
    assert_eq!(caps, spy.capabilities());
    assert!(caps.paged_reads && caps.lists_tenants);
    let scope = scope();
    append(&cache, &scope, &["a", "b", "c", "d"]).await;
    cache.archive(&scope, 2..=2).await.unwrap();
    cache.read(&scope, Window::All).await.unwrap();
    let page = cache.read_page(&scope, 1, 2).await.unwrap();
    assert_eq!(
        page.iter()
            .map(|m| (m.seq, m.archived, m.message.text()))
            .collect::<Vec<_>>(),
        [(2, true, "b".to_owned()), (3, false, "c".to_owned())]
    );
    assert_eq!(spy.page_reads.load(Ordering::SeqCst), 1, "never kept");
    cache.read_page(&scope, 1, 2).await.unwrap();
    assert_eq!(spy.page_reads.load(Ordering::SeqCst), 2, "never kept");
    let tenants = cache.list_tenants(PageRequest::first(10)).await.unwrap();
    assert_eq!(tenants.items, vec![scope.tenant().clone()]);
    assert_eq!(
        tenants,
        spy.list_tenants(PageRequest::first(10)).await.unwrap()
    );

    // Without the capabilities, the inner store's refusal comes through.
    let plain = WindowCache::new(DeclaredHistory::new(
        InMemoryHistoryStore::new()
            .capabilities()
            .with_paged_reads(false)
            .with_lists_tenants(false),
    ));
    assert!(!plain.capabilities().paged_reads && !plain.capabilities().lists_tenants);
    let refused = plain.read_page(&scope, 0, 10).await.unwrap_err();
    assert_eq!(refused.kind(), memory_core::ErrorKind::Unsupported);
    let refused = plain.list_tenants(PageRequest::first(1)).await.unwrap_err();
    assert_eq!(refused.kind(), memory_core::ErrorKind::Unsupported);
    assert_eq!(plain.inner().refused(), ["read_page", "list_tenants"]);
}

/// Every window the cache keeps, read through `cache`.
async fn every_window(cache: &impl HistoryStore, scope: &Scope) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for window in [
        Window::All,
        Window::Last(2),
        Window::TokenBudget(1_000),
        Window::After(1),
        Window::Everything,
    ] {
        out.push(texts(&cache.read(scope, window).await.unwrap()));
        let since = cache.read_since(scope, window, None).await.unwrap();
        out.push(texts(&since.messages));
    }
    out
}

#[tokio::test]
async fn a_forgotten_thread_is_never_served_from_the_cache() {
    use memory_core::ScopeFilter;
    use memory_core::forget::{ForgetMode, Forgetter};

    let spy = Spy::new(Tamper::None);
    let cache = Arc::new(WindowCache::new(spy.clone()));
    let tenant = format!("t-{}", uuid::Uuid::new_v4().simple());
    let in_tenant = |user: &str| {
        Scope::session("s")
            .unwrap()
            .with_tenant(tenant.clone())
            .unwrap()
            .with_user(user)
            .unwrap()
    };
    let (dana, eli, kim) = (in_tenant("dana"), in_tenant("eli"), in_tenant("kim"));
    for s in [&dana, &eli, &kim] {
        append(&*cache, s, &["a", "b", "c"]).await;
        let before = every_window(&*cache, s).await;
        assert!(before.iter().any(|w| !w.is_empty()));
        assert_eq!(
            every_window(&*cache, s).await,
            before,
            "served from the cache"
        );
    }
    assert!(cache.stats().hits > 0, "the windows were kept");
    let kept = every_window(&*cache, &kim).await;

    // Forgotten through the cache: its windows go with the thread.
    let filter = |user: &str| {
        ScopeFilter::tenant(TenantId::new(tenant.clone()).unwrap())
            .with_user(memory_core::UserId::new(user).unwrap())
    };
    let through = Forgetter::new().history(cache.clone());
    let receipt = through
        .forget(&filter("dana"), ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(receipt.total_items(), 3);
    for window in every_window(&*cache, &dana).await {
        assert!(window.is_empty(), "a forgotten thread read {window:?}");
    }

    // Forgotten under the cache (another process, say): the cursor's epoch tells.
    let under = Forgetter::new().history(spy.clone());
    let receipt = under
        .forget(&filter("eli"), ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(receipt.total_items(), 3);
    for window in every_window(&*cache, &eli).await {
        assert!(
            window.is_empty(),
            "a thread forgotten under the cache read {window:?}"
        );
    }
    assert_eq!(
        every_window(&*cache, &kim).await,
        kept,
        "another user is intact"
    );

    // A thread written again after the forget reads as new.
    append(&*cache, &dana, &["x"]).await;
    assert_eq!(texts(&cache.read(&dana, Window::All).await.unwrap()), ["x"]);
    assert_eq!(
        texts(&cache.read(&dana, Window::Last(2)).await.unwrap()),
        ["x"]
    );
}
