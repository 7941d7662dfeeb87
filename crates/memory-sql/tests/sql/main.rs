//! memory-sql's integration tests, one module per subject, in one test binary (one compile
//! and one link instead of one per file). Two binaries stand apart because their tests start
//! the binary again as child processes by exact test name: `processes` (several writer
//! processes; a chat continued by another process) and `fault_writers` (writers killed
//! mid-batch; `cargo xtask faults` runs it by name).

// Test code: a failed unwrap or a panic is how a test reports a failure; arithmetic and
// indexing are on the tests' own data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "llamaindex")]
mod conformance_llamaindex;
mod conformance_mysql;
mod conformance_postgres;
mod conformance_retrieval;
mod conformance_sqlite_file;
mod conformance_sqlite_memory;
mod conformance_text;
mod conformance_vectors;
mod cursor_reads;
mod doctor;
mod existing_only;
mod export_reads;
mod fault_proxy;
mod fault_server;
#[cfg(feature = "llamaindex")]
mod llamaindex;
mod sql_specific;
mod text_index;
mod user_memory;
mod vector_store;
