//! [`TeamSession`]: Solon's team memory over any [`HistoryStore`].

use std::sync::Arc;

use crate::error::Result;
use crate::history::{HistoryStore, Window};
use crate::id::AgentId;
use crate::message::ChatMessage;
use crate::scope::Scope;
use crate::session::AgentSession;

/// One session of a team of agents: each member has its own sub-history (the thread at the
/// session's scope with the member's agent id) while the supervisor sees the whole (the thread
/// at the session's scope), both in any [`HistoryStore`]; each member may have a history
/// window; the workflow snapshot and windows travel with the [`AgentSession`].
///
/// ```
/// use std::sync::Arc;
/// use memory_core::chat::TeamSession;
/// use memory_core::{AgentSession, ChatMessage, InMemoryHistoryStore, Scope};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut team = TeamSession::new(AgentSession::new(Scope::session("trip")?), Arc::new(InMemoryHistoryStore::new()));
/// team.add_history_message("flights", ChatMessage::assistant("LIS 09:40 booked")).await?;
/// team.add_history_message("hotels", ChatMessage::assistant("Alfama, 3 nights")).await?;
/// assert_eq!(team.history_messages("flights", 10).await?.len(), 1);
/// assert_eq!(team.team_history(10).await?.len(), 2);
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TeamSession {
    session: AgentSession,
    store: Arc<dyn HistoryStore>,
}

impl TeamSession {
    /// The team memory of `session`, kept in `store`.
    pub fn new(session: AgentSession, store: Arc<dyn HistoryStore>) -> Self {
        Self { session, store }
    }

    /// The session (serialize it to save the team's snapshot and windows).
    pub fn session(&self) -> &AgentSession {
        &self.session
    }

    /// The session, mutably.
    pub fn session_mut(&mut self) -> &mut AgentSession {
        &mut self.session
    }

    /// The scope of a member's sub-history.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid agent id.
    pub fn member_scope(&self, agent: &str) -> Result<Scope> {
        Ok(self
            .session
            .scope()
            .clone()
            .with_agent_id(AgentId::new(agent)?))
    }

    /// Adds `message` to `agent`'s sub-history and to the team's whole history. Each append is
    /// atomic and idempotent, so a call that failed half-way is safely retried.
    ///
    /// # Errors
    /// An invalid agent id; the store's errors.
    pub async fn add_history_message(&self, agent: &str, message: ChatMessage) -> Result<()> {
        let member = self.member_scope(agent)?;
        let batch = [message];
        self.store.append(&member, &batch).await?;
        self.store.append(self.session.scope(), &batch).await?;
        Ok(())
    }

    /// The last `last` messages of `agent`'s sub-history, no more than its window.
    ///
    /// # Errors
    /// An invalid agent id; the store's errors.
    pub async fn history_messages(&self, agent: &str, last: usize) -> Result<Vec<ChatMessage>> {
        let member = self.member_scope(agent)?;
        let window = self
            .session
            .agent_window(&AgentId::new(agent)?)
            .unwrap_or(usize::MAX);
        let read = self
            .store
            .read(&member, Window::Last(last.min(window)))
            .await?;
        Ok(read.into_iter().map(|m| m.into_message()).collect())
    }

    /// The last `last` messages of the whole team (what the supervisor sees).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn team_history(&self, last: usize) -> Result<Vec<ChatMessage>> {
        let read = self
            .store
            .read(self.session.scope(), Window::Last(last))
            .await?;
        Ok(read.into_iter().map(|m| m.into_message()).collect())
    }

    /// Sets how many messages of `agent`'s sub-history it is shown at most.
    ///
    /// # Errors
    /// An invalid agent id.
    pub fn set_history_window(&mut self, agent: &str, size: Option<usize>) -> Result<()> {
        self.session.set_agent_window(AgentId::new(agent)?, size);
        Ok(())
    }

    /// Sets one workflow variable.
    pub fn update_snapshot(&mut self, key: impl Into<String>, value: serde_json::Value) {
        self.session.update_snapshot(key, value);
    }

    /// The workflow snapshot.
    pub fn snapshot(&self) -> &serde_json::Map<String, serde_json::Value> {
        self.session.snapshot()
    }
}
