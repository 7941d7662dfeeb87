//! [`doctor()`]: a health check of the backend a URL names, for `agent-memory doctor` and the
//! memory server, one match arm per enabled backend as in [`open`](crate::open), and the
//! types of its findings ([`Diagnosis`], [`Check`], [`CheckStatus`], from `memory_core`).

pub use memory_core::doctor::{Check, CheckStatus, Diagnosis};
use memory_core::{ErrorKind, Result, redact_url};

use crate::open::not_in_this_build;

/// Checks the backend `url` names (the URLs [`open`](crate::open) takes) without changing
/// anything in it: nothing is created, migrated or written.
///
/// | backend | checks |
/// | --- | --- |
/// | `memory:` | `connection` (always ok: process memory) |
/// | SQLite, PostgreSQL, MySQL/MariaDB | `connection` (server version), `schema version`, `pending migrations`; for a SQLite file also `journal mode` (WAL expected) and `busy timeout` (see `memory_sql::inspect`) |
/// | Redis | `connection`, `maxmemory-policy` (a warning unless `noeviction`), `persistence`; on a cluster `cluster` and the three per master (see `memory_redis::inspect`) |
///
/// The SQL checks look at the tables of the default prefix (`agent_memory_`), the ones
/// [`open`](crate::open) uses, or of the URL's `prefix` query parameter as `open` reads it. A backend that cannot be reached or refuses the connection (a
/// dead port, a wrong password, a missing database) is not an error of this call: the
/// diagnosis holds a `connection` check with status [`Error`](memory_core::CheckStatus::Error)
/// saying why, so [`Diagnosis::healthy`] is false. The diagnosis's URL is redacted, and no
/// check repeats the URL or its password.
///
/// ```no_run
/// # async fn run() -> agent_memory::Result<()> {
/// let diagnosis = agent_memory::doctor("postgres://app:secret@db.internal/app").await?;
/// println!("{diagnosis}");
/// if !diagnosis.healthy() {
///     std::process::exit(1);
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`ErrorKind::InvalidInput`] for an unknown scheme, a backend whose feature is off, or a
/// URL the backend cannot use; [`ErrorKind::Unsupported`] when a backend's own support for
/// the URL is not compiled in.
pub async fn doctor(url: &str) -> Result<Diagnosis> {
    let redacted = redact_url(url);
    // The `prefix` parameter, as `open` takes it: the tables or keys of that prefix.
    let (url, prefix) = crate::open::take_prefix(url);
    #[cfg(not(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis"
    )))]
    let _ = &prefix;
    let url = url.as_str();
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or(url);
    let (backend, checks): (&str, Result<Vec<Check>>) = match scheme {
        "memory" => (
            "memory",
            Ok(vec![Check::ok(
                "connection",
                "Process memory: nothing to connect to, and nothing survives the process.",
            )]),
        ),
        #[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
        "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb" if sql_enabled(scheme) => {
            let backend = match scheme {
                "sqlite" => "sqlite",
                "postgres" | "postgresql" => "postgres",
                _ => "mysql",
            };
            let mut config = memory_sql::SqlConfig::new();
            if let Some(prefix) = prefix {
                config = config.with_table_prefix(prefix);
            }
            let found = memory_sql::inspect(url, &config).await;
            (backend, found.map(|f| f.checks()))
        }
        #[cfg(feature = "redis")]
        "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => {
            let mut config = memory_redis::RedisConfig::default();
            if let Some(prefix) = prefix {
                config.key_prefix = prefix;
            }
            let found = memory_redis::inspect(url, &config).await;
            ("redis", found.map(|f| f.checks()))
        }
        other => return Err(not_in_this_build(other)),
    };
    let checks = match checks {
        Ok(checks) => checks,
        Err(err) if matches!(err.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported) => {
            return Err(err);
        }
        Err(err) => vec![Check::error(
            "connection",
            format!(
                "It could not be inspected ({}): {}.",
                err.kind(),
                err.message()
            ),
        )],
    };
    Ok(Diagnosis::new(backend, redacted, checks))
}

/// Whether this build opens the SQL database of `scheme`.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
fn sql_enabled(scheme: &str) -> bool {
    match scheme {
        "sqlite" => cfg!(feature = "sqlite"),
        "postgres" | "postgresql" => cfg!(feature = "postgres"),
        _ => cfg!(feature = "mysql"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_is_fine_and_unknown_schemes_are_errors() {
        let d = doctor("memory:").await.unwrap();
        assert_eq!(d.backend, "memory");
        assert!(d.healthy());
        assert_eq!(d.checks.len(), 1);
        let err = doctor("ftp://u:hunter2@x").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(!err.to_string().contains("hunter2"));
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_sqlite_file_opened_once_is_healthy_and_a_missing_one_is_not_created() {
        let dir = std::env::temp_dir().join(format!(
            "agent-memory-doctor-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("memory.db");
        let url = format!("sqlite://{}", path.display());

        let missing = doctor(&url).await.unwrap();
        assert!(missing.healthy());
        assert_eq!(missing.worst(), CheckStatus::Warning);
        assert!(!path.exists());

        drop(crate::open(&url).await.unwrap());
        let d = doctor(&url).await.unwrap();
        assert_eq!(d.backend, "sqlite");
        assert_eq!(d.url, url);
        assert_eq!(d.worst(), CheckStatus::Ok, "{d}");
        let names: Vec<&str> = d.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "connection",
                "schema version",
                "pending migrations",
                "journal mode",
                "busy timeout"
            ]
        );
        // The prefix parameter: the tables of another prefix are not there yet.
        let other = doctor(&format!("{url}?prefix=other_")).await.unwrap();
        assert_eq!(other.worst(), CheckStatus::Warning, "{other}");
        assert!(other.to_string().contains("\"other_\""), "{other}");
        drop(crate::open(&format!("{url}?prefix=other_")).await.unwrap());
        let other = doctor(&format!("{url}?prefix=other_")).await.unwrap();
        assert_eq!(other.worst(), CheckStatus::Ok, "{other}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
