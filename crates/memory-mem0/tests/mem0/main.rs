//! memory-mem0's integration tests, one module per subject, in one test binary (one compile
//! and one link instead of one per file).

// Test code: a failed unwrap or a panic is how a test reports a failure; arithmetic and
// indexing are on the tests' own data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

mod block;
mod forget;
mod platform;
mod provider;
mod real_mem0;
mod self_hosted;
