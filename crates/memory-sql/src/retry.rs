//! Retrying a transaction that lost a race the database reported (a deadlock, a serialization
//! failure, a unique race): backon's exponential backoff, with jitter so that racing writers do
//! not collide again in step.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use memory_core::{Error, Result};

use crate::error::{Context, is_retryable};

/// How many times an operation that lost a race is retried before it reports `Conflict`.
pub(crate) const MAX_RETRIES: usize = 8;

/// The pauses between retries: 2, 4, 8 … ms, capped at 100 ms, each plus a random jitter of up
/// to its own length; at most [`MAX_RETRIES`] of them (callers may change the limits).
pub(crate) fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(100))
        .with_jitter()
        .with_max_times(MAX_RETRIES)
}

/// Runs `op` again while it loses races the database reports ([`is_retryable`]), with
/// [`backoff`]'s pauses; after the last retry, a lost race is a `Conflict` saying so.
pub(crate) async fn with_retries<T, F, Fut>(ctx: Context<'_>, op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    op.retry(backoff())
        .when(is_retryable)
        .notify(|err, pause| {
            tracing::debug!(%err, ?pause, "memory-sql: retrying after a lost race");
        })
        .await
        .map_err(|err| {
            if is_retryable(&err) {
                retries_exhausted(ctx, err)
            } else {
                err
            }
        })
}

/// The error for an operation that lost every retry.
fn retries_exhausted(ctx: Context<'_>, last: Error) -> Error {
    Error::conflict(format!(
        "{ctx}: still conflicting after {MAX_RETRIES} retries; try again"
    ))
    .with_source(last)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use memory_core::ErrorKind;

    use super::*;
    use crate::error::sql_error;

    /// A database error that reports a lost race (PostgreSQL's serialization failure).
    #[derive(Debug)]
    struct LostRace;

    impl std::fmt::Display for LostRace {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("could not serialize access due to concurrent update")
        }
    }

    impl std::error::Error for LostRace {}

    impl sqlx::error::DatabaseError for LostRace {
        fn message(&self) -> &str {
            "could not serialize access due to concurrent update"
        }

        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some("40001".into())
        }

        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }

        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn lost_race() -> Error {
        sql_error("append", sqlx::Error::Database(Box::new(LostRace)))
    }

    #[tokio::test]
    async fn a_lost_race_is_retried_until_it_succeeds() {
        let calls = AtomicUsize::new(0);
        let result = with_retries("append", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(lost_race())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn every_race_lost_is_a_conflict_after_the_last_retry() {
        let calls = AtomicUsize::new(0);
        let err = with_retries("append", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(lost_race())
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), MAX_RETRIES + 1);
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert!(
            err.to_string()
                .contains("still conflicting after 8 retries"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn other_errors_are_not_retried() {
        let calls = AtomicUsize::new(0);
        let err = with_retries("append", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(sql_error("append", sqlx::Error::PoolClosed))
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(err.kind(), ErrorKind::Unavailable);
    }
}
