//! The `[log]` table: how `agent-memory serve` writes its log on stderr.
//!
//! ```toml
//! [log]
//! format = "json"                           # "text" (default) | "json"
//! ```
//!
//! [`LOG_FORMAT_ENV`] (`AGENT_MEMORY_LOG_FORMAT`) wins over the file.

use serde::Deserialize;

use crate::config_error::ConfigError;

/// The environment variable naming the log's format (`text` or `json`); it wins over
/// `[log] format`. The same variable sets the format of the other commands' logs.
pub const LOG_FORMAT_ENV: &str = "AGENT_MEMORY_LOG_FORMAT";

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// A line of text per event (coloured only on a terminal).
    #[default]
    Text,
    /// A JSON object per line.
    Json,
}

impl LogFormat {
    /// The format named `name` (`text` or `json`, any case, spaces around ignored); `None`
    /// for another name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// The `[log]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// The format of the log on stderr (default `text`).
    pub format: LogFormat,
}

impl LogConfig {
    /// Applies [`LOG_FORMAT_ENV`] as `env` gives it (an empty value is no value).
    ///
    /// # Errors
    /// A [`ConfigError`] for a value other than `text` or `json`.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(name) = env(LOG_FORMAT_ENV).filter(|v| !v.trim().is_empty()) {
            self.format = LogFormat::from_name(&name).ok_or_else(|| {
                ConfigError(format!(
                    "{LOG_FORMAT_ENV} must be `text` or `json`, not `{}`",
                    name.trim()
                ))
            })?;
        }
        Ok(())
    }
}
