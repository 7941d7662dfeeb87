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
//! was being done, never the URL's password.

use std::time::Duration;

use memory_core::{Error, ErrorKind};
use redis::{RedisError, ServerErrorKind};

/// The code of the error a script raises for stored data it cannot use (`corrupt` in
/// `prelude.lua`).
const CORRUPT: &str = "AMCORRUPT";

/// Converts a redis error, saying what was being done (`"append to thread …"`).
pub(crate) fn redis_error(what: &str, err: RedisError) -> Error {
    let kind = classify(&err);
    let message = match kind {
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
    Error::new(kind, message).with_source(err)
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
        redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
            ErrorKind::Serialization
        }
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
}

/// The error for a reply that does not have the shape a script returns.
pub(crate) fn bad_reply(what: &str, detail: impl std::fmt::Display) -> Error {
    Error::serialization(format!("{what}: unexpected reply from redis: {detail}"))
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
        assert_eq!(
            err.message(),
            "read: the stored data is corrupt: message 3 is missing"
        );
    }
}
