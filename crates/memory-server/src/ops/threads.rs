//! The thread operations: append, read, count, archive, clear, list.

use std::ops::RangeInclusive;

use agent_memory::{Scope, Window};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::messages::{AppendView, MessageInput, MessageView};
use super::{Address, Ops, page_request};
use crate::auth::Principal;
use crate::error::{OpError, OpResult};

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

impl Ops {
    /// Appends `messages` to the thread, atomically; messages whose ids the thread holds are
    /// not stored again (their seqs are returned).
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an empty batch or an invalid message;
    /// [`ErrorCode::LimitExceeded`](crate::ErrorCode::LimitExceeded) for more messages than the limit or an oversized message;
    /// the store's errors.
    pub async fn append(
        &self,
        who: &Principal,
        address: &Address,
        messages: Vec<MessageInput>,
    ) -> OpResult<AppendView> {
        let scope = self.scope(who, address)?;
        let messages = self.batch(messages, "an append")?;
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
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an empty range; [`ErrorCode::Unsupported`](crate::ErrorCode::Unsupported) on a store
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
        let cleared = self.stores.history.clear(&scope).await?;
        self.forget_vector_memory(&scope).await?;
        Ok(cleared)
    }

    /// Lists the caller's threads matching `request`, a page at a time.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an invalid filter, limit or cursor; the store's errors.
    pub async fn list_threads(&self, who: &Principal, request: ListRequest) -> OpResult<ScopePage> {
        let filter = self.filter(who, &request)?;
        let page = page_request(request.limit, request.cursor)?;
        let page = self.stores.history.list_threads(&filter, page).await?;
        Ok(ScopePage {
            items: page.items.iter().map(ScopeView::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
