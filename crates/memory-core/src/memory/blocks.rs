//! The built-in memory blocks.

mod fact;
mod static_block;
mod user_facts;
mod vector;

pub use fact::FactExtractionMemoryBlock;
pub use static_block::StaticMemoryBlock;
pub use vector::{
    CONTEXT_BYTES, DEFAULT_CONTEXT_MESSAGES, RetrievalPostprocessor, SESSION_KEY, SimilarityCutoff,
    VectorMemoryBlock,
};
