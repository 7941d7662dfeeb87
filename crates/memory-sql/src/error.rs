//! Maps sqlx errors to the core [`ErrorKind`]s.
//!
//! | sqlx error | kind |
//! | --- | --- |
//! | I/O, TLS, closed pool, crashed worker; PostgreSQL class 08, 57P01–57P03, 53300; MySQL 1040 | `Unavailable` |
//! | pool acquire timed out while the pool had connections (all busy); PostgreSQL 57014 | `Timeout` |
//! | a lock wait that ran out of time (PostgreSQL 55P03, MySQL 1205, SQLite BUSY after the busy timeout) | `Timeout` (never retried: the wait already took its time) |
//! | pool acquire timed out with no connection open (the server cannot be reached) | `Unavailable` |
//! | serialization failure, deadlock, lost unique race (PostgreSQL 40001, 40P01, 23505; MySQL 1213, 1062; SQLite BUSY_SNAPSHOT, LOCKED, UNIQUE) | `Conflict` (retried first where the operation is safe to retry) |
//! | decoding a column, encoding a value | `Serialization` |
//! | bad URL or option | `InvalidInput` |
//! | MySQL 1153 (packet too large); PostgreSQL 54000 (a program limit: a `tsvector` over 1 MB) | `LimitExceeded` |
//! | anything else | `Backend` |
//!
//! The sqlx error is kept as the [`source`](std::error::Error::source).

use std::error::Error as StdError;

use memory_core::{Error, ErrorKind};

/// What was being done, for error messages (e.g. `"append to thread"`).
pub(crate) type Context<'a> = &'a str;

/// Converts a sqlx error, saying what was being done; temporary as [`is_temporary`] says.
pub(crate) fn sql_error(ctx: Context<'_>, err: sqlx::Error) -> Error {
    let kind = classify(&err);
    let message = match kind {
        ErrorKind::Unavailable => format!("{ctx}: the database is unreachable: {err}"),
        ErrorKind::Timeout => format!("{ctx}: timed out: {err}"),
        ErrorKind::Conflict => format!("{ctx}: lost a race with a concurrent writer: {err}"),
        _ => format!("{ctx}: {err}"),
    };
    let temporary = is_temporary(&err, kind);
    Error::new(kind, message)
        .with_temporary(temporary)
        .with_source(err)
}

/// Whether the call may succeed later, from what happened: a connection refused, reset or
/// cut, a pool that timed out, a server restarting or out of connections, a lost race. Not a
/// file that cannot be opened, a TLS handshake refused (a certificate, a protocol), a pool
/// the application closed or a crashed SQLite worker: retrying those fails the same way.
fn is_temporary(err: &sqlx::Error, kind: ErrorKind) -> bool {
    use std::io::ErrorKind as Io;
    match err {
        sqlx::Error::Io(io) => matches!(
            io.kind(),
            Io::ConnectionRefused
                | Io::ConnectionReset
                | Io::ConnectionAborted
                | Io::NotConnected
                | Io::BrokenPipe
                | Io::TimedOut
                | Io::UnexpectedEof
                | Io::Interrupted
                | Io::WouldBlock
                | Io::HostUnreachable
                | Io::NetworkUnreachable
                | Io::NetworkDown
                | Io::AddrNotAvailable
        ),
        sqlx::Error::Tls(_) | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => false,
        sqlx::Error::PoolTimedOut => true,
        // Bytes that make no sense where the protocol expects a reply: a connection cut
        // mid-reply (seen: a connection cut before the server's first byte read as "unexpected
        // response from SSLRequest: 0x00"). A fresh connection decides; a server that really
        // speaks another protocol fails every retry and the error surfaces after them.
        sqlx::Error::Protocol(_) => true,
        _ => kind.is_temporary(),
    }
}

fn classify(err: &sqlx::Error) -> ErrorKind {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => ErrorKind::Unavailable,
        sqlx::Error::PoolTimedOut => ErrorKind::Timeout,
        sqlx::Error::Configuration(_) => ErrorKind::InvalidInput,
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::Encode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::TypeNotFound { .. } => ErrorKind::Serialization,
        sqlx::Error::Database(db) => classify_database(db.as_ref()),
        _ => ErrorKind::Backend,
    }
}

fn classify_database(db: &dyn sqlx::error::DatabaseError) -> ErrorKind {
    #[cfg(feature = "mysql")]
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return match my.number() {
            1213 | 1062 => ErrorKind::Conflict,
            // Lock wait timeout; MariaDB's max_statement_time; MySQL's max_execution_time.
            1205 | 1969 | 3024 => ErrorKind::Timeout,
            1040 | 1053 => ErrorKind::Unavailable,
            1153 => ErrorKind::LimitExceeded,
            _ => ErrorKind::Backend,
        };
    }
    #[cfg(feature = "sqlite")]
    if let Some(lite) = db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        let code = sqlx::error::DatabaseError::code(lite)
            .and_then(|c| c.parse::<i32>().ok())
            .unwrap_or_default();
        // Primary result codes: 5 BUSY, 6 LOCKED, 13 FULL; UNIQUE/PRIMARY KEY constraints.
        // BUSY_SNAPSHOT (517) is a read snapshot that a writer outdated: returned at once, a
        // lost race. Any other BUSY came after the busy timeout was spent waiting: a timeout.
        return match code & 0xff {
            5 if code == 517 => ErrorKind::Conflict,
            5 => ErrorKind::Timeout,
            6 => ErrorKind::Conflict,
            13 => ErrorKind::LimitExceeded,
            _ if db.is_unique_violation() => ErrorKind::Conflict,
            _ => ErrorKind::Backend,
        };
    }
    let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
    match code.as_str() {
        "40001" | "40P01" | "23505" => ErrorKind::Conflict,
        // lock_not_available (lock_timeout), query_canceled (statement_timeout).
        "55P03" | "57014" => ErrorKind::Timeout,
        "57P01" | "57P02" | "57P03" | "53300" => ErrorKind::Unavailable,
        // program_limit_exceeded: a `tsvector` over 1 MB, an index row too large.
        "54000" => ErrorKind::LimitExceeded,
        c if c.starts_with("08") => ErrorKind::Unavailable,
        _ if db.is_unique_violation() => ErrorKind::Conflict,
        _ => ErrorKind::Backend,
    }
}

/// Whether `err` is SQLite's "database is locked" (`SQLITE_BUSY`, any extended code).
#[cfg(feature = "sqlite")]
pub(crate) fn is_sqlite_busy(err: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = err else {
        return false;
    };
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(|e| sqlx::error::DatabaseError::code(e)?.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

/// Whether `err` is a lost race the database reported (deadlock, serialization failure, unique
/// race), so the whole transaction may be retried. Lock waits that timed out are `Timeout`,
/// not `Conflict`: retrying them would wait as long again behind the same holder.
pub(crate) fn is_retryable(err: &Error) -> bool {
    err.kind() == ErrorKind::Conflict
        && StdError::source(err)
            .and_then(|s| s.downcast_ref::<sqlx::Error>())
            .is_some_and(|e| matches!(e, sqlx::Error::Database(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_errors_are_unavailable() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = sql_error("open", sqlx::Error::Io(io));
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.to_string().starts_with("unavailable: open:"));
        assert_eq!(
            sql_error("x", sqlx::Error::PoolTimedOut).kind(),
            ErrorKind::Timeout
        );
        assert_eq!(
            sql_error("x", sqlx::Error::PoolClosed).kind(),
            ErrorKind::Unavailable
        );
        assert!(!is_retryable(&sql_error("x", sqlx::Error::PoolClosed)));
    }

    #[test]
    fn temporariness_follows_the_cause() {
        let io = |kind| sql_error("open", sqlx::Error::Io(std::io::Error::from(kind)));
        assert!(io(std::io::ErrorKind::ConnectionRefused).is_temporary());
        assert!(io(std::io::ErrorKind::ConnectionReset).is_temporary());
        let missing = io(std::io::ErrorKind::NotFound);
        assert_eq!(missing.kind(), ErrorKind::Unavailable);
        assert!(!missing.is_temporary());
        assert!(!io(std::io::ErrorKind::PermissionDenied).is_temporary());
        assert!(sql_error("x", sqlx::Error::PoolTimedOut).is_temporary());
        // A reply garbled by a cut connection is temporary: a fresh connection decides.
        let garbled = sql_error(
            "append",
            sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".into()),
        );
        assert_eq!(garbled.kind(), ErrorKind::Unavailable);
        assert!(garbled.is_temporary());
        let closed = sql_error("x", sqlx::Error::PoolClosed);
        assert_eq!(closed.kind(), ErrorKind::Unavailable);
        assert!(!closed.is_temporary());
        assert!(!sql_error("x", sqlx::Error::RowNotFound).is_temporary());
    }
}
