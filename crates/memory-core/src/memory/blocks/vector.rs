//! [`VectorMemoryBlock`]: flushed batches embedded and recalled by similarity.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::Instrument;
use uuid::Uuid;

use crate::error::Result;
use crate::history::StoredMessage;
use crate::id::SourceId;
use crate::memory::{
    BlockContent, BlockDiscardContext, BlockGetContext, BlockPutContext, MemoryBlock, Recall,
    render_recalled, truncate_lines,
};
use crate::message::tagged_transcript;
use crate::model::Embedder;
use crate::retrieval::{DenseRetriever, MemoryItem, RetrievalQuery, Retrieved, Retriever};
use crate::scope::{Scope, ScopeFilter, ScopedHit};
use crate::tokens::TokenCounter;
use crate::vector::{ScoredPoint, VectorStore};

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

/// Each flushed batch becomes one item of memory: its messages as a `<message role='…'>`
/// transcript, indexed by a [`Retriever`] under the session's scope (source
/// `memory.vector.<block name>`). `get` searches with the last `retrieval_context_window`
/// messages and shows the `similarity_top_k` best batches.
///
/// A batch is indexed with the message before it as [context](MemoryItem::context)
/// ([`with_context_messages`](Self::with_context_messages): how many, 1 by default): an
/// answer is then found by the words of the question it answers. The context is indexed,
/// never recalled or returned; the block's state keeps the last messages for the next batch
/// (each cut to [`CONTEXT_BYTES`]). On LoCoMo it lifts turn-level recall@10 by about 11 points
/// for the lexical retriever (docs/quality.md).
///
/// [`new`](Self::new) indexes by embedding ([`DenseRetriever`]: an [`Embedder`] and a
/// [`VectorStore`]); [`with_retriever`](Self::with_retriever) takes any retriever, e.g. a
/// [`LexicalRetriever`](crate::retrieval::LexicalRetriever) or a
/// [`HybridRetriever`](crate::retrieval::HybridRetriever). [`search`](Self::search) searches a
/// session's batches directly.
///
/// A batch's point id is derived from the scope, the block, the batch's sequence range and its
/// first and last messages' ids (the thread's incarnation: seqs restart after a `clear`), so a
/// redone flush upserts the same point again instead of adding a second one, and a re-created
/// thread never overwrites the old thread's batches (even with content-derived message ids,
/// unless both ends of the batch are the same messages). The point keeps the raw text; what is
/// recalled or found is rendered and escaped when it is read ([`render_recalled`]), whatever
/// the payload says, so whoever can write the vector collection cannot forge the `<memory>`
/// block, and [`search`](Self::search) returns text as safe as what `get` shows. The block's
/// state is O(1): a count and the latest batches.
/// [`forget`](MemoryBlock::forget) deletes the session's points.
#[derive(Debug, Clone)]
pub struct VectorMemoryBlock {
    name: String,
    priority: u32,
    retriever: Arc<dyn Retriever>,
    similarity_top_k: usize,
    retrieval_context_window: usize,
    context_messages: usize,
    recall: Recall,
    index_on_append: bool,
    postprocessors: Vec<Arc<dyn RetrievalPostprocessor>>,
}

/// How many messages before a batch the vector memory block indexes with it by default
/// ([`VectorMemoryBlock::with_context_messages`]).
pub const DEFAULT_CONTEXT_MESSAGES: usize = 1;

/// The most bytes of one context message the vector memory block keeps in its state (and
/// indexes with the next batch): longer bodies are cut at a character boundary.
pub const CONTEXT_BYTES: usize = 1_000;

impl VectorMemoryBlock {
    /// A block named `retrieval_based_memory`, priority 2, top 2 of the last 5 messages.
    /// Each batch is embedded by `embedder` and kept as a point of `store`.
    pub fn new(embedder: Arc<dyn Embedder>, store: Arc<dyn VectorStore>) -> Self {
        Self::with_retriever(Arc::new(DenseRetriever::new(embedder, store)))
    }

    /// A block named `retrieval_based_memory`, priority 2, top 2 of the last 5 messages,
    /// indexing and searching its batches through `retriever`.
    pub fn with_retriever(retriever: Arc<dyn Retriever>) -> Self {
        Self {
            name: "retrieval_based_memory".to_owned(),
            priority: 2,
            retriever,
            similarity_top_k: 2,
            retrieval_context_window: 5,
            context_messages: DEFAULT_CONTEXT_MESSAGES,
            recall: Recall::Session,
            index_on_append: false,
            postprocessors: Vec::new(),
        }
    }

    crate::__memory_block_builders!();

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

    /// Sets how many messages before a batch are indexed with it as context
    /// ([`DEFAULT_CONTEXT_MESSAGES`] by default; 0 indexes each batch alone). The context
    /// helps find the batch and is never recalled.
    pub fn with_context_messages(mut self, n: usize) -> Self {
        self.context_messages = n;
        self
    }

    /// Sets which sessions' batches the block recalls from ([`Recall::Session`] by default):
    /// [`Recall::User`] finds what the scope's user said in any of their sessions. Batches are
    /// still written under each session's own scope. A level above the session needs a
    /// retriever whose indexes search across scopes (the store engines' vector stores and
    /// text indexes, [`InMemoryVectorStore`](crate::InMemoryVectorStore)); with another, `get`
    /// and `search` fail with [`Unsupported`](crate::ErrorKind::Unsupported).
    #[must_use]
    pub fn with_recall(mut self, recall: Recall) -> Self {
        self.recall = recall;
        self
    }

    /// Which sessions' batches the block recalls from.
    pub fn recall(&self) -> Recall {
        self.recall
    }

    /// Sets whether the block indexes messages as soon as they are appended (`true`), so a
    /// search finds what was said a moment ago, or when a flush moves them out of the
    /// short-term window (`false`, the default, as LlamaIndex's block). Appended messages are
    /// indexed in the batches a flush would cut (each `put_messages` call's new messages, in
    /// whole turns of at most about the memory's `token_flush_size`), each message once; it
    /// costs an embedding and an index write in every `put_messages`. A recalled batch that
    /// is still in the window `get` shows is left out of the `<memory>` text (the block asks
    /// the retriever for 16 more than `similarity_top_k` to make up for them).
    #[must_use]
    pub fn with_index_on_append(mut self, on_append: bool) -> Self {
        self.index_on_append = on_append;
        self
    }

    /// Adds a post-processor (applied in the order added).
    pub fn with_postprocessor(mut self, p: Arc<dyn RetrievalPostprocessor>) -> Self {
        self.postprocessors.push(p);
        self
    }

    /// The retriever the block indexes and searches through.
    pub fn retriever(&self) -> &Arc<dyn Retriever> {
        &self.retriever
    }

    /// The `top_k` best batches for `query` that the session `scope` (a session's scope, as
    /// given to [`Memory`](crate::Memory)) recalls — its own, or its user's or agent's across
    /// sessions ([`with_recall`](Self::with_recall)) — best first, as the retriever ranks them;
    /// the post-processors are not applied. Each result's payload holds the batch's transcript
    /// under `"text"` as the block shows it ([`render_recalled`](crate::memory::render_recalled):
    /// one `<message role='…'>` line a message, role and body escaped, whatever the stored
    /// payload says), so a remembered message cannot forge another where the text is shown;
    /// where it came from: `"session_id"` (the session that flushed it), `"first_seq"`,
    /// `"last_seq"` and `"first_id"`; and its `"lines"` (`[role, body]` pairs, the raw data).
    ///
    /// # Errors
    /// The retriever's errors; [`InvalidInput`](crate::ErrorKind::InvalidInput) when the
    /// scope cannot take the block's source, or lacks the user or agent its recall level needs.
    pub async fn search(&self, scope: &Scope, query: &str, top_k: usize) -> Result<Vec<Retrieved>> {
        let found = self
            .recalled(scope, &RetrievalQuery::new(query, top_k))
            .await?;
        Ok(shown(with_sessions(found)))
    }

    /// The `top_k` best batches for `query` across the scopes `filter` selects (a user's
    /// sessions: the tenant and user), whatever the block's [`Recall`], as
    /// [`search`](Self::search) returns them (`"text"` rendered and escaped, `"session_id"`
    /// naming each batch's session). The filter's source is the block's own: the block never
    /// searches another source's items.
    ///
    /// # Errors
    /// The retriever's errors ([`Unsupported`](crate::ErrorKind::Unsupported) when its
    /// indexes cannot search across scopes); [`InvalidInput`](crate::ErrorKind::InvalidInput)
    /// when the block's name makes no valid source.
    pub async fn search_across(
        &self,
        filter: ScopeFilter,
        query: &str,
        top_k: usize,
    ) -> Result<Vec<Retrieved>> {
        let source = SourceId::new(format!("memory.vector.{}", self.name))?;
        let found = self
            .retriever
            .retrieve_matching(
                &filter.with_source(source),
                &RetrievalQuery::new(query, top_k),
            )
            .await?;
        Ok(shown(with_sessions(found)))
    }

    /// The batches `scope` recalls for `query` at the block's level, each with the scope it
    /// came from.
    async fn recalled(
        &self,
        scope: &Scope,
        query: &RetrievalQuery,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        let own = self.vector_scope(scope)?;
        let found = match self.recall.filter(&own)? {
            None => self
                .retriever
                .retrieve(&own, query)
                .await?
                .into_iter()
                .map(|hit| ScopedHit::new(own.clone(), hit))
                .collect(),
            Some(filter) => self.retriever.retrieve_matching(&filter, query).await?,
        };
        Ok(found)
    }

    /// `found` without the batches of the session `scope` that start at or after
    /// `window_from_seq`: the window shown beside the `<memory>` text holds them already.
    fn not_in_window(
        &self,
        found: Vec<ScopedHit<Retrieved>>,
        scope: &Scope,
        window_from_seq: Option<u64>,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        let Some(from) = window_from_seq else {
            return Ok(found);
        };
        let own = self.vector_scope(scope)?;
        Ok(found
            .into_iter()
            .filter(|found| {
                let first_seq = found.hit.payload.get("first_seq").and_then(Value::as_u64);
                found.scope != own || first_seq.is_none_or(|seq| seq < from)
            })
            .collect())
    }

    fn vector_scope(&self, scope: &Scope) -> Result<Scope> {
        scope
            .clone()
            .with_source(format!("memory.vector.{}", self.name))
    }
}

/// The hits, each payload with the session it came from under [`SESSION_KEY`].
fn with_sessions(found: Vec<ScopedHit<Retrieved>>) -> Vec<Retrieved> {
    found
        .into_iter()
        .map(|found| {
            let mut hit = found.hit;
            let session = found.scope.session_id().as_str().to_owned();
            hit.payload
                .insert(SESSION_KEY.to_owned(), Value::String(session));
            hit
        })
        .collect()
}

/// The hits, each payload's `"text"` the transcript as the block shows it (rendered and
/// escaped from the raw lines, whatever the stored payload says).
fn shown(mut found: Vec<Retrieved>) -> Vec<Retrieved> {
    for hit in &mut found {
        let shown = render_recalled(&hit.payload).unwrap_or_default();
        hit.payload
            .insert(crate::retrieval::TEXT_KEY.to_owned(), Value::String(shown));
    }
    found
}

/// How many more batches than `similarity_top_k` a block that indexes on append asks for when
/// `get` shows a window: the best matches of a query made of the window's messages are those
/// messages' own batches, which are left out. With more of them among the best, `get` recalls
/// fewer than `similarity_top_k`.
const IN_WINDOW_SLACK: usize = 16;

/// The payload key of the session a recalled batch came from.
pub const SESSION_KEY: &str = "session_id";

/// How many of its latest batches the block's state remembers (range, first message id, point
/// id): enough to tell, after losing a race on the block states, whether the winner wrote the
/// same point. The state stays O(1) however many flushes there were.
const RECENT_BATCHES: usize = 16;

/// One batch the state remembers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Batch {
    first: u64,
    last: u64,
    first_id: String,
    point: Uuid,
}

impl Batch {
    fn to_json(&self) -> Value {
        json!({
            "first": self.first,
            "last": self.last,
            "first_id": self.first_id,
            "point": self.point.to_string(),
        })
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            first: v["first"].as_u64()?,
            last: v["last"].as_u64()?,
            first_id: v["first_id"].as_str()?.to_owned(),
            point: v["point"].as_str()?.parse().ok()?,
        })
    }
}

/// The block's per-session state: how many batches it stored, the latest ones, and the last
/// messages (`[role, body]`, each body cut to [`CONTEXT_BYTES`]) that the next batch is indexed
/// with. Reads the first form too (`{"batches": [[first, last], …]}`, one entry per flush).
#[derive(Debug, Default)]
struct VectorState {
    points: u64,
    recent: Vec<Batch>,
    context: Vec<(String, String)>,
}

impl VectorState {
    fn of(state: &Value) -> Self {
        if let Some(points) = state["points"].as_u64() {
            let recent = state["recent"]
                .as_array()
                .map(|a| a.iter().filter_map(Batch::from_json).collect())
                .unwrap_or_default();
            let context = state["context"]
                .as_array()
                .map(|a| a.iter().filter_map(line_of).collect())
                .unwrap_or_default();
            return Self {
                points,
                recent,
                context,
            };
        }
        let legacy = state["batches"].as_array().map_or(0, Vec::len);
        Self {
            points: legacy as u64,
            ..Self::default()
        }
    }

    /// The context the next batch is indexed with: the kept messages as a transcript.
    fn context_text(&self) -> String {
        self.context
            .iter()
            .map(|(role, body)| format!("<message role='{role}'>{body}</message>"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Keeps the last `n` of the kept messages followed by `lines`, each body cut to
    /// [`CONTEXT_BYTES`].
    fn remember_context(&mut self, lines: &[(String, String)], n: usize) {
        self.context.extend(
            lines
                .iter()
                .map(|(role, body)| (role.clone(), cut(body, CONTEXT_BYTES).to_owned())),
        );
        let over = self.context.len().saturating_sub(n);
        self.context.drain(..over);
    }

    fn to_json(&self) -> Value {
        json!({
            "points": self.points,
            "recent": self.recent.iter().map(Batch::to_json).collect::<Vec<_>>(),
            "context": self.context.iter().map(|(role, body)| json!([role, body])).collect::<Vec<_>>(),
        })
    }
}

/// The raw `(role, body)` of each message of a batch that has a body (as in
/// [`tagged_transcript`]): what a point keeps, so the recalled text can be built and escaped
/// when it is read.
fn transcript_lines(messages: &[StoredMessage]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| {
            let line = tagged_transcript(std::iter::once(&*m.message));
            let body = line
                .strip_prefix(&format!("<message role='{}'>", m.message.role.as_str()))?
                .strip_suffix("</message>")?
                .to_owned();
            Some((m.message.role.as_str().to_owned(), body))
        })
        .collect()
}

/// A stored `[role, body]` pair.
fn line_of(line: &Value) -> Option<(String, String)> {
    Some((
        line.get(0)?.as_str()?.to_owned(),
        line.get(1)?.as_str()?.to_owned(),
    ))
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text.get(..end).unwrap_or_default()
}

#[async_trait]
impl MemoryBlock for VectorMemoryBlock {
    crate::__memory_block_name_and_priority!();

    fn takes_messages_on_append(&self) -> bool {
        self.index_on_append
    }

    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        // A session that flushed nothing has nothing of its own to recall; above the session,
        // other sessions may have.
        let has_batches =
            self.recall != Recall::Session || VectorState::of(context.state).points > 0;
        let query: Vec<String> = context
            .messages
            .iter()
            .skip(
                context
                    .messages
                    .len()
                    .saturating_sub(self.retrieval_context_window),
            )
            .map(|m| m.text())
            .filter(|t| !t.trim().is_empty())
            .collect();
        if !has_batches || query.is_empty() {
            return Ok(BlockContent::Text(String::new()));
        }
        let span = tracing::info_span!(
            "agent_memory.retrieve",
            otel.status_code = tracing::field::Empty,
            agent_memory.block.name = self.name.as_str(),
            agent_memory.scope.tenant = %context.scope.tenant(),
            agent_memory.scope.session = %context.scope.session_id(),
            agent_memory.retrieval.top_k = crate::span_fields::int(self.similarity_top_k),
            agent_memory.retrieval.hits = tracing::field::Empty,
            agent_memory.retrieval.kept = tracing::field::Empty,
            agent_memory.retrieval.top_score = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        // A block that indexes on append finds the window's own messages first (the query is
        // made of them): it asks for more, and leaves those out.
        let window_from_seq = context.window_from_seq.filter(|_| self.index_on_append);
        let asked = match window_from_seq {
            Some(_) => self.similarity_top_k.saturating_add(IN_WINDOW_SLACK),
            None => self.similarity_top_k,
        };
        let searched = async {
            let found = self
                .recalled(context.scope, &RetrievalQuery::new(query.join("\n"), asked))
                .await?;
            let mut found = self.not_in_window(found, context.scope, window_from_seq)?;
            found.truncate(self.similarity_top_k);
            Ok::<_, crate::Error>(with_sessions(found))
        }
        .instrument(span.clone())
        .await;
        let mut results: Vec<ScoredPoint> = match searched {
            Ok(results) => results
                .into_iter()
                .map(|r| ScoredPoint {
                    id: r.id,
                    score: r.score,
                    payload: r.payload,
                })
                .collect(),
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", e.kind().as_str());
                return Err(e);
            }
        };
        let hits = results.len();
        if let Some(top) = results.iter().map(|r| r.score).reduce(f32::max) {
            span.record("agent_memory.retrieval.top_score", f64::from(top));
        }
        for p in &self.postprocessors {
            results = p.process(results);
        }
        span.record("agent_memory.retrieval.hits", crate::span_fields::int(hits));
        span.record(
            "agent_memory.retrieval.kept",
            crate::span_fields::int(results.len()),
        );
        tracing::event!(
            target: "agent_memory::metrics",
            parent: None,
            tracing::Level::DEBUG,
            monotonic_counter.agent_memory.retrieval.searches = 1u64,
            monotonic_counter.agent_memory.retrieval.hits = u64::try_from(hits).unwrap_or(u64::MAX),
            agent_memory.block.name = self.name.as_str(),
        );
        let texts: Vec<String> = results
            .iter()
            .filter_map(|r| render_recalled(&r.payload))
            .collect();
        Ok(BlockContent::Text(texts.join("\n")))
    }

    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        let (Some(first), Some(last)) = (context.messages.first(), context.messages.last()) else {
            return Ok(());
        };
        let (first_seq, last_seq) = (first.seq, last.seq);
        let embedded = tagged_transcript(context.messages.iter().map(|m| &*m.message));
        if embedded.is_empty() {
            return Ok(());
        }
        // The first and last messages' ids name the thread's incarnation: after a `clear` or
        // an expiry, seqs restart at 1 and a new batch 1-10 must not replace the old one, even
        // when ids derive from content and the new thread starts with the same message.
        let first_id = first.message.id.as_str().to_owned();
        let last_id = last.message.id.as_str();
        let id = Uuid::new_v5(
            &Uuid::NAMESPACE_OID,
            format!(
                "{}#{}#{first_seq}-{last_seq}#{first_id}#{last_id}",
                context.scope.key(),
                self.name
            )
            .as_bytes(),
        );
        let lines = transcript_lines(context.messages);
        let payload = json!({
            "first_seq": first_seq,
            "last_seq": last_seq,
            "first_id": first_id,
            "lines": lines.iter().map(|(role, body)| json!([role, body])).collect::<Vec<_>>(),
        });
        let mut state = VectorState::of(context.state);
        let mut item = MemoryItem::new(id, embedded)
            .with_payload(payload.as_object().cloned().unwrap_or_default());
        if self.context_messages > 0 {
            item = item.with_context(state.context_text());
        }
        self.retriever
            .index(&self.vector_scope(context.scope)?, &[item])
            .await?;
        state.remember_context(&lines, self.context_messages);
        state.points = state.points.saturating_add(1);
        state.recent.push(Batch {
            first: first_seq,
            last: last_seq,
            first_id,
            point: id,
        });
        let over = state.recent.len().saturating_sub(RECENT_BATCHES);
        state.recent.drain(..over);
        *context.state = state.to_json();
        Ok(())
    }

    /// Deletes the point the discarded `put` wrote when the winning state holds another batch
    /// that starts where it did (the winner flushed a different range): that point would be
    /// recalled beside the winner's. When the winner wrote the same batch (same point id), or
    /// has not delivered to this block yet (the redo writes the same point again), it stays.
    async fn discard(&self, context: BlockDiscardContext<'_>) -> Result<()> {
        let Some(mine) = VectorState::of(context.discarded).recent.pop() else {
            return Ok(());
        };
        let current = VectorState::of(context.current);
        if current.recent.iter().any(|b| b.point == mine.point) {
            return Ok(());
        }
        let superseded = current
            .recent
            .iter()
            .any(|b| b.first == mine.first && b.first_id == mine.first_id);
        if superseded {
            self.retriever
                .delete(&self.vector_scope(context.scope)?, &[mine.point])
                .await?;
            tracing::debug!(
                block = self.name.as_str(),
                first_seq = mine.first,
                last_seq = mine.last,
                "deleted the vector point of a flush that lost the race on the block states"
            );
        }
        Ok(())
    }

    /// Deletes every point of the session's vector scope.
    async fn forget(&self, scope: &Scope, state: &Value) -> Result<()> {
        let _ = state;
        self.retriever.clear(&self.vector_scope(scope)?).await?;
        Ok(())
    }

    async fn truncate(
        &self,
        content: BlockContent,
        excess_tokens: u64,
        counter: &dyn TokenCounter,
    ) -> Result<Option<BlockContent>> {
        Ok(truncate_lines(&content, excess_tokens, counter))
    }
}
