//! The settings the memory block and the provider share, and their builders: both search
//! Mem0 within the search scope of their default session state (`defaults`), recall at most
//! `top_k` memories and handle a failure by `on_error`.

/// Writes `with_search_scope`, `with_top_k`, `with_on_error` and `default_state` for a type
/// with the fields `defaults: Mem0SessionState`, `top_k: u32` and `on_error: OnError`; call it
/// inside the type's `impl`.
macro_rules! search_builders {
    () => {
        /// Limits searches to `scope` (without it, nothing is searched).
        pub fn with_search_scope(mut self, scope: $crate::Mem0Scope) -> Self {
            self.defaults.search_scope = Some(scope);
            self
        }

        /// Sets how many memories a search recalls at most (at least 1; default
        /// [`DEFAULT_TOP_K`](crate::DEFAULT_TOP_K)).
        pub fn with_top_k(mut self, top_k: u32) -> Self {
            self.top_k = top_k.max(1);
            self
        }

        /// Sets what a Mem0 failure does (default [`OnError::Degrade`](crate::OnError::Degrade)).
        pub fn with_on_error(mut self, on_error: $crate::OnError) -> Self {
            self.on_error = on_error;
            self
        }

        /// The scopes a session without Mem0 state starts with.
        pub fn default_state(&self) -> &$crate::Mem0SessionState {
            &self.defaults
        }
    };
}

pub(crate) use search_builders;
