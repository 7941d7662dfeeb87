#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod open;

pub use memory_core::*;

/// OpenAI-compatible chat model and embedder (feature `openai`).
#[cfg(feature = "openai")]
pub use memory_openai as openai;
pub use open::{DEFAULT_URL, Stores, open, open_default};
