//! Maps redis errors to the core [`ErrorKind`]s.
//!
//! | redis error | kind |
//! | --- | --- |
//! | I/O: connection refused, reset or dropped; no connection to a cluster node; `CLUSTERDOWN`, `MASTERDOWN`, `TRYAGAIN`, `LOADING` (a server restarting) | `Unavailable` |
//! | an I/O timeout, or a call over its time budget | `Timeout` |
//! | a reply of an unexpected shape, a stored value that does not decode, a script's `AMCORRUPT` error (stored data it cannot use) | `Serialization` |
//! | a bad URL or client option, `rediss://` without the `tls` feature | `InvalidInput` |
//! | anything else (authentication, permissions, out of memory, a script error) | `Backend` |
//!
//! The redis error is kept as the [`source`](std::error::Error::source); messages name what
//! was being done, never the URL's password. Every error names the backend `redis`; the
//! trait methods add their operation ([`During`]). An error is temporary when what happened
//! may pass: a timeout, a connection refused, reset or dropped, a cluster or server that is
//! restarting or failing over (`TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`,
//! `READONLY`), a server out of memory (`OOM`) or busy with a script (`BUSY`).

use std::time::Duration;

use memory_core::{Error, ErrorKind, Result};
use redis::{RedisError, ServerErrorKind};

/// The backend name every error of this crate carries.
pub(crate) const BACKEND: &str = "redis";

/// Names the operation of a trait method (`"append"`, `"load"`) and the backend on the
/// errors of a call.
pub(crate) trait During<T> {
    /// The result, its error naming `operation` and this backend.
    fn during(self, operation: &'static str) -> Result<T>;
}

impl<T> During<T> for Result<T> {
    fn during(self, operation: &'static str) -> Result<T> {
        self.map_err(|err| err.with_backend(BACKEND).with_operation(operation))
    }
}

/// The code of the error a script raises for stored data it cannot use (`corrupt` in
/// `prelude.lua`).
const CORRUPT: &str = "AMCORRUPT";

/// Converts a redis error, saying what was being done (`"append to thread …"`).
pub(crate) fn redis_error(what: &str, err: RedisError) -> Error {
    let kind = classify(&err);
    let message = match kind {
        ErrorKind::Unavailable if err.kind() == redis::ErrorKind::Parse => {
            format!("{what}: the connection broke inside redis's reply")
        }
        ErrorKind::Unavailable => format!("{what}: redis is unavailable ({})", err.category()),
        ErrorKind::Timeout => format!("{what}: redis did not answer in time"),
        ErrorKind::Serialization if err.code() == Some(CORRUPT) => {
            // The detail is the script's own text, then " script: <sha>, on @user_script:…".
            let detail = err.detail().unwrap_or_default();
            let detail = detail.split(" script: ").next().unwrap_or(detail);
            format!("{what}: the stored data is corrupt: {detail}")
        }
        ErrorKind::Serialization => format!("{what}: unexpected reply from redis"),
        _ => format!("{what}: redis {}", err.category()),
    };
    let temporary = is_temporary(&err, kind);
    Error::new(kind, message)
        .with_backend(BACKEND)
        .with_temporary(temporary)
        .with_source(err)
}

/// Whether the call may succeed later, from what happened (see the module docs).
fn is_temporary(err: &RedisError, kind: ErrorKind) -> bool {
    if err.is_timeout() {
        return true;
    }
    if err.is_io_error() {
        // The client's own reading of the I/O error: a permission or an unsupported
        // operation is permanent; a refused, reset or dropped connection is not.
        return !matches!(err.retry_method(), redis::RetryMethod::NoRetry);
    }
    match err.kind() {
        redis::ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        ) => true,
        redis::ErrorKind::Extension if matches!(err.code(), Some("OOM" | "BUSY")) => true,
        _ => kind.is_temporary(),
    }
}

fn classify(err: &RedisError) -> ErrorKind {
    if err.code() == Some(CORRUPT) {
        return ErrorKind::Serialization;
    }
    if err.is_timeout() {
        return ErrorKind::Timeout;
    }
    if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        return ErrorKind::Unavailable;
    }
    match err.kind() {
        redis::ErrorKind::ClusterConnectionNotFound
        | redis::ErrorKind::Server(
            ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::TryAgain
            | ServerErrorKind::BusyLoading,
        ) => ErrorKind::Unavailable,
        // A reply the protocol parser cannot read is a broken connection (a server never
        // sends malformed RESP; a connection cut inside a reply does): the request may or may
        // not have run, and a retry on a new connection can succeed.
        redis::ErrorKind::Parse => ErrorKind::Unavailable,
        redis::ErrorKind::UnexpectedReturnType => ErrorKind::Serialization,
        redis::ErrorKind::InvalidClientConfig => ErrorKind::InvalidInput,
        _ => ErrorKind::Backend,
    }
}

/// The error of a call that did not finish within its budget.
pub(crate) fn timed_out(what: &str, budget: Duration) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!("{what}: redis did not answer within {budget:?}"),
    )
    .with_backend(BACKEND)
}

/// The error for a reply that does not have the shape a script returns.
pub(crate) fn bad_reply(what: &str, detail: impl std::fmt::Display) -> Error {
    Error::serialization(format!("{what}: unexpected reply from redis: {detail}"))
        .with_backend(BACKEND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(redis_error("x", io).kind(), ErrorKind::Unavailable);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(redis_error("x", timeout).kind(), ErrorKind::Timeout);
        let cut = RedisError::from((redis::ErrorKind::Parse, "Unexpected end of input"));
        let cut = redis_error("x", cut);
        assert_eq!(cut.kind(), ErrorKind::Unavailable);
        assert!(cut.is_temporary());
        let config = RedisError::from((redis::ErrorKind::InvalidClientConfig, "bad"));
        assert_eq!(redis_error("x", config).kind(), ErrorKind::InvalidInput);
        let shape = RedisError::from((redis::ErrorKind::UnexpectedReturnType, "bad"));
        assert_eq!(redis_error("x", shape).kind(), ErrorKind::Serialization);
        let auth = RedisError::from((redis::ErrorKind::AuthenticationFailed, "no"));
        assert_eq!(redis_error("x", auth).kind(), ErrorKind::Backend);
        let corrupt = redis::make_extension_error(
            CORRUPT.to_owned(),
            Some("message 3 is missing script: abc, on @user_script:1.".to_owned()),
        );
        let err = redis_error("read", corrupt);
        assert_eq!(err.kind(), ErrorKind::Serialization);
        assert!(!err.is_temporary());
        assert_eq!(err.backend(), Some(BACKEND));
        assert_eq!(
            err.message(),
            "read: the stored data is corrupt: message 3 is missing"
        );
    }

    #[test]
    fn temporariness_follows_the_cause() {
        let io = |kind| redis_error("x", RedisError::from(std::io::Error::from(kind)));
        assert!(io(std::io::ErrorKind::ConnectionRefused).is_temporary());
        assert!(io(std::io::ErrorKind::ConnectionReset).is_temporary());
        assert!(io(std::io::ErrorKind::TimedOut).is_temporary());
        let denied = io(std::io::ErrorKind::PermissionDenied);
        assert_eq!(denied.kind(), ErrorKind::Unavailable);
        assert!(!denied.is_temporary());
        let server = |code: &str| {
            redis_error(
                "x",
                redis::make_extension_error(code.to_owned(), Some("detail".to_owned())),
            )
        };
        let oom = server("OOM");
        assert_eq!(oom.kind(), ErrorKind::Backend);
        assert!(oom.is_temporary());
        assert!(server("BUSY").is_temporary());
        assert!(!server("WRONGTYPE").is_temporary());
        let auth = RedisError::from((redis::ErrorKind::AuthenticationFailed, "no"));
        assert!(!redis_error("x", auth).is_temporary());
        let timeout = timed_out("read", Duration::from_millis(5));
        assert!(timeout.is_temporary());
        assert_eq!(
            Err::<(), _>(timeout)
                .during("read")
                .unwrap_err()
                .to_string(),
            "timeout (redis read): read: redis did not answer within 5ms"
        );
    }
}
