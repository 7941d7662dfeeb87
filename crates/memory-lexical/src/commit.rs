//! [`CommitPolicy`]: when a [`TantivyTextIndex`](crate::TantivyTextIndex) commits its writes.

/// When a [`TantivyTextIndex`](crate::TantivyTextIndex) commits the writes it has taken.
///
/// A tantivy commit makes the writes since the last one searchable and, in a directory,
/// durable (it writes a segment and fsyncs); it costs about the same whether it carries one
/// document or a hundred. Whatever the policy, every read (search, get, count, …) that starts
/// after a write returned sees it: a read that finds uncommitted writes commits them first.
/// The policy only says whether a write pays for its commit itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitPolicy {
    /// Every upsert, delete or clear is committed before it returns: once it returned, it is
    /// on disk (in a directory) and survives a crash. Each write costs a commit. The default
    /// of an index in a directory ([`open`](crate::TantivyTextIndex::open)): a write that
    /// returned is never lost.
    EveryWrite,
    /// Writes stay in the index writer until something needs them committed: the next read,
    /// [`commit`](crate::TantivyTextIndex::commit), more than
    /// [`MAX_PENDING_WRITES`] pending documents, or the last handle
    /// of the index being dropped. Many writes between two reads cost one commit. In a
    /// directory, a crash (not a drop) loses the writes since the last commit: call
    /// [`commit`](crate::TantivyTextIndex::commit) after writes you must not lose, or use
    /// [`EveryWrite`](Self::EveryWrite). The default of an index in memory
    /// ([`in_memory`](crate::TantivyTextIndex::in_memory)), which a crash loses whole anyway.
    BeforeRead,
}

impl CommitPolicy {
    /// The default policy of an index: [`EveryWrite`](Self::EveryWrite) in a directory (a write
    /// that returned survives a crash), [`BeforeRead`](Self::BeforeRead) in memory (nothing
    /// on disk to lose, so deferring the commit costs no durability).
    pub fn default_for(in_a_directory: bool) -> Self {
        if in_a_directory {
            Self::EveryWrite
        } else {
            Self::BeforeRead
        }
    }
}

/// The most documents a [`CommitPolicy::BeforeRead`] index keeps uncommitted: a write that
/// leaves more pending commits them all, so a long run of writes with no read between is
/// committed (and, in a directory, made durable) every this many documents.
pub const MAX_PENDING_WRITES: usize = 10_000;
