//! memory-lexical's integration tests, one module per subject, in one test binary (one
//! compile and one link instead of one per file). `conformance` is a binary of its own: it
//! installs a global tracing subscriber.

// Test code: a failed unwrap or a panic is how a test reports a failure; arithmetic and
// indexing are on the tests' own data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

mod commits;
mod conformance_retrieval;
mod tantivy;
