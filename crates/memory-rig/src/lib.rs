#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

pub mod convert;
mod memory;
mod scope_mapper;

pub use memory::{DEFAULT_WINDOW, RigMemory, RigMemoryBuilder};
pub use scope_mapper::{ScopeMapper, UserScopes};

/// rig-core, as this crate depends on it (its `Message`, `ConversationMemory` and ids).
pub use rig_core;
