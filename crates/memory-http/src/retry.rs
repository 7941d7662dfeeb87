//! Retries: the [`RetryPolicy`], the waits servers ask for (`Retry-After`, `retry-after-ms`),
//! and [`send_with_retries`], the loop that sends a request until it succeeds, fails for good
//! or runs out of retries.

use std::time::Duration;

use memory_core::{ErrorKind, Result};
use reqwest::header::{self, HeaderMap};
use reqwest::{RequestBuilder, StatusCode};

use crate::error::{Failure, Retry, transport_failure};

/// How many times, and how patiently, a failed request is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times a request is retried after a retryable failure (0: never); a request is
    /// sent at most `max_retries + 1` times.
    pub max_retries: u32,
    /// The first retry's delay; each further retry doubles it, with random jitter, up to
    /// [`max_backoff`](RetryPolicy::max_backoff).
    pub initial_backoff: Duration,
    /// The longest a retry waits. A wait the server asks for is honoured up to this; when the
    /// server asks for a longer wait the request fails at once instead.
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// At most `max_retries` retries, waiting `initial_backoff` doubled at each retry, at most
    /// `max_backoff`.
    pub const fn new(max_retries: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            max_retries,
            initial_backoff,
            max_backoff,
        }
    }

    /// The delay before retry number `retry` (0 for the first): `initial_backoff * 2^retry`,
    /// capped at `max_backoff`, then scaled by a random factor in `[0.5, 1.0)` so that many
    /// clients do not retry in step.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(20));
        let full = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        full.mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

/// The longest wait [`retry_after`] and [`retry_after_ms`] report (about 31.7 years): a larger
/// value a server sends is read as this. Any wait longer than the policy's
/// [`max_backoff`](RetryPolicy::max_backoff) fails the request at once anyway.
pub const MAX_SERVER_WAIT: Duration = Duration::from_secs(1_000_000_000);

/// The wait a response asks for with `Retry-After`: seconds (fractions allowed) or an HTTP
/// date (a date in the past is no wait), at most [`MAX_SERVER_WAIT`]. `None` without the
/// header, or for a value that is neither (negative, NaN and infinite numbers included).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return seconds(secs);
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date
        .with_timezone(&chrono::Utc)
        .signed_duration_since(chrono::Utc::now());
    Some(wait.to_std().unwrap_or(Duration::ZERO).min(MAX_SERVER_WAIT))
}

/// The wait a response asks for with `retry-after-ms` (milliseconds, as OpenAI and compatible
/// servers send it), at most [`MAX_SERVER_WAIT`]. `None` without the header, or for a value
/// that is not a finite, non-negative number of milliseconds.
pub fn retry_after_ms(headers: &HeaderMap) -> Option<Duration> {
    let ms = headers
        .get("retry-after-ms")?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()?;
    seconds(ms / 1000.0)
}

/// `secs` as a wait, at most [`MAX_SERVER_WAIT`]; `None` when negative, NaN or infinite.
/// Never panics (`Duration::from_secs_f64` would on a value too large for a `Duration`).
fn seconds(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        secs.min(MAX_SERVER_WAIT.as_secs_f64()),
    ))
}

/// What one request is, for messages and traces, and how long one attempt may take.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The service, as messages name it: `"OpenAI"`, `"Mem0"`.
    pub service: &'a str,
    /// What the request does: `"chat completion"`, `"search"`.
    pub what: &'a str,
    /// The server's host, for messages about transport errors.
    pub host: &'a str,
    /// How long one attempt may take, from sending the request to reading the whole answer.
    pub timeout: Duration,
    /// The largest answer body read, in bytes ([`DEFAULT_MAX_BODY_BYTES`] is a sane default for
    /// JSON APIs). The body is read chunk by chunk and reading stops past this: a successful
    /// answer that is larger fails with [`ErrorKind::LimitExceeded`](memory_core::ErrorKind)
    /// (not retried), an error answer is cut to this size before it is classified.
    pub max_body_bytes: usize,
    /// Whether sending the request twice does no more than sending it once (a read, a `PUT`,
    /// a `DELETE`, a `POST` without side effects such as a chat completion, or one with an
    /// idempotency key). A request that is not is retried only when it provably was not
    /// processed: the connection could not be made, or the server answered 429 or 503; never
    /// after a timeout, a dropped connection or another error answer.
    pub idempotent: bool,
}

/// The default of [`RequestInfo::max_body_bytes`] and
/// [`ApiClient::max_body_bytes`](crate::ApiClient::max_body_bytes): 16 MiB, far more than a
/// JSON API answer needs (a batch of embeddings included), small enough that a broken or
/// hostile server cannot exhaust memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// An answer whose status is not a success, for the classifier of [`send_with_retries`].
#[derive(Debug, Clone, Copy)]
pub struct ErrorResponse<'a> {
    /// Its status.
    pub status: StatusCode,
    /// Its headers (for [`retry_after`] and [`retry_after_ms`]).
    pub headers: &'a HeaderMap,
    /// Its whole body.
    pub body: &'a [u8],
}

/// Sends the request `build` makes, with `info.timeout` per attempt, and returns the body of the
/// first successful (2xx) answer.
///
/// A redirect answer (3xx) fails at once with [`ErrorKind::Backend`]: redirects are not followed
/// (see [`http_client_builder`](crate::http_client_builder)), so the API key never goes to
/// another server. An answer with another status is given to `classify`, which says what it
/// means and whether to retry it (a rate limit with [`Retry::from_hint`], a quota with [`Retry::No`]...); a
/// transport error is mapped by [`transport_failure`]. A failure is retried, with `build`
/// called again for each attempt, while the policy's `max_retries` allow it: after the
/// [`backoff`](RetryPolicy::backoff), or after the wait the server asked for, unless that wait
/// is longer than `max_backoff`, which fails the request at once. A request that is not
/// [`idempotent`](RequestInfo::idempotent) is retried only when it surely was not processed (no
/// connection could be made, or a 429 or 503 answer), never after a timeout, a dropped
/// connection or another error answer.
///
/// Records `attempts` and `status` on the current `tracing` span (declare them as empty fields
/// of the span the call runs in), logs each retry as a warning and each answer at debug level.
///
/// # Errors
/// The last failure as an error of its kind, with the message
/// `"{service} {what} request failed: {message} (after {n} attempts)"`.
pub async fn send_with_retries<B, C>(
    policy: &RetryPolicy,
    info: &RequestInfo<'_>,
    mut build: B,
    classify: C,
) -> Result<Vec<u8>>
where
    B: FnMut() -> RequestBuilder,
    C: Fn(&ErrorResponse<'_>) -> Failure,
{
    let span = tracing::Span::current();
    let mut attempt: u32 = 0;
    loop {
        attempt = attempt.saturating_add(1);
        span.record("attempts", attempt);
        let mut failure = match send_once(info, build(), &classify).await {
            Ok(bytes) => return Ok(bytes),
            Err(failure) => failure,
        };
        if !info.idempotent && failure.retry != Retry::No && !provably_unprocessed(&failure) {
            failure.retry = Retry::No;
            failure.message.push_str(
                "; not retried, since the server may have processed it and it is not safe to \
                 repeat",
            );
        }
        let delay = match failure.retry {
            Retry::No => return Err(failure.into_error(info.service, info.what, attempt)),
            _ if attempt > policy.max_retries => {
                return Err(failure.into_error(info.service, info.what, attempt));
            }
            Retry::After(wait) if wait > policy.max_backoff => {
                let mut failure = failure;
                failure.message.push_str(&format!(
                    "; the server asked to wait {:.1} s before retrying, longer than the \
                     {:.1} s this client waits at most",
                    wait.as_secs_f64(),
                    policy.max_backoff.as_secs_f64()
                ));
                return Err(failure.into_error(info.service, info.what, attempt));
            }
            Retry::After(wait) => wait,
            Retry::Backoff => policy.backoff(attempt.saturating_sub(1)),
        };
        tracing::warn!(
            attempt,
            status = failure.status.map(|s| s.as_u16()),
            kind = failure.kind.as_str(),
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "{} {} request failed; retrying",
            info.service,
            info.what
        );
        tokio::time::sleep(delay).await;
    }
}

/// Whether the request that failed with `failure` surely was not processed, so that even a
/// request that is not idempotent can be sent again: the connection could not be made, or the
/// server answered 429 (rate limited) or 503 (unavailable), which say the request was refused
/// before any work. A timeout, a dropped connection or another error answer (500, 502, 504...)
/// leaves it open whether the server acted on the request.
fn provably_unprocessed(failure: &Failure) -> bool {
    match failure.status {
        Some(status) => matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ),
        None => failure
            .source
            .as_ref()
            .is_some_and(|err| err.is_connect() && !err.is_body()),
    }
}

/// One attempt: the body of a successful answer, or what went wrong and whether to retry.
async fn send_once<C>(
    info: &RequestInfo<'_>,
    request: RequestBuilder,
    classify: &C,
) -> std::result::Result<Vec<u8>, Failure>
where
    C: Fn(&ErrorResponse<'_>) -> Failure,
{
    let response = request
        .timeout(info.timeout)
        .send()
        .await
        .map_err(|err| transport_failure(err, info.host, info.timeout))?;
    let status = response.status();
    tracing::Span::current().record("status", status.as_u16());
    let headers = if status.is_success() {
        HeaderMap::new()
    } else {
        response.headers().clone()
    };
    let bytes = read_body(response, status.is_success(), info).await?;
    tracing::debug!(
        status = status.as_u16(),
        bytes = bytes.len(),
        "{} response",
        info.service
    );
    if status.is_success() {
        return Ok(bytes);
    }
    if status.is_redirection() {
        return Err(Failure::from_status(
            status,
            ErrorKind::Backend,
            format!(
                "the server answered with a redirect (HTTP {}), which this client does not \
                 follow; check the base URL",
                crate::status_text(status)
            ),
            Retry::No,
        ));
    }
    Err(classify(&ErrorResponse {
        status,
        headers: &headers,
        body: &bytes,
    }))
}

/// The body of `response`, read chunk by chunk and never past `info.max_body_bytes`: over it, a
/// successful answer (`success`) is a [`ErrorKind::LimitExceeded`] failure, not retried, and an
/// error answer is cut to the cap (its classifier only needs its start).
async fn read_body(
    mut response: reqwest::Response,
    success: bool,
    info: &RequestInfo<'_>,
) -> std::result::Result<Vec<u8>, Failure> {
    let cap = info.max_body_bytes;
    let too_large = || Failure {
        kind: ErrorKind::LimitExceeded,
        message: format!(
            "the answer from {} is larger than the {cap} bytes this client reads",
            info.host
        ),
        status: None,
        retry: Retry::No,
        source: None,
    };
    let announced = response
        .content_length()
        .and_then(|len| usize::try_from(len).ok());
    if success && announced.is_some_and(|len| len > cap) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(announced.unwrap_or(0).min(cap));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| transport_failure(err, info.host, info.timeout))?
    {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            if success {
                return Err(too_large());
            }
            body.extend_from_slice(chunk.get(..room).unwrap_or_default());
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use memory_core::ErrorKind;
    use reqwest::header::HeaderValue;
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn policy(initial: Duration, max: Duration) -> RetryPolicy {
        RetryPolicy::new(2, initial, max)
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let initial = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        let policy = policy(initial, max);
        for _ in 0..50 {
            let first = policy.backoff(0);
            assert!(
                first >= Duration::from_millis(50) && first < initial,
                "{first:?}"
            );
            let third = policy.backoff(2);
            assert!(third >= Duration::from_millis(200) && third < Duration::from_millis(400));
            assert!(policy.backoff(10) < max);
            assert!(policy.backoff(u32::MAX) < max);
        }
        assert_eq!(
            RetryPolicy {
                initial_backoff: Duration::ZERO,
                ..policy
            }
            .backoff(3),
            Duration::ZERO
        );
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
        let header = |value: &str| headers(&[("retry-after", value)]);
        assert_eq!(retry_after(&header("2")), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after(&header("0.5")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(&header("0.25")),
            Some(Duration::from_millis(250))
        );
        let later = chrono::Utc::now() + chrono::Duration::seconds(30);
        let date = later.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let wait = retry_after(&header(&date)).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(
            retry_after(&header("Wed, 21 Oct 2015 07:28:00 GMT")),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&header("soon")), None);
        assert_eq!(retry_after(&header("-1")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
        // `retry-after-ms` is a separate header, read by `retry_after_ms`.
        assert_eq!(retry_after(&headers(&[("retry-after-ms", "250")])), None);
    }

    #[test]
    fn retry_after_ms_forms() {
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after-ms", " 1.5 ")])),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(retry_after_ms(&headers(&[("retry-after-ms", "-1")])), None);
        assert_eq!(retry_after_ms(&headers(&[("retry-after-ms", "NaN")])), None);
        assert_eq!(retry_after_ms(&headers(&[("retry-after", "9")])), None);
    }

    #[test]
    fn huge_waits_are_capped_not_panics() {
        for value in ["1e300", "1e20", "inf", "-inf", "NaN", "-1", "1e-300"] {
            let ms = retry_after_ms(&headers(&[("retry-after-ms", value)]));
            let secs = retry_after(&headers(&[("retry-after", value)]));
            for wait in [ms, secs].into_iter().flatten() {
                assert!(wait <= MAX_SERVER_WAIT, "{value}: {wait:?}");
            }
        }
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after-ms", "1e300")])),
            Some(MAX_SERVER_WAIT)
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1e300")])),
            Some(MAX_SERVER_WAIT)
        );
        assert_eq!(retry_after_ms(&headers(&[("retry-after-ms", "inf")])), None);
    }

    /// A 429 asking for an absurd wait (`retry-after-ms: 1e300`) fails at once with a typed
    /// error instead of panicking the client.
    #[tokio::test]
    async fn an_absurd_retry_after_ms_fails_at_once_without_panicking() {
        let server = MockServer::start().await;
        answers(
            &server,
            ResponseTemplate::new(429).insert_header("retry-after-ms", "1e300"),
            1,
        )
        .await;
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let url = server.uri();
        let result = send_with_retries(
            &quick,
            &info("127.0.0.1"),
            || client.get(&url),
            |response: &ErrorResponse<'_>| {
                Failure::from_status(
                    response.status,
                    ErrorKind::LimitExceeded,
                    "rate limited",
                    Retry::from_hint(retry_after_ms(response.headers)),
                )
            },
        )
        .await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert!(
            err.message().contains("longer than the 1.0 s"),
            "{}",
            err.message()
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }

    #[test]
    fn hints_make_retries() {
        assert_eq!(Retry::from_hint(None), Retry::Backoff);
        assert_eq!(
            Retry::from_hint(Some(Duration::from_secs(1))),
            Retry::After(Duration::from_secs(1))
        );
    }

    fn info(host: &str) -> RequestInfo<'_> {
        RequestInfo {
            service: "Test",
            what: "lookup",
            host,
            timeout: Duration::from_secs(5),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            idempotent: true,
        }
    }

    /// 429 and 503 are retried honouring `Retry-After`; 400 and a 429 saying "quota" are not.
    fn classify(response: &ErrorResponse<'_>) -> Failure {
        let quota = response.body.starts_with(b"quota");
        let (kind, retry) = match response.status.as_u16() {
            429 if quota => (ErrorKind::LimitExceeded, Retry::No),
            429 => (
                ErrorKind::LimitExceeded,
                Retry::from_hint(retry_after(response.headers)),
            ),
            503 => (
                ErrorKind::Unavailable,
                Retry::from_hint(retry_after(response.headers)),
            ),
            _ => (ErrorKind::InvalidInput, Retry::No),
        };
        Failure::from_status(response.status, kind, "refused", retry)
    }

    async fn answers(server: &MockServer, first: ResponseTemplate, times: u64) {
        Mock::given(any())
            .respond_with(first)
            .up_to_n_times(times)
            .with_priority(1)
            .mount(server)
            .await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .mount(server)
            .await;
    }

    async fn send(server: &MockServer, policy: &RetryPolicy) -> (Result<Vec<u8>>, usize) {
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let built = AtomicUsize::new(0);
        let url = server.uri();
        let result = send_with_retries(
            policy,
            &info("127.0.0.1"),
            || {
                built.fetch_add(1, Ordering::SeqCst);
                client.get(&url)
            },
            classify,
        )
        .await;
        (result, built.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn retryable_failures_are_retried_then_succeed() {
        let server = MockServer::start().await;
        answers(
            &server,
            ResponseTemplate::new(503).insert_header("retry-after", "0"),
            2,
        )
        .await;
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let (result, built) = send(&server, &quick).await;
        assert_eq!(result.unwrap(), b"ok");
        assert_eq!(built, 3);
    }

    #[tokio::test]
    async fn retries_run_out() {
        let server = MockServer::start().await;
        answers(&server, ResponseTemplate::new(429), 10).await;
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let (result, built) = send(&server, &quick).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert_eq!(
            err.message(),
            "Test lookup request failed: refused (after 3 attempts)"
        );
        assert_eq!(built, 3);
    }

    #[tokio::test]
    async fn failures_the_classifier_does_not_retry_fail_at_once() {
        let server = MockServer::start().await;
        answers(
            &server,
            ResponseTemplate::new(429).set_body_string("quota"),
            1,
        )
        .await;
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let (result, built) = send(&server, &quick).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert_eq!(err.message(), "Test lookup request failed: refused");
        assert_eq!(built, 1);
    }

    #[tokio::test]
    async fn a_wait_longer_than_the_cap_fails_at_once() {
        let server = MockServer::start().await;
        answers(
            &server,
            ResponseTemplate::new(503).insert_header("retry-after", "120"),
            1,
        )
        .await;
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let (result, built) = send(&server, &quick).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(
            err.to_string().contains(
                "the server asked to wait 120.0 s before retrying, longer than the 1.0 s"
            ),
            "{err}"
        );
        assert_eq!(built, 1);
    }

    /// A successful answer larger than the cap fails with `LimitExceeded` and is not retried;
    /// an error answer larger than the cap is cut to it and still classified.
    #[tokio::test]
    async fn answers_over_the_body_cap_are_refused() {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::path("/big"))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b'x'; 100_000]))
            .mount(&server)
            .await;
        Mock::given(wiremock::matchers::path("/fits"))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b'y'; 1_000]))
            .mount(&server)
            .await;
        Mock::given(wiremock::matchers::path("/bad"))
            .respond_with(ResponseTemplate::new(400).set_body_bytes(vec![b'z'; 100_000]))
            .mount(&server)
            .await;
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let quick = policy(Duration::from_millis(1), Duration::from_secs(1));
        let small = RequestInfo {
            max_body_bytes: 1_000,
            ..info("127.0.0.1")
        };
        let uri = server.uri();
        let get = |path: &'static str| {
            let client = &client;
            let uri = &uri;
            move || client.get(format!("{uri}{path}"))
        };
        let err = send_with_retries(&quick, &small, get("/big"), classify)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert_eq!(
            err.message(),
            "Test lookup request failed: the answer from 127.0.0.1 is larger than the \
             1000 bytes this client reads"
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
        let fits = send_with_retries(&quick, &small, get("/fits"), classify)
            .await
            .unwrap();
        assert_eq!(fits.len(), 1_000);
        let seen = std::sync::Mutex::new(0);
        let err = send_with_retries(&quick, &small, get("/bad"), |response| {
            *seen.lock().unwrap() = response.body.len();
            classify(response)
        })
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(*seen.lock().unwrap(), 1_000);
    }

    #[tokio::test]
    async fn transport_errors_are_retried() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let quick = RetryPolicy {
            max_retries: 1,
            ..policy(Duration::from_millis(1), Duration::from_secs(1))
        };
        let err = send_with_retries(
            &quick,
            &info("127.0.0.1"),
            || client.get(format!("http://127.0.0.1:{port}/")),
            classify,
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(
            err.message(),
            "Test lookup request failed: could not connect to 127.0.0.1 (after 2 attempts)"
        );
    }
}
