//! `Traced`: a store wrapper that gives every call a span and a duration data point.

use std::fmt;
use std::future::Future;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tracing::{Instrument, Span};
use uuid::Uuid;

use crate::history::{
    AppendOutcome, CursorRead, HistoryCapabilities, HistoryStore, LayeredHistory, StoredMessage,
    ThreadCount, ThreadCursor, Window,
};
use crate::lexical::{
    LayeredTextIndex, ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery,
};
use crate::scope::{Page, PageRequest, Scope, ScopeFilter, ScopedHit};
use crate::session::{LayeredSessions, SessionCapabilities, SessionStore, StoredSession};
use crate::vector::{
    LayeredVectors, ScoredPoint, VectorCapabilities, VectorPoint, VectorQuery, VectorStore,
};
use crate::{ChatMessage, Result, TenantId};

/// A [`HistoryStore`], [`SessionStore`], [`VectorStore`] or [`TextIndex`] whose every call is a `DEBUG` span
/// `agent_memory.store.op` (OpenTelemetry name `<db.operation.name> <db.system.name>`, kind
/// client) with `db.system.name`, `db.operation.name`, the scope's tenant and session, the
/// count of what the call moved (`agent_memory.store.count`), and `error.type` with an error
/// status when it fails; and a data point of the histogram `db.client.operation.duration`
/// (seconds) per call, so its count is the number of round trips. Neither a search's query
/// (its vector or its text) nor a document's text is ever recorded.
///
/// It changes nothing else: it is a layer ([`LayeredHistory`], [`LayeredSessions`],
/// [`LayeredVectors`], [`LayeredTextIndex`]) that overrides every method to time it
/// (`clippy::missing_trait_methods` is denied on the impls, so a method added to a trait is
/// traced too, never forwarded unseen), the capabilities are the inner store's, and its
/// `Debug` is the inner store's. When no subscriber wants the span, a call goes straight to the inner store: no
/// clock read, no allocation beyond the boxed future every `async_trait` method has.
#[derive(Clone)]
pub struct Traced<S> {
    inner: S,
    system: &'static str,
}

impl<S> Traced<S> {
    /// Wraps `inner`, naming its database system (`db.system.name`: `sqlite`, `postgresql`,
    /// `mysql`, `redis`, `qdrant`, `memory`…).
    pub fn new(inner: S, system: &'static str) -> Self {
        Self { inner, system }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The `db.system.name` of the wrapped store.
    pub fn system(&self) -> &'static str {
        self.system
    }
}

impl<S: fmt::Debug> fmt::Debug for Traced<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// The span of one call; its fields are evaluated only when a subscriber wants it.
fn op_span(system: &'static str, op: &'static str, scope: Option<&Scope>) -> Span {
    tracing::debug_span!(
        "agent_memory.store.op",
        otel.name = tracing::field::Empty,
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        db.system.name = system,
        db.operation.name = op,
        agent_memory.scope.tenant = scope.map(|s| s.tenant().as_str()),
        agent_memory.scope.session = scope.map(|s| s.session_id().as_str()),
        agent_memory.store.count = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Runs `call` in the span of `op`, timing it, unless nobody listens.
async fn observe<T, F>(
    system: &'static str,
    op: &'static str,
    scope: Option<&Scope>,
    call: F,
    count: impl FnOnce(&T) -> u64,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let span = op_span(system, op, scope);
    if span.is_disabled()
        && !tracing::enabled!(target: super::METRICS_TARGET, tracing::Level::DEBUG)
    {
        return call.await;
    }
    if !span.is_disabled() {
        span.record("otel.name", format_args!("{op} {system}"));
    }
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let seconds = duration_seconds(started.elapsed());
    let error = result.as_ref().err().map(|e| e.kind().as_str());
    match &result {
        Ok(value) => {
            span.record(
                "agent_memory.store.count",
                crate::telemetry::int(count(value)),
            );
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", e.kind().as_str());
        }
    }
    tracing::event!(
        target: "agent_memory::metrics",
        parent: None,
        tracing::Level::DEBUG,
        histogram.db.client.operation.duration = seconds,
        db.system.name = system,
        db.operation.name = op,
        error.type = error,
    );
    result
}

fn duration_seconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64()
}

fn len<T>(items: &[T]) -> u64 {
    u64::try_from(items.len()).unwrap_or(u64::MAX)
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: HistoryStore> LayeredHistory for Traced<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        self.inner.capabilities()
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let call = self.inner.append(scope, messages);
        observe(self.system, "append", Some(scope), call, |o| {
            u64::try_from(o.inserted).unwrap_or(u64::MAX)
        })
        .await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let call = self.inner.read(scope, window);
        observe(self.system, "read", Some(scope), call, |m| len(m)).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let call = self.inner.count(scope);
        observe(self.system, "count", Some(scope), call, |c| c.active).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let call = self.inner.clear(scope);
        observe(self.system, "clear", Some(scope), call, |n| *n).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let call = self.inner.list_threads(filter, page);
        observe(self.system, "list_threads", None, call, |p| len(&p.items)).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let call = self.inner.archive(scope, seqs);
        observe(self.system, "archive", Some(scope), call, |n| *n).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let call = self.inner.set_ttl(scope, ttl);
        observe(self.system, "set_ttl", Some(scope), call, |()| 1).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        let call = self.inner.purge_expired();
        observe(self.system, "purge_expired", None, call, |n| *n).await
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        let call = self.inner.read_since(scope, window, since);
        observe(self.system, "read_since", Some(scope), call, |r| {
            len(&r.messages)
        })
        .await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let call = self.inner.read_page(scope, after, limit);
        observe(self.system, "read_page", Some(scope), call, |m| len(m)).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let call = HistoryStore::list_tenants(&self.inner, page);
        observe(self.system, "list_tenants", None, call, |p| len(&p.items)).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: SessionStore> LayeredSessions for Traced<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.inner
    }
    fn capabilities(&self) -> SessionCapabilities {
        self.inner.capabilities()
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let call = self.inner.load(scope);
        observe(self.system, "load", Some(scope), call, |s| {
            u64::from(s.is_some())
        })
        .await
    }
    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        let call = self.inner.save(scope, state, expected_version);
        observe(self.system, "save", Some(scope), call, |_| 1).await
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        let call = self.inner.delete(scope);
        observe(self.system, "delete", Some(scope), call, |d| u64::from(*d)).await
    }
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let call = self.inner.list(filter, page);
        observe(self.system, "list", None, call, |p| len(&p.items)).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let call = SessionStore::set_ttl(&self.inner, scope, ttl);
        observe(self.system, "set_ttl", Some(scope), call, |()| 1).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        let call = SessionStore::purge_expired(&self.inner);
        observe(self.system, "purge_expired", None, call, |n| *n).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let call = SessionStore::list_tenants(&self.inner, page);
        observe(self.system, "list_tenants", None, call, |p| len(&p.items)).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: VectorStore> LayeredVectors for Traced<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.inner
    }
    fn capabilities(&self) -> VectorCapabilities {
        self.inner.capabilities()
    }
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        let call = self.inner.upsert(scope, points);
        let n = len(points);
        observe(self.system, "upsert", Some(scope), call, |()| n).await
    }
    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        let call = self.inner.search(scope, query);
        observe(self.system, "search", Some(scope), call, |p| len(p)).await
    }
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        let call = self.inner.get(scope, ids);
        observe(self.system, "get", Some(scope), call, |p| len(p)).await
    }
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let call = VectorStore::delete(&self.inner, scope, ids);
        observe(self.system, "delete", Some(scope), call, |n| *n).await
    }
    async fn count(&self, scope: &Scope) -> Result<u64> {
        let call = VectorStore::count(&self.inner, scope);
        observe(self.system, "count", Some(scope), call, |n| *n).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let call = VectorStore::clear(&self.inner, scope);
        observe(self.system, "clear", Some(scope), call, |n| *n).await
    }
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let call = self.inner.delete_matching(filter);
        observe(self.system, "delete_matching", None, call, |n| *n).await
    }
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let call = self.inner.count_matching(filter);
        observe(self.system, "count_matching", None, call, |n| *n).await
    }
    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        let call = self.inner.search_matching(filter, query);
        observe(self.system, "search_matching", None, call, |h| len(h)).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: TextIndex> LayeredTextIndex for Traced<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.inner
    }
    fn capabilities(&self) -> TextCapabilities {
        self.inner.capabilities()
    }
    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        let call = self.inner.upsert(scope, documents);
        let n = len(documents);
        observe(self.system, "upsert", Some(scope), call, |()| n).await
    }
    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        let call = self.inner.search(scope, query);
        observe(self.system, "search", Some(scope), call, |d| len(d)).await
    }
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        let call = self.inner.get(scope, ids);
        observe(self.system, "get", Some(scope), call, |d| len(d)).await
    }
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let call = TextIndex::delete(&self.inner, scope, ids);
        observe(self.system, "delete", Some(scope), call, |n| *n).await
    }
    async fn count(&self, scope: &Scope) -> Result<u64> {
        let call = TextIndex::count(&self.inner, scope);
        observe(self.system, "count", Some(scope), call, |n| *n).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let call = TextIndex::clear(&self.inner, scope);
        observe(self.system, "clear", Some(scope), call, |n| *n).await
    }
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let call = TextIndex::delete_matching(&self.inner, filter);
        observe(self.system, "delete_matching", None, call, |n| *n).await
    }
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let call = TextIndex::count_matching(&self.inner, filter);
        observe(self.system, "count_matching", None, call, |n| *n).await
    }
    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &TextQuery,
    ) -> Result<Vec<ScopedHit<ScoredDocument>>> {
        let call = TextIndex::search_matching(&self.inner, filter, query);
        observe(self.system, "search_matching", None, call, |h| len(h)).await
    }
}
