//! Opening a database from a URL: the one place where every store opened from a URL (the
//! history and session store, the doctor's inspection, the LlamaIndex store) gets its pool,
//! with [`SqlConfig`]'s pool size and timeouts; scrubbing the URL's secrets from errors; and
//! the operation timeout.

use std::time::Duration;

#[cfg(feature = "sqlite")]
use backon::Retryable;
use memory_core::{Error, ErrorKind, Result};

use crate::config::{DbUrl, SchemaMode, SqlConfig};
use crate::dialect::Backend;
use crate::driver::Pool;

/// Guarantees that nothing of the URL's password survives in `err`'s message or sources:
/// when any of them shows a secret, the error is rebuilt from scrubbed texts
/// ([`scrub_error`](memory_core::redact::scrub_error)).
pub(crate) fn redact_error(url: &DbUrl, err: Error) -> Error {
    memory_core::redact::scrub_error(err, url.secrets())
}

#[cfg(not(all(feature = "sqlite", feature = "postgres", feature = "mysql")))]
fn not_compiled(url: &DbUrl, feature: &str) -> Error {
    Error::unsupported(format!(
        "{} needs memory-sql's `{feature}` feature, which is not enabled",
        url.redacted
    ))
}

/// Opens one connection directly, bounded by the acquire timeout, so a dead server fails now
/// with `Unavailable` instead of after the pool's retry loop.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn probe<O>(url: &DbUrl, options: &O, timeout: Duration) -> Result<()>
where
    O: sqlx::ConnectOptions,
    O::Connection: Sized,
{
    use sqlx::Connection as _;
    let ctx = format!("connect to {}", url.redacted);
    match tokio::time::timeout(timeout, options.connect()).await {
        Err(_) => Err(Error::new(
            memory_core::ErrorKind::Unavailable,
            format!("{ctx}: no answer within {timeout:?}"),
        )),
        Ok(Err(e)) => Err(crate::error::sql_error(&ctx, e)),
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
    }
}

/// A pool opened from a URL with a [`SqlConfig`]'s settings.
pub(crate) struct UrlPool {
    pub(crate) pool: Pool,
    /// Whether it is a private in-memory SQLite database (one connection, one process).
    pub(crate) memory: bool,
}

/// Opens the pool `url` names with `config`'s pool size and timeouts: the one place where
/// every store opened from a URL gets its connections. Errors may hold the URL's secrets: pass
/// them through [`redact_error`].
pub(crate) async fn connect_pool(url: &DbUrl, config: &SqlConfig) -> Result<UrlPool> {
    match url.backend {
        Backend::Sqlite => open_sqlite(url, config).await,
        Backend::Postgres => open_postgres(url, config).await,
        Backend::MySql => open_mysql(url, config).await,
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &DbUrl, config: &SqlConfig) -> Result<UrlPool> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let ctx = format!("open {}", url.redacted);
    let options: SqliteConnectOptions = url
        .raw
        .parse()
        .map_err(|e| crate::error::sql_error(&ctx, e))?;
    let memory = url.is_sqlite_memory();
    let options = options.busy_timeout(config.busy_timeout);
    let existing_only = config.schema_mode == SchemaMode::RequireCurrent;
    if existing_only && !memory && !options.get_filename().exists() {
        return Err(Error::not_found(format!(
            "there is no SQLite file at {}: check the URL (nothing was created)",
            options.get_filename().display()
        )));
    }
    let (options, pool) = if memory {
        // One connection that never expires: every connection to `:memory:` is a new, empty
        // database, so the pool must never replace it.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false)
            // Waiting for the one connection is normal here, not a sign of a dead server.
            .acquire_timeout(config.acquire_timeout.max(Duration::from_secs(60)));
        (options, pool)
    } else {
        let options = if existing_only {
            // The file as it is: not created, its journal mode left alone.
            options.create_if_missing(false)
        } else {
            options
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
        };
        let pool = SqlitePoolOptions::new()
            .max_connections(config.max_connections.unwrap_or(4))
            .test_before_acquire(false)
            .acquire_timeout(config.acquire_timeout.max(config.busy_timeout));
        (options.synchronous(SqliteSynchronous::Normal), pool)
    };
    // Switching a new file to WAL needs a moment alone with it: processes opening it at once
    // may get SQLITE_BUSY at once (no busy wait there), so try again within the busy timeout.
    let connect = || pool.clone().connect_with(options.clone());
    let pool = connect
        .retry(
            crate::retry::backoff()
                .without_max_times()
                .with_total_delay(Some(config.busy_timeout)),
        )
        .when(crate::error::is_sqlite_busy)
        .await
        .map_err(|e| crate::error::sql_error(&ctx, e))?;
    Ok(UrlPool {
        pool: Pool::Sqlite(pool),
        memory,
    })
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(url: &DbUrl, _config: &SqlConfig) -> Result<UrlPool> {
    Err(not_compiled(url, "sqlite"))
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &DbUrl, config: &SqlConfig) -> Result<UrlPool> {
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    let ctx = format!("open {}", url.redacted);
    let options: PgConnectOptions = url
        .raw
        .parse()
        .map_err(|e| crate::error::sql_error(&ctx, e))?;
    // A writer waits at most the busy timeout for a lock, and a session that hangs inside a
    // transaction (a frozen or cut-off client) is ended by the server, releasing its locks.
    let options = options.options([
        ("lock_timeout", format!("{}ms", millis(config.busy_timeout))),
        (
            "idle_in_transaction_session_timeout",
            format!("{}ms", millis(config.operation_timeout)),
        ),
    ]);
    probe(url, &options, config.acquire_timeout).await?;
    let pool = PgPoolOptions::new()
        .max_connections(config.max_connections.unwrap_or(10))
        .acquire_timeout(config.acquire_timeout)
        // Connections are checked when they return to the pool; checking again on every
        // checkout would double the round trips.
        .test_before_acquire(false)
        .connect_lazy_with(options);
    Ok(UrlPool {
        pool: Pool::Postgres(pool),
        memory: false,
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(url: &DbUrl, _config: &SqlConfig) -> Result<UrlPool> {
    Err(not_compiled(url, "postgres"))
}

#[cfg(feature = "mysql")]
async fn open_mysql(url: &DbUrl, config: &SqlConfig) -> Result<UrlPool> {
    use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
    let ctx = format!("open {}", url.redacted);
    let raw = url.raw.replacen("mariadb://", "mysql://", 1);
    let options: MySqlConnectOptions = raw.parse().map_err(|e| crate::error::sql_error(&ctx, e))?;
    probe(url, &options, config.acquire_timeout).await?;
    // A writer waits at most the busy timeout (in whole seconds, at least one) for a row lock.
    let lock_wait = config.busy_timeout.as_secs_f64().ceil().max(1.0) as u64;
    let pool = MySqlPoolOptions::new()
        .max_connections(config.max_connections.unwrap_or(10))
        .acquire_timeout(config.acquire_timeout)
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                let set = format!("SET SESSION innodb_lock_wait_timeout = {lock_wait}");
                sqlx::Executor::execute(conn, sqlx::AssertSqlSafe(set))
                    .await
                    .map(drop)
            })
        })
        .connect_lazy_with(options);
    Ok(UrlPool {
        pool: Pool::MySql(pool),
        memory: false,
    })
}

#[cfg(not(feature = "mysql"))]
async fn open_mysql(url: &DbUrl, _config: &SqlConfig) -> Result<UrlPool> {
    Err(not_compiled(url, "mysql"))
}

/// Runs `op` within `limit` ([`SqlConfig::with_operation_timeout`]); past it, `op` is dropped (its
/// transaction rolls back) and the call fails with [`Timeout`](ErrorKind::Timeout).
pub(crate) async fn within<T>(
    limit: Duration,
    ctx: &str,
    op: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, op).await.unwrap_or_else(|_| {
        Err(Error::new(
            ErrorKind::Timeout,
            format!("{ctx}: the database did not finish within {limit:?}"),
        ))
    })
}

/// [`within`] for one operation of a store: its errors name `operation` (the API's word) and
/// `backend`.
pub(crate) async fn within_operation<T>(
    limit: Duration,
    backend: Backend,
    operation: &'static str,
    ctx: &str,
    op: impl Future<Output = Result<T>>,
) -> Result<T> {
    within(limit, ctx, op)
        .await
        .map_err(|err| err.with_backend(backend.as_str()).with_operation(operation))
}

/// What a store's `Debug` shows for its URL: the URL with its password masked, or that it
/// wraps an application's pool.
pub(crate) fn debug_url(url: Option<&str>) -> &str {
    url.unwrap_or("(application's pool)")
}

/// A duration in whole milliseconds, at least 1 (for server settings where 0 means "never").
#[cfg(feature = "postgres")]
fn millis(d: Duration) -> u128 {
    d.as_millis().max(1)
}
