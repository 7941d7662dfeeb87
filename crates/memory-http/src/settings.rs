//! [`HttpSettings`]: how patiently a client calls its service (timeouts, retries, the largest
//! answer), and [`HttpClientConfig`], the `with_*` setters of every client configuration that
//! holds them.

use std::time::Duration;

use memory_core::{Error, Result};

use crate::retry::{DEFAULT_MAX_BODY_BYTES, RetryPolicy};

/// How long opening a connection may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times a failed request is retried by default.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The first retry's delay by default; each further retry doubles it.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest a retry waits by default.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How patiently a client calls its service: plain data, part of each client's configuration
/// (`OpenAiConfig::http`, `Mem0Config::http`), changed with the setters of
/// [`HttpClientConfig`].
///
/// ```
/// use std::time::Duration;
/// use memory_http::{HttpClientConfig, HttpSettings};
///
/// let settings = HttpSettings::new(Duration::from_secs(60))
///     .with_max_retries(5)
///     .with_max_backoff(Duration::from_secs(10));
/// assert_eq!(settings.retry_policy().max_retries, 5);
/// assert!(settings.validate("Example").is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpSettings {
    /// How long one attempt may take, from sending the request to reading the whole answer.
    pub timeout: Duration,
    /// How long opening a connection may take (default 10 s). Applies to the HTTP client the
    /// client builds; a client given to it keeps its own.
    pub connect_timeout: Duration,
    /// How many times a request is retried after a rate limit (429), a server error (500,
    /// 502, 503, 504), a connection error or a timeout (default 3).
    pub max_retries: u32,
    /// The first retry's delay (default 500 ms); each further retry doubles it, with random
    /// jitter, up to [`max_backoff`](HttpSettings::max_backoff).
    pub initial_backoff: Duration,
    /// The longest a retry waits (default 30 s). A `Retry-After` the server sends is honoured
    /// up to this; when the server asks for a longer wait the request fails at once instead.
    pub max_backoff: Duration,
    /// The largest answer body read, in bytes (default [`DEFAULT_MAX_BODY_BYTES`], 16 MiB). A
    /// successful answer larger than this fails with
    /// [`ErrorKind::LimitExceeded`](memory_core::ErrorKind::LimitExceeded) and is not retried.
    pub max_body_bytes: usize,
}

impl HttpSettings {
    /// One attempt may take `timeout`; everything else is the default.
    pub const fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// The retry policy these settings describe.
    pub const fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.max_retries, self.initial_backoff, self.max_backoff)
    }

    /// Checks the settings of the client of `service` (`"OpenAI"`, `"Mem0"`: the message
    /// names it).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for a zero timeout or
    /// connect timeout.
    pub fn validate(&self, service: &str) -> Result<()> {
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::invalid_input(format!(
                "the {service} timeout and connect timeout must be longer than zero"
            )));
        }
        Ok(())
    }
}

/// The `with_*` setters of a configuration that holds [`HttpSettings`]: implement
/// [`http_settings_mut`](HttpClientConfig::http_settings_mut) and the rest comes with it.
/// Bring the trait into scope to call them (`use memory_openai::HttpClientConfig;`, or
/// memory-http's, or memory-mem0's: one trait).
///
/// ```
/// use std::time::Duration;
/// use memory_http::{HttpClientConfig, HttpSettings};
///
/// #[derive(Debug)]
/// struct MyConfig {
///     http: HttpSettings,
/// }
///
/// impl HttpClientConfig for MyConfig {
///     fn http_settings_mut(&mut self) -> &mut HttpSettings {
///         &mut self.http
///     }
/// }
///
/// let config = MyConfig { http: HttpSettings::new(Duration::from_secs(30)) }.with_max_retries(0);
/// assert_eq!(config.http.max_retries, 0);
/// ```
pub trait HttpClientConfig: Sized {
    /// The settings the setters change.
    fn http_settings_mut(&mut self) -> &mut HttpSettings;

    /// Sets the time one attempt may take.
    fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http_settings_mut().timeout = timeout;
        self
    }

    /// Sets the time opening a connection may take.
    fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.http_settings_mut().connect_timeout = timeout;
        self
    }

    /// Sets how many times a failed request is retried (0: never).
    fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.http_settings_mut().max_retries = max_retries;
        self
    }

    /// Sets the first retry's delay.
    fn with_initial_backoff(mut self, backoff: Duration) -> Self {
        self.http_settings_mut().initial_backoff = backoff;
        self
    }

    /// Sets the longest a retry waits.
    fn with_max_backoff(mut self, backoff: Duration) -> Self {
        self.http_settings_mut().max_backoff = backoff;
        self
    }

    /// Sets the largest answer body read, in bytes (at least 1).
    fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.http_settings_mut().max_body_bytes = max_body_bytes.max(1);
        self
    }
}

impl HttpClientConfig for HttpSettings {
    fn http_settings_mut(&mut self) -> &mut HttpSettings {
        self
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    #[test]
    fn setters_change_one_setting_each() {
        let base = HttpSettings::new(Duration::from_secs(60));
        assert_eq!(base.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(base.max_retries, DEFAULT_MAX_RETRIES);
        assert_eq!(base.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        let changed = base
            .with_timeout(Duration::from_secs(5))
            .with_connect_timeout(Duration::from_secs(2))
            .with_max_retries(7)
            .with_initial_backoff(Duration::from_millis(20))
            .with_max_backoff(Duration::from_secs(1))
            .with_max_body_bytes(0);
        assert_eq!(changed.timeout, Duration::from_secs(5));
        assert_eq!(changed.connect_timeout, Duration::from_secs(2));
        assert_eq!(
            changed.retry_policy(),
            RetryPolicy::new(7, Duration::from_millis(20), Duration::from_secs(1))
        );
        // At least one byte.
        assert_eq!(changed.max_body_bytes, 1);
    }

    #[test]
    fn zero_timeouts_are_invalid_input_naming_the_service() {
        assert!(
            HttpSettings::new(Duration::from_secs(1))
                .validate("X")
                .is_ok()
        );
        for bad in [
            HttpSettings::new(Duration::ZERO),
            HttpSettings::new(Duration::from_secs(1)).with_connect_timeout(Duration::ZERO),
        ] {
            let err = bad.validate("Example").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert!(err.to_string().contains("the Example timeout"), "{err}");
        }
    }
}
