//! The operations of the server, free of any transport: HTTP (and MCP) handlers authenticate,
//! decode their input into these types, call [`Ops`], and encode what it returns.
//!
//! Every operation takes the caller's [`Principal`]: the tenant of every scope comes from it,
//! never from the request, and a token bound to a user can only address that user.

use std::ops::RangeInclusive;
use std::sync::Arc;

use agent_memory::forget::ForgetFilter;
use agent_memory::memory::MemoryBlock;
use agent_memory::{
    AgentId, ChatMessage, ForgetMode, MAX_BATCH_MESSAGES, Memory, MessageId, PageRequest, Part,
    Role, Scope, ScopeFilter, SessionId, SourceId, Stores, TenantId, Window,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ErrorCode, OpError, OpResult};

/// The most items a list returns in one page.
pub const MAX_PAGE_LIMIT: usize = 1_000;
/// The page size of a list that names none.
pub const DEFAULT_PAGE_LIMIT: usize = 100;

/// The limits the operations enforce (the transport enforces the body size itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpsLimits {
    /// The most messages one append may carry (at most [`MAX_BATCH_MESSAGES`]).
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

/// A message to append.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    /// The message id (1–128 of `A-Z a-z 0-9 - _ . : @`). Give one to make retries
    /// idempotent: a message whose id the thread holds is not stored again. Generated when
    /// omitted.
    #[serde(default)]
    pub id: Option<String>,
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    #[schema(value_type = String, example = "user")]
    pub role: Role,
    /// The text: shorthand for one `text` part (give `text` or `parts`).
    #[serde(default)]
    pub text: Option<String>,
    /// The parts, each an object tagged by `type` (docs/format.md).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub parts: Option<Vec<Value>>,
    /// Who wrote it.
    #[serde(default)]
    pub author_name: Option<String>,
    /// When it was created (RFC 3339, UTC); now when omitted.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

impl MessageInput {
    /// A user-role text message with no id.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            id: None,
            role,
            text: Some(text.into()),
            parts: None,
            author_name: None,
            created_at: None,
            metadata: None,
        }
    }

    /// The message it describes.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an invalid id, part or timestamp, or both or neither of
    /// `text` and `parts`.
    pub fn into_message(self) -> OpResult<ChatMessage> {
        let parts = match (self.text, self.parts) {
            (Some(text), None) => vec![Part::Text { text }],
            (None, Some(parts)) => parts
                .into_iter()
                .map(|part| {
                    serde_json::from_value::<Part>(part)
                        .map_err(|e| OpError::invalid(format!("a message part is invalid: {e}")))
                })
                .collect::<OpResult<Vec<_>>>()?,
            _ => {
                return Err(OpError::invalid(
                    "a message needs exactly one of `text` and `parts`",
                ));
            }
        };
        let mut message = ChatMessage::new(self.role, parts);
        if let Some(id) = self.id {
            message.id = MessageId::new(id).map_err(invalid)?;
        }
        message.author_name = self.author_name;
        if let Some(metadata) = self.metadata {
            message.metadata = metadata;
        }
        if let Some(created_at) = self.created_at {
            let mut json = message.to_json_value().map_err(invalid)?;
            if let Some(object) = json.as_object_mut() {
                object.insert("created_at".to_owned(), Value::String(created_at));
            }
            message = ChatMessage::from_json_value(json)
                .map_err(|_| OpError::invalid("`created_at` is not an RFC 3339 UTC timestamp"))?;
        }
        Ok(message)
    }
}

/// A stored message as returned by reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    /// Its position in the thread (1, 2, ...).
    pub seq: u64,
    /// Its token count, counted when it was appended.
    pub tokens: u32,
    /// Whether it was archived out of the active window.
    pub archived: bool,
    /// The message in its versioned JSON form (docs/format.md).
    #[schema(value_type = Object)]
    pub message: Value,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendView {
    /// The seq of each given message, in order (a message already stored keeps its seq).
    pub seqs: Vec<u64>,
    /// How many were new.
    pub inserted: usize,
}

/// Which messages a read returns (at most one of the bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowSpec {
    /// Every active message.
    #[default]
    All,
    /// The last `n` active messages.
    Last(usize),
    /// Active messages after this seq.
    After(u64),
    /// The newest active messages within this many tokens.
    TokenBudget(u64),
    /// Every message, archived ones included.
    Everything,
}

impl From<WindowSpec> for Window {
    fn from(spec: WindowSpec) -> Self {
        match spec {
            WindowSpec::All => Window::All,
            WindowSpec::Last(n) => Window::Last(n),
            WindowSpec::After(seq) => Window::After(seq),
            WindowSpec::TokenBudget(tokens) => Window::TokenBudget(tokens),
            WindowSpec::Everything => Window::Everything,
        }
    }
}

/// A thread's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CountView {
    /// Messages in the active window.
    pub active: u64,
    /// Archived messages.
    pub archived: u64,
    /// Tokens of the active messages.
    pub active_tokens: u64,
    /// The highest seq assigned (0 for an empty thread).
    pub last_seq: u64,
}

/// A thread or session in a listing (the tenant is the caller's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScopeView {
    /// The session id.
    pub session: String,
    /// The user, if any.
    pub user: Option<String>,
    /// The agent, if any.
    pub agent: Option<String>,
    /// The source.
    pub source: String,
}

impl From<&Scope> for ScopeView {
    fn from(scope: &Scope) -> Self {
        Self {
            session: scope.session_id().to_string(),
            user: scope.user().map(ToString::to_string),
            agent: scope.agent().map(ToString::to_string),
            source: scope.source().to_string(),
        }
    }
}

/// A page of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScopePage {
    /// The items.
    pub items: Vec<ScopeView>,
    /// The cursor of the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// What a listing selects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
pub struct ListRequest {
    /// Only this user's (a user-bound token's user when omitted).
    pub user: Option<String>,
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this source's.
    pub source: Option<String>,
    /// Page size (default 100, at most 1000).
    pub limit: Option<usize>,
    /// The cursor a previous page returned.
    pub cursor: Option<String>,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionView {
    /// The state, exactly as saved (any JSON value).
    #[schema(value_type = Value)]
    pub state: Value,
    /// Its version (send it back in `If-Match` to save over it).
    pub version: u64,
}

/// What a forget selects, inside the caller's tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// Only this user's data (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's data.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this session's data.
    #[serde(default)]
    pub session: Option<String>,
    /// Count what would be deleted; delete nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Must be `true` to forget the whole tenant (no user, agent or session named, and a token
    /// bound to no user): an empty body never deletes a tenant by accident.
    #[serde(default)]
    pub everything: bool,
}

/// What one store forgot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StoreReceiptView {
    /// The store (`history`, `sessions`).
    pub store: String,
    /// Scopes that held matching data.
    pub scopes: u64,
    /// Items deleted (or, in a dry run, that would be).
    pub items: u64,
    /// What `items` counts (`messages`, `sessions`).
    pub unit: String,
}

/// The receipt of a forget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ForgetReceiptView {
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// Each store's receipt, in the order they ran.
    pub stores: Vec<StoreReceiptView>,
    /// Items across every store.
    pub total_items: u64,
}

/// The largest `token_limit` a memory request may ask for.
pub const MAX_MEMORY_TOKEN_LIMIT: u64 = 10_000_000;

/// The messages a `Memory` gives a model for a session: the `<memory>` text of its blocks
/// (when it has any) and the short-term window, within the token limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryContextView {
    /// The messages, in their versioned JSON form, in the order to send them.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
}

/// What a `Memory` put did: the messages are appended, then the oldest flushed to the blocks
/// and archived when the window passed its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryPutView {
    /// Messages flushed out of the short-term window.
    pub flushed_messages: usize,
    /// Their tokens.
    pub flushed_tokens: u64,
    /// Block deliveries made.
    pub deliveries: usize,
}

/// The operations over one pair of stores.
#[derive(Debug, Clone)]
pub struct Ops {
    stores: Stores,
    limits: OpsLimits,
    blocks: Vec<Arc<dyn MemoryBlock>>,
}

fn invalid(error: agent_memory::Error) -> OpError {
    OpError::new(ErrorCode::InvalidInput, error.to_string())
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
        }
    }

    /// The same operations, with `blocks` in every session's `Memory` (the memory routes).
    #[must_use]
    pub fn with_memory_blocks(mut self, blocks: Vec<Arc<dyn MemoryBlock>>) -> Self {
        self.blocks = blocks;
        self
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

    /// Appends `messages` to the thread, atomically; messages whose ids the thread holds are
    /// not stored again (their seqs are returned).
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an empty batch or an invalid message;
    /// [`ErrorCode::LimitExceeded`] for more messages than the limit or an oversized message;
    /// the store's errors.
    pub async fn append(
        &self,
        who: &Principal,
        address: &Address,
        messages: Vec<MessageInput>,
    ) -> OpResult<AppendView> {
        let scope = self.scope(who, address)?;
        if messages.is_empty() {
            return Err(OpError::invalid("an append needs at least one message"));
        }
        let max = self.limits.max_messages_per_append.min(MAX_BATCH_MESSAGES);
        if messages.len() > max {
            return Err(OpError::new(
                ErrorCode::LimitExceeded,
                format!("an append carries at most {max} messages"),
            ));
        }
        let messages = messages
            .into_iter()
            .map(MessageInput::into_message)
            .collect::<OpResult<Vec<_>>>()?;
        let outcome = self.stores.history.append(&scope, &messages).await?;
        Ok(AppendView {
            seqs: outcome.seqs,
            inserted: outcome.inserted,
        })
    }

    /// Reads the thread's `window`, in seq order (an unknown thread reads empty).
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn read(
        &self,
        who: &Principal,
        address: &Address,
        window: WindowSpec,
    ) -> OpResult<Vec<MessageView>> {
        let scope = self.scope(who, address)?;
        let stored = self.stores.history.read(&scope, window.into()).await?;
        stored
            .into_iter()
            .map(|m| {
                Ok(MessageView {
                    seq: m.seq,
                    tokens: m.tokens,
                    archived: m.archived,
                    message: m.message.to_json_value()?,
                })
            })
            .collect()
    }

    /// The thread's counts (zeros for an unknown thread).
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn count(&self, who: &Principal, address: &Address) -> OpResult<CountView> {
        let scope = self.scope(who, address)?;
        let count = self.stores.history.count(&scope).await?;
        Ok(CountView {
            active: count.active,
            archived: count.archived,
            active_tokens: count.active_tokens,
            last_seq: count.last_seq,
        })
    }

    /// Archives the active messages with seqs in `seqs`; returns how many it archived.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an empty range; [`ErrorCode::Unsupported`] on a store
    /// without archive; the store's errors.
    pub async fn archive(
        &self,
        who: &Principal,
        address: &Address,
        seqs: RangeInclusive<u64>,
    ) -> OpResult<u64> {
        let scope = self.scope(who, address)?;
        if seqs.is_empty() {
            return Err(OpError::invalid("`from` must not be greater than `to`"));
        }
        Ok(self.stores.history.archive(&scope, seqs).await?)
    }

    /// Deletes every message of the thread; returns how many it deleted.
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn clear(&self, who: &Principal, address: &Address) -> OpResult<u64> {
        let scope = self.scope(who, address)?;
        Ok(self.stores.history.clear(&scope).await?)
    }

    /// Lists the caller's threads matching `request`, a page at a time.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an invalid filter, limit or cursor; the store's errors.
    pub async fn list_threads(&self, who: &Principal, request: ListRequest) -> OpResult<ScopePage> {
        let filter = self.filter(who, &request)?;
        let page = page_request(request.limit, request.cursor)?;
        let page = self.stores.history.list_threads(&filter, page).await?;
        Ok(ScopePage {
            items: page.items.iter().map(ScopeView::from).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// Loads the session, or `None`.
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn load_session(
        &self,
        who: &Principal,
        address: &Address,
    ) -> OpResult<Option<SessionView>> {
        let scope = self.scope(who, address)?;
        Ok(self
            .stores
            .sessions
            .load(&scope)
            .await?
            .map(|s| SessionView {
                state: s.state,
                version: s.version,
            }))
    }

    /// Saves the session's `state` if its stored version is `expected` (`None`: only if it does
    /// not exist); returns the new version.
    ///
    /// # Errors
    /// [`ErrorCode::PreconditionFailed`] when the stored version is another (a stale write);
    /// [`ErrorCode::InvalidInput`] or [`ErrorCode::LimitExceeded`] for a state over the size or
    /// depth limits; the store's errors.
    pub async fn save_session(
        &self,
        who: &Principal,
        address: &Address,
        state: &Value,
        expected: Option<u64>,
    ) -> OpResult<u64> {
        let scope = self.scope(who, address)?;
        match self.stores.sessions.save(&scope, state, expected).await {
            Ok(version) => Ok(version),
            Err(e) if e.kind() == agent_memory::ErrorKind::Conflict => Err(OpError::new(
                ErrorCode::PreconditionFailed,
                match expected {
                    Some(v) => format!(
                        "the session is not at version {v}: another writer saved it, or it does not exist; load it and retry"
                    ),
                    None => {
                        "the session already exists; send its version in If-Match to replace it"
                            .to_owned()
                    }
                },
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the session; returns whether it existed.
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn delete_session(&self, who: &Principal, address: &Address) -> OpResult<bool> {
        let scope = self.scope(who, address)?;
        Ok(self.stores.sessions.delete(&scope).await?)
    }

    /// Lists the caller's sessions matching `request`, a page at a time.
    ///
    /// # Errors
    /// As [`list_threads`](Self::list_threads).
    pub async fn list_sessions(
        &self,
        who: &Principal,
        request: ListRequest,
    ) -> OpResult<ScopePage> {
        let filter = self.filter(who, &request)?;
        let page = page_request(request.limit, request.cursor)?;
        let page = self.stores.sessions.list(&filter, page).await?;
        Ok(ScopePage {
            items: page.items.iter().map(ScopeView::from).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// Deletes (or, in a dry run, counts) every thread and session of the caller's tenant that
    /// `request` selects, and returns the receipt.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an invalid id; [`ErrorCode::Forbidden`] for a user the
    /// token is not bound to; the stores' errors (a failed forget is finished by a rerun).
    pub async fn forget(
        &self,
        who: &Principal,
        request: ForgetRequest,
    ) -> OpResult<ForgetReceiptView> {
        let mut filter = ForgetFilter::tenant(who.tenant.clone());
        if let Some(user) = who.user_for(request.user.as_deref())? {
            filter = filter.with_user(user);
        }
        if let Some(agent) = &request.agent {
            filter = filter.with_agent(AgentId::new(agent.as_str()).map_err(invalid)?);
        }
        if let Some(session) = &request.session {
            filter = filter.with_session(SessionId::new(session.as_str()).map_err(invalid)?);
        }
        if filter.is_whole_tenant() && !request.everything {
            return Err(OpError::invalid(
                "forgetting the whole tenant needs `everything: true`; name a user, agent or \
                 session to forget less",
            ));
        }
        let mode = if request.dry_run {
            ForgetMode::DryRun
        } else {
            ForgetMode::Delete
        };
        let receipt = self.stores.forgetter().forget(&filter, mode).await?;
        Ok(ForgetReceiptView {
            dry_run: request.dry_run,
            total_items: receipt.total_items(),
            stores: receipt
                .stores
                .into_iter()
                .map(|s| StoreReceiptView {
                    store: s.store,
                    scopes: s.scopes,
                    items: s.items,
                    unit: s.unit,
                })
                .collect(),
        })
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

    fn memory(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
    ) -> OpResult<Memory> {
        let scope = self.scope(who, address)?;
        let mut builder = Memory::builder(
            scope,
            Arc::clone(&self.stores.history),
            Arc::clone(&self.stores.sessions),
        );
        if let Some(limit) = token_limit {
            if limit == 0 || limit > MAX_MEMORY_TOKEN_LIMIT {
                return Err(OpError::invalid(format!(
                    "`token_limit` must be between 1 and {MAX_MEMORY_TOKEN_LIMIT}"
                )));
            }
            builder = builder.token_limit(limit);
        }
        for block in &self.blocks {
            builder = builder.block(Arc::clone(block));
        }
        Ok(builder.build()?)
    }

    /// The context a `Memory` gives a model for the session: its blocks' `<memory>` text and
    /// the short-term window within `token_limit` (default 30,000). The memory's short-term
    /// window is the addressed thread itself (the one `append` and `read` address).
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an invalid address or limit; the stores' and blocks'
    /// errors.
    pub async fn memory_context(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
    ) -> OpResult<MemoryContextView> {
        let memory = self.memory(who, address, token_limit)?;
        let messages = memory.get(&[]).await?;
        Ok(MemoryContextView {
            messages: messages
                .iter()
                .map(ChatMessage::to_json_value)
                .collect::<agent_memory::Result<Vec<_>>>()?,
        })
    }

    /// Puts `messages` into the session's `Memory`: appended (idempotent by id), then flushed
    /// to its blocks when the window passed its threshold.
    ///
    /// # Errors
    /// As [`append`](Self::append) and [`memory_context`](Self::memory_context).
    pub async fn memory_put(
        &self,
        who: &Principal,
        address: &Address,
        token_limit: Option<u64>,
        messages: Vec<MessageInput>,
    ) -> OpResult<MemoryPutView> {
        let memory = self.memory(who, address, token_limit)?;
        if messages.is_empty() {
            return Err(OpError::invalid("a put needs at least one message"));
        }
        let max = self.limits.max_messages_per_append.min(MAX_BATCH_MESSAGES);
        if messages.len() > max {
            return Err(OpError::new(
                ErrorCode::LimitExceeded,
                format!("a put carries at most {max} messages"),
            ));
        }
        let messages = messages
            .into_iter()
            .map(MessageInput::into_message)
            .collect::<OpResult<Vec<_>>>()?;
        let report = memory.put_messages(&messages).await?;
        Ok(MemoryPutView {
            flushed_messages: report.messages,
            flushed_tokens: report.tokens,
            deliveries: report.deliveries,
        })
    }
}

/// The source of the thread that keeps a session's facts, beside its history.
pub const FACTS_SOURCE: &str = "facts";

/// A session's memory as [`Ops::recall`] returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecallView {
    /// The facts and the conversation as one text for a prompt: `Facts:` with one `- fact` a
    /// line, then `Conversation:` with one `role: text` a line (each part absent when empty).
    pub context: String,
    /// The session's facts that fit, oldest first.
    pub facts: Vec<MessageView>,
    /// The newest messages of the thread that fit, in seq order.
    pub messages: Vec<MessageView>,
    /// The stored token counts of `facts` and `messages` added up (the text adds its few
    /// framing words).
    pub tokens: u64,
}

fn view(stored: &agent_memory::StoredMessage) -> OpResult<MessageView> {
    Ok(MessageView {
        seq: stored.seq,
        tokens: stored.tokens,
        archived: stored.archived,
        message: stored.message.to_json_value()?,
    })
}

fn role_name(role: Role) -> String {
    serde_json::to_value(role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "message".to_owned())
}

impl Ops {
    /// Remembers `fact` about the session: appends it to the session's facts thread (source
    /// [`FACTS_SOURCE`], the address's user and agent) as a `system` message with
    /// `{"kind": "fact"}` metadata, whose id is derived from the text, so the same fact is
    /// stored once however often it is remembered.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an empty fact or a source other than the facts
    /// thread's; as [`append`](Self::append).
    pub async fn remember_fact(
        &self,
        who: &Principal,
        address: &Address,
        fact: &str,
    ) -> OpResult<AppendView> {
        let fact = fact.trim();
        if fact.is_empty() {
            return Err(OpError::invalid("the fact is empty"));
        }
        if address.source.as_deref().is_some_and(|s| s != FACTS_SOURCE) {
            return Err(OpError::invalid(format!(
                "facts are kept in the `{FACTS_SOURCE}` source; leave `source` out"
            )));
        }
        let address = Address {
            source: Some(FACTS_SOURCE.to_owned()),
            ..address.clone()
        };
        let digest = crate::auth::sha256(fact);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let mut metadata = serde_json::Map::new();
        metadata.insert("kind".to_owned(), Value::String("fact".to_owned()));
        let message = MessageInput {
            id: Some(format!("fact-{hex}")),
            metadata: Some(metadata),
            ..MessageInput::text(Role::System, fact)
        };
        self.append(who, &address, vec![message]).await
    }

    /// The session's memory within `max_tokens` (by stored counts): its newest facts, up to
    /// half the budget, then the newest messages of its thread that fit in the rest, and the
    /// two rendered as one text.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for a zero budget or an address naming the facts source;
    /// as [`scope`](Self::scope); the store's errors.
    pub async fn recall(
        &self,
        who: &Principal,
        address: &Address,
        max_tokens: u64,
    ) -> OpResult<RecallView> {
        if max_tokens == 0 {
            return Err(OpError::invalid("the token budget must be at least 1"));
        }
        if address.source.as_deref() == Some(FACTS_SOURCE) {
            return Err(OpError::invalid(format!(
                "recall a conversation's source, not `{FACTS_SOURCE}`: its facts come with it"
            )));
        }
        let facts_scope = self.scope(
            who,
            &Address {
                source: Some(FACTS_SOURCE.to_owned()),
                ..address.clone()
            },
        )?;
        let scope = self.scope(who, address)?;
        let facts = self
            .stores
            .history
            .read(&facts_scope, Window::TokenBudget(max_tokens / 2))
            .await?;
        let fact_tokens: u64 = facts.iter().map(|m| u64::from(m.tokens)).sum();
        let rest = max_tokens.saturating_sub(fact_tokens);
        let messages = if rest == 0 {
            Vec::new()
        } else {
            self.stores
                .history
                .read(&scope, Window::TokenBudget(rest))
                .await?
        };
        let message_tokens: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
        let mut context = String::new();
        if !facts.is_empty() {
            context.push_str("Facts:\n");
            for fact in &facts {
                context.push_str("- ");
                context.push_str(&fact.message.text());
                context.push('\n');
            }
        }
        if !messages.is_empty() {
            if !context.is_empty() {
                context.push('\n');
            }
            context.push_str("Conversation:\n");
            for m in &messages {
                context.push_str(&role_name(m.message.role));
                context.push_str(": ");
                context.push_str(&m.message.text());
                context.push('\n');
            }
        }
        Ok(RecallView {
            context,
            facts: facts.iter().map(view).collect::<OpResult<_>>()?,
            messages: messages.iter().map(view).collect::<OpResult<_>>()?,
            tokens: fact_tokens.saturating_add(message_tokens),
        })
    }

    /// The messages of the thread whose text contains `query`, ignoring case (a plain
    /// substring match over each message's text parts, not a semantic search), newest first,
    /// at most `limit`; `include_archived` searches archived messages too. The thread is read
    /// whole, so a search costs one read of it.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`] for an empty query or a zero limit; as
    /// [`scope`](Self::scope); the store's errors.
    pub async fn search_text(
        &self,
        who: &Principal,
        address: &Address,
        query: &str,
        limit: usize,
        include_archived: bool,
    ) -> OpResult<Vec<MessageView>> {
        let scope = self.scope(who, address)?;
        let needle = query.trim().to_lowercase();
        if needle.is_empty() {
            return Err(OpError::invalid("the search query is empty"));
        }
        if limit == 0 {
            return Err(OpError::invalid("`limit` must be at least 1"));
        }
        let window = if include_archived {
            Window::Everything
        } else {
            Window::All
        };
        let stored = self.stores.history.read(&scope, window).await?;
        stored
            .iter()
            .rev()
            .filter(|m| m.message.text().to_lowercase().contains(&needle))
            .take(limit)
            .map(view)
            .collect()
    }
}
