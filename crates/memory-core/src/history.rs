//! [`HistoryStore`]: the durable, ordered, per-thread chat history.

mod batch;
mod cursor;
mod in_memory;
mod layered;

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use batch::{
    MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, MAX_JSON_DEPTH, MAX_MESSAGE_BYTES, PreparedBatch,
    PreparedMessage, Repeats, check_message_depth, json_depth, over_limits,
};
pub use cursor::{CursorRead, Delta, NO_EPOCH, ThreadCursor};
pub use in_memory::InMemoryHistoryStore;
pub use layered::LayeredHistory;

use crate::error::{Error, Result};
use crate::id::TenantId;
use crate::message::ChatMessage;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter};

/// A message as a store holds it: its per-thread sequence number, its token count (computed
/// once, when it was appended) and whether it was archived out of the active window.
///
/// The message is shared ([`Arc`]): a store or cache that keeps decoded messages hands out a
/// window by cloning pointers, not by copying every message's id, parts and metadata (a
/// 30,000-token window of ~500 messages cost ~85 µs in deep clones). Read it through
/// [`AsRef`] or deref; take an owned copy with [`into_message`](Self::into_message), which
/// copies only when the message is still shared.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the thread: 1 for the first message, then consecutive.
    pub seq: u64,
    /// Tokens of the message, counted by the store's counter when it was appended.
    pub tokens: u32,
    /// Whether the message was archived (it stays stored and readable, out of the active
    /// window).
    pub archived: bool,
    /// The message, shared with the store or cache that holds it (see above).
    pub message: Arc<ChatMessage>,
}

impl StoredMessage {
    /// A stored message; `message` is a [`ChatMessage`] or an already shared
    /// `Arc<ChatMessage>`.
    pub fn new(
        seq: u64,
        tokens: u32,
        archived: bool,
        message: impl Into<Arc<ChatMessage>>,
    ) -> Self {
        Self {
            seq,
            tokens,
            archived,
            message: message.into(),
        }
    }

    /// The message, owned: moved out when this is its only holder, otherwise copied.
    #[must_use]
    pub fn into_message(self) -> ChatMessage {
        Arc::unwrap_or_clone(self.message)
    }
}

impl AsRef<ChatMessage> for StoredMessage {
    fn as_ref(&self) -> &ChatMessage {
        &self.message
    }
}

/// The most messages a store reads from its server in one step: a read whose window selects
/// more is read in pages of at most this many messages, each its own short server call, by a
/// store whose server would otherwise run the whole read as one step that blocks its other
/// clients (Redis runs a script to its end before any other command). See
/// [`HistoryStore::read`]'s `# Behavior` for what such a paged read guarantees.
pub const MAX_READ_PAGE: usize = 1_000;

/// Which messages of a thread a read returns. Results are always in sequence order.
///
/// No window is bounded in size: [`All`](Window::All), [`Everything`](Window::Everything),
/// [`After`](Window::After), a large [`Last`](Window::Last) or a large
/// [`TokenBudget`](Window::TokenBudget) return every message they select, however long the
/// thread. A store reads more than [`MAX_READ_PAGE`] messages in pages (see
/// [`HistoryStore::read`]'s `# Behavior`), so its server is never held by one long read, but the
/// whole result is still held in memory: on a hot path, prefer a window bounded by count or
/// tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Window {
    /// Every active message.
    All,
    /// The last `n` active messages.
    Last(usize),
    /// The active messages with a sequence number greater than the given one.
    After(u64),
    /// The newest active messages whose stored token counts add up to at most the budget. The
    /// window is contiguous: it ends before the first (from the newest) message that would not
    /// fit.
    TokenBudget(u64),
    /// Every message, active and archived.
    Everything,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The sequence number of each given message, in the order given. A message the store did
    /// not store again (see [`HistoryCapabilities::dedupes_ids`]) keeps the number it was first
    /// stored with.
    pub seqs: Vec<u64>,
    /// How many messages were new (the rest were already stored).
    pub inserted: usize,
}

/// Counts of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadCount {
    /// Messages in the active window.
    pub active: u64,
    /// Archived messages.
    pub archived: u64,
    /// Sum of the stored token counts of the active messages.
    pub active_tokens: u64,
    /// The highest sequence number assigned (0 for an empty thread).
    pub last_seq: u64,
}

/// What a history store can do beyond the required behaviour: which optional operations it
/// has, which of the stronger guarantees it keeps, and how it may be shared.
///
/// Every field is `false` in [`none`](Self::none) (and [`Default`]); a store turns on what it
/// has with the `with_*` methods:
///
/// ```
/// use memory_core::HistoryCapabilities;
///
/// let caps = HistoryCapabilities::none().with_archive(true).with_ttl(true);
/// assert!(caps.archive && caps.ttl && !caps.multi_process && !caps.dedupes_ids);
/// ```
///
/// A field that is `false` promises less: the optional operation is absent, or only the
/// weaker behaviour that the `# Behavior` of the [`HistoryStore`] method gives for it holds. Stores whose
/// layout is shared with another program turn guarantees off because that program's rules
/// differ (Agent Framework's Redis list deduplicates against its tail only, keeps no expiry
/// record, and turns long session ids into digests).
///
/// The struct is `#[non_exhaustive]`: a new capability adds a field that is `false` unless a
/// store sets it, so a store written before it keeps declaring the truth (it promises less
/// than it may do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HistoryCapabilities {
    /// Messages can be archived out of the active window ([`HistoryStore::archive`]).
    pub archive: bool,
    /// Threads can expire ([`HistoryStore::set_ttl`], [`HistoryStore::purge_expired`]).
    pub ttl: bool,
    /// Several processes can write the same thread safely (a shared server or file).
    pub multi_process: bool,
    /// A message whose id the thread already holds, or that repeats an id of its batch, is
    /// never stored again ([`HistoryStore::append`]). Without it, only a retry of the append
    /// that wrote the thread's tail is sure to store nothing.
    pub dedupes_ids: bool,
    /// [`HistoryStore::purge_expired`] returns how many expired threads it removed. Without
    /// it (or without [`ttl`](Self::ttl)), the number it returns is not that count.
    pub counts_purged: bool,
    /// [`HistoryStore::list_threads`] lists every thread that holds messages. Without it, the
    /// threads the store documents it cannot map back from its keys are left out.
    pub lists_every_thread: bool,
    /// An append may itself move the thread's oldest active messages out of the active window
    /// (archive or delete them), as a Redis store with `max_messages` does. Whatever reads the
    /// active window later, such as a [`Memory`](crate::Memory) flush, never sees them, so a
    /// `Memory` refuses such a store.
    pub reduces_on_append: bool,
    /// [`HistoryStore::read_since`] is supported: a cursor read answered in one round trip.
    pub cursor_reads: bool,
    /// [`HistoryStore::read_page`] is supported: every message (active and archived) after a
    /// sequence number, a bounded page at a time, for exports and migrations.
    pub paged_reads: bool,
    /// [`HistoryStore::list_tenants`] is supported: the tenants that hold threads.
    pub lists_tenants: bool,
}

impl HistoryCapabilities {
    /// No optional operation or stronger guarantee, one process only.
    pub const fn none() -> Self {
        Self {
            archive: false,
            ttl: false,
            multi_process: false,
            dedupes_ids: false,
            counts_purged: false,
            lists_every_thread: false,
            reduces_on_append: false,
            cursor_reads: false,
            paged_reads: false,
            lists_tenants: false,
        }
    }

    /// Sets whether [`HistoryStore::archive`] is supported.
    #[must_use]
    pub const fn with_archive(mut self, archive: bool) -> Self {
        self.archive = archive;
        self
    }

    /// Sets whether [`HistoryStore::set_ttl`] and [`HistoryStore::purge_expired`] are
    /// supported.
    #[must_use]
    pub const fn with_ttl(mut self, ttl: bool) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets whether several processes can write the same thread safely.
    #[must_use]
    pub const fn with_multi_process(mut self, multi_process: bool) -> Self {
        self.multi_process = multi_process;
        self
    }

    /// Sets whether a message id the thread already holds (or its batch repeats) is never
    /// stored again.
    #[must_use]
    pub const fn with_dedupes_ids(mut self, dedupes_ids: bool) -> Self {
        self.dedupes_ids = dedupes_ids;
        self
    }

    /// Sets whether [`HistoryStore::purge_expired`] returns how many expired threads it
    /// removed.
    #[must_use]
    pub const fn with_counts_purged(mut self, counts_purged: bool) -> Self {
        self.counts_purged = counts_purged;
        self
    }

    /// Sets whether [`HistoryStore::list_threads`] lists every thread that holds messages.
    #[must_use]
    pub const fn with_lists_every_thread(mut self, lists_every_thread: bool) -> Self {
        self.lists_every_thread = lists_every_thread;
        self
    }

    /// Sets whether an append may itself move the oldest active messages out of the window.
    #[must_use]
    pub const fn with_reduces_on_append(mut self, reduces_on_append: bool) -> Self {
        self.reduces_on_append = reduces_on_append;
        self
    }

    /// Sets whether [`HistoryStore::read_since`] is supported.
    #[must_use]
    pub const fn with_cursor_reads(mut self, cursor_reads: bool) -> Self {
        self.cursor_reads = cursor_reads;
        self
    }

    /// Sets whether [`HistoryStore::read_page`] is supported.
    #[must_use]
    pub const fn with_paged_reads(mut self, paged_reads: bool) -> Self {
        self.paged_reads = paged_reads;
        self
    }

    /// Sets whether [`HistoryStore::list_tenants`] is supported.
    #[must_use]
    pub const fn with_lists_tenants(mut self, lists_tenants: bool) -> Self {
        self.lists_tenants = lists_tenants;
        self
    }
}

/// What a store does with a stored row it cannot decode while reading a thread: it leaves the
/// row out of the result and logs a warning naming the thread and the row's sequence number
/// (never its content, which may be private or be what broke the decoder), so one bad row
/// never makes its whole thread unreadable. Backends call this from their decode paths; see
/// the `# Behavior` of [`HistoryStore::read`] and [`HistoryStore::read_page`].
pub fn skip_undecodable(thread: &dyn fmt::Display, seq: u64, error: &Error) {
    tracing::warn!(
        thread = %thread,
        seq,
        kind = ?error.kind(),
        "history: a stored message cannot be decoded; the read leaves it out"
    );
}

/// The error the default body of an optional operation returns: a sentence naming the store's
/// type, the operation and the capability that is off.
pub(crate) fn unsupported_operation<S: ?Sized>(
    operation: &str,
    capabilities: &str,
    field: &str,
) -> Error {
    Error::unsupported(format!(
        "{} does not support {operation}: its {capabilities}::{field} is false",
        std::any::type_name::<S>()
    ))
}

/// The durable chat history of threads, each addressed by a [`Scope`].
///
/// One store serves every thread; every call names its thread's scope, and data of one scope is
/// never visible through another.
///
/// Six methods are required. [`archive`](HistoryStore::archive),
/// [`set_ttl`](HistoryStore::set_ttl), [`purge_expired`](HistoryStore::purge_expired),
/// [`read_since`](HistoryStore::read_since), [`read_page`](HistoryStore::read_page) and
/// [`list_tenants`](HistoryStore::list_tenants) are optional: their default bodies return [`Unsupported`](crate::ErrorKind::Unsupported), and a
/// store that implements them says so in [`capabilities`](HistoryStore::capabilities). They are
/// optional because a layout shared with another program may have no place for them (Agent
/// Framework's Redis list has no archive; LlamaIndex's table has no expiry). Listing, counting
/// and clearing are required: every layout can do them, and retention and administration need
/// them.
///
/// A store that wraps another and changes only some of its calls (a cache, tracing, a test
/// double) implements [`LayeredHistory`] instead: it names its inner store and overrides only
/// what it changes; the rest is forwarded.
///
/// # Behavior
/// Each method states its contract in its own `# Behavior` section (the conformance suite in
/// memory-testkit has a check per line of them). The rules that span the methods:
/// - [`capabilities`](HistoryStore::capabilities) is constant for a store object and tells the
///   truth: each optional operation is present if and only if its capability says so. An
///   operation that is not present returns [`Unsupported`](crate::ErrorKind::Unsupported) for
///   every call, whatever the scope and arguments, and changes nothing.
#[async_trait]
pub trait HistoryStore: Send + Sync + fmt::Debug + 'static {
    /// What this store supports.
    fn capabilities(&self) -> HistoryCapabilities;

    /// Appends a batch to the thread of `scope`, atomically and idempotently.
    ///
    /// # Behavior
    /// Writes a batch atomically: all of it or none of it. The store assigns per-thread sequence
    /// numbers: 1 for a thread's first message, then consecutive, in the order given, with no gap
    /// or repeat even under concurrent writers (each batch lands contiguously). With
    /// [`HistoryCapabilities::dedupes_ids`], a message whose id the thread already holds (active or
    /// archived), or that repeats an earlier id of the same batch, is not stored again and keeps
    /// the sequence number and content it was first stored with: a retried append never duplicates.
    /// Without it, the store deduplicates by its own documented rule (Agent Framework's: against
    /// the thread's tail), which still makes a retry of the append that wrote the thread's last
    /// messages store nothing and return their sequence numbers; any other message may be stored
    /// again, as a new message. Either way the outcome is true: it gives each message's sequence
    /// number (where the thread holds it, or a message with its id), in the order given, and how
    /// many were new; the new ones are stored after the thread's earlier messages, which are left
    /// as they were, in the order given. Each message's token count is computed once, here, and
    /// stored. A message over [`MAX_MESSAGE_BYTES`] or a batch over [`MAX_BATCH_MESSAGES`] or
    /// [`MAX_BATCH_BYTES`] is refused with [`LimitExceeded`](crate::ErrorKind::LimitExceeded) and
    /// nothing is written (no message, no sequence number, no thread). An empty batch is a no-op. A
    /// message whose JSON (its values, or the text the store writes) nests deeper than
    /// [`MAX_JSON_DEPTH`] is refused the same way, so nothing is stored that could not be read
    /// back.
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome>;

    /// Reads the messages `window` selects, in sequence order.
    ///
    /// # Behavior
    /// Returns the messages a [`Window`] selects, in sequence order, exactly as appended; an
    /// unknown thread reads as empty. Budgeted windows use the stored counts. Readers concurrent
    /// with writers see a gap-free prefix of the thread. A window of any size is returned whole
    /// (there is no error for a large window), but no single server step of a read touches more
    /// than about [`MAX_READ_PAGE`] messages when the store's server blocks its other clients
    /// during a step (Redis): such a store reads a larger window in pages, in sequence order, each
    /// page its own call. A paged read is not one snapshot: a message archived while it runs may be
    /// returned as active or left out, and messages appended meanwhile may be returned after the
    /// others (still in sequence order, each once); a thread cleared or expired while it runs is
    /// read again from its start, so the result never mixes two lives of a thread. A store that
    /// reads in one step (SQL, in memory) returns a snapshot. A stored row that cannot be decoded
    /// (written or damaged by another program) is left out of the result with a warning naming the
    /// thread and its sequence number ([`skip_undecodable`]); the read still returns every other
    /// message of the window, and the row keeps its sequence number and its place in
    /// [`count`](HistoryStore::count) (a budgeted window still counts its stored tokens when the
    /// store keeps them).
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>>;

    /// Counts the thread's messages and active tokens.
    ///
    /// # Behavior
    /// Returns the active and archived counts, the sum of the active messages' stored token counts
    /// and the highest sequence number assigned; an unknown thread counts zero.
    async fn count(&self, scope: &Scope) -> Result<ThreadCount>;

    /// Deletes the thread.
    ///
    /// # Behavior
    /// Deletes the thread, active and archived messages; a later append starts a new thread at
    /// sequence number 1, where the old ids are new. It returns how many messages it deleted (0 for
    /// an unknown thread, so clearing twice is harmless).
    async fn clear(&self, scope: &Scope) -> Result<u64>;

    /// Lists the threads matching `filter`, a page at a time.
    ///
    /// # Behavior
    /// Pages through the scopes that hold messages and that the filter
    /// [matches](ScopeFilter::matches) (every part it names: user, agent, session, source), each
    /// once, in a stable order (the same for every page size; the last page has no cursor); it
    /// never lists another tenant's scope, nor a scope that holds no message. With
    /// [`HistoryCapabilities::lists_every_thread`] it lists every such scope; without it, the
    /// threads the store documents it cannot map back from its keys are left out (Agent Framework's
    /// sessions whose key segment became a digest) and the others are listed.
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>>;

    /// Archives the active messages whose sequence numbers are in `seqs`.
    ///
    /// Optional ([`HistoryCapabilities::archive`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Moves the active messages whose sequence numbers fall in the range out of the active window;
    /// they stay stored, readable with [`Window::Everything`] (flagged
    /// [`archived`](StoredMessage::archived)), and their ids stay known (with
    /// [`HistoryCapabilities::dedupes_ids`], re-appending one returns its sequence number and
    /// leaves it archived). It returns how many it moved: empty ranges, ranges past the end,
    /// already archived messages and unknown threads move nothing, without error. Archiving never
    /// frees a sequence number.
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let _ = (scope, seqs);
        Err(unsupported_operation::<Self>(
            "archive",
            "HistoryCapabilities",
            "archive",
        ))
    }

    /// Sets or removes the thread's time to live.
    ///
    /// Optional ([`HistoryCapabilities::ttl`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Makes a thread expire `ttl` after the later of the `set_ttl` call and its last append (each
    /// append restarts the clock); `None` removes the expiry; a TTL under 1 ms or over
    /// [`MAX_TTL`](crate::MAX_TTL) is [`InvalidInput`](crate::ErrorKind::InvalidInput) and changes
    /// nothing; a thread that holds no message (unknown or expired) is
    /// [`NotFound`](crate::ErrorKind::NotFound). An expired thread reads as empty, counts zero, is
    /// not listed, and is gone for appends (they start a new thread at sequence number 1).
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let _ = (scope, ttl);
        Err(unsupported_operation::<Self>(
            "set_ttl",
            "HistoryCapabilities",
            "ttl",
        ))
    }

    /// Deletes the data of expired threads now; returns how many threads it removed.
    ///
    /// Optional ([`HistoryCapabilities::ttl`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Deletes expired threads' data now (or finds that the server already has); afterwards no
    /// expired thread holds data, and threads that did not expire keep their messages. With
    /// [`HistoryCapabilities::counts_purged`] it returns how many expired threads it removed (a
    /// backend whose server expires data by itself, like Redis, reports the threads that expired
    /// since the last purge); without it the number is not that count (a layout that keeps no
    /// expiry record, like Agent Framework's, returns 0).
    async fn purge_expired(&self) -> Result<u64> {
        Err(unsupported_operation::<Self>(
            "purge_expired",
            "HistoryCapabilities",
            "ttl",
        ))
    }

    /// Reads what the window gained since `since` (or the whole window without a cursor, or
    /// when the thread changed otherwise), with the thread's counts and the next cursor, in one
    /// round trip.
    ///
    /// Optional ([`HistoryCapabilities::cursor_reads`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Answers in one round trip to the server, as one snapshot. The thread has an *epoch*
    /// ([`NO_EPOCH`] while it holds no message): appends never change it; an archive that moves a
    /// message, a clear, an expiry, an append that moves messages out of the window
    /// ([`HistoryCapabilities::reduces_on_append`]) and a re-created thread each give it a value it
    /// never had before for that scope. Without a cursor, or with a cursor of another epoch, the
    /// answer is [`Delta::Whole`] with the messages [`read`](HistoryStore::read) would return for
    /// the window. With a cursor of the current epoch it is [`Delta::Appended`] with the messages
    /// the window selects whose sequence numbers are above the cursor's (so a reader that held the
    /// window at the cursor has the window now once it adds them and trims the result to the
    /// window: [`Window::Last`] by count, [`Window::TokenBudget`] by the stored token counts).
    /// Either way it returns the thread's counts (as [`count`](HistoryStore::count)) and the cursor
    /// of what it read (the epoch and the thread's last sequence number). A cursor made for another
    /// scope, or of the current epoch but above the thread's last sequence number, is
    /// [`InvalidInput`](crate::ErrorKind::InvalidInput) (see [`ThreadCursor::check`]).
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        let _ = (scope, window, since);
        Err(unsupported_operation::<Self>(
            "read_since",
            "HistoryCapabilities",
            "cursor_reads",
        ))
    }

    /// Reads at most `limit` messages, active and archived, with sequence numbers above
    /// `after`, in sequence order.
    ///
    /// Optional ([`HistoryCapabilities::paged_reads`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Returns the thread's messages, active and archived (flagged), whose sequence numbers are
    /// above `after`, in sequence order, at most `limit` of them (a `limit` of 0 is read as 1, one
    /// over [`MAX_READ_PAGE`] as `MAX_READ_PAGE`), each exactly as [`Window::Everything`] returns
    /// it; an unknown thread, or `after` at or past its last sequence number, gives an empty page.
    /// Paging with `after` set to the last sequence number of each page reads every message of a
    /// thread once, in bounded memory, in one server step per page. A row that cannot be decoded is
    /// left out as in `read`, and the next page still starts after it.
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let _ = (scope, after, limit);
        Err(unsupported_operation::<Self>(
            "read_page",
            "HistoryCapabilities",
            "paged_reads",
        ))
    }

    /// Lists the tenants that hold threads, a page at a time.
    ///
    /// Optional ([`HistoryCapabilities::lists_tenants`]): the default returns
    /// [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// # Behavior
    /// Pages through the tenants that hold at least one thread with messages, each once, in a
    /// stable order (the same for every page size; the last page has no cursor). It is an
    /// administration call: it crosses tenants by design.
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let _ = page;
        Err(unsupported_operation::<Self>(
            "list_tenants",
            "HistoryCapabilities",
            "lists_tenants",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_message_shares_or_owns_its_message() {
        let shared = Arc::new(ChatMessage::user("hi"));
        let stored = StoredMessage::new(3, 7, true, Arc::clone(&shared));
        assert_eq!((stored.seq, stored.tokens, stored.archived), (3, 7, true));
        assert!(
            Arc::ptr_eq(&stored.message, &shared),
            "an Arc is kept, not copied"
        );
        assert_eq!(stored.as_ref(), &*shared);
        assert_eq!(stored.clone().into_message(), *shared);

        let owned = StoredMessage::new(1, 1, false, ChatMessage::assistant("hello"));
        let text_ptr = owned.message.parts.as_ptr();
        let message = owned.into_message();
        assert_eq!(message.text(), "hello");
        assert_eq!(
            message.parts.as_ptr(),
            text_ptr,
            "a sole holder moves the message out"
        );
    }
}
