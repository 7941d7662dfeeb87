//! The server's typed error: what went wrong, in terms a transport maps to its own codes.

use std::fmt;

use agent_memory::ErrorKind;

/// What kind of failure an operation had; HTTP maps each to a status, MCP to a tool error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request was malformed or named an invalid id (400).
    InvalidInput,
    /// No credentials, or credentials that match no token (401).
    Unauthorized,
    /// The credentials are valid but do not allow this scope (403).
    Forbidden,
    /// The addressed item does not exist (404).
    NotFound,
    /// A concurrent writer won (409).
    Conflict,
    /// A stale version on a conditional write (412).
    PreconditionFailed,
    /// A size or count limit was exceeded (413).
    LimitExceeded,
    /// Stored or given data could not be encoded or decoded (422).
    Serialization,
    /// The store does not support the operation (501).
    Unsupported,
    /// The store cannot be reached (503).
    Unavailable,
    /// The store did not answer in time (504).
    Timeout,
    /// The store failed in another way (500).
    Backend,
}

impl ErrorCode {
    /// A short, stable name (`invalid_input`, `forbidden`, ...), the `kind` of a problem
    /// document.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PreconditionFailed => "precondition_failed",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Serialization => "serialization",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Backend => "backend",
        }
    }
}

impl From<ErrorKind> for ErrorCode {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidInput => ErrorCode::InvalidInput,
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::Conflict => ErrorCode::Conflict,
            ErrorKind::Unavailable => ErrorCode::Unavailable,
            ErrorKind::Timeout => ErrorCode::Timeout,
            ErrorKind::LimitExceeded => ErrorCode::LimitExceeded,
            ErrorKind::Serialization => ErrorCode::Serialization,
            ErrorKind::Unsupported => ErrorCode::Unsupported,
            _ => ErrorCode::Backend,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation's failure: its [`ErrorCode`] and a sentence for people (never a secret: store
/// errors are already redacted by the backends, and tokens never reach an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// What went wrong, as a sentence.
    pub detail: String,
}

impl OpError {
    /// An error of `code` with `detail`.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }

    /// An [`ErrorCode::InvalidInput`] error.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, detail)
    }

    /// An [`ErrorCode::Forbidden`] error.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, detail)
    }

    /// An [`ErrorCode::NotFound`] error.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, detail)
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl std::error::Error for OpError {}

impl From<agent_memory::Error> for OpError {
    fn from(error: agent_memory::Error) -> Self {
        Self::new(error.kind().into(), library_detail(&error))
    }
}

/// The sentence of a library error without its kind, which an [`OpError`]'s code carries (and
/// its `Display` prints once): the message, then the backend and operation that failed when
/// the error names them.
pub(crate) fn library_detail(error: &agent_memory::Error) -> String {
    match (error.backend(), error.operation()) {
        (Some(backend), Some(operation)) => {
            format!("{} ({backend} {operation})", error.message())
        }
        (Some(only), None) | (None, Some(only)) => format!("{} ({only})", error.message()),
        (None, None) => error.message().to_owned(),
    }
}

/// The result of an operation.
pub type OpResult<T> = std::result::Result<T, OpError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_error_names_its_kind_once() {
        let error = OpError::from(agent_memory::SessionId::new("a b").unwrap_err());
        assert_eq!(error.code, ErrorCode::InvalidInput);
        let text = error.to_string();
        assert!(
            text.starts_with("invalid_input: session id contains ' '"),
            "{text}"
        );
        assert_eq!(text.matches("invalid_input").count(), 1, "{text}");
        let failed = agent_memory::Error::new(ErrorKind::Unavailable, "connection refused")
            .with_backend("postgres")
            .with_operation("append");
        assert_eq!(
            OpError::from(failed).to_string(),
            "unavailable: connection refused (postgres append)"
        );
    }
}
