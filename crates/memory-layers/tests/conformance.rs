//! The memory-testkit suites against the window cache over the in-memory store: a layer is a
//! store, and runs everything a store runs.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::InMemoryHistoryStore;
use memory_layers::{WindowCache, WindowCacheConfig};

memory_testkit::history_store_tests!(mod window_cache_over_in_memory, async {
    WindowCache::new(InMemoryHistoryStore::new())
});
// A budget so small that most windows are dropped or never kept: eviction must never serve a
// wrong window.
memory_testkit::history_store_tests!(mod window_cache_with_a_tiny_budget, async {
    WindowCache::with_config(
        InMemoryHistoryStore::new(),
        WindowCacheConfig::new().with_max_bytes(2_048),
    )
});
memory_testkit::hostile_input_tests!(
    mod window_cache_hostile,
    history: async { WindowCache::new(InMemoryHistoryStore::new()) },
);
memory_testkit::memory_suite_tests!(mod window_cache_memory, async {
    (
        WindowCache::new(InMemoryHistoryStore::new()),
        memory_core::InMemorySessionStore::new(),
    )
});
memory_testkit::forget_tests!(mod window_cache_forget, async {
    (
        WindowCache::new(InMemoryHistoryStore::new()),
        memory_core::InMemorySessionStore::new(),
        memory_core::InMemoryVectorStore::new(),
    )
});
