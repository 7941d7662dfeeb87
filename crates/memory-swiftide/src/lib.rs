#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

pub mod convert;
mod history;
mod ids;

pub use convert::{SWIFTIDE_METADATA_KEY, from_swiftide, to_swiftide, to_swiftide_all};
pub use history::{HistoryWindow, SwiftideHistory};
/// The swiftide crate this adapter implements (its `MessageHistory` and `ChatMessage`).
pub use swiftide_core;
