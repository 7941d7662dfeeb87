//! [`RigMemory`]: rig's [`ConversationMemory`] over any [`HistoryStore`].

use std::fmt;
use std::sync::Arc;

use memory_core::{
    ChatMessage, ChatReducer, Error, HistoryStore, Result, Role, Scope, StoredMessage, TenantId,
    UserId, Window,
};
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_core::memory::{ConversationMemory, MemoryError};
use rig_core::wasm_compat::WasmBoxedFuture;

use crate::convert::{to_chat_messages, to_rig_messages};
use crate::scope_mapper::{ScopeMapper, UserScopes};

/// The window [`RigMemory`] reads unless told otherwise: the newest messages whose stored
/// token counts fit in 30,000 tokens (the default of agent-memory's own `Agent`).
pub const DEFAULT_WINDOW: Window = memory_core::DEFAULT_WINDOW;

/// agent-memory as rig's conversation memory: each rig conversation is a thread of a
/// [`HistoryStore`] (SQLite, PostgreSQL, MySQL, Redis, in memory, or any layer over them).
///
/// # Behavior
/// - **Scopes.** A conversation id maps to a thread's [`Scope`] through the
///   [`ScopeMapper`] given at construction; there is no default tenant or user.
/// - **load** reads the thread's window ([`DEFAULT_WINDOW`] unless
///   [`window`](RigMemoryBuilder::window) says otherwise), leaves out tool results at its
///   start whose call fell out of the window, applies the
///   [`reducer`](RigMemoryBuilder::reducer) if one is set (the view only: the store is not
///   changed), and converts the messages to rig's (see [`convert`](crate::convert)). An empty
///   or unknown thread loads as no messages.
/// - **append** converts rig's messages and appends them in one atomic append: the batch lands
///   whole or not at all. Each message gets a new id, so an append rig repeats is stored twice
///   (rig does not retry appends).
/// - **clear** archives the thread's active messages; nothing is deleted, and the archived
///   messages stay readable with `Window::Everything` (for audit, export, or a memory block).
///   A store without archive (`HistoryCapabilities::archive` off) answers `Unsupported`.
/// - Errors reach rig as [`MemoryError::Backend`] holding the typed [`Error`] (a reducer's
///   error as [`MemoryError::Policy`]); nothing panics on what a store returns.
pub struct RigMemory {
    store: Arc<dyn HistoryStore>,
    mapper: Arc<dyn ScopeMapper>,
    window: Window,
    reducer: Option<Arc<dyn ChatReducer>>,
}

/// Builds a [`RigMemory`].
pub struct RigMemoryBuilder {
    memory: RigMemory,
}

impl RigMemory {
    /// A memory for the conversations of `user` in `tenant`: the conversation id is the
    /// session id, so it must be a valid session id (1–128 characters from the key-safe
    /// set); use [`with_mapper`](Self::with_mapper) for any other mapping.
    pub fn builder(
        store: Arc<dyn HistoryStore>,
        tenant: TenantId,
        user: UserId,
    ) -> RigMemoryBuilder {
        Self::with_mapper(store, UserScopes::new(tenant, user))
    }

    /// A memory whose conversation ids map to scopes through `mapper` (a [`ScopeMapper`] or a
    /// closure `Fn(&ConversationId) -> Result<Scope>`).
    pub fn with_mapper(store: Arc<dyn HistoryStore>, mapper: impl ScopeMapper) -> RigMemoryBuilder {
        RigMemoryBuilder {
            memory: Self {
                store,
                mapper: Arc::new(mapper),
                window: DEFAULT_WINDOW,
                reducer: None,
            },
        }
    }

    /// The scope of `conversation`'s thread.
    pub fn scope(&self, conversation: &ConversationId) -> Result<Scope> {
        self.mapper.scope(conversation)
    }

    /// The history store.
    pub fn store(&self) -> &Arc<dyn HistoryStore> {
        &self.store
    }

    /// What [`ConversationMemory::load`] returns, with agent-memory's typed error.
    pub async fn load_messages(&self, conversation: &ConversationId) -> Result<Vec<Message>> {
        self.load_checked(conversation)
            .await
            .map_err(Failure::into_error)
    }

    async fn load_checked(
        &self,
        conversation: &ConversationId,
    ) -> std::result::Result<Vec<Message>, Failure> {
        let scope = self.scope(conversation).map_err(Failure::Backend)?;
        let view = self.view(&scope).await?;
        to_rig_messages(&view).map_err(Failure::Backend)
    }

    /// The messages the model sees, as agent-memory messages: the window without leading
    /// orphaned tool results, reduced.
    async fn view(&self, scope: &Scope) -> std::result::Result<Vec<ChatMessage>, Failure> {
        let mut window = self
            .store
            .read(scope, self.window)
            .await
            .map_err(Failure::Backend)?;
        let orphans = window
            .iter()
            .take_while(|m| m.message.role == Role::Tool)
            .count();
        if orphans > 0 {
            window.drain(..orphans);
        }
        let Some(reducer) = &self.reducer else {
            return Ok(into_messages(window));
        };
        let reduction = reducer.reduce(&window).await.map_err(Failure::Policy)?;
        if reduction.is_noop() {
            Ok(into_messages(window))
        } else {
            Ok(reduction.view(&window))
        }
    }

    /// What [`ConversationMemory::append`] does, with agent-memory's typed error: returns the
    /// sequence numbers the store gave the messages.
    pub async fn append_messages(
        &self,
        conversation: &ConversationId,
        messages: &[Message],
    ) -> Result<Vec<u64>> {
        let scope = self.scope(conversation)?;
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let batch = to_chat_messages(messages)?;
        Ok(self.store.append(&scope, &batch).await?.seqs)
    }

    /// What [`ConversationMemory::clear`] does, with agent-memory's typed error: archives
    /// every active message of the thread and returns how many it archived.
    pub async fn archive_conversation(&self, conversation: &ConversationId) -> Result<u64> {
        let scope = self.scope(conversation)?;
        if !self.store.capabilities().archive {
            return Err(Error::unsupported(
                "this history store cannot archive, and the rig adapter clears a conversation \
                 by archiving it (nothing is deleted)",
            ));
        }
        let count = self.store.count(&scope).await?;
        if count.active == 0 || count.last_seq == 0 {
            return Ok(0);
        }
        self.store.archive(&scope, 1..=count.last_seq).await
    }
}

fn into_messages(window: Vec<StoredMessage>) -> Vec<ChatMessage> {
    window
        .into_iter()
        .map(StoredMessage::into_message)
        .collect()
}

/// Why a load failed: the store or the conversion (rig's backend error), or the reducer (rig's
/// policy error).
enum Failure {
    Backend(Error),
    Policy(Error),
}

impl Failure {
    fn into_error(self) -> Error {
        match self {
            Failure::Backend(e) | Failure::Policy(e) => e,
        }
    }

    fn into_memory_error(self) -> MemoryError {
        match self {
            Failure::Backend(e) => MemoryError::backend(e),
            Failure::Policy(e) => MemoryError::Policy(e.to_string()),
        }
    }
}

impl RigMemoryBuilder {
    /// The window read on load (default [`DEFAULT_WINDOW`]).
    pub fn window(mut self, window: Window) -> Self {
        self.memory.window = window;
        self
    }

    /// A reducer applied to the window on load (the view only, as
    /// [`ReducerTrigger::BeforeMessagesRetrieval`](memory_core::ReducerTrigger)): for example
    /// [`TokenBudgetReducer`](memory_core::TokenBudgetReducer), which keeps the leading system
    /// message, whole tool groups and the last user turn.
    pub fn reducer(mut self, reducer: Arc<dyn ChatReducer>) -> Self {
        self.memory.reducer = Some(reducer);
        self
    }

    /// The memory.
    pub fn build(self) -> RigMemory {
        self.memory
    }
}

impl fmt::Debug for RigMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RigMemory")
            .field("store", &self.store)
            .field("window", &self.window)
            .field("reducer", &self.reducer)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RigMemoryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RigMemoryBuilder")
            .field("memory", &self.memory)
            .finish()
    }
}

impl ConversationMemory for RigMemory {
    fn load<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, std::result::Result<Vec<Message>, MemoryError>> {
        Box::pin(async move {
            self.load_checked(conversation_id)
                .await
                .map_err(Failure::into_memory_error)
        })
    }

    fn append<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
        messages: Vec<Message>,
    ) -> WasmBoxedFuture<'a, std::result::Result<(), MemoryError>> {
        Box::pin(async move {
            self.append_messages(conversation_id, &messages)
                .await
                .map(|_| ())
                .map_err(MemoryError::backend)
        })
    }

    fn clear<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, std::result::Result<(), MemoryError>> {
        Box::pin(async move {
            self.archive_conversation(conversation_id)
                .await
                .map(|_| ())
                .map_err(MemoryError::backend)
        })
    }
}
