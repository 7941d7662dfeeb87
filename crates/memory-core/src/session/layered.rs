//! [`LayeredSessions`]: a session store that wraps another and changes only what it names,
//! and the forwarding impls (every layer, `Box` and `Arc`) that make wrapped stores stores.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::store::{SessionCapabilities, SessionStore, StoredSession};
use crate::error::Result;
use crate::id::TenantId;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter};

/// A layer over a [`SessionStore`]: a type that wraps an *inner* store and overrides only the
/// operations it changes. Every layer is a [`SessionStore`] (a blanket impl); each method it
/// does not override calls the inner store's method of the same name with the same arguments
/// and returns its answer unchanged. The session twin of
/// [`LayeredHistory`](crate::LayeredHistory), whose notes (use a layer through the store
/// trait; `Box<T>` is the empty layer) hold here too.
///
/// # Behavior
/// - A layer is a [`SessionStore`], so everything that trait's `# Behavior` list says holds
///   for it: a method a layer overrides keeps the contract of the [`SessionStore`] method of
///   the same name (a layer that breaks it on purpose, as a test double does, says which part
///   and why).
/// - A method a layer does not override forwards to [`inner`](LayeredSessions::inner): same
///   arguments, same answer, nothing else done; [`capabilities`](LayeredSessions::capabilities)
///   too, so a layer that changes an optional operation overrides it.
/// - A method added to [`SessionStore`] is added here with a forwarding body, and the blanket
///   impl calls it (`clippy::missing_trait_methods` is denied there): it never falls to the
///   trait's `Unsupported` default in a layer.
#[async_trait]
pub trait LayeredSessions: Send + Sync + fmt::Debug + 'static {
    /// The store this layer wraps.
    type Inner: SessionStore + ?Sized;

    /// The wrapped store: where every method this layer does not override goes.
    fn inner(&self) -> &Self::Inner;

    /// [`SessionStore::capabilities`]; forwarded unless overridden.
    fn capabilities(&self) -> SessionCapabilities {
        self.inner().capabilities()
    }

    /// [`SessionStore::load`]; forwarded unless overridden.
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        self.inner().load(scope).await
    }

    /// [`SessionStore::save`]; forwarded unless overridden.
    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        self.inner().save(scope, state, expected_version).await
    }

    /// [`SessionStore::delete`]; forwarded unless overridden.
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.inner().delete(scope).await
    }

    /// [`SessionStore::list`]; forwarded unless overridden.
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.inner().list(filter, page).await
    }

    /// [`SessionStore::set_ttl`]; forwarded unless overridden.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.inner().set_ttl(scope, ttl).await
    }

    /// [`SessionStore::purge_expired`]; forwarded unless overridden.
    async fn purge_expired(&self) -> Result<u64> {
        self.inner().purge_expired().await
    }

    /// [`SessionStore::list_tenants`]; forwarded unless overridden.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        self.inner().list_tenants(page).await
    }
}

/// Implements [`SessionStore`] for the type of `[impl … for …]` by calling, for every method,
/// the method of the same name of the trait `via` on the receiver `self => …`
/// (`clippy::missing_trait_methods` is denied on the impl).
macro_rules! forward_session_store {
    ([$($header:tt)*] via $via:ident, $s:ident => $to:expr) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        $($header)* {
            fn capabilities(&$s) -> SessionCapabilities {
                $via::capabilities($to)
            }
            async fn load(&$s, scope: &Scope) -> Result<Option<StoredSession>> {
                $via::load($to, scope).await
            }
            async fn save(
                &$s,
                scope: &Scope,
                state: &Value,
                expected_version: Option<u64>,
            ) -> Result<u64> {
                $via::save($to, scope, state, expected_version).await
            }
            async fn delete(&$s, scope: &Scope) -> Result<bool> {
                $via::delete($to, scope).await
            }
            async fn list(&$s, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
                $via::list($to, filter, page).await
            }
            async fn set_ttl(&$s, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
                $via::set_ttl($to, scope, ttl).await
            }
            async fn purge_expired(&$s) -> Result<u64> {
                $via::purge_expired($to).await
            }
            async fn list_tenants(&$s, page: PageRequest) -> Result<Page<TenantId>> {
                $via::list_tenants($to, page).await
            }
        }
    };
}

// Every layer is a store: each method calls the layer's method of the same name.
forward_session_store!(
    [impl<L: LayeredSessions> SessionStore for L] via LayeredSessions, self => self
);

// `Arc<dyn SessionStore>` is a store: each method calls the pointee's (an own impl, for the
// reasons `LayeredHistory`'s module gives).
forward_session_store!(
    [impl<T: SessionStore + ?Sized> SessionStore for Arc<T>] via SessionStore, self => &**self
);

/// `Box<T>` is the empty layer over `T` (see [`LayeredHistory`](crate::LayeredHistory)'s impl
/// for `Box` on why it is not a forwarding impl of [`SessionStore`]).
impl<T: SessionStore + ?Sized> LayeredSessions for Box<T> {
    type Inner = T;

    fn inner(&self) -> &T {
        self
    }
}
