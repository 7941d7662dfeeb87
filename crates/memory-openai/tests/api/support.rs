//! Shared helpers: the fake server's base URL, a test key, short backoffs.

use std::time::Duration;

use memory_openai::{HttpClientConfig, OpenAiConfig};
use wiremock::MockServer;

/// A key that must never show up in any output.
pub(crate) const KEY: &str = "sk-test-SECRET-0123456789abcdef";

/// A config pointing at `server`'s `/v1`, with the test key and short backoffs.
pub(crate) fn config(server: &MockServer, model: &str) -> OpenAiConfig {
    OpenAiConfig::new(model)
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key(KEY)
        .with_initial_backoff(Duration::from_millis(10))
        .with_max_backoff(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5))
}

/// How many requests `server` received.
pub(crate) async fn request_count(server: &MockServer) -> usize {
    server
        .received_requests()
        .await
        .map_or(0, |requests| requests.len())
}

/// An OpenAI error body.
pub(crate) fn error_body(message: &str, kind: &str, code: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": code}
    })
}
