//! Opening stores from a URL, one match arm per enabled backend.

use std::fmt;
use std::sync::Arc;

use memory_core::{
    Error, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, Result, SessionStore,
};

/// The URL [`open_default`] opens: the embedded default backend of this build.
pub const DEFAULT_URL: &str = "memory:";

/// A history store and a session store on one backend.
#[derive(Clone)]
pub struct Stores {
    /// Where conversation threads live.
    pub history: Arc<dyn HistoryStore>,
    /// Where session states live.
    pub sessions: Arc<dyn SessionStore>,
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("history", &self.history)
            .field("sessions", &self.sessions)
            .finish()
    }
}

/// Opens the stores of the backend `url` names.
///
/// The scheme picks the backend; each backend is compiled in only with its cargo feature, and a
/// URL whose backend is not in this build is an error naming the feature to enable. The error
/// never repeats the URL, which may hold a password.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an unknown scheme or a
/// backend whose feature is off; the backend's own errors when it cannot connect.
pub async fn open(url: &str) -> Result<Stores> {
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or(url);
    match scheme {
        "memory" => Ok(Stores {
            history: Arc::new(InMemoryHistoryStore::new()),
            sessions: Arc::new(InMemorySessionStore::new()),
        }),
        "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb" | "redis" | "rediss"
        | "redis+cluster" => Err(Error::invalid_input(format!(
            "the {scheme:?} backend is not in this build of agent-memory; enable its cargo feature"
        ))),
        _ => Err(Error::invalid_input(format!(
            "no agent-memory backend handles URLs with the scheme {scheme:?}"
        ))),
    }
}

/// Opens the default backend ([`DEFAULT_URL`]).
///
/// # Errors
/// As [`open`].
pub async fn open_default() -> Result<Stores> {
    open(DEFAULT_URL).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[tokio::test]
    async fn unknown_and_disabled_schemes_are_clear_errors() {
        let err = open("ftp://x").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = open("postgres://user:hunter2@db/app").await.unwrap_err();
        assert!(err.to_string().contains("feature"));
        assert!(!err.to_string().contains("hunter2"), "the password leaked");
    }

    #[tokio::test]
    async fn memory_opens() {
        let stores = open_default().await.unwrap();
        assert!(stores.history.capabilities().ttl);
    }
}
