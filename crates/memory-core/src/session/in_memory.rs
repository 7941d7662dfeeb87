//! The in-memory [`SessionStore`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use super::store::{SessionCapabilities, SessionStore, StoredSession};
use crate::error::{Error, ErrorKind, Result};
use crate::id::TenantId;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter, paginate, paginate_tenants};

/// A [`SessionStore`] in process memory. Cloning shares the same data.
///
/// Tombstones: a deleted, expired or purged session leaves its key and last version in a map
/// (a few dozen bytes per scope, never the state), so a re-created session continues above
/// it; a re-created session takes its tombstone back.
#[derive(Debug, Clone, Default)]
pub struct InMemorySessionStore {
    sessions: Arc<Mutex<Sessions>>,
}

#[derive(Debug, Default)]
struct Sessions {
    live: BTreeMap<String, Entry>,
    /// The last version of each deleted or expired session, by scope key.
    tombstones: HashMap<String, u64>,
}

impl Sessions {
    /// The live entry at `key`; an expired one becomes a tombstone.
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        if self.live.get(key).is_some_and(|e| e.expired(now)) {
            self.remove(key);
        }
        self.live.get_mut(key)
    }

    /// Removes the entry at `key`, leaving its tombstone; returns whether there was one.
    fn remove(&mut self, key: &str) -> bool {
        match self.live.remove(key) {
            Some(entry) => {
                self.tombstones.insert(key.to_owned(), entry.stored.version);
                true
            }
            None => false,
        }
    }
}

#[derive(Debug)]
struct Entry {
    scope: Scope,
    stored: StoredSession,
    ttl: Option<Duration>,
    expires_at: Option<Instant>,
}

impl Entry {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

impl InMemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Sessions>> {
        self.sessions.lock().map_err(|_| {
            Error::new(
                ErrorKind::Backend,
                "the in-memory session store was poisoned by a panic in another thread",
            )
        })
    }
}

#[async_trait]
impl SessionStore for InMemorySessionStore {
    fn capabilities(&self) -> SessionCapabilities {
        // No default TTL: a session expires only after a `set_ttl` call.
        SessionCapabilities::none()
            .with_ttl(true)
            .with_expires_by_default(false)
            .with_lists_tenants(true)
    }

    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let mut sessions = self.lock()?;
        Ok(sessions
            .live(&scope.key(), Instant::now())
            .map(|e| e.stored.clone()))
    }

    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        crate::session::encode_state(scope, state)?;
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let key = scope.key();
        let current = sessions.live(&key, now).map(|e| e.stored.version);
        match (current, expected_version) {
            (None, None) => {
                let last = sessions.tombstones.get(&key).copied().unwrap_or(0);
                let version = last.checked_add(1).ok_or_else(|| {
                    Error::new(
                        ErrorKind::LimitExceeded,
                        format!("session {scope} has used every version a session can have"),
                    )
                })?;
                sessions.tombstones.remove(&key);
                sessions.live.insert(
                    key,
                    Entry {
                        scope: scope.clone(),
                        stored: StoredSession {
                            state: state.clone(),
                            version,
                        },
                        ttl: None,
                        expires_at: None,
                    },
                );
                Ok(version)
            }
            (Some(found), Some(expected)) if found == expected => {
                let next = found.checked_add(1).ok_or_else(|| {
                    Error::new(
                        ErrorKind::LimitExceeded,
                        format!("the session at {scope} has used every version number"),
                    )
                })?;
                let entry = sessions
                    .live
                    .get_mut(&key)
                    .ok_or_else(|| Error::new(ErrorKind::Backend, "session vanished"))?;
                entry.stored = StoredSession {
                    state: state.clone(),
                    version: next,
                };
                entry.expires_at = entry.ttl.and_then(|ttl| now.checked_add(ttl));
                Ok(next)
            }
            (found, expected) => Err(Error::version_conflict(scope, found, expected)),
        }
    }

    async fn delete(&self, scope: &Scope) -> Result<bool> {
        let mut sessions = self.lock()?;
        let key = scope.key();
        let existed = sessions.live(&key, Instant::now()).is_some();
        sessions.remove(&key);
        Ok(existed)
    }

    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let sessions = self.lock()?;
        let now = Instant::now();
        Ok(paginate(&sessions.live, &page, |e| {
            (!e.expired(now) && filter.matches(&e.scope)).then_some(&e.scope)
        }))
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        if let Some(ttl) = ttl {
            crate::ttl::ttl_millis(ttl)?;
        }
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let entry = sessions
            .live(&scope.key(), now)
            .ok_or_else(|| Error::not_found(format!("no session at {scope}")))?;
        entry.ttl = ttl;
        entry.expires_at = ttl.and_then(|ttl| now.checked_add(ttl));
        Ok(())
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let sessions = self.lock()?;
        let now = Instant::now();
        Ok(paginate_tenants(
            sessions
                .live
                .values()
                .filter(|e| !e.expired(now))
                .map(|e| e.scope.tenant()),
            &page,
        ))
    }

    async fn purge_expired(&self) -> Result<u64> {
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let expired: Vec<String> = sessions
            .live
            .iter()
            .filter(|(_, e)| e.expired(now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            sessions.remove(key);
        }
        Ok(expired.len() as u64)
    }
}
