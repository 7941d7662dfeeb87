//! Mapping of tantivy errors into [`memory_core::Error`].

use memory_core::{Error, ErrorKind};

/// An error of `kind` saying what `action` was doing, with tantivy's error as source; it names
/// the `tantivy` backend and `action` as its operation.
pub(crate) fn backend(
    kind: ErrorKind,
    action: impl Into<std::borrow::Cow<'static, str>>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
) -> Error {
    let action = action.into();
    Error::new(kind, format!("tantivy: {action} failed"))
        .with_backend("tantivy")
        .with_operation(action)
        .with_source(source)
}

/// A blocking task that did not finish (it panicked or was cancelled).
pub(crate) fn join(action: &str, err: tokio::task::JoinError) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("tantivy: {action}: the blocking task did not finish"),
    )
    .with_backend("tantivy")
    .with_source(err)
}
