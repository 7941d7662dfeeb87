//! The built-in memory blocks.

mod fact;
mod static_block;
mod vector;

pub use fact::FactExtractionMemoryBlock;
pub use static_block::StaticMemoryBlock;
pub use vector::{RetrievalPostprocessor, SimilarityCutoff, VectorMemoryBlock};
