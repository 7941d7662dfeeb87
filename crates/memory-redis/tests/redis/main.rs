//! memory-redis's integration tests, one module per subject, in one test binary (one compile
//! and one link instead of one per file). They share one process: the support module's test
//! cluster and key prefix are started or drawn once. `fault_writers` is a binary of its own:
//! it starts itself again as its writer processes.

// Test code: a failed unwrap or a panic is how a test reports a failure; arithmetic and
// indexing are on the tests' own data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "agent-framework")]
mod agent_framework;
#[cfg(feature = "agent-framework")]
mod conformance_agent_framework;
mod conformance_cluster;
mod conformance_standalone;
mod cursor_read;
mod doctor;
mod fault;
mod fault_proxy;
mod paged;
mod redaction;
mod standalone;
mod user_memory;
mod vectors;
