//! [`LayeredTextIndex`]: a text index that wraps another and changes only what it names, and
//! the forwarding impls (every layer, `Box` and `Arc`) that make wrapped indexes indexes.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{
    Scope, ScopeFilter, ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery,
};
use crate::error::Result;
use crate::vector::forward_scoped_index;

/// A layer over a [`TextIndex`]: a type that wraps an *inner* index and overrides only the
/// operations it changes. Every layer is a [`TextIndex`] (a blanket impl); each method it
/// does not override calls the inner index's method of the same name with the same arguments
/// and returns its answer unchanged. The text twin of
/// [`LayeredHistory`](crate::LayeredHistory), whose notes hold here too.
///
/// # Behavior
/// - A layer is a [`TextIndex`]: a method it overrides keeps the contract of the
///   [`TextIndex`] method of the same name (a test double that breaks it on purpose says
///   which part and why).
/// - A method it does not override, [`capabilities`](LayeredTextIndex::capabilities) included,
///   forwards to [`inner`](LayeredTextIndex::inner) unchanged.
/// - A method added to [`TextIndex`] is added here with a forwarding body, and the blanket
///   impl calls it (`clippy::missing_trait_methods` is denied there).
#[async_trait]
pub trait LayeredTextIndex: Send + Sync + fmt::Debug + 'static {
    /// The index this layer wraps.
    type Inner: TextIndex + ?Sized;

    /// The wrapped index: where every method this layer does not override goes.
    fn inner(&self) -> &Self::Inner;

    /// [`TextIndex::capabilities`]; forwarded unless overridden.
    fn capabilities(&self) -> TextCapabilities {
        self.inner().capabilities()
    }

    /// [`TextIndex::upsert`]; forwarded unless overridden.
    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        self.inner().upsert(scope, documents).await
    }

    /// [`TextIndex::search`]; forwarded unless overridden.
    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        self.inner().search(scope, query).await
    }

    /// [`TextIndex::get`]; forwarded unless overridden.
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        self.inner().get(scope, ids).await
    }

    /// [`TextIndex::delete`]; forwarded unless overridden.
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.inner().delete(scope, ids).await
    }

    /// [`TextIndex::count`]; forwarded unless overridden.
    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.inner().count(scope).await
    }

    /// [`TextIndex::clear`]; forwarded unless overridden.
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.inner().clear(scope).await
    }

    /// [`TextIndex::delete_matching`]; forwarded unless overridden.
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.inner().delete_matching(filter).await
    }

    /// [`TextIndex::count_matching`]; forwarded unless overridden.
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        self.inner().count_matching(filter).await
    }
}

// Every layer is an index: each method calls the layer's method of the same name (the
// forwarding written once for both scoped index traits, in `vector`).
forward_scoped_index!(
    [impl<L: LayeredTextIndex> TextIndex for L] via LayeredTextIndex, self => self,
    { TextCapabilities, TextDocument, TextQuery, ScoredDocument }
);

// `Arc<dyn TextIndex>` is an index: each method calls the pointee's (an own impl, for the
// reasons `LayeredHistory`'s module gives).
forward_scoped_index!(
    [impl<T: TextIndex + ?Sized> TextIndex for Arc<T>] via TextIndex, self => &**self,
    { TextCapabilities, TextDocument, TextQuery, ScoredDocument }
);

/// `Box<T>` is the empty layer over `T` (see [`LayeredHistory`](crate::LayeredHistory)'s impl
/// for `Box` on why it is not a forwarding impl of [`TextIndex`]).
impl<T: TextIndex + ?Sized> LayeredTextIndex for Box<T> {
    type Inner = T;

    fn inner(&self) -> &T {
        self
    }
}
