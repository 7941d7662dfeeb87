#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

#[cfg(feature = "qdrant")]
mod config;
#[cfg(feature = "qdrant-edge")]
mod edge;
#[cfg(any(feature = "qdrant", feature = "qdrant-edge", feature = "candle"))]
mod error;
mod hashing;
#[cfg(feature = "candle")]
mod local;
#[cfg(any(feature = "qdrant", feature = "qdrant-edge"))]
mod schema;
#[cfg(feature = "qdrant")]
mod server;

#[cfg(feature = "qdrant")]
pub use config::{DEFAULT_COLLECTION, DEFAULT_UPSERT_BATCH, QdrantStoreConfig};
#[cfg(feature = "qdrant-edge")]
pub use edge::QdrantEdgeStore;
pub use hashing::HashingEmbedder;
#[cfg(feature = "candle")]
pub use local::{BertEmbedder, MODEL_DIR_ENV};
#[cfg(feature = "qdrant")]
pub use server::QdrantStore;
