//! [`FlatEmbedder`]: an embedder that tells no text from another.

use async_trait::async_trait;
use memory_core::{Embedder, Result};

/// An [`Embedder`] of 4 dimensions that knows nothing: every text gets the same vector
/// (`[0.5; 4]`), so a dense ranking ranks every point alike and is no better than the store's
/// order. With it, what a hybrid retriever recalls is its lexical side's ranking.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatEmbedder;

#[async_trait]
impl Embedder for FlatEmbedder {
    fn dimensions(&self) -> usize {
        4
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![0.5; 4]).collect())
    }
}
