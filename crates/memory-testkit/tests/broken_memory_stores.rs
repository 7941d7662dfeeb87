//! The memory suite catches broken stores: each store here wraps an in-memory store and breaks
//! one line of its contract that the features built on it rely on, and the memory checks that
//! depend on that line must fail. (The honest in-memory stores pass every memory check:
//! tests/in_memory.rs.)
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::ops::RangeInclusive;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use memory_core::{
    AppendOutcome, ChatMessage, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, Result,
    Scope, SessionStore, Window,
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
impl memory_core::LayeredSessions for BrokenSessions {
    type Inner = InMemorySessionStore;
    fn inner(&self) -> &InMemorySessionStore {
        &self.inner
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
impl memory_core::LayeredHistory for ArchiveDoesNothing {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.0
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let active = self.0.read(scope, Window::All).await?;
        Ok(active.iter().filter(|m| seqs.contains(&m.seq)).count() as u64)
    }
}

/// A history store that stores each batch but its last message (and acknowledges the whole
/// batch).
#[derive(Debug, Default)]
struct DropsLastOfBatch(InMemoryHistoryStore);

#[memory_core::async_trait]
impl memory_core::LayeredHistory for DropsLastOfBatch {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.0
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let kept = &messages[..messages.len().saturating_sub(1)];
        self.0.append(scope, kept).await
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
