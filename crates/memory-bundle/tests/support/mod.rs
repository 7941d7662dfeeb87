//! Shared test data and store wrappers.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_trait_methods
)]

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{TimeZone, Utc};
use memory_bundle::Endpoint;
use memory_core::memory::BLOCK_STATE_SOURCE;
use memory_core::{
    AppendOutcome, ChatMessage, Error, ErrorKind, HistoryCapabilities, HistoryStore,
    InMemoryHistoryStore, InMemorySessionStore, MessageId, Page, PageRequest, Result, Scope,
    ScopeFilter, SessionStore, StoredMessage, TenantId, Window, async_trait,
};
use serde_json::json;

pub fn memory_endpoint() -> Endpoint {
    Endpoint::new(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
    )
}

/// A message with a fixed id and time, so bundles are reproducible.
pub fn msg(id: &str, text: &str, i: u32) -> ChatMessage {
    let mut m = if i.is_multiple_of(2) {
        ChatMessage::user(text)
    } else {
        ChatMessage::assistant(text)
    };
    m.id = MessageId::new(id).unwrap();
    m.created_at = Utc
        .with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .unwrap()
        .checked_add_signed(chrono::Duration::seconds(i64::from(i)))
        .unwrap();
    m
}

pub fn scope(tenant: &str, user: Option<&str>, session: &str) -> Scope {
    let mut s = Scope::session(session)
        .unwrap()
        .with_tenant(tenant)
        .unwrap();
    if let Some(u) = user {
        s = s.with_user(u).unwrap();
    }
    s
}

/// The sample of the valid test vector: two tenants, threads with archived runs, a session, a
/// block state.
pub async fn fill_sample(ep: &Endpoint) {
    fill_sample_in(ep, "acme", "zeta").await;
}

/// The sample, under the given two tenants.
pub async fn fill_sample_in(ep: &Endpoint, acme: &str, zeta: &str) {
    let a = scope(acme, Some("dana"), "chat-1");
    let msgs: Vec<_> = (0..6)
        .map(|i| msg(&format!("a{i}"), &format!("message {i} of chat-1"), i))
        .collect();
    ep.history.append(&a, &msgs).await.unwrap();
    ep.history.archive(&a, 1..=2).await.unwrap();
    ep.history.archive(&a, 4..=4).await.unwrap();
    let b = scope(acme, None, "chat-2").with_agent("planner").unwrap();
    ep.history
        .append(&b, &[msg("b0", "héllo \"quoted\" ✓", 0)])
        .await
        .unwrap();
    let c = scope(zeta, Some("eli"), "s-9");
    ep.history
        .append(&c, &[msg("c0", "hi", 0), msg("c1", "hello", 1)])
        .await
        .unwrap();
    ep.sessions
        .save(&a, &json!({"v": 1, "turns": 3, "note": "x"}), None)
        .await
        .unwrap();
    let blocks = a.clone().with_source(BLOCK_STATE_SOURCE).unwrap();
    ep.sessions
        .save(
            &blocks,
            &json!({"v": 2, "blocks": {"facts": ["likes tea"]}}),
            None,
        )
        .await
        .unwrap();
}

/// A many-message thread set for the resume tests.
pub async fn fill_large(ep: &Endpoint, threads: usize, per_thread: usize) {
    fill_large_in(ep, "big", threads, per_thread).await;
}

/// The many-message threads, under the given tenant.
pub async fn fill_large_in(ep: &Endpoint, tenant: &str, threads: usize, per_thread: usize) {
    for t in 0..threads {
        let s = scope(tenant, Some("u"), &format!("t{t}"));
        let msgs: Vec<_> = (0..per_thread)
            .map(|i| msg(&format!("t{t}m{i}"), &format!("text {i}"), i as u32))
            .collect();
        for chunk in msgs.chunks(700) {
            ep.history.append(&s, chunk).await.unwrap();
        }
        // Archive a few runs, one straddling a page and a batch boundary.
        ep.history.archive(&s, 1..=3).await.unwrap();
        ep.history.archive(&s, 990..=1010).await.unwrap();
        ep.sessions
            .save(&s, &json!({"thread": t}), None)
            .await
            .unwrap();
    }
}

/// What a wrapper does to its inner store.
#[derive(Debug, Default)]
pub struct Faults {
    /// Appends allowed before failing (usize::MAX: never fail).
    pub appends_left: AtomicUsize,
    /// When failing an append, store it first (a lost response), then fail.
    pub store_then_fail: bool,
    /// Archive calls allowed before failing.
    pub archives_left: AtomicUsize,
}

impl Faults {
    pub fn none() -> Self {
        Self {
            appends_left: AtomicUsize::new(usize::MAX),
            store_then_fail: false,
            archives_left: AtomicUsize::new(usize::MAX),
        }
    }
}

fn take(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            if n == usize::MAX {
                Some(n)
            } else {
                n.checked_sub(1)
            }
        })
        .is_ok()
}

/// A history store wrapper with other capabilities (no paged reads, no tenant listing) and
/// injected failures.
#[derive(Debug)]
pub struct Wrapped {
    pub inner: Arc<dyn HistoryStore>,
    pub paged: bool,
    pub tenants: bool,
    pub archive: bool,
    pub faults: Faults,
    /// `list_tenants` calls made.
    pub tenant_listings: AtomicUsize,
}

impl Wrapped {
    pub fn new(inner: Arc<dyn HistoryStore>) -> Self {
        Self {
            inner,
            paged: true,
            tenants: true,
            archive: true,
            faults: Faults::none(),
            tenant_listings: AtomicUsize::new(0),
        }
    }
}

fn injected() -> Error {
    Error::new(ErrorKind::Unavailable, "injected failure")
}

#[async_trait]
impl memory_core::LayeredHistory for Wrapped {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        let mut c = self.inner.capabilities();
        c.paged_reads = c.paged_reads && self.paged;
        c.lists_tenants = c.lists_tenants && self.tenants;
        c.archive = c.archive && self.archive;
        c
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        if !take(&self.faults.appends_left) {
            if self.faults.store_then_fail {
                self.inner.append(scope, messages).await?;
            }
            return Err(injected());
        }
        self.inner.append(scope, messages).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        if !self.archive {
            return Err(Error::unsupported("no archive here"));
        }
        if !take(&self.faults.archives_left) {
            return Err(injected());
        }
        self.inner.archive(scope, seqs).await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        if !self.paged {
            return Err(Error::unsupported("no paged reads here"));
        }
        self.inner.read_page(scope, after, limit).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        if !self.tenants {
            return Err(Error::unsupported(
                "list_tenants needs HistoryCapabilities::lists_tenants",
            ));
        }
        self.tenant_listings.fetch_add(1, Ordering::SeqCst);
        self.inner.list_tenants(page).await
    }
}

/// Every message of every thread of `tenant` (scope key, seq, archived, message), for exact
/// comparisons.
pub async fn dump(ep: &Endpoint, tenant: &str) -> Vec<(String, u64, bool, ChatMessage)> {
    let filter = ScopeFilter::tenant(TenantId::new(tenant).unwrap());
    let page = ep
        .history
        .list_threads(&filter, PageRequest::first(10_000))
        .await
        .unwrap();
    let mut out = Vec::new();
    for s in page.items {
        for m in ep.history.read(&s, Window::Everything).await.unwrap() {
            out.push((s.key(), m.seq, m.archived, (*m.message).clone()));
        }
    }
    out
}

pub async fn dump_sessions(ep: &Endpoint, tenant: &str) -> Vec<(String, serde_json::Value)> {
    let filter = ScopeFilter::tenant(TenantId::new(tenant).unwrap());
    let page = ep
        .sessions
        .list(&filter, PageRequest::first(10_000))
        .await
        .unwrap();
    let mut out = Vec::new();
    for s in page.items {
        let st = ep.sessions.load(&s).await.unwrap().unwrap();
        out.push((s.key(), st.state));
    }
    out
}

/// The lines of a bundle without its header (which holds the creation time).
pub fn body(bundle: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(bundle).unwrap();
    text.lines().skip(1).map(str::to_owned).collect()
}

/// Returns the session store unchanged (a helper to make Endpoint from parts).
pub fn endpoint_with(history: Arc<dyn HistoryStore>, sessions: Arc<dyn SessionStore>) -> Endpoint {
    Endpoint::new(history, sessions)
}
