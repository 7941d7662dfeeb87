//! The [`SessionStore`] trait.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::history::unsupported_operation;
use crate::id::TenantId;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter};

/// The largest session state a [`SessionStore`] accepts, in bytes of its JSON text (8 MiB, as
/// [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES)): below what every backend takes in one
/// request (MariaDB's default 16 MiB packet included).
pub const MAX_SESSION_STATE_BYTES: usize = 8 * 1024 * 1024;

/// The JSON text a store saves for `state` at `scope`, checked against [`MAX_STATE_DEPTH`]
/// and [`MAX_SESSION_STATE_BYTES`]: the one encoding and check every [`SessionStore::save`]
/// applies before it writes.
///
/// # Errors
/// [`LimitExceeded`](crate::ErrorKind::LimitExceeded) for a state nested too deep
/// ([`check_state_depth`]); [`InvalidInput`](crate::ErrorKind::InvalidInput) for a state over
/// the size limit (the message names the scope, the size and the limit); `Serialization` if
/// `state` cannot be encoded.
pub fn encode_state(scope: &Scope, state: &Value) -> Result<String> {
    check_state_depth(state)?;
    let json = serde_json::to_string(state)?;
    if json.len() > MAX_SESSION_STATE_BYTES {
        return Err(Error::invalid_input(format!(
            "the state of session {scope} is {} bytes of JSON; the limit is \
             {MAX_SESSION_STATE_BYTES}",
            json.len()
        )));
    }
    Ok(json)
}

/// A saved session state and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// The state, as saved.
    pub state: Value,
    /// The version: 1 after the first save of a scope, one more after each save (a re-created
    /// session continues above its last version: versions never repeat for a scope).
    pub version: u64,
}

/// What a session store can do beyond the required behaviour: which optional operations it
/// has.
///
/// Every field is `false` in [`none`](Self::none) (and [`Default`]); a store turns on what it
/// has with the `with_*` methods:
///
/// ```
/// use memory_core::SessionCapabilities;
///
/// assert!(SessionCapabilities::none().with_ttl(true).ttl);
/// ```
///
/// The struct is `#[non_exhaustive]`: a new optional operation adds a field that is `false`
/// unless a store sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SessionCapabilities {
    /// Sessions can expire ([`SessionStore::set_ttl`], [`SessionStore::purge_expired`]).
    pub ttl: bool,
    /// Sessions expire without a [`SessionStore::set_ttl`] call: the store gives every saved
    /// session a default TTL (each save restarts its clock). Code that keeps a session alive
    /// as long as something else (a `Memory`'s block states as long as their thread) saves it
    /// again only when this is `true`.
    pub expires_by_default: bool,
    /// [`SessionStore::list_tenants`] is supported: the tenants that hold sessions.
    pub lists_tenants: bool,
}

impl SessionCapabilities {
    /// No optional operation.
    pub const fn none() -> Self {
        Self {
            ttl: false,
            expires_by_default: false,
            lists_tenants: false,
        }
    }

    /// Sets whether [`SessionStore::set_ttl`] and [`SessionStore::purge_expired`] are
    /// supported.
    #[must_use]
    pub const fn with_ttl(mut self, ttl: bool) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets whether sessions expire without a [`SessionStore::set_ttl`] call (a default TTL
    /// applied by every save).
    #[must_use]
    pub const fn with_expires_by_default(mut self, expires: bool) -> Self {
        self.expires_by_default = expires;
        self
    }

    /// Sets whether [`SessionStore::list_tenants`] is supported.
    #[must_use]
    pub const fn with_lists_tenants(mut self, lists_tenants: bool) -> Self {
        self.lists_tenants = lists_tenants;
        self
    }
}

/// Keeps session states (any JSON document, usually [`AgentSession::serialize`]'s output)
/// under a [`Scope`], with optimistic concurrency.
///
/// [`AgentSession::serialize`]: crate::AgentSession::serialize
///
/// Five methods are required. [`set_ttl`](SessionStore::set_ttl),
/// [`purge_expired`](SessionStore::purge_expired) and
/// [`list_tenants`](SessionStore::list_tenants) are optional: their default bodies return
/// [`Unsupported`](crate::ErrorKind::Unsupported), and a store that implements them says so in
/// [`capabilities`](SessionStore::capabilities) (not every database can expire data).
///
/// A store that wraps another and changes only some of its calls implements
/// [`LayeredSessions`](crate::LayeredSessions) instead: the rest is forwarded.
///
/// # Behavior
/// Each method states its contract in its own `# Behavior` section (the conformance suite in
/// memory-testkit has a check per line of them). The rules that span the methods:
/// - [`capabilities`](SessionStore::capabilities) is constant for a store object and tells the
///   truth: each optional operation is present if and only if its capability says so. An
///   operation that is not present returns [`Unsupported`](crate::ErrorKind::Unsupported) for
///   every call and changes nothing.
/// - Versions never repeat for a scope: a session re-created after
///   [`delete`](SessionStore::delete) or expiry gets a version greater than any it had, so a
///   writer still holding a version of the old session gets `Conflict` (no ABA). To know that
///   version, a store keeps a tombstone per deleted or expired scope: its key and last
///   version, never the state (each store documents what it costs).
/// - Sessions of different scopes are independent: no call on one scope changes another.
/// - [`SessionCapabilities::expires_by_default`] is `true` exactly when a session saved without
///   a `set_ttl` call expires on its own (the store's default TTL, restarted by each save).
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug + 'static {
    /// What this store supports.
    fn capabilities(&self) -> SessionCapabilities;

    /// Loads the session at `scope`.
    ///
    /// # Behavior
    /// Returns the state exactly as saved (every JSON value, including `u64::MAX`, exact floats and
    /// text with NUL) and its version, or `None`.
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>>;

    /// Saves `state` if the stored version is `expected_version`; returns the new version.
    ///
    /// # Behavior
    /// With `expected_version: None`, it creates the session and fails with
    /// [`Conflict`](crate::ErrorKind::Conflict) if it exists; with `Some(v)` it replaces the state
    /// only if the stored version is `v`, else fails with `Conflict` and changes nothing (a stale
    /// writer never overwrites silently; a missing session is a `Conflict` too). It returns the new
    /// version: on creation 1 for a scope that never held a session, else one more than the last
    /// version the scope had; then `v + 1`. Of concurrent saves with the same expected version,
    /// exactly one succeeds, so a load-modify-save loop that retries on `Conflict` loses no update.
    ///
    /// A state whose JSON text is over [`MAX_SESSION_STATE_BYTES`] is
    /// [`InvalidInput`](crate::ErrorKind::InvalidInput), and a state nested deeper than
    /// [`MAX_STATE_DEPTH`] is [`LimitExceeded`](crate::ErrorKind::LimitExceeded) (it could not be
    /// loaded back); either changes nothing (stores check both with [`encode_state`]).
    async fn save(
        &self,
        scope: &Scope,
        state: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64>;

    /// Deletes the session; returns whether it existed.
    ///
    /// # Behavior
    /// Removes the session; returns whether it existed. A deleted session can be created again, at a version
    /// above its last one.
    async fn delete(&self, scope: &Scope) -> Result<bool>;

    /// Lists the sessions matching `filter`, a page at a time.
    ///
    /// # Behavior
    /// Pages through the scopes holding a session that the filter [matches](ScopeFilter::matches)
    /// (every part it names: user, agent, session, source), each once, in a stable order (the same
    /// for every page size; the last page has no cursor); it never lists another tenant's scope.
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>>;

    /// Sets or removes the session's time to live.
    ///
    /// Optional ([`SessionCapabilities::ttl`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Makes the session expire `ttl` after the later of the `set_ttl` call and its last save (each
    /// save restarts the clock); `None` removes the expiry; a TTL under 1 ms or over
    /// [`MAX_TTL`](crate::MAX_TTL) is [`InvalidInput`](crate::ErrorKind::InvalidInput) and changes
    /// nothing; an unknown session is [`NotFound`](crate::ErrorKind::NotFound). An expired session
    /// loads as `None`, is not listed, and can be created again, at a version above its last one.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let _ = (scope, ttl);
        Err(unsupported_operation::<Self>(
            "set_ttl",
            "SessionCapabilities",
            "ttl",
        ))
    }

    /// Deletes expired sessions now; returns how many it removed.
    ///
    /// Optional ([`SessionCapabilities::ttl`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Deletes expired sessions now and returns how many it removed (their tombstones stay, so a
    /// purged session too is re-created above its last version); sessions that did not expire stay.
    async fn purge_expired(&self) -> Result<u64> {
        Err(unsupported_operation::<Self>(
            "purge_expired",
            "SessionCapabilities",
            "ttl",
        ))
    }

    /// Lists the tenants that hold sessions, a page at a time.
    ///
    /// Optional ([`SessionCapabilities::lists_tenants`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Pages through the tenants that hold at least one live session, each once, in a stable order
    /// (the same for every page size; the last page has no cursor). It is an administration call:
    /// it crosses tenants by design.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let _ = page;
        Err(unsupported_operation::<Self>(
            "list_tenants",
            "SessionCapabilities",
            "lists_tenants",
        ))
    }
}

/// The deepest nesting of arrays and objects a saved session state may have: below the 128
/// levels serde_json reads back, with room for the messages (at most
/// [`MAX_JSON_DEPTH`](crate::MAX_JSON_DEPTH) deep) a state carries a few levels down.
pub const MAX_STATE_DEPTH: usize = 100;

/// Refuses a session state nested deeper than [`MAX_STATE_DEPTH`], which a store could save but
/// never load back. [`encode_state`], which every [`SessionStore::save`] calls first, runs it.
/// Iterative: a value of any depth is checked without recursion.
///
/// # Errors
/// [`LimitExceeded`](crate::ErrorKind::LimitExceeded) for a state nested too deep.
pub fn check_state_depth(state: &Value) -> crate::Result<()> {
    // Only arrays and objects go on the stack (a scalar adds no level): no allocation per
    // value.
    let mut stack = vec![(state, 1usize)];
    while let Some((value, level)) = stack.pop() {
        if level > MAX_STATE_DEPTH {
            return Err(crate::Error::new(
                crate::ErrorKind::LimitExceeded,
                format!(
                    "the session state nests JSON deeper than {MAX_STATE_DEPTH} levels, which a \
                     store could not load back"
                ),
            ));
        }
        let inner = level.saturating_add(1);
        let nested = |v: &&Value| matches!(v, Value::Array(_) | Value::Object(_));
        match value {
            Value::Array(items) => stack.extend(items.iter().filter(nested).map(|v| (v, inner))),
            Value::Object(map) => stack.extend(map.values().filter(nested).map(|v| (v, inner))),
            _ => {}
        }
    }
    Ok(())
}
