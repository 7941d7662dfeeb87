//! [`SessionStore`] on Redis: one hash per session, saved by a script that compares versions.
//!
//! Tombstones: every save also writes the session's version to `…:sver` (no TTL, same hash
//! slot), which stays when the session is deleted or expires, so a re-created session continues
//! above its last version. It costs one small string key (the key name and a number, about 100
//! bytes) per scope that ever held a session; re-creating the session reuses it. A session
//! saved before this key existed and left to expire without another save loses its version (it
//! is re-created at 1); a deleted one keeps it.

use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    Error, Page, PageRequest, Result, Scope, ScopeFilter, SessionCapabilities, SessionStore,
    StoredSession, TenantId, encode_state,
};
use redis::Value;
use serde_json::Value as Json;

use crate::conn::unsigned;
use crate::error::{During, bad_reply};
use crate::keys::{Listed, SessionKeys};
use crate::scripts::SCRIPTS;
use crate::store::{RedisStore, expiry_args, request_nonce};

#[async_trait]
impl SessionStore for RedisStore {
    fn capabilities(&self) -> SessionCapabilities {
        // Every save applies the store's default TTL, when one is configured.
        SessionCapabilities::none()
            .with_ttl(true)
            .with_expires_by_default(self.default_ttl().is_some())
            .with_lists_tenants(true)
    }

    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let keys = SessionKeys::new(self.prefix(), scope);
        let what = format!("load session {scope}");
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&keys.session).arg(&["version", "state"]);
        let reply = self.query(&what, &cmd).await.during("load")?;
        let Value::Array(fields) = reply else {
            return Err(bad_reply(&what, "HMGET did not return an array"));
        };
        let (version, state) = match (fields.first(), fields.get(1)) {
            (None | Some(Value::Nil), _) => return Ok(None),
            (Some(version), Some(Value::BulkString(state))) => (version, state),
            _ => return Err(bad_reply(&what, "a session without its state")),
        };
        let version = unsigned(version).ok_or_else(|| bad_reply(&what, "a bad version"))?;
        let state: Json = serde_json::from_slice(state).map_err(|e| {
            Error::serialization(format!("{what}: the stored state is not JSON: {e}"))
                .with_source(e)
        })?;
        Ok(Some(StoredSession { state, version }))
    }

    async fn save(
        &self,
        scope: &Scope,
        state: &Json,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        self.save_once(scope, state, expected_version, &request_nonce())
            .await
            .during("save")
    }

    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.delete_once(scope, &request_nonce())
            .await
            .during("delete")
    }

    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.list_scopes("list sessions", filter, &page, Listed::Sessions)
            .await
            .during("list")
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let keys = SessionKeys::new(self.prefix(), scope);
        let what = format!("set the TTL of session {scope}");
        let [ttl_arg, grace] = expiry_args(ttl)?;
        let reply = self
            .eval(
                &what,
                &SCRIPTS.set_ttl,
                &[&keys.session, &keys.expiry],
                &[ttl_arg.as_bytes(), grace.as_bytes()],
            )
            .await
            .during("set_ttl")?;
        match unsigned(&reply) {
            Some(1) => Ok(()),
            Some(0) => Err(Error::not_found(format!("no session at {scope}"))),
            _ => Err(bad_reply(&what, "not a status")),
        }
    }

    async fn purge_expired(&self) -> Result<u64> {
        let prefix = self.prefix().to_owned();
        self.purge_records("purge expired sessions", Listed::SessionExpiries, |scope| {
            SessionKeys::new(&prefix, scope).session
        })
        .await
        .during("purge_expired")
    }

    /// The tenants with at least one session: a `SCAN` of the sessions' hashes under the
    /// store's prefix (on every master of a cluster), sorted, after the cursor (the last tenant
    /// of the previous page). A session's hash exists exactly while the session lives (a
    /// delete removes it, an expiry expires it, and `SCAN` does not return expired keys; a
    /// tombstone, `…:sver`, is another key), so a tenant whose sessions are all gone is not
    /// listed. Each page costs a scan of the whole keyspace, as [`list`](SessionStore::list):
    /// an administration call, not a hot path.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        self.list_key_tenants("list the tenants with sessions", &page, Listed::Sessions)
            .await
            .during("list_tenants")
    }
}

impl RedisStore {
    /// [`SessionStore::save`] as the request `nonce`: a request re-sent after its reply was
    /// lost finds its own save applied and gets the same version (see "Re-sent requests" on
    /// [`RedisStore`]).
    pub(crate) async fn save_once(
        &self,
        scope: &Scope,
        state: &Json,
        expected_version: Option<u64>,
        nonce: &str,
    ) -> Result<u64> {
        let keys = SessionKeys::new(self.prefix(), scope);
        let what = format!("save session {scope}");
        let json = encode_state(scope, state)?;
        let expected = expected_version.map(|v| v.to_string()).unwrap_or_default();
        let [ttl, grace] = expiry_args(self.default_ttl())?;
        let reply = self
            .eval(
                &what,
                &SCRIPTS.save_session,
                &[&keys.session, &keys.expiry, &keys.last_version],
                &[
                    expected.as_bytes(),
                    json.as_bytes(),
                    ttl.as_bytes(),
                    grace.as_bytes(),
                    nonce.as_bytes(),
                ],
            )
            .await?;
        let Value::Array(parts) = reply else {
            return Err(bad_reply(&what, "the save script did not return an array"));
        };
        match (parts.first().and_then(unsigned), parts.get(1)) {
            (Some(1), Some(version)) => {
                let version =
                    unsigned(version).ok_or_else(|| bad_reply(&what, "a bad new version"))?;
                tracing::debug!(scope = %scope, version, "session.save");
                Ok(version)
            }
            (Some(0), found) => {
                let found = match found {
                    None | Some(Value::Nil) => None,
                    Some(Value::BulkString(b)) if b.is_empty() => None,
                    Some(v) => {
                        Some(unsigned(v).ok_or_else(|| bad_reply(&what, "a bad stored version"))?)
                    }
                };
                Err(Error::version_conflict(scope, found, expected_version))
            }
            _ => Err(bad_reply(&what, "not a save status")),
        }
    }

    /// [`SessionStore::delete`] as the request `nonce` (see [`save_once`](Self::save_once)).
    pub(crate) async fn delete_once(&self, scope: &Scope, nonce: &str) -> Result<bool> {
        let keys = SessionKeys::new(self.prefix(), scope);
        let what = format!("delete session {scope}");
        let reply = self
            .eval(
                &what,
                &SCRIPTS.delete_session,
                &[&keys.session, &keys.expiry, &keys.ack, &keys.last_version],
                &[nonce.as_bytes()],
            )
            .await?;
        let existed = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))? > 0;
        tracing::debug!(scope = %scope, existed, "session.delete");
        Ok(existed)
    }
}
