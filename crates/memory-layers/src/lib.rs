//! Layers over any [`HistoryStore`](memory_core::HistoryStore).
//!
//! A layer is a `HistoryStore` that wraps a `HistoryStore`: same trait in, same trait out, as
//! tower middleware or opendal layers are stacked. An [`Agent`](memory_core::Agent), a
//! [`Memory`](memory_core::Memory) or an application takes the layered store where it took the
//! store, and nothing else changes. Every layer implements
//! [`LayeredHistory`](memory_core::LayeredHistory): it names the store it wraps and overrides
//! only what it changes; memory-core's blanket impl forwards every other method (checked by
//! `clippy::missing_trait_methods` there). A layer keeps the wrapped store's capabilities and
//! runs the whole memory-testkit suite.
//!
//! - [`WindowCache`]: keeps each thread's decoded window and refreshes it with one cursor read
//!   ([`HistoryStore::read_since`](memory_core::HistoryStore::read_since)).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

mod cached_window;
mod config;
mod estimate;
mod window_cache;

pub use config::WindowCacheConfig;
pub use window_cache::{WindowCache, WindowCacheStats};
