//! [`Scope`]: the address of every thread, session and vector point; [`ScopeFilter`]: which
//! scopes an operation selects; [`Page`]s of listings.

mod filter;
mod scoped_hit;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{AgentId, SessionId, SourceId, TenantId, UserId};

pub use filter::ScopeFilter;
pub use scoped_hit::ScopedHit;

/// The tenant used when none is given.
pub const DEFAULT_TENANT: &str = "default";
/// The source id of the agent's own chat history.
pub const DEFAULT_SOURCE: &str = "history";

/// Where a piece of memory lives: tenant, optional user, optional agent, session and the source
/// (the provider that owns it).
///
/// Every store call takes a scope, and every backend derives its keys from the *whole* scope, so
/// two users, two agents or two providers of one session never read or write each other's data.
/// All parts are validated ids, so a scope is always safe to put in a key.
///
/// ```
/// use memory_core::Scope;
///
/// let scope = Scope::session("chat-1")?.with_user("u-42")?;
/// assert_eq!(scope.tenant().as_str(), "default");
/// assert_eq!(scope.source().as_str(), "history");
/// assert_eq!(scope.key(), "default|u-42|~|history|chat-1");
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    tenant: TenantId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<UserId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent: Option<AgentId>,
    session: SessionId,
    source: SourceId,
}

impl Scope {
    /// A scope for `session` in `tenant`, with no user or agent and the default source.
    pub fn new(tenant: TenantId, session: SessionId) -> Self {
        Self {
            tenant,
            user: None,
            agent: None,
            session,
            source: default_source(),
        }
    }

    /// A scope for the session named `session` in the default tenant.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when `session` is not a valid
    /// id.
    pub fn session(session: impl Into<String>) -> Result<Self> {
        Ok(Self::new(default_tenant(), SessionId::new(session)?))
    }

    /// Replaces the tenant.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid id.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Result<Self> {
        self.tenant = TenantId::new(tenant)?;
        Ok(self)
    }

    /// Sets the user.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid id.
    pub fn with_user(mut self, user: impl Into<String>) -> Result<Self> {
        self.user = Some(UserId::new(user)?);
        Ok(self)
    }

    /// Sets the agent.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid id.
    pub fn with_agent(mut self, agent: impl Into<String>) -> Result<Self> {
        self.agent = Some(AgentId::new(agent)?);
        Ok(self)
    }

    /// Sets the source (the provider that owns the data).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid id.
    pub fn with_source(self, source: impl Into<String>) -> Result<Self> {
        Ok(self.with_source_id(SourceId::new(source)?))
    }

    /// Sets the source from an already validated id.
    pub fn with_source_id(mut self, source: SourceId) -> Self {
        self.source = source;
        self
    }

    /// Sets the user from an already validated id.
    pub fn with_user_id(mut self, user: UserId) -> Self {
        self.user = Some(user);
        self
    }

    /// Sets the agent from an already validated id.
    pub fn with_agent_id(mut self, agent: AgentId) -> Self {
        self.agent = Some(agent);
        self
    }

    /// The tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The user, if any.
    pub fn user(&self) -> Option<&UserId> {
        self.user.as_ref()
    }

    /// The agent, if any.
    pub fn agent(&self) -> Option<&AgentId> {
        self.agent.as_ref()
    }

    /// The session.
    pub fn session_id(&self) -> &SessionId {
        &self.session
    }

    /// The source.
    pub fn source(&self) -> &SourceId {
        &self.source
    }

    /// The canonical key of this scope: `tenant|user|agent|source|session`, with `~` for an
    /// absent part. Neither `|` nor `~` can occur in an id, so distinct scopes always have
    /// distinct keys; backends use it (or its parts) as their storage key.
    pub fn key(&self) -> String {
        let opt = |v: Option<&str>| v.unwrap_or("~").to_owned();
        format!(
            "{}|{}|{}|{}|{}",
            self.tenant,
            opt(self.user.as_ref().map(UserId::as_str)),
            opt(self.agent.as_ref().map(AgentId::as_str)),
            self.source,
            self.session
        )
    }

    /// Parses a canonical [`key`](Self::key) back into its scope: the inverse of `key`, so
    /// `Scope::from_key(&scope.key())` is `scope` for every scope.
    ///
    /// ```
    /// use memory_core::Scope;
    ///
    /// let scope = Scope::session("chat-1")?.with_user("u-42")?;
    /// assert_eq!(Scope::from_key("default|u-42|~|history|chat-1")?, scope);
    /// # Ok::<(), memory_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when `key` does not have
    /// exactly five `|`-separated parts or a part is not a valid id (`~`, an absent part, is
    /// allowed for the user and the agent only).
    pub fn from_key(key: &str) -> Result<Self> {
        let parts: Vec<&str> = key.split('|').collect();
        let [tenant, user, agent, source, session] = parts.as_slice() else {
            return Err(Error::invalid_input(format!(
                "a scope key has five parts, tenant|user|agent|source|session, with ~ for an absent user or agent; {key:?} has {}",
                parts.len()
            )));
        };
        let opt = |v: &str| (v != "~").then(|| v.to_owned());
        Ok(Self {
            tenant: TenantId::new(*tenant)?,
            user: opt(user).map(UserId::new).transpose()?,
            agent: opt(agent).map(AgentId::new).transpose()?,
            session: SessionId::new(*session)?,
            source: SourceId::new(*source)?,
        })
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({})", self.key())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

fn default_tenant() -> TenantId {
    TenantId::new(DEFAULT_TENANT).unwrap_or_else(|_| unreachable!("the default tenant is valid"))
}

fn default_source() -> SourceId {
    SourceId::new(DEFAULT_SOURCE).unwrap_or_else(|_| unreachable!("the default source is valid"))
}

/// One page of a listing request: at most `limit` items after the opaque `cursor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Largest number of items to return (at least 1).
    pub limit: usize,
    /// The cursor a previous page returned; `None` for the first page.
    pub cursor: Option<String>,
}

impl PageRequest {
    /// The first page of at most `limit` items.
    pub fn first(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            cursor: None,
        }
    }

    /// The page after `cursor`.
    pub fn after(limit: usize, cursor: impl Into<String>) -> Self {
        Self {
            limit: limit.max(1),
            cursor: Some(cursor.into()),
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// The cursor of the next page; `None` when this page is the last.
    pub next_cursor: Option<String>,
}

/// Pages through the distinct tenants `tenants` yields (in any order, repeats allowed), in
/// tenant order, after the request's cursor (the last tenant of the previous page): the
/// listing an in-process store gives for `list_tenants`.
pub(crate) fn paginate_tenants<'a>(
    tenants: impl IntoIterator<Item = &'a TenantId>,
    page: &PageRequest,
) -> Page<TenantId> {
    let after = page.cursor.as_deref();
    let distinct: std::collections::BTreeSet<&TenantId> = tenants
        .into_iter()
        .filter(|t| after.is_none_or(|cursor| t.as_str() > cursor))
        .collect();
    let limit = page.limit.max(1);
    let items: Vec<TenantId> = distinct.iter().take(limit).map(|t| (*t).clone()).collect();
    let next_cursor = if distinct.len() > limit {
        items.last().map(|t| t.as_str().to_owned())
    } else {
        None
    };
    Page { items, next_cursor }
}

/// Pages through `map` (keyed by [`Scope::key`]) in key order, after the request's cursor,
/// returning the scopes that `visible` yields.
pub(crate) fn paginate<T>(
    map: &std::collections::BTreeMap<String, T>,
    page: &PageRequest,
    visible: impl Fn(&T) -> Option<&Scope>,
) -> Page<Scope> {
    use std::ops::Bound;
    let start = match &page.cursor {
        Some(cursor) => Bound::Excluded(cursor.clone()),
        None => Bound::Unbounded,
    };
    let limit = page.limit.max(1);
    let mut items = Vec::new();
    let mut last_key = None;
    let mut more = false;
    for (key, value) in map.range::<String, _>((start, Bound::Unbounded)) {
        let Some(scope) = visible(value) else {
            continue;
        };
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(scope.clone());
        last_key = Some(key.clone());
    }
    Page {
        items,
        next_cursor: if more { last_key } else { None },
    }
}

/// A scope of the tests: `session` in `tenant`, with the user and agent given.
#[cfg(test)]
pub(crate) fn test_scope(
    tenant: &str,
    user: Option<&str>,
    agent: Option<&str>,
    session: &str,
) -> Scope {
    let mut scope = Scope::session(session)
        .and_then(|s| s.with_tenant(tenant))
        .expect("valid ids");
    if let Some(user) = user {
        scope = scope.with_user(user).expect("valid user");
    }
    if let Some(agent) = agent {
        scope = scope.with_agent(agent).expect("valid agent");
    }
    scope
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_for_every_part() {
        let base = Scope::session("s").unwrap();
        let variants = [
            base.clone(),
            base.clone().with_tenant("t2").unwrap(),
            base.clone().with_user("u").unwrap(),
            base.clone().with_agent("a").unwrap(),
            base.clone().with_source("other").unwrap(),
            Scope::session("s2").unwrap(),
        ];
        let keys: std::collections::HashSet<_> = variants.iter().map(Scope::key).collect();
        assert_eq!(keys.len(), variants.len());
    }

    #[test]
    fn user_and_agent_in_key_do_not_alias() {
        let a = Scope::session("s").unwrap().with_user("x").unwrap();
        let b = Scope::session("s").unwrap().with_agent("x").unwrap();
        assert_ne!(a.key(), b.key());
    }

    #[test]
    fn from_key_inverts_key_and_refuses_malformed_keys() {
        let base = Scope::session("s").unwrap();
        for scope in [
            base.clone(),
            base.clone()
                .with_tenant("t2")
                .unwrap()
                .with_user("u")
                .unwrap(),
            base.clone()
                .with_agent("a")
                .unwrap()
                .with_source("src")
                .unwrap(),
            base.clone()
                .with_user("u")
                .unwrap()
                .with_agent("a")
                .unwrap(),
        ] {
            assert_eq!(Scope::from_key(&scope.key()).unwrap(), scope);
        }
        for bad in [
            "",
            "default|~|~|history",
            "default|~|~|history|s|extra",
            "~|~|~|history|s",
            "default|~|~|~|s",
            "default|~|~|history|~",
            "default||~|history|s",
            "default|~|~|history|no spaces",
        ] {
            let err = Scope::from_key(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn serde_round_trip_validates() {
        let scope = Scope::session("s").unwrap().with_user("u").unwrap();
        let json = serde_json::to_string(&scope).unwrap();
        let back: Scope = serde_json::from_str(&json).unwrap();
        assert_eq!(scope, back);
        let bad = json.replace("\"u\"", "\"u u\"");
        assert!(serde_json::from_str::<Scope>(&bad).is_err());
    }

    #[test]
    fn filter_matching() {
        let scope = Scope::session("s").unwrap().with_user("u").unwrap();
        let f = ScopeFilter::tenant(scope.tenant().clone());
        assert!(f.matches(&scope));
        assert!(
            f.clone()
                .with_user(UserId::new("u").unwrap())
                .matches(&scope)
        );
        assert!(!f.with_user(UserId::new("v").unwrap()).matches(&scope));
    }
}
