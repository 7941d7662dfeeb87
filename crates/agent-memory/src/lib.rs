#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod open;

pub use memory_core::*;
pub use open::{DEFAULT_URL, Stores, open, open_default};
