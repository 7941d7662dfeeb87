#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

mod chat;
mod config;
mod embeddings;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod http;

pub use chat::{OpenAiChatModel, OpenAiChatModelBuilder};
pub use config::{
    DEFAULT_BASE_URL, DEFAULT_CHAT_MODEL, DEFAULT_EMBEDDING_MODEL, DEFAULT_TIMEOUT, OpenAiConfig,
};
pub use embeddings::{
    MAX_EMBEDDING_BATCH, OpenAiEmbedder, OpenAiEmbedderBuilder, known_dimensions,
};
pub use http::http_client_builder;
pub use memory_http::{
    ApiKey, DEFAULT_CONNECT_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_RETRIES, HttpClientConfig, HttpSettings,
};

/// The `reqwest` crate this crate is built on, to build a [`reqwest::Client`] of the same
/// version for `http_client` (start from [`http_client_builder`]).
pub use reqwest;
