#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

#[cfg(feature = "agent-framework")]
mod agent_framework;
mod config;
mod conn;
mod doctor;
mod error;
mod history;
mod keys;
mod scripts;
mod session;
mod store;
mod vectors;

#[cfg(test)]
mod resend_tests;

#[cfg(feature = "agent-framework")]
pub use agent_framework::{AfKeyFormat, AfRedisHistory, AfRedisHistoryBuilder};
pub use config::{
    DEFAULT_CONNECTION_TIMEOUT, DEFAULT_KEY_PREFIX, DEFAULT_RESPONSE_TIMEOUT, MAX_TIMEOUT,
    Overflow, RedisConfig,
};
pub use doctor::{RedisInspection, RedisNode, inspect};
pub use keys::MAX_PREFIX_LEN;
pub use store::{RedisStore, RedisStoreBuilder};
pub use vectors::RedisVectorStore;

/// The `redis` crate this store is built on, to build a
/// [`ConnectionManager`](redis::aio::ConnectionManager) or a cluster connection of the same
/// version for [`RedisStore::from_connection_manager`] and
/// [`RedisStore::from_cluster_connection`].
pub use redis;
