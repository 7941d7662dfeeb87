//! The HTTP side shared by the chat model and the embedder: one `reqwest::Client`, the request
//! headers, retries with backoff, and the mapping of HTTP failures to [`ErrorKind`]s.
//!
//! Status codes and the error body follow the "Error codes" page of OpenAI's API reference:
//! failures answer `{"error": {"message", "type", "code", "param"}}`; 429 is a rate limit (retried)
//! unless its code is `insufficient_quota` (not retried: waiting does not help); 500, 502, 503 and
//! 504 are the server's (retried); 400, 401, 403, 404 and 422 are the caller's (not retried).

use std::time::Duration;

use memory_core::{Error, ErrorKind, Result};
use memory_http::{
    ApiClient, ApiKey, ErrorResponse, Failure, Retry, quote_body, retry_after, retry_after_ms,
    status_text,
};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Method};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::config::OpenAiConfig;

/// The `User-Agent` this crate sends.
const USER_AGENT: &str = concat!("agent-memory-openai/", env!("CARGO_PKG_VERSION"));
/// How OpenAI's keys start: words of a server message that start so are scrubbed.
const KEY_PREFIX: &str = "sk-";

/// One endpoint of the API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoint {
    /// The path below the base URL.
    pub(crate) path: &'static str,
    /// What a request does, for messages: "chat completion", "embeddings".
    pub(crate) what: &'static str,
}

/// The OpenAI endpoints this crate calls.
pub(crate) const CHAT_COMPLETIONS: Endpoint = Endpoint {
    path: "chat/completions",
    what: "chat completion",
};
/// See [`CHAT_COMPLETIONS`].
pub(crate) const EMBEDDINGS: Endpoint = Endpoint {
    path: "embeddings",
    what: "embeddings",
};

/// A `reqwest` client builder set up as this crate's own client is: rustls with the ring crypto
/// provider, the platform's root certificates, HTTP/1.1 and this crate's `User-Agent`
/// (memory-http's [`http_client_builder`](memory_http::http_client_builder) with the
/// `User-Agent` added).
///
/// Use it to build a client to share with
/// [`OpenAiChatModelBuilder::http_client`](crate::OpenAiChatModelBuilder::http_client) and
/// [`OpenAiEmbedderBuilder::http_client`](crate::OpenAiEmbedderBuilder::http_client), adding
/// proxies or timeouts of your own. (`reqwest` is built here without a crypto provider of its
/// own, so a bare `reqwest::Client::new()` panics unless the application enables one or installs
/// a process-wide rustls provider.)
///
/// ```
/// use std::time::Duration;
///
/// let client = memory_openai::http_client_builder()?
///     .connect_timeout(Duration::from_secs(5))
///     .pool_max_idle_per_host(4)
///     .build()
///     .map_err(|err| memory_core::Error::invalid_input(err.to_string()))?;
/// # let _ = client;
/// # Ok::<(), memory_core::Error>(())
/// ```
///
/// # Errors
/// [`ErrorKind::Backend`] if the platform's root certificates cannot be loaded.
pub fn http_client_builder() -> Result<reqwest::ClientBuilder> {
    Ok(memory_http::http_client_builder()?.user_agent(USER_AGENT))
}

/// The HTTP client of one model: memory-http's [`ApiClient`] with OpenAI's headers, and the
/// key, to tell a missing key from a wrong one and to scrub it from messages.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    api: ApiClient,
    api_key: Option<ApiKey>,
}

impl HttpClient {
    /// Checks `config` and prepares the headers; builds a client unless one is given.
    pub(crate) fn new(config: &OpenAiConfig, client: Option<Client>) -> Result<Self> {
        config.validate()?;
        let base_url = config.parsed_base_url()?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            headers.insert(
                header::AUTHORIZATION,
                key.header_value(Some("Bearer"), "OpenAI")?,
            );
        }
        for (name, value) in [
            ("openai-organization", &config.organization),
            ("openai-project", &config.project),
        ] {
            if let Some(value) = value {
                let value = HeaderValue::from_str(value).map_err(|_| {
                    Error::invalid_input(format!("{name} {value:?} cannot be sent in a header"))
                })?;
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        Ok(Self {
            api: ApiClient::new(
                "OpenAI",
                base_url,
                headers,
                &config.http,
                client,
                http_client_builder,
            )?,
            api_key: config.api_key.clone(),
        })
    }

    /// POSTs `body` as JSON to `endpoint` and decodes the JSON answer, retrying as the
    /// configuration says.
    pub(crate) async fn post_json<B, R>(
        &self,
        endpoint: Endpoint,
        model: &str,
        body: &B,
    ) -> Result<R>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let body = serde_json::to_vec(body).map_err(|err| {
            Error::serialization(format!(
                "could not encode the {} request: {err}",
                endpoint.what
            ))
            .with_source(err)
        })?;
        let span = tracing::info_span!(
            "openai.request",
            endpoint = endpoint.path,
            model,
            status = tracing::field::Empty,
            attempts = tracing::field::Empty,
        );
        let bytes = self
            .send_with_retries(endpoint, body)
            .instrument(span)
            .await?;
        serde_json::from_slice(&bytes).map_err(|err| {
            Error::serialization(format!(
                "the {} response is not the JSON OpenAI's API reference describes: {err}",
                endpoint.what
            ))
            .with_source(err)
        })
    }

    async fn send_with_retries(&self, endpoint: Endpoint, body: Vec<u8>) -> Result<Vec<u8>> {
        let url = format!(
            "{}/{}",
            self.api.base_url.as_str().trim_end_matches('/'),
            endpoint.path
        );
        self.api
            .send(
                Method::POST,
                url,
                endpoint.what,
                Some(body),
                true,
                |response| self.status_failure(response),
            )
            .await
    }

    /// What an error answer means: OpenAI's "Error codes" page, as the module's documentation
    /// says.
    fn status_failure(&self, response: &ErrorResponse<'_>) -> Failure {
        let status = response.status;
        let retry_hint = retry_hint(response.headers);
        let detail = ApiErrorDetail::parse(response.body);
        let quota = detail.is_insufficient_quota();
        let (kind, retry) = match status.as_u16() {
            429 if quota => (ErrorKind::LimitExceeded, Retry::No),
            429 => (ErrorKind::LimitExceeded, Retry::from_hint(retry_hint)),
            500 | 502 | 503 | 504 => (ErrorKind::Unavailable, Retry::from_hint(retry_hint)),
            400 | 422 | 401 | 403 => (ErrorKind::InvalidInput, Retry::No),
            404 => (ErrorKind::NotFound, Retry::No),
            408 => (ErrorKind::Timeout, Retry::No),
            409 => (ErrorKind::Conflict, Retry::No),
            413 => (ErrorKind::LimitExceeded, Retry::No),
            code if (400..500).contains(&code) => (ErrorKind::InvalidInput, Retry::No),
            code if code >= 500 => (ErrorKind::Unavailable, Retry::No),
            _ => (ErrorKind::Backend, Retry::No),
        };
        let lead = match status.as_u16() {
            401 | 403 if self.api_key.is_none() => {
                "the server requires an API key and none is configured".to_owned()
            }
            401 | 403 => "the API key is invalid or lacks permission for this request".to_owned(),
            429 if quota => "the account has exceeded its quota".to_owned(),
            429 => "the rate limit was exceeded".to_owned(),
            _ => "the server refused the request".to_owned(),
        };
        let message = format!("{lead} (HTTP {}){}", status_text(status), detail.describe());
        Failure::from_status(status, kind, self.scrub(&message), retry)
    }

    /// Removes the API key, and anything that looks like one, from text a server wrote.
    fn scrub(&self, text: &str) -> String {
        memory_http::scrub(text, self.api_key.as_ref(), KEY_PREFIX)
    }
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, OpenAI's own header), else
/// `Retry-After` (seconds or an HTTP date).
pub(crate) fn retry_hint(headers: &HeaderMap) -> Option<Duration> {
    retry_after_ms(headers).or_else(|| retry_after(headers))
}

/// The parts of an error body worth reporting.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ApiErrorDetail {
    message: Option<String>,
    kind: Option<String>,
    code: Option<String>,
    param: Option<String>,
}

impl ApiErrorDetail {
    /// Reads OpenAI's `{"error": {"message", "type", "code", "param"}}`, the
    /// `{"error": "..."}` or `{"message": "..."}` some compatible servers send, or else quotes
    /// the start of the body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        let as_text = |value: &serde_json::Value| match value {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) if s.is_empty() => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Object(map)) => match map.get("error") {
                Some(serde_json::Value::Object(error)) => Self {
                    message: error.get("message").and_then(as_text),
                    kind: error.get("type").and_then(as_text),
                    code: error.get("code").and_then(as_text),
                    param: error.get("param").and_then(as_text),
                },
                Some(other) => Self {
                    message: as_text(other),
                    ..Self::default()
                },
                None => Self {
                    message: map
                        .get("message")
                        .or_else(|| map.get("detail"))
                        .and_then(as_text),
                    kind: map.get("type").and_then(as_text),
                    code: map.get("code").and_then(as_text),
                    param: map.get("param").and_then(as_text),
                },
            },
            _ => Self {
                message: quote_body(body),
                ..Self::default()
            },
        }
    }

    pub(crate) fn is_insufficient_quota(&self) -> bool {
        self.code.as_deref() == Some("insufficient_quota")
            || self.kind.as_deref() == Some("insufficient_quota")
    }

    /// `": message (type: t, code: c, param: p)"`, with the parts that are present.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(message) = &self.message {
            out.push_str(": ");
            out.push_str(message);
        }
        let extras: Vec<String> = [
            ("type", &self.kind),
            ("code", &self.code),
            ("param", &self.param),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}: {v}")))
        .collect();
        if !extras.is_empty() {
            out.push_str(" (");
            out.push_str(&extras.join(", "));
            out.push(')');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("9"));
        assert_eq!(retry_hint(&headers), Some(Duration::from_secs(9)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_hint(&headers), Some(Duration::from_millis(250)));
        headers.insert("retry-after-ms", HeaderValue::from_static("soon"));
        assert_eq!(retry_hint(&headers), Some(Duration::from_secs(9)));
    }

    #[test]
    fn error_bodies() {
        let detail = ApiErrorDetail::parse(
            br#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert!(detail.is_insufficient_quota());
        assert_eq!(
            detail.describe(),
            ": You exceeded your current quota. (type: insufficient_quota, code: insufficient_quota)"
        );
        let detail = ApiErrorDetail::parse(br#"{"error":"model not loaded"}"#);
        assert_eq!(detail.message.as_deref(), Some("model not loaded"));
        let detail = ApiErrorDetail::parse(br#"{"object":"error","message":"bad","code":400}"#);
        assert_eq!(detail.describe(), ": bad (code: 400)");
        let detail = ApiErrorDetail::parse(b"<html>Bad Gateway</html>");
        assert_eq!(detail.message.as_deref(), Some("<html>Bad Gateway</html>"));
        let long = "x".repeat(1000);
        let detail = ApiErrorDetail::parse(long.as_bytes());
        assert!(detail.message.unwrap().len() < 400);
        assert_eq!(ApiErrorDetail::parse(b"").describe(), "");
    }

    #[test]
    fn scrub_removes_keys() {
        let config = OpenAiConfig::default().with_api_key("sk-proj-abcdef123456");
        let client = HttpClient::new(&config, None).unwrap();
        let text = client.scrub(
            "Incorrect API key provided: sk-proj-abcdef123456. Also 'sk-proj-abc***456' here; \
             and xsk-proj-abcdef123456y.",
        );
        assert!(!text.contains("abcdef123456"), "{text}");
        assert!(!text.contains("sk-proj-abc"), "{text}");
        assert!(
            text.starts_with("Incorrect API key provided: ***"),
            "{text}"
        );
        assert!(!format!("{client:?}").contains("sk-proj"));
    }
}
