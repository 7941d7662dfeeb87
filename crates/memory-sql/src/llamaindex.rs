//! [`LlamaIndexHistoryStore`]: a [`HistoryStore`](memory_core::HistoryStore) over LlamaIndex's own table, so a Rust
//! [`Memory`](memory_core::Memory) and a Python LlamaIndex `Memory` can continue each other's
//! sessions in one SQLite file or one PostgreSQL database.
// With neither SQLite nor PostgreSQL compiled in, the store can open nothing.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports, unused_variables)
)]

mod config;
mod ddl;
mod decode;
mod history;
mod read;
mod statements;
mod store;
mod write;

pub use config::{KeyMapping, LlamaIndexConfig};
pub use store::LlamaIndexHistoryStore;
