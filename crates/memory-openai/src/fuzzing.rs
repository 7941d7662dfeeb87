//! Entry points for the `memory-fuzz` crate (feature `fuzzing`): the decoders of OpenAI's
//! answers, fed with bytes instead of an HTTP exchange. Not a stable API.

use std::time::Duration;

use memory_core::{ChatResponse, Error, Result};
use reqwest::header::HeaderMap;

use crate::chat::{CompletionResponse, read_completion};
use crate::embeddings::{EmbeddingsResponse, order_by_index};
use crate::http::{ApiErrorDetail, retry_hint};

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|err| Error::serialization(format!("not the JSON OpenAI describes: {err}")))
}

/// Decodes the body of a chat completion answer as the chat model does.
pub fn completion(body: &[u8]) -> Result<ChatResponse> {
    read_completion(decode::<CompletionResponse>(body)?)
}

/// Decodes the body of an embeddings answer for `expected` inputs of `dimensions` values, as
/// the embedder does.
pub fn embeddings(body: &[u8], expected: usize, dimensions: usize) -> Result<Vec<Vec<f32>>> {
    order_by_index(
        decode::<EmbeddingsResponse>(body)?.data,
        expected,
        dimensions,
    )
}

/// What the clients report from an error answer's body: the detail text, and whether it says
/// the quota is exhausted.
pub fn error_detail(body: &[u8]) -> (String, bool) {
    let detail = ApiErrorDetail::parse(body);
    (detail.describe(), detail.is_insufficient_quota())
}

/// The wait an error answer's headers ask for (`retry-after-ms`, else `Retry-After`).
pub fn retry_wait(headers: &HeaderMap) -> Option<Duration> {
    retry_hint(headers)
}
