//! [`ApiKey`]: a secret string that never prints.

use std::fmt;

use memory_core::{Error, REDACTED, Result};
use reqwest::header::HeaderValue;

/// An API key.
///
/// Its `Debug` and `Display` print memory-core's [`REDACTED`] (`***`), and it implements
/// neither `Serialize` nor `PartialEq`: the clients read it only to build their auth header
/// (which they mark sensitive) and to scrub it from server messages. Call [`ApiKey::expose`]
/// to read it yourself.
///
/// ```
/// use memory_http::ApiKey;
///
/// let key = ApiKey::new("sk-test-123");
/// assert_eq!(format!("{key:?}"), "\"***\"");
/// assert_eq!(key.to_string(), "***");
/// assert_eq!(key.expose(), "sk-test-123");
/// ```
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself. Keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the key is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The key as a header value marked sensitive (`reqwest` leaves it out of its `Debug`),
    /// after `scheme` and a space when there is one (`"Bearer"`, `"Token"`).
    ///
    /// ```
    /// let value = memory_http::ApiKey::new("sk-1").header_value(Some("Bearer"), "Example")?;
    /// assert_eq!(value.to_str().unwrap(), "Bearer sk-1");
    /// assert!(value.is_sensitive());
    /// # Ok::<(), memory_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) when the key holds a
    /// character a header cannot carry; the message names `service` (`"OpenAI"`, `"Mem0"`) and
    /// never the key.
    pub fn header_value(&self, scheme: Option<&str>, service: &str) -> Result<HeaderValue> {
        let text = match scheme {
            Some(scheme) => format!("{scheme} {}", self.0),
            None => self.0.clone(),
        };
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            Error::invalid_input(format!("the {service} API key cannot be sent in a header"))
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(REDACTED, f)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        Self(key)
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> Self {
        Self(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact() {
        let key = ApiKey::new("sk-secret-value");
        assert!(!format!("{key:?}").contains("secret"));
        assert!(!format!("{key:#?}").contains("secret"));
        assert!(!key.to_string().contains("secret"));
        assert!(!format!("{:?}", Some(key.clone())).contains("secret"));
        assert_eq!(key.expose(), "sk-secret-value");
    }

    #[test]
    fn a_key_a_header_cannot_carry_is_invalid_input_without_the_key() {
        let err = ApiKey::new("sk-abc\ndef")
            .header_value(Some("Bearer"), "Example")
            .unwrap_err();
        assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("the Example API key"), "{err}");
        assert!(!err.to_string().contains("sk-abc"), "{err}");
        let bare = ApiKey::new("k-1").header_value(None, "Example").unwrap();
        assert_eq!(bare.to_str().unwrap(), "k-1");
        assert!(bare.is_sensitive());
    }
}
