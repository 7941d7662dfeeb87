//! [`QdrantStoreConfig`]: where the Qdrant server is and how the store uses it.

use std::fmt;
use std::time::Duration;

use memory_core::{Error, REDACTED, Result, redact_url};

/// The collection a store uses unless told otherwise.
pub const DEFAULT_COLLECTION: &str = "agent_memory";
/// How many points one upsert request carries at most.
pub const DEFAULT_UPSERT_BATCH: usize = 256;

/// Plain-data configuration of a [`QdrantStore`](crate::QdrantStore). `Debug` never prints the
/// API key.
///
/// ```
/// use memory_vector::QdrantStoreConfig;
///
/// let config = QdrantStoreConfig::from_url("http://localhost:6334")
///     .unwrap()
///     .with_api_key("secret")
///     .with_collection("memories")
///     .with_dimensions(384);
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct QdrantStoreConfig {
    /// The gRPC URL (`http://host:6334` or `https://…`).
    pub url: String,
    /// The API key, sent as the `api-key` header.
    pub api_key: Option<String>,
    /// The collection (created at first use).
    pub collection: String,
    /// The vectors' dimension (usually the embedder's); when `None`, the first upsert fixes it.
    pub dimensions: Option<usize>,
    /// How many points one upsert request carries at most.
    pub upsert_batch_size: usize,
    /// The timeout of each request.
    pub timeout: Duration,
}

impl QdrantStoreConfig {
    /// A configuration for the server at `url` (`http://` or `https://`), with the default
    /// collection.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL of another scheme.
    pub fn from_url(url: impl Into<String>) -> Result<Self> {
        let url = url.into();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::invalid_input(format!(
                "a Qdrant URL starts with http:// or https://, got {:?}",
                redact_url(&url)
            )));
        };
        if !matches!(scheme, "http" | "https") || rest.is_empty() {
            return Err(Error::invalid_input(format!(
                "a Qdrant URL starts with http:// or https:// and names a host, got {:?}",
                redact_url(&url)
            )));
        }
        check_user_info(&url)?;
        Ok(Self {
            url,
            api_key: None,
            collection: DEFAULT_COLLECTION.to_owned(),
            dimensions: None,
            upsert_batch_size: DEFAULT_UPSERT_BATCH,
            timeout: Duration::from_secs(30),
        })
    }

    /// A configuration from `QDRANT_URL`, `QDRANT_API_KEY` (optional) and `QDRANT_COLLECTION`
    /// (optional).
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when `QDRANT_URL` is unset or
    /// invalid.
    pub fn from_env() -> Result<Self> {
        let url = std::env::var("QDRANT_URL")
            .map_err(|_| Error::invalid_input("QDRANT_URL is not set"))?;
        let mut config = Self::from_url(url)?;
        config.api_key = std::env::var("QDRANT_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        if let Ok(collection) = std::env::var("QDRANT_COLLECTION")
            && !collection.is_empty()
        {
            config.collection = collection;
        }
        Ok(config)
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the collection.
    pub fn with_collection(mut self, collection: impl Into<String>) -> Self {
        self.collection = collection.into();
        self
    }

    /// Sets the vectors' dimension (usually `embedder.dimensions()`).
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// Sets how many points one upsert request carries at most (at least 1).
    pub fn with_upsert_batch_size(mut self, size: usize) -> Self {
        self.upsert_batch_size = size.max(1);
        self
    }

    /// Sets the timeout of each request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Refuses a URL whose user or password holds a raw `/`, `?`, `#` or `@`: the client would
/// read part of the password as the host and quote it in its connection errors, where no
/// exact-match scrubbing finds it. Percent-encoded, they are fine.
pub(crate) fn check_user_info(url: &str) -> Result<()> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    if authority.matches('@').count() > 1 || after.contains('@') {
        return Err(Error::invalid_input(format!(
            "the user or password of the Qdrant URL {:?} holds a raw '/', '?', '#' or '@': \
             percent-encode them (%2F, %3F, %23, %40)",
            redact_url(url)
        )));
    }
    Ok(())
}

impl fmt::Debug for QdrantStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QdrantStoreConfig")
            .field("url", &redact_url(&self.url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("collection", &self.collection)
            .field("dimensions", &self.dimensions)
            .field("upsert_batch_size", &self.upsert_batch_size)
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_and_https_urls_only() {
        let c = QdrantStoreConfig::from_url("http://127.0.0.1:6334").unwrap();
        assert_eq!(c.collection, DEFAULT_COLLECTION);
        assert_eq!(c.upsert_batch_size, DEFAULT_UPSERT_BATCH);
        assert!(QdrantStoreConfig::from_url("https://cloud.example:6334").is_ok());
        for bad in ["localhost:6334", "redis://x", "http://", ""] {
            assert!(QdrantStoreConfig::from_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_redacts_the_api_key() {
        let c = QdrantStoreConfig::from_url("http://h:6334")
            .unwrap()
            .with_api_key("top-secret-key")
            .with_upsert_batch_size(0);
        let printed = format!("{c:?}");
        assert!(!printed.contains("top-secret-key"), "{printed}");
        assert!(printed.contains(REDACTED));
        assert_eq!(c.upsert_batch_size, 1);
    }

    #[test]
    fn urls_are_shown_without_their_password() {
        // A raw '/' in the password is refused (the client would take part of it for the host
        // and quote it in its errors), without showing it; percent-encoded it is fine.
        let err = QdrantStoreConfig::from_url("https://u:pa/ss@cloud.example:6334").unwrap_err();
        assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput);
        assert!(!format!("{err} {err:?}").contains("pa/ss"), "{err}");
        for raw in ["http://u:a?b@h:1", "http://u:a#b@h:1", "http://u:a@b@h:1"] {
            assert!(QdrantStoreConfig::from_url(raw).is_err(), "{raw}");
        }
        let c = QdrantStoreConfig::from_url("https://u:pa%2Fss@cloud.example:6334").unwrap();
        let printed = format!("{c:?}");
        assert!(!printed.contains("pa%2Fss"), "{printed}");
        assert!(
            printed.contains("https://u:***@cloud.example:6334"),
            "{printed}"
        );
        let err = QdrantStoreConfig::from_url("grpc://u:hunter2@h:6334").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
