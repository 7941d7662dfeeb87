//! Values as the tables store them: the scope's columns, Unix-millisecond times and expiries,
//! counts as SQL integers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memory_core::{Error, Result, Scope, SessionId, TenantId, ttl_millis};

use crate::driver::{Arg, Row};

/// The scope's columns, in table order: tenant, user_id, agent_id, source, session_id.
pub(crate) fn scope_args(scope: &Scope) -> [Arg<'_>; 5] {
    [
        Arg::Text(scope.tenant().as_str()),
        Arg::OptText(scope.user().map(|u| u.as_str())),
        Arg::OptText(scope.agent().map(|a| a.as_str())),
        Arg::Text(scope.source().as_str()),
        Arg::Text(scope.session_id().as_str()),
    ]
}

/// Rebuilds a scope from the columns tenant, user_id, agent_id, source, session_id at
/// `first..first + 5` of `row`; ids are validated again, so a corrupt row is a
/// `Serialization` error.
pub(crate) fn scope_from_row(row: &mut Row, first: usize) -> Result<Scope> {
    let corrupt = |err: Error| {
        Error::serialization(format!("a stored scope is invalid: {}", err.message()))
            .with_source(err)
    };
    let tenant = TenantId::new(row.take_text(first)?).map_err(corrupt)?;
    let user = row.take_opt_text(first.saturating_add(1))?;
    let agent = row.take_opt_text(first.saturating_add(2))?;
    let source = row.take_text(first.saturating_add(3))?;
    let session = SessionId::new(row.take_text(first.saturating_add(4))?).map_err(corrupt)?;
    let mut scope = Scope::new(tenant, session)
        .with_source(source)
        .map_err(corrupt)?;
    if let Some(user) = user {
        scope = scope.with_user(user).map_err(corrupt)?;
    }
    if let Some(agent) = agent {
        scope = scope.with_agent(agent).map_err(corrupt)?;
    }
    Ok(scope)
}

/// The application's clock, in Unix milliseconds. Expiry never uses it: expiries are set and
/// compared with the database's clock (`Dialect::now_ms`), so hosts whose clocks disagree
/// agree on what expired.
pub(crate) fn now_ms() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| to_i64(d.as_millis()))
        .unwrap_or_default();
    #[cfg(test)]
    let now =
        now.saturating_add(tests::APP_CLOCK_SKEW_MS.load(std::sync::atomic::Ordering::SeqCst));
    now
}

/// An unsigned count or bound as an SQL integer, saturating at `i64::MAX`.
pub(crate) fn to_i64(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// A time to live, checked ([`ttl_millis`]: 1 ms to 100 years), in milliseconds.
pub(crate) fn ttl_ms(ttl: Duration) -> Result<i64> {
    ttl_millis(ttl).map(to_i64)
}

/// The longest TTL in milliseconds ([`MAX_TTL`](memory_core::MAX_TTL)): a stored TTL is
/// bounded to it before the database adds it to its clock, so the sum cannot overflow.
pub(crate) const MAX_TTL_MS: i64 = {
    let ms = memory_core::MAX_TTL.as_millis();
    if ms > i64::MAX as u128 {
        i64::MAX
    } else {
        ms as i64
    }
};

/// A fresh epoch for a thread row (see `cursor.rs`): 62 random bits, never 0
/// ([`NO_EPOCH`](memory_core::NO_EPOCH)), so it fits the `BIGINT` column and is never one the
/// thread had before (but by a 2⁻⁶² chance).
pub(crate) fn fresh_epoch() -> i64 {
    let (high, _) = uuid::Uuid::new_v4().as_u64_pair();
    // `>> 2` keeps 62 bits: positive, and `+ 1` cannot overflow.
    to_i64(high >> 2).saturating_add(1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    //! D9: expiry follows the database's clock, not the host's. A host whose clock runs ahead
    //! (the application clock is skewed here, a test seam of [`now_ms`]) must neither expire
    //! nor purge a live thread or session, and every expiry is the database's clock + the TTL.

    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    use memory_core::{ChatMessage, HistoryStore, Scope, SessionStore, Window};

    use crate::SqlStore;
    use crate::driver::{Col, Query};

    /// Added to the application's clock by [`now_ms`](super::now_ms) in this crate's tests.
    pub(super) static APP_CLOCK_SKEW_MS: AtomicI64 = AtomicI64::new(0);

    const HOUR_MS: i64 = 3_600_000;

    fn scope() -> Scope {
        Scope::session("clock")
            .unwrap()
            .with_tenant(format!("t-{}", uuid::Uuid::new_v4().simple()))
            .unwrap()
    }

    /// The database's clock and the stored expiries of the thread and the session of `key`.
    async fn expiries(store: &SqlStore, key: &str) -> (i64, i64, i64) {
        let now_sql = format!("SELECT {}", store.inner.db.dialect.now_ms());
        let rows = store
            .inner
            .db
            .fetch("test", Query::built(now_sql, false), &[Col::Int])
            .await
            .unwrap();
        let db_now = rows[0].int(0).unwrap();
        let mut stored = Vec::new();
        for (table, col) in [("threads", "thread_key"), ("sessions", "scope_key")] {
            let sql = store.inner.db.dialect.render(
                &store.inner.prefix,
                &format!("SELECT expires_at FROM {{prefix}}{table} WHERE {col} = ?"),
            );
            let rows = store
                .inner
                .db
                .fetch("test", Query::built(sql, false).text(key), &[Col::Int])
                .await
                .unwrap();
            stored.push(rows[0].int(0).unwrap());
        }
        (db_now, stored[0], stored[1])
    }

    /// One store: expiries set by a host two hours ahead are still the database's clock + the
    /// TTL, and a host two hours ahead sees a thread and a session with an hour left as live.
    async fn expiry_uses_the_database_clock(store: SqlStore) {
        let scope = scope();
        let key = scope.key();
        let history: &dyn HistoryStore = &store;
        let sessions: &dyn SessionStore = &store;
        history
            .append(&scope, &[ChatMessage::user("one")])
            .await
            .unwrap();
        sessions
            .save(&scope, &serde_json::json!({"k": 1}), None)
            .await
            .unwrap();

        // A host whose clock is two hours ahead sets a TTL of one hour.
        APP_CLOCK_SKEW_MS.store(2 * HOUR_MS, Ordering::SeqCst);
        history
            .set_ttl(&scope, Some(Duration::from_secs(3600)))
            .await
            .unwrap();
        sessions
            .set_ttl(&scope, Some(Duration::from_secs(3600)))
            .await
            .unwrap();
        let (db_now, thread_at, session_at) = expiries(&store, &key).await;
        for at in [thread_at, session_at] {
            let left = at - db_now;
            assert!(
                (HOUR_MS - 60_000..=HOUR_MS).contains(&left),
                "the expiry is the database's clock + 1 h; {left} ms are left"
            );
        }

        // That host (clock ahead) purges (on a shared server, other runs' expired threads
        // may go), reads, appends and saves: this thread and session have not expired.
        history.purge_expired().await.unwrap();
        sessions.purge_expired().await.unwrap();
        assert_eq!(history.read(&scope, Window::All).await.unwrap().len(), 1);
        assert_eq!(history.count(&scope).await.unwrap().active, 1);
        let outcome = history
            .append(&scope, &[ChatMessage::user("two")])
            .await
            .unwrap();
        assert_eq!(outcome.seqs, [2], "the thread was not restarted");
        let loaded = sessions
            .load(&scope)
            .await
            .unwrap()
            .expect("the session is live");
        sessions
            .save(&scope, &serde_json::json!({"k": 2}), Some(loaded.version))
            .await
            .unwrap();
        let (db_now, _, session_at) = expiries(&store, &key).await;
        assert!(
            session_at - db_now <= HOUR_MS,
            "a save refreshes by the database's clock"
        );
        APP_CLOCK_SKEW_MS.store(0, Ordering::SeqCst);
        history.clear(&scope).await.unwrap();
        sessions.delete(&scope).await.unwrap();
    }

    /// One test runs every engine, one after the other: the skew is global to the process.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn expiry_follows_the_database_clock_not_the_hosts() {
        #[cfg(feature = "sqlite")]
        expiry_uses_the_database_clock(SqlStore::in_memory().await.unwrap()).await;
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        let prefix = format!("amtest_v{}_", crate::SCHEMA_VERSION);
        #[cfg(feature = "postgres")]
        {
            let url = std::env::var("AGENT_MEMORY_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            let store = SqlStore::builder(url)
                .table_prefix(prefix.as_str())
                .connect()
                .await
                .expect("the PostgreSQL server is required");
            expiry_uses_the_database_clock(store).await;
        }
        #[cfg(feature = "mysql")]
        {
            let url = std::env::var("AGENT_MEMORY_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
            let store = SqlStore::builder(url)
                .table_prefix(prefix.as_str())
                .connect()
                .await
                .expect("the MySQL/MariaDB server is required");
            expiry_uses_the_database_clock(store).await;
        }
    }
}
