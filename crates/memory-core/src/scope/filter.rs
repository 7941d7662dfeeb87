//! [`ScopeFilter`]: which scopes an operation selects.

use std::fmt;

use crate::id::{AgentId, SessionId, SourceId, TenantId, UserId};

use super::Scope;

/// Which scopes an operation selects: a tenant, then optionally narrowed to a user, an agent, a
/// session and a source.
///
/// One filter serves every operation that reaches more than one scope: listing threads and
/// sessions ([`HistoryStore::list_threads`](crate::HistoryStore::list_threads),
/// [`SessionStore::list`](crate::SessionStore::list)), forgetting
/// ([`Forgetter::forget`](crate::Forgetter::forget),
/// [`VectorStore::delete_matching`](crate::VectorStore::delete_matching),
/// [`TextIndex::delete_matching`](crate::TextIndex::delete_matching)), the bundle's export and
/// migration, and the CLI's and the server's listings and forget.
///
/// # Matching
/// A scope [matches](ScopeFilter::matches) when every part the filter names is equal to the
/// scope's; a part the filter leaves open matches anything. Naming a user does not match a
/// scope without a user. The tenant is always named: no filter crosses tenants.
///
/// # Narrowing
/// Each `with_*` adds one condition; they compose in any order and a filter only gets narrower.
/// The usual levels:
///
/// | level                          | filter                                          |
/// |--------------------------------|-------------------------------------------------|
/// | a whole tenant                 | `ScopeFilter::tenant(t)`                        |
/// | one user, across sessions      | `ScopeFilter::tenant(t).with_user(u)`           |
/// | one agent, across users        | `ScopeFilter::tenant(t).with_agent(a)`          |
/// | one session (any source)       | `ScopeFilter::tenant(t).with_session(s)`        |
/// | one provider's data of a user  | `ScopeFilter::tenant(t).with_user(u).with_source(p)` |
///
/// The tenant part is a type parameter so that a tenant *set* can carry the same narrowing
/// (memory-bundle's `Selection` is a `ScopeFilter<Tenants>`: every tenant, or a list);
/// [`in_tenant`](ScopeFilter::in_tenant) gives the one-tenant filter to run in each. Stores
/// only ever take the one-tenant filter, `ScopeFilter<TenantId>`, which is the default.
///
/// ```
/// use memory_core::{Scope, ScopeFilter, TenantId, UserId};
///
/// let dana = ScopeFilter::tenant(TenantId::new("acme")?).with_user(UserId::new("dana")?);
/// let chat = Scope::session("chat-1")?.with_tenant("acme")?.with_user("dana")?;
/// assert!(dana.matches(&chat));
/// assert!(!dana.matches(&chat.clone().with_user("eli")?));
/// assert!(!dana.matches(&Scope::session("chat-1")?.with_tenant("acme")?), "no user: no match");
/// assert_eq!(dana.to_string(), "tenant acme, user dana");
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ScopeFilter<T = TenantId> {
    /// The tenant (required: nothing a filter selects crosses tenants).
    pub tenant: T,
    /// Only this user's scopes.
    pub user: Option<UserId>,
    /// Only this agent's scopes.
    pub agent: Option<AgentId>,
    /// Only scopes of this session id (whatever their source).
    pub session: Option<SessionId>,
    /// Only this source's scopes (the provider that owns the data).
    pub source: Option<SourceId>,
}

impl ScopeFilter {
    /// Every scope of `tenant`.
    pub fn tenant(tenant: TenantId) -> Self {
        Self::new(tenant)
    }

    /// Whether `scope` is selected: its tenant is the filter's, and every part the filter
    /// names is equal.
    pub fn matches(&self, scope: &Scope) -> bool {
        &self.tenant == scope.tenant()
            && self.user.as_ref().is_none_or(|u| scope.user() == Some(u))
            && self.agent.as_ref().is_none_or(|a| scope.agent() == Some(a))
            && self
                .session
                .as_ref()
                .is_none_or(|s| scope.session_id() == s)
            && self.source.as_ref().is_none_or(|s| scope.source() == s)
    }
}

impl<T> ScopeFilter<T> {
    /// Every scope of `tenant` (a [`TenantId`], or a tenant set of another crate).
    pub fn new(tenant: T) -> Self {
        Self {
            tenant,
            user: None,
            agent: None,
            session: None,
            source: None,
        }
    }

    /// Narrows to one user's scopes.
    #[must_use]
    pub fn with_user(mut self, user: UserId) -> Self {
        self.user = Some(user);
        self
    }

    /// Narrows to one agent's scopes.
    #[must_use]
    pub fn with_agent(mut self, agent: AgentId) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Narrows to the scopes of one session id (of every source: a session's block states
    /// go with it).
    #[must_use]
    pub fn with_session(mut self, session: SessionId) -> Self {
        self.session = Some(session);
        self
    }

    /// Narrows to one source's scopes.
    #[must_use]
    pub fn with_source(mut self, source: SourceId) -> Self {
        self.source = Some(source);
        self
    }

    /// Whether the filter selects its whole tenant (names no user, agent, session or source).
    pub fn is_whole_tenant(&self) -> bool {
        self.user.is_none()
            && self.agent.is_none()
            && self.session.is_none()
            && self.source.is_none()
    }

    /// The same narrowing in `tenant`.
    pub fn in_tenant(&self, tenant: TenantId) -> ScopeFilter {
        ScopeFilter {
            tenant,
            user: self.user.clone(),
            agent: self.agent.clone(),
            session: self.session.clone(),
            source: self.source.clone(),
        }
    }

    /// Writes the narrowing (`, user dana, session s1`) after the tenant part.
    fn fmt_narrowing(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(user) = &self.user {
            write!(f, ", user {user}")?;
        }
        if let Some(agent) = &self.agent {
            write!(f, ", agent {agent}")?;
        }
        if let Some(session) = &self.session {
            write!(f, ", session {session}")?;
        }
        if let Some(source) = &self.source {
            write!(f, ", source {source}")?;
        }
        Ok(())
    }
}

/// `tenant acme, user dana, session s1`: the parts the filter names, in order.
impl<T: fmt::Display> fmt::Display for ScopeFilter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tenant {}", self.tenant)?;
        self.fmt_narrowing(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::test_scope as scope;

    fn acme() -> ScopeFilter {
        ScopeFilter::tenant(TenantId::new("acme").unwrap())
    }

    #[test]
    fn the_tenant_is_never_crossed() {
        let other = scope("other", Some("dana"), None, "s1");
        assert!(!acme().matches(&other));
        assert!(
            !acme()
                .with_user(UserId::new("dana").unwrap())
                .matches(&other)
        );
        assert!(acme().matches(&scope("acme", Some("dana"), Some("a"), "s1")));
    }

    #[test]
    fn each_named_part_must_be_equal_and_open_parts_match_anything() {
        let s = scope("acme", Some("dana"), Some("planner"), "s1");
        let user = |u: &str| UserId::new(u).unwrap();
        assert!(acme().with_user(user("dana")).matches(&s));
        assert!(!acme().with_user(user("eli")).matches(&s));
        assert!(
            !acme()
                .with_user(user("dana"))
                .matches(&scope("acme", None, None, "s1"))
        );
        let agent = AgentId::new("planner").unwrap();
        assert!(acme().with_agent(agent.clone()).matches(&s));
        assert!(
            !acme()
                .with_agent(agent)
                .matches(&scope("acme", Some("dana"), None, "s1"))
        );
        let session = SessionId::new("s1").unwrap();
        assert!(acme().with_session(session.clone()).matches(&s));
        assert!(!acme().with_session(session).matches(&scope(
            "acme",
            Some("dana"),
            Some("planner"),
            "s2"
        )));
        let history = SourceId::new("history").unwrap();
        assert!(acme().with_source(history.clone()).matches(&s));
        assert!(
            !acme()
                .with_source(history)
                .matches(&s.clone().with_source("mem0").unwrap())
        );
    }

    #[test]
    fn narrowing_composes_in_any_order_and_only_narrows() {
        let user = UserId::new("dana").unwrap();
        let session = SessionId::new("s1").unwrap();
        let a = acme().with_user(user.clone()).with_session(session.clone());
        let b = acme().with_session(session).with_user(user);
        assert_eq!(a, b);
        let scopes = [
            scope("acme", Some("dana"), None, "s1"),
            scope("acme", Some("dana"), None, "s2"),
            scope("acme", Some("eli"), None, "s1"),
            scope("acme", None, None, "s1"),
        ];
        let broad = scopes
            .iter()
            .filter(|s| acme().with_user(UserId::new("dana").unwrap()).matches(s))
            .count();
        let narrow = scopes.iter().filter(|s| a.matches(s)).count();
        assert_eq!((broad, narrow), (2, 1));
        assert!(acme().is_whole_tenant());
        assert!(!a.is_whole_tenant());
        assert!(
            !acme()
                .with_source(SourceId::new("mem0").unwrap())
                .is_whole_tenant()
        );
    }

    #[test]
    fn the_same_narrowing_moves_to_another_tenant() {
        let set: ScopeFilter<&str> =
            ScopeFilter::new("every tenant").with_user(UserId::new("dana").unwrap());
        assert_eq!(set.to_string(), "tenant every tenant, user dana");
        let in_acme = set.in_tenant(TenantId::new("acme").unwrap());
        assert_eq!(in_acme, acme().with_user(UserId::new("dana").unwrap()));
        assert!(in_acme.matches(&scope("acme", Some("dana"), None, "s9")));
    }

    #[test]
    fn it_reads_as_the_parts_it_names() {
        let all = acme()
            .with_user(UserId::new("dana").unwrap())
            .with_agent(AgentId::new("planner").unwrap())
            .with_session(SessionId::new("s1").unwrap())
            .with_source(SourceId::new("mem0").unwrap());
        assert_eq!(
            all.to_string(),
            "tenant acme, user dana, agent planner, session s1, source mem0"
        );
        assert_eq!(acme().to_string(), "tenant acme");
    }
}
