//! [`ApiKey`]: a secret string that never prints.

use std::fmt;

use memory_core::REDACTED;

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
}
