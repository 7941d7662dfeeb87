//! [`WordHashEmbedder`]: a deterministic embedder for tests: texts that share words are
//! similar.

use async_trait::async_trait;
use memory_core::{Embedder, Result};

/// A deterministic [`Embedder`] of 64 dimensions: each word of four letters or more is hashed
/// (FNV-1a) into a bucket, and the vector is normalised. Texts that share words are similar.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordHashEmbedder;

impl WordHashEmbedder {
    /// The vector of `text`.
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; 64];
        for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
            if word.chars().count() >= 4 {
                let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                v[(hash % 64) as usize] += 1.0;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        } else {
            v[0] = 1.0;
        }
        v
    }
}

#[async_trait]
impl Embedder for WordHashEmbedder {
    fn dimensions(&self) -> usize {
        64
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}
