//! [`CommitPolicy`]: when a [`TantivyTextIndex`](crate::TantivyTextIndex) commits its writes.

/// When a [`TantivyTextIndex`](crate::TantivyTextIndex) commits the writes it has taken.
///
/// A tantivy commit makes the writes since the last one searchable and, in a directory,
/// durable (it writes a segment and fsyncs); it costs about the same whether it carries one
/// document or a hundred. Whatever the policy, every read (search, get, count, …) that starts
/// after a write returned sees it: a read that finds uncommitted writes commits them first.
/// The policy only says whether a write pays for its commit itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CommitPolicy {
    /// Every upsert, delete or clear is committed before it returns: once it returned, it is
    /// on disk (in a directory) and survives a crash. Each write costs a commit.
    EveryWrite,
    /// Writes stay in the index writer until something needs them committed: the next read,
    /// [`commit`](crate::TantivyTextIndex::commit), more than
    /// [`MAX_PENDING_WRITES`](crate::MAX_PENDING_WRITES) pending documents, or the last handle
    /// of the index being dropped. Many writes between two reads cost one commit. In a
    /// directory, a crash (not a drop) loses the writes since the last commit: call
    /// [`commit`](crate::TantivyTextIndex::commit) after writes you must not lose, or use
    /// [`EveryWrite`](Self::EveryWrite). The default.
    #[default]
    BeforeRead,
}
