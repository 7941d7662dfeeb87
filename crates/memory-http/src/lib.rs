#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

mod client;
mod config;
mod error;
mod redact;
mod retry;
mod secret;
mod settings;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{ApiClient, build_client, http_client_builder, tls_config};
pub use config::{is_header_text, parse_base_url};
pub use error::{Failure, MAX_QUOTED_BODY, Retry, quote_body, status_text, transport_failure};
pub use redact::scrub;
pub use retry::{
    DEFAULT_MAX_BODY_BYTES, ErrorResponse, MAX_SERVER_WAIT, RequestInfo, RetryPolicy, retry_after,
    retry_after_ms, send_with_retries,
};
pub use secret::ApiKey;
pub use settings::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES,
    HttpClientConfig, HttpSettings,
};

/// The `reqwest` crate this crate is built on, to build a [`reqwest::Client`] of the same
/// version (start from [`http_client_builder`]).
pub use reqwest;
