//! [`SessionStore`] for [`SqlStore`]: one row per session in `{prefix}sessions`, with a
//! `version` column for optimistic concurrency. A save with an expected version is a single
//! conditional `UPDATE`, so a stale writer changes nothing.

use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    Error, ErrorKind, Page, PageRequest, Result, Scope, ScopeFilter, SessionCapabilities,
    SessionStore, StoredSession,
};
use serde_json::Value;

use crate::driver::{Arg, Col, Query};
use crate::rows::{expiry, now_ms, scope_args, ttl_ms};
use crate::store::{SqlStore, list_page};

impl SqlStore {
    /// The stored version of a live session, for conflict messages.
    async fn session_version(&self, key: &str) -> Result<Option<u64>> {
        let rows = self
            .inner
            .db
            .fetch(
                "read a session's version",
                Query::shared(&self.inner.session.version)
                    .text(key)
                    .int(now_ms()),
                &[Col::Int],
            )
            .await?;
        rows.first().map(|r| r.uint(0)).transpose()
    }

    async fn load_session(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let key = scope.key();
        let rows = self
            .inner
            .db
            .fetch(
                "load a session",
                Query::shared(&self.inner.session.load)
                    .text(&key)
                    .int(now_ms()),
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

    async fn save_session(
        &self,
        scope: &Scope,
        json: &str,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        let key = scope.key();
        let sql = &self.inner.session;
        let db = &self.inner.db;
        let now = now_ms();
        let Some(expected) = expected_version else {
            // An expired session is gone: remove its row so the key can be created again.
            db.execute(
                "save a session",
                Query::shared(&sql.delete_expired).text(&key).int(now),
            )
            .await?;
            let insert = Query::shared(&sql.insert)
                .text(&key)
                .args(scope_args(scope))
                .text(json);
            return match db.execute("create a session", insert).await {
                Ok(_) => Ok(1),
                Err(err) if err.kind() == ErrorKind::Conflict => {
                    let found = self.session_version(&key).await?;
                    Err(Error::version_conflict(scope, found, None).with_source(err))
                }
                Err(err) => Err(err),
            };
        };
        // A version past `i64::MAX` cannot be stored: it matches no session.
        let updated = match i64::try_from(expected) {
            Ok(expected_i) => {
                let update = Query::shared(&sql.update)
                    .text(json)
                    .int(now)
                    .int(now)
                    .text(&key)
                    .int(expected_i)
                    .int(now);
                db.execute("save a session", update).await?
            }
            Err(_) => 0,
        };
        if updated == 0 {
            let found = self.session_version(&key).await?;
            return Err(Error::version_conflict(scope, found, Some(expected)));
        }
        Ok(expected + 1)
    }

    async fn delete_session(&self, key: &str) -> Result<bool> {
        let sql = &self.inner.session;
        let db = &self.inner.db;
        let deleted = db
            .execute(
                "delete a session",
                Query::shared(&sql.delete_live).text(key).int(now_ms()),
            )
            .await?;
        if deleted == 0 {
            // An expired row may remain: remove it too (it does not count as existing).
            db.execute("delete a session", Query::shared(&sql.delete_any).text(key))
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
        let json = serde_json::to_string(state)?;
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
        let now = now_ms();
        let q = Query::shared(&self.inner.session.set_ttl)
            .arg(Arg::OptInt(ttl_ms))
            .arg(Arg::OptInt(expiry(now, ttl_ms)))
            .text(&key)
            .int(now);
        if self
            .bounded("set_ttl", CTX, self.inner.db.execute(CTX, q))
            .await?
            == 0
        {
            return Err(Error::not_found(format!("no session at {scope}")));
        }
        Ok(())
    }

    async fn purge_expired(&self) -> Result<u64> {
        const CTX: &str = "purge expired sessions";
        let q = Query::shared(&self.inner.session.purge).int(now_ms());
        let removed = self
            .bounded("purge_expired", CTX, self.inner.db.execute(CTX, q))
            .await?;
        tracing::debug!(removed, "session.purge_expired");
        Ok(removed)
    }
}
