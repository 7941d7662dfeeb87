//! The `reqwest` client (rustls with the ring crypto provider and the platform's root
//! certificates), and [`ApiClient`], the HTTP side of one API client.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Error, ErrorKind, Result, redact_url};
use reqwest::header::{self, HeaderMap};
use reqwest::{Client, ClientBuilder, IntoUrl, Method, Url};

use crate::error::Failure;
use crate::retry::{ErrorResponse, RequestInfo, RetryPolicy, send_with_retries};
use crate::settings::HttpSettings;

/// A `reqwest` client builder with rustls and the ring crypto provider, the platform's root
/// certificates and HTTP/1.1, that follows no redirects, and no `User-Agent` yet: add yours,
/// and proxies or timeouts of your own.
///
/// Redirects are off because a JSON API does not need them and a redirect would carry the API
/// key (in whatever header the client sends it) to wherever it points; keep them off in a
/// client you build from this ([`send_with_retries`] fails on a redirect answer).
///
/// (`reqwest` is built here without a crypto provider of its own, so a bare
/// `reqwest::Client::new()` panics unless the application enables one or installs a
/// process-wide rustls provider.)
///
/// ```
/// use std::time::Duration;
///
/// let client = memory_http::http_client_builder()?
///     .user_agent("my-client/1.0")
///     .connect_timeout(Duration::from_secs(5))
///     .build()
///     .map_err(|err| memory_core::Error::invalid_input(err.to_string()))?;
/// # let _ = client;
/// # Ok::<(), memory_core::Error>(())
/// ```
///
/// # Errors
/// [`ErrorKind::Backend`] if the platform's root certificates cannot be loaded.
pub fn http_client_builder() -> Result<ClientBuilder> {
    Ok(Client::builder()
        .tls_backend_preconfigured(tls_config()?)
        .redirect(reqwest::redirect::Policy::none()))
}

/// The TLS settings of [`http_client_builder`]: rustls with the ring crypto provider, the
/// platform's root certificates and HTTP/1.1, for a client built otherwise (a blocking one,
/// say: `reqwest::blocking::ClientBuilder::tls_backend_preconfigured`).
///
/// # Errors
/// [`ErrorKind::Backend`] if the platform's root certificates cannot be loaded.
pub fn tls_config() -> Result<rustls::ClientConfig> {
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
    Ok(tls)
}

/// Builds `builder` into a client.
///
/// # Errors
/// [`ErrorKind::Backend`] when `reqwest` cannot build it.
pub fn build_client(builder: ClientBuilder) -> Result<Client> {
    builder.build().map_err(|err| {
        Error::new(
            ErrorKind::Backend,
            format!("could not build the HTTP client: {err}"),
        )
        .with_source(err)
    })
}

/// The HTTP side of the client of one JSON API: where requests go, the headers they all carry,
/// how long an attempt may take and how failures are retried. Plain data; its `Debug` redacts a
/// password in the base URL and leaves out the headers (they carry the key).
#[derive(Clone)]
pub struct ApiClient {
    /// The service, as messages name it: `"OpenAI"`, `"Mem0"`.
    pub service: &'static str,
    /// The `reqwest` client.
    pub client: Client,
    /// The base URL; its host names the server in messages about transport errors.
    pub base_url: Url,
    /// The headers every request carries besides `Accept: application/json`: the auth header
    /// (mark it sensitive)...
    pub headers: HeaderMap,
    /// How long one attempt may take, from sending the request to reading the whole answer.
    pub timeout: Duration,
    /// How failed requests are retried.
    pub retry: RetryPolicy,
    /// The largest answer body read, in bytes: [`DEFAULT_MAX_BODY_BYTES`](crate::DEFAULT_MAX_BODY_BYTES) (16 MiB) unless a
    /// client needs otherwise; see [`RequestInfo::max_body_bytes`].
    pub max_body_bytes: usize,
}

impl fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiClient")
            .field("service", &self.service)
            .field("base_url", &redact_url(self.base_url.as_str()))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.retry.max_retries)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// The client of `service` (`"OpenAI"`, `"Mem0"`: messages name it) at `base_url`, sending
    /// `headers` with every request, with `settings`' timeout, retries and answer cap. It sends
    /// with `client` when one is given (that client keeps its own connect timeout), else with
    /// one built from `builder` and the settings'
    /// [`connect_timeout`](HttpSettings::connect_timeout).
    ///
    /// # Errors
    /// What `builder` returns; [`ErrorKind::Backend`] when `reqwest` cannot build the client.
    pub fn new(
        service: &'static str,
        base_url: Url,
        headers: HeaderMap,
        settings: &HttpSettings,
        client: Option<Client>,
        builder: impl FnOnce() -> Result<ClientBuilder>,
    ) -> Result<Self> {
        let client = match client {
            Some(client) => client,
            None => build_client(builder()?.connect_timeout(settings.connect_timeout))?,
        };
        Ok(Self {
            service,
            client,
            base_url,
            headers,
            timeout: settings.timeout,
            retry: settings.retry_policy(),
            max_body_bytes: settings.max_body_bytes,
        })
    }

    /// Sends `method` to `url` with `Accept: application/json`, the
    /// [`headers`](ApiClient::headers) and, when there is a `body`, that body as
    /// `application/json`; returns the body of the first successful answer.
    /// `idempotent` says whether the request may be sent twice (see
    /// [`RequestInfo::idempotent`]): `method.is_idempotent()` by HTTP's rules, or `true` for a
    /// `POST` without side effects or with an idempotency key.
    /// `what` says what the request does (`"search"`) for messages and traces; `classify` says
    /// what an error answer means. Retries as [`send_with_retries`] does.
    ///
    /// # Errors
    /// As [`send_with_retries`].
    pub async fn send<U, C>(
        &self,
        method: Method,
        url: U,
        what: &str,
        body: Option<Vec<u8>>,
        idempotent: bool,
        classify: C,
    ) -> Result<Vec<u8>>
    where
        U: IntoUrl + Clone,
        C: Fn(&ErrorResponse<'_>) -> Failure,
    {
        let info = RequestInfo {
            service: self.service,
            what,
            host: self.base_url.host_str().unwrap_or("the server"),
            timeout: self.timeout,
            max_body_bytes: self.max_body_bytes,
            idempotent,
        };
        let build = || {
            let request = self
                .client
                .request(method.clone(), url.clone())
                .header(header::ACCEPT, "application/json")
                .headers(self.headers.clone());
            match &body {
                Some(body) => request
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body.clone()),
                None => request,
            }
        };
        send_with_retries(&self.retry, &info, build, classify).await
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use reqwest::header::HeaderValue;
    use wiremock::matchers::{body_string, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::error::Retry;
    use crate::retry::DEFAULT_MAX_BODY_BYTES;

    #[test]
    fn the_builder_builds_a_client() {
        let builder = http_client_builder()
            .unwrap()
            .user_agent("test/1")
            .connect_timeout(Duration::from_secs(1));
        assert!(build_client(builder).is_ok());
    }

    /// A GET of the base URL; every error answer is `Unavailable` and retried (`refused`).
    async fn get(api: &ApiClient) -> Result<Vec<u8>> {
        api.send(
            Method::GET,
            api.base_url.clone(),
            "get",
            None,
            true,
            refused,
        )
        .await
    }

    /// A POST of `{}` to `url` ("add"); every error answer is `Unavailable` (`refused`).
    async fn post(api: &ApiClient, url: Url, idempotent: bool) -> Result<Vec<u8>> {
        api.send(
            Method::POST,
            url,
            "add",
            Some(b"{}".to_vec()),
            idempotent,
            refused,
        )
        .await
    }

    /// Mounts on `server`: `first` answers the first POST, `200 ok` every later one.
    async fn first_then_ok(server: &MockServer, first: ResponseTemplate) {
        Mock::given(method("POST"))
            .respond_with(first)
            .up_to_n_times(1)
            .with_priority(1)
            .mount(server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .mount(server)
            .await;
    }

    fn api(server: &MockServer) -> ApiClient {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_static("k"));
        ApiClient {
            service: "Test",
            client: build_client(http_client_builder().unwrap()).unwrap(),
            base_url: Url::parse(&format!("{}/v1", server.uri())).unwrap(),
            headers,
            timeout: Duration::from_secs(5),
            retry: RetryPolicy::new(1, Duration::from_millis(1), Duration::from_secs(1)),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    fn refused(response: &ErrorResponse<'_>) -> Failure {
        Failure::from_status(
            response.status,
            ErrorKind::Unavailable,
            "refused",
            Retry::Backoff,
        )
    }

    #[tokio::test]
    async fn requests_carry_the_headers_and_a_json_body() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/things"))
            .and(header("x-api-key", "k"))
            .and(header("accept", "application/json"))
            .and(header("content-type", "application/json"))
            .and(body_string("{}"))
            .respond_with(ResponseTemplate::new(200).set_body_string("posted"))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/v1/things"))
            .and(header("x-api-key", "k"))
            .respond_with(ResponseTemplate::new(200).set_body_string("got"))
            .expect(1)
            .mount(&server)
            .await;
        let api = api(&server);
        let url = format!("{}/things", api.base_url);
        let posted = api
            .send(
                Method::POST,
                &url,
                "add",
                Some(b"{}".to_vec()),
                false,
                refused,
            )
            .await
            .unwrap();
        assert_eq!(posted, b"posted");
        let got = api
            .send(Method::GET, &url, "get", None, true, refused)
            .await
            .unwrap();
        assert_eq!(got, b"got");
        let requests = server.received_requests().await.unwrap();
        let get = requests
            .iter()
            .find(|r| r.method.as_str() == "GET")
            .unwrap();
        assert!(get.headers.get("content-type").is_none());
        assert_eq!(get.headers.get_all("x-api-key").iter().count(), 1);
    }

    /// A redirect to another server is not followed: the other server never sees the API key
    /// (nor any request), and the call fails with a typed error.
    #[tokio::test]
    async fn redirects_are_not_followed_and_carry_no_key() {
        let a = MockServer::start().await;
        let b = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(307).insert_header("location", format!("{}/v1/x", b.uri())),
            )
            .mount(&a)
            .await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string("stolen"))
            .mount(&b)
            .await;
        let mut api = api(&a);
        let mut bearer = HeaderValue::from_static("Bearer k");
        bearer.set_sensitive(true);
        api.headers.insert(header::AUTHORIZATION, bearer);
        let result = get(&api).await;
        let seen_by_b = b.received_requests().await.unwrap();
        for request in &seen_by_b {
            assert!(request.headers.get("x-api-key").is_none(), "B saw the key");
            assert!(
                request.headers.get("authorization").is_none(),
                "B saw the key"
            );
        }
        assert!(seen_by_b.is_empty(), "the redirect was followed");
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Backend);
        assert_eq!(
            err.message(),
            "Test get request failed: the server answered with a redirect \
             (HTTP 307 Temporary Redirect), which this client does not follow; check the base URL"
        );
        assert_eq!(a.received_requests().await.unwrap().len(), 1);
    }

    /// A server slow to answer may still have processed the request: a non-idempotent POST is
    /// then sent once, an idempotent one is retried.
    #[tokio::test]
    async fn a_post_that_may_have_been_processed_is_retried_only_if_idempotent() {
        for idempotent in [false, true] {
            let server = MockServer::start().await;
            let late = ResponseTemplate::new(200)
                .set_body_string("late")
                .set_delay(Duration::from_secs(3));
            first_then_ok(&server, late).await;
            let api = ApiClient {
                timeout: Duration::from_millis(300),
                ..api(&server)
            };
            let result = post(&api, api.base_url.clone(), idempotent).await;
            let received = server.received_requests().await.unwrap().len();
            if idempotent {
                assert_eq!(result.unwrap(), b"ok");
                assert_eq!(received, 2);
            } else {
                assert_eq!(received, 1, "a non-idempotent POST was sent twice");
                let err = result.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::Timeout);
                assert_eq!(
                    err.message(),
                    "Test add request failed: no answer from 127.0.0.1 within 0.3 s; not \
                     retried, since the server may have processed it and it is not safe to \
                     repeat"
                );
            }
        }
    }

    /// A non-idempotent POST is still retried when it provably was not processed: a 503
    /// answer, or no connection at all.
    #[tokio::test]
    async fn a_post_that_was_not_processed_is_retried() {
        let server = MockServer::start().await;
        first_then_ok(&server, ResponseTemplate::new(503)).await;
        let api = api(&server);
        let posted = post(&api, api.base_url.clone(), false).await.unwrap();
        assert_eq!(posted, b"ok");
        assert_eq!(server.received_requests().await.unwrap().len(), 2);
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let dead = Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
        let err = post(&api, dead, false).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.message().ends_with("(after 2 attempts)"), "{err}");
    }

    #[tokio::test]
    async fn failures_are_classified_retried_and_named() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(503))
            .expect(2)
            .mount(&server)
            .await;
        let api = api(&server);
        let err = get(&api).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(
            err.message(),
            "Test get request failed: refused (after 2 attempts)"
        );
        let debug = format!("{api:?}");
        assert!(debug.contains("service: \"Test\""), "{debug}");
        assert!(!debug.contains("x-api-key"), "{debug}");
    }
}
