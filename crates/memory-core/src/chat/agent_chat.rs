//! [`AgentChat`]: agents taking turns over one primary history.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::Agent;
use crate::error::{Error, Result};
use crate::message::{ChatMessage, Role};
use crate::scope::Scope;
use crate::session::AgentSession;

/// How a participant is described in a chat's state: its id, name and type. Agent definitions
/// (models, keys, instructions) are never part of the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// The agent's id (its name).
    pub id: String,
    /// The agent's display name.
    pub name: String,
    /// The agent's type (e.g. `chat_completion`), which decides how its channel works.
    #[serde(rename = "type")]
    pub kind: String,
}

/// An agent taking part in a chat, with its type.
#[derive(Debug, Clone)]
pub struct ChatParticipant {
    /// The agent.
    pub agent: Arc<Agent>,
    /// The agent's type.
    pub kind: String,
}

impl ChatParticipant {
    /// `agent` as a participant of type `kind`.
    pub fn new(agent: Arc<Agent>, kind: impl Into<String>) -> Self {
        Self {
            agent,
            kind: kind.into(),
        }
    }

    /// The participant's description.
    pub fn describe(&self) -> Participant {
        Participant {
            id: self.agent.name().to_string(),
            name: self.agent.name().to_string(),
            kind: self.kind.clone(),
        }
    }

    /// The key of this participant's channel: `type:id`.
    pub fn channel_key(&self) -> String {
        format!("{}:{}", self.kind, self.agent.name())
    }
}

/// A supervisor's choice: the index of the participant who speaks next, given the history.
pub type SupervisorFn = Arc<dyn Fn(&[ChatMessage], &[Participant]) -> usize + Send + Sync>;

/// Who speaks next.
#[derive(Clone, Default)]
pub enum SelectionStrategy {
    /// Each participant in turn.
    #[default]
    RoundRobin,
    /// A supervisor function choosing a participant's index from the history.
    Supervisor(SupervisorFn),
}

impl fmt::Debug for SelectionStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionStrategy::RoundRobin => f.write_str("RoundRobin"),
            SelectionStrategy::Supervisor(_) => f.write_str("Supervisor(..)"),
        }
    }
}

/// A channel: how one agent follows the primary history. `synced` is how many messages of the
/// primary history it has received; `session` is the agent's own session state (its
/// sub-history lives in the agent's history store under that session's scope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Channel {
    pub(crate) synced: usize,
    pub(crate) session: Value,
}

/// Several agents taking turns over one primary history (Semantic Kernel's `AgentGroupChat`).
///
/// Each agent has a channel: it receives the primary-history messages it has not seen yet as
/// its input, runs in its own [`AgentSession`] (scope: the chat's scope with the agent's id, so
/// its sub-history is its own), and its answer joins the primary history under its name. The
/// state (primary history, participants, channels) round-trips through [`ChatSerializer`](super::ChatSerializer).
#[derive(Debug, Clone)]
pub struct AgentChat {
    pub(crate) scope: Scope,
    pub(crate) history: Vec<ChatMessage>,
    pub(crate) participants: Vec<ChatParticipant>,
    pub(crate) channels: BTreeMap<String, Channel>,
    selection: SelectionStrategy,
    turn: usize,
}

impl AgentChat {
    /// An empty chat at `scope` with round-robin selection.
    pub fn new(scope: Scope) -> Self {
        Self {
            scope,
            history: Vec::new(),
            participants: Vec::new(),
            channels: BTreeMap::new(),
            selection: SelectionStrategy::RoundRobin,
            turn: 0,
        }
    }

    /// Sets the selection strategy.
    pub fn with_selection(mut self, selection: SelectionStrategy) -> Self {
        self.selection = selection;
        self
    }

    /// Adds an agent. An agent that joins later receives the whole primary history on its first
    /// turn (its channel syncs), exactly like an agent present from the start.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) when an agent of that name is
    /// already in the chat.
    pub fn add_agent(&mut self, participant: ChatParticipant) -> Result<()> {
        if self
            .participants
            .iter()
            .any(|p| p.agent.name() == participant.agent.name())
        {
            return Err(Error::conflict(format!(
                "agent {} is already in the chat",
                participant.agent.name()
            )));
        }
        self.participants.push(participant);
        Ok(())
    }

    /// The chat's scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The primary history.
    pub fn history(&self) -> &[ChatMessage] {
        &self.history
    }

    /// The participants' descriptions.
    pub fn participants(&self) -> Vec<Participant> {
        self.participants
            .iter()
            .map(ChatParticipant::describe)
            .collect()
    }

    /// Whether the chat has history or channel state (restoring into it would fail).
    pub fn has_state(&self) -> bool {
        !self.history.is_empty() || !self.channels.is_empty()
    }

    /// Adds a message (usually the user's) to the primary history.
    pub fn add_message(&mut self, message: ChatMessage) {
        self.history.push(message);
    }

    /// Lets the next agent (by the selection strategy) take a turn; returns its messages.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) with no agent, nothing new
    /// for the chosen agent to answer, or a channel whose session belongs to another scope (a
    /// chat state restored into a chat of another scope; the message names both); the agent's
    /// errors.
    pub async fn invoke(&mut self) -> Result<Vec<ChatMessage>> {
        if self.participants.is_empty() {
            return Err(Error::invalid_input("the chat has no agent"));
        }
        let index = match &self.selection {
            SelectionStrategy::RoundRobin => {
                self.turn.checked_rem(self.participants.len()).unwrap_or(0)
            }
            SelectionStrategy::Supervisor(choose) => choose(&self.history, &self.participants())
                .min(self.participants.len().saturating_sub(1)),
        };
        // The turn counter comes from stored chat state: it wraps instead of overflowing.
        self.turn = self.turn.wrapping_add(1);
        self.invoke_index(index).await
    }

    /// Lets the named agent take a turn.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke); [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) for an
    /// agent not in the chat.
    pub async fn invoke_agent(&mut self, name: &str) -> Result<Vec<ChatMessage>> {
        let index = self
            .participants
            .iter()
            .position(|p| p.agent.name().as_str() == name)
            .ok_or_else(|| Error::not_found(format!("agent {name} is not in the chat")))?;
        self.invoke_index(index).await
    }

    async fn invoke_index(&mut self, index: usize) -> Result<Vec<ChatMessage>> {
        let participant = self
            .participants
            .get(index)
            .cloned()
            .ok_or_else(|| Error::not_found(format!("the chat has no agent number {index}")))?;
        let key = participant.channel_key();
        let channel_scope = self
            .scope
            .clone()
            .with_agent_id(participant.agent.name().clone());
        // A channel's session belongs to this chat's scope: a chat state restored into a chat
        // of another scope must not continue the old scope's threads.
        let mut session = match self.channels.get(&key) {
            Some(channel) => AgentSession::deserialize_at(&channel.session, &channel_scope)?,
            None => AgentSession::new(channel_scope),
        };
        let synced = self.channels.get(&key).map_or(0, |c| c.synced);
        let new: Vec<ChatMessage> = self
            .history
            .get(synced..)
            .unwrap_or_default()
            .iter()
            .filter(|m| m.author_name.as_deref() != Some(participant.agent.name().as_str()))
            .cloned()
            .collect();
        if new.is_empty() {
            return Err(Error::invalid_input(format!(
                "nothing new for agent {} to answer",
                participant.agent.name()
            )));
        }
        let run = participant.agent.run(new, &mut session).await?;
        let mut answer = run.messages;
        for m in &mut answer {
            if m.role == Role::Assistant && m.author_name.is_none() {
                m.author_name = Some(participant.agent.name().to_string());
            }
        }
        self.history.extend(answer.iter().cloned());
        self.channels.insert(
            key,
            Channel {
                synced: self.history.len(),
                session: session.serialize()?,
            },
        );
        Ok(answer)
    }

    pub(crate) fn restore_parts(
        &mut self,
        history: Vec<ChatMessage>,
        channels: BTreeMap<String, Channel>,
    ) {
        self.history = history;
        self.channels = channels;
    }
}
