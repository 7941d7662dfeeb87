//! [`OnError`]: what the provider and the block do when Mem0 fails.

use memory_core::{Error, Result};

/// What happens to a run when a Mem0 request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnError {
    /// The run goes on: without recalled memories when a search fails, and, for
    /// [`Mem0Provider`](crate::Mem0Provider), without remembering the turn when an add fails. A
    /// `tracing` warning names the failure. The default: memory is an aid, and a Mem0 outage
    /// should not take the agent down with it. A [`Mem0MemoryBlock`](crate::Mem0MemoryBlock)'s
    /// add never degrades: it fails the flush, and the batch is sent again later.
    #[default]
    Degrade,
    /// The run fails with the Mem0 error.
    Fail,
}

impl OnError {
    /// `Ok(None)` after tracing a warning when degrading; the error when failing.
    pub(crate) fn handle<T>(self, error: Error, source: &str, doing: &str) -> Result<Option<T>> {
        match self {
            OnError::Fail => Err(error),
            OnError::Degrade => {
                tracing::warn!(
                    source,
                    kind = error.kind().as_str(),
                    %error,
                    "Mem0 {doing} failed; the run goes on without it"
                );
                Ok(None)
            }
        }
    }
}
