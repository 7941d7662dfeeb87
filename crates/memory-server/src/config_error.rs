//! What every part of the configuration shares: the error a setting that cannot be used gives,
//! and the prefix of the server's environment variables.
//!
//! A leaf module: `config`, `embedder` and `retrieval` each read their own tables and report
//! through it, so none of them needs another to say what is wrong.

/// The prefix of the server's environment variables.
pub const ENV_PREFIX: &str = "AGENT_MEMORY_SERVER_";

/// A configuration that cannot be used; the message is a sentence and never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The secret in the environment variable `name` that the setting `setting` names (an API key),
/// trimmed, as `env` reads it.
///
/// # Errors
/// A [`ConfigError`] naming the setting and the variable (never a value) when it is unset or
/// blank.
pub(crate) fn secret_from_env(
    env: impl Fn(&str) -> Option<String>,
    setting: &str,
    name: &str,
) -> Result<String, ConfigError> {
    env(name)
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
        .ok_or_else(|| ConfigError(format!("{setting} names `{name}`, which is not set")))
}
