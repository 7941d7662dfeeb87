//! The HTTP side: one `reqwest::Client` (rustls with ring, from memory-openai's
//! `http_client_builder`), the auth headers of each flavour, retries with backoff honouring
//! `Retry-After`, and failures turned into `memory_core::Error`s that never show the key.

use std::fmt;
use std::time::Duration;

use memory_core::{Error, ErrorKind, Result};
use memory_openai::ApiKey;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Method, StatusCode, Url};
use serde_json::Value;
use tracing::Instrument;

use crate::config::{KeyHeader, Mem0Config, Mem0Flavor};
use crate::error::{classify, detail, status_text};
use crate::redact::{REDACTED, redact_url, scrub};

/// One request: method, path below the base URL, query and JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The method.
    pub(crate) method: Method,
    /// The path segments below the base URL; a last empty segment makes a trailing `/`.
    pub(crate) segments: Vec<String>,
    /// Query parameters, in order.
    pub(crate) query: Vec<(&'static str, String)>,
    /// The JSON body.
    pub(crate) body: Option<Value>,
    /// What the request does, for messages and traces: "add", "search"...
    pub(crate) what: &'static str,
}

impl Call {
    /// A request without query or body.
    pub(crate) fn new(method: Method, what: &'static str, segments: &[&str]) -> Self {
        Self {
            method,
            segments: segments.iter().map(|s| (*s).to_owned()).collect(),
            query: Vec::new(),
            body: None,
            what,
        }
    }

    /// Adds a query parameter.
    pub(crate) fn query(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    /// Sets the JSON body.
    pub(crate) fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// The HTTP client of one [`Mem0Client`](crate::Mem0Client).
#[derive(Clone)]
pub(crate) struct Http {
    client: Client,
    base_url: Url,
    headers: HeaderMap,
    key: Option<ApiKey>,
    flavor: &'static str,
    timeout: Duration,
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("flavor", &self.flavor)
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.key.as_ref().map(|_| REDACTED))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// Checks `config` and prepares the headers; builds a client unless one is given.
    pub(crate) fn new(config: &Mem0Config, client: Option<Client>) -> Result<Self> {
        config.validate()?;
        let base_url = config.parsed_base_url()?;
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let key = config.flavor.api_key().cloned();
        let auth = match (&config.flavor, &key) {
            (_, None) => None,
            (Mem0Flavor::Platform { .. }, Some(key)) => {
                Some((header::AUTHORIZATION, format!("Token {}", key.expose())))
            }
            (Mem0Flavor::SelfHosted { key_header, .. }, Some(key)) => Some(match key_header {
                KeyHeader::Bearer => (header::AUTHORIZATION, format!("Bearer {}", key.expose())),
                KeyHeader::Token => (header::AUTHORIZATION, format!("Token {}", key.expose())),
                KeyHeader::Named(name) => (
                    HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        Error::invalid_input(format!("{name:?} is not a valid HTTP header name"))
                    })?,
                    key.expose().to_owned(),
                ),
            }),
        };
        if let Some((name, value)) = auth {
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| Error::invalid_input("the Mem0 API key cannot be sent in a header"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = match client {
            Some(client) => client,
            None => memory_openai::http_client_builder()?
                .connect_timeout(config.connect_timeout)
                .user_agent(USER_AGENT)
                .build()
                .map_err(|err| {
                    Error::new(
                        ErrorKind::Backend,
                        format!("could not build the HTTP client: {err}"),
                    )
                    .with_source(err)
                })?,
        };
        Ok(Self {
            client,
            base_url,
            headers,
            key,
            flavor: config.flavor.name(),
            timeout: config.timeout,
            max_retries: config.max_retries,
            initial_backoff: config.initial_backoff,
            max_backoff: config.max_backoff,
        })
    }

    /// The full URL of `call`.
    pub(crate) fn url(&self, call: &Call) -> Result<Url> {
        let mut url = self.base_url.clone();
        url.path_segments_mut()
            .map_err(|()| Error::invalid_input("the Mem0 base URL cannot take a path"))?
            .pop_if_empty()
            .extend(&call.segments);
        if !call.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in &call.query {
                pairs.append_pair(name, value);
            }
        }
        Ok(url)
    }

    /// Sends `call` and decodes its JSON answer (`Value::Null` for an empty body).
    pub(crate) async fn json(&self, call: Call) -> Result<Value> {
        let what = call.what;
        let bytes = self.send(call).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|err| {
            Error::serialization(format!("the Mem0 {what} answer is not JSON: {err}"))
                .with_source(err)
        })
    }

    /// Sends `call`, retrying as configured, and returns the body of the successful answer.
    pub(crate) async fn send(&self, call: Call) -> Result<Vec<u8>> {
        let url = self.url(&call)?;
        let body = match &call.body {
            Some(body) => Some(serde_json::to_vec(body).map_err(|err| {
                Error::serialization(format!(
                    "could not encode the Mem0 {} request: {err}",
                    call.what
                ))
                .with_source(err)
            })?),
            None => None,
        };
        let span = tracing::info_span!(
            "mem0.request",
            flavor = self.flavor,
            endpoint = call.what,
            method = %call.method,
            status = tracing::field::Empty,
            attempts = tracing::field::Empty,
        );
        self.send_with_retries(&call, url, body)
            .instrument(span)
            .await
    }

    async fn send_with_retries(
        &self,
        call: &Call,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let span = tracing::Span::current();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            span.record("attempts", attempt);
            let failure = match self.send_once(call, &url, body.clone()).await {
                Ok(bytes) => return Ok(bytes),
                Err(failure) => failure,
            };
            let delay = match failure.retry {
                Retry::No => return Err(failure.into_error(call.what, attempt)),
                _ if attempt > self.max_retries => {
                    return Err(failure.into_error(call.what, attempt));
                }
                Retry::After(wait) if wait > self.max_backoff => {
                    let mut failure = failure;
                    failure.message.push_str(&format!(
                        "; the server asked to wait {:.1} s before retrying, longer than the \
                         {:.1} s this client waits at most",
                        wait.as_secs_f64(),
                        self.max_backoff.as_secs_f64()
                    ));
                    return Err(failure.into_error(call.what, attempt));
                }
                Retry::After(wait) => wait,
                Retry::Backoff => backoff(self.initial_backoff, self.max_backoff, attempt - 1),
            };
            tracing::warn!(
                attempt,
                status = failure.status.map(|s| s.as_u16()),
                kind = failure.kind.as_str(),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "Mem0 {} request failed; retrying",
                call.what
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(
        &self,
        call: &Call,
        url: &Url,
        body: Option<Vec<u8>>,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let mut request = self
            .client
            .request(call.method.clone(), url.clone())
            .headers(self.headers.clone())
            .timeout(self.timeout);
        if let Some(body) = body {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|err| self.transport_failure(err))?;
        let status = response.status();
        tracing::Span::current().record("status", status.as_u16());
        let hint = retry_after(response.headers());
        let bytes = response
            .bytes()
            .await
            .map_err(|err| self.transport_failure(err))?;
        tracing::debug!(
            status = status.as_u16(),
            bytes = bytes.len(),
            "Mem0 response"
        );
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        Err(self.status_failure(status, &bytes, hint))
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

    fn status_failure(&self, status: StatusCode, body: &[u8], hint: Option<Duration>) -> Failure {
        let detail = detail(body).map(|d| scrub(&d, self.key.as_ref()));
        let classified = classify(status, detail.as_deref(), self.key.is_some());
        let mut message = format!("{} (HTTP {})", classified.lead, status_text(status));
        if let Some(detail) = detail {
            message.push_str(": ");
            message.push_str(&detail);
        }
        Failure {
            kind: classified.kind,
            message: scrub(&message, self.key.as_ref()),
            status: Some(status),
            retry: if classified.retry {
                hint.map_or(Retry::Backoff, Retry::After)
            } else {
                Retry::No
            },
            source: None,
        }
    }
}

/// The `User-Agent` this crate sends.
const USER_AGENT: &str = concat!("agent-memory-mem0/", env!("CARGO_PKG_VERSION"));

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
    fn into_error(self, what: &str, attempts: u32) -> Error {
        let tries = if attempts > 1 {
            format!(" (after {attempts} attempts)")
        } else {
            String::new()
        };
        let error = Error::new(
            self.kind,
            format!("Mem0 {what} request failed: {}{tries}", self.message),
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
fn backoff(initial: Duration, max: Duration, retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.min(20));
    let full = initial.saturating_mul(factor).min(max);
    full.mul_f64(0.5 + fastrand::f64() / 2.0)
}

/// The wait a response asks for with `Retry-After`: seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
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
            assert!(first >= Duration::from_millis(50) && first < initial);
            let third = backoff(initial, max, 2);
            assert!(third >= Duration::from_millis(200) && third < Duration::from_millis(400));
            assert!(backoff(initial, max, u32::MAX) < max);
        }
    }

    #[test]
    fn retry_after_forms() {
        let headers = |value: &str| {
            let mut map = HeaderMap::new();
            map.insert(header::RETRY_AFTER, HeaderValue::from_str(value).unwrap());
            map
        };
        assert_eq!(retry_after(&headers("2")), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after(&headers("0.25")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers("Wed, 21 Oct 2015 07:28:00 GMT")),
            Some(Duration::ZERO)
        );
        let later = chrono::Utc::now() + chrono::Duration::seconds(30);
        let wait = retry_after(&headers(
            &later.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        ))
        .unwrap();
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30));
        assert_eq!(retry_after(&headers("soon")), None);
        assert_eq!(retry_after(&headers("-1")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_segments() {
        let config = Mem0Config::platform("k").with_base_url("http://proxy:9000/mem0/");
        let http = Http::new(&config, None).unwrap();
        let call =
            Call::new(Method::GET, "get", &["v1", "memories", "a/b c", ""]).query("org_id", "o&1");
        assert_eq!(
            http.url(&call).unwrap().as_str(),
            "http://proxy:9000/mem0/v1/memories/a%2Fb%20c/?org_id=o%261"
        );
        let plain = Call::new(Method::POST, "search", &["search"]);
        let http = Http::new(&Mem0Config::self_hosted("http://h:8888"), None).unwrap();
        assert_eq!(http.url(&plain).unwrap().as_str(), "http://h:8888/search");
        assert!(!format!("{http:?}").contains("Token"));
    }
}
