//! The HTTP side shared by the chat model and the embedder: one `reqwest::Client`, the request
//! headers, retries with backoff, and the mapping of HTTP failures to [`ErrorKind`]s.
//!
//! Status codes and the error body follow the "Error codes" page of OpenAI's API reference:
//! failures answer `{"error": {"message", "type", "code", "param"}}`; 429 is a rate limit (retried)
//! unless its code is `insufficient_quota` (not retried: waiting does not help); 500, 502, 503 and
//! 504 are the server's (retried); 400, 401, 403, 404 and 422 are the caller's (not retried).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, ErrorKind, Result};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::config::{OpenAiConfig, redact_url};
use crate::secret::{ApiKey, REDACTED};

/// The `User-Agent` this crate sends.
const USER_AGENT: &str = concat!("agent-memory-openai/", env!("CARGO_PKG_VERSION"));
/// The longest piece of a non-JSON error body quoted in an error message.
const MAX_QUOTED_BODY: usize = 300;

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
/// provider, the platform's root certificates, HTTP/1.1 and this crate's `User-Agent`.
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new(Arc::clone(&provider)).map_err(|err| {
            Error::new(
                ErrorKind::Backend,
                format!("could not load the platform's root certificates: {err}"),
            )
            .with_source(err)
        })?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| {
            Error::new(ErrorKind::Backend, format!("could not set up TLS: {err}")).with_source(err)
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Client::builder()
        .tls_backend_preconfigured(tls)
        .user_agent(USER_AGENT))
}

/// Builds the HTTP client this crate uses when the application gives none.
fn default_client(config: &OpenAiConfig) -> Result<Client> {
    http_client_builder()?
        .connect_timeout(config.connect_timeout)
        .build()
        .map_err(|err| {
            Error::new(
                ErrorKind::Backend,
                format!("could not build the HTTP client: {err}"),
            )
            .with_source(err)
        })
}

/// The HTTP client of one model: where to send, what headers, how to retry.
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: Client,
    base_url: Url,
    headers: HeaderMap,
    api_key: Option<ApiKey>,
    timeout: Duration,
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Checks `config` and prepares the headers; builds a client unless one is given.
    pub(crate) fn new(config: &OpenAiConfig, client: Option<Client>) -> Result<Self> {
        config.validate()?;
        let base_url = config.parsed_base_url()?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    Error::invalid_input("the OpenAI API key cannot be sent in a header")
                })?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
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
        let client = match client {
            Some(client) => client,
            None => default_client(config)?,
        };
        Ok(Self {
            client,
            base_url,
            headers,
            api_key: config.api_key.clone(),
            timeout: config.timeout,
            max_retries: config.max_retries,
            initial_backoff: config.initial_backoff,
            max_backoff: config.max_backoff,
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
            self.base_url.as_str().trim_end_matches('/'),
            endpoint.path
        );
        let span = tracing::Span::current();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            span.record("attempts", attempt);
            let failure = match self.send_once(&url, body.clone()).await {
                Ok(bytes) => return Ok(bytes),
                Err(failure) => failure,
            };
            let delay = match failure.retry {
                Retry::No => return Err(failure.into_error(endpoint, attempt)),
                _ if attempt > self.max_retries => {
                    return Err(failure.into_error(endpoint, attempt));
                }
                Retry::After(wait) if wait > self.max_backoff => {
                    let mut failure = failure;
                    failure.message.push_str(&format!(
                        "; the server asked to wait {:.1} s before retrying, longer than the \
                         {:.1} s this client waits at most",
                        wait.as_secs_f64(),
                        self.max_backoff.as_secs_f64()
                    ));
                    return Err(failure.into_error(endpoint, attempt));
                }
                Retry::After(wait) => wait,
                Retry::Backoff => backoff(self.initial_backoff, self.max_backoff, attempt - 1),
            };
            tracing::warn!(
                attempt,
                status = failure.status.map(|s| s.as_u16()),
                kind = failure.kind.as_str(),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "OpenAI {} request failed; retrying",
                endpoint.what
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One attempt: the body of a successful answer, or what went wrong and whether to retry.
    async fn send_once(&self, url: &str, body: Vec<u8>) -> std::result::Result<Vec<u8>, Failure> {
        let response = self
            .client
            .post(url)
            .headers(self.headers.clone())
            .timeout(self.timeout)
            .body(body)
            .send()
            .await
            .map_err(|err| self.transport_failure(err))?;
        let status = response.status();
        tracing::Span::current().record("status", status.as_u16());
        let retry_hint = retry_after(response.headers());
        let bytes = response
            .bytes()
            .await
            .map_err(|err| self.transport_failure(err))?;
        tracing::debug!(
            status = status.as_u16(),
            bytes = bytes.len(),
            "OpenAI response"
        );
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        Err(self.status_failure(status, &bytes, retry_hint))
    }

    fn transport_failure(&self, err: reqwest::Error) -> Failure {
        let host = self.base_url.host_str().unwrap_or("the server").to_owned();
        let (kind, message, retry) = if err.is_timeout() {
            (
                ErrorKind::Timeout,
                format!(
                    "no answer from {host} within {:.1} s",
                    self.timeout.as_secs_f64()
                ),
                Retry::Backoff,
            )
        } else if err.is_connect() {
            (
                ErrorKind::Unavailable,
                format!("could not connect to {host}"),
                Retry::Backoff,
            )
        } else if err.is_request() || err.is_body() {
            (
                ErrorKind::Unavailable,
                format!("the connection to {host} failed"),
                Retry::Backoff,
            )
        } else {
            (
                ErrorKind::Backend,
                format!("the HTTP request to {host} failed"),
                Retry::No,
            )
        };
        Failure {
            kind,
            message,
            status: None,
            retry,
            source: Some(err.without_url()),
        }
    }

    fn status_failure(
        &self,
        status: StatusCode,
        body: &[u8],
        retry_hint: Option<Duration>,
    ) -> Failure {
        let detail = ApiErrorDetail::parse(body);
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
        Failure {
            kind,
            message: self.scrub(&message),
            status: Some(status),
            retry,
            source: None,
        }
    }

    /// Removes the API key, and anything that looks like one, from text a server wrote.
    fn scrub(&self, text: &str) -> String {
        let mut out = match &self.api_key {
            Some(key) if !key.is_empty() => text.replace(key.expose(), REDACTED),
            _ => text.to_owned(),
        };
        if out.contains("sk-") {
            out = out
                .split(' ')
                .map(|word| {
                    if word
                        .trim_start_matches(|c: char| !c.is_alphanumeric())
                        .starts_with("sk-")
                    {
                        REDACTED
                    } else {
                        word
                    }
                })
                .collect::<Vec<_>>()
                .join(" ");
        }
        out
    }
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// Whether and when to retry a failed attempt.
#[derive(Debug, Clone, Copy)]
enum Retry {
    /// Never: the same request fails the same way.
    No,
    /// After the exponential backoff.
    Backoff,
    /// After the wait the server asked for.
    After(Duration),
}

impl Retry {
    fn from_hint(hint: Option<Duration>) -> Self {
        hint.map_or(Retry::Backoff, Retry::After)
    }
}

/// What went wrong in one attempt.
#[derive(Debug)]
struct Failure {
    kind: ErrorKind,
    message: String,
    status: Option<StatusCode>,
    retry: Retry,
    source: Option<reqwest::Error>,
}

impl Failure {
    fn into_error(self, endpoint: Endpoint, attempts: u32) -> Error {
        let tries = if attempts > 1 {
            format!(" (after {attempts} attempts)")
        } else {
            String::new()
        };
        let error = Error::new(
            self.kind,
            format!(
                "OpenAI {} request failed: {}{tries}",
                endpoint.what, self.message
            ),
        );
        match self.source {
            Some(source) => error.with_source(source),
            None => error,
        }
    }
}

/// The delay before retry number `retry` (0 for the first): `initial * 2^retry`, capped at
/// `max`, then scaled by a random factor in `[0.5, 1.0)` so that many clients do not retry in
/// step.
pub(crate) fn backoff(initial: Duration, max: Duration, retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.min(20));
    let full = initial.saturating_mul(factor).min(max);
    full.mul_f64(0.5 + fastrand::f64() / 2.0)
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, OpenAI's own header), else
/// `Retry-After` (seconds or an HTTP date).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// The parts of an error body worth reporting.
#[derive(Debug, Default, PartialEq)]
struct ApiErrorDetail {
    message: Option<String>,
    kind: Option<String>,
    code: Option<String>,
    param: Option<String>,
}

impl ApiErrorDetail {
    /// Reads OpenAI's `{"error": {"message", "type", "code", "param"}}`, the
    /// `{"error": "..."}` or `{"message": "..."}` some compatible servers send, or else quotes
    /// the start of the body.
    fn parse(body: &[u8]) -> Self {
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
            _ => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                let quoted: String = text.chars().take(MAX_QUOTED_BODY).collect();
                Self {
                    message: (!quoted.is_empty()).then(|| {
                        if quoted.len() < text.len() {
                            format!("{quoted}...")
                        } else {
                            quoted
                        }
                    }),
                    ..Self::default()
                }
            }
        }
    }

    fn is_insufficient_quota(&self) -> bool {
        self.code.as_deref() == Some("insufficient_quota")
            || self.kind.as_deref() == Some("insufficient_quota")
    }

    /// `": message (type: t, code: c, param: p)"`, with the parts that are present.
    fn describe(&self) -> String {
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
    fn backoff_doubles_with_jitter_and_is_capped() {
        let initial = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        for _ in 0..50 {
            let first = backoff(initial, max, 0);
            assert!(
                first >= Duration::from_millis(50) && first < initial,
                "{first:?}"
            );
            let third = backoff(initial, max, 2);
            assert!(third >= Duration::from_millis(200) && third < Duration::from_millis(400));
            assert!(backoff(initial, max, 10) < max);
            assert!(backoff(initial, max, u32::MAX) < max);
        }
        assert_eq!(backoff(Duration::ZERO, max, 3), Duration::ZERO);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "0.5")])),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        let later = chrono::Utc::now() + chrono::Duration::seconds(30);
        let date = later.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let wait = retry_after(&headers(&[("retry-after", &date)])).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")])), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
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
            text.starts_with("Incorrect API key provided: <redacted>"),
            "{text}"
        );
        assert!(!format!("{client:?}").contains("sk-proj"));
    }
}
