//! [`RememberedEmbedder`]: an embedder that answers texts it has embedded before from memory,
//! so the recall harness can time a search without the query's embedding.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memory_core::{Embedder, Result};

/// Forwards to `inner`, remembering every vector by its text; a text seen before is answered
/// from memory without calling `inner`. [`misses`](Self::misses) counts the texts that were
/// not remembered.
#[derive(Debug)]
pub(crate) struct RememberedEmbedder {
    inner: Arc<dyn Embedder>,
    vectors: Mutex<HashMap<String, Vec<f32>>>,
    misses: AtomicUsize,
}

impl RememberedEmbedder {
    /// Remembers what `inner` embeds.
    pub(crate) fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            inner,
            vectors: Mutex::new(HashMap::new()),
            misses: AtomicUsize::new(0),
        }
    }

    /// How many texts were embedded by `inner` (not answered from memory).
    pub(crate) fn misses(&self) -> usize {
        self.misses.load(Ordering::Relaxed)
    }

    fn remembered(&self, text: &str) -> Option<Vec<f32>> {
        self.vectors.lock().ok()?.get(text).cloned()
    }
}

#[async_trait]
impl Embedder for RememberedEmbedder {
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let known: Option<Vec<Vec<f32>>> = texts.iter().map(|t| self.remembered(t)).collect();
        if let Some(known) = known {
            return Ok(known);
        }
        self.misses.fetch_add(texts.len(), Ordering::Relaxed);
        let vectors = self.inner.embed(texts).await?;
        if let Ok(mut map) = self.vectors.lock() {
            for (text, vector) in texts.iter().zip(&vectors) {
                map.insert(text.clone(), vector.clone());
            }
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    #[async_trait]
    impl Embedder for Counting {
        fn dimensions(&self) -> usize {
            1
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[tokio::test]
    async fn a_text_embedded_once_is_answered_from_memory() {
        let inner = Arc::new(Counting::default());
        let remembered = RememberedEmbedder::new(inner.clone());
        let texts = vec!["abc".to_owned()];
        assert_eq!(remembered.embed(&texts).await.unwrap(), [[3.0]]);
        assert_eq!(remembered.embed(&texts).await.unwrap(), [[3.0]]);
        assert_eq!(inner.0.load(Ordering::Relaxed), 1);
        assert_eq!(remembered.misses(), 1);
        remembered.embed(&["de".to_owned()]).await.unwrap();
        assert_eq!(remembered.misses(), 2);
    }
}
