//! [`CountingHistoryStore`]: a history layer that counts appends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::{AppendOutcome, ChatMessage, HistoryStore, Result, Scope};

/// A [`HistoryStore`] that forwards to another and counts the `append` calls.
#[derive(Debug)]
pub struct CountingHistoryStore {
    inner: Arc<dyn HistoryStore>,
    appends: AtomicUsize,
}

impl CountingHistoryStore {
    /// Forwards to `inner`.
    pub fn new(inner: Arc<dyn HistoryStore>) -> Self {
        Self {
            inner,
            appends: AtomicUsize::new(0),
        }
    }

    /// How many `append` calls it forwarded.
    pub fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl memory_core::LayeredHistory for CountingHistoryStore {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.inner
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(scope, messages).await
    }
}
