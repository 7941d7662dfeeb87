//! [`SwiftideHistory`]: swiftide's [`MessageHistory`] over any [`HistoryStore`].

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memory_core::{
    ChatMessage, ChatReducer, Error, HistoryStore, MessageId, Reduction, Result, Scope, SessionId,
    StoredMessage, TenantId, TokenBudgetReducer, UserId, Window,
};
use swiftide_core::MessageHistory;
use swiftide_core::chat_completion::ChatMessage as SwiftMessage;

use crate::convert::{from_swiftide, to_swiftide_all};
use crate::ids::message_id;

/// What [`SwiftideHistory::history`](MessageHistory::history) gives the agent of its thread.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum HistoryWindow {
    /// Every active message (the default).
    #[default]
    All,
    /// The newest whole groups (a tool call with its results, a user turn) whose stored token
    /// counts fit the budget, after the leading system message, which is always kept
    /// ([`TokenBudgetReducer`]). Like every window here, it is applied to the active messages
    /// read whole (the reducers need the groups); swiftide's `overwrite`, which archives, keeps
    /// the active part of a long thread short.
    TokenBudget(u64),
    /// What a reducer keeps of the active messages (its view; the store is not changed).
    Reducer(Arc<dyn ChatReducer>),
}

/// A swiftide agent's message history kept in a [`HistoryStore`], in the thread of one
/// [`Scope`] that the application chooses (tenant and user included).
///
/// Give it to swiftide's `DefaultContext::with_message_history` (or
/// `AgentBuilder::message_history`); every process that opens the same store and scope
/// continues the same conversation.
///
/// # Behavior
/// - [`history`](MessageHistory::history) reads the thread's active messages and returns what
///   the [`HistoryWindow`] keeps, in order, in swiftide's form. A stored message swiftide cannot
///   express (see [`convert`](crate::convert)) is an error, never approximated.
/// - [`push`](MessageHistory::push) and [`extend`](MessageHistory::extend) append, as one
///   batch, under ids derived from the messages (see below), so pushing again what was just
///   stored (a retry after a lost answer) stores nothing: a system message or a message with
///   tool calls or a tool output is stored once per thread; any other message is stored again
///   only when it follows another message than the first time.
/// - [`overwrite`](MessageHistory::overwrite) keeps the longest common prefix of the thread's
///   active messages and the given ones, archives the rest of the active messages (they stay
///   stored and readable: [`archived`](Self::archived)) and appends the rest of the given
///   ones. Nothing is deleted. A store without
///   [`archive`](memory_core::HistoryCapabilities::archive) refuses an overwrite that would
///   replace messages, with [`Unsupported`](memory_core::ErrorKind::Unsupported), and changes
///   nothing.
/// - Errors are [`memory_core::Error`]s inside swiftide's `anyhow::Error` (downcast to read the
///   [`ErrorKind`](memory_core::ErrorKind)).
///
/// swiftide's `DefaultContext` finds the messages added since its last completion by the
/// length of the list `history` returned then. A window that drops as many older messages as
/// were added would hide the new ones (the agent would stop before sending a tool's output),
/// so when a read's list would be exactly as long as the previous read's while messages were
/// added, it keeps what the previous read kept, once, even over the window. A shorter list is
/// safe: swiftide then starts again from the list's beginning (and logs a warning). The guard
/// knows the reads of this value only (a clone starts afresh): give each agent its own.
pub struct SwiftideHistory {
    store: Arc<dyn HistoryStore>,
    scope: Scope,
    window: HistoryWindow,
    /// What the last [`read`](Self::read) returned (each agent's own: a clone starts afresh).
    last_view: Mutex<Option<LastView>>,
}

/// The length and bounds of the list a read returned.
#[derive(Debug, Clone, Copy)]
struct LastView {
    /// How many messages it had.
    len: usize,
    /// The sequence number of its first stored message after the pinned one.
    first_seq: u64,
    /// The thread's last sequence number when it was read.
    last_seq: u64,
}

impl Clone for SwiftideHistory {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            scope: self.scope.clone(),
            window: self.window.clone(),
            last_view: Mutex::new(None),
        }
    }
}

impl fmt::Debug for SwiftideHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwiftideHistory")
            .field("scope", &self.scope)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl SwiftideHistory {
    /// The history of `session` of `user` in `tenant`, read whole ([`HistoryWindow::All`]).
    pub fn new(
        store: Arc<dyn HistoryStore>,
        tenant: TenantId,
        user: UserId,
        session: SessionId,
    ) -> Self {
        let scope = Scope::new(tenant, session);
        let scope = scope.with_user_id(user);
        Self {
            store,
            scope,
            window: HistoryWindow::All,
            last_view: Mutex::new(None),
        }
    }

    /// The history of the thread of `scope`.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when `scope` names no user: a
    /// conversation belongs to a user, and none is assumed.
    pub fn for_scope(store: Arc<dyn HistoryStore>, scope: Scope) -> Result<Self> {
        if scope.user().is_none() {
            return Err(Error::invalid_input(
                "A swiftide history needs a scope that names its user.",
            ));
        }
        Ok(Self {
            store,
            scope,
            window: HistoryWindow::All,
            last_view: Mutex::new(None),
        })
    }

    /// Replaces the window [`history`](MessageHistory::history) applies.
    #[must_use]
    pub fn with_window(mut self, window: HistoryWindow) -> Self {
        self.window = window;
        self
    }

    /// Keeps the newest whole groups within `budget` tokens ([`HistoryWindow::TokenBudget`]).
    #[must_use]
    pub fn with_token_budget(self, budget: u64) -> Self {
        self.with_window(HistoryWindow::TokenBudget(budget))
    }

    /// Gives the agent what `reducer` keeps ([`HistoryWindow::Reducer`]).
    #[must_use]
    pub fn with_reducer(self, reducer: Arc<dyn ChatReducer>) -> Self {
        self.with_window(HistoryWindow::Reducer(reducer))
    }

    /// The thread's scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn HistoryStore> {
        &self.store
    }

    /// The messages the window keeps, in swiftide's form.
    ///
    /// # Errors
    /// The store's errors; [`Unsupported`](memory_core::ErrorKind::Unsupported) for a stored
    /// message swiftide cannot express.
    pub async fn read(&self) -> Result<Vec<SwiftMessage>> {
        let stored = self.store.read(&self.scope, Window::All).await?;
        let reduction = match &self.window {
            HistoryWindow::All => Reduction::keep_all(),
            HistoryWindow::TokenBudget(budget) => {
                TokenBudgetReducer::new(*budget).reduce(&stored).await?
            }
            HistoryWindow::Reducer(reducer) => reducer.reduce(&stored).await?,
        };
        let thread_last = stored.last().map_or(0, |m| m.seq);
        let first_kept = stored
            .iter()
            .enumerate()
            .find(|(i, _)| Some(*i) != reduction.pinned && !reduction.is_dropped(*i))
            .map_or(thread_last.saturating_add(1), |(_, m)| m.seq);
        let mut view = reduction.view(&stored);
        let mut last = self
            .last_view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut first_seq = first_kept;
        if let Some(previous) = *last {
            // swiftide's DefaultContext finds new messages by the length of this list: a
            // window that dropped as many messages as were added would hide them (the agent
            // would stop before sending a tool's output). Keep what the last view kept, once.
            if view.len() == previous.len && thread_last > previous.last_seq {
                view = stored
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| Some(*i) == reduction.pinned || m.seq >= previous.first_seq)
                    .map(|(_, m)| ChatMessage::clone(&m.message))
                    .collect();
                first_seq = previous.first_seq;
            }
        }
        *last = Some(LastView {
            len: view.len(),
            first_seq,
            last_seq: thread_last,
        });
        drop(last);
        to_swiftide_all(&view)
    }

    /// The thread's archived messages (what overwrites replaced), oldest first, in swiftide's
    /// form.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn archived(&self) -> Result<Vec<SwiftMessage>> {
        let everything = self.store.read(&self.scope, Window::Everything).await?;
        let archived: Vec<StoredMessage> = everything.into_iter().filter(|m| m.archived).collect();
        to_swiftide_all(&archived)
    }

    /// Appends `items` after the thread's active messages, under derived ids.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn append(&self, items: &[SwiftMessage]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let n = items.len();
        let tail = self
            .store
            .read(&self.scope, Window::Last(n.saturating_add(1)))
            .await?;
        let archived = self.store.count(&self.scope).await?.archived;
        // A retry of the append that wrote the thread's tail: the last `n` messages are these,
        // under the ids they got after the message before them.
        let before_tail = tail.len().checked_sub(n).filter(|k| *k <= 1);
        if let Some(k) = before_tail {
            let previous = tail
                .first()
                .filter(|_| k == 1)
                .map(|m| m.message.id.clone());
            let batch = self.batch(items, previous, archived)?;
            let stored_ids = tail.iter().skip(k).map(|m| &m.message.id);
            if batch.iter().map(|m| &m.id).eq(stored_ids) {
                self.store.append(&self.scope, &batch).await?;
                return Ok(());
            }
        }
        let previous = tail.last().map(|m| m.message.id.clone());
        let batch = self.batch(items, previous, archived)?;
        self.store.append(&self.scope, &batch).await?;
        Ok(())
    }

    /// Our messages for `items`, each under the id derived from it and the one before it.
    fn batch(
        &self,
        items: &[SwiftMessage],
        mut previous: Option<MessageId>,
        archived: u64,
    ) -> Result<Vec<ChatMessage>> {
        let mut batch = Vec::with_capacity(items.len());
        for item in items {
            let id = message_id(item, previous.as_ref(), archived)?;
            batch.push(from_swiftide(item).with_id(id.clone()));
            previous = Some(id);
        }
        Ok(batch)
    }

    /// Replaces the active messages with `items`, archiving what it replaces.
    ///
    /// # Errors
    /// The store's errors; [`Unsupported`](memory_core::ErrorKind::Unsupported) when messages
    /// would be replaced and the store cannot archive.
    pub async fn replace(&self, items: &[SwiftMessage]) -> Result<()> {
        let active = self.store.read(&self.scope, Window::All).await?;
        let keep = active
            .iter()
            .zip(items)
            .take_while(|(stored, item)| same_content(stored, item))
            .count();
        if let (Some(first), Some(last)) = (active.get(keep), active.last()) {
            if !self.store.capabilities().archive {
                return Err(Error::unsupported(
                    "This store cannot archive, so a swiftide overwrite, which archives the \
                     messages it replaces, cannot be kept in it.",
                ));
            }
            self.store
                .archive(&self.scope, first.seq..=last.seq)
                .await?;
        }
        let rest = items.get(keep..).unwrap_or_default();
        if rest.is_empty() {
            return Ok(());
        }
        let previous = keep
            .checked_sub(1)
            .and_then(|i| active.get(i))
            .map(|m| m.message.id.clone());
        let archived = self.store.count(&self.scope).await?.archived;
        let batch = self.batch(rest, previous, archived)?;
        self.store.append(&self.scope, &batch).await?;
        Ok(())
    }
}

/// Whether the stored message says what `item` says (ids and times aside).
fn same_content(stored: &StoredMessage, item: &SwiftMessage) -> bool {
    let ours = from_swiftide(item);
    stored.message.role == ours.role
        && stored.message.parts == ours.parts
        && stored.message.metadata == ours.metadata
        && stored.message.author_name.is_none()
}

fn to_anyhow(error: Error) -> anyhow::Error {
    anyhow::Error::new(error)
}

#[async_trait]
impl MessageHistory for SwiftideHistory {
    async fn history(&self) -> anyhow::Result<Vec<SwiftMessage>> {
        self.read().await.map_err(to_anyhow)
    }

    async fn push_owned(&self, item: SwiftMessage) -> anyhow::Result<()> {
        self.append(std::slice::from_ref(&item))
            .await
            .map_err(to_anyhow)
    }

    async fn push(&self, item: &SwiftMessage) -> anyhow::Result<()> {
        self.append(std::slice::from_ref(item))
            .await
            .map_err(to_anyhow)
    }

    async fn extend(&self, items: &[SwiftMessage]) -> anyhow::Result<()> {
        self.append(items).await.map_err(to_anyhow)
    }

    async fn extend_owned(&self, items: Vec<SwiftMessage>) -> anyhow::Result<()> {
        self.append(&items).await.map_err(to_anyhow)
    }

    async fn overwrite(&self, items: Vec<SwiftMessage>) -> anyhow::Result<()> {
        self.replace(&items).await.map_err(to_anyhow)
    }
}
