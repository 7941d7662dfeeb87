//! Tests against a local fake server (wiremock) that answers as OpenAI's published API reference
//! describes "Create chat completion" (`POST /v1/chat/completions`), "Create embeddings"
//! (`POST /v1/embeddings`) and its error codes: the requests must carry exactly the headers and
//! JSON bodies the reference documents, and the documented answers, including failures, must map
//! to the right results and error kinds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod chat;
mod embeddings;
mod errors;
mod support;
