#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]
#![deny(missing_docs)]

pub mod agent;
mod bpe;
pub mod chat;
pub mod context;
pub mod doctor;
pub mod error;
pub mod forget;
pub mod history;
pub mod id;
pub mod lexical;
mod limits;
pub mod memory;
pub mod message;
pub mod model;
pub mod redact;
pub mod reducer;
pub mod retrieval;
pub mod scope;
mod scoped_index;
pub mod session;
mod span_fields;
pub mod telemetry;
pub mod tokens;
pub mod tool;
pub mod ttl;
pub mod vector;

pub use agent::{
    Agent, AgentBuilder, AgentInput, AgentRun, DEFAULT_MAX_ITERATIONS, DEFAULT_WINDOW, StopReason,
};
pub use context::{
    AiContext, ContextProvider, ContextProviders, InvokedContext, InvokingContext, ReadWindow,
    StoredTurn,
};
pub use doctor::{Check, CheckStatus, Diagnosis};
pub use error::{Error, ErrorKind, Result};
pub use forget::{ForgetMode, ForgetReceipt, Forgetter};
pub use history::{
    AppendOutcome, CursorRead, Delta, HistoryCapabilities, HistoryStore, InMemoryHistoryStore,
    LayeredHistory, MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, MAX_JSON_DEPTH, MAX_MESSAGE_BYTES,
    MAX_READ_PAGE, NO_EPOCH, PreparedBatch, PreparedMessage, Repeats, StoredMessage, ThreadCount,
    ThreadCursor, Window,
};
pub use id::{
    AgentId, ID_CHARACTERS, ID_RULE, MAX_ID_LEN, MessageId, SessionId, SourceId, TenantId, UserId,
};
pub use lexical::{
    LayeredTextIndex, ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery,
};
pub use memory::{InsertMethod, Memory, MemoryBlock, MemoryConfig};
pub use message::{ChatMessage, Media, MediaKind, OpenAiMessage, Part, Role};
pub use model::{ChatModel, ChatRequest, ChatResponse, Embedder, ToolDefinition, Usage};
pub use redact::{REDACTED, redact_url, url_secrets};
pub use reducer::{
    ChatReducer, MessageCountReducer, ReducerTrigger, Reduction, SUMMARY_METADATA_KEY,
    Segmentation, SummarizingReducer, TokenBudgetReducer, is_summary,
};
pub use retrieval::{
    DenseRetriever, Fusion, HybridRetriever, LexicalRetriever, MemoryItem, RetrievalQuery,
    Retrieved, Retriever,
};
pub use scope::{Page, PageRequest, Scope, ScopeFilter, ScopedHit};
pub use session::{
    AgentSession, Conversation, InMemorySessionStore, LayeredSessions, MAX_SESSION_STATE_BYTES,
    SessionCapabilities, SessionStore, StoredSession, encode_state,
};
pub use tokens::{
    Encoding, FnTokenCounter, MediaTokenCosts, TiktokenCounter, TokenCounter, default_token_counter,
};
pub use tool::{FnTool, MAX_TOOL_NAME_LEN, Tool, ToolCallRecord, ToolCallStatus, Tools};
pub use ttl::{MAX_TTL, ttl_millis};
pub use vector::{
    InMemoryVectorStore, LayeredVectors, PayloadFilter, ScoredPoint, VectorCapabilities,
    VectorPoint, VectorQuery, VectorStore,
};

pub use async_trait::async_trait;
