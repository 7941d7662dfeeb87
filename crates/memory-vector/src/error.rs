//! Mapping of driver errors into [`memory_core::Error`].

use memory_core::{Error, ErrorKind};

#[cfg(any(feature = "qdrant", feature = "qdrant-edge"))]
/// An error of `kind` saying what `action` was doing, with the driver's error as source; it
/// names `backend` (`"qdrant"`, `"qdrant-edge"`) and `action` as its operation, and is
/// temporary as its kind says.
pub(crate) fn backend(
    backend: &'static str,
    kind: ErrorKind,
    action: impl Into<std::borrow::Cow<'static, str>>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
) -> Error {
    let action = action.into();
    Error::new(kind, format!("qdrant: {action} failed"))
        .with_backend(backend)
        .with_operation(action)
        .with_source(source)
}

/// A blocking task that did not finish (it panicked or was cancelled).
#[cfg(any(feature = "qdrant-edge", feature = "candle"))]
pub(crate) fn join(action: &str, err: tokio::task::JoinError) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("{action}: the blocking task did not finish"),
    )
    .with_source(err)
}
