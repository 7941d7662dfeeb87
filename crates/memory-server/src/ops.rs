//! The operations of the server, free of any transport: HTTP (and MCP) handlers authenticate,
//! decode their input into these types, call [`Ops`], and encode what it returns.
//!
//! Every operation takes the caller's [`Principal`]: the tenant of every scope comes from it,
//! never from the request, and a token bound to a user can only address that user.
mod forget;
mod memory;
mod messages;
mod recall;
mod search;
mod sessions;
mod threads;

use std::sync::Arc;

use agent_memory::memory::MemoryBlock;
use agent_memory::memory::blocks::VectorMemoryBlock;
use agent_memory::{
    AgentId, PageRequest, Scope, ScopeFilter, SessionId, SourceId, Stores, TenantId,
};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ErrorCode, OpError, OpResult};

pub use forget::{ForgetReceiptView, ForgetRequest, StoreReceiptView};
pub use memory::{MAX_MEMORY_TOKEN_LIMIT, MemoryContextView, MemoryPutView};
pub use messages::{AppendView, MessageInput, MessageView, RoleName};
pub use recall::{FACTS_SOURCE, RecallView};
pub use search::{
    DEFAULT_SEARCH_TOP_K, MAX_SEARCH_TOP_K, SEARCH_UNAVAILABLE, SearchHitView, SearchView,
};
pub use sessions::SessionView;
pub use threads::{CountView, ListRequest, ScopePage, ScopeView, WindowSpec};

/// The most items a list returns in one page.
pub const MAX_PAGE_LIMIT: usize = 1_000;
/// The page size of a list that names none.
pub const DEFAULT_PAGE_LIMIT: usize = 100;
/// The name a forget receipt gives the server's own text index (tantivy, `text_index =
/// "memory"` or `"directory"`), apart from the store's own (`"texts"`).
pub const OWN_TEXT_INDEX_NAME: &str = "memory texts";

/// The name a forget receipt gives the server's own vector store (`[memory] vector_store =
/// "memory"`) when the store has one of its own too.
pub const OWN_VECTOR_STORE_NAME: &str = "memory vectors";

/// The limits the operations enforce (the transport enforces the body size itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpsLimits {
    /// The most messages one append may carry (at most [`MAX_BATCH_MESSAGES`](agent_memory::MAX_BATCH_MESSAGES)).
    pub max_messages_per_append: usize,
}

impl Default for OpsLimits {
    fn default() -> Self {
        Self {
            max_messages_per_append: 1_000,
        }
    }
}

/// Which thread or session a request addresses, as the request named it (the tenant is the
/// principal's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
pub struct Address {
    /// The session id (path segment).
    pub session: String,
    /// The user, if the thread has one (a user-bound token's user when omitted).
    pub user: Option<String>,
    /// The agent, if the thread has one.
    pub agent: Option<String>,
    /// The source (default `history`).
    pub source: Option<String>,
}

impl Address {
    /// The address of `session` with no user, agent or source.
    pub fn session(session: impl Into<String>) -> Self {
        Self {
            session: session.into(),
            ..Self::default()
        }
    }
}

/// The operations over one pair of stores.
#[derive(Debug, Clone)]
pub struct Ops {
    stores: Stores,
    limits: OpsLimits,
    blocks: Vec<Arc<dyn MemoryBlock>>,
    vector: Option<Arc<VectorMemoryBlock>>,
    retrieval: Option<crate::retrieval::RetrievalKind>,
    vector_store: Option<Arc<dyn agent_memory::VectorStore>>,
    text_index: Option<Arc<dyn agent_memory::TextIndex>>,
}

fn invalid(error: agent_memory::Error) -> OpError {
    OpError::new(
        ErrorCode::InvalidInput,
        crate::error::library_detail(&error),
    )
}

fn page_request(limit: Option<usize>, cursor: Option<String>) -> OpResult<PageRequest> {
    let limit = limit.unwrap_or(DEFAULT_PAGE_LIMIT);
    if limit == 0 || limit > MAX_PAGE_LIMIT {
        return Err(OpError::invalid(format!(
            "`limit` must be between 1 and {MAX_PAGE_LIMIT}"
        )));
    }
    Ok(match cursor {
        Some(cursor) => PageRequest::after(limit, cursor),
        None => PageRequest::first(limit),
    })
}

impl Ops {
    /// Operations over `stores` with `limits`.
    pub fn new(stores: Stores, limits: OpsLimits) -> Self {
        Self {
            stores,
            limits,
            blocks: Vec::new(),
            vector: None,
            retrieval: None,
            vector_store: None,
            text_index: None,
        }
    }

    /// The same operations, with `blocks` in every session's `Memory` (the memory routes),
    /// beside the vector block of [`with_vector_memory`](Self::with_vector_memory), if any.
    #[must_use]
    pub fn with_memory_blocks(mut self, blocks: Vec<Arc<dyn MemoryBlock>>) -> Self {
        self.blocks = blocks;
        if let Some(vector) = &self.vector {
            self.blocks.push(Arc::clone(vector) as Arc<dyn MemoryBlock>);
        }
        self
    }

    /// The same operations, with `memory`'s block in every session's `Memory` too, memory
    /// searches ([`search_memory`](Self::search_memory)) run on it (dense, lexical or hybrid),
    /// and its vector store and own text index in `forget`.
    #[must_use]
    pub fn with_vector_memory(mut self, memory: crate::embedder::VectorMemory) -> Self {
        self.blocks
            .push(Arc::clone(&memory.block) as Arc<dyn MemoryBlock>);
        self.vector = Some(memory.block);
        self.retrieval = Some(memory.retrieval);
        self.vector_store = memory.store;
        self.text_index = memory.text_index;
        self
    }

    /// How memory searches rank (`None`: the server has no searchable memory).
    pub fn retrieval(&self) -> Option<crate::retrieval::RetrievalKind> {
        self.retrieval
    }

    /// A [`Forgetter`](agent_memory::forget::Forgetter) over every store the operations
    /// write: the stores' (history, sessions, the store's vector store and text index), the
    /// memory's own vector store and text index (in memory, tantivy) when it has them, so
    /// nothing a search finds is left behind.
    pub(crate) fn forgetter(&self) -> agent_memory::forget::Forgetter {
        let mut forgetter = self.stores.forgetter();
        if let Some(store) = &self.vector_store {
            // Named apart from the store's own vector store ("vectors") when the store has
            // one: a receipt names each once.
            let name = if self.stores.vector_store().is_some() {
                OWN_VECTOR_STORE_NAME
            } else {
                "vectors"
            };
            forgetter = forgetter.target(Arc::new(agent_memory::forget::VectorForget::named(
                name,
                Arc::clone(store),
            )));
        }
        if let Some(index) = &self.text_index {
            // Named apart from the store's own text index ("texts"), which the stores'
            // forgetter already holds: a receipt names each once.
            forgetter = forgetter.target(Arc::new(agent_memory::forget::TextForget::named(
                OWN_TEXT_INDEX_NAME,
                Arc::clone(index),
            )));
        }
        forgetter
    }

    /// Deletes the memory's items of the session `scope` addresses, from its vector store and
    /// its text index alike (after its thread was cleared or its session deleted: what was
    /// flushed from it must not be found again).
    pub(crate) async fn forget_vector_memory(&self, scope: &agent_memory::Scope) -> OpResult<()> {
        if let Some(block) = &self.vector {
            block.forget(scope, &serde_json::Value::Null).await?;
        }
        Ok(())
    }

    /// The stores.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The limits.
    pub fn limits(&self) -> OpsLimits {
        self.limits
    }

    /// The scope `address` names for `who`.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an invalid id; [`ErrorCode::Forbidden`] for a user the
    /// token is not bound to.
    pub fn scope(&self, who: &Principal, address: &Address) -> OpResult<Scope> {
        let session = SessionId::new(address.session.as_str()).map_err(invalid)?;
        let mut scope = Scope::new(who.tenant.clone(), session);
        if let Some(user) = who.user_for(address.user.as_deref())? {
            scope = scope.with_user(user.as_str()).map_err(invalid)?;
        }
        if let Some(agent) = &address.agent {
            scope = scope.with_agent_id(AgentId::new(agent.as_str()).map_err(invalid)?);
        }
        if let Some(source) = &address.source {
            scope = scope.with_source_id(SourceId::new(source.as_str()).map_err(invalid)?);
        }
        Ok(scope)
    }

    fn filter(&self, who: &Principal, request: &ListRequest) -> OpResult<ScopeFilter> {
        let mut filter = ScopeFilter::tenant(who.tenant.clone());
        if let Some(user) = who.user_for(request.user.as_deref())? {
            filter = filter.with_user(user);
        }
        if let Some(agent) = &request.agent {
            filter = filter.with_agent(AgentId::new(agent.as_str()).map_err(invalid)?);
        }
        if let Some(source) = &request.source {
            filter = filter.with_source(SourceId::new(source.as_str()).map_err(invalid)?);
        }
        Ok(filter)
    }

    /// The messages of one append or put, checked against the limits: at least one, at most
    /// the configured number; `what` names the call in the error (`an append`, `a put`).
    pub(super) fn batch(
        &self,
        messages: Vec<MessageInput>,
        what: &str,
    ) -> OpResult<Vec<agent_memory::ChatMessage>> {
        if messages.is_empty() {
            return Err(OpError::invalid(format!(
                "{what} needs at least one message"
            )));
        }
        let max = self
            .limits
            .max_messages_per_append
            .min(agent_memory::MAX_BATCH_MESSAGES);
        if messages.len() > max {
            return Err(OpError::new(
                ErrorCode::LimitExceeded,
                format!("{what} carries at most {max} messages"),
            ));
        }
        messages
            .into_iter()
            .map(MessageInput::into_message)
            .collect()
    }

    /// Whether both stores answer: counts a probe thread and loads a probe session.
    ///
    /// # Errors
    /// The stores' errors (typically [`ErrorCode::Unavailable`]).
    pub async fn ready(&self) -> OpResult<()> {
        let tenant = TenantId::new(agent_memory::scope::DEFAULT_TENANT).map_err(invalid)?;
        let scope = Scope::new(tenant, SessionId::new("readyz-probe").map_err(invalid)?);
        self.stores.history.count(&scope).await?;
        self.stores.sessions.load(&scope).await?;
        Ok(())
    }
}
