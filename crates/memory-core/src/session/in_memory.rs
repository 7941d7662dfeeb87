//! The in-memory [`SessionStore`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use super::store::{SessionCapabilities, SessionStore, StoredSession};
use crate::error::{Error, ErrorKind, Result};
use crate::scope::{Page, PageRequest, Scope, ScopeFilter, paginate};

/// A [`SessionStore`] in process memory. Cloning shares the same data.
#[derive(Debug, Clone, Default)]
pub struct InMemorySessionStore {
    sessions: Arc<Mutex<BTreeMap<String, Entry>>>,
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

    fn lock(&self) -> Result<MutexGuard<'_, BTreeMap<String, Entry>>> {
        self.sessions.lock().map_err(|_| {
            Error::new(
                ErrorKind::Backend,
                "the in-memory session store was poisoned by a panic in another thread",
            )
        })
    }

    fn live<'a>(
        sessions: &'a mut BTreeMap<String, Entry>,
        key: &str,
        now: Instant,
    ) -> Option<&'a mut Entry> {
        if sessions.get(key).is_some_and(|e| e.expired(now)) {
            sessions.remove(key);
        }
        sessions.get_mut(key)
    }
}

#[async_trait]
impl SessionStore for InMemorySessionStore {
    fn capabilities(&self) -> SessionCapabilities {
        // No default TTL: a session expires only after a `set_ttl` call.
        SessionCapabilities::none()
            .with_ttl(true)
            .with_expires_by_default(false)
    }

    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let mut sessions = self.lock()?;
        Ok(Self::live(&mut sessions, &scope.key(), Instant::now()).map(|e| e.stored.clone()))
    }

    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64> {
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let key = scope.key();
        let current = Self::live(&mut sessions, &key, now).map(|e| e.stored.version);
        match (current, expected_version) {
            (None, None) => {
                sessions.insert(
                    key,
                    Entry {
                        scope: scope.clone(),
                        stored: StoredSession {
                            state: state.clone(),
                            version: 1,
                        },
                        ttl: None,
                        expires_at: None,
                    },
                );
                Ok(1)
            }
            (Some(found), Some(expected)) if found == expected => {
                let entry = sessions
                    .get_mut(&key)
                    .ok_or_else(|| Error::new(ErrorKind::Backend, "session vanished"))?;
                entry.stored = StoredSession {
                    state: state.clone(),
                    version: found + 1,
                };
                entry.expires_at = entry.ttl.map(|ttl| now + ttl);
                Ok(found + 1)
            }
            (found, expected) => Err(Error::version_conflict(scope, found, expected)),
        }
    }

    async fn delete(&self, scope: &Scope) -> Result<bool> {
        let mut sessions = self.lock()?;
        let existed = Self::live(&mut sessions, &scope.key(), Instant::now()).is_some();
        sessions.remove(&scope.key());
        Ok(existed)
    }

    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let sessions = self.lock()?;
        let now = Instant::now();
        Ok(paginate(&sessions, &page, |e| {
            (!e.expired(now) && e.scope.matches(filter)).then_some(&e.scope)
        }))
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        if let Some(ttl) = ttl {
            crate::ttl::ttl_millis(ttl)?;
        }
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let entry = Self::live(&mut sessions, &scope.key(), now)
            .ok_or_else(|| Error::not_found(format!("no session at {scope}")))?;
        entry.ttl = ttl;
        entry.expires_at = ttl.map(|ttl| now + ttl);
        Ok(())
    }

    async fn purge_expired(&self) -> Result<u64> {
        let mut sessions = self.lock()?;
        let now = Instant::now();
        let before = sessions.len();
        sessions.retain(|_, e| !e.expired(now));
        Ok((before - sessions.len()) as u64)
    }
}
