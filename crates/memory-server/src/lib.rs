//! The agent-memory server: the memory engine over HTTP, for agents in any language.
//!
//! - [`config`]: one TOML file plus environment overrides;
//! - [`embedder`]: the memory block (`[embedder]`, `[memory]`) memory searches run on;
//! - [`retrieval`]: how it is searched: dense, lexical (a text index) or hybrid (fused);
//! - [`auth`]: bearer tokens to [`Principal`](auth::Principal)s (tenant, optional user);
//! - [`ops`]: the operations, free of any transport, shared by every transport;
//! - [`http`]: the HTTP API (axum) with its OpenAPI 3.1 document, and [`serve`];
//! - [`mcp`]: the MCP server (rmcp): tools and resources over stdio and streamable HTTP.
//!
//! See docs/server.md for the routes, authentication and configuration.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    test,
    allow(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]

pub mod auth;
pub mod config;
mod config_error;
pub mod embedder;
pub mod error;
pub mod http;
pub mod mcp;
pub mod ops;
mod qdrant;
pub mod retrieval;

pub use error::{ErrorCode, OpError, OpResult};
pub use http::{Server, serve};
