//! Test doubles, one per file: stores with fewer capabilities than the in-memory ones (for code
//! that must read a store's capabilities before it calls an optional operation, and for the
//! checks that must pass on a store that honestly lacks one), layers that fail or count chosen
//! calls of the store under them, and the embedder and memory block the memory checks use.
//!
//! The stores are layers ([`LayeredHistory`](memory_core::LayeredHistory),
//! [`LayeredSessions`](memory_core::LayeredSessions)): each overrides only what it changes;
//! except [`RequiredOnlySessions`], which implements the store trait itself, since what it
//! shows is the trait's default bodies.

mod counting_history;
mod declared_history;
mod faulty_history;
mod faulty_sessions;
mod flat_embedder;
mod recording_block;
mod required_only_sessions;
mod word_hash_embedder;

pub use counting_history::CountingHistoryStore;
pub use declared_history::DeclaredHistory;
pub use faulty_history::FaultyHistoryStore;
pub use faulty_sessions::FaultySessionStore;
pub use flat_embedder::FlatEmbedder;
pub use recording_block::RecordingBlock;
pub use required_only_sessions::RequiredOnlySessions;
pub use word_hash_embedder::WordHashEmbedder;
