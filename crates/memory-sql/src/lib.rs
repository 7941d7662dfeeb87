#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]
// Without a database feature the crate builds (so every feature combination compiles) but can
// open nothing: the per-database code paths are all compiled out.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(
        dead_code,
        unused_imports,
        unused_macros,
        unused_variables,
        unreachable_code
    )
)]

mod config;
mod connect;
mod cursor;
mod decode;
mod dialect;
mod doctor;
mod driver;
mod error;
mod history;
#[cfg(feature = "llamaindex")]
mod llamaindex;
mod prefix;
mod retry;
mod rows;
mod schema;
mod scoped_rows;
mod session;
mod sql;
mod store;
mod text;
mod vectors;

pub use config::{DEFAULT_TABLE_PREFIX, SchemaMode, SqlConfig};
pub use dialect::Backend;
pub use doctor::{SqlInspection, inspect};
#[cfg(feature = "llamaindex")]
pub use llamaindex::{KeyMapping, LlamaIndexConfig, LlamaIndexHistoryStore};
pub use prefix::MAX_TABLE_PREFIX_LEN;
pub use schema::SCHEMA_VERSION;
pub use store::{SqlStore, SqlStoreBuilder};
pub use text::SqlTextIndex;
pub use vectors::SqlVectorStore;

/// The sqlx version this crate is built on, re-exported so the `from_*_pool` constructors take
/// exactly the pool types the application builds.
pub use sqlx;
