//! Which [`Scope`] a rig conversation id names.

use std::fmt;

use memory_core::{AgentId, Result, Scope, SessionId, TenantId, UserId};
use rig_core::id::ConversationId;

/// Maps a rig conversation id to the [`Scope`] of its thread.
///
/// # Behavior
/// - The same conversation id always maps to the same scope, and two ids that must not share
///   a thread map to different scopes (the mapper is the only isolation between them).
/// - An id the mapper cannot map is an error (usually
///   [`InvalidInput`](memory_core::ErrorKind::InvalidInput)); the adapter returns it to rig
///   and touches no store.
///
/// Any `Fn(&ConversationId) -> Result<Scope>` closure is a mapper.
pub trait ScopeMapper: Send + Sync + 'static {
    /// The scope of `conversation`'s thread.
    fn scope(&self, conversation: &ConversationId) -> Result<Scope>;
}

impl<F> ScopeMapper for F
where
    F: Fn(&ConversationId) -> Result<Scope> + Send + Sync + 'static,
{
    fn scope(&self, conversation: &ConversationId) -> Result<Scope> {
        self(conversation)
    }
}

/// The mapper of [`RigMemory::builder`](crate::RigMemory::builder): one tenant and one user,
/// optionally one agent, and the conversation id as the session id (so it must be a valid
/// [`SessionId`]: 1–128 characters from the key-safe set).
#[derive(Clone, PartialEq, Eq)]
pub struct UserScopes {
    tenant: TenantId,
    user: UserId,
    agent: Option<AgentId>,
}

impl UserScopes {
    /// Conversations of `user` in `tenant`.
    pub fn new(tenant: TenantId, user: UserId) -> Self {
        Self {
            tenant,
            user,
            agent: None,
        }
    }

    /// Also names the agent in every scope.
    pub fn with_agent(mut self, agent: AgentId) -> Self {
        self.agent = Some(agent);
        self
    }
}

impl fmt::Debug for UserScopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserScopes")
            .field("tenant", &self.tenant.as_str())
            .field("user", &self.user.as_str())
            .field("agent", &self.agent.as_ref().map(AgentId::as_str))
            .finish()
    }
}

impl ScopeMapper for UserScopes {
    fn scope(&self, conversation: &ConversationId) -> Result<Scope> {
        let session = SessionId::new(conversation.as_str()).map_err(|e| {
            memory_core::Error::invalid_input(format!(
                "the rig conversation id is not a valid session id ({}); map it with \
                 RigMemory::with_mapper",
                e.message()
            ))
        })?;
        let mut scope = Scope::new(self.tenant.clone(), session).with_user(self.user.as_str())?;
        if let Some(agent) = &self.agent {
            scope = scope.with_agent_id(agent.clone());
        }
        Ok(scope)
    }
}
