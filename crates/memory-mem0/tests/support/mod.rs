//! Shared helpers of the test binaries: configs pointing at a wiremock fake, the test key,
//! short backoffs, captured tracing output.

#![allow(dead_code)] // Each test binary uses a different part.

use std::time::Duration;

use memory_mem0::{HttpClientConfig, Mem0Client, Mem0Config};
use wiremock::MockServer;

/// A key that must never show up in any output.
pub(crate) const KEY: &str = "m0-test-SECRET-0123456789abcdef";

/// Retries, with backoffs short enough for tests.
pub(crate) fn quick(config: Mem0Config) -> Mem0Config {
    config
        .with_max_retries(2)
        .with_initial_backoff(Duration::from_millis(5))
        .with_max_backoff(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5))
}

/// The platform flavour at `server`, with the test key.
pub(crate) fn platform_config(server: &MockServer) -> Mem0Config {
    quick(Mem0Config::platform(KEY).with_base_url(server.uri()))
}

/// The self-hosted flavour at `server`, without a key.
pub(crate) fn self_hosted_config(server: &MockServer) -> Mem0Config {
    quick(Mem0Config::self_hosted(server.uri()))
}

/// A platform client at `server`.
pub(crate) fn platform(server: &MockServer) -> Mem0Client {
    Mem0Client::new(platform_config(server)).unwrap()
}

/// A self-hosted client at `server`.
pub(crate) fn self_hosted(server: &MockServer) -> Mem0Client {
    Mem0Client::new(self_hosted_config(server)).unwrap()
}

/// How many requests `server` received.
pub(crate) async fn request_count(server: &MockServer) -> usize {
    server
        .received_requests()
        .await
        .map_or(0, |requests| requests.len())
}

/// Asserts that neither the error's text nor its Debug shows the key.
pub(crate) fn assert_no_key(err: &memory_core::Error) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
}

/// Formatted tracing output, collected.
#[allow(unused_imports)] // Each test binary uses a different part.
pub(crate) use memory_http::testing::CapturedLogs as Captured;
