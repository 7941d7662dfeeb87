//! The one error type of the library, with a kind that callers match on.

use std::fmt;

/// What went wrong, in the terms a caller can act on.
///
/// The enum is `#[non_exhaustive]`: match it with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller gave something invalid: a malformed id, an empty batch where one is needed,
    /// a vector of the wrong dimension. Retrying the same call fails the same way.
    InvalidInput,
    /// The addressed item does not exist.
    NotFound,
    /// A concurrent writer won: a stale version on save, a session that already has history.
    /// Reload and retry.
    Conflict,
    /// The backend cannot be reached (connection refused, server down). Temporary.
    Unavailable,
    /// The call did not finish in its time budget. Temporary.
    Timeout,
    /// A size or rate limit was exceeded (an oversized message, a rate-limited API).
    LimitExceeded,
    /// Stored or given data could not be encoded or decoded (malformed JSON, an unknown format
    /// version).
    Serialization,
    /// The backend does not support this operation (see its capabilities).
    Unsupported,
    /// The backend failed in a way that fits no other kind.
    Backend,
}

impl ErrorKind {
    /// A short, stable name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Timeout => "timeout",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::Serialization => "serialization",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Backend => "backend",
        }
    }

    /// Whether the same call may succeed if retried later.
    pub fn is_temporary(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::Timeout | ErrorKind::Conflict
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The error every fallible call of the library returns.
///
/// It carries a [`ErrorKind`], a message that says what was being done, and the underlying
/// driver error as its [`source`](std::error::Error::source). Messages never contain secrets:
/// backends redact connection strings before they build an error.
///
/// ```
/// use memory_core::{Error, ErrorKind};
///
/// let err = Error::new(ErrorKind::Conflict, "session s-1 was saved by another writer");
/// assert_eq!(err.kind(), ErrorKind::Conflict);
/// assert!(err.is_temporary());
/// assert_eq!(err.to_string(), "conflict: session s-1 was saved by another writer");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
    #[source]
    source: Option<BoxError>,
}

impl Error {
    /// Creates an error of `kind` with a message saying what failed.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the underlying cause.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Shorthand for an [`ErrorKind::InvalidInput`] error.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    /// Shorthand for an [`ErrorKind::Serialization`] error.
    pub fn serialization(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Serialization, message)
    }

    /// Shorthand for an [`ErrorKind::Conflict`] error.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// The [`ErrorKind::Conflict`] a session store returns when a save's expected version is
    /// not the stored one (`None`: no session).
    pub fn version_conflict(
        scope: &crate::Scope,
        found: Option<u64>,
        expected: Option<u64>,
    ) -> Self {
        let show = |v: Option<u64>| v.map_or("none".to_owned(), |v| v.to_string());
        Error::conflict(format!(
            "session {scope} is at version {}, the save expected {}",
            show(found),
            show(expected)
        ))
    }

    /// Shorthand for an [`ErrorKind::NotFound`] error.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Shorthand for an [`ErrorKind::Unsupported`] error.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether retrying later may succeed.
    pub fn is_temporary(&self) -> bool {
        self.kind.is_temporary()
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error::serialization(format!("invalid JSON: {err}")).with_source(err)
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
