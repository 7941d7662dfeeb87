//! Test doubles, one per file: stores with fewer capabilities than the in-memory ones (for code
//! that must read a store's capabilities before it calls an optional operation, and for the
//! checks that must pass on a store that honestly lacks one), layers that fail or count chosen
//! calls of the store under them, and the embedder and memory block the memory checks use.
//!
//! The stores are layers ([`LayeredHistory`](memory_core::LayeredHistory),
//! [`LayeredSessions`](memory_core::LayeredSessions)): each overrides only what it changes.

mod counting_history;
mod declared_history;
mod faulty_history;
mod faulty_sessions;
mod recording_block;
mod word_hash_embedder;

pub use counting_history::CountingHistoryStore;
pub use declared_history::DeclaredHistory;
pub use faulty_history::FaultyHistoryStore;
pub use faulty_sessions::FaultySessionStore;
pub use recording_block::RecordingBlock;
pub use word_hash_embedder::WordHashEmbedder;
