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

use crate::dialect::{Backend, Dialect};
use crate::error::{Context, sql_error};

/// One bound argument.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    OptText(Option<&'a str>),
    OptInt(Option<i64>),
    /// Bytes (`BLOB`, `BYTEA`, `LONGBLOB`).
    Bytes(&'a [u8]),
    /// A `BIGINT[]` (PostgreSQL only).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Ints(Vec<i64>),
    /// A `TEXT[]` (PostgreSQL only).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Texts(Vec<&'a str>),
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
    /// A double-precision number (a relevance score), possibly `NULL`.
    Float,
    /// Bytes (`BLOB`, `BYTEA`, `LONGBLOB`), possibly `NULL`.
    Bytes,
}

/// One decoded value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    /// A text column whose bytes are not UTF-8 (SQLite stores what it is given): an error
    /// where the row is used, never for the whole result.
    NotUtf8,
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

    /// Whether the column is `NULL` (a missing column counts as `NULL`).
    pub(crate) fn is_null(&self, i: usize) -> bool {
        matches!(self.0.get(i), None | Some(Value::Null))
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
            Value::Text(_) | Value::NotUtf8 | Value::Bytes(_) => Err(Error::serialization(
                format!("column {i} holds text or bytes where a number was expected"),
            )),
            Value::Float(_) => Err(Error::serialization(format!(
                "column {i} holds a fraction where an integer was expected"
            ))),
        }
    }

    /// A non-null floating-point column.
    pub(crate) fn float(&self, i: usize) -> Result<f64> {
        match self.get(i)? {
            Value::Float(v) => Ok(*v),
            Value::Null => Err(Error::serialization(format!(
                "column {i} is NULL where a number was expected"
            ))),
            Value::Int(_) | Value::Text(_) | Value::NotUtf8 | Value::Bytes(_) => Err(
                Error::serialization(format!("column {i} does not hold a floating-point number")),
            ),
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
            Value::Int(_) | Value::Float(_) => Err(Error::serialization(format!(
                "column {i} holds a number where text was expected"
            ))),
            Value::NotUtf8 => Err(Error::serialization(format!(
                "column {i} holds text that is not UTF-8"
            ))),
            Value::Bytes(_) => Err(Error::serialization(format!(
                "column {i} holds bytes where text was expected"
            ))),
        }
    }

    /// A non-null bytes column, taken out of the row.
    pub(crate) fn take_bytes(&mut self, i: usize) -> Result<Vec<u8>> {
        let slot = self
            .0
            .get_mut(i)
            .ok_or_else(|| Error::serialization(format!("column {i} missing from a result row")))?;
        match std::mem::replace(slot, Value::Null) {
            Value::Bytes(b) => Ok(b),
            Value::Null => Err(Error::serialization(format!(
                "column {i} is NULL where bytes were expected"
            ))),
            Value::Int(_) | Value::Float(_) | Value::Text(_) | Value::NotUtf8 => Err(
                Error::serialization(format!("column {i} does not hold bytes")),
            ),
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

    /// A statement built for this call. `cache` says whether to prepare it once per connection
    /// and keep it: yes for shapes that repeat (a turn appends one or two messages), no for
    /// one-offs, so they do not push the common statements out of the connection's cache.
    pub(crate) fn built(sql: String, cache: bool) -> Self {
        Self {
            sql: SqlText::Owned(sql),
            args: Vec::new(),
            persistent: cache,
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
    /// Adds a bytes argument.
    pub(crate) fn bytes(self, v: &'a [u8]) -> Self {
        self.arg(Arg::Bytes(v))
    }

    pub(crate) fn text(self, v: &'a str) -> Self {
        self.arg(Arg::Text(v))
    }

    /// Adds arguments.
    pub(crate) fn args(mut self, args: impl IntoIterator<Item = Arg<'a>>) -> Self {
        self.args.extend(args);
        self
    }
}

/// What sqlx does not share between its databases: the rows a statement affected, and
/// arrays (PostgreSQL's alone; the other dialects never build a statement with one).
pub(crate) trait SqlDb: sqlx::Database + sqlx::database::HasStatementCache {
    fn rows_affected(result: &Self::QueryResult) -> u64;

    fn bind_array<'q>(
        query: sqlx::query::Query<'q, Self, Self::Arguments>,
        arg: Arg<'_>,
    ) -> sqlx::query::Query<'q, Self, Self::Arguments> {
        let _ = arg;
        query
    }
}

#[cfg(feature = "sqlite")]
impl SqlDb for sqlx::Sqlite {
    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

#[cfg(feature = "postgres")]
impl SqlDb for sqlx::Postgres {
    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }

    fn bind_array<'q>(
        query: sqlx::query::Query<'q, Self, Self::Arguments>,
        arg: Arg<'_>,
    ) -> sqlx::query::Query<'q, Self, Self::Arguments> {
        match arg {
            Arg::Ints(v) => query.bind(v),
            Arg::Texts(v) => query.bind(v),
            _ => query,
        }
    }
}

#[cfg(feature = "mysql")]
impl SqlDb for sqlx::MySql {
    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

/// What a statement is run for.
#[derive(Debug, Clone, Copy)]
enum Op<'c> {
    /// The number of rows it affects.
    Execute,
    /// Its rows, decoded as these columns.
    Fetch(&'c [Col]),
}

/// What a statement gave back, per [`Op`].
enum Output {
    Affected(u64),
    Rows(Vec<Row>),
}

impl Output {
    fn affected(self) -> u64 {
        match self {
            Output::Affected(n) => n,
            Output::Rows(rows) => rows.len() as u64,
        }
    }

    fn rows(self) -> Vec<Row> {
        match self {
            Output::Rows(rows) => rows,
            Output::Affected(_) => Vec::new(),
        }
    }
}

/// Runs `query` on any sqlx executor (a pool, a transaction, a connection) of any database.
async fn run<'c, DB, E>(
    executor: E,
    query: Query<'_>,
    op: Op<'_>,
) -> std::result::Result<Output, sqlx::Error>
where
    DB: SqlDb,
    DB::Arguments: sqlx::IntoArguments<DB>,
    E: sqlx::Executor<'c, Database = DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i16: sqlx::Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> f64: sqlx::Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> String: sqlx::Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Vec<u8>: sqlx::Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<&'t str>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t [u8]: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let Query {
        sql,
        args,
        persistent,
    } = query;
    let mut q = sqlx::query::<DB>(sql.into_sql_str()).persistent(persistent);
    for arg in args {
        q = match arg {
            Arg::Int(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::OptText(v) => q.bind(v),
            Arg::OptInt(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
            array @ (Arg::Ints(_) | Arg::Texts(_)) => DB::bind_array(q, array),
        };
    }
    match op {
        Op::Execute => {
            let result = q.execute(executor).await?;
            Ok(Output::Affected(DB::rows_affected(&result)))
        }
        Op::Fetch(cols) => {
            let rows = q.fetch_all(executor).await?;
            let decoded = rows.iter().map(|r| decode(r, cols));
            Ok(Output::Rows(
                decoded.collect::<std::result::Result<_, _>>()?,
            ))
        }
    }
}

fn decode<R>(row: &R, cols: &[Col]) -> std::result::Result<Row, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    i64: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    i16: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    f64: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    String: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    Vec<u8>: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
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
            Col::Float => row
                .try_get::<Option<f64>, _>(i)?
                .map_or(Value::Null, Value::Float),
            Col::Bytes => row
                .try_get::<Option<Vec<u8>>, _>(i)?
                .map_or(Value::Null, Value::Bytes),
            Col::Text => match row.try_get::<Option<String>, _>(i) {
                Ok(text) => text.map_or(Value::Null, Value::Text),
                // Bytes that are not UTF-8 spoil their row only (see `Value::NotUtf8`).
                Err(err) => match row.try_get::<Option<Vec<u8>>, _>(i) {
                    Ok(Some(bytes)) if std::str::from_utf8(&bytes).is_err() => Value::NotUtf8,
                    _ => return Err(err),
                },
            },
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

impl Pool {
    /// The engine the pool connects to.
    pub(crate) fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Pool::Postgres(_) => Backend::Postgres,
            #[cfg(feature = "mysql")]
            Pool::MySql(_) => Backend::MySql,
            Pool::Disabled(never) => match *never {},
        }
    }
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

    /// Closes the pool: waits for checked-out connections to come back and closes them.
    pub(crate) async fn close(&self) {
        match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => p.close().await,
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => p.close().await,
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => p.close().await,
            Pool::Disabled(never) => match *never {},
        }
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
        self.run(ctx, query, Op::Execute)
            .await
            .map(Output::affected)
    }

    /// Runs a query outside a transaction; returns its rows decoded as `cols`.
    pub(crate) async fn fetch(
        &self,
        ctx: Context<'_>,
        query: Query<'_>,
        cols: &[Col],
    ) -> Result<Vec<Row>> {
        self.run(ctx, query, Op::Fetch(cols))
            .await
            .map(Output::rows)
    }

    async fn run(&self, ctx: Context<'_>, query: Query<'_>, op: Op<'_>) -> Result<Output> {
        self.count();
        let res: std::result::Result<Output, sqlx::Error> = match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => run(p, query, op).await,
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => run(p, query, op).await,
            #[cfg(feature = "mysql")]
            Pool::MySql(p) => run(p, query, op).await,
            Pool::Disabled(never) => match *never {},
        };
        res.map_err(|e| self.error(ctx, e))
    }

    /// Begins a write transaction. On SQLite it is `BEGIN IMMEDIATE`, so the transaction holds
    /// the write lock from its first statement: no read-then-upgrade deadlock, and waiting
    /// writers queue on the busy timeout instead of failing with "database is locked".
    pub(crate) async fn begin(&self, ctx: Context<'_>) -> Result<Tx<'_>> {
        self.start(ctx, false).await
    }

    /// Begins a read-only transaction whose statements all see one snapshot of the database:
    /// `REPEATABLE READ` on PostgreSQL and MySQL (with the snapshot taken at once on MySQL), a
    /// deferred transaction on SQLite (its snapshot is taken by the first read and kept).
    pub(crate) async fn begin_read(&self, ctx: Context<'_>) -> Result<Tx<'_>> {
        self.start(ctx, true).await
    }

    async fn start(&self, ctx: Context<'_>, read_only: bool) -> Result<Tx<'_>> {
        self.count();
        let res: std::result::Result<TxInner<'static>, sqlx::Error> = match &self.pool {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(p) => p
                .begin_with(if read_only {
                    "BEGIN DEFERRED"
                } else {
                    "BEGIN IMMEDIATE"
                })
                .await
                .map(TxInner::Sqlite),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) if read_only => p
                .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await
                .map(TxInner::Postgres),
            #[cfg(feature = "postgres")]
            Pool::Postgres(p) => p.begin().await.map(TxInner::Postgres),
            // `SET TRANSACTION` applies to the next transaction only; one round trip for both.
            #[cfg(feature = "mysql")]
            Pool::MySql(p) if read_only => p
                .begin_with(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
                     START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
                )
                .await
                .map(TxInner::MySql),
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
        self.run(ctx, query, Op::Execute)
            .await
            .map(Output::affected)
    }

    /// Runs a query in the transaction; returns its rows decoded as `cols`.
    pub(crate) async fn fetch(
        &mut self,
        ctx: Context<'_>,
        query: Query<'_>,
        cols: &[Col],
    ) -> Result<Vec<Row>> {
        self.run(ctx, query, Op::Fetch(cols))
            .await
            .map(Output::rows)
    }

    async fn run(&mut self, ctx: Context<'_>, query: Query<'_>, op: Op<'_>) -> Result<Output> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        let res: std::result::Result<Output, sqlx::Error> = match &mut self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => run(&mut **t, query, op).await,
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => run(&mut **t, query, op).await,
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => run(&mut **t, query, op).await,
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(c) => run(&mut **c, query, op).await,
            TxInner::Disabled(never, _) => match *never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }

    /// Commits (a plain MySQL session has nothing to commit).
    pub(crate) async fn commit(self, ctx: Context<'_>) -> Result<()> {
        self.end(ctx, true).await
    }

    /// Rolls back explicitly (dropping does it too, on the connection's next use).
    pub(crate) async fn rollback(self, ctx: Context<'_>) -> Result<()> {
        self.end(ctx, false).await
    }

    /// Commits or rolls back: one statement, counted, on a transaction.
    async fn end(self, ctx: Context<'_>, commit: bool) -> Result<()> {
        let trips = self.trips;
        let res: std::result::Result<(), sqlx::Error> = match self.inner {
            #[cfg(feature = "sqlite")]
            TxInner::Sqlite(t) => end_transaction(t, commit, trips).await,
            #[cfg(feature = "postgres")]
            TxInner::Postgres(t) => end_transaction(t, commit, trips).await,
            #[cfg(feature = "mysql")]
            TxInner::MySql(t) => end_transaction(t, commit, trips).await,
            #[cfg(feature = "mysql")]
            TxInner::MySqlConn(_) => Ok(()),
            TxInner::Disabled(never, _) => match never {},
        };
        res.map_err(|e| sql_error(ctx, e))
    }
}

/// Commits `tx` (or rolls it back), counting the statement in `trips`.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
async fn end_transaction<DB: sqlx::Database>(
    tx: sqlx::Transaction<'_, DB>,
    commit: bool,
    trips: &AtomicU64,
) -> std::result::Result<(), sqlx::Error> {
    trips.fetch_add(1, Ordering::Relaxed);
    if commit {
        tx.commit().await
    } else {
        tx.rollback().await
    }
}
