//! The one error type of the library, with a kind that callers match on.

use std::borrow::Cow;
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
    /// Reload and retry: temporary.
    Conflict,
    /// The backend cannot be reached (connection refused, server down). Temporary.
    Unavailable,
    /// The call did not finish in its time budget. Temporary.
    Timeout,
    /// A size or rate limit was exceeded (an oversized message, a rate-limited API). Not
    /// temporary by default: an oversized message stays too large; a backend marks a rate
    /// limit (HTTP 429) temporary with [`Error::with_temporary`].
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

    /// Whether the same call may succeed if retried later, for an error of this kind whose
    /// cause says nothing more: unavailable, timeout and conflict (reload, then retry). An
    /// [`Error`] starts from this and the backend that makes it may know better
    /// ([`Error::is_temporary`]).
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
/// It carries
/// - an [`ErrorKind`], what callers match on;
/// - a message that says what was being done and what went wrong;
/// - optionally the [`backend`](Error::backend) that failed (`"postgres"`, `"redis"`,
///   `"openai"`) and the [`operation`](Error::operation) it was doing (`"append"`, `"load"`,
///   `"search"`), set by the backend with [`with_backend`](Error::with_backend) and
///   [`with_operation`](Error::with_operation);
/// - whether retrying later may succeed ([`is_temporary`](Error::is_temporary)): by default
///   what the kind says, set by the backend from what happened (an HTTP 429 is temporary, a
///   quota that ran out is not);
/// - the underlying driver error as its [`source`](std::error::Error::source).
///
/// `Display` is one line: the kind, the backend and operation in parentheses when known, then
/// the message. Messages never contain secrets: backends redact connection strings before
/// they build an error.
///
/// ```
/// use memory_core::{Error, ErrorKind};
///
/// let err = Error::new(ErrorKind::Conflict, "session s-1 was saved by another writer");
/// assert_eq!(err.kind(), ErrorKind::Conflict);
/// assert!(err.is_temporary());
/// assert_eq!(err.to_string(), "conflict: session s-1 was saved by another writer");
///
/// let err = Error::new(ErrorKind::LimitExceeded, "429 Too Many Requests")
///     .with_backend("openai")
///     .with_operation("chat completion")
///     .with_temporary(true);
/// assert!(err.is_temporary());
/// assert_eq!(err.backend(), Some("openai"));
/// assert_eq!(
///     err.to_string(),
///     "limit_exceeded (openai chat completion): 429 Too Many Requests"
/// );
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    operation: Option<Cow<'static, str>>,
    backend: Option<Cow<'static, str>>,
    temporary: bool,
    source: Option<BoxError>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        match (&self.backend, &self.operation) {
            (Some(backend), Some(operation)) => write!(f, " ({backend} {operation})")?,
            (Some(only), None) | (None, Some(only)) => write!(f, " ({only})")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    /// Creates an error of `kind` with a message saying what failed; temporary when the kind
    /// is ([`ErrorKind::is_temporary`]).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            operation: None,
            backend: None,
            temporary: kind.is_temporary(),
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

    /// Names the operation that failed, in the words of the API (`"append"`, `"read"`,
    /// `"save"`, `"search"`).
    pub fn with_operation(mut self, operation: impl Into<Cow<'static, str>>) -> Self {
        self.operation = Some(operation.into());
        self
    }

    /// Names the backend that failed (`"sqlite"`, `"postgres"`, `"mysql"`, `"redis"`,
    /// `"qdrant"`, `"openai"`, `"mem0"`).
    pub fn with_backend(mut self, backend: impl Into<Cow<'static, str>>) -> Self {
        self.backend = Some(backend.into());
        self
    }

    /// Says whether retrying later may succeed, from what happened: a rate limit (HTTP 429)
    /// is temporary whatever its kind, a quota that ran out is not.
    pub fn with_temporary(mut self, temporary: bool) -> Self {
        self.temporary = temporary;
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
    /// not the stored one (`None`: no session). `scope` is shown as it displays.
    pub fn version_conflict(
        scope: impl fmt::Display,
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

    /// The message, without the kind, backend and operation.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The operation that failed, when the backend said.
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// The backend that failed, when it said.
    pub fn backend(&self) -> Option<&str> {
        self.backend.as_deref()
    }

    /// Whether retrying later may succeed: what the kind says
    /// ([`ErrorKind::is_temporary`]) unless the backend knew better
    /// ([`with_temporary`](Error::with_temporary)).
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// An error with the kind, operation, backend and temporariness of `other`, a new message
    /// and no source yet: for a layer that rewrites a message (to scrub a secret from it) and
    /// keeps everything else.
    pub fn new_like(other: &Error, message: impl Into<String>) -> Self {
        Self {
            kind: other.kind,
            message: message.into(),
            operation: other.operation.clone(),
            backend: other.backend.clone(),
            temporary: other.temporary,
            source: None,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error::serialization(format!("invalid JSON: {err}")).with_source(err)
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn display_names_backend_and_operation_when_known() {
        let base = || Error::new(ErrorKind::Timeout, "read thread t: no answer within 5s");
        assert_eq!(
            base().to_string(),
            "timeout: read thread t: no answer within 5s"
        );
        assert_eq!(
            base().with_backend("redis").to_string(),
            "timeout (redis): read thread t: no answer within 5s"
        );
        assert_eq!(
            base().with_operation("read").to_string(),
            "timeout (read): read thread t: no answer within 5s"
        );
        let err = base().with_operation("read").with_backend("redis");
        assert_eq!(
            err.to_string(),
            "timeout (redis read): read thread t: no answer within 5s"
        );
        assert_eq!(
            (err.backend(), err.operation()),
            (Some("redis"), Some("read"))
        );
        assert_eq!(err.message(), "read thread t: no answer within 5s");
    }

    #[test]
    fn temporary_defaults_from_the_kind_and_follows_what_happened() {
        for kind in [
            ErrorKind::Unavailable,
            ErrorKind::Timeout,
            ErrorKind::Conflict,
        ] {
            assert!(Error::new(kind, "x").is_temporary(), "{kind}");
        }
        for kind in [
            ErrorKind::InvalidInput,
            ErrorKind::NotFound,
            ErrorKind::LimitExceeded,
            ErrorKind::Serialization,
            ErrorKind::Unsupported,
            ErrorKind::Backend,
        ] {
            assert!(!Error::new(kind, "x").is_temporary(), "{kind}");
        }
        let rate_limited = Error::new(ErrorKind::LimitExceeded, "429").with_temporary(true);
        assert!(rate_limited.is_temporary());
        let gone = Error::new(ErrorKind::Unavailable, "no such file").with_temporary(false);
        assert!(!gone.is_temporary());
    }

    #[test]
    fn a_rewritten_message_keeps_the_rest() {
        let err = Error::new(ErrorKind::Unavailable, "open u:pw@h")
            .with_backend("postgres")
            .with_operation("open")
            .with_temporary(false)
            .with_source(std::io::Error::other("refused"));
        let scrubbed = Error::new_like(&err, "open u:***@h");
        assert_eq!(
            scrubbed.to_string(),
            "unavailable (postgres open): open u:***@h"
        );
        assert!(!scrubbed.is_temporary());
        assert!(scrubbed.source().is_none());
        assert!(err.source().is_some());
    }
}
