//! The few places where SQLite, PostgreSQL and MySQL/MariaDB need different SQL.
//!
//! Statements are written once with `?` placeholders and a `{prefix}` marker for the table
//! prefix; [`Dialect::render`] turns them into the database's form.

use std::fmt;

use crate::prefix::TablePrefix;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// SQLite, a file or in memory.
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
}

impl Backend {
    /// The backend's short name: `sqlite`, `postgres` or `mysql`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::MySql => "mysql",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The SQL differences of one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dialect {
    pub(crate) backend: Backend,
}

/// The most bind parameters one statement may carry. SQLite's default limit is 32,766,
/// PostgreSQL's and MySQL's 65,535; we stay under the smallest.
pub(crate) const MAX_PARAMS: usize = 32_000;

/// The most bytes of bound text one multi-row insert carries, well under MariaDB's default
/// 16 MiB `max_allowed_packet` (a single larger message still goes in a statement of its own;
/// messages are at most 8 MiB).
pub(crate) const MAX_STATEMENT_BYTES: usize = 4 * 1024 * 1024;

impl Dialect {
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend }
    }

    /// The database's clock in Unix milliseconds, as an SQL expression: the time base of every
    /// expiry, so that hosts whose clocks disagree agree on when a thread or session expires.
    pub(crate) fn now_ms(self) -> &'static str {
        match self.backend {
            // julianday('now') is the same for the whole statement.
            Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
            // The transaction's start time.
            Backend::Postgres => "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) * 1000 AS BIGINT)",
            // UTC, so the session's time zone (and its daylight-saving hour) plays no part.
            Backend::MySql => {
                "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"
            }
        }
    }

    /// Substitutes the prefix and the database's clock (`{now}`, see [`now_ms`](Self::now_ms))
    /// and, for PostgreSQL, numbers the placeholders (`$1`, `$2`, …).
    ///
    /// Statements hold no string literals with `?` or `{`: values are always bound.
    pub(crate) fn render(self, prefix: &TablePrefix, template: &str) -> String {
        let sql = template
            .replace("{prefix}", prefix.as_str())
            .replace("{now}", self.now_ms());
        match self.backend {
            Backend::Postgres => numbered_placeholders(&sql),
            Backend::Sqlite | Backend::MySql => sql,
        }
    }

    /// The suffix that locks the rows a `SELECT` reads until the transaction ends. SQLite
    /// needs none: a write transaction (`BEGIN IMMEDIATE`) already excludes other writers.
    pub(crate) fn for_update(self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "",
            Backend::Postgres | Backend::MySql => " FOR UPDATE",
        }
    }

    /// Whether `INSERT … ON CONFLICT … DO UPDATE … RETURNING` creates-or-locks the thread row
    /// in one statement (SQLite ≥ 3.35, PostgreSQL); MySQL locks with `SELECT … FOR UPDATE`
    /// and inserts when the row is missing.
    pub(crate) fn has_upsert_returning(self) -> bool {
        matches!(self.backend, Backend::Sqlite | Backend::Postgres)
    }
}

/// `sql` with each `?` placeholder numbered in order (`$1`, `$2`, …), as PostgreSQL takes
/// them. The statements are ours: no `?` stands in a literal.
pub(crate) fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len().saturating_add(16));
    let mut n = 0u32;
    for c in sql.chars() {
        if c == '?' {
            n = n.saturating_add(1);
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered() {
        let prefix = TablePrefix::new("am_").unwrap();
        let pg = Dialect::new(Backend::Postgres);
        assert_eq!(
            pg.render(
                &prefix,
                "SELECT a FROM {prefix}t WHERE a = ? AND b IN (?, ?)"
            ),
            "SELECT a FROM am_t WHERE a = $1 AND b IN ($2, $3)"
        );
        let my = Dialect::new(Backend::MySql);
        assert_eq!(
            my.render(&prefix, "SELECT a FROM {prefix}t WHERE a = ?"),
            "SELECT a FROM am_t WHERE a = ?"
        );
    }
}
