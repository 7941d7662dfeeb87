//! `Memory` through its public API: flushing to blocks, `get` within the token limit, the
//! blocks' persisted states, the configuration checks and the vector block. (What needs the
//! crate's private items stays in `src/memory/tests.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

mod config;
mod flush;
mod get;
mod states;
mod vector;
