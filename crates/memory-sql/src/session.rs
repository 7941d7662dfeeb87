//! [`SessionStore`] for [`SqlStore`]: one row per session in `{prefix}sessions`, with a
//! `version` column for optimistic concurrency. A save with an expected version is a single
//! conditional `UPDATE`, so a stale writer changes nothing.
//!
//! Tombstones: a deleted, expired or purged session keeps its row with state `''` and
//! `expires_at` 0 (see [`SessionSql`](crate::sql::SessionSql)), so its version survives and a
//! re-created session continues above it. A tombstone costs one row of the key, the scope
//! columns and a version (no state) per scope ever deleted or expired; re-creating the session
//! reuses it. Each save records its nonce (`last_nonce`), so a save retried after its reply was
//! lost returns its own version (see [`SqlStore::save_session_as`]).

use std::time::Duration;

use async_trait::async_trait;
use backon::Retryable;
use memory_core::{
    Error, ErrorKind, MessageId, Page, PageRequest, Result, Scope, ScopeFilter,
    SessionCapabilities, SessionStore, StoredSession, TenantId, encode_state,
};
use serde_json::Value;

use crate::driver::{Arg, Col, Query};
use crate::error::is_retryable;
use crate::retry::{MAX_RETRIES, backoff};
use crate::rows::{scope_args, ttl_ms};
use crate::store::{SqlStore, list_page, tenant_page};

/// A session row as [`SqlStore::probe_session`] reads it.
struct Probe {
    version: u64,
    live: bool,
    last_nonce: Option<String>,
}

/// How many times a create retries when the tombstone it revives changes under it, or a save
/// retries after a lost race or a lost connection (with the same nonce, so a save that was
/// applied is recognised).
const SAVE_ATTEMPTS: usize = MAX_RETRIES;

impl SqlStore {
    /// The row at `key`, live or a tombstone, or `None`.
    async fn probe_session(&self, key: &str) -> Result<Option<Probe>> {
        let rows = self
            .inner
            .db
            .fetch(
                "read a session's version",
                Query::shared(&self.inner.session.probe).text(key),
                &[Col::Int, Col::Int, Col::Text, Col::Int],
            )
            .await?;
        let Some(mut row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let now = row.int(3)?;
        Ok(Some(Probe {
            version: row.uint(0)?,
            live: row.opt_int(1)?.is_none_or(|at| at > now),
            last_nonce: row.take_opt_text(2)?,
        }))
    }

    /// The stored version of a live session, for conflict messages.
    async fn session_version(&self, key: &str) -> Result<Option<u64>> {
        Ok(self
            .probe_session(key)
            .await?
            .filter(|p| p.live)
            .map(|p| p.version))
    }

    async fn load_session(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let key = scope.key();
        let rows = self
            .inner
            .db
            .fetch(
                "load a session",
                Query::shared(&self.inner.session.load).text(&key),
                &[Col::Int, Col::Text],
            )
            .await?;
        let Some(mut row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let version = row.uint(0)?;
        let text = row.take_text(1)?;
        let state: Value = serde_json::from_str(&text).map_err(|err| {
            Error::serialization(format!("the stored state of session {scope} is not JSON"))
                .with_source(err)
        })?;
        Ok(Some(StoredSession { state, version }))
    }

    /// [`SessionStore::save`] as the request `nonce`: the row records the nonce of its last
    /// save, so a save re-sent after its reply was lost (the commit happened, the connection
    /// broke) finds its own write and returns its version instead of a `Conflict`.
    pub(crate) async fn save_session_as(
        &self,
        scope: &Scope,
        json: &str,
        expected_version: Option<u64>,
        nonce: &str,
    ) -> Result<u64> {
        let key = scope.key();
        let sql = &self.inner.session;
        let db = &self.inner.db;
        let Some(expected) = expected_version else {
            return self.create_session(scope, &key, json, nonce).await;
        };
        // A version past `i64::MAX` cannot be stored: it matches no session.
        let updated = match i64::try_from(expected) {
            Ok(expected_i) => {
                let update = Query::shared(&sql.update)
                    .text(json)
                    .text(nonce)
                    .text(&key)
                    .int(expected_i);
                db.execute("save a session", update).await?
            }
            Err(_) => 0,
        };
        if updated == 0 {
            let found = self.probe_session(&key).await?.filter(|p| p.live);
            if let Some(p) = &found
                && Some(p.version) == expected.checked_add(1)
                && p.last_nonce.as_deref() == Some(nonce)
            {
                // This very save, applied before its reply was lost.
                return Ok(p.version);
            }
            let found = found.map(|p| p.version);
            return Err(Error::version_conflict(scope, found, Some(expected)));
        }
        Ok(expected.saturating_add(1))
    }

    /// Creates the session at `key`: version 1 for a key never used, else one past its
    /// tombstone's version.
    async fn create_session(
        &self,
        scope: &Scope,
        key: &str,
        json: &str,
        nonce: &str,
    ) -> Result<u64> {
        let sql = &self.inner.session;
        let db = &self.inner.db;
        let insert = Query::shared(&sql.insert)
            .text(key)
            .args(scope_args(scope))
            .text(json)
            .text(nonce);
        let first = match db.execute("create a session", insert).await {
            Ok(_) => return Ok(1),
            Err(err) if err.kind() == ErrorKind::Conflict => err,
            Err(err) => return Err(err),
        };
        // The key has a row: a live session, this create applied already, or a tombstone.
        for _ in 0..SAVE_ATTEMPTS {
            let Some(probe) = self.probe_session(key).await? else {
                // Not in SQL: rows are never removed. Report the insert's conflict.
                break;
            };
            if probe.live {
                if probe.last_nonce.as_deref() == Some(nonce) {
                    return Ok(probe.version);
                }
                return Err(
                    Error::version_conflict(scope, Some(probe.version), None).with_source(first)
                );
            }
            let next = probe.version.checked_add(1).ok_or_else(|| {
                Error::new(
                    ErrorKind::LimitExceeded,
                    format!("session {scope} has used every version a session can have"),
                )
            })?;
            let tombstone = i64::try_from(probe.version).map_err(|_| {
                Error::serialization(format!("session {scope} holds an impossible version"))
            })?;
            let revive = Query::shared(&sql.revive)
                .text(json)
                .text(nonce)
                .text(key)
                .int(tombstone);
            if db.execute("create a session", revive).await? == 1 {
                return Ok(next);
            }
            // Another writer changed the row first: look again.
        }
        let found = self.session_version(key).await?;
        Err(Error::version_conflict(scope, found, None).with_source(first))
    }

    /// [`save_session_as`](Self::save_session_as) with a new nonce, retried with that nonce
    /// after a lost race or a lost connection: a retry of a save that was applied returns its
    /// version.
    async fn save_session(
        &self,
        scope: &Scope,
        json: &str,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        let nonce = MessageId::generate();
        let save = || self.save_session_as(scope, json, expected_version, nonce.as_str());
        save.retry(backoff().with_max_times(SAVE_ATTEMPTS.saturating_sub(1)))
            .when(|err| {
                is_retryable(err) || (err.kind() == ErrorKind::Unavailable && err.is_temporary())
            })
            .notify(|err, pause| {
                tracing::debug!(%err, ?pause, "memory-sql: retrying a session save");
            })
            .await
    }

    async fn delete_session(&self, key: &str) -> Result<bool> {
        let sql = &self.inner.session;
        let db = &self.inner.db;
        let deleted = db
            .execute(
                "delete a session",
                Query::shared(&sql.delete_live).text(key),
            )
            .await?;
        if deleted == 0 {
            // An expired row may still hold its state: bury it too (it does not count as
            // existing).
            db.execute("delete a session", Query::shared(&sql.bury).text(key))
                .await?;
        }
        Ok(deleted > 0)
    }
}

#[async_trait]
impl SessionStore for SqlStore {
    fn capabilities(&self) -> SessionCapabilities {
        // No default TTL for sessions: one expires only after a `set_ttl` call.
        SessionCapabilities::none()
            .with_ttl(true)
            .with_expires_by_default(false)
            .with_lists_tenants(true)
    }

    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        self.bounded("load", "load a session", self.load_session(scope))
            .await
    }

    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        let json = encode_state(scope, state)?;
        self.bounded(
            "save",
            "save a session",
            self.save_session(scope, &json, expected_version),
        )
        .await
    }

    async fn delete(&self, scope: &Scope) -> Result<bool> {
        let key = scope.key();
        self.bounded("delete", "delete a session", self.delete_session(&key))
            .await
    }

    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let list = list_page(
            self,
            "list sessions",
            "sessions",
            "scope_key",
            "",
            filter,
            page,
        );
        self.bounded("list", "list sessions", list).await
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        const CTX: &str = "set a session's TTL";
        let ttl_ms = ttl.map(ttl_ms).transpose()?;
        let key = scope.key();
        // The expiry is the database's clock + the TTL.
        let q = Query::shared(&self.inner.session.set_ttl)
            .arg(Arg::OptInt(ttl_ms))
            .arg(Arg::OptInt(ttl_ms))
            .text(&key);
        if self
            .bounded("set_ttl", CTX, self.inner.db.execute(CTX, q))
            .await?
            == 0
        {
            return Err(Error::not_found(format!("no session at {scope}")));
        }
        Ok(())
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        const CTX: &str = "list the tenants of sessions";
        let list = tenant_page(self, CTX, &self.inner.session.list_tenants, page);
        self.bounded("list_tenants", CTX, list).await
    }

    async fn purge_expired(&self) -> Result<u64> {
        const CTX: &str = "purge expired sessions";
        let q = Query::shared(&self.inner.session.purge);
        let removed = self
            .bounded("purge_expired", CTX, self.inner.db.execute(CTX, q))
            .await?;
        tracing::debug!(removed, "session.purge_expired");
        Ok(removed)
    }
}

/// A save re-sent after its reply was lost (the commit happened, the connection broke) runs
/// again with the same nonce: it must get its own version, not a `Conflict`. Simulated by
/// calling [`SqlStore::save_session_as`] twice with one nonce, on SQLite and on the machine's
/// PostgreSQL and MariaDB (`AGENT_MEMORY_POSTGRES_URL`, `AGENT_MEMORY_MYSQL_URL`).
#[cfg(test)]
mod resend_tests {
    // Test code: a failed unwrap or panic is how a test reports a failure.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use memory_core::{ErrorKind, MessageId, Scope, SessionStore};

    #[cfg(any(feature = "postgres", feature = "mysql"))]
    use crate::SCHEMA_VERSION;
    use crate::SqlStore;

    /// A store at `url` under the prefix the server suites share.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    async fn open(url: &str) -> SqlStore {
        SqlStore::builder(url)
            .table_prefix(format!("amtest_v{SCHEMA_VERSION}_"))
            .connect()
            .await
            .unwrap_or_else(|e| panic!("the database at {url} is needed by this test: {e}"))
    }

    #[tokio::test]
    async fn a_resent_save_gets_its_own_version_sqlite() {
        check(SqlStore::connect("sqlite::memory:").await.unwrap()).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn a_resent_save_gets_its_own_version_postgres() {
        let url = std::env::var("AGENT_MEMORY_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        check(open(&url).await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn a_resent_save_gets_its_own_version_mysql() {
        let url = std::env::var("AGENT_MEMORY_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
        check(open(&url).await).await;
    }

    async fn check(store: SqlStore) {
        let scope = Scope::session(format!("resend-{}", MessageId::generate()))
            .unwrap()
            .with_tenant(format!("t-{}", MessageId::generate()))
            .unwrap();
        let save = |json: &'static str, expected: Option<u64>, nonce: &'static str| {
            let (store, scope) = (store.clone(), scope.clone());
            async move { store.save_session_as(&scope, json, expected, nonce).await }
        };
        assert_eq!(save(r#"{"n":1}"#, None, "n-1").await.unwrap(), 1);
        // The create, re-sent: its own write is there.
        assert_eq!(save(r#"{"n":1}"#, None, "n-1").await.unwrap(), 1);
        assert_eq!(save(r#"{"n":2}"#, Some(1), "n-2").await.unwrap(), 2);
        // The update, re-sent: the same version, nothing saved twice.
        assert_eq!(save(r#"{"n":2}"#, Some(1), "n-2").await.unwrap(), 2);
        assert_eq!(store.load(&scope).await.unwrap().unwrap().version, 2);
        // Another writer with the same expected version still conflicts.
        let err = save(r#"{"n":9}"#, Some(1), "n-other").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        // A later save applied: the old request no longer matches.
        assert_eq!(save(r#"{"n":3}"#, Some(2), "n-3").await.unwrap(), 3);
        let err = save(r#"{"n":2}"#, Some(1), "n-2").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        // A re-created session: its create re-sent gets its version too.
        assert!(store.delete(&scope).await.unwrap());
        assert_eq!(save(r#"{"n":4}"#, None, "n-4").await.unwrap(), 4);
        assert_eq!(save(r#"{"n":4}"#, None, "n-4").await.unwrap(), 4);
        let err = save(r#"{"n":5}"#, None, "n-5").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        let loaded = store.load(&scope).await.unwrap().unwrap();
        assert_eq!(
            (loaded.state, loaded.version),
            (serde_json::json!({"n": 4}), 4)
        );
        store.close().await;
    }
}
