//! [`Recall`]: which sessions' memory a long-term block recalls from.

use crate::error::{Error, Result};
use crate::scope::{Scope, ScopeFilter};

/// Which sessions' memory a long-term memory block recalls from. A block always *writes* under
/// the session's own scope (so forgetting a session forgets its memory, and the session's
/// provenance stays with every item); `Recall` says where it *searches*.
///
/// Scope rules hold at every level: the search is a [`ScopeFilter`] with the scope's tenant
/// and the block's source, handed to the store, which never returns an item of another tenant
/// (nor, at [`User`](Recall::User), of another user).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Recall {
    /// The session's own memory: each thread recalls only what it flushed (the default).
    #[default]
    Session,
    /// Every session of the scope's user: what they said last week is recalled today. The
    /// scope must name a user.
    User,
    /// Every session of the scope's agent, across the tenant's users: what the agent learned
    /// from anyone. The scope must name an agent.
    Agent,
}

impl Recall {
    /// The scopes a block searching from `scope` (the block's own scope: the session's, with
    /// the block's source) may see: `None` for [`Session`](Recall::Session) (the scope alone),
    /// else the filter of the scope's tenant and source and its user or agent.
    ///
    /// # Errors
    /// [`InvalidInput`](crate::ErrorKind::InvalidInput) when the scope lacks the user (or the
    /// agent) the level needs.
    pub fn filter(self, scope: &Scope) -> Result<Option<ScopeFilter>> {
        let base = ScopeFilter::tenant(scope.tenant().clone()).with_source(scope.source().clone());
        match self {
            Recall::Session => Ok(None),
            Recall::User => {
                let user = scope.user().ok_or_else(|| {
                    Error::invalid_input(
                        "user-level recall needs a scope with a user: give the session's scope \
                         a user id, or recall at the session's level",
                    )
                })?;
                Ok(Some(base.with_user(user.clone())))
            }
            Recall::Agent => {
                let agent = scope.agent().ok_or_else(|| {
                    Error::invalid_input(
                        "agent-level recall needs a scope with an agent: give the session's \
                         scope an agent id, or recall at the session's level",
                    )
                })?;
                Ok(Some(base.with_agent(agent.clone())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn scope(tenant: &str, user: &str, agent: &str, session: &str, source: &str) -> Scope {
        Scope::session(session)
            .unwrap()
            .with_tenant(tenant)
            .unwrap()
            .with_user(user)
            .unwrap()
            .with_agent(agent)
            .unwrap()
            .with_source(source)
            .unwrap()
    }

    #[test]
    fn levels_select_the_session_the_user_or_the_agent() {
        let source = "memory.vector.recall";
        let monday = scope("acme", "dana", "helper", "monday", source);
        assert_eq!(Recall::Session.filter(&monday).unwrap(), None);
        let user = Recall::User.filter(&monday).unwrap().unwrap();
        assert!(user.matches(&scope("acme", "dana", "helper", "friday", source)));
        assert!(user.matches(&scope("acme", "dana", "other", "friday", source)));
        assert!(!user.matches(&scope("acme", "ravi", "helper", "friday", source)));
        assert!(!user.matches(&scope("other", "dana", "helper", "friday", source)));
        assert!(!user.matches(&scope("acme", "dana", "helper", "friday", "history")));
        let agent = Recall::Agent.filter(&monday).unwrap().unwrap();
        assert!(agent.matches(&scope("acme", "ravi", "helper", "friday", source)));
        assert!(!agent.matches(&scope("acme", "dana", "other", "friday", source)));
        assert!(!agent.matches(&scope("other", "dana", "helper", "friday", source)));
        let anonymous = Scope::session("s").unwrap();
        for level in [Recall::User, Recall::Agent] {
            let err = level.filter(&anonymous).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        }
    }
}
