//! The thin layer between the stores and sqlx: one enum over the enabled databases, so every
//! operation is written once against [`Db`] and [`Tx`], with the few SQL differences in
//! [`Dialect`](crate::dialect::Dialect).
//!
//! Queries carry their arguments as [`Arg`]s and say which columns they read as [`Col`]s; rows
//! come back as plain [`Row`]s. Every statement sent to the server (including `BEGIN` and
//! `COMMIT`) is counted.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memory_core::{Error, Result};
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

use crate::dialect::Dialect;
use crate::error::{Context, sql_error};

/// One bound argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    OptText(Option<&'a str>),
    OptInt(Option<i64>),
}

/// How to decode one column of a result row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Col {
    /// `BIGINT` / `INTEGER`, possibly `NULL`.
    Int,
    /// `SMALLINT` (the archived flag).
    Flag,
    /// Text, possibly `NULL`.
    Text,
}

/// One decoded value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Text(String),
}

/// One decoded row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(Vec<Value>);

impl Row {
    fn get(&self, i: usize) -> Result<&Value> {
        self.0
            .get(i)
            .ok_or_else(|| Error::serialization(format!("column {i} missing from a result row")))
    }

    /// A non-null integer column.
    pub(crate) fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?.ok_or_else(|| {
            Error::serialization(format!("column {i} is NULL where a number was expected"))
        })
    }

    /// A nullable integer column.
    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.get(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            Value::Text(_) => Err(Error::serialization(format!(
                "column {i} holds text where a number was expected"
            ))),
        }
    }

    /// A non-negative integer column as `u64`.
    pub(crate) fn uint(&self, i: usize) -> Result<u64> {
        let v = self.int(i)?;
        u64::try_from(v)
            .map_err(|_| Error::serialization(format!("column {i} holds {v}, expected >= 0")))
    }

    /// A nullable text column, taken out of the row.
    pub(crate) fn take_opt_text(&mut self, i: usize) -> Result<Option<String>> {
        let slot = self
            .0
            .get_mut(i)
            .ok_or_else(|| Error::serialization(format!("column {i} missing from a result row")))?;
        match std::mem::replace(slot, Value::Null) {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s)),
            Value::Int(_) => Err(Error::serialization(format!(
                "column {i} holds a number where text was expected"
            ))),
        }
    }

    /// A non-null text column, taken out of the row.
    pub(crate) fn take_text(&mut self, i: usize) -> Result<String> {
        self.take_opt_text(i)?.ok_or_else(|| {
            Error::serialization(format!("column {i} is NULL where text was expected"))
        })
    }
}

/// SQL text: a statement rendered once when the store opened, or one built for this call.
#[derive(Debug, Clone)]
pub(crate) enum SqlText {
    Shared(Arc<str>),
    Owned(String),
}

impl SqlText {
    fn into_sql_str(self) -> SqlStr {
        // Safety against injection: every SQL text of this crate is built from our own
        // constants and the table prefix, which is validated to `[a-z][a-z0-9_]*`; all values
        // are bound parameters.
        match self {
            SqlText::Shared(s) => AssertSqlSafe(s).into_sql_str(),
            SqlText::Owned(s) => AssertSqlSafe(s).into_sql_str(),
        }
    }
}

/// A statement and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Query<'a> {
    sql: SqlText,
    args: Vec<Arg<'a>>,
    persistent: bool,
}

impl<'a> Query<'a> {
    /// A statement rendered at open; prepared once per connection and cached.
    pub(crate) fn shared(sql: &Arc<str>) -> Self {
        Self {
            sql: SqlText::Shared(Arc::clone(sql)),
            args: Vec::new(),
            persistent: true,
        }
    }

    /// A statement built for this call (variable row or id counts). Small ones are cached like
    /// the others (a turn appends one or two messages, so they repeat); large ones are not, so
    /// they do not push the common statements out of the connection's cache.
    pub(crate) fn built(sql: String, rows: usize) -> Self {
        Self {
            sql: SqlText::Owned(sql),
            args: Vec::new(),
            persistent: rows <= 8,
        }
    }

    /// Adds an argument.
    pub(crate) fn arg(mut self, arg: Arg<'a>) -> Self {
        self.args.push(arg);
        self
    }

    /// Adds an integer argument.
    pub(crate) fn int(self, v: i64) -> Self {
        self.arg(Arg::Int(v))
    }

    /// Adds a text argument.
    pub(crate) fn text(self, v: &'a str) -> Self {
        self.arg(Arg::Text(v))
    }

    /// Adds arguments.
    pub(crate) fn args(mut self, args: impl IntoIterator<Item = Arg<'a>>) -> Self {
        self.args.extend(args);
        self
    }
}

macro_rules! build {
    ($db:ty, $query:expr) => {{
        let Query {
            sql,
            args,
            persistent,
        } = $query;
        let mut q = sqlx::query::<$db>(sql.into_sql_str()).persistent(persistent);
        for arg in args {
            q = match arg {
                Arg::Int(v) => q.bind(v),
                Arg::Text(v) => q.bind(v),
                Arg::OptText(v) => q.bind(v),
                Arg::OptInt(v) => q.bind(v),
            };
        }
        q
    }};
}

fn decode<R>(row: &R, cols: &[Col]) -> std::result::Result<Row, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    i64: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    i16: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    String: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
{
    let mut out = Vec::with_capacity(cols.len());
    for (i, col) in cols.iter().enumerate() {
        out.push(match col {
            Col::Int => row
                .try_get::<Option<i64>, _>(i)?
                .map_or(Value::Null, Value::Int),
            Col::Flag => row
                .try_get::<Option<i16>, _>(i)?
                .map_or(Value::Null, |v| Value::Int(i64::from(v))),
            Col::Text => row
                .try_get::<Option<String>, _>(i)?
                .map_or(Value::Null, Value::Text),
        });
    }
    Ok(Row(out))
}

/// The application's or our own connection pool, one variant per enabled database.
#[derive(Clone)]
pub(crate) enum Pool {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
    #[cfg(feature = "mysql")]
    MySql(sqlx::MySqlPool),
    /// Keeps the enum inhabited-by-nothing when no database feature is enabled.
    #[allow(dead_code)]
    Disabled(Infallible),
}

/// A transaction (or, for MySQL migrations, a plain connection: MySQL commits DDL implicitly).
pub(crate) enum TxInner<'c> {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::Transaction<'c, sqlx::Sqlite>),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::Transaction<'c, sqlx::Postgres>),
    #[cfg(feature = "mysql")]
    MySql(sqlx::Transaction<'c, sqlx::MySql>),
    #[cfg(feature = "mysql")]
    MySqlConn(sqlx::pool::PoolConnection<sqlx::MySql>),
    #[allow(dead_code)]
    Disabled(Infallible, PhantomData<&'c ()>),
}

/// The pool, its dialect and the statement counter.
pub(crate) struct Db {
    pub(crate) pool: Pool,
    pub(crate) dialect: Dialect,
    round_trips: AtomicU64,
}

/// An open transaction on a [`Db`]. Dropped without [`commit`](Tx::commit), it rolls back.
pub(crate) struct Tx<'a> {
    inner: TxInner<'static>,
    trips: &'a AtomicU64,
}

impl Db {
    pub(crate) fn new(pool: Pool, dialect: Dialect) -> Self {
        Self {
            pool,
            dialect,
            round_trips: AtomicU64::new(0),
        }
    }

    /// Statements sent since the store opened.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Converts an error of this pool. A pool that timed out without a single open connection
    /// could not reach the server at all: that is `Unavailable`, not a busy pool's `Timeout`.
    fn error(&self, ctx: Context<'_>, err: sqlx::Error) -> Error {
        if matches!(err, sqlx::Error::PoolTimedOut) && self.pool_size() == 0 {
            return Error::new(
                memory_core::ErrorKind::Unavailable,
                format!("{ctx}: no connection to the database could be opened in time"),
            )
            .with_source(err);
        }
        sql_error(ctx, err)
    }

    fn pool_size(&self) -> u32 {
        match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => p.size(),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => p.size(),
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => p.size(),
            Pool::Disabled(never) => match *never {},
        }
    }

    fn count(&self) {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a statement outside a transaction; returns the rows it affected.
    pub(crate) async fn execute(&self, ctx: Context<'_>, query: Query<'_>) -> Result<u64> {
        self.count();
        let res: std::result::Result<u64, sqlx::Error> = match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => build!(sqlx::Sqlite, query)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => build!(sqlx::Postgres, query)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => build!(sqlx::MySql, query)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            Pool::Disabled(never) => match *never {},
        };
        res.map_err(|e| self.error(ctx, e))
    }

    /// Runs a query outside a transaction; returns its rows decoded as `cols`.
    pub(crate) async fn fetch(
        &self,
        ctx: Context<'_>,
        query: Query<'_>,
        cols: &[Col],
    ) -> Result<Vec<Row>> {
        self.count();
        let res: std::result::Result<Vec<Row>, sqlx::Error> = match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => build!(sqlx::Sqlite, query)
                .fetch_all(p)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => build!(sqlx::Postgres, query)
                .fetch_all(p)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => build!(sqlx::MySql, query)
                .fetch_all(p)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            Pool::Disabled(never) => match *never {},
        };
        res.map_err(|e| self.error(ctx, e))
    }

    /// Begins a write transaction. On SQLite it is `BEGIN IMMEDIATE`, so the transaction holds
    /// the write lock from its first statement: no read-then-upgrade deadlock, and waiting
    /// writers queue on the busy timeout instead of failing with "database is locked".
    pub(crate) async fn begin(&self, ctx: Context<'_>) -> Result<Tx<'_>> {
        self.count();
        let res: std::result::Result<TxInner<'static>, sqlx::Error> = match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => p.begin_with("BEGIN IMMEDIATE").await.map(TxInner::Sqlite),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => p.begin().await.map(TxInner::Postgres),
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => p.begin().await.map(TxInner::MySql),
            Pool::Disabled(never) => match *never {},
        };
        Ok(Tx {
            inner: res.map_err(|e| self.error(ctx, e))?,
            trips: &self.round_trips,
        })
    }

    /// A dedicated MySQL connection, closed (not returned to the pool) when dropped, for work
    /// that holds session-level state such as a `GET_LOCK` named lock.
    #[cfg(feature = "mysql")]
    pub(crate) async fn mysql_session(&self, ctx: Context<'_>) -> Result<Tx<'_>> {
        self.count();
        let Pool::MySql(p) = &self.pool else {
            return Err(Error::new(
                memory_core::ErrorKind::Backend,
                "a MySQL session was asked of another database",
            ));
        };
        let mut conn = p.acquire().await.map_err(|e| self.error(ctx, e))?;
        conn.close_on_drop();
        Ok(Tx {
            inner: TxInner::MySqlConn(conn),
            trips: &self.round_trips,
        })
    }
}

impl Tx<'_> {
    /// Runs a statement in the transaction; returns the rows it affected.
    pub(crate) async fn execute(&mut self, ctx: Context<'_>, query: Query<'_>) -> Result<u64> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        let res: std::result::Result<u64, sqlx::Error> = match &mut self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => build!(sqlx::Sqlite, query)
                .execute(&mut **t)
                .await
                .map(|r| r.rows_affected()),
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => build!(sqlx::Postgres, query)
                .execute(&mut **t)
                .await
                .map(|r| r.rows_affected()),
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => build!(sqlx::MySql, query)
                .execute(&mut **t)
                .await
                .map(|r| r.rows_affected()),
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(c) => build!(sqlx::MySql, query)
                .execute(&mut **c)
                .await
                .map(|r| r.rows_affected()),
            TxInner::Disabled(never, _) => match *never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }

    /// Runs a query in the transaction; returns its rows decoded as `cols`.
    pub(crate) async fn fetch(
        &mut self,
        ctx: Context<'_>,
        query: Query<'_>,
        cols: &[Col],
    ) -> Result<Vec<Row>> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        let res: std::result::Result<Vec<Row>, sqlx::Error> = match &mut self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => build!(sqlx::Sqlite, query)
                .fetch_all(&mut **t)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => build!(sqlx::Postgres, query)
                .fetch_all(&mut **t)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => build!(sqlx::MySql, query)
                .fetch_all(&mut **t)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(c) => build!(sqlx::MySql, query)
                .fetch_all(&mut **c)
                .await
                .and_then(|rows| rows.iter().map(|r| decode(r, cols)).collect()),
            TxInner::Disabled(never, _) => match *never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }

    /// Commits (a plain MySQL session has nothing to commit).
    pub(crate) async fn commit(self, ctx: Context<'_>) -> Result<()> {
        let res: std::result::Result<(), sqlx::Error> = match self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.commit().await
            }
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.commit().await
            }
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.commit().await
            }
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(_) => Ok(()),
            TxInner::Disabled(never, _) => match never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }

    /// Rolls back explicitly (dropping does it too, on the connection's next use).
    pub(crate) async fn rollback(self, ctx: Context<'_>) -> Result<()> {
        let res: std::result::Result<(), sqlx::Error> = match self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.rollback().await
            }
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.rollback().await
            }
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                t.rollback().await
            }
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(_) => Ok(()),
            TxInner::Disabled(never, _) => match never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }
}
