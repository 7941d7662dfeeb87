//! [`ScopedHit`]: a result of a search across scopes, with the scope it was found in.

use super::Scope;

/// A result of a search across the scopes a [`ScopeFilter`](super::ScopeFilter) selects (a
/// user's memory over all their sessions, say): the hit, and the scope it was found in, so a
/// caller can tell where a memory came from (its session, user and agent).
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedHit<H> {
    /// The scope the hit lives in.
    pub scope: Scope,
    /// The hit, as a search of that scope alone would return it.
    pub hit: H,
}

impl<H> ScopedHit<H> {
    /// `hit`, found in `scope`.
    pub fn new(scope: Scope, hit: H) -> Self {
        Self { scope, hit }
    }

    /// The same scope with `f` of the hit.
    pub fn map<U>(self, f: impl FnOnce(H) -> U) -> ScopedHit<U> {
        ScopedHit::new(self.scope, f(self.hit))
    }
}
