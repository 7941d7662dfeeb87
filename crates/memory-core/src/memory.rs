//! [`Memory`]: LlamaIndex's memory — a token-limited short-term window over a
//! [`HistoryStore`] thread, flushed into prioritised long-term [`MemoryBlock`]s.
//!
//! - `put_messages` appends to the thread; when its active tokens pass
//!   `token_limit × chat_history_token_ratio`, the oldest whole messages (at least
//!   `token_flush_size` tokens, a tool call with its results, until the rest starts with a user
//!   message, never the last turn) are handed to every block and then archived, in batches of
//!   `token_flush_size` to under three times that many tokens (whole turns), each exactly once
//!   per block.
//! - `get` returns the `<memory>` text of the blocks and the active messages within
//!   `token_limit`, truncating blocks by priority and then dropping the oldest messages.
//!
//! Token counts come from the store (counted once, on append): `get` tokenizes only the block
//! contents, never the stored history.

mod block;
mod block_fields;
pub mod blocks;
mod provider;
mod recall;
mod render;
mod state;

use std::sync::Arc;

use tracing::Instrument;

pub use block::{
    BlockContent, BlockDiscardContext, BlockGetContext, BlockPutContext, MemoryBlock, block_name,
    truncate_lines, validate_block_name,
};
pub use recall::Recall;
pub use render::{
    InsertMethod, escape_memory_text, render_fact, render_memory, render_message, render_recalled,
};
pub use state::BLOCK_STATE_SOURCE;

use crate::error::{Error, ErrorKind, Result};
use crate::history::{AppendOutcome, CursorRead, HistoryStore, StoredMessage, Window};
use crate::id::SourceId;
use crate::message::{ChatMessage, Role};
use crate::reducer::Segmentation;
use crate::scope::Scope;
use crate::session::SessionStore;
use crate::tokens::{TokenCounter, default_token_counter};

/// How many short-term messages blocks are shown as retrieval context by `get`.
const RETRIEVAL_CONTEXT_MESSAGES: usize = 32;
/// How often a flush is redone after losing a race on the block states.
const FLUSH_ATTEMPTS: usize = 5;

/// The numbers of a [`Memory`], with LlamaIndex's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryConfig {
    /// Tokens of short-term and long-term memory together (30,000).
    pub token_limit: u64,
    /// The share of `token_limit` the short-term messages may use before a flush (0.7).
    pub chat_history_token_ratio: f64,
    /// Tokens flushed at least, once a flush starts, and the size of the batches the blocks are
    /// handed: a flush of more than twice this is several batches cut between turns, each of
    /// at least this many tokens and less than three times this plus one group (3,000).
    pub token_flush_size: u64,
    /// Where the memory text goes.
    pub insert_method: InsertMethod,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            token_limit: 30_000,
            chat_history_token_ratio: 0.7,
            token_flush_size: 3_000,
            insert_method: InsertMethod::System,
        }
    }
}

impl MemoryConfig {
    /// The short-term token count above which a flush starts.
    pub fn flush_threshold(&self) -> u64 {
        (self.token_limit as f64 * self.chat_history_token_ratio) as u64
    }

    fn validate(&self) -> Result<()> {
        if self.token_limit == 0 || self.token_flush_size == 0 {
            return Err(Error::invalid_input(
                "token_limit and token_flush_size must be positive",
            ));
        }
        if !(self.chat_history_token_ratio > 0.0 && self.chat_history_token_ratio <= 1.0) {
            return Err(Error::invalid_input(
                "chat_history_token_ratio must be in (0, 1]",
            ));
        }
        Ok(())
    }
}

/// What a flush did: what this call moved, never what a concurrent flush of the same thread
/// moved (summed over the puts of a thread, `messages` is the count archived by flushes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushReport {
    /// Messages this flush moved out of the short-term window (archived).
    pub messages: usize,
    /// Their stored tokens.
    pub tokens: u64,
    /// Block deliveries made (one per block and batch the block had not taken yet).
    pub deliveries: usize,
}

/// LlamaIndex's `Memory` over any [`HistoryStore`], with its block states in a
/// [`SessionStore`].
///
/// ```
/// use std::sync::Arc;
/// use memory_core::memory::{Memory, blocks::StaticMemoryBlock};
/// use memory_core::{ChatMessage, InMemoryHistoryStore, InMemorySessionStore, Scope};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let memory = Memory::builder(
///     Scope::session("demo-session")?,
///     Arc::new(InMemoryHistoryStore::new()),
///     Arc::new(InMemorySessionStore::new()),
/// )
/// .block(Arc::new(StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.")?))
/// .build()?;
/// memory.put_messages(&[ChatMessage::user("Thanks. Please summarise the incident.")]).await?;
/// let messages = memory.get(&[]).await?;
/// assert_eq!(messages[0].text(), "<memory>\n<core_info>\nThe user is Dana, an SRE.\n</core_info>\n</memory>");
/// assert_eq!(messages.len(), 2);
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Memory {
    scope: Scope,
    history: Arc<dyn HistoryStore>,
    states: Arc<dyn SessionStore>,
    blocks: Vec<Arc<dyn MemoryBlock>>,
    config: MemoryConfig,
    counter: Arc<dyn TokenCounter>,
    source: SourceId,
}

/// Builds a [`Memory`].
#[derive(Debug)]
pub struct MemoryBuilder {
    memory: Memory,
}

impl MemoryBuilder {
    /// Sets all the numbers at once.
    pub fn config(mut self, config: MemoryConfig) -> Self {
        self.memory.config = config;
        self
    }

    /// Sets `token_limit`.
    pub fn token_limit(mut self, tokens: u64) -> Self {
        self.memory.config.token_limit = tokens;
        self
    }

    /// Sets `chat_history_token_ratio`.
    pub fn chat_history_token_ratio(mut self, ratio: f64) -> Self {
        self.memory.config.chat_history_token_ratio = ratio;
        self
    }

    /// Sets `token_flush_size`.
    pub fn token_flush_size(mut self, tokens: u64) -> Self {
        self.memory.config.token_flush_size = tokens;
        self
    }

    /// Sets where the memory text goes.
    pub fn insert_method(mut self, method: InsertMethod) -> Self {
        self.memory.config.insert_method = method;
        self
    }

    /// Adds a block.
    pub fn block(mut self, block: Arc<dyn MemoryBlock>) -> Self {
        self.memory.blocks.push(block);
        self
    }

    /// Replaces the tokenizer used for block contents and input messages (stored messages
    /// carry the counts of the history store's counter: give both the same one).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.memory.counter = counter;
        self
    }

    /// The source id under which the memory runs as a context provider (`memory`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for an invalid id.
    pub fn source_id(mut self, source: impl Into<String>) -> Result<Self> {
        self.memory.source = SourceId::new(source)?;
        Ok(self)
    }

    /// Builds the memory.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for invalid numbers, an invalid block name or two blocks
    /// with one name; [`ErrorKind::Unsupported`] for a history store whose appends move
    /// messages out of the active window themselves
    /// ([`HistoryCapabilities::reduces_on_append`](crate::HistoryCapabilities::reduces_on_append),
    /// a Redis store with `max_messages`): those messages would never reach the blocks; and
    /// for a history store without
    /// [`archive`](crate::HistoryCapabilities::archive) (Agent Framework's Redis list): a flush
    /// would deliver its batch to the blocks and then fail to archive it, every time.
    pub fn build(self) -> Result<Memory> {
        let memory = self.memory;
        memory.config.validate()?;
        if !memory.history.capabilities().archive {
            return Err(Error::unsupported(
                "a memory cannot run over a history store that cannot archive messages (such as \
                 Agent Framework's Redis list): a flush moves the messages it hands to the \
                 memory blocks out of the window by archiving them; use a store with archive",
            ));
        }
        if memory.history.capabilities().reduces_on_append {
            return Err(Error::unsupported(
                "a memory cannot run over a history store whose appends move the oldest \
                 messages out of the active window (a Redis store with max_messages): they \
                 would never reach the memory blocks; use a store without that limit",
            ));
        }
        let mut names = std::collections::HashSet::new();
        for block in &memory.blocks {
            validate_block_name(block.name())?;
            if !names.insert(block.name().to_owned()) {
                return Err(Error::invalid_input(format!(
                    "two memory blocks are named {:?}",
                    block.name()
                )));
            }
        }
        Ok(memory)
    }
}

impl Memory {
    /// Starts building a memory for the session at `scope`, keeping messages in `history` and
    /// block states in `states`.
    pub fn builder(
        scope: Scope,
        history: Arc<dyn HistoryStore>,
        states: Arc<dyn SessionStore>,
    ) -> MemoryBuilder {
        MemoryBuilder {
            memory: Memory {
                scope,
                history,
                states,
                blocks: Vec::new(),
                config: MemoryConfig::default(),
                counter: default_token_counter(),
                source: SourceId::new("memory")
                    .unwrap_or_else(|_| unreachable!("\"memory\" is a valid id")),
            },
        }
    }

    /// The session's scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The numbers.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// Appends `messages` to the short-term memory, then flushes if it passed the threshold.
    ///
    /// # Errors
    /// The store's and the blocks' errors. A block that fails leaves the flush unfinished but
    /// safe: the messages stay in the short-term window, blocks that already took them keep
    /// their mark, and the next `put_messages` or [`flush`](Self::flush) finishes it.
    pub async fn put_messages(&self, messages: &[ChatMessage]) -> Result<FlushReport> {
        Ok(self.put_messages_in(&self.scope, messages).await?.1)
    }

    /// As [`put_messages`](Self::put_messages), returning the append's outcome (each message's
    /// sequence number, how many were new) beside what the flush did, for a caller that
    /// reports both (the server's MCP `remember`).
    ///
    /// # Errors
    /// As [`put_messages`](Self::put_messages).
    pub async fn put_messages_with_outcome(
        &self,
        messages: &[ChatMessage],
    ) -> Result<(AppendOutcome, FlushReport)> {
        self.put_messages_in(&self.scope, messages).await
    }

    /// Appends one message (see [`put_messages`](Self::put_messages)).
    ///
    /// # Errors
    /// As [`put_messages`](Self::put_messages).
    pub async fn put(&self, message: ChatMessage) -> Result<FlushReport> {
        self.put_messages(std::slice::from_ref(&message)).await
    }

    /// Runs the flush check now (after a failed flush, say).
    ///
    /// # Errors
    /// As [`put_messages`](Self::put_messages).
    pub async fn flush(&self) -> Result<FlushReport> {
        self.flush_in(&self.scope).await
    }

    /// The messages to send a model: the `<memory>` text inserted as configured, and the
    /// short-term messages, within `token_limit`. `input` (not stored) is the retrieval context
    /// for the blocks.
    ///
    /// # Errors
    /// The store's and the blocks' errors.
    pub async fn get(&self, input: &[ChatMessage]) -> Result<Vec<ChatMessage>> {
        self.get_in(&self.scope, input).await
    }

    /// Deletes the session's long-term memory and its short-term messages (LlamaIndex's
    /// `reset`): the thread is cleared, then each block [`forget`](MemoryBlock::forget)s what
    /// it keeps outside its state (the vector block's points), then the block states are
    /// deleted.
    ///
    /// The thread goes first so that nothing of it can be flushed again once the blocks
    /// forgot. A reset that fails part-way is safe and is finished by running it again:
    /// - the clear failed: nothing changed;
    /// - a `forget` or the state deletion failed: the thread is empty, and the block states
    ///   (and what a block did not forget yet) stay until the next reset. A thread written
    ///   meanwhile is a new incarnation (its seq-1 message is not the one the states recorded),
    ///   so a flush delivers it from its first message, never judged by an old watermark; what
    ///   the blocks remembered of the old thread stays visible until the reset is re-run.
    ///
    /// A flush running concurrently with a reset may deliver messages the clear is removing;
    /// the blocks' `forget` then removes what it delivered, unless it saved after the state
    /// deletion (reset a session while nothing else writes to it).
    ///
    /// # Errors
    /// The stores' and the blocks' errors; run `reset` again after one.
    pub async fn reset(&self) -> Result<()> {
        let states = match state::load(self.states.as_ref(), &self.scope).await {
            Ok(states) => states,
            Err(e) if e.kind() == ErrorKind::Serialization => {
                tracing::warn!(error = %e, "resetting a memory whose block state cannot be read");
                state::BlockStates::default()
            }
            Err(e) => return Err(e),
        };
        self.history.clear(&self.scope).await?;
        for block in &self.blocks {
            block
                .forget(&self.scope, &states.record(block.name()).state)
                .await?;
        }
        self.states
            .delete(&state::state_scope(&self.scope)?)
            .await?;
        Ok(())
    }

    pub(crate) async fn put_messages_in(
        &self,
        scope: &Scope,
        messages: &[ChatMessage],
    ) -> Result<(AppendOutcome, FlushReport)> {
        let outcome = self.history.append(scope, messages).await?;
        let mut report = self.flush_in(scope).await?;
        let appended_through = outcome.seqs.iter().copied().max().unwrap_or(0);
        let delivered = self.deliver_appended(scope, appended_through).await?;
        report.deliveries = report.deliveries.saturating_add(delivered);
        self.touch_states_after_append(scope, &report).await?;
        Ok((outcome, report))
    }

    /// Hands the blocks that [take messages on append](MemoryBlock::takes_messages_on_append)
    /// the active messages they have not taken yet (after an append that reached seq
    /// `appended_through`), in the batches a flush would cut, without archiving them. Returns
    /// the deliveries made. Reads only the messages after the lowest of their watermarks.
    async fn deliver_appended(&self, scope: &Scope, appended_through: u64) -> Result<usize> {
        if !self.blocks.iter().any(|b| b.takes_messages_on_append()) {
            return Ok(0);
        }
        let states = state::load(self.states.as_ref(), scope).await?;
        let mut from = self
            .blocks
            .iter()
            .filter(|b| b.takes_messages_on_append())
            .map(|b| states.record(b.name()).watermark)
            .min()
            .unwrap_or(0);
        if appended_through <= from {
            // Nothing new past the watermark, unless the thread was re-created (its seqs
            // restarted below the watermark): then it is delivered from its first message.
            if self.history.count(scope).await?.last_seq >= from {
                return Ok(0);
            }
            from = 0;
        }
        // From the watermark's own message, so the incarnation check sees its id.
        let window = self
            .history
            .read(scope, Window::After(from.saturating_sub(1)))
            .await?;
        let fresh_from = window.partition_point(|m| m.seq <= from);
        let fresh = window.get(fresh_from..).unwrap_or_default();
        let mut deliveries = 0usize;
        for batch in flush_batches(fresh, fresh.len(), self.config.token_flush_size) {
            deliveries = deliveries.saturating_add(
                self.deliver(
                    scope,
                    &window,
                    fresh.get(batch).unwrap_or_default(),
                    |block| block.takes_messages_on_append(),
                )
                .await?,
            );
        }
        Ok(deliveries)
    }

    /// After an append: the thread's clock restarted with it; the block states' restarts with
    /// a save, so they would expire first while the thread lives on. A flush that delivered
    /// saved them; otherwise a store whose sessions expire by default gets them saved again (a
    /// store whose sessions only expire after a `set_ttl` call keeps them without this).
    pub(crate) async fn touch_states_after_append(
        &self,
        scope: &Scope,
        report: &FlushReport,
    ) -> Result<()> {
        if report.deliveries == 0 && self.states.capabilities().expires_by_default {
            state::touch(self.states.as_ref(), scope).await?;
        }
        Ok(())
    }

    pub(crate) async fn flush_in(&self, scope: &Scope) -> Result<FlushReport> {
        let count = self.history.count(scope).await?;
        if count.active_tokens <= self.config.flush_threshold() {
            return Ok(FlushReport::default());
        }
        self.flush_over(scope, count.active_tokens).await
    }

    /// Flushes the thread, whose active tokens were found over the threshold (the flush reads
    /// the window again and moves out only what it still finds over).
    pub(crate) async fn flush_over(
        &self,
        scope: &Scope,
        active_tokens: u64,
    ) -> Result<FlushReport> {
        let span = tracing::info_span!(
            "memory.flush",
            otel.status_code = tracing::field::Empty,
            gen_ai.conversation.id = %scope.key(),
            agent_memory.scope.tenant = %scope.tenant(),
            agent_memory.scope.session = %scope.session_id(),
            agent_memory.memory.active_tokens = crate::span_fields::int(active_tokens),
            agent_memory.memory.blocks = crate::span_fields::int(self.blocks.len()),
            agent_memory.flush.messages = tracing::field::Empty,
            agent_memory.flush.tokens = tracing::field::Empty,
            agent_memory.flush.deliveries = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = self.flush_window(scope).instrument(span.clone()).await;
        match &result {
            Ok(report) => {
                span.record(
                    "agent_memory.flush.messages",
                    crate::span_fields::int(report.messages),
                );
                span.record(
                    "agent_memory.flush.tokens",
                    crate::span_fields::int(report.tokens),
                );
                span.record(
                    "agent_memory.flush.deliveries",
                    crate::span_fields::int(report.deliveries),
                );
                if report.messages > 0 {
                    tracing::event!(
                        target: "agent_memory::metrics",
                        parent: None,
                        tracing::Level::DEBUG,
                        monotonic_counter.agent_memory.memory.flushes = 1u64,
                        monotonic_counter.agent_memory.memory.flushed_messages = report.messages,
                        monotonic_counter.agent_memory.memory.flushed_tokens = report.tokens,
                        monotonic_counter.agent_memory.history.archived_messages = report.messages,
                        agent_memory.archive.reason = "flush",
                    );
                }
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", e.kind().as_str());
            }
        }
        result
    }

    /// Moves the oldest messages [`select_flush`] picks out of the window, in batches of whole
    /// turns of `token_flush_size` to under three times that many tokens ([`flush_batches`]), so
    /// a window far over the threshold (many messages appended at once, or by puts that never
    /// flushed) hands the blocks several bounded batches, never one that holds it all.
    async fn flush_window(&self, scope: &Scope) -> Result<FlushReport> {
        let window = self.history.read(scope, Window::All).await?;
        let n = select_flush(
            &window,
            self.config.flush_threshold(),
            self.config.token_flush_size,
        );
        let mut report = FlushReport::default();
        for batch in flush_batches(&window, n, self.config.token_flush_size) {
            let done = self
                .flush_batch(scope, &window, window.get(batch).unwrap_or_default())
                .await?;
            report.messages = report.messages.saturating_add(done.messages);
            report.tokens = report.tokens.saturating_add(done.tokens);
            report.deliveries = report.deliveries.saturating_add(done.deliveries);
        }
        Ok(report)
    }

    /// Hands one batch of the `window` to every block that has not taken it (exactly once per
    /// block: the durable watermark), then archives it. The report counts what this call moved
    /// out of the window: a concurrent flush of the same batch may archive some or all of it
    /// first, and then this one reports only the rest.
    async fn flush_batch(
        &self,
        scope: &Scope,
        window: &[StoredMessage],
        flushed: &[StoredMessage],
    ) -> Result<FlushReport> {
        let (Some(first), Some(last)) = (flushed.first(), flushed.last()) else {
            return Ok(FlushReport::default());
        };
        let (first_seq, last_seq) = (first.seq, last.seq);
        let deliveries = self.deliver(scope, window, flushed, |_| true).await?;
        let moved = self.history.archive(scope, first_seq..=last_seq).await?;
        let moved = usize::try_from(moved)
            .unwrap_or(usize::MAX)
            .min(flushed.len());
        // A concurrent flush moves batches from the oldest, so what is left for this one to
        // move is the newest of the batch.
        let tokens = flushed
            .iter()
            .skip(flushed.len().saturating_sub(moved))
            .map(|m| u64::from(m.tokens))
            .sum();
        tracing::info!(
            messages = moved,
            tokens,
            first_seq,
            last_seq,
            deliveries,
            "flushed short-term messages to the memory blocks and archived them"
        );
        Ok(FlushReport {
            messages: moved,
            tokens,
            deliveries,
        })
    }

    /// Hands `batch` (messages of `window`, oldest first) to every block `chosen` picks that
    /// has not taken them (exactly once per block: the durable watermark, saved with the
    /// block's state in one write; a save that loses a race is discarded and redone from the
    /// winner's state). Returns the deliveries made.
    async fn deliver(
        &self,
        scope: &Scope,
        window: &[StoredMessage],
        batch: &[StoredMessage],
        chosen: impl Fn(&dyn MemoryBlock) -> bool,
    ) -> Result<usize> {
        let mut deliveries = 0usize;
        let mut attempt = 0usize;
        'retry: loop {
            attempt = attempt.saturating_add(1);
            let mut states = state::load(self.states.as_ref(), scope).await?;
            // Counted after the states were loaded: every watermark in them was taken from
            // messages that existed before this count, so in the same incarnation of the thread
            // its last seq is at least every watermark (a count from before the load could be
            // overtaken by another process's append and flush).
            let thread_last_seq = self
                .history
                .count(scope)
                .await?
                .last_seq
                .max(window.last().map_or(0, |m| m.seq));
            check_incarnation(&mut states, window, thread_last_seq);
            for block in self.blocks.iter().filter(|b| chosen(b.as_ref())) {
                let mut record = states.record(block.name());
                let fresh: Vec<StoredMessage> = batch
                    .iter()
                    .filter(|m| m.seq > record.watermark)
                    .cloned()
                    .collect();
                let Some(last) = fresh.last().map(|m| m.seq) else {
                    continue;
                };
                block
                    .put(BlockPutContext {
                        scope,
                        messages: &fresh,
                        state: &mut record.state,
                    })
                    .instrument(tracing::debug_span!(
                        "memory.block.put",
                        block = block.name(),
                        messages = fresh.len()
                    ))
                    .await?;
                record.watermark = last;
                record.watermark_id = fresh.last().map(|m| m.message.id.as_str().to_owned());
                let discarded = record.state.clone();
                states.blocks.insert(block.name().to_owned(), record);
                match state::save(self.states.as_ref(), scope, &mut states).await {
                    Ok(()) => deliveries = deliveries.saturating_add(1),
                    Err(e) if e.kind() == ErrorKind::Conflict => {
                        let current = state::load(self.states.as_ref(), scope).await?;
                        block
                            .discard(BlockDiscardContext {
                                scope,
                                discarded: &discarded,
                                current: &current.record(block.name()).state,
                            })
                            .await?;
                        if attempt >= FLUSH_ATTEMPTS {
                            return Err(e);
                        }
                        tracing::debug!("block states changed under the flush; redoing it");
                        continue 'retry;
                    }
                    Err(e) => return Err(e),
                }
            }
            break;
        }
        Ok(deliveries)
    }

    /// The blocks' contents for `scope`, truncated by priority to fit `budget` tokens.
    async fn block_contents(
        &self,
        scope: &Scope,
        context: &[ChatMessage],
        window_from_seq: Option<u64>,
        budget: u64,
    ) -> Result<Vec<(usize, BlockContent)>> {
        let states = state::load(self.states.as_ref(), scope).await?;
        let mut contents = Vec::new();
        for (i, block) in self.blocks.iter().enumerate() {
            let record = states.record(block.name());
            let content = block
                .get(BlockGetContext {
                    scope,
                    messages: context,
                    state: &record.state,
                    window_from_seq,
                })
                .instrument(tracing::debug_span!(
                    "memory.block.get",
                    block = block.name()
                ))
                .await?;
            if !content.is_empty() {
                contents.push((i, content));
            }
        }
        let mut order: Vec<(usize, &Arc<dyn MemoryBlock>)> = contents
            .iter()
            .filter_map(|(i, _)| self.blocks.get(*i).map(|block| (*i, block)))
            .filter(|(_, block)| block.priority() > 0)
            .collect();
        order.sort_by_key(|(_, block)| std::cmp::Reverse(block.priority()));
        for (block_index, block) in order {
            let used = self.render_tokens(&contents);
            let over = used.saturating_sub(budget);
            if over == 0 {
                break;
            }
            let Some(at) = contents.iter().position(|(i, _)| *i == block_index) else {
                continue;
            };
            let (_, content) = contents.remove(at);
            match block.truncate(content, over, self.counter.as_ref()).await? {
                Some(shorter) if !shorter.is_empty() => contents.insert(at, (block_index, shorter)),
                _ => {}
            }
            tracing::info!(
                block = block.name(),
                over,
                "memory block truncated to fit the token limit"
            );
        }
        Ok(contents)
    }

    fn render(&self, contents: &[(usize, BlockContent)]) -> Option<String> {
        if contents.is_empty() {
            return None;
        }
        let texts: Vec<(String, String)> = contents
            .iter()
            .filter_map(|(i, c)| Some((self.blocks.get(*i)?.name().to_owned(), c.text())))
            .collect();
        Some(render_memory(
            texts.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        ))
    }

    fn render_tokens(&self, contents: &[(usize, BlockContent)]) -> u64 {
        self.render(contents)
            .map_or(0, |t| u64::from(self.counter.count_text(&t)))
    }

    pub(crate) async fn get_in(
        &self,
        scope: &Scope,
        input: &[ChatMessage],
    ) -> Result<Vec<ChatMessage>> {
        let (mut window, view_from, history_tokens) = self.read_for_get(scope).await?;
        let mut context: Vec<ChatMessage> = window
            .iter()
            .skip(window.len().saturating_sub(RETRIEVAL_CONTEXT_MESSAGES))
            .map(|m| ChatMessage::clone(&m.message))
            .collect();
        // What `read_for_get` read before a user message only served the retrieval context.
        window.drain(..view_from);
        context.extend(input.iter().cloned());
        let limit = self.config.token_limit;
        let contents = self
            .block_contents(
                scope,
                &context,
                window.first().map(|m| m.seq),
                limit.saturating_sub(history_tokens),
            )
            .await?;
        let memory_tokens = self.render_tokens(&contents);
        if memory_tokens.saturating_add(history_tokens) > limit {
            let keep_from = drop_oldest_to_fit(&window, limit.saturating_sub(memory_tokens));
            if keep_from > 0 {
                tracing::info!(
                    dropped = keep_from,
                    "short-term messages dropped to fit the token limit"
                );
                window.drain(..keep_from);
            }
        }
        let mut messages: Vec<ChatMessage> = window.into_iter().map(|m| m.into_message()).collect();
        if let Some(text) = self.render(&contents) {
            let attachments = contents.iter().flat_map(|(_, c)| c.attachments()).collect();
            render::insert_memory(&mut messages, text, attachments, self.config.insert_method);
        }
        Ok(messages)
    }
}

impl Memory {
    /// The active messages `get` needs, the index of the first one that may be shown (the rest
    /// before it only serve as retrieval context), and the active window's total tokens (at
    /// least `token_limit + 1` when it is over), read without reading the whole window when it
    /// is over `token_limit`.
    ///
    /// Within the limit, that is every active message. Over it, `get` keeps at most the newest
    /// whole groups within the limit (or the last user turn, whatever its size), so it needs the
    /// newest messages that fit (`Window::TokenBudget`), extended back to a user message (where
    /// a group starts, so the groups cut along are those of the whole window) and to
    /// [`RETRIEVAL_CONTEXT_MESSAGES`] messages for the blocks' retrieval context. The reads
    /// grow geometrically, so they cost O(what is returned).
    async fn read_for_get(&self, scope: &Scope) -> Result<(Vec<StoredMessage>, usize, u64)> {
        let limit = self.config.token_limit;
        // With cursor reads, the newest messages within the limit and the counts come in one
        // round trip (one snapshot): when the thread is within the limit, that window is every
        // active message.
        let (count, within_limit) = match self.read_within_limit(scope, limit).await? {
            Some(answer) => (answer.count, Some(answer.messages)),
            None => (self.history.count(scope).await?, None),
        };
        if count.active_tokens <= limit {
            let window = match within_limit {
                Some(window) => window,
                None => self.history.read(scope, Window::All).await?,
            };
            let tokens = window.iter().map(|m| u64::from(m.tokens)).sum();
            return Ok((window, 0, tokens));
        }
        let fits = match within_limit {
            Some(window) => window.len(),
            None => self
                .history
                .read(scope, Window::TokenBudget(limit))
                .await?
                .len(),
        };
        let mut n = fits.max(RETRIEVAL_CONTEXT_MESSAGES);
        loop {
            let window = self.history.read(scope, Window::Last(n)).await?;
            // Only a short read proves the window whole: `count` may be stale (an append since
            // then makes `n` messages a partial window even when `n >= count.active`).
            let complete = window.len() < n;
            if complete {
                let tokens = window.iter().map(|m| u64::from(m.tokens)).sum();
                return Ok((window, 0, tokens));
            }
            // A user message no later than the first message that fits: every message before
            // it is older than anything `get` can keep, and a group starts there.
            let turn = window
                .iter()
                .take(window.len().saturating_sub(fits).saturating_add(1))
                .position(|m| m.message.role == Role::User);
            if let Some(from) = turn {
                return Ok((
                    window,
                    from,
                    count.active_tokens.max(limit.saturating_add(1)),
                ));
            }
            n = n.saturating_mul(2);
        }
    }
}

impl Memory {
    /// `Window::TokenBudget(limit)` and the thread's counts in one cursor read, when the
    /// history store has them (`None` otherwise: the caller counts and reads).
    async fn read_within_limit(&self, scope: &Scope, limit: u64) -> Result<Option<CursorRead>> {
        if !self.history.capabilities().cursor_reads {
            return Ok(None);
        }
        match self
            .history
            .read_since(scope, Window::TokenBudget(limit), None)
            .await
        {
            Ok(answer) => Ok(Some(answer)),
            // A wrapper that declares cursor reads without forwarding them: read as before.
            Err(e) if e.kind() == ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Voids the watermarks when the thread is not the incarnation they were taken in: seqs restart
/// at 1 after a `clear` or an expiry, so a watermark of the old thread would skip the new
/// thread's first messages. Told apart by message ids: the seq-1 message's id, and the id of
/// each block's watermark message when the window still holds it; and by the thread's last seq
/// (`last_seq`, counted after `states` were loaded, so never older than a watermark in them)
/// being below a watermark. The blocks' states are kept. Then records the thread's seq-1 id
/// when the window starts there.
fn check_incarnation(states: &mut state::BlockStates, window: &[StoredMessage], last_seq: u64) {
    let id_at = |seq: u64| {
        window
            .binary_search_by_key(&seq, |m| m.seq)
            .ok()
            .and_then(|i| window.get(i))
            .map(|m| m.message.id.as_str())
    };
    let first_changed = states
        .thread
        .as_deref()
        .is_some_and(|thread| id_at(1).is_some_and(|id| id != thread));
    let mark_changed = states.blocks.values().any(|r| {
        r.watermark > last_seq
            || r.watermark_id
                .as_deref()
                .is_some_and(|mark| id_at(r.watermark).is_some_and(|id| id != mark))
    });
    if first_changed || mark_changed {
        tracing::info!(
            "the thread was re-created since the memory blocks last took messages; \
             delivering it from its first message"
        );
        for record in states.blocks.values_mut() {
            record.watermark = 0;
            record.watermark_id = None;
        }
        states.thread = None;
    }
    if let Some(id) = id_at(1) {
        states.thread = Some(id.to_owned());
    }
}

/// How many leading messages of the active `window` a flush moves out: nothing while the
/// total is within `threshold`; else whole groups from the oldest until at least `flush_size`
/// tokens are out and the rest is within `threshold`, then more until the rest starts with a
/// user message — never the last user turn.
pub(crate) fn select_flush(window: &[StoredMessage], threshold: u64, flush_size: u64) -> usize {
    let total: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
    if total <= threshold {
        return 0;
    }
    let seg = Segmentation::of(window);
    let mut groups = seg.groups.clone();
    if let Some(p) = seg.pinned {
        groups.insert(0, p..p.saturating_add(1));
    }
    let protected_start = seg.group_start(seg.protected_from, window.len());
    let tokens = |r: &std::ops::Range<usize>| -> u64 {
        window
            .get(r.clone())
            .unwrap_or_default()
            .iter()
            .map(|m| u64::from(m.tokens))
            .sum()
    };
    let mut popped = 0u64;
    let mut end = 0usize;
    let mut next = groups
        .iter()
        .filter(|g| g.end <= protected_start)
        .peekable();
    while let Some(group) = next.peek() {
        if popped >= flush_size && total.saturating_sub(popped) <= threshold {
            break;
        }
        popped = popped.saturating_add(tokens(group));
        end = group.end;
        next.next();
    }
    while let Some(group) = next.peek() {
        if window.get(end).is_none_or(|m| m.message.role == Role::User) {
            break;
        }
        end = group.end;
        next.next();
    }
    end
}

/// The batches a flush of the first `n` messages of `window` hands the blocks, as index
/// ranges in order that together cover `..n`: whole groups (a tool call with its results, the
/// pinned system message), cut where a turn starts (before a user message) once a batch holds
/// `flush_size` tokens and at least `flush_size` are left for the next, or anywhere between
/// groups once it holds twice that (a long stretch without a user message). So a flush of one
/// turn or two is one batch, as it always was, and a flush of much is several, each of at
/// least `flush_size` tokens (but a flush of less, which is one batch) and less than three
/// times that plus one group (the last batch takes what is left when less than `flush_size`
/// would be).
pub(crate) fn flush_batches(
    window: &[StoredMessage],
    n: usize,
    flush_size: u64,
) -> Vec<std::ops::Range<usize>> {
    let seg = Segmentation::of(window);
    let mut groups = seg.groups;
    if let Some(p) = seg.pinned {
        groups.insert(0, p..p.saturating_add(1));
    }
    let tokens = |range: std::ops::Range<usize>| -> u64 {
        window
            .get(range)
            .unwrap_or_default()
            .iter()
            .fold(0u64, |sum, m| sum.saturating_add(u64::from(m.tokens)))
    };
    let mut left = tokens(0..n);
    let mut batches = Vec::new();
    let mut start = 0usize;
    let mut held = 0u64;
    for group in groups.iter().filter(|g| g.end <= n) {
        let size = tokens(group.clone());
        held = held.saturating_add(size);
        left = left.saturating_sub(size);
        let turn_starts = window
            .get(group.end)
            .is_some_and(|m| m.message.role == Role::User);
        let full = held >= flush_size.saturating_mul(2);
        if held >= flush_size && left >= flush_size && (turn_starts || full) {
            batches.push(start..group.end);
            start = group.end;
            held = 0;
        }
    }
    if start < n {
        batches.push(start..n);
    }
    batches
}

/// How many leading messages to drop so the rest fits `budget`, along group boundaries, never
/// into the last user turn.
fn drop_oldest_to_fit(window: &[StoredMessage], budget: u64) -> usize {
    let seg = Segmentation::of(window);
    let protected_start = seg.group_start(seg.protected_from, window.len());
    let mut remaining: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
    let mut cut = 0;
    let mut starts: Vec<std::ops::Range<usize>> = seg.groups.clone();
    if let Some(p) = seg.pinned {
        starts.insert(0, p..p.saturating_add(1));
    }
    for group in starts {
        if remaining <= budget || group.end > protected_start {
            break;
        }
        let group_tokens: u64 = window
            .get(group.clone())
            .unwrap_or_default()
            .iter()
            .map(|m| u64::from(m.tokens))
            .sum();
        remaining = remaining.saturating_sub(group_tokens);
        cut = group.end;
    }
    cut
}

#[cfg(test)]
mod tests;
