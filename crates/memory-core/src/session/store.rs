//! The [`SessionStore`] trait.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter};

/// A saved session state and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// The state, as saved.
    pub state: Value,
    /// The version: 1 after the first save, one more after each save.
    pub version: u64,
}

/// What a session store can do beyond the required behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SessionCapabilities {
    /// Sessions can expire ([`SessionStore::set_ttl`]).
    pub ttl: bool,
}

impl SessionCapabilities {
    /// Capabilities with the given TTL support.
    pub fn new(ttl: bool) -> Self {
        Self { ttl }
    }
}

/// Keeps session states (any JSON document, usually [`AgentSession::serialize`]'s output)
/// under a [`Scope`], with optimistic concurrency.
///
/// [`AgentSession::serialize`]: crate::AgentSession::serialize
///
/// # Behavior
/// - [`save`](SessionStore::save) with `expected_version: None` creates the session and fails
///   with [`Conflict`](crate::ErrorKind::Conflict) if it exists; with `Some(v)` it replaces the
///   state only if the stored version is `v`, else fails with `Conflict` and changes nothing (a
///   stale writer never overwrites silently; a missing session is a `Conflict` too). It returns
///   the new version: 1 on creation, then `v + 1`.
/// - [`load`](SessionStore::load) returns the state exactly as saved and its version, or `None`.
/// - [`delete`](SessionStore::delete) removes it; returns whether it existed.
/// - [`list`](SessionStore::list) pages through the scopes holding a session that match the
///   filter, each once, in a stable order.
/// - [`set_ttl`](SessionStore::set_ttl) makes the session expire `ttl` after the later of the
///   `set_ttl` call and its last save (each save restarts the clock);
///   `None` removes the expiry; a TTL under 1 ms or over [`MAX_TTL`](crate::MAX_TTL) is
///   [`InvalidInput`](crate::ErrorKind::InvalidInput); an unknown session is
///   [`NotFound`](crate::ErrorKind::NotFound).
///   An expired session loads as `None`, is not listed, and can be created again.
///   [`purge_expired`](SessionStore::purge_expired) deletes expired sessions now. Stores without
///   TTL support return [`Unsupported`](crate::ErrorKind::Unsupported).
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug + 'static {
    /// What this store supports.
    fn capabilities(&self) -> SessionCapabilities;

    /// Loads the session at `scope`.
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>>;

    /// Saves `state` if the stored version is `expected_version`; returns the new version.
    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64>;

    /// Deletes the session; returns whether it existed.
    async fn delete(&self, scope: &Scope) -> Result<bool>;

    /// Lists the sessions matching `filter`, a page at a time.
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>>;

    /// Sets or removes the session's time to live.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()>;

    /// Deletes expired sessions now; returns how many it removed.
    async fn purge_expired(&self) -> Result<u64>;
}

/// Forwards the trait through smart pointers, so `Arc<dyn SessionStore>` and `Box<dyn SessionStore>`
/// are stores too.
macro_rules! forward_session_store {
    ($($pointer:ident),*) => {$(
        #[async_trait]
        impl<T: SessionStore + ?Sized> SessionStore for $pointer<T> {
            fn capabilities(&self) -> SessionCapabilities {
                (**self).capabilities()
            }
            async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
                (**self).load(scope).await
            }
            async fn save(
                &self,
                scope: &Scope,
                state: &Value,
                expected_version: Option<u64>,
            ) -> Result<u64> {
                (**self).save(scope, state, expected_version).await
            }
            async fn delete(&self, scope: &Scope) -> Result<bool> {
                (**self).delete(scope).await
            }
            async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
                (**self).list(filter, page).await
            }
            async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
                (**self).set_ttl(scope, ttl).await
            }
            async fn purge_expired(&self) -> Result<u64> {
                (**self).purge_expired().await
            }
        }
    )*};
}

forward_session_store!(Arc, Box);
