//! The HTTP side: one `reqwest::Client` (rustls with ring, from memory-http's
//! `http_client_builder`), the auth headers of each flavour, and Mem0's failures turned into
//! `memory_core::Error`s that never show the key; memory-http retries with backoff honouring
//! `Retry-After`.

use memory_core::{Error, Result};
use memory_http::{ApiClient, ApiKey, ErrorResponse, Failure, Retry, retry_after, status_text};
use reqwest::header::{self, HeaderMap, HeaderName};
use reqwest::{Client, Method, Url};
use serde_json::Value;
use tracing::Instrument;

use crate::config::{KeyHeader, Mem0Config, Mem0Flavor};
use crate::error::{classify, detail};

/// The `User-Agent` this crate sends.
const USER_AGENT: &str = concat!("agent-memory-mem0/", env!("CARGO_PKG_VERSION"));
/// How Mem0's keys start: words of a server message that start so are scrubbed.
const KEY_PREFIX: &str = "m0-";

/// A `reqwest` client builder set up as this crate's own client is: rustls with the ring crypto
/// provider, the platform's root certificates, HTTP/1.1 and this crate's `User-Agent`
/// (memory-http's [`http_client_builder`](memory_http::http_client_builder) with the
/// `User-Agent` added).
///
/// Use it to build a client for
/// [`Mem0Client::with_http_client`](crate::Mem0Client::with_http_client), adding proxies or
/// timeouts of your own.
///
/// ```
/// use std::time::Duration;
///
/// let client = memory_mem0::http_client_builder()?
///     .connect_timeout(Duration::from_secs(5))
///     .build()
///     .map_err(|err| memory_core::Error::invalid_input(err.to_string()))?;
/// # let _ = client;
/// # Ok::<(), memory_core::Error>(())
/// ```
///
/// # Errors
/// [`ErrorKind::Backend`](memory_core::ErrorKind::Backend) if the platform's root certificates
/// cannot be loaded.
pub fn http_client_builder() -> Result<reqwest::ClientBuilder> {
    Ok(memory_http::http_client_builder()?.user_agent(USER_AGENT))
}

/// Removes `key`, and any word that looks like a Mem0 key (`m0-…`), from text a server wrote.
fn scrub(text: &str, key: Option<&ApiKey>) -> String {
    memory_http::scrub(text, key, KEY_PREFIX)
}

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
    /// Whether the request may be sent twice (memory-http's `RequestInfo::idempotent`): by
    /// HTTP's rules unless [`idempotent`](Call::idempotent) marks a POST that only reads. An
    /// add is not: after a timeout it is not retried, so a memory is never stored twice.
    pub(crate) idempotent: bool,
}

impl Call {
    /// A request without query or body.
    pub(crate) fn new(method: Method, what: &'static str, segments: &[&str]) -> Self {
        Self {
            idempotent: method.is_idempotent(),
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

    /// Marks a request that does not follow HTTP's rules as safe to repeat (a search sent as a
    /// POST).
    pub(crate) fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// Sets the JSON body.
    pub(crate) fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// The HTTP client of one [`Mem0Client`](crate::Mem0Client): memory-http's [`ApiClient`] with
/// the flavour's auth header, and the key, to tell a missing key from a wrong one and to scrub it
/// from messages.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    flavor: &'static str,
    api: ApiClient,
    key: Option<ApiKey>,
}

impl Http {
    /// Checks `config` and prepares the headers; builds a client unless one is given.
    pub(crate) fn new(config: &Mem0Config, client: Option<Client>) -> Result<Self> {
        config.validate()?;
        let base_url = config.parsed_base_url()?;
        let mut headers = HeaderMap::new();
        let key = config.flavor.api_key().cloned();
        let auth = match (&config.flavor, &key) {
            (_, None) => None,
            (Mem0Flavor::Platform { .. }, Some(key)) => {
                Some((header::AUTHORIZATION, Some("Token"), key))
            }
            (Mem0Flavor::SelfHosted { key_header, .. }, Some(key)) => Some(match key_header {
                KeyHeader::Bearer => (header::AUTHORIZATION, Some("Bearer"), key),
                KeyHeader::Token => (header::AUTHORIZATION, Some("Token"), key),
                KeyHeader::Named(name) => (
                    HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        Error::invalid_input(format!("{name:?} is not a valid HTTP header name"))
                    })?,
                    None,
                    key,
                ),
            }),
        };
        if let Some((name, scheme, key)) = auth {
            headers.insert(name, key.header_value(scheme, "Mem0")?);
        }
        Ok(Self {
            flavor: config.flavor.name(),
            api: ApiClient::new(
                "Mem0",
                base_url,
                headers,
                &config.http,
                client,
                http_client_builder,
            )?,
            key,
        })
    }

    /// The full URL of `call`.
    pub(crate) fn url(&self, call: &Call) -> Result<Url> {
        let mut url = self.api.base_url.clone();
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
        decode_json(&bytes, what)
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
        self.api
            .send(
                call.method.clone(),
                url,
                call.what,
                body,
                call.idempotent,
                |response| self.status_failure(response),
            )
            .instrument(span)
            .await
    }

    /// What an error answer means (see the `error` module); the wait the server asks for is
    /// `Retry-After`.
    fn status_failure(&self, response: &ErrorResponse<'_>) -> Failure {
        let status = response.status;
        let detail = detail(response.body).map(|d| scrub(&d, self.key.as_ref()));
        let classified = classify(status, detail.as_deref(), self.key.is_some());
        let mut message = format!("{} (HTTP {})", classified.lead, status_text(status));
        if let Some(detail) = detail {
            message.push_str(": ");
            message.push_str(&detail);
        }
        let retry = if classified.retry {
            Retry::from_hint(retry_after(response.headers))
        } else {
            Retry::No
        };
        Failure::from_status(
            status,
            classified.kind,
            scrub(&message, self.key.as_ref()),
            retry,
        )
    }
}

/// The JSON of a successful answer to the `what` call (`Value::Null` for an empty body).
pub(crate) fn decode_json(bytes: &[u8], what: &str) -> Result<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|err| {
        Error::serialization(format!("the Mem0 {what} answer is not JSON: {err}")).with_source(err)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
