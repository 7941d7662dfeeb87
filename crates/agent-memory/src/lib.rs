#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

/// Health checks of a backend: [`doctor`](crate::doctor()) and its findings.
pub mod doctor;
mod error_lines;
mod open;
/// The OpenTelemetry pipeline (feature `otel`): [`install`](telemetry::install) for
/// applications, [`build`](telemetry::build) with given exporters for tests.
#[cfg(feature = "otel")]
pub mod telemetry;

pub use memory_core::*;

/// The portable bundle: export, import and migrate threads, sessions and block states.
pub use memory_bundle as bundle;
/// Layers over any history store (same trait in, same trait out): the window cache that
/// [`open`] puts in front of every history store it opens.
pub use memory_layers as layers;

/// SQLite, PostgreSQL and MySQL/MariaDB stores (features `sqlite`, `postgres`, `mysql`), and
/// LlamaIndex's table (feature `llamaindex`).
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "llamaindex"
))]
pub use memory_sql as sql;

/// Redis and Redis Cluster stores (feature `redis`), and Agent Framework's Redis layout
/// (feature `agent-framework`).
#[cfg(feature = "redis")]
pub use memory_redis as redis;

/// OpenAI-compatible chat model and embedder (feature `openai`).
#[cfg(feature = "openai")]
pub use memory_openai as openai;

/// Vector stores on Qdrant (server: feature `qdrant`; embedded engine: `qdrant-edge`) and the
/// local embedder (`candle`).
#[cfg(any(feature = "qdrant", feature = "qdrant-edge", feature = "candle"))]
pub use memory_vector as vector_stores;

/// Lexical retrieval in process: the BM25 [`TextIndex`] on tantivy, in memory or in a
/// directory (feature `tantivy`).
#[cfg(feature = "tantivy")]
pub use memory_lexical as text_indexes;

/// Mem0 as a context provider and a memory block (feature `mem0`).
#[cfg(feature = "mem0")]
pub use memory_mem0 as mem0;

/// rig's `ConversationMemory` over any history store (feature `rig`): `RigMemory`.
#[cfg(feature = "rig")]
pub use memory_rig as rig;
/// agent-memory as a swiftide agent's message history (feature `swiftide`).
#[cfg(feature = "swiftide")]
pub use memory_swiftide as swiftide;

pub use doctor::doctor;
pub use error_lines::error_lines;
/// Conversions to and from the JSON of Microsoft Agent Framework and LlamaIndex (features
/// `agent-framework`, `llamaindex`).
#[cfg(any(feature = "agent-framework", feature = "llamaindex"))]
pub use memory_interop as interop;
pub use open::{DEFAULT_URL, OpenOptions, Stores, URL_ENV, open, open_default};
