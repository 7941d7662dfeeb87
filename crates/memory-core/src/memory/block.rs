//! The [`MemoryBlock`] trait: long-term memory fed by flushed short-term messages.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::history::StoredMessage;
use crate::message::{ChatMessage, Part};
use crate::scope::Scope;
use crate::tokens::TokenCounter;

/// What a block contributes to the `<memory>` text.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockContent {
    /// Text, placed inside the block's section.
    Text(String),
    /// Parts: the text parts go inside the block's section, the others (images, documents)
    /// are attached to the message that carries the memory.
    Parts(Vec<Part>),
}

impl BlockContent {
    /// Whether there is nothing to show.
    pub fn is_empty(&self) -> bool {
        match self {
            BlockContent::Text(t) => t.trim().is_empty(),
            BlockContent::Parts(p) => p.is_empty(),
        }
    }

    /// The text that goes inside the block's section.
    pub fn text(&self) -> String {
        match self {
            BlockContent::Text(t) => t.clone(),
            BlockContent::Parts(parts) => parts
                .iter()
                .filter_map(Part::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// The non-text parts.
    pub fn attachments(&self) -> Vec<Part> {
        match self {
            BlockContent::Text(_) => Vec::new(),
            BlockContent::Parts(parts) => parts
                .iter()
                .filter(|p| p.as_text().is_none())
                .cloned()
                .collect(),
        }
    }
}

/// What a block sees when asked for its content.
#[derive(Debug)]
pub struct BlockGetContext<'a> {
    /// The memory's session scope.
    pub scope: &'a Scope,
    /// The newest short-term messages followed by the input messages of this call (the
    /// retrieval context).
    pub messages: &'a [ChatMessage],
    /// The block's state in this session (`Value::Null` before its first flush).
    pub state: &'a Value,
    /// The seq of the oldest short-term message this call shows the model, if it shows any:
    /// what a block would recall from this session at or after it is already in the window
    /// (a block that [takes messages on append](MemoryBlock::takes_messages_on_append) leaves
    /// it out, so the model is not shown it twice).
    pub window_from_seq: Option<u64>,
}

/// What a block sees when messages are flushed to it.
#[derive(Debug)]
pub struct BlockPutContext<'a> {
    /// The memory's session scope.
    pub scope: &'a Scope,
    /// The flushed messages, oldest first, each once: never a message this block was already
    /// given.
    pub messages: &'a [StoredMessage],
    /// The block's state in this session; what the block leaves here is saved durably, together
    /// with the mark of the messages it was given, in one write.
    pub state: &'a mut Value,
}

/// What a block sees when a `put` it made was discarded: its state write lost a race with
/// another process, which saved first.
#[derive(Debug)]
pub struct BlockDiscardContext<'a> {
    /// The memory's session scope.
    pub scope: &'a Scope,
    /// The state the discarded `put` left (never saved).
    pub discarded: &'a Value,
    /// The block's state as the winner saved it (`Value::Null` if it has none): the flush is
    /// redone from it.
    pub current: &'a Value,
}

/// A long-term memory block (LlamaIndex's `BaseMemoryBlock`).
///
/// Flushed short-term messages are handed to every block's [`put`](MemoryBlock::put); its
/// [`get`](MemoryBlock::get) content is rendered inside `<memory>` in a section named after the
/// block; when the whole does not fit the memory's token limit, blocks are
/// [`truncate`](MemoryBlock::truncate)d by [`priority`](MemoryBlock::priority), highest number
/// first, never priority 0.
///
/// # Behavior
/// - [`name`](MemoryBlock::name) is constant for a block object: 1–64 characters of `a-z`,
///   `0-9` and `_`, starting with a letter ([`validate_block_name`]), unique among a memory's
///   blocks ([`MemoryBuilder::build`](super::MemoryBuilder::build) refuses an invalid or
///   repeated name with [`InvalidInput`](crate::ErrorKind::InvalidInput)). It names the block's
///   section in `<memory>` and keys its state.
/// - [`priority`](MemoryBlock::priority) is constant: 0 is never truncated; among the others,
///   higher numbers are truncated first.
/// - [`get`](MemoryBlock::get) returns the block's content for the session from its `state`
///   (`Value::Null` before its first `put`) and the retrieval context (the newest short-term
///   messages, then the input of the call); it changes no state. Empty content (blank text, no
///   parts) leaves the block out of `<memory>`. An error fails the memory's `get`.
/// - [`put`](MemoryBlock::put) takes flushed messages, oldest first, and records what it keeps
///   in `state`. It is handed each message once (see below); when it returns an error, the
///   flush stops, its state change is dropped and the same messages come again at the next
///   flush. Side effects outside `state` are idempotent, keyed by the messages' sequence
///   numbers and ids, because a `put` may be redone (see below).
/// - [`takes_messages_on_append`](MemoryBlock::takes_messages_on_append) is constant for a
///   block object. When it is `true`, every `put_messages` hands the block the messages it has
///   not taken yet right after appending them, while they are still in the short-term window
///   (in batches of whole turns bounded by the memory's `token_flush_size`, as a flush cuts
///   them); the later flush that archives them hands them to the other blocks only. Each
///   message still reaches the block once. A block that indexes for search (the vector block)
///   makes what was said a moment ago findable; a block whose `put` is costly (a model call)
///   keeps the default, `false`: it takes messages when they are flushed.
/// - [`truncate`](MemoryBlock::truncate) is called, for blocks of priority above 0 in priority
///   order, while the rendered `<memory>` is over its token budget: it returns content shorter
///   by at least `excess_tokens` (as `counter` counts), or `None` (or empty content) to leave
///   the block out of this call's `<memory>`. It changes no state. The default leaves the block
///   out.
/// - [`discard`](MemoryBlock::discard) is called when the state a `put` left was not saved
///   because another process saved the block states first (the flush is then redone from the
///   winner's state): it undoes the discarded `put`'s side effects that the winner's state does
///   not account for (the vector block deletes its point when the winner wrote a different
///   batch from the same start). It changes no state; an error fails the flush. The default
///   does nothing (right for a block whose only effect is its state).
/// - [`forget`](MemoryBlock::forget) deletes what the block keeps for the session outside its
///   state (the vector block's points), given its last saved state (`Value::Null` if none).
///   [`Memory::reset`](super::Memory::reset) calls it before deleting the states; it is
///   idempotent (forgetting twice, or a session with nothing, is not an error). The default
///   does nothing.
/// - One block object serves every session at once: per-session data lives in `state`, never on
///   the object.
///
/// # State and exactly-once delivery
/// A block keeps its per-session state in the `state` value it is handed, never on the block
/// object (one block object serves every session). [`Memory`](super::Memory) saves that state
/// and the sequence number of the last message the block was given in one durable write after
/// each `put`, so a crash or a retry neither loses a batch for the block nor hands it twice. A
/// `put` whose state write loses a race with another process is discarded
/// ([`discard`](MemoryBlock::discard) is told) and redone from the winner's state, so side
/// effects outside the state (an upsert into a vector store) must be idempotent, keyed by the
/// messages' sequence numbers and ids (seqs restart at 1 when a thread is cleared or expires;
/// ids tell the two apart). The watermark belongs to one incarnation of the thread: when the
/// thread was re-created, the memory notices at its next flush and hands the new thread's
/// messages from seq 1 again; the blocks' states are kept (long-term memory outlives the
/// short-term window, as in LlamaIndex; [`Memory::reset`](super::Memory::reset) forgets both).
///
/// # Writing a block
/// ```
/// use memory_core::memory::{BlockContent, BlockGetContext, BlockPutContext, MemoryBlock};
/// use memory_core::{Result, async_trait};
/// use serde_json::json;
///
/// /// Counts how often the user mentions a name.
/// #[derive(Debug)]
/// struct MentionCounter { name: String }
///
/// #[async_trait]
/// impl MemoryBlock for MentionCounter {
///     fn name(&self) -> &str { "mentions" }
///     fn priority(&self) -> u32 { 3 }
///     async fn get(&self, ctx: BlockGetContext<'_>) -> Result<BlockContent> {
///         let n = ctx.state["count"].as_u64().unwrap_or(0);
///         Ok(BlockContent::Text(format!("{} was mentioned {n} times.", self.name)))
///     }
///     async fn put(&self, ctx: BlockPutContext<'_>) -> Result<()> {
///         let seen = ctx.messages.iter().filter(|m| m.message.text().contains(&self.name)).count();
///         let n = ctx.state["count"].as_u64().unwrap_or(0) + seen as u64;
///         *ctx.state = json!({ "count": n });
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait MemoryBlock: Send + Sync + fmt::Debug + 'static {
    /// The block's name: its section tag in `<memory>` and the key of its state. Lower-case
    /// ASCII letters, digits and `_`, starting with a letter.
    fn name(&self) -> &str;

    /// Truncation priority: 0 is never truncated; otherwise higher numbers go first.
    fn priority(&self) -> u32;

    /// The block's content for this session.
    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent>;

    /// Takes in flushed messages.
    async fn put(&self, context: BlockPutContext<'_>) -> Result<()>;

    /// Shortens `content` by at least `excess_tokens` tokens, or returns `None` to leave the
    /// block out. The default leaves it out.
    async fn truncate(
        &self,
        content: BlockContent,
        excess_tokens: u64,
        counter: &dyn TokenCounter,
    ) -> Result<Option<BlockContent>> {
        let _ = (content, excess_tokens, counter);
        Ok(None)
    }

    /// Whether the block takes messages as soon as they are appended, not when they are
    /// flushed out of the short-term window (see the `# Behavior` list). The default is
    /// `false`.
    fn takes_messages_on_append(&self) -> bool {
        false
    }

    /// Undoes the side effects of a `put` whose state was not saved (see the `# Behavior`
    /// list). The default does nothing.
    async fn discard(&self, context: BlockDiscardContext<'_>) -> Result<()> {
        let _ = context;
        Ok(())
    }

    /// Deletes what the block keeps for the session outside its state (see the `# Behavior`
    /// list). The default does nothing.
    async fn forget(&self, scope: &Scope, state: &Value) -> Result<()> {
        let _ = (scope, state);
        Ok(())
    }
}

/// Forwards [`MemoryBlock`] through smart pointers, so `Arc<dyn MemoryBlock>` and
/// `Box<dyn MemoryBlock>` are blocks too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here. Without the lint, a block's own
/// `truncate` reached through an `Arc` would silently be replaced by the default (leaving the
/// block out).
macro_rules! forward_memory_block {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: MemoryBlock + ?Sized> MemoryBlock for $pointer<T> {
            fn name(&self) -> &str {
                (**self).name()
            }
            fn priority(&self) -> u32 {
                (**self).priority()
            }
            async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
                (**self).get(context).await
            }
            async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
                (**self).put(context).await
            }
            async fn truncate(
                &self,
                content: BlockContent,
                excess_tokens: u64,
                counter: &dyn TokenCounter,
            ) -> Result<Option<BlockContent>> {
                (**self).truncate(content, excess_tokens, counter).await
            }
            fn takes_messages_on_append(&self) -> bool {
                (**self).takes_messages_on_append()
            }
            async fn discard(&self, context: BlockDiscardContext<'_>) -> Result<()> {
                (**self).discard(context).await
            }
            async fn forget(&self, scope: &Scope, state: &Value) -> Result<()> {
                (**self).forget(scope, state).await
            }
        }
    )*};
}

forward_memory_block!(Arc, Box);

/// Checks a block name: 1–64 chars of `[a-z0-9_]`, starting with a letter.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) otherwise.
pub fn validate_block_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "memory block name {name:?} must be 1-64 characters of a-z, 0-9 and _, starting with a letter"
        )))
    }
}

/// `name` as a block's name, once [`validate_block_name`] accepts it (what a block's `with_name`
/// builder stores).
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid name.
pub fn block_name(name: impl Into<String>) -> Result<String> {
    let name = name.into();
    validate_block_name(&name)?;
    Ok(name)
}

/// Truncates a block whose content is one item a line, the most important first (recalled
/// memories, best first, say): drops lines from the end until at least `excess_tokens` tokens are gone (a line's tokens
/// plus one for its newline); `None` when no line is left, so the block is left out.
pub fn truncate_lines(
    content: &BlockContent,
    excess_tokens: u64,
    counter: &dyn TokenCounter,
) -> Option<BlockContent> {
    let text = content.text();
    let mut lines: Vec<&str> = text.lines().collect();
    let mut removed = 0u64;
    while removed < excess_tokens {
        let Some(line) = lines.pop() else { break };
        removed = removed
            .saturating_add(u64::from(counter.count_text(line)))
            .saturating_add(1);
    }
    (!lines.is_empty()).then(|| BlockContent::Text(lines.join("\n")))
}
