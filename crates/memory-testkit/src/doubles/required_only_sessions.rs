//! [`RequiredOnlySessions`]: a session store that implements only the required methods of
//! [`SessionStore`], so every optional one answers with the trait's default body.

use memory_core::{
    InMemorySessionStore, Page, PageRequest, Result, Scope, ScopeFilter, SessionCapabilities,
    SessionStore, StoredSession,
};
use serde_json::Value;

/// A session store that implements only the required methods of [`SessionStore`] (each the
/// in-memory store's) and declares no capability.
///
/// # Behavior
///
/// - [`capabilities`](SessionStore::capabilities) is [`SessionCapabilities::none`].
/// - `load`, `save`, `delete` and `list` are the in-memory store's.
/// - Every optional operation (`set_ttl`, `purge_expired`, `list_tenants`) is the trait's
///   default body: [`ErrorKind::Unsupported`](memory_core::ErrorKind::Unsupported), with a
///   message that names this type and the operation, and nothing changed. It is the store
///   that honestly lacks every optional operation.
#[derive(Debug, Default)]
pub struct RequiredOnlySessions(InMemorySessionStore);

#[memory_core::async_trait]
impl SessionStore for RequiredOnlySessions {
    fn capabilities(&self) -> SessionCapabilities {
        SessionCapabilities::none()
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        self.0.load(scope).await
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        self.0.save(scope, state, expected).await
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.0.delete(scope).await
    }
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.0.list(filter, page).await
    }
}
