//! [`VectorMemoryBlock`]: flushed batches embedded and recalled by similarity.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::{Error, ErrorKind, Result};
use crate::memory::{
    BlockContent, BlockGetContext, BlockPutContext, MemoryBlock, validate_block_name,
};
use crate::message::tagged_transcript;
use crate::model::Embedder;
use crate::scope::Scope;
use crate::tokens::TokenCounter;
use crate::vector::{ScoredPoint, VectorPoint, VectorQuery, VectorStore};

/// Filters or reorders retrieved batches before they are shown.
///
/// # Behavior
/// - [`process`](RetrievalPostprocessor::process) is given a search's results, best first, and
///   returns the ones to show, best first. It only keeps, drops or reorders what it is given
///   (it returns no point it was not given), synchronously and without error; the same input
///   gives the same output.
/// - A [`VectorMemoryBlock`] applies its post-processors in the order they were added, each to
///   the previous one's output; the block shows the text of what the last one returns.
/// - One post-processor object serves every session at once.
pub trait RetrievalPostprocessor: Send + Sync + fmt::Debug + 'static {
    /// Returns the results to keep, best first.
    fn process(&self, results: Vec<ScoredPoint>) -> Vec<ScoredPoint>;
}

/// Forwards [`RetrievalPostprocessor`] through smart pointers, so
/// `Arc<dyn RetrievalPostprocessor>` and `Box<dyn RetrievalPostprocessor>` are post-processors
/// too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here, or a default body would silently
/// replace the pointee's own implementation.
macro_rules! forward_retrieval_postprocessor {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        impl<T: RetrievalPostprocessor + ?Sized> RetrievalPostprocessor for $pointer<T> {
            fn process(&self, results: Vec<ScoredPoint>) -> Vec<ScoredPoint> {
                (**self).process(results)
            }
        }
    )*};
}

forward_retrieval_postprocessor!(Arc, Box);

/// Drops results scoring below a similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarityCutoff(pub f32);

impl RetrievalPostprocessor for SimilarityCutoff {
    fn process(&self, results: Vec<ScoredPoint>) -> Vec<ScoredPoint> {
        results.into_iter().filter(|r| r.score >= self.0).collect()
    }
}

/// Each flushed batch becomes one point: its messages as a `<message role='…'>` transcript,
/// embedded by an [`Embedder`] and kept in a [`VectorStore`] under the session's scope (source
/// `memory.vector.<block name>`). `get` embeds the last `retrieval_context_window` messages and
/// shows the `similarity_top_k` most similar batches.
///
/// A batch's point id is derived from the scope, the block and the batch's sequence range, so
/// a redone flush upserts the same point again instead of adding a second one.
#[derive(Debug, Clone)]
pub struct VectorMemoryBlock {
    name: String,
    priority: u32,
    embedder: Arc<dyn Embedder>,
    store: Arc<dyn VectorStore>,
    similarity_top_k: usize,
    retrieval_context_window: usize,
    postprocessors: Vec<Arc<dyn RetrievalPostprocessor>>,
}

impl VectorMemoryBlock {
    /// A block named `retrieval_based_memory`, priority 2, top 2 of the last 5 messages.
    pub fn new(embedder: Arc<dyn Embedder>, store: Arc<dyn VectorStore>) -> Self {
        Self {
            name: "retrieval_based_memory".to_owned(),
            priority: 2,
            embedder,
            store,
            similarity_top_k: 2,
            retrieval_context_window: 5,
            postprocessors: Vec::new(),
        }
    }

    /// Renames the block.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for an invalid name.
    pub fn with_name(mut self, name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        validate_block_name(&name)?;
        self.name = name;
        Ok(self)
    }

    /// Sets the truncation priority.
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets how many batches are recalled.
    pub fn with_similarity_top_k(mut self, k: usize) -> Self {
        self.similarity_top_k = k.max(1);
        self
    }

    /// Sets how many recent messages form the query.
    pub fn with_retrieval_context_window(mut self, n: usize) -> Self {
        self.retrieval_context_window = n.max(1);
        self
    }

    /// Adds a post-processor (applied in the order added).
    pub fn with_postprocessor(mut self, p: Arc<dyn RetrievalPostprocessor>) -> Self {
        self.postprocessors.push(p);
        self
    }

    fn vector_scope(&self, scope: &Scope) -> Result<Scope> {
        scope
            .clone()
            .with_source(format!("memory.vector.{}", self.name))
    }

    async fn embed_one(&self, text: String) -> Result<Vec<f32>> {
        self.embedder
            .embed(&[text])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorKind::Backend, "the embedder returned no vector"))
    }
}

#[async_trait]
impl MemoryBlock for VectorMemoryBlock {
    fn name(&self) -> &str {
        &self.name
    }

    fn priority(&self) -> u32 {
        self.priority
    }

    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        let has_batches = context.state["batches"]
            .as_array()
            .is_some_and(|b| !b.is_empty());
        let recent = &context.messages[context
            .messages
            .len()
            .saturating_sub(self.retrieval_context_window)..];
        let query: Vec<String> = recent
            .iter()
            .map(|m| m.text())
            .filter(|t| !t.trim().is_empty())
            .collect();
        if !has_batches || query.is_empty() {
            return Ok(BlockContent::Text(String::new()));
        }
        let vector = self.embed_one(query.join("\n")).await?;
        let mut results = self
            .store
            .search(
                &self.vector_scope(context.scope)?,
                &VectorQuery::new(vector, self.similarity_top_k),
            )
            .await?;
        for p in &self.postprocessors {
            results = p.process(results);
        }
        let texts: Vec<&str> = results
            .iter()
            .filter_map(|r| r.payload.get("text").and_then(Value::as_str))
            .collect();
        Ok(BlockContent::Text(texts.join("\n")))
    }

    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        let (Some(first), Some(last)) = (context.messages.first(), context.messages.last()) else {
            return Ok(());
        };
        let (first_seq, last_seq) = (first.seq, last.seq);
        let text = tagged_transcript(context.messages.iter().map(|m| &m.message));
        if text.is_empty() {
            return Ok(());
        }
        let id = Uuid::new_v5(
            &Uuid::NAMESPACE_OID,
            format!(
                "{}#{}#{first_seq}-{last_seq}",
                context.scope.key(),
                self.name
            )
            .as_bytes(),
        );
        let vector = self.embed_one(text.clone()).await?;
        let payload = json!({ "first_seq": first_seq, "last_seq": last_seq, "text": text });
        let point = VectorPoint {
            id,
            vector,
            payload: payload.as_object().cloned().unwrap_or_default(),
        };
        self.store
            .upsert(&self.vector_scope(context.scope)?, &[point])
            .await?;
        let mut batches = context.state["batches"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        batches.push(json!([first_seq, last_seq]));
        *context.state = json!({ "batches": batches });
        Ok(())
    }

    async fn truncate(
        &self,
        content: BlockContent,
        excess_tokens: u64,
        counter: &dyn TokenCounter,
    ) -> Result<Option<BlockContent>> {
        let text = content.text();
        let mut lines: Vec<&str> = text.lines().collect();
        let mut removed = 0u64;
        while removed < excess_tokens {
            let Some(line) = lines.pop() else { break };
            removed += u64::from(counter.count_text(line)) + 1;
        }
        Ok((!lines.is_empty()).then(|| BlockContent::Text(lines.join("\n"))))
    }
}
