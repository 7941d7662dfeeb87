#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

mod block;
mod client;
mod config;
mod error;
mod filters;
mod forget;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod on_error;
mod platform;
mod provider;
mod render;
mod request;
mod response;
mod scope;
mod search_builders;
mod self_hosted;
mod state;

pub use block::{BATCH_KEY, DEFAULT_BLOCK_NAME, FIRST_SEQ_KEY, LAST_SEQ_KEY, Mem0MemoryBlock};
pub use client::Mem0Client;
pub use config::{DEFAULT_PLATFORM_URL, DEFAULT_TIMEOUT, KeyHeader, Mem0Config, Mem0Flavor};
pub use filters::{Field, Filters, Predicate};
pub use forget::{DEFAULT_FORGET_NAME, Mem0Forget};
pub use http::http_client_builder;
pub use memory_http::{
    ApiKey, DEFAULT_CONNECT_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_RETRIES, HttpClientConfig, HttpSettings,
};
pub use on_error::OnError;
pub use provider::{DEFAULT_SOURCE_ID, DEFAULT_TOP_K, Mem0Provider};
pub use render::DEFAULT_CONTEXT_PROMPT;
pub use request::{AddRequest, ListRequest, Mem0Message, Mem0Role, MemoryUpdate, SearchRequest};
pub use response::{
    AddResponse, AddedMemory, HistoryEntry, HistoryMessage, MemoryEvent, MemoryPage, MemoryRecord,
    PingInfo,
};
pub use scope::{Mem0Scope, TENANT_SEPARATOR};
pub use state::Mem0SessionState;
