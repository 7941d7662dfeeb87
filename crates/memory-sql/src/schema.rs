//! The storage layout and its versioned migrations.
//!
//! Each schema version is one SQL file per dialect in `migrations/`, embedded in the binary,
//! with `{prefix}` standing for the (validated) table prefix. `{prefix}schema_migrations`
//! records the versions applied. On open the runner takes a lock (PostgreSQL
//! `pg_advisory_xact_lock`, MySQL `GET_LOCK`, SQLite `BEGIN IMMEDIATE`) so that processes
//! opening at once do not race, refuses a database that a newer build migrated (touching
//! nothing), and applies the missing versions in order. On SQLite and PostgreSQL all of it is
//! one transaction; MySQL commits DDL implicitly, so each statement stands alone there and a
//! rerun tolerates objects that already exist.

use memory_core::{Error, Result};

use crate::dialect::{Backend, Dialect};
use crate::driver::{Col, Db, Query, Tx};
use crate::error::Context;
use crate::prefix::TablePrefix;
use crate::rows::now_ms;

/// The schema version this build creates and reads.
pub const SCHEMA_VERSION: u32 = 8;

struct Migration {
    version: u32,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
    mysql: &'static str,
}

/// A migration whose scripts are `migrations/{sqlite,postgres,mysql}/<file>.sql`.
macro_rules! migration {
    ($version:literal, $name:literal, $file:literal) => {
        Migration {
            version: $version,
            name: $name,
            sqlite: include_str!(concat!("../migrations/sqlite/", $file, ".sql")),
            postgres: include_str!(concat!("../migrations/postgres/", $file, ".sql")),
            mysql: include_str!(concat!("../migrations/mysql/", $file, ".sql")),
        }
    };
}

const MIGRATIONS: &[Migration] = &[
    migration!(1, "init", "0001_init"),
    migration!(2, "active_window_index", "0002_active_window_index"),
    migration!(3, "first_active", "0003_first_active"),
    migration!(4, "session_nonce", "0004_session_nonce"),
    migration!(5, "thread_epoch", "0005_thread_epoch"),
    migration!(6, "text_index", "0006_text_index"),
    migration!(7, "vectors", "0007_vectors"),
    migration!(8, "quantized_vectors", "0008_quantized_vectors"),
];

impl Migration {
    fn script(&self, backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => self.sqlite,
            Backend::Postgres => self.postgres,
            Backend::MySql => self.mysql,
        }
    }
}

/// The statements of a script: `--` comment lines dropped, split on `;`, except inside a
/// `CREATE TRIGGER`, whose body holds statements of its own and which ends at `END;`.
fn statements(script: &str) -> Vec<String> {
    let without_comments: String = script
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut pending = String::new();
    for piece in without_comments.split(';') {
        if !pending.is_empty() {
            pending.push(';');
        }
        pending.push_str(piece);
        let statement = pending.trim();
        let upper = statement.to_ascii_uppercase();
        if upper.starts_with("CREATE TRIGGER") && !upper.ends_with("END") {
            continue;
        }
        if !statement.is_empty() {
            out.push(statement.to_owned());
        }
        pending.clear();
    }
    let rest = pending.trim();
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

fn migrations_table(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "CREATE TABLE IF NOT EXISTS {prefix}schema_migrations (\
             version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, \
             applied_at INTEGER NOT NULL)"
        }
        Backend::Postgres => {
            "CREATE TABLE IF NOT EXISTS {prefix}schema_migrations (\
             version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, \
             applied_at BIGINT NOT NULL)"
        }
        Backend::MySql => {
            "CREATE TABLE IF NOT EXISTS {prefix}schema_migrations (\
             version BIGINT NOT NULL PRIMARY KEY, name VARCHAR(200) NOT NULL, \
             applied_at BIGINT NOT NULL) ENGINE = InnoDB"
        }
    }
}

const CTX: Context<'static> = "migrate the schema";

fn ddl(dialect: Dialect, prefix: &TablePrefix, template: &str) -> Query<'static> {
    // DDL runs once: no need to cache it as a prepared statement, except on MySQL, where
    // sqlx closes an uncached statement with a packet the server never answers, so without
    // `TCP_NODELAY` the next statement waits ~40 ms for a delayed ACK. The MySQL migration
    // runs on a dedicated connection closed afterwards, so caching there costs nothing.
    Query::built(
        dialect.render(prefix, template),
        dialect.backend == Backend::MySql,
    )
}

/// A stable 64-bit key for the PostgreSQL advisory lock of this prefix (FNV-1a).
fn advisory_key(prefix: &TablePrefix) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "agent-memory schema "
        .bytes()
        .chain(prefix.as_str().bytes())
    {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// Brings the schema to `target` (at most [`SCHEMA_VERSION`]); returns the version the
/// database is at afterwards.
pub(crate) async fn migrate(db: &Db, prefix: &TablePrefix, target: u32) -> Result<u32> {
    let dialect = db.dialect;
    let target = target.min(SCHEMA_VERSION);
    match dialect.backend {
        Backend::Sqlite | Backend::Postgres => {
            let mut tx = db.begin(CTX).await?;
            if dialect.backend == Backend::Postgres {
                // Keep the "already exists, skipping" notices of `IF NOT EXISTS` out of the
                // application's logs, and wait for another process's migration (or an index
                // build behind writers) up to 60 s, as on MySQL, rather than the lock timeout
                // of writes (`SET LOCAL`: this transaction only).
                let settings = ddl(
                    dialect,
                    prefix,
                    "SELECT set_config('client_min_messages', 'warning', true), \
                     set_config('lock_timeout', '60s', true)",
                );
                tx.execute(CTX, settings).await?;
                // Serialize concurrent migrations.
                let lock = ddl(dialect, prefix, "SELECT pg_advisory_xact_lock(?)")
                    .int(advisory_key(prefix));
                tx.execute(CTX, lock).await?;
            }
            match apply(&mut tx, dialect, prefix, target).await {
                Ok(version) => {
                    tx.commit(CTX).await?;
                    Ok(version)
                }
                Err(err) => {
                    // Dropping the transaction rolls it back; say so explicitly when we can.
                    let _ = tx.rollback(CTX).await;
                    Err(err)
                }
            }
        }
        Backend::MySql => migrate_mysql(db, prefix, target).await,
    }
}

#[cfg(feature = "mysql")]
async fn migrate_mysql(db: &Db, prefix: &TablePrefix, target: u32) -> Result<u32> {
    // A named lock belongs to the connection: take a dedicated one, closed when dropped, so a
    // cancelled open never leaves the lock held in the pool.
    let mut session = db.mysql_session(CTX).await?;
    let name = format!("{}schema", prefix.as_str());
    let got = session
        .fetch(
            CTX,
            ddl(db.dialect, prefix, "SELECT CAST(GET_LOCK(?, 60) AS SIGNED)").text(&name),
            &[Col::Int],
        )
        .await?;
    if got.first().map(|r| r.opt_int(0)).transpose()?.flatten() != Some(1) {
        return Err(Error::new(
            memory_core::ErrorKind::Timeout,
            "migrate the schema: another process held the migration lock for 60 s",
        ));
    }
    let result = apply(&mut session, db.dialect, prefix, target).await;
    let release = ddl(db.dialect, prefix, "SELECT RELEASE_LOCK(?)").text(&name);
    let _ = session.execute(CTX, release).await;
    result
}

#[cfg(not(feature = "mysql"))]
async fn migrate_mysql(_db: &Db, _prefix: &TablePrefix, _target: u32) -> Result<u32> {
    Err(Error::unsupported(
        "MySQL support is not compiled in: enable the `mysql` feature",
    ))
}

async fn apply(
    tx: &mut Tx<'_>,
    dialect: Dialect,
    prefix: &TablePrefix,
    target: u32,
) -> Result<u32> {
    tx.execute(CTX, ddl(dialect, prefix, migrations_table(dialect.backend)))
        .await?;
    let current = read_version(tx, dialect, prefix).await?;
    if current > SCHEMA_VERSION {
        return Err(Error::unsupported(format!(
            "the tables with prefix {:?} are at schema version {current}, newer than the \
             version {SCHEMA_VERSION} this build of memory-sql knows; upgrade memory-sql \
             (nothing was changed)",
            prefix.as_str()
        )));
    }
    let mut version = current;
    for migration in MIGRATIONS
        .iter()
        .filter(|m| m.version > current && m.version <= target)
    {
        for statement in statements(migration.script(dialect.backend)) {
            match tx.execute(CTX, ddl(dialect, prefix, &statement)).await {
                Ok(_) => {}
                // MySQL cannot roll DDL back: after an interrupted run, objects may exist.
                Err(err) if dialect.backend == Backend::MySql && already_exists(&err) => {}
                Err(err) => return Err(err),
            }
        }
        let record = ddl(
            dialect,
            prefix,
            "INSERT INTO {prefix}schema_migrations (version, name, applied_at) \
             VALUES (?, ?, ?)",
        )
        .int(i64::from(migration.version))
        .text(migration.name)
        .int(now_ms());
        tx.execute(CTX, record).await?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            prefix = prefix.as_str(),
            "memory-sql: schema migrated"
        );
        version = migration.version;
    }
    Ok(version)
}

/// The schema version recorded in the database (0 when it holds none).
async fn read_version(tx: &mut Tx<'_>, dialect: Dialect, prefix: &TablePrefix) -> Result<u32> {
    let query = ddl(
        dialect,
        prefix,
        "SELECT MAX(version) FROM {prefix}schema_migrations",
    );
    let rows = tx
        .fetch("read the schema version", query, &[Col::Int])
        .await?;
    let max = rows.first().map(|r| r.opt_int(0)).transpose()?.flatten();
    u32::try_from(max.unwrap_or(0)).map_err(|_| {
        Error::serialization(format!(
            "{}schema_migrations holds an impossible version {max:?}",
            prefix.as_str()
        ))
    })
}

/// The schema version recorded in the database now, read in a transaction of its own.
pub(crate) async fn current_version(db: &Db, prefix: &TablePrefix) -> Result<u32> {
    const CTX: &str = "read the schema version";
    let mut tx = db.begin_read(CTX).await?;
    let version = read_version(&mut tx, db.dialect, prefix).await?;
    tx.commit(CTX).await?;
    Ok(version)
}

/// The migrations a database at schema version `current` still needs, in order: each one's
/// version and name (none when it is at [`SCHEMA_VERSION`] or newer).
pub(crate) fn pending_after(current: u32) -> Vec<(u32, &'static str)> {
    MIGRATIONS
        .iter()
        .filter(|m| m.version > current)
        .map(|m| (m.version, m.name))
        .collect()
}

/// MySQL's "table exists", "duplicate column" and "duplicate key name".
fn already_exists(err: &Error) -> bool {
    #[cfg(feature = "mysql")]
    {
        use std::error::Error as _;
        if let Some(sqlx::Error::Database(db)) =
            err.source().and_then(|s| s.downcast_ref::<sqlx::Error>())
            && let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        {
            return matches!(my.number(), 1050 | 1060 | 1061);
        }
    }
    let _ = err;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_into_statements() {
        for m in MIGRATIONS {
            for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
                let stmts = statements(m.script(backend));
                assert!(!stmts.is_empty());
                for s in &stmts {
                    assert!(!s.contains("--"), "{s}");
                    assert!(s.contains("{prefix}"), "{s}");
                    assert!(!s.contains('?'), "{s}");
                }
            }
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
        assert!(
            MIGRATIONS
                .iter()
                .enumerate()
                .all(|(i, m)| m.version as usize == i + 1)
        );
    }

    #[test]
    fn triggers_stay_whole() {
        let stmts = statements(
            "CREATE TABLE {prefix}a (x INT);\n-- a comment; with a semicolon\n\
             CREATE TRIGGER {prefix}t AFTER INSERT ON {prefix}a BEGIN\n\
             INSERT INTO {prefix}b VALUES (1);\n INSERT INTO {prefix}b VALUES (2);\nEND;\n\
             CREATE INDEX {prefix}i ON {prefix}a (x);",
        );
        assert_eq!(stmts.len(), 3, "{stmts:?}");
        assert!(stmts[1].starts_with("CREATE TRIGGER") && stmts[1].ends_with("END"));
        assert_eq!(stmts[1].matches(';').count(), 2, "{}", stmts[1]);
        assert!(stmts[2].starts_with("CREATE INDEX"));
        // The SQLite text index: a table, an index, the FTS5 table and three triggers.
        let sqlite = statements(MIGRATIONS[5].sqlite);
        assert_eq!(sqlite.len(), 6, "{sqlite:?}");
        assert_eq!(
            sqlite
                .iter()
                .filter(|s| s.starts_with("CREATE TRIGGER"))
                .count(),
            3
        );
    }

    #[test]
    fn advisory_keys_differ_per_prefix() {
        let a = advisory_key(&TablePrefix::new("a_").unwrap());
        let b = advisory_key(&TablePrefix::new("b_").unwrap());
        assert_ne!(a, b);
        assert_eq!(a, advisory_key(&TablePrefix::new("a_").unwrap()));
    }
}
