//! memory-vector's integration tests, one module per store or embedder, in one test binary
//! (one compile and one link instead of one per file); each module is compiled with the
//! features it needs.

// Test code: a failed unwrap or a panic is how a test reports a failure; arithmetic and
// indexing are on the tests' own data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[cfg(feature = "qdrant-edge")]
#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "candle")]
mod candle;
#[cfg(feature = "qdrant-edge")]
mod edge;
#[cfg(feature = "qdrant-edge")]
mod edge_retrieval;
#[cfg(all(feature = "qdrant", feature = "qdrant-edge"))]
mod server;
