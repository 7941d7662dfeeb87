//! [`Mem0Config`]: which Mem0 to talk to (the hosted platform or a self-hosted server), how to
//! authenticate, and how patiently to call it.

use std::fmt;
use std::time::Duration;

use memory_core::{Error, REDACTED, Result, redact_url};
use memory_http::{ApiKey, HttpClientConfig, HttpSettings, is_header_text};
use reqwest::Url;

/// The hosted platform's base URL, used when none is given.
pub const DEFAULT_PLATFORM_URL: &str = "https://api.mem0.ai";
/// How long one attempt of a request may take by default, answer included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a self-hosted server expects its API key.
///
/// Mem0's own `server/main.py` has no authentication; servers that need a key sit behind a
/// gateway or proxy that checks one, and this says where that gateway looks for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (the default).
    #[default]
    Bearer,
    /// `Authorization: Token <key>`, as the hosted platform does.
    Token,
    /// The key, as is, in the header of this name (for example `X-API-Key`).
    Named(String),
}

/// Which Mem0 the client talks to.
///
/// The two flavours speak different REST APIs; [`Mem0Client`](crate::Mem0Client) picks the
/// paths and bodies from this. Its `Debug` prints keys as `"***"`.
#[derive(Clone)]
#[non_exhaustive]
pub enum Mem0Flavor {
    /// Mem0's hosted platform (`https://api.mem0.ai`), authenticated with
    /// `Authorization: Token <key>`.
    Platform {
        /// The platform API key.
        api_key: ApiKey,
        /// The base URL (default [`DEFAULT_PLATFORM_URL`]); paths such as `/v3/memories/add/`
        /// are appended to it.
        base_url: String,
        /// Sent as `org_id` with every request when set (the mem0ai client does the same).
        org_id: Option<String>,
        /// Sent as `project_id` with every request when set.
        project_id: Option<String>,
    },
    /// A self-hosted Mem0 REST server (the FastAPI app of Mem0's `server/main.py`).
    SelfHosted {
        /// Where the server listens, for example `http://localhost:8888`.
        base_url: String,
        /// A key for a gateway in front of the server, if there is one.
        api_key: Option<ApiKey>,
        /// Which header carries [`api_key`](Mem0Flavor::SelfHosted::api_key).
        key_header: KeyHeader,
    },
}

impl Mem0Flavor {
    /// The base URL, as configured.
    pub fn base_url(&self) -> &str {
        match self {
            Mem0Flavor::Platform { base_url, .. } | Mem0Flavor::SelfHosted { base_url, .. } => {
                base_url
            }
        }
    }

    /// The key, if one is configured.
    pub fn api_key(&self) -> Option<&ApiKey> {
        match self {
            Mem0Flavor::Platform { api_key, .. } => Some(api_key),
            Mem0Flavor::SelfHosted { api_key, .. } => api_key.as_ref(),
        }
    }

    /// `"platform"` or `"self-hosted"`, for messages and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Mem0Flavor::Platform { .. } => "platform",
            Mem0Flavor::SelfHosted { .. } => "self-hosted",
        }
    }
}

impl fmt::Debug for Mem0Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mem0Flavor::Platform {
                base_url,
                org_id,
                project_id,
                ..
            } => f
                .debug_struct("Platform")
                .field("api_key", &REDACTED)
                .field("base_url", &redact_url(base_url))
                .field("org_id", org_id)
                .field("project_id", project_id)
                .finish(),
            Mem0Flavor::SelfHosted {
                base_url,
                api_key,
                key_header,
            } => f
                .debug_struct("SelfHosted")
                .field("base_url", &redact_url(base_url))
                .field("api_key", &api_key.as_ref().map(|_| REDACTED))
                .field("key_header", key_header)
                .finish(),
        }
    }
}

/// The settings of a [`Mem0Client`](crate::Mem0Client): plain data, with constructors per
/// flavour and builder-style `with_*` methods. The timeouts, retries and answer cap are
/// [`http`](Mem0Config::http), set with the [`HttpClientConfig`] setters.
///
/// Its `Debug` is written by hand: keys print as `"***"`.
///
/// ```
/// use std::time::Duration;
/// use memory_mem0::{HttpClientConfig, Mem0Config};
///
/// let platform = Mem0Config::platform("m0-secret")
///     .with_project_id("proj_1")
///     .with_timeout(Duration::from_secs(10));
/// assert!(platform.validate().is_ok());
/// assert!(!format!("{platform:?}").contains("m0-secret"));
///
/// let local = Mem0Config::self_hosted("http://localhost:8888").with_max_retries(1);
/// assert!(local.validate().is_ok());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Mem0Config {
    /// Which Mem0, where, and with what key.
    pub flavor: Mem0Flavor,
    /// Timeouts (one attempt: 30 s by default, [`DEFAULT_TIMEOUT`]), retries and the largest
    /// answer read; see [`HttpSettings`]. The connect timeout applies to the HTTP client this
    /// crate builds; a client given to
    /// [`Mem0Client::with_http_client`](crate::Mem0Client::with_http_client) keeps its own.
    pub http: HttpSettings,
}

impl Mem0Config {
    /// The hosted platform at [`DEFAULT_PLATFORM_URL`], with `api_key`.
    pub fn platform(api_key: impl Into<ApiKey>) -> Self {
        Self::with_flavor(Mem0Flavor::Platform {
            api_key: api_key.into(),
            base_url: DEFAULT_PLATFORM_URL.to_owned(),
            org_id: None,
            project_id: None,
        })
    }

    /// A self-hosted server at `base_url`, without a key.
    pub fn self_hosted(base_url: impl Into<String>) -> Self {
        Self::with_flavor(Mem0Flavor::SelfHosted {
            base_url: base_url.into(),
            api_key: None,
            key_header: KeyHeader::default(),
        })
    }

    /// The defaults for `flavor`.
    pub fn with_flavor(flavor: Mem0Flavor) -> Self {
        Self {
            flavor,
            http: HttpSettings::new(DEFAULT_TIMEOUT),
        }
    }

    /// Reads the platform's settings from the environment: `MEM0_API_KEY` (required),
    /// `MEM0_BASE_URL`, `MEM0_ORG_ID` and `MEM0_PROJECT_ID`. Empty variables count as unset.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) when `MEM0_API_KEY` is
    /// not set.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let key =
            get("MEM0_API_KEY").ok_or_else(|| Error::invalid_input("MEM0_API_KEY is not set"))?;
        let mut config = Self::platform(key);
        if let Some(url) = get("MEM0_BASE_URL") {
            config = config.with_base_url(url);
        }
        if let Some(org) = get("MEM0_ORG_ID") {
            config = config.with_org_id(org);
        }
        if let Some(project) = get("MEM0_PROJECT_ID") {
            config = config.with_project_id(project);
        }
        Ok(config)
    }

    /// Sets the base URL.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        match &mut self.flavor {
            Mem0Flavor::Platform { base_url, .. } | Mem0Flavor::SelfHosted { base_url, .. } => {
                *base_url = url.into();
            }
        }
        self
    }

    /// Sets the key: the platform key, or a self-hosted gateway's key.
    pub fn with_api_key(mut self, key: impl Into<ApiKey>) -> Self {
        match &mut self.flavor {
            Mem0Flavor::Platform { api_key, .. } => *api_key = key.into(),
            Mem0Flavor::SelfHosted { api_key, .. } => *api_key = Some(key.into()),
        }
        self
    }

    /// Sets the header a self-hosted gateway reads the key from (ignored on the platform).
    pub fn with_key_header(mut self, header: KeyHeader) -> Self {
        if let Mem0Flavor::SelfHosted { key_header, .. } = &mut self.flavor {
            *key_header = header;
        }
        self
    }

    /// Sets the platform organization (ignored by a self-hosted server).
    pub fn with_org_id(mut self, id: impl Into<String>) -> Self {
        if let Mem0Flavor::Platform { org_id, .. } = &mut self.flavor {
            *org_id = Some(id.into());
        }
        self
    }

    /// Sets the platform project (ignored by a self-hosted server).
    pub fn with_project_id(mut self, id: impl Into<String>) -> Self {
        if let Mem0Flavor::Platform { project_id, .. } = &mut self.flavor {
            *project_id = Some(id.into());
        }
        self
    }

    /// Checks the settings; [`Mem0Client::new`](crate::Mem0Client::new) calls it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for a base URL that is
    /// not an `http` or `https` URL, a zero timeout, an empty key, or a key, header name,
    /// organization or project that cannot be sent in an HTTP header (the message never
    /// contains the key).
    pub fn validate(&self) -> Result<()> {
        self.parsed_base_url()?;
        self.http.validate("Mem0")?;
        if let Some(key) = self.flavor.api_key()
            && (key.expose().trim().is_empty() || !is_header_text(key.expose()))
        {
            return Err(Error::invalid_input(
                "the Mem0 API key is empty or holds characters an HTTP header cannot carry",
            ));
        }
        match &self.flavor {
            Mem0Flavor::Platform {
                org_id, project_id, ..
            } => {
                for (name, value) in [("org_id", org_id), ("project_id", project_id)] {
                    if let Some(value) = value
                        && (value.trim().is_empty() || !is_header_text(value))
                    {
                        return Err(Error::invalid_input(format!(
                            "the Mem0 {name} {value:?} is empty or holds control characters"
                        )));
                    }
                }
            }
            Mem0Flavor::SelfHosted {
                key_header: KeyHeader::Named(name),
                ..
            } => {
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(Error::invalid_input(format!(
                        "{name:?} is not a valid HTTP header name"
                    )));
                }
            }
            Mem0Flavor::SelfHosted { .. } => {}
        }
        Ok(())
    }

    /// The base URL, parsed, without a trailing slash.
    pub(crate) fn parsed_base_url(&self) -> Result<Url> {
        memory_http::parse_base_url(self.flavor.base_url(), "Mem0")
    }
}

impl fmt::Debug for Mem0Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mem0Config")
            .field("flavor", &self.flavor)
            .field("http", &self.http)
            .finish()
    }
}

impl HttpClientConfig for Mem0Config {
    fn http_settings_mut(&mut self) -> &mut HttpSettings {
        &mut self.http
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use memory_http::testing::env_lookup as lookup;

    use super::*;

    #[test]
    fn defaults() {
        let config = Mem0Config::platform("m0-key");
        assert_eq!(config.flavor.base_url(), "https://api.mem0.ai");
        assert_eq!(config.http.timeout, Duration::from_secs(30));
        assert_eq!(config.http.max_retries, 3);
        assert!(config.validate().is_ok());
        let local = Mem0Config::self_hosted("http://localhost:8888/");
        assert!(local.flavor.api_key().is_none());
        assert_eq!(
            local.parsed_base_url().unwrap().as_str(),
            "http://localhost:8888/"
        );
    }

    #[test]
    fn env_is_read() {
        let config = Mem0Config::from_lookup(lookup(&[
            ("MEM0_API_KEY", "m0-env"),
            ("MEM0_BASE_URL", "http://proxy:9000/mem0"),
            ("MEM0_ORG_ID", "org"),
            ("MEM0_PROJECT_ID", ""),
        ]))
        .unwrap();
        match &config.flavor {
            Mem0Flavor::Platform {
                api_key,
                base_url,
                org_id,
                project_id,
            } => {
                assert_eq!(api_key.expose(), "m0-env");
                assert_eq!(base_url, "http://proxy:9000/mem0");
                assert_eq!(org_id.as_deref(), Some("org"));
                assert_eq!(project_id, &None);
            }
            other => panic!("{other:?}"),
        }
        let err = Mem0Config::from_lookup(lookup(&[("MEM0_API_KEY", " ")])).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn debug_redacts_keys_and_url_passwords() {
        let config = Mem0Config::platform("m0-very-secret")
            .with_base_url("https://user:hunter2@proxy.example");
        let debug = format!("{config:?} {config:#?}");
        assert!(!debug.contains("m0-very-secret"), "{debug}");
        assert!(!debug.contains("hunter2"), "{debug}");
        let local = Mem0Config::self_hosted("http://x:1").with_api_key("gateway-secret");
        assert!(!format!("{local:?}").contains("gateway-secret"));
    }

    #[test]
    fn bad_settings_are_invalid_input_without_the_key() {
        for bad in ["", "api.mem0.ai", "ftp://x", "https://x/?a=1"] {
            let err = Mem0Config::platform("k")
                .with_base_url(bad)
                .validate()
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
        }
        let err = Mem0Config::platform("m0-abc\ndef").validate().unwrap_err();
        assert!(!err.to_string().contains("m0-abc"));
        assert!(Mem0Config::platform("").validate().is_err());
        assert!(
            Mem0Config::platform("k")
                .with_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
        assert!(
            Mem0Config::self_hosted("http://x")
                .with_key_header(KeyHeader::Named("bad header".into()))
                .validate()
                .is_err()
        );
    }
}
