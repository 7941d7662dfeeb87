//! [`FaultyHistoryStore`]: a history layer that fails its next archives.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::{Error, ErrorKind, HistoryStore, Result, Scope};

/// A [`HistoryStore`] that forwards to another and fails its next `archive` calls (as many as
/// set) with [`ErrorKind::Unavailable`], archiving nothing.
#[derive(Debug)]
pub struct FaultyHistoryStore {
    inner: Arc<dyn HistoryStore>,
    failing_archives: AtomicUsize,
}

impl FaultyHistoryStore {
    /// Forwards to `inner`; fails the next `archives` archive calls.
    pub fn failing_archive(inner: Arc<dyn HistoryStore>, archives: usize) -> Self {
        Self {
            inner,
            failing_archives: AtomicUsize::new(archives),
        }
    }
}

#[async_trait]
impl memory_core::LayeredHistory for FaultyHistoryStore {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.inner
    }
    async fn archive(&self, scope: &Scope, seqs: std::ops::RangeInclusive<u64>) -> Result<u64> {
        if self
            .failing_archives
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the test store failed an archive on purpose",
            ));
        }
        self.inner.archive(scope, seqs).await
    }
}
