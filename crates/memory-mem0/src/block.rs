//! [`Mem0MemoryBlock`]: Mem0 as a long-term block of a `memory_core::Memory`.

use async_trait::async_trait;
use memory_core::memory::{
    BlockContent, BlockGetContext, BlockPutContext, MemoryBlock, truncate_lines,
};
use memory_core::{Result, Scope, TokenCounter};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::client::Mem0Client;
use crate::on_error::OnError;
use crate::provider::DEFAULT_TOP_K;
use crate::render::{block_lines, query_text};
use crate::request::{AddRequest, Mem0Message, SearchRequest};
use crate::scope::Mem0Scope;
use crate::search_builders::search_builders;
use crate::state::Mem0SessionState;

/// The block's name by default.
pub const DEFAULT_BLOCK_NAME: &str = "mem0_memory";
/// The metadata key of the first sequence number of the batch a memory came from.
pub const FIRST_SEQ_KEY: &str = "agent_memory_first_seq";
/// The metadata key of the last sequence number of the batch a memory came from.
pub const LAST_SEQ_KEY: &str = "agent_memory_last_seq";
/// The metadata key of the batch a memory came from: `<session>#<block>#<first>-<last>`.
pub const BATCH_KEY: &str = "agent_memory_batch";

/// Mem0 inside a [`Memory`](memory_core::Memory): flushed short-term messages go to Mem0,
/// and the memories Mem0 recalls for the recent messages are shown in the block's section.
///
/// - [`put`](MemoryBlock::put) sends the user and assistant text of a flushed batch to Mem0
///   once, under the **storage scope**, with the batch's sequence range as metadata
///   ([`FIRST_SEQ_KEY`], [`LAST_SEQ_KEY`], [`BATCH_KEY`]).
/// - [`get`](MemoryBlock::get) searches Mem0 once with the text of the last
///   [`with_retrieval_context_window`](Self::with_retrieval_context_window) messages, within the
///   **search scope** (none set: nothing is searched), and renders the memories as
///   `- <memory>` lines, best first. Truncation drops the last lines first.
///
/// The scopes are kept in the block's per-session state, as the provider keeps them (see
/// [`Mem0SessionState`]).
///
/// Both scopes are filed under the tenant of the `Memory`'s scope (see
/// [Tenants](Mem0Scope#tenants)): the same user id in two tenants names two Mem0 users. A scope
/// that names another tenant itself is refused with `InvalidInput`.
///
/// # Delivery: at least once
/// A failed add fails the `put` whatever [`OnError`] says, so `Memory` keeps the batch and
/// hands it again on the next `put_messages` or `flush`: a batch Mem0 did not take is never
/// lost. The add is not retried after a timeout within one `put` (memory-http treats it as not
/// idempotent; Mem0's API has no idempotency key), but an add that timed out may still have
/// been stored, and the later `put` sends the batch again: a batch may reach Mem0 **twice**.
/// A flush that loses a race on the block states is redone too, with the same effect.
///
/// Mem0 does not deduplicate by metadata: the platform's v3 add is additive (it never updates
/// or deletes), so a resent batch can leave near-duplicate memories; the self-hosted server's
/// extraction compares new facts with the scope's existing memories and usually answers `NONE`
/// for known ones, without guaranteeing it. Memories of a resent batch carry the same
/// [`BATCH_KEY`], so they can be found with `Filters::metadata(BATCH_KEY, …)` and removed.
///
/// # Failures
/// With [`OnError::Degrade`] (the default), a failed search leaves the block empty (a warning
/// names it) and the run goes on. A failed add always fails the `put`, and with it the flush
/// (see above). With [`OnError::Fail`], a failed search fails the `get` too.
///
/// # Forgetting
/// [`forget`](Self::forget) deletes every memory of a session's storage scope.
#[derive(Debug, Clone)]
pub struct Mem0MemoryBlock {
    client: Mem0Client,
    defaults: Mem0SessionState,
    name: String,
    priority: u32,
    top_k: u32,
    on_error: OnError,
    retrieval_context_window: usize,
}

impl Mem0MemoryBlock {
    /// A block named `mem0_memory`, priority 2, that stores under `storage_scope`, searches
    /// nothing until [`with_search_scope`](Self::with_search_scope) is set, and recalls at most 10
    /// memories for the last 5 messages.
    pub fn new(client: Mem0Client, storage_scope: Mem0Scope) -> Self {
        Self {
            client,
            defaults: Mem0SessionState::new(storage_scope, None),
            name: DEFAULT_BLOCK_NAME.to_owned(),
            priority: 2,
            top_k: DEFAULT_TOP_K,
            on_error: OnError::default(),
            retrieval_context_window: 5,
        }
    }

    search_builders!();

    memory_core::__memory_block_builders!();

    /// Sets how many recent messages form the search query (at least 1; default 5).
    pub fn with_retrieval_context_window(mut self, messages: usize) -> Self {
        self.retrieval_context_window = messages.max(1);
        self
    }

    /// Deletes every memory this block stored for a session: the storage scope of the block's
    /// `state` for that session (the block's default storage scope when `state` is `null`), in
    /// the tenant of `scope`, through Mem0's delete-all endpoint
    /// ([`Mem0Client::delete_all`]). Memories filed under other scopes, such as a wider search
    /// scope, are left alone.
    ///
    /// [`OnError`] does not apply: a failure is returned.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed state or a scope of another tenant; the errors of
    /// [`Mem0Client::delete_all`].
    pub async fn forget(&self, scope: &Scope, state: &Value) -> Result<()> {
        let state = Mem0SessionState::resolve(state, &self.defaults)?;
        let storage = state.storage_scope.in_tenant(scope.tenant())?;
        self.client
            .delete_all(&storage)
            .instrument(tracing::debug_span!("mem0.block.forget", block = %self.name))
            .await
    }
}

#[async_trait]
impl MemoryBlock for Mem0MemoryBlock {
    memory_core::__memory_block_name_and_priority!();

    /// [`Memory::reset`](memory_core::memory::Memory::reset) deletes what the block stored
    /// for this session only: when the session's storage scope names a run (`run_id`), its
    /// memories are deleted ([`Mem0MemoryBlock::forget`]); a storage scope without a run (a
    /// user's or an agent's memories, shared by all their sessions) is long-term memory that
    /// outlives a session, and a reset of one session leaves it alone. Call
    /// [`Mem0MemoryBlock::forget`] to erase such a scope on purpose.
    async fn forget(&self, scope: &Scope, state: &Value) -> Result<()> {
        let resolved = Mem0SessionState::resolve(state, &self.defaults)?;
        if resolved.storage_scope.run_id().is_none() {
            tracing::debug!(
                block = %self.name,
                "mem0.block.forget: the storage scope is shared by other sessions; kept"
            );
            return Ok(());
        }
        Mem0MemoryBlock::forget(self, scope, state).await
    }

    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        let empty = || BlockContent::Text(String::new());
        let state = Mem0SessionState::resolve(context.state, &self.defaults)?;
        let Some(scope) = state.search_scope else {
            return Ok(empty());
        };
        let scope = scope.in_tenant(context.scope.tenant())?;
        let recent = context
            .messages
            .get(
                context
                    .messages
                    .len()
                    .saturating_sub(self.retrieval_context_window)..,
            )
            .unwrap_or_default();
        let query = query_text(recent);
        if query.is_empty() {
            return Ok(empty());
        }
        let request = SearchRequest::new(query, scope).with_top_k(self.top_k);
        match self
            .client
            .search(&request)
            .instrument(tracing::debug_span!("mem0.block.search", block = %self.name))
            .await
        {
            Ok(records) => Ok(BlockContent::Text(block_lines(&records).join("\n"))),
            Err(error) => self
                .on_error
                .handle(error, &self.name, "search")
                .map(|_: Option<()>| empty()),
        }
    }

    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        let state = Mem0SessionState::resolve(context.state, &self.defaults)?;
        *context.state = state.to_value();
        let (Some(first), Some(last)) = (context.messages.first(), context.messages.last()) else {
            return Ok(());
        };
        let (first_seq, last_seq) = (first.seq, last.seq);
        let messages: Vec<Mem0Message> = context
            .messages
            .iter()
            .filter_map(|m| Mem0Message::from_chat(&m.message))
            .collect();
        if messages.is_empty() {
            return Ok(());
        }
        let batch = format!(
            "{}#{}#{first_seq}-{last_seq}",
            context.scope.session_id(),
            self.name
        );
        let storage = state.storage_scope.in_tenant(context.scope.tenant())?;
        let request = AddRequest::new(storage, messages)
            .with_metadata(FIRST_SEQ_KEY, json!(first_seq))
            .with_metadata(LAST_SEQ_KEY, json!(last_seq))
            .with_metadata(BATCH_KEY, batch.clone());
        match self
            .client
            .add(&request)
            .instrument(tracing::debug_span!("mem0.block.add", block = %self.name, %batch))
            .await
        {
            Ok(_) => Ok(()),
            // Never degraded: the batch stays with `Memory`, which hands it again later.
            Err(error) => {
                tracing::warn!(
                    block = %self.name,
                    kind = error.kind().as_str(),
                    %error,
                    "Mem0 add of batch {batch} failed; the batch is kept and sent again by a later flush"
                );
                Err(error)
            }
        }
    }

    async fn truncate(
        &self,
        content: BlockContent,
        excess_tokens: u64,
        counter: &dyn TokenCounter,
    ) -> Result<Option<BlockContent>> {
        Ok(truncate_lines(&content, excess_tokens, counter))
    }
}
