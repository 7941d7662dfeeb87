//! [`inspect`]: a read-only look at a database, for `agent-memory doctor`: can it be reached,
//! which server it is, which schema version its tables are at and which migrations the next
//! open would apply, and, for SQLite, the journal mode and the busy timeout.
//!
//! Unlike every constructor of [`SqlStore`](crate::SqlStore), it creates nothing and migrates
//! nothing: a SQLite file is opened read-only (and not at all when it does not exist), and only
//! `SELECT`s and `PRAGMA` reads are sent.

use std::path::PathBuf;
use std::time::Duration;

use memory_core::doctor::Check;
use memory_core::redact::rewrite_error;
use memory_core::{Error, Result};

use crate::config::{DbUrl, SqlConfig};
use crate::connect::{connect_pool, redact_error, within};
use crate::dialect::{Backend, Dialect};
use crate::driver::{Col, Db, Query};
use crate::prefix::TablePrefix;
use crate::schema::{SCHEMA_VERSION, pending_after};

/// What [`inspect`] found in a database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqlInspection {
    /// Which database it is.
    pub backend: Backend,
    /// The server's name and version (`PostgreSQL 16.4`, `MariaDB 11.4.2`, `SQLite 3.46.0`);
    /// `None` when nothing was opened (a SQLite file that does not exist).
    pub server_version: Option<String>,
    /// The table prefix looked at.
    pub table_prefix: String,
    /// The schema version the tables with that prefix are at (0: there are none).
    pub schema_version: u32,
    /// The schema version this build creates and reads ([`SCHEMA_VERSION`]).
    pub latest_version: u32,
    /// The migrations the next open applies, in order: version and name (none when the
    /// schema is current, or newer than this build).
    pub pending: Vec<(u32, String)>,
    /// A private in-memory SQLite database: each open creates it empty, so nothing of it can
    /// be inspected from outside.
    pub in_memory: bool,
    /// A SQLite file that does not exist yet (the first open creates it): its path.
    pub missing_file: Option<PathBuf>,
    /// SQLite: the journal mode of the file, lower case (`wal`, `delete`, `memory`).
    pub journal_mode: Option<String>,
    /// SQLite: how long a writer of this configuration waits for another's lock.
    pub busy_timeout: Option<Duration>,
}

/// Looks at the database `url` names, with `config`'s table prefix and timeouts, without
/// changing anything: no file, table or row is created, no migration is applied.
///
/// The URL forms are [`SqlStore::connect`](crate::SqlStore::connect)'s. Turn the result into
/// findings with [`SqlInspection::checks`].
///
/// ```no_run
/// # async fn run() -> memory_core::Result<()> {
/// use memory_sql::{SqlConfig, inspect};
///
/// let found = inspect("sqlite://agent-memory.db", &SqlConfig::new()).await?;
/// for check in found.checks() {
///     println!("{check}");
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a URL or table prefix it cannot
/// use, [`Unsupported`](memory_core::ErrorKind::Unsupported) for a database whose feature is
/// off, [`Unavailable`](memory_core::ErrorKind::Unavailable) or
/// [`Timeout`](memory_core::ErrorKind::Timeout) when the server cannot be reached,
/// [`Backend`](memory_core::ErrorKind::Backend) when it refuses (a wrong password, a missing
/// database). Messages are sentences that never repeat the URL (nor, therefore, its password).
pub async fn inspect(url: &str, config: &SqlConfig) -> Result<SqlInspection> {
    let url = DbUrl::parse(url).map_err(|err| {
        Error::new_like(
            &err,
            "unsupported database URL: use sqlite:, postgres:// or mysql://",
        )
    })?;
    let prefix = TablePrefix::new(&config.table_prefix)?;
    let limit = config
        .operation_timeout
        .saturating_add(config.acquire_timeout);
    within(
        limit,
        "inspect the database",
        inspect_url(&url, &prefix, config),
    )
    .await
    .map_err(|err| {
        doctor_error(&url, err)
            .with_backend(url.backend.as_str())
            .with_operation("inspect")
    })
}

async fn inspect_url(
    url: &DbUrl,
    prefix: &TablePrefix,
    config: &SqlConfig,
) -> Result<SqlInspection> {
    let mut found = SqlInspection::nothing_yet(url.backend, prefix);
    let db = match url.backend {
        Backend::Sqlite => match open_sqlite(url, config).await? {
            SqliteOpened::Missing(path) => {
                found.missing_file = Some(path);
                found.pending = names(pending_after(0));
                return Ok(found);
            }
            SqliteOpened::Db(db, memory) => {
                found.in_memory = memory;
                db
            }
        },
        Backend::Postgres | Backend::MySql => {
            // The pool every store opens (connection probe, session settings only), with one
            // connection: nothing in it writes.
            let config = config.clone().with_max_connections(1);
            let opened = connect_pool(url, &config).await?;
            Db::new(opened.pool, Dialect::new(url.backend))
        }
    };
    let read = read_all(&db, prefix, &mut found).await;
    db.close().await;
    read?;
    found.pending = names(pending_after(found.schema_version));
    Ok(found)
}

/// For [`SchemaMode::RequireCurrent`](crate::SchemaMode::RequireCurrent): reads the schema
/// version the way [`inspect`] does (only `SELECT`s and `PRAGMA` reads) and returns it when it
/// is this build's; else an error sentence saying what is wrong and what to do.
pub(crate) async fn require_current(db: &Db, prefix: &TablePrefix) -> Result<u32> {
    let mut found = SqlInspection::nothing_yet(db.dialect.backend, prefix);
    read_all(db, prefix, &mut found).await?;
    let (current, latest) = (found.schema_version, SCHEMA_VERSION);
    let prefix = prefix.as_str();
    if current == 0 {
        return Err(Error::not_found(format!(
            "there are no agent-memory tables with prefix {prefix:?} in this database: check \
             the URL and the prefix (nothing was created)"
        )));
    }
    if current > latest {
        return Err(Error::unsupported(format!(
            "the tables with prefix {prefix:?} are at schema version {current}, newer than the \
             version {latest} this build knows: upgrade agent-memory"
        )));
    }
    if current < latest {
        let pending: Vec<String> = pending_after(current)
            .into_iter()
            .map(|(v, n)| format!("{v} ({n})"))
            .collect();
        return Err(Error::unsupported(format!(
            "the tables with prefix {prefix:?} are at schema version {current} and this build \
             needs version {latest} (pending migrations: {}): upgrade the schema with an open \
             that migrates (`agent-memory upgrade`, or the library's default open) once the \
             applications using these tables are upgraded; nothing was changed",
            pending.join(", ")
        )));
    }
    Ok(current)
}

fn names(pending: Vec<(u32, &'static str)>) -> Vec<(u32, String)> {
    pending
        .into_iter()
        .map(|(v, n)| (v, n.to_owned()))
        .collect()
}

/// The statements of the inspection, per backend: the server version, whether the migrations
/// table exists, then (SQLite) the journal mode and the busy timeout.
async fn read_all(db: &Db, prefix: &TablePrefix, found: &mut SqlInspection) -> Result<()> {
    const CTX: &str = "inspect the database";
    let backend = db.dialect.backend;
    let sql = |template: &str| Query::built(db.dialect.render(prefix, template), false);
    let version_sql = match backend {
        Backend::Sqlite => "SELECT sqlite_version()",
        Backend::Postgres => "SELECT current_setting('server_version')",
        Backend::MySql => "SELECT VERSION()",
    };
    let version = first_text(db.fetch(CTX, sql(version_sql), &[Col::Text]).await?)?;
    found.server_version = Some(server_name(backend, &version));
    let exists_sql = match backend {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        Backend::Postgres => {
            "SELECT COUNT(*) FROM pg_catalog.pg_tables \
             WHERE schemaname = ANY(current_schemas(false)) AND tablename = ?"
        }
        Backend::MySql => {
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = ?"
        }
    };
    let table = format!("{}schema_migrations", prefix.as_str());
    let exists = first_int(
        db.fetch(CTX, sql(exists_sql).text(&table), &[Col::Int])
            .await?,
    )?;
    if exists.unwrap_or(0) > 0 {
        let max = first_int(
            db.fetch(
                "read the schema version",
                sql("SELECT MAX(version) FROM {prefix}schema_migrations"),
                &[Col::Int],
            )
            .await?,
        )?;
        found.schema_version = u32::try_from(max.unwrap_or(0)).map_err(|_| {
            Error::serialization(format!(
                "{table} holds an impossible schema version {max:?}"
            ))
        })?;
    }
    if backend == Backend::Sqlite {
        let mode = first_text(
            db.fetch(CTX, sql("PRAGMA journal_mode"), &[Col::Text])
                .await?,
        )?;
        found.journal_mode = Some(mode.to_ascii_lowercase());
        let busy = first_int(
            db.fetch(CTX, sql("PRAGMA busy_timeout"), &[Col::Int])
                .await?,
        )?;
        found.busy_timeout = busy
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
    }
    Ok(())
}

fn first_int(rows: Vec<crate::driver::Row>) -> Result<Option<i64>> {
    rows.first()
        .map(|r| r.opt_int(0))
        .transpose()
        .map(Option::flatten)
}

fn first_text(rows: Vec<crate::driver::Row>) -> Result<String> {
    let mut row = rows
        .into_iter()
        .next()
        .ok_or_else(|| Error::serialization("the database answered a query with no row"))?;
    row.take_text(0)
}

/// `PostgreSQL 16.4`, `MariaDB 11.4.2`, `MySQL 8.4.0`, `SQLite 3.46.0`.
fn server_name(backend: Backend, version: &str) -> String {
    match backend {
        Backend::Sqlite => format!("SQLite {version}"),
        // `15.20 (Debian 15.20-0+deb12u1)`: the number is enough.
        Backend::Postgres => format!(
            "PostgreSQL {}",
            version.split_whitespace().next().unwrap_or(version)
        ),
        Backend::MySql => match version.split_once("-MariaDB") {
            Some((number, _)) => format!("MariaDB {number}"),
            None => format!("MySQL {version}"),
        },
    }
}

#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
enum SqliteOpened {
    Missing(PathBuf),
    Db(Db, bool),
}

/// Opens a SQLite database read-only with one connection (and `config`'s busy timeout), or
/// says the file is missing; never creates it, never changes its journal mode.
#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &DbUrl, config: &SqlConfig) -> Result<SqliteOpened> {
    use crate::driver::Pool;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    const CTX: &str = "open the SQLite database";
    let options: SqliteConnectOptions = url
        .raw
        .parse()
        .map_err(|e| crate::error::sql_error(CTX, e))?;
    let memory = url.is_sqlite_memory();
    if !memory {
        let path = options.get_filename().to_path_buf();
        if !path.exists() {
            return Ok(SqliteOpened::Missing(path));
        }
    }
    let options = if memory {
        options
    } else {
        options.create_if_missing(false).read_only(true)
    }
    .busy_timeout(config.busy_timeout);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(config.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(|e| crate::error::sql_error(CTX, e))?;
    Ok(SqliteOpened::Db(
        Db::new(Pool::Sqlite(pool), Dialect::new(Backend::Sqlite)),
        memory,
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_url: &DbUrl, _config: &SqlConfig) -> Result<SqliteOpened> {
    Err(Error::unsupported(
        "SQLite support is not compiled in: enable the `sqlite` feature of memory-sql",
    ))
}

/// The error of an inspection as a sentence that names neither the URL nor its secrets: the
/// URL (already redacted by the messages that hold it) becomes "the database".
fn doctor_error(url: &DbUrl, err: Error) -> Error {
    let err = redact_error(url, err);
    let clean = |text: &str| {
        url.scrub(text)
            .replace(url.redacted.as_str(), "the database")
    };
    rewrite_error(err, clean)
}

impl SqlInspection {
    /// An inspection of `backend` with `prefix` before anything was read.
    fn nothing_yet(backend: Backend, prefix: &TablePrefix) -> Self {
        Self {
            backend,
            server_version: None,
            table_prefix: prefix.as_str().to_owned(),
            schema_version: 0,
            latest_version: SCHEMA_VERSION,
            pending: Vec::new(),
            in_memory: false,
            missing_file: None,
            journal_mode: None,
            busy_timeout: None,
        }
    }

    /// The findings, in order: `connection`, `schema version`, `pending migrations`, and for
    /// a SQLite file `journal mode` and `busy timeout`.
    ///
    /// - Tables at the newest version, or older ones (the next open migrates them): ok, the
    ///   pending versions named. No tables with the prefix yet, or no SQLite file yet:
    ///   warnings (the first open creates them; a typo in the URL or prefix looks the same).
    ///   Tables newer than this build: a warning (this build refuses to open them).
    /// - Journal mode: ok for WAL, a warning for any other mode of a file.
    /// - Busy timeout: ok, a warning when it is zero (writers fail at once on a lock).
    pub fn checks(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        let prefix = &self.table_prefix;
        if let Some(path) = &self.missing_file {
            checks.push(Check::warning(
                "connection",
                format!(
                    "There is no SQLite file at {} yet: the first open creates it.",
                    path.display()
                ),
            ));
        } else if self.in_memory {
            checks.push(Check::ok(
                "connection",
                format!(
                    "A private in-memory {} database: each open creates it empty, at schema \
                     version {}, and it is gone when the process ends.",
                    self.server_version.as_deref().unwrap_or("SQLite"),
                    self.latest_version
                ),
            ));
            return checks;
        } else {
            let server = self.server_version.as_deref().unwrap_or("the database");
            let how = if self.backend == Backend::Sqlite {
                "Opened the file read-only"
            } else {
                "Connected"
            };
            checks.push(Check::ok("connection", format!("{how}: {server} answers.")));
        }
        let (current, latest) = (self.schema_version, self.latest_version);
        checks.push(if current == 0 {
            Check::warning(
                "schema version",
                format!(
                    "There are no tables with prefix {prefix:?} yet: the first open creates \
                     them at schema version {latest}."
                ),
            )
        } else if current > latest {
            Check::warning(
                "schema version",
                format!(
                    "The tables with prefix {prefix:?} are at schema version {current}, newer \
                     than the version {latest} this build knows: this build refuses to open \
                     them; upgrade agent-memory."
                ),
            )
        } else if current == latest {
            Check::ok(
                "schema version",
                format!(
                    "The tables with prefix {prefix:?} are at schema version {current}, the \
                     newest this build knows."
                ),
            )
        } else {
            Check::ok(
                "schema version",
                format!(
                    "The tables with prefix {prefix:?} are at schema version {current}; this \
                     build knows version {latest}."
                ),
            )
        });
        if current <= latest {
            checks.push(Check::ok(
                "pending migrations",
                if self.pending.is_empty() {
                    "None: the schema is current.".to_owned()
                } else {
                    let list: Vec<String> = self
                        .pending
                        .iter()
                        .map(|(v, name)| format!("{v} ({name})"))
                        .collect();
                    format!(
                        "{} pending, applied by the next open: {}.",
                        if self.pending.len() == 1 {
                            "One migration is"
                        } else {
                            "Migrations are"
                        },
                        list.join(", ")
                    )
                },
            ));
        }
        if let Some(mode) = &self.journal_mode {
            checks.push(if mode == "wal" {
                Check::ok(
                    "journal mode",
                    "WAL, as expected: readers never wait for the writer.",
                )
            } else {
                Check::warning(
                    "journal mode",
                    format!(
                        "The file's journal mode is {mode}, not WAL: readers and the writer \
                         block each other. The next open by agent-memory switches it to WAL."
                    ),
                )
            });
        }
        if let Some(busy) = self.busy_timeout {
            checks.push(if busy.is_zero() {
                Check::warning(
                    "busy timeout",
                    "The busy timeout is zero: a writer fails at once when another holds the \
                     lock.",
                )
            } else {
                Check::ok(
                    "busy timeout",
                    format!(
                        "A writer waits up to {} ms for another writer's lock.",
                        busy.as_millis()
                    ),
                )
            });
        }
        checks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::doctor::CheckStatus;

    fn found(backend: Backend, version: u32) -> SqlInspection {
        SqlInspection {
            backend,
            server_version: Some("PostgreSQL 16.4".into()),
            table_prefix: "p_".into(),
            schema_version: version,
            latest_version: SCHEMA_VERSION,
            pending: names(pending_after(version)),
            in_memory: false,
            missing_file: None,
            journal_mode: None,
            busy_timeout: None,
        }
    }

    fn status(checks: &[Check], name: &str) -> Option<CheckStatus> {
        checks.iter().find(|c| c.name == name).map(|c| c.status)
    }

    #[test]
    fn schema_versions_classify() {
        let current = found(Backend::Postgres, SCHEMA_VERSION).checks();
        assert_eq!(status(&current, "schema version"), Some(CheckStatus::Ok));
        assert_eq!(
            status(&current, "pending migrations"),
            Some(CheckStatus::Ok)
        );
        assert!(current[2].detail.starts_with("None"));
        let old = found(Backend::Postgres, 3).checks();
        assert_eq!(status(&old, "schema version"), Some(CheckStatus::Ok));
        assert!(
            old[2]
                .detail
                .contains("4 (session_nonce), 5 (thread_epoch)"),
            "{}",
            old[2].detail
        );
        let none = found(Backend::Postgres, 0).checks();
        assert_eq!(status(&none, "schema version"), Some(CheckStatus::Warning));
        assert!(none[2].detail.contains("1 (init)"));
        let newer = found(Backend::Postgres, SCHEMA_VERSION + 1).checks();
        assert_eq!(status(&newer, "schema version"), Some(CheckStatus::Warning));
        assert_eq!(status(&newer, "pending migrations"), None);
    }

    #[test]
    fn journal_modes_and_busy_timeouts_classify() {
        let mut f = found(Backend::Sqlite, SCHEMA_VERSION);
        f.journal_mode = Some("wal".into());
        f.busy_timeout = Some(Duration::from_secs(10));
        let checks = f.checks();
        assert_eq!(status(&checks, "journal mode"), Some(CheckStatus::Ok));
        assert_eq!(status(&checks, "busy timeout"), Some(CheckStatus::Ok));
        f.journal_mode = Some("delete".into());
        f.busy_timeout = Some(Duration::ZERO);
        let checks = f.checks();
        assert_eq!(status(&checks, "journal mode"), Some(CheckStatus::Warning));
        assert_eq!(status(&checks, "busy timeout"), Some(CheckStatus::Warning));
    }

    #[test]
    fn server_names() {
        assert_eq!(
            server_name(Backend::MySql, "11.4.2-MariaDB-ubu2404"),
            "MariaDB 11.4.2"
        );
        assert_eq!(server_name(Backend::MySql, "8.4.0"), "MySQL 8.4.0");
        assert_eq!(server_name(Backend::Sqlite, "3.46.0"), "SQLite 3.46.0");
        assert_eq!(
            server_name(Backend::Postgres, "15.20 (Debian 15.20-0+deb12u1)"),
            "PostgreSQL 15.20"
        );
    }
}
