//! [`LayeredHistory`]: a history store that wraps another and changes only what it names, and
//! the forwarding impls (every layer, `Box` and `Arc`) that make wrapped stores stores.

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{
    AppendOutcome, CursorRead, HistoryCapabilities, HistoryStore, Page, PageRequest, Scope,
    ScopeFilter, StoredMessage, TenantId, ThreadCount, ThreadCursor, Window,
};
use crate::error::Result;
use crate::message::ChatMessage;

/// A layer over a [`HistoryStore`]: a type that wraps an *inner* store and overrides only the
/// operations it changes (a cache, tracing, a fault injected by a test). Every layer is a
/// [`HistoryStore`] (a blanket impl); each method it does not override calls the inner store's
/// method of the same name with the same arguments and returns its answer unchanged. This is
/// opendal's `LayeredAccess` for the history trait.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use memory_core::{
///     async_trait, AppendOutcome, ChatMessage, HistoryStore, InMemoryHistoryStore, Result, Scope,
/// };
///
/// /// Counts appends; everything else is the inner store's.
/// #[derive(Debug, Default)]
/// struct CountAppends {
///     inner: InMemoryHistoryStore,
///     appends: AtomicU64,
/// }
///
/// #[async_trait]
/// impl memory_core::LayeredHistory for CountAppends {
///     type Inner = InMemoryHistoryStore;
///     fn inner(&self) -> &InMemoryHistoryStore {
///         &self.inner
///     }
///     async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
///         self.appends.fetch_add(1, Ordering::Relaxed);
///         self.inner.append(scope, messages).await
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = CountAppends::default();
/// let history: &dyn HistoryStore = &store;
/// let scope = Scope::session("s1")?;
/// history.append(&scope, &[ChatMessage::user("hi")]).await?;
/// assert_eq!(history.count(&scope).await?.active, 1);
/// assert_eq!(store.appends.load(Ordering::Relaxed), 1);
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
///
/// A layer is used through [`HistoryStore`]. Where both traits are in scope, a method call on
/// a layer names two methods (`append` of each) and Rust asks which; so implement the trait by
/// its path (`impl memory_core::LayeredHistory for MyLayer`) without importing it, or write
/// `HistoryStore::append(&layer, …)` where it is imported.
///
/// `Box<T>` is the empty layer over `T` (it overrides nothing), so `Box<dyn HistoryStore>` is a
/// store; `Arc<T>` has its own forwarding impl of [`HistoryStore`], so `Arc<dyn HistoryStore>`
/// is one too.
///
/// # Behavior
/// - A layer is a [`HistoryStore`], so everything that trait's `# Behavior` list says holds
///   for it: a method a layer overrides keeps the contract of the [`HistoryStore`] method of
///   the same name (a layer that fails a call on purpose, as a test double does, documents
///   which contract it breaks and why).
/// - A method a layer does not override forwards to [`inner`](LayeredHistory::inner): same
///   arguments, same answer, nothing else done. [`capabilities`](LayeredHistory::capabilities)
///   forwards too, so a layer that adds, refuses or weakens an optional operation overrides it
///   to keep telling the truth.
/// - A method added to [`HistoryStore`] is added here with a forwarding body, and the blanket
///   impl calls it (`clippy::missing_trait_methods` is denied on the blanket impl): a new
///   method reaches the inner store through every layer, never the trait's `Unsupported`
///   default. A layer that must see every call (tracing, a double that records refusals)
///   denies `clippy::missing_trait_methods` on its own impl.
#[async_trait]
pub trait LayeredHistory: Send + Sync + fmt::Debug + 'static {
    /// The store this layer wraps.
    type Inner: HistoryStore + ?Sized;

    /// The wrapped store: where every method this layer does not override goes.
    fn inner(&self) -> &Self::Inner;

    /// [`HistoryStore::capabilities`]; forwarded unless overridden.
    fn capabilities(&self) -> HistoryCapabilities {
        self.inner().capabilities()
    }

    /// [`HistoryStore::append`]; forwarded unless overridden.
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.inner().append(scope, messages).await
    }

    /// [`HistoryStore::read`]; forwarded unless overridden.
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.inner().read(scope, window).await
    }

    /// [`HistoryStore::count`]; forwarded unless overridden.
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.inner().count(scope).await
    }

    /// [`HistoryStore::clear`]; forwarded unless overridden.
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.inner().clear(scope).await
    }

    /// [`HistoryStore::list_threads`]; forwarded unless overridden.
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.inner().list_threads(filter, page).await
    }

    /// [`HistoryStore::archive`]; forwarded unless overridden.
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.inner().archive(scope, seqs).await
    }

    /// [`HistoryStore::set_ttl`]; forwarded unless overridden.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.inner().set_ttl(scope, ttl).await
    }

    /// [`HistoryStore::purge_expired`]; forwarded unless overridden.
    async fn purge_expired(&self) -> Result<u64> {
        self.inner().purge_expired().await
    }

    /// [`HistoryStore::read_since`]; forwarded unless overridden.
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.inner().read_since(scope, window, since).await
    }

    /// [`HistoryStore::read_page`]; forwarded unless overridden.
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.inner().read_page(scope, after, limit).await
    }

    /// [`HistoryStore::list_tenants`]; forwarded unless overridden.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        self.inner().list_tenants(page).await
    }
}

/// Implements [`HistoryStore`] for the type of `[impl … for …]` by calling, for every method,
/// the method of the same name of the trait `via` on the receiver `self => …`:
/// `clippy::missing_trait_methods` is denied on the impl, so a method added to the trait cannot
/// fall to its `Unsupported` default in a forwarding impl.
macro_rules! forward_history_store {
    ([$($header:tt)*] via $via:ident, $s:ident => $to:expr) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        $($header)* {
            fn capabilities(&$s) -> HistoryCapabilities {
                $via::capabilities($to)
            }
            async fn append(&$s, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
                $via::append($to, scope, messages).await
            }
            async fn read(&$s, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
                $via::read($to, scope, window).await
            }
            async fn count(&$s, scope: &Scope) -> Result<ThreadCount> {
                $via::count($to, scope).await
            }
            async fn clear(&$s, scope: &Scope) -> Result<u64> {
                $via::clear($to, scope).await
            }
            async fn list_threads(
                &$s,
                filter: &ScopeFilter,
                page: PageRequest,
            ) -> Result<Page<Scope>> {
                $via::list_threads($to, filter, page).await
            }
            async fn archive(&$s, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
                $via::archive($to, scope, seqs).await
            }
            async fn set_ttl(&$s, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
                $via::set_ttl($to, scope, ttl).await
            }
            async fn purge_expired(&$s) -> Result<u64> {
                $via::purge_expired($to).await
            }
            async fn read_since(
                &$s,
                scope: &Scope,
                window: Window,
                since: Option<ThreadCursor>,
            ) -> Result<CursorRead> {
                $via::read_since($to, scope, window, since).await
            }
            async fn read_page(
                &$s,
                scope: &Scope,
                after: u64,
                limit: usize,
            ) -> Result<Vec<StoredMessage>> {
                $via::read_page($to, scope, after, limit).await
            }
            async fn list_tenants(&$s, page: PageRequest) -> Result<Page<TenantId>> {
                $via::list_tenants($to, page).await
            }
        }
    };
}

// Every layer is a store: each method calls the layer's method of the same name (its override,
// or the forwarding default).
forward_history_store!(
    [impl<L: LayeredHistory> HistoryStore for L] via LayeredHistory, self => self
);

// `Arc<dyn HistoryStore>` is a store: each method calls the pointee's. (An own impl, not the
// empty layer `Box` is: a call through an `Arc` stays one boxed future, and a module that
// imports `LayeredHistory` can still call an `Arc`'s methods without naming the trait.)
forward_history_store!(
    [impl<T: HistoryStore + ?Sized> HistoryStore for Arc<T>] via HistoryStore, self => &**self
);

/// `Box<T>` is the empty layer over `T`: every call goes to the boxed store. (It cannot have
/// its own forwarding impl of [`HistoryStore`] beside the blanket one: `Box` is a fundamental
/// type, so another crate could make a `Box` of its own type a layer, and the two impls would
/// overlap.)
impl<T: HistoryStore + ?Sized> LayeredHistory for Box<T> {
    type Inner = T;

    fn inner(&self) -> &T {
        self
    }
}
