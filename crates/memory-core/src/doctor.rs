//! What a health check of a backend reports: a [`Diagnosis`] made of [`Check`]s, each
//! [`Ok`](CheckStatus::Ok), a [`Warning`](CheckStatus::Warning) or an
//! [`Error`](CheckStatus::Error) with a sentence saying what was found.
//!
//! The backends build the checks (`memory_sql::inspect`, `memory_redis::inspect`) and the
//! facade's `agent_memory::doctor(url)` gathers them for a URL. A diagnosis serializes to JSON
//! for scripts and displays as one line per check for people:
//!
//! ```
//! use memory_core::doctor::{Check, CheckStatus, Diagnosis};
//!
//! let diagnosis = Diagnosis::new(
//!     "redis",
//!     "redis://:***@127.0.0.1:6379",
//!     vec![
//!         Check::ok("connection", "Redis 7.2.4 answers PING."),
//!         Check::warning("maxmemory-policy", "The policy is allkeys-lru: Redis may evict memory."),
//!     ],
//! );
//! assert!(diagnosis.healthy());
//! assert_eq!(diagnosis.worst(), CheckStatus::Warning);
//! assert!(diagnosis.to_string().contains("warning  maxmemory-policy: The policy is allkeys-lru"));
//! ```
//!
//! # Behavior
//! - A check's detail is a sentence for people; it never holds a secret (a URL in a diagnosis
//!   is redacted with [`redact_url`](crate::redact_url) by whoever builds it).
//! - [`Diagnosis::healthy`] is true exactly when no check is an [`Error`](CheckStatus::Error):
//!   warnings say what to look at, not that the backend cannot be used.

use std::fmt;

use serde::Serialize;

/// How a [`Check`] came out, from best to worst (the order `Ord` follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CheckStatus {
    /// As it should be (or a fact worth showing, such as a version).
    Ok,
    /// Works, but something deserves attention (a setting that can lose data, a database
    /// newer than this build).
    Warning,
    /// Cannot work as it is (the server cannot be reached, a cluster node is down).
    Error,
}

impl CheckStatus {
    /// `ok`, `warning` or `error`: the word the JSON form uses.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warning => "warning",
            CheckStatus::Error => "error",
        }
    }
}

impl fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding of a health check: what was checked, how it came out, and a sentence saying
/// what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Check {
    /// What was checked, a short stable name (`connection`, `schema version`,
    /// `maxmemory-policy`).
    pub name: String,
    /// How it came out.
    pub status: CheckStatus,
    /// What was found, as a sentence for people.
    pub detail: String,
}

impl Check {
    /// A check with this outcome.
    pub fn new(name: impl Into<String>, status: CheckStatus, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            status,
            detail: detail.into(),
        }
    }

    /// A check that came out [`Ok`](CheckStatus::Ok).
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Ok, detail)
    }

    /// A check that came out a [`Warning`](CheckStatus::Warning).
    pub fn warning(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Warning, detail)
    }

    /// A check that came out an [`Error`](CheckStatus::Error).
    pub fn error(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Error, detail)
    }
}

impl fmt::Display for Check {
    /// `<status padded to 7>  <name>: <detail>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<7}  {}: {}",
            self.status.as_str(),
            self.name,
            self.detail
        )
    }
}

/// The checks of one backend at one URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Diagnosis {
    /// The backend's short name: `memory`, `sqlite`, `postgres`, `mysql`, `redis`.
    pub backend: String,
    /// The URL checked, its passwords replaced by `***`.
    pub url: String,
    /// The findings, in the order they were checked.
    pub checks: Vec<Check>,
}

impl Diagnosis {
    /// A diagnosis of `backend` at `url` (already redacted: this does not redact it).
    pub fn new(backend: impl Into<String>, url: impl Into<String>, checks: Vec<Check>) -> Self {
        Self {
            backend: backend.into(),
            url: url.into(),
            checks,
        }
    }

    /// Whether no check is an [`Error`](CheckStatus::Error).
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|c| c.status != CheckStatus::Error)
    }

    /// The worst status of its checks ([`Ok`](CheckStatus::Ok) when there are none).
    pub fn worst(&self) -> CheckStatus {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(CheckStatus::Ok)
    }

    /// The check named `name`, if any.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

impl fmt::Display for Diagnosis {
    /// A heading (`<backend> at <url>`), then one line per check.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.backend, self.url)?;
        for check in &self.checks {
            write!(f, "\n  {check}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_means_no_error() {
        let mut d = Diagnosis::new("sqlite", "sqlite://x.db", vec![Check::ok("a", "Fine.")]);
        assert!(d.healthy());
        assert_eq!(d.worst(), CheckStatus::Ok);
        d.checks.push(Check::warning("b", "Look."));
        assert!(d.healthy());
        assert_eq!(d.worst(), CheckStatus::Warning);
        d.checks.push(Check::error("c", "Broken."));
        assert!(!d.healthy());
        assert_eq!(d.worst(), CheckStatus::Error);
        assert_eq!(d.check("b").map(|c| c.status), Some(CheckStatus::Warning));
        assert!(d.check("zz").is_none());
        assert!(Diagnosis::new("memory", "memory:", vec![]).healthy());
    }

    #[test]
    fn json_and_text_forms() {
        let d = Diagnosis::new(
            "redis",
            "redis://:***@h:1",
            vec![
                Check::ok("connection", "Redis 7.2.4 answers."),
                Check::error("cluster node h:2", "It does not answer."),
            ],
        );
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "backend": "redis",
                "url": "redis://:***@h:1",
                "checks": [
                    {"name": "connection", "status": "ok", "detail": "Redis 7.2.4 answers."},
                    {"name": "cluster node h:2", "status": "error", "detail": "It does not answer."}
                ]
            })
        );
        assert_eq!(
            d.to_string(),
            "redis at redis://:***@h:1\n  ok       connection: Redis 7.2.4 answers.\n  \
             error    cluster node h:2: It does not answer."
        );
    }
}
