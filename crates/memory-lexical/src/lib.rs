#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

mod analyzer;
mod commit;
mod error;
mod index;
mod schema;

pub use analyzer::{Analyzer, DEFAULT_MAX_WORD_BYTES};
pub use commit::{CommitPolicy, MAX_PENDING_WRITES};
pub use index::TantivyTextIndex;
