//! The shape [`VectorStore`](crate::VectorStore) and its lexical twin
//! [`TextIndex`](crate::TextIndex) share, written once.
//!
//! Both are scoped indexes: the same methods (`upsert`, `search`, `get`, `delete`, `count`,
//! `clear`, and the optional cross-scope `delete_matching` / `count_matching`), the same
//! capabilities struct and the same layer trait, over different items, queries and hits. The
//! macros here generate them from each trait's names:
//! - `scoped_index_trait!`: the capabilities struct and the trait, with the contract of every
//!   method that reads alike for both; the two that differ (`upsert`, `search`) bring their own
//!   docs.
//! - `scoped_index_layer!`: the layer trait (a wrapper that overrides only what it changes), the
//!   blanket impl that makes every layer an index, the `Arc` forwarding impl and the `Box` layer.

/// Generates a scoped index's capabilities struct and its trait.
///
/// The invocation names the trait, its capabilities struct, the nouns its docs use (what the
/// index is called, what one item is called, what an item's content is called) and its item
/// type, and gives `upsert` and `search` with their docs. Every other method and every other doc
/// is the same for both traits, with those nouns.
macro_rules! scoped_index_trait {
    (
        $(#[$trait_meta:meta])*
        pub trait $Trait:ident with $Caps:ident,
            a $noun:literal of $item:literal items holding $content:literal
        {
            $(#[$upsert_meta:meta])*
            async fn upsert(&self, scope: &Scope, $items:ident: &[$Item:ident]) -> Result<()>;
            $(#[$search_meta:meta])*
            async fn search(&self, scope: &Scope, query: &$Query:ident) -> Result<Vec<$Hit:ident>>;
        }
    ) => {
        #[doc = concat!("What a ", $noun, " can do beyond the required behaviour.")]
        #[doc = ""]
        #[doc = concat!("Every field is `false` in [`none`](Self::none) (and [`Default`]); a ", $noun)]
        #[doc = "turns on what it has with the `with_*` methods. The struct is `#[non_exhaustive]`: a"]
        #[doc = concat!("new capability adds a field that is `false` unless a ", $noun, " sets it.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        #[non_exhaustive]
        pub struct $Caps {
            #[doc = concat!("[`", stringify!($Trait), "::delete_matching`] and")]
            #[doc = concat!("[`", stringify!($Trait), "::count_matching`] are supported: every ", $item)]
            #[doc = "of the scopes a [`ScopeFilter`](crate::ScopeFilter) selects, across scopes, in one call."]
            pub deletes_matching: bool,
            #[doc = concat!("[`", stringify!($Trait), "::search_matching`] is supported: one search over every ", $item)]
            #[doc = "of the scopes a [`ScopeFilter`](crate::ScopeFilter) selects (a user's memory across all their"]
            #[doc = "sessions, say)."]
            pub searches_matching: bool,
        }

        impl $Caps {
            /// No optional operation.
            pub const fn none() -> Self {
                Self {
                    deletes_matching: false,
                    searches_matching: false,
                }
            }

            #[doc = concat!("Sets whether [`", stringify!($Trait), "::search_matching`] is supported.")]
            #[must_use]
            pub const fn with_searches_matching(mut self, searches_matching: bool) -> Self {
                self.searches_matching = searches_matching;
                self
            }

            #[doc = concat!("Sets whether [`", stringify!($Trait), "::delete_matching`] and")]
            #[doc = concat!("[`", stringify!($Trait), "::count_matching`] are supported.")]
            #[must_use]
            pub const fn with_deletes_matching(mut self, deletes_matching: bool) -> Self {
                self.deletes_matching = deletes_matching;
                self
            }
        }

        $(#[$trait_meta])*
        #[::async_trait::async_trait]
        pub trait $Trait: Send + Sync + ::std::fmt::Debug + 'static {
            #[doc = concat!("What this ", $noun, " supports. The default is [`", stringify!($Caps), "::none`].")]
            fn capabilities(&self) -> $Caps {
                $Caps::none()
            }

            $(#[$upsert_meta])*
            async fn upsert(
                &self,
                scope: &$crate::scope::Scope,
                $items: &[$Item],
            ) -> $crate::error::Result<()>;

            $(#[$search_meta])*
            async fn search(
                &self,
                scope: &$crate::scope::Scope,
                query: &$Query,
            ) -> $crate::error::Result<Vec<$Hit>>;

            #[doc = concat!("The ", $item, "s with these ids.")]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("Returns the ", $item, "s of the given ids that exist in the scope, with their")]
            #[doc = concat!("exact ", $content, " and payloads; unknown ids are skipped, and no ids give nothing.")]
            async fn get(
                &self,
                scope: &$crate::scope::Scope,
                ids: &[::uuid::Uuid],
            ) -> $crate::error::Result<Vec<$Item>>;

            #[doc = concat!("Removes ", $item, "s by id.")]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("Removes ", $item, "s by id; returns how many existed (unknown and already deleted ids")]
            #[doc = concat!("count 0). Deleted ", $item, "s are not found by any read.")]
            async fn delete(
                &self,
                scope: &$crate::scope::Scope,
                ids: &[::uuid::Uuid],
            ) -> $crate::error::Result<u64>;

            #[doc = concat!("Counts the scope's ", $item, "s.")]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("Counts a scope's ", $item, "s; [`clear`](", stringify!($Trait), "::clear) removes them all")]
            #[doc = "and returns how many it removed."]
            async fn count(&self, scope: &$crate::scope::Scope) -> $crate::error::Result<u64>;

            #[doc = concat!("Removes every ", $item, " of the scope; returns how many.")]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("See [`count`](", stringify!($Trait), "::count): afterwards the scope counts zero.")]
            async fn clear(&self, scope: &$crate::scope::Scope) -> $crate::error::Result<u64>;

            #[doc = concat!("Removes every ", $item, " of the scopes `filter` selects; returns how many.")]
            #[doc = ""]
            #[doc = concat!("Optional ([`", stringify!($Caps), "::deletes_matching`]): the default returns")]
            #[doc = "[`Unsupported`](crate::ErrorKind::Unsupported)."]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("Removes every ", $item, " of every scope the filter")]
            #[doc = "[matches](crate::ScopeFilter::matches) (its tenant, and its user, agent, session and"]
            #[doc = concat!("source when it names them), and no other ", $item, ", and returns how many it removed;")]
            #[doc = "afterwards no read of those scopes finds one. Repeating it removes nothing. A"]
            #[doc = concat!($noun, " that cannot narrow by a part the filter names refuses with")]
            #[doc = "[`Unsupported`](crate::ErrorKind::Unsupported) and removes nothing."]
            #[doc = concat!("[`count_matching`](", stringify!($Trait), "::count_matching) returns how many ")]
            #[doc = concat!($item, "s `delete_matching` would remove now and changes nothing.")]
            async fn delete_matching(
                &self,
                filter: &$crate::scope::ScopeFilter,
            ) -> $crate::error::Result<u64> {
                let _ = filter;
                Err($crate::history::unsupported_operation::<Self>(
                    "delete_matching",
                    stringify!($Caps),
                    "deletes_matching",
                ))
            }

            #[doc = concat!("Counts the ", $item, "s of the scopes `filter` selects.")]
            #[doc = ""]
            #[doc = concat!("Optional ([`", stringify!($Caps), "::deletes_matching`]): the default returns")]
            #[doc = "[`Unsupported`](crate::ErrorKind::Unsupported)."]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("Returns how many ", $item, "s")]
            #[doc = concat!("[`delete_matching`](", stringify!($Trait), "::delete_matching) would remove now,")]
            #[doc = "and changes nothing (see there)."]
            async fn count_matching(
                &self,
                filter: &$crate::scope::ScopeFilter,
            ) -> $crate::error::Result<u64> {
                let _ = filter;
                Err($crate::history::unsupported_operation::<Self>(
                    "count_matching",
                    stringify!($Caps),
                    "deletes_matching",
                ))
            }

            #[doc = concat!("The best ", $item, "s across the scopes `filter` selects, each with its scope.")]
            #[doc = ""]
            #[doc = concat!("Optional ([`", stringify!($Caps), "::searches_matching`]): the default returns")]
            #[doc = "[`Unsupported`](crate::ErrorKind::Unsupported)."]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("As [`search`](", stringify!($Trait), "::search) over every ", $item, " of every scope the filter")]
            #[doc = "[matches](crate::ScopeFilter::matches), and of no other scope whatever the query: at most"]
            #[doc = "`top_k` hits (none for a `top_k` of 0), each with the scope it lives in, in the order"]
            #[doc = concat!("`search` gives (by decreasing score, ties by ascending id, then by scope key); a ", $item)]
            #[doc = "scores as it would in a search of its own scope (the engine's relevance may depend on"]
            #[doc = "the other documents of the index, as in `search`). The same id in two scopes is two hits."]
            async fn search_matching(
                &self,
                filter: &$crate::scope::ScopeFilter,
                query: &$Query,
            ) -> $crate::error::Result<Vec<$crate::scope::ScopedHit<$Hit>>> {
                let _ = (filter, query);
                Err($crate::history::unsupported_operation::<Self>(
                    "search_matching",
                    stringify!($Caps),
                    "searches_matching",
                ))
            }
        }
    };
}
pub(crate) use scoped_index_trait;

/// Generates a scoped index's layer trait and the impls that make wrapped indexes indexes.
///
/// The layer trait wraps an *inner* index and overrides only the operations it changes; every
/// method it does not override calls the inner index's method of the same name with the same
/// arguments. The macro also writes the blanket impl (every layer is an index), the forwarding
/// impl for `Arc<T>` and the empty layer `Box<T>` (see [`LayeredHistory`](crate::LayeredHistory)
/// for why `Box` is a layer and `Arc` a forwarding impl).
macro_rules! scoped_index_layer {
    (
        pub trait $Layer:ident over $Trait:ident, a $noun:literal,
        { $Caps:ident, $Item:ident, $Query:ident, $Hit:ident }
    ) => {
        $crate::scoped_index::scoped_index_layer!(@forward
            [
            #[doc = concat!("A layer over a [`", stringify!($Trait), "`]: a type that wraps an *inner* ", $noun)]
            #[doc = concat!("and overrides only the operations it changes. Every layer is a [`", stringify!($Trait), "`]")]
            #[doc = concat!("(a blanket impl); each method it does not override calls the inner ", $noun, "'s method")]
            #[doc = "of the same name with the same arguments and returns its answer unchanged. The twin of"]
            #[doc = "[`LayeredHistory`](crate::LayeredHistory), whose notes hold here too."]
            #[doc = ""]
            #[doc = "# Behavior"]
            #[doc = concat!("- A layer is a [`", stringify!($Trait), "`]: a method it overrides keeps the contract of the")]
            #[doc = concat!("  [`", stringify!($Trait), "`] method of the same name (a test double that breaks it on purpose")]
            #[doc = "  says which part and why)."]
            #[doc = concat!("- A method it does not override, [`capabilities`](", stringify!($Layer), "::capabilities)")]
            #[doc = concat!("  included, forwards to [`inner`](", stringify!($Layer), "::inner) unchanged.")]
            #[doc = concat!("- A method added to [`", stringify!($Trait), "`] is added here with a forwarding body,")]
            #[doc = "  and the blanket impl calls it (`clippy::missing_trait_methods` is denied there)."]
                pub trait $Layer: Send + Sync + ::std::fmt::Debug + 'static
            ]
            {
                #[doc = concat!("The ", $noun, " this layer wraps.")]
                type Inner: $Trait + ?Sized;

                #[doc = concat!("The wrapped ", $noun, ": where every method this layer does not override goes.")]
                fn inner(&self) -> &Self::Inner;
            }
            via $Trait, self => self.inner(), { $Caps, $Item, $Query, $Hit }
            documented as forwarding $Trait
        );

        // Every layer is an index: each method calls the layer's method of the same name.
        $crate::scoped_index::scoped_index_layer!(@forward
            [#[deny(clippy::missing_trait_methods)] impl<L: $Layer> $Trait for L] {}
            via $Layer, self => self, { $Caps, $Item, $Query, $Hit }
        );

        // `Arc<dyn …>` is an index: each method calls the pointee's (an own impl, for the reasons
        // `LayeredHistory`'s module gives).
        $crate::scoped_index::scoped_index_layer!(@forward
            [#[deny(clippy::missing_trait_methods)] impl<T: $Trait + ?Sized> $Trait for ::std::sync::Arc<T>] {}
            via $Trait, self => &**self, { $Caps, $Item, $Query, $Hit }
        );

        #[doc = concat!("`Box<T>` is the empty layer over `T` (see [`LayeredHistory`](crate::LayeredHistory)'s")]
        #[doc = concat!("impl for `Box` on why it is not a forwarding impl of [`", stringify!($Trait), "`]).")]
        impl<T: $Trait + ?Sized> $Layer for Box<T> {
            type Inner = T;

            fn inner(&self) -> &T {
                self
            }
        }
    };
    // The trait or impl `[$header]` holding the items `{ $extra }` and every method of the index,
    // each calling the method of the same name of the trait `$via` on `$to` (an expression of the
    // receiver `$s`, which is `self` from the caller: a `self` written here would not be the
    // method's, macro hygiene keeps them apart); with `documented as forwarding $Doc`, each
    // method says it forwards `$Doc`'s method (the layer trait's defaults).
    (
        @forward [$($header:tt)*] { $($extra:tt)* }
        via $via:ident, $s:ident => $to:expr, { $Caps:ident, $Item:ident, $Query:ident, $Hit:ident }
        $(documented as forwarding $Doc:ident)?
    ) => {
        #[::async_trait::async_trait]
        $($header)* {
        $($extra)*
        $(#[doc = concat!("[`", stringify!($Doc), "::capabilities`]; forwarded unless overridden.")])?
        fn capabilities(&$s) -> $Caps {
            $via::capabilities($to)
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::upsert`]; forwarded unless overridden.")])?
        async fn upsert(&$s, scope: &$crate::scope::Scope, items: &[$Item]) -> $crate::error::Result<()> {
            $via::upsert($to, scope, items).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::search`]; forwarded unless overridden.")])?
        async fn search(
            &$s,
            scope: &$crate::scope::Scope,
            query: &$Query,
        ) -> $crate::error::Result<Vec<$Hit>> {
            $via::search($to, scope, query).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::get`]; forwarded unless overridden.")])?
        async fn get(
            &$s,
            scope: &$crate::scope::Scope,
            ids: &[::uuid::Uuid],
        ) -> $crate::error::Result<Vec<$Item>> {
            $via::get($to, scope, ids).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::delete`]; forwarded unless overridden.")])?
        async fn delete(
            &$s,
            scope: &$crate::scope::Scope,
            ids: &[::uuid::Uuid],
        ) -> $crate::error::Result<u64> {
            $via::delete($to, scope, ids).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::count`]; forwarded unless overridden.")])?
        async fn count(&$s, scope: &$crate::scope::Scope) -> $crate::error::Result<u64> {
            $via::count($to, scope).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::clear`]; forwarded unless overridden.")])?
        async fn clear(&$s, scope: &$crate::scope::Scope) -> $crate::error::Result<u64> {
            $via::clear($to, scope).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::delete_matching`]; forwarded unless overridden.")])?
        async fn delete_matching(&$s, filter: &$crate::scope::ScopeFilter) -> $crate::error::Result<u64> {
            $via::delete_matching($to, filter).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::count_matching`]; forwarded unless overridden.")])?
        async fn count_matching(&$s, filter: &$crate::scope::ScopeFilter) -> $crate::error::Result<u64> {
            $via::count_matching($to, filter).await
        }
        $(#[doc = concat!("[`", stringify!($Doc), "::search_matching`]; forwarded unless overridden.")])?
        async fn search_matching(
            &$s,
            filter: &$crate::scope::ScopeFilter,
            query: &$Query,
        ) -> $crate::error::Result<Vec<$crate::scope::ScopedHit<$Hit>>> {
            $via::search_matching($to, filter, query).await
        }
        }
    };
}
pub(crate) use scoped_index_layer;
