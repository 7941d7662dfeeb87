//! [`OpenAiConfig`]: where the server is, how to authenticate, which model, and how patiently to
//! call it.

use std::fmt;
use std::time::Duration;

use memory_core::{Error, REDACTED, Result, redact_url};
use memory_http::{ApiKey, HttpClientConfig, HttpSettings, is_header_text};
use reqwest::Url;

/// The OpenAI API's base URL, used when none is given.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The chat model [`OpenAiConfig::from_env`] picks when `OPENAI_MODEL` is not set.
pub const DEFAULT_CHAT_MODEL: &str = "gpt-4o-mini";
/// The embedding model [`OpenAiConfig::from_env_for_embeddings`] picks when
/// `OPENAI_EMBEDDING_MODEL` is not set.
pub const DEFAULT_EMBEDDING_MODEL: &str = "text-embedding-3-small";
/// How long one attempt of a request may take by default, answer included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The settings of an OpenAI-compatible server: plain data, with [`Default`], builder-style
/// `with_*` methods and [`from_env`](OpenAiConfig::from_env). The timeouts, retries and answer
/// cap are [`http`](OpenAiConfig::http), set with the [`HttpClientConfig`] setters.
///
/// Works with OpenAI itself and with any server that speaks its API (Azure OpenAI's `/openai/v1`
/// endpoint, vLLM, Ollama, LM Studio, llama.cpp's server, LiteLLM...): point
/// [`base_url`](OpenAiConfig::base_url) at it.
///
/// Its `Debug` is written by hand: the API key prints as `"***"`.
///
/// ```
/// use std::time::Duration;
/// use memory_openai::{HttpClientConfig, OpenAiConfig};
///
/// let config = OpenAiConfig::new("gpt-4o-mini")
///     .with_api_key("sk-test")
///     .with_timeout(Duration::from_secs(30))
///     .with_max_retries(5);
/// assert!(config.validate().is_ok());
/// assert!(!format!("{config:?}").contains("sk-test"));
///
/// // A local server without authentication.
/// let local = OpenAiConfig::new("llama3.1").with_base_url("http://localhost:11434/v1");
/// assert!(local.api_key.is_none());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API's base URL, up to and including the version (default
    /// [`DEFAULT_BASE_URL`]); requests go to `{base_url}/chat/completions` and
    /// `{base_url}/embeddings`.
    pub base_url: String,
    /// The key sent as `Authorization: Bearer <key>`; `None` for servers without
    /// authentication.
    pub api_key: Option<ApiKey>,
    /// Sent as the `OpenAI-Organization` header when set.
    pub organization: Option<String>,
    /// Sent as the `OpenAI-Project` header when set.
    pub project: Option<String>,
    /// The model to call.
    pub model: String,
    /// Timeouts (one attempt: 60 s by default, [`DEFAULT_TIMEOUT`]), retries and the largest
    /// answer read; see [`HttpSettings`].
    pub http: HttpSettings,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            organization: None,
            project: None,
            model: DEFAULT_CHAT_MODEL.to_owned(),
            http: HttpSettings::new(DEFAULT_TIMEOUT),
        }
    }
}

impl OpenAiConfig {
    /// The defaults, calling `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            ..Self::default()
        }
    }

    /// Reads the settings of a chat model from the environment, as OpenAI's own SDKs do.
    ///
    /// | variable | field | when unset |
    /// | --- | --- | --- |
    /// | `OPENAI_API_KEY` | `api_key` | none |
    /// | `OPENAI_BASE_URL` | `base_url` | [`DEFAULT_BASE_URL`] |
    /// | `OPENAI_ORG_ID` | `organization` | none |
    /// | `OPENAI_PROJECT_ID` | `project` | none |
    /// | `OPENAI_MODEL` | `model` | [`DEFAULT_CHAT_MODEL`] |
    ///
    /// Empty variables count as unset. The other fields keep their defaults.
    pub fn from_env() -> Self {
        Self::from_lookup(env_var, "OPENAI_MODEL", DEFAULT_CHAT_MODEL)
    }

    /// As [`from_env`](OpenAiConfig::from_env), for an embedder: the model comes from
    /// `OPENAI_EMBEDDING_MODEL`, [`DEFAULT_EMBEDDING_MODEL`] when unset.
    pub fn from_env_for_embeddings() -> Self {
        Self::from_lookup(env_var, "OPENAI_EMBEDDING_MODEL", DEFAULT_EMBEDDING_MODEL)
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        model_var: &str,
        default_model: &str,
    ) -> Self {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        Self {
            base_url: get("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            api_key: get("OPENAI_API_KEY").map(ApiKey::new),
            organization: get("OPENAI_ORG_ID"),
            project: get("OPENAI_PROJECT_ID"),
            model: get(model_var).unwrap_or_else(|| default_model.to_owned()),
            ..Self::default()
        }
    }

    /// Sets the base URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the organization (the `OpenAI-Organization` header).
    pub fn with_organization(mut self, organization: impl Into<String>) -> Self {
        self.organization = Some(organization.into());
        self
    }

    /// Sets the project (the `OpenAI-Project` header).
    pub fn with_project(mut self, project: impl Into<String>) -> Self {
        self.project = Some(project.into());
        self
    }

    /// Sets the model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Checks the settings; the models call it when they are built.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for a base URL that is
    /// not an `http` or `https` URL, an empty model name, a zero timeout, or a key, organization
    /// or project that cannot be sent in an HTTP header (the message never contains the key).
    pub fn validate(&self) -> Result<()> {
        self.parsed_base_url()?;
        if self.model.trim().is_empty() {
            return Err(Error::invalid_input("the OpenAI model name is empty"));
        }
        self.http.validate("OpenAI")?;
        if let Some(key) = &self.api_key
            && (key.is_empty() || !is_header_text(key.expose()))
        {
            return Err(Error::invalid_input(
                "the OpenAI API key is empty or holds characters an HTTP header cannot carry",
            ));
        }
        for (name, value) in [
            ("organization", &self.organization),
            ("project", &self.project),
        ] {
            if let Some(value) = value
                && !is_header_text(value)
            {
                return Err(Error::invalid_input(format!(
                    "the OpenAI {name} {value:?} holds characters an HTTP header cannot carry"
                )));
            }
        }
        Ok(())
    }

    /// The base URL, parsed, without a trailing slash.
    pub(crate) fn parsed_base_url(&self) -> Result<Url> {
        memory_http::parse_base_url(&self.base_url, "OpenAI")
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("organization", &self.organization)
            .field("project", &self.project)
            .field("model", &self.model)
            .field("http", &self.http)
            .finish()
    }
}

impl HttpClientConfig for OpenAiConfig {
    fn http_settings_mut(&mut self) -> &mut HttpSettings {
        &mut self.http
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use memory_http::testing::env_lookup as lookup;

    use super::*;

    #[test]
    fn defaults() {
        let config = OpenAiConfig::default();
        assert_eq!(config.base_url, "https://api.openai.com/v1");
        assert_eq!(config.model, "gpt-4o-mini");
        assert_eq!(config.http.timeout, Duration::from_secs(60));
        assert_eq!(config.http.max_retries, 3);
        assert_eq!(config.http.initial_backoff, Duration::from_millis(500));
        assert!(config.api_key.is_none());
        assert!(config.validate().is_ok());
    }

    #[test]
    fn env_is_read_and_empty_values_are_unset() {
        let vars = lookup(&[
            ("OPENAI_API_KEY", "sk-env"),
            ("OPENAI_BASE_URL", "http://localhost:8000/v1"),
            ("OPENAI_ORG_ID", "org-1"),
            ("OPENAI_PROJECT_ID", ""),
            ("OPENAI_MODEL", "gpt-4.1"),
        ]);
        let config = OpenAiConfig::from_lookup(&vars, "OPENAI_MODEL", DEFAULT_CHAT_MODEL);
        assert_eq!(config.api_key.as_ref().map(ApiKey::expose), Some("sk-env"));
        assert_eq!(config.base_url, "http://localhost:8000/v1");
        assert_eq!(config.organization.as_deref(), Some("org-1"));
        assert_eq!(config.project, None);
        assert_eq!(config.model, "gpt-4.1");

        let config =
            OpenAiConfig::from_lookup(&vars, "OPENAI_EMBEDDING_MODEL", DEFAULT_EMBEDDING_MODEL);
        assert_eq!(config.model, "text-embedding-3-small");

        let empty = OpenAiConfig::from_lookup(lookup(&[]), "OPENAI_MODEL", DEFAULT_CHAT_MODEL);
        assert_eq!(empty.base_url, DEFAULT_BASE_URL);
        assert_eq!(empty.model, DEFAULT_CHAT_MODEL);
        assert!(empty.api_key.is_none());
    }

    #[test]
    fn debug_redacts_the_key_and_url_passwords() {
        let config = OpenAiConfig::new("m")
            .with_api_key("sk-very-secret")
            .with_base_url("https://user:hunter2@proxy.example/v1");
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains(REDACTED), "{debug}");
        assert!(!format!("{config:#?}").contains("sk-very-secret"));
    }

    #[test]
    fn base_urls_are_checked() {
        for good in [
            "https://api.openai.com/v1",
            "https://api.openai.com/v1/",
            "http://127.0.0.1:8080",
            "http://localhost:11434/v1",
        ] {
            let config = OpenAiConfig::default().with_base_url(good);
            assert!(config.validate().is_ok(), "{good}");
            assert!(!config.parsed_base_url().unwrap().as_str().ends_with("v1/"));
        }
        for bad in [
            "",
            "api.openai.com",
            "ftp://x/v1",
            "mailto:a@b",
            "https://x/v1?a=1",
        ] {
            let err = OpenAiConfig::default()
                .with_base_url(bad)
                .validate()
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn bad_settings_are_invalid_input_without_the_key() {
        let err = OpenAiConfig::default()
            .with_api_key("sk-abc\ndef")
            .validate()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(!err.to_string().contains("sk-abc"));
        assert!(OpenAiConfig::default().with_api_key("").validate().is_err());
        assert!(OpenAiConfig::new(" ").validate().is_err());
        assert!(
            OpenAiConfig::default()
                .with_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
        assert!(
            OpenAiConfig::default()
                .with_project("p\r\n")
                .validate()
                .is_err()
        );
    }
}
