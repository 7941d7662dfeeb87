//! The memory suite catches broken stores: each store here wraps an in-memory store and breaks
//! one line of its contract that the features built on it rely on, and the memory checks that
//! depend on that line must fail. (The honest in-memory stores pass every memory check:
//! tests/in_memory.rs.)
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::ops::RangeInclusive;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    AppendOutcome, ChatMessage, HistoryCapabilities, HistoryStore, InMemoryHistoryStore,
    InMemorySessionStore, Page, PageRequest, Result, Scope, ScopeFilter, SessionCapabilities,
    SessionStore, StoredMessage, StoredSession, ThreadCount, Window,
};
use memory_testkit::__private::block_on;
use memory_testkit::memory;
use serde_json::Value;

/// How a session store breaks the optimistic-concurrency contract.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SessionFlaw {
    /// Acknowledges an update (a save with an expected version) with the next version, and
    /// writes nothing: only the first save of a session lands.
    DropsUpdates,
    /// Ignores the expected version: the last write wins, never `Conflict`.
    NeverConflicts,
}

#[derive(Debug)]
struct BrokenSessions {
    inner: InMemorySessionStore,
    flaw: SessionFlaw,
}

#[memory_core::async_trait]
impl SessionStore for BrokenSessions {
    fn capabilities(&self) -> SessionCapabilities {
        self.inner.capabilities()
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        self.inner.load(scope).await
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        match (self.flaw, expected) {
            (SessionFlaw::DropsUpdates, Some(version)) => Ok(version + 1),
            (SessionFlaw::NeverConflicts, _) => {
                let current = self.inner.load(scope).await?.map(|s| s.version);
                self.inner.save(scope, state, current).await
            }
            _ => self.inner.save(scope, state, expected).await,
        }
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.inner.delete(scope).await
    }
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.inner.list(filter, page).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.inner.set_ttl(scope, ttl).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        self.inner.purge_expired().await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<memory_core::TenantId>> {
        self.inner.list_tenants(page).await
    }
}

fn broken_sessions(flaw: SessionFlaw) -> Arc<dyn SessionStore> {
    Arc::new(BrokenSessions {
        inner: InMemorySessionStore::new(),
        flaw,
    })
}

/// A history store whose `archive` answers how many messages it would archive, and archives
/// nothing.
#[derive(Debug, Default)]
struct ArchiveDoesNothing(InMemoryHistoryStore);

#[memory_core::async_trait]
impl HistoryStore for ArchiveDoesNothing {
    fn capabilities(&self) -> HistoryCapabilities {
        self.0.capabilities()
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.0.append(scope, messages).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.0.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.0.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.0.list_threads(filter, page).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let active = self.0.read(scope, Window::All).await?;
        Ok(active.iter().filter(|m| seqs.contains(&m.seq)).count() as u64)
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<memory_core::ThreadCursor>,
    ) -> Result<memory_core::CursorRead> {
        self.0.read_since(scope, window, since).await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.0.read_page(scope, after, limit).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<memory_core::TenantId>> {
        self.0.list_tenants(page).await
    }
}

/// A history store that stores each batch but its last message (and acknowledges the whole
/// batch).
#[derive(Debug, Default)]
struct DropsLastOfBatch(InMemoryHistoryStore);

#[memory_core::async_trait]
impl HistoryStore for DropsLastOfBatch {
    fn capabilities(&self) -> HistoryCapabilities {
        self.0.capabilities()
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let kept = &messages[..messages.len().saturating_sub(1)];
        self.0.append(scope, kept).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.0.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.0.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.0.list_threads(filter, page).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.0.archive(scope, seqs).await
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<memory_core::ThreadCursor>,
    ) -> Result<memory_core::CursorRead> {
        self.0.read_since(scope, window, since).await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.0.read_page(scope, after, limit).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<memory_core::TenantId>> {
        self.0.list_tenants(page).await
    }
}

fn honest_history() -> Arc<dyn HistoryStore> {
    Arc::new(InMemoryHistoryStore::new())
}

fn honest_sessions() -> Arc<dyn SessionStore> {
    Arc::new(InMemorySessionStore::new())
}

/// Whether the memory check `$check` fails (panics) on the stores.
macro_rules! fails {
    ($check:ident, $history:expr, $sessions:expr) => {{
        let (history, sessions) = ($history, $sessions);
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            block_on(memory::$check(history, sessions))
        }))
        .is_err()
    }};
}

#[test]
fn a_session_store_that_drops_updates_loses_block_deliveries() {
    let drops = || broken_sessions(SessionFlaw::DropsUpdates);
    assert!(
        fails!(
            memory_crash_before_watermark_save_delivers_once,
            honest_history(),
            drops()
        ),
        "the exactly-once check must fail when the block states' updates are dropped"
    );
    assert!(
        fails!(memory_flushes_into_every_block, honest_history(), drops()),
        "the flush check must fail when the block states' updates are dropped"
    );
}

#[test]
fn a_session_store_without_conflicts_lets_concurrent_flushes_deliver_twice() {
    assert!(
        fails!(
            memory_concurrent_flushes_deliver_once,
            honest_history(),
            broken_sessions(SessionFlaw::NeverConflicts)
        ),
        "the concurrent-flush check must fail when stale saves are accepted"
    );
}

#[test]
fn a_history_store_that_does_not_archive_fails_the_flush_and_reducer_checks() {
    let history = || -> Arc<dyn HistoryStore> { Arc::new(ArchiveDoesNothing::default()) };
    assert!(
        fails!(
            memory_flushes_into_every_block,
            history(),
            honest_sessions()
        ),
        "a flush whose archive is lost must be caught"
    );
    assert!(
        fails!(
            reducers_after_message_added_archive_on_the_store,
            history(),
            honest_sessions()
        ),
        "a reducer whose archive is lost must be caught"
    );
}

#[test]
fn a_history_store_that_drops_the_last_message_of_a_batch_fails_the_tool_loop_check() {
    assert!(
        fails!(
            agent_tool_loop_stores_whole_groups,
            Arc::new(DropsLastOfBatch::default()),
            honest_sessions()
        ),
        "a turn stored without its final answer must be caught"
    );
}
