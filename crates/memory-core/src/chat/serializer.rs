//! [`ChatSerializer`]: an [`AgentChat`]'s state to JSON and back, with Semantic Kernel's five
//! restore cases.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::agent_chat::{AgentChat, Channel, Participant};
use crate::error::{Error, Result};
use crate::message::ChatMessage;

/// The version of the chat state this library writes.
pub const AGENT_CHAT_STATE_VERSION: u64 = 1;
const FORMAT: &str = "agent-memory/agent-chat";
/// Largest state accepted by `deserialize` (64 MiB): a hostile document cannot exhaust memory.
const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelEntry {
    #[serde(rename = "channelkey")]
    key: String,
    #[serde(rename = "channelstate")]
    state: Channel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatState {
    format: String,
    version: u64,
    history: Vec<ChatMessage>,
    participants: Vec<Participant>,
    channels: Vec<ChannelEntry>,
}

/// Which restore case applied (Semantic Kernel's AgentChat serialization design).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreOutcome {
    /// The target has exactly the original agents: full fidelity.
    Equivalent,
    /// The target has every original agent and more; the new ones sync to the history on
    /// their first turn.
    Enhanced {
        /// The participants that were not in the original chat.
        added: Vec<String>,
    },
    /// The target lacks some original agents; their channels are kept in the state and used if
    /// they join later.
    Reduced {
        /// The original participants the target lacks.
        missing: Vec<String>,
    },
}

/// Serializes an [`AgentChat`] (primary history, participants, channel states) and restores it
/// into a chat built anew with its agents.
///
/// ```
/// # use memory_core::chat::{AgentChat, ChatSerializer};
/// # use memory_core::Scope;
/// let chat = AgentChat::new(Scope::session("team-1")?);
/// let mut bytes = Vec::new();
/// ChatSerializer::serialize(&chat, &mut bytes)?;
/// let state = ChatSerializer::deserialize(bytes.as_slice())?;
/// assert!(state.participants().is_empty());
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ChatSerializer {
    state: ChatState,
}

impl ChatSerializer {
    /// Writes `chat`'s state as JSON to `writer`.
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) when writing fails.
    pub fn serialize(chat: &AgentChat, writer: impl Write) -> Result<()> {
        let mut participants = chat.participants();
        // Participants that left keep their channel and their description.
        let present: BTreeSet<String> = chat.participants.iter().map(|p| p.channel_key()).collect();
        for key in chat.channels.keys().filter(|k| !present.contains(*k)) {
            if let Some((kind, id)) = key.split_once(':') {
                participants.push(Participant {
                    id: id.to_owned(),
                    name: id.to_owned(),
                    kind: kind.to_owned(),
                });
            }
        }
        let state = ChatState {
            format: FORMAT.to_owned(),
            version: AGENT_CHAT_STATE_VERSION,
            history: chat.history.clone(),
            participants,
            channels: chat
                .channels
                .iter()
                .map(|(key, state)| ChannelEntry {
                    key: key.clone(),
                    state: state.clone(),
                })
                .collect(),
        };
        serde_json::to_writer(writer, &state)
            .map_err(|e| Error::serialization(format!("could not write the chat state: {e}")))
    }

    /// Reads a chat state from `reader`.
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) for anything but a valid
    /// state of a supported version (garbage, wrong types, an unknown version, too deep or too
    /// large a document).
    pub fn deserialize(reader: impl Read) -> Result<Self> {
        let mut bytes = Vec::new();
        reader
            .take(MAX_STATE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::serialization(format!("could not read the chat state: {e}")))?;
        if bytes.len() as u64 > MAX_STATE_BYTES {
            return Err(Error::serialization(format!(
                "the chat state is over {MAX_STATE_BYTES} bytes"
            )));
        }
        #[derive(Deserialize)]
        struct Header {
            format: Option<serde_json::Value>,
            version: Option<serde_json::Value>,
        }
        let header: Header = serde_json::from_slice(&bytes)
            .map_err(|e| Error::serialization(format!("invalid chat state: {e}")))?;
        if header.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(Error::serialization(format!(
                "not an agent chat state: \"format\" must be {FORMAT:?}"
            )));
        }
        match header.version.as_ref().and_then(serde_json::Value::as_u64) {
            Some(AGENT_CHAT_STATE_VERSION) => {}
            other => {
                return Err(Error::serialization(format!(
                    "agent chat state version {other:?} is not supported; this library reads version {AGENT_CHAT_STATE_VERSION}"
                )));
            }
        }
        let state: ChatState = serde_json::from_slice(&bytes)
            .map_err(|e| Error::serialization(format!("invalid chat state: {e}")))?;
        Ok(Self { state })
    }

    /// The participants of the serialized chat, so the application can re-create its agents.
    pub fn participants(&self) -> &[Participant] {
        &self.state.participants
    }

    /// The serialized primary history.
    pub fn history(&self) -> &[ChatMessage] {
        &self.state.history
    }

    /// Restores the state into `chat`, which must have agents and no history or channel state.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when `chat` has no agent
    /// (the *empty* case); [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) when it already
    /// has history or channels (the *invalid* case). In both cases `chat` is left as it was and
    /// stays usable.
    pub fn restore(&self, chat: &mut AgentChat) -> Result<RestoreOutcome> {
        if chat.has_state() {
            return Err(Error::conflict(
                "the chat already has history or channel state; restore into a new chat",
            ));
        }
        if chat.participants.is_empty() {
            return Err(Error::invalid_input(
                "the chat has no agents: add the agents of the serialized chat, then restore",
            ));
        }
        let channels: BTreeMap<String, Channel> = self
            .state
            .channels
            .iter()
            .map(|c| (c.key.clone(), c.state.clone()))
            .collect();
        let original: BTreeSet<String> = self
            .state
            .participants
            .iter()
            .map(|p| format!("{}:{}", p.kind, p.id))
            .collect();
        let target: BTreeSet<String> = chat.participants.iter().map(|p| p.channel_key()).collect();
        let missing: Vec<String> = original.difference(&target).cloned().collect();
        let added: Vec<String> = target.difference(&original).cloned().collect();
        chat.restore_parts(self.state.history.clone(), channels);
        Ok(if !missing.is_empty() {
            tracing::info!(
                ?missing,
                "restored a reduced chat; missing agents sync when they join"
            );
            RestoreOutcome::Reduced { missing }
        } else if !added.is_empty() {
            tracing::info!(
                ?added,
                "restored an enhanced chat; new agents sync to the history"
            );
            RestoreOutcome::Enhanced { added }
        } else {
            RestoreOutcome::Equivalent
        })
    }
}
