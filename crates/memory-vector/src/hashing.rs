//! [`HashingEmbedder`]: a deterministic, model-free embedder for tests and offline runs.

use async_trait::async_trait;
use memory_core::{Embedder, Error, Result};
use sha2::{Digest, Sha256};

/// A deterministic embedder that hashes words into buckets ("feature hashing"), for tests and
/// offline runs: **not** a language model.
///
/// Each text is lower-cased and split into words (runs of alphanumeric characters); every word
/// adds `±1` to one of `dimensions` buckets chosen by its SHA-256 hash, and the vector is
/// normalised to unit length. Texts sharing words therefore score higher than texts sharing
/// none, and the same text always gives the same vector on every platform, but synonyms and
/// paraphrases mean nothing to it. A text with no word embeds to the zero vector.
///
/// ```
/// use memory_vector::HashingEmbedder;
///
/// let embedder = HashingEmbedder::new(64);
/// let v = embedder.embed_one("The cat sat");
/// assert_eq!(v.len(), 64);
/// assert_eq!(v, embedder.embed_one("the CAT sat!"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashingEmbedder {
    dimensions: usize,
}

impl HashingEmbedder {
    /// An embedder of `dimensions` buckets (at least 1).
    pub fn new(dimensions: usize) -> Self {
        Self {
            dimensions: dimensions.max(1),
        }
    }

    /// Embeds one text (synchronously).
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dimensions];
        let lower = text.to_lowercase();
        for word in lower.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            let digest = Sha256::digest(word.as_bytes());
            let bytes: [u8; 32] = digest.into();
            let [b0, b1, b2, b3, b4, b5, b6, b7, b8, ..] = bytes;
            let h = u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
            let index = h.checked_rem(self.dimensions as u64).unwrap_or(0) as usize;
            let sign = if b8 & 1 == 0 { 1.0 } else { -1.0 };
            if let Some(slot) = v.get_mut(index) {
                *slot += sign;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if self.dimensions == 0 {
            return Err(Error::invalid_input(
                "an embedder needs at least 1 dimension",
            ));
        }
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::vector::cosine_similarity;

    #[test]
    fn deterministic_normalised_and_word_sensitive() {
        let e = HashingEmbedder::new(256);
        let a = e.embed_one("the capital of France is Paris");
        assert_eq!(a, e.embed_one("The capital of france is PARIS."));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let near = e.embed_one("what is the capital of France");
        let far = e.embed_one("bananas grow on trees");
        assert!(cosine_similarity(&a, &near) > cosine_similarity(&a, &far));
        assert!(e.embed_one("  !! ").iter().all(|x| *x == 0.0));
    }

    #[tokio::test]
    async fn embeds_every_text_in_order() {
        let e = HashingEmbedder::new(8);
        let texts = vec!["one".to_owned(), "two".to_owned()];
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v, vec![e.embed_one("one"), e.embed_one("two")]);
        assert_eq!(e.dimensions(), 8);
        assert_eq!(HashingEmbedder::new(0).dimensions(), 1);
    }
}
