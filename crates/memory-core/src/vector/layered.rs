//! [`LayeredVectors`]: a vector store that wraps another and changes only what it names, and
//! the forwarding impls (every layer, `Box` and `Arc`) that make wrapped stores stores.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{
    Scope, ScopeFilter, ScoredPoint, VectorCapabilities, VectorPoint, VectorQuery, VectorStore,
};
use crate::error::Result;

/// A layer over a [`VectorStore`]: a type that wraps an *inner* store and overrides only the
/// operations it changes. Every layer is a [`VectorStore`] (a blanket impl); each method it
/// does not override calls the inner store's method of the same name with the same arguments
/// and returns its answer unchanged. The vector twin of
/// [`LayeredHistory`](crate::LayeredHistory), whose notes hold here too.
///
/// # Behavior
/// - A layer is a [`VectorStore`]: a method it overrides keeps the contract of the
///   [`VectorStore`] method of the same name (a test double that breaks it on purpose says
///   which part and why).
/// - A method it does not override, [`capabilities`](LayeredVectors::capabilities) included,
///   forwards to [`inner`](LayeredVectors::inner) unchanged.
/// - A method added to [`VectorStore`] is added here with a forwarding body, and the blanket
///   impl calls it (`clippy::missing_trait_methods` is denied there).
#[async_trait]
pub trait LayeredVectors: Send + Sync + fmt::Debug + 'static {
    /// The store this layer wraps.
    type Inner: VectorStore + ?Sized;

    /// The wrapped store: where every method this layer does not override goes.
    fn inner(&self) -> &Self::Inner;

    /// [`VectorStore::capabilities`]; forwarded unless overridden.
    fn capabilities(&self) -> VectorCapabilities {
        self.inner().capabilities()
    }

    /// [`VectorStore::upsert`]; forwarded unless overridden.
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.inner().upsert(scope, points).await
    }

    /// [`VectorStore::search`]; forwarded unless overridden.
    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        self.inner().search(scope, query).await
    }

    /// [`VectorStore::get`]; forwarded unless overridden.
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        self.inner().get(scope, ids).await
    }

    /// [`VectorStore::delete`]; forwarded unless overridden.
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.inner().delete(scope, ids).await
    }

    /// [`VectorStore::count`]; forwarded unless overridden.
    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.inner().count(scope).await
    }

    /// [`VectorStore::clear`]; forwarded unless overridden.
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.inner().clear(scope).await
    }

    /// [`VectorStore::delete_matching`]; forwarded unless overridden.
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.inner().delete_matching(filter).await
    }

    /// [`VectorStore::count_matching`]; forwarded unless overridden.
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.inner().count_matching(filter).await
    }
}

/// Implements a scoped index trait ([`VectorStore`], or its lexical twin
/// [`TextIndex`](crate::TextIndex), whose methods have the same names and shapes) for the type
/// of `[impl … for …]` by calling, for every method, the method of the same name of the trait
/// `via` on the receiver `self => …`, with the trait's types `{ capabilities, item, query, hit }`
/// (`clippy::missing_trait_methods` is denied on the impl).
macro_rules! forward_scoped_index {
    (
        [$($header:tt)*] via $via:ident, $s:ident => $to:expr,
        { $caps:ty, $item:ty, $query:ty, $hit:ty }
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        $($header)* {
            fn capabilities(&$s) -> $caps {
                $via::capabilities($to)
            }
            async fn upsert(&$s, scope: &Scope, items: &[$item]) -> Result<()> {
                $via::upsert($to, scope, items).await
            }
            async fn search(&$s, scope: &Scope, query: &$query) -> Result<Vec<$hit>> {
                $via::search($to, scope, query).await
            }
            async fn get(&$s, scope: &Scope, ids: &[Uuid]) -> Result<Vec<$item>> {
                $via::get($to, scope, ids).await
            }
            async fn delete(&$s, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
                $via::delete($to, scope, ids).await
            }
            async fn count(&$s, scope: &Scope) -> Result<u64> {
                $via::count($to, scope).await
            }
            async fn clear(&$s, scope: &Scope) -> Result<u64> {
                $via::clear($to, scope).await
            }
            async fn delete_matching(&$s, filter: &ScopeFilter) -> Result<u64> {
                $via::delete_matching($to, filter).await
            }
            async fn count_matching(&$s, filter: &ScopeFilter) -> Result<u64> {
                $via::count_matching($to, filter).await
            }
        }
    };
}
pub(crate) use forward_scoped_index;

// Every layer is a store: each method calls the layer's method of the same name.
forward_scoped_index!(
    [impl<L: LayeredVectors> VectorStore for L] via LayeredVectors, self => self,
    { VectorCapabilities, VectorPoint, VectorQuery, ScoredPoint }
);

// `Arc<dyn VectorStore>` is a store: each method calls the pointee's (an own impl, for the
// reasons `LayeredHistory`'s module gives).
forward_scoped_index!(
    [impl<T: VectorStore + ?Sized> VectorStore for Arc<T>] via VectorStore, self => &**self,
    { VectorCapabilities, VectorPoint, VectorQuery, ScoredPoint }
);

/// `Box<T>` is the empty layer over `T` (see [`LayeredHistory`](crate::LayeredHistory)'s impl
/// for `Box` on why it is not a forwarding impl of [`VectorStore`]).
impl<T: VectorStore + ?Sized> LayeredVectors for Box<T> {
    type Inner = T;

    fn inner(&self) -> &T {
        self
    }
}
