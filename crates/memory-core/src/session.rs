//! [`AgentSession`]: everything one conversation carries between runs, and the
//! [`SessionStore`] that keeps it.

mod in_memory;
mod layered;
mod state;
mod store;

use std::collections::BTreeMap;

use serde_json::Value;

pub use in_memory::InMemorySessionStore;
pub use layered::LayeredSessions;
pub use state::SESSION_STATE_VERSION;
pub use store::{
    MAX_SESSION_STATE_BYTES, MAX_STATE_DEPTH, SessionCapabilities, SessionStore, StoredSession,
    check_state_depth, encode_state,
};

use crate::error::{Error, Result};
use crate::id::{AgentId, SessionId, SourceId};
use crate::message::ChatMessage;
use crate::scope::Scope;

/// Where the conversation's history lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// In a [`HistoryStore`](crate::HistoryStore) thread at the session's scope (the default).
    Local,
    /// Held by the model service; the session keeps only the service's conversation id.
    Service(String),
}

/// One conversation's state: its scope (and so its history thread), or the id of a
/// service-held conversation; the per-agent histories of a team; the workflow snapshot; and
/// each context provider's state under its source id.
///
/// A session holds no connection setting and no secret: [`serialize`](AgentSession::serialize)
/// writes plain data, and [`AgentSession::deserialize`] restores it with the same agents.
///
/// ```
/// use memory_core::{AgentSession, ChatMessage, Scope};
///
/// let mut session = AgentSession::new(Scope::session("trip-planning")?);
/// session.add_history_message("planner", ChatMessage::user("Book Lisbon"))?;
/// session.update_snapshot("step", serde_json::json!("flights"));
///
/// let state = session.serialize()?;
/// let restored = AgentSession::deserialize(&state)?;
/// assert_eq!(restored.history_messages("planner", 10)?.len(), 1);
/// assert_eq!(restored.snapshot()["step"], "flights");
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSession {
    scope: Scope,
    conversation: Conversation,
    turns: u64,
    history_window: Option<usize>,
    agent_windows: BTreeMap<AgentId, usize>,
    agent_histories: BTreeMap<AgentId, Vec<ChatMessage>>,
    snapshot: serde_json::Map<String, Value>,
    provider_states: BTreeMap<SourceId, Value>,
}

impl AgentSession {
    /// A new, empty session whose history thread is at `scope`.
    pub fn new(scope: Scope) -> Self {
        Self {
            scope,
            conversation: Conversation::Local,
            turns: 0,
            history_window: None,
            agent_windows: BTreeMap::new(),
            agent_histories: BTreeMap::new(),
            snapshot: serde_json::Map::new(),
            provider_states: BTreeMap::new(),
        }
    }

    /// The session's id (the session part of its scope).
    pub fn id(&self) -> &SessionId {
        self.scope.session_id()
    }

    /// The scope of the session's history thread.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Where the conversation's history lives.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The id of the service-held conversation, if the model service keeps the history.
    pub fn service_conversation_id(&self) -> Option<&str> {
        match &self.conversation {
            Conversation::Service(id) => Some(id),
            Conversation::Local => None,
        }
    }

    /// Marks the history as held by the model service under `id` (Agent Framework's
    /// service-stored history): from now on the agent sends only new messages and this id.
    pub fn set_service_conversation_id(&mut self, id: impl Into<String>) {
        self.conversation = Conversation::Service(id.into());
    }

    /// How many runs completed in this session.
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// Records a completed run.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when the counter is already
    /// `u64::MAX` (a restored state can hold it); the counter is left unchanged.
    pub fn record_turn(&mut self) -> Result<()> {
        self.turns = self.turns.checked_add(1).ok_or_else(|| {
            Error::invalid_input(format!(
                "session {} has recorded the most turns a session can count ({})",
                self.id(),
                u64::MAX
            ))
        })?;
        Ok(())
    }

    /// Whether the session has any history: a completed run or a per-agent message.
    pub fn has_history(&self) -> bool {
        self.turns > 0 || self.agent_histories.values().any(|h| !h.is_empty())
    }

    /// Sets the default number of messages [`windowed_history`](Self::windowed_history)
    /// returns per agent (Solon's history window size).
    pub fn set_history_window(&mut self, size: Option<usize>) {
        self.history_window = size;
    }

    /// The history window size.
    pub fn history_window(&self) -> Option<usize> {
        self.history_window
    }

    /// Sets one agent's own history window (a team member's), or removes it.
    pub fn set_agent_window(&mut self, agent: AgentId, size: Option<usize>) {
        match size {
            Some(size) => self.agent_windows.insert(agent, size),
            None => self.agent_windows.remove(&agent),
        };
    }

    /// One agent's own history window, falling back to the session's.
    pub fn agent_window(&self, agent: &AgentId) -> Option<usize> {
        self.agent_windows
            .get(agent)
            .copied()
            .or(self.history_window)
    }

    /// Appends `message` to `agent`'s own history (Solon's `addHistoryMessage`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid agent id.
    pub fn add_history_message(
        &mut self,
        agent: impl Into<String>,
        message: ChatMessage,
    ) -> Result<()> {
        let agent = AgentId::new(agent)?;
        self.agent_histories.entry(agent).or_default().push(message);
        Ok(())
    }

    /// The last `last` messages of `agent`'s history, oldest first (Solon's
    /// `getHistoryMessages`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid agent id.
    pub fn history_messages(&self, agent: &str, last: usize) -> Result<&[ChatMessage]> {
        let agent = AgentId::new(agent)?;
        let all = self
            .agent_histories
            .get(&agent)
            .map(Vec::as_slice)
            .unwrap_or_default();
        Ok(all
            .get(all.len().saturating_sub(last)..)
            .unwrap_or_default())
    }

    /// `agent`'s history within the session's history window (all of it with no window).
    ///
    /// # Errors
    /// As [`history_messages`](Self::history_messages).
    pub fn windowed_history(&self, agent: &str) -> Result<&[ChatMessage]> {
        self.history_messages(agent, self.history_window.unwrap_or(usize::MAX))
    }

    /// The agents that have a history in this session.
    pub fn history_agents(&self) -> impl Iterator<Item = &AgentId> {
        self.agent_histories.keys()
    }

    /// Sets one variable of the workflow snapshot (Solon's execution snapshot).
    pub fn update_snapshot(&mut self, key: impl Into<String>, value: Value) {
        self.snapshot.insert(key.into(), value);
    }

    /// The workflow snapshot.
    pub fn snapshot(&self) -> &serde_json::Map<String, Value> {
        &self.snapshot
    }

    /// The state a provider keeps in this session, if any.
    pub fn provider_state(&self, source: &SourceId) -> Option<&Value> {
        self.provider_states.get(source)
    }

    /// Replaces a provider's state; `Value::Null` removes it.
    pub fn set_provider_state(&mut self, source: SourceId, state: Value) {
        if state.is_null() {
            self.provider_states.remove(&source);
        } else {
            self.provider_states.insert(source, state);
        }
    }

    /// The source ids of every provider state held, including those of providers the current
    /// agent does not know (they are kept, never dropped).
    pub fn provider_sources(&self) -> impl Iterator<Item = &SourceId> {
        self.provider_states.keys()
    }

    /// Encodes the session as its versioned JSON state (docs/format.md).
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if a value cannot be
    /// encoded.
    pub fn serialize(&self) -> Result<Value> {
        state::encode(self)
    }

    /// Encodes the session as a JSON string.
    ///
    /// # Errors
    /// As [`serialize`](Self::serialize).
    pub fn to_json(&self) -> Result<String> {
        state::encode_string(self)
    }

    /// Restores a session from its JSON state, migrating older versions (a version 1 state
    /// loads, and [`serialize`](Self::serialize) writes it back as version 2).
    ///
    /// The session takes the state's own scope, unchecked: use this only where a state is moved
    /// on purpose (an export imported elsewhere, a state a program built or copied itself). A
    /// state loaded from a [`SessionStore`] by scope must be restored with
    /// [`deserialize_at`](Self::deserialize_at), which refuses a state of another scope (every
    /// loading path of this workspace does).
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) for anything but a valid
    /// state of a supported version: garbage, a truncated document, wrong types, an unknown
    /// version (a newer one than [`SESSION_STATE_VERSION`]; the message names both), an
    /// invalid id or scope key.
    pub fn deserialize(state: &Value) -> Result<Self> {
        state::decode(state)
    }

    /// Restores a session from a JSON string.
    ///
    /// # Errors
    /// As [`deserialize`](Self::deserialize).
    pub fn from_json(json: &str) -> Result<Self> {
        state::decode_str(json)
    }

    /// Restores a session from the state a [`SessionStore`] returned for `scope`, and checks
    /// that the state belongs there: a state saved for another scope (a row copied between
    /// sessions or tenants, a mixed-up key) is refused instead of sending this conversation's
    /// history to another thread.
    ///
    /// ```
    /// use memory_core::{AgentSession, ErrorKind, Scope};
    ///
    /// let scope = Scope::session("trip-planning")?;
    /// let state = AgentSession::new(scope.clone()).serialize()?;
    /// assert_eq!(AgentSession::deserialize_at(&state, &scope)?.scope(), &scope);
    /// let elsewhere = Scope::session("other")?;
    /// let err = AgentSession::deserialize_at(&state, &elsewhere).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// # Ok::<(), memory_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The errors of [`deserialize`](Self::deserialize);
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when the state's scope is
    /// not `scope` (the message names both).
    pub fn deserialize_at(state: &Value, scope: &Scope) -> Result<Self> {
        let session = state::decode(state)?;
        state::check_scope(&session, scope)?;
        Ok(session)
    }

    /// Restores `state` into this session, which must be new.
    ///
    /// The session takes the state's scope, as [`deserialize`](Self::deserialize) does (a
    /// state moved on purpose); a state loaded from a store by scope goes through
    /// [`deserialize_at`](Self::deserialize_at) instead.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) when this session already has
    /// history (it is left untouched and usable); the errors of
    /// [`deserialize`](Self::deserialize) otherwise.
    pub fn restore(&mut self, state: &Value) -> Result<()> {
        if self.has_history() {
            return Err(Error::conflict(format!(
                "session {} already has history; restore into a new session",
                self.id()
            )));
        }
        *self = Self::deserialize(state)?;
        Ok(())
    }

    pub(crate) fn from_parts(parts: state::SessionParts) -> Self {
        Self {
            scope: parts.scope,
            conversation: parts.conversation,
            turns: parts.turns,
            history_window: parts.history_window,
            agent_windows: parts.agent_windows,
            agent_histories: parts.agent_histories,
            snapshot: parts.snapshot,
            provider_states: parts.provider_states,
        }
    }
}
