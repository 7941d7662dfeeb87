//! Multi-agent memory: [`AgentChat`] (Semantic Kernel's agent chat: several agents over one
//! primary history, each with its own channel) and its [`ChatSerializer`], and [`TeamSession`]
//! (Solon's team memory: per-member sub-histories in any `HistoryStore`, the supervisor seeing
//! the whole).

mod agent_chat;
mod serializer;
mod team;

pub use agent_chat::{AgentChat, ChatParticipant, Participant, SelectionStrategy, SupervisorFn};
pub use serializer::{AGENT_CHAT_STATE_VERSION, ChatSerializer, RestoreOutcome};
pub use team::TeamSession;
