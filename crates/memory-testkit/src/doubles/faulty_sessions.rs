//! [`FaultySessionStore`]: a session layer that fails chosen saves and holds its first load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::{Error, ErrorKind, Result, Scope, SessionStore, StoredSession};
use serde_json::Value;
use tokio::sync::Barrier;

/// A [`SessionStore`] that forwards to another and fails chosen calls: the `n`th `save` from
/// its creation (with [`ErrorKind::Unavailable`], writing nothing), and optionally holds its
/// first `load` at a barrier (so two processes load the same version before either saves). It
/// counts the `Conflict` answers of the inner store's `save`.
#[derive(Debug)]
pub struct FaultySessionStore {
    inner: Arc<dyn SessionStore>,
    fail_save: Option<usize>,
    saves: AtomicUsize,
    gate: Option<Arc<Barrier>>,
    gated: AtomicBool,
    conflicts: AtomicUsize,
}

impl FaultySessionStore {
    /// Forwards everything to `inner`.
    pub fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            fail_save: None,
            saves: AtomicUsize::new(0),
            gate: None,
            gated: AtomicBool::new(false),
            conflicts: AtomicUsize::new(0),
        }
    }

    /// Fails the `n`th `save` (1-based) with `Unavailable`, without writing.
    pub fn failing_save(mut self, n: usize) -> Self {
        self.fail_save = Some(n);
        self
    }

    /// Waits at `barrier` after the first `load`.
    pub fn gated_first_load(mut self, barrier: Arc<Barrier>) -> Self {
        self.gate = Some(barrier);
        self
    }

    /// How many `save`s the inner store answered with `Conflict`.
    pub fn conflicts(&self) -> usize {
        self.conflicts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl memory_core::LayeredSessions for FaultySessionStore {
    type Inner = dyn SessionStore;
    fn inner(&self) -> &dyn SessionStore {
        &*self.inner
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let loaded = self.inner.load(scope).await;
        if let Some(gate) = &self.gate
            && !self.gated.swap(true, Ordering::SeqCst)
        {
            gate.wait().await;
        }
        loaded
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        let n = self.saves.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_save == Some(n) {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("the test store failed save number {n} on purpose"),
            ));
        }
        let saved = self.inner.save(scope, state, expected).await;
        if saved
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::Conflict)
        {
            self.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        saved
    }
}
