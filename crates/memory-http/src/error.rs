//! What went wrong in one attempt ([`Failure`]) and whether to retry it ([`Retry`]), and the
//! mapping of transport errors to [`ErrorKind`]s.

use std::time::Duration;

use memory_core::{Error, ErrorKind};
use reqwest::StatusCode;

/// Whether and when to retry a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Never: the same request fails the same way.
    No,
    /// After the exponential backoff of the [`RetryPolicy`](crate::RetryPolicy).
    Backoff,
    /// After the wait the server asked for.
    After(Duration),
}

impl Retry {
    /// [`Retry::After`] the wait the server asked for, if it asked, else [`Retry::Backoff`].
    pub fn from_hint(hint: Option<Duration>) -> Self {
        hint.map_or(Retry::Backoff, Retry::After)
    }
}

/// The longest piece of a non-JSON error body [`quote_body`] keeps.
pub const MAX_QUOTED_BODY: usize = 300;

/// What went wrong in one attempt of a request, and whether to retry it.
///
/// A classifier given to [`send_with_retries`](crate::send_with_retries) makes one of an error
/// answer; [`transport_failure`] makes one of a `reqwest` error.
#[derive(Debug)]
pub struct Failure {
    /// The kind of the error the request fails with.
    pub kind: ErrorKind,
    /// What went wrong, without the service's name or the request's (the error message puts
    /// `"{service} {what} request failed: "` before it). Keep secrets out of it.
    pub message: String,
    /// The answer's status, if there was an answer.
    pub status: Option<StatusCode>,
    /// Whether and when to retry.
    pub retry: Retry,
    /// The transport error, without its URL, if there was one.
    pub source: Option<reqwest::Error>,
}

impl Failure {
    /// A failure for an answer with `status`.
    pub fn from_status(
        status: StatusCode,
        kind: ErrorKind,
        message: impl Into<String>,
        retry: Retry,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            status: Some(status),
            retry,
            source: None,
        }
    }

    /// The error the request of `service` (`"OpenAI"`) doing `what` (`"chat completion"`)
    /// fails with after `attempts` attempts:
    /// `"{service} {what} request failed: {message} (after {attempts} attempts)"`. It names
    /// the service in lower case as its backend and `what` as its operation, and is temporary
    /// when the failure was one to retry (a rate limit, an overloaded server, a dropped
    /// connection: whatever its kind) or its kind is.
    pub(crate) fn into_error(self, service: &str, what: &str, attempts: u32) -> Error {
        let tries = if attempts > 1 {
            format!(" (after {attempts} attempts)")
        } else {
            String::new()
        };
        let temporary = self.kind.is_temporary() || self.retry != Retry::No;
        let error = Error::new(
            self.kind,
            format!("{service} {what} request failed: {}{tries}", self.message),
        )
        .with_backend(service.to_ascii_lowercase())
        .with_operation(what.to_owned())
        .with_temporary(temporary);
        match self.source {
            Some(source) => error.with_source(source),
            None => error,
        }
    }
}

/// A `reqwest` error that left no answer as a [`Failure`]: a timeout is
/// [`ErrorKind::Timeout`], a connection that could not be made or broke off is
/// [`ErrorKind::Unavailable`] (all retried with backoff), anything else is
/// [`ErrorKind::Backend`] (not retried).
///
/// `host` (the server's) and `timeout` (the attempt's) go into the message; the URL, which may
/// carry a secret, is dropped from the error.
pub fn transport_failure(err: reqwest::Error, host: &str, timeout: Duration) -> Failure {
    let (kind, message, retry) = if err.is_timeout() {
        (
            ErrorKind::Timeout,
            format!(
                "no answer from {host} within {:.1} s",
                timeout.as_secs_f64()
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

/// `"401 Unauthorized"`, or the bare code when it has no reason phrase.
pub fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The start of an error body that is not JSON, trimmed, for a message: at most
/// [`MAX_QUOTED_BODY`] characters, with `...` when cut; `None` for an empty body.
pub fn quote_body(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let quoted: String = text.chars().take(MAX_QUOTED_BODY).collect();
    (!quoted.is_empty()).then(|| {
        if quoted.len() < text.len() {
            format!("{quoted}...")
        } else {
            quoted
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_their_reason() {
        assert_eq!(status_text(StatusCode::UNAUTHORIZED), "401 Unauthorized");
        assert_eq!(status_text(StatusCode::from_u16(599).unwrap()), "599");
    }

    #[test]
    fn bodies_are_quoted_briefly() {
        assert_eq!(
            quote_body(b" <html>Bad Gateway</html>\n").as_deref(),
            Some("<html>Bad Gateway</html>")
        );
        let long = quote_body(&[b'x'; 1000]).unwrap();
        assert_eq!(long.len(), MAX_QUOTED_BODY + 3);
        assert!(long.ends_with("..."));
        assert_eq!(quote_body(b"  "), None);
    }

    #[test]
    fn errors_name_the_service_request_and_attempts() {
        let failure = Failure::from_status(
            StatusCode::NOT_FOUND,
            ErrorKind::NotFound,
            "not found",
            Retry::No,
        );
        let err = failure.into_error("Test", "lookup", 1);
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.message(), "Test lookup request failed: not found");
        assert_eq!(err.backend(), Some("test"));
        assert_eq!(err.operation(), Some("lookup"));
        assert!(!err.is_temporary());
        assert_eq!(
            err.to_string(),
            "not_found (test lookup): Test lookup request failed: not found"
        );
        let failure = Failure::from_status(
            StatusCode::BAD_GATEWAY,
            ErrorKind::Unavailable,
            "down",
            Retry::Backoff,
        );
        let err = failure.into_error("Test", "lookup", 3);
        assert!(
            err.to_string().ends_with("down (after 3 attempts)"),
            "{err}"
        );
        assert!(err.is_temporary());
    }

    #[test]
    fn a_failure_to_retry_is_temporary_whatever_its_kind() {
        let rate_limited = Failure::from_status(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::LimitExceeded,
            "rate limited",
            Retry::from_hint(Some(Duration::from_secs(1))),
        );
        assert!(rate_limited.into_error("Test", "lookup", 1).is_temporary());
        let quota = Failure::from_status(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::LimitExceeded,
            "quota exceeded",
            Retry::No,
        );
        assert!(!quota.into_error("Test", "lookup", 1).is_temporary());
    }

    #[tokio::test]
    async fn a_dead_port_is_unavailable_and_retried() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let err = client
            .get(format!("http://user:pw@127.0.0.1:{port}/x"))
            .send()
            .await
            .unwrap_err();
        let failure = transport_failure(err, "127.0.0.1", Duration::from_secs(1));
        assert_eq!(failure.kind, ErrorKind::Unavailable);
        assert_eq!(failure.retry, Retry::Backoff);
        assert_eq!(failure.message, "could not connect to 127.0.0.1");
        let source = failure.source.unwrap();
        assert!(source.url().is_none());
    }

    #[tokio::test]
    async fn a_slow_server_is_a_timeout_and_retried() {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::any())
            .respond_with(wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
            .mount(&server)
            .await;
        let client = crate::build_client(crate::http_client_builder().unwrap()).unwrap();
        let err = client
            .get(server.uri())
            .timeout(Duration::from_millis(100))
            .send()
            .await
            .unwrap_err();
        let failure = transport_failure(err, "127.0.0.1", Duration::from_millis(100));
        assert_eq!(failure.kind, ErrorKind::Timeout);
        assert_eq!(failure.retry, Retry::Backoff);
        assert_eq!(failure.message, "no answer from 127.0.0.1 within 0.1 s");
    }
}
