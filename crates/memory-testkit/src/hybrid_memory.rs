//! Long-term memory over an engine's [`TextIndex`], end to end: a [`Memory`] whose
//! [`VectorMemoryBlock`] indexes its batches through a [`HybridRetriever`] (a dense side over
//! an [`InMemoryVectorStore`], the lexical side over the engine's text index) flushes each
//! message into both indexes exactly once and recalls by the engine's ranking; a [`Forgetter`]
//! with the text index ([`Forgetter::texts`]) removes the forgotten session's batches from both
//! indexes and nothing else.
//!
//! Run it on every engine offering a text index, with the engine's own history and session
//! stores where it has them: [`hybrid_memory_flushes_once_recalls_and_forgets`].

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::ScopeFilter;
use memory_core::forget::{ForgetMode, Forgetter};
use memory_core::memory::blocks::VectorMemoryBlock;
use memory_core::memory::{FlushReport, MemoryBlock};
use memory_core::retrieval::{DenseRetriever, HybridRetriever, LexicalRetriever};
use memory_core::{
    ChatMessage, HistoryStore, InMemoryVectorStore, Memory, Scope, SessionStore, TextIndex,
    VectorQuery, VectorStore,
};
use serde_json::Value;
use uuid::Uuid;

use crate::doubles::FlatEmbedder;
use crate::fixtures::{ExpectOk, random_scope, random_session_id};
use crate::memory::support::{RARE, archived_seqs, memory_over, shown_for, tagged_message};

/// The message carrying `RARE[i]`.
fn message(i: usize) -> ChatMessage {
    tagged_message(i, RARE[i])
}

/// One session's memory and its block's scope.
struct Session {
    scope: Scope,
    block_scope: Scope,
    block: Arc<VectorMemoryBlock>,
    memory: Memory,
}

fn session(
    scope: Scope,
    history: &Arc<dyn HistoryStore>,
    sessions: &Arc<dyn SessionStore>,
    block: &Arc<VectorMemoryBlock>,
) -> Session {
    let blocks = [block.clone() as Arc<dyn MemoryBlock>];
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 400);
    Session {
        block_scope: scope
            .clone()
            .with_source("memory.vector.retrieval_based_memory")
            .expect_ok("the block's scope"),
        scope,
        block: block.clone(),
        memory,
    }
}

/// The ids of the block's points in the vector store (the flat vector matches them all).
async fn point_ids(vectors: &InMemoryVectorStore, block_scope: &Scope) -> BTreeSet<Uuid> {
    vectors
        .search(block_scope, &VectorQuery::new(vec![0.5; 4], 1000))
        .await
        .expect_ok("list the vector points")
        .iter()
        .map(|p| p.id)
        .collect()
}

/// The sequence numbers each of the text index's documents covers, sorted.
async fn text_ranges(text: &dyn TextIndex, block_scope: &Scope, ids: &BTreeSet<Uuid>) -> Vec<u64> {
    let ids: Vec<Uuid> = ids.iter().copied().collect();
    let documents = text
        .get(block_scope, &ids)
        .await
        .expect_ok("get the documents");
    assert_eq!(
        documents.len(),
        ids.len(),
        "every batch the vector store holds is in the text index too"
    );
    let mut covered = Vec::new();
    for d in &documents {
        let first = d.payload.get("first_seq").and_then(Value::as_u64);
        let last = d.payload.get("last_seq").and_then(Value::as_u64);
        let (Some(first), Some(last)) = (first, last) else {
            panic!(
                "document {} has no first_seq and last_seq: {:?}",
                d.id, d.payload
            );
        };
        covered.extend(first..=last);
    }
    covered.sort_unstable();
    covered
}

/// What the memory shows for a question naming `RARE[i]`.
async fn recall(s: &Session, i: usize) -> String {
    shown_for(&s.memory, &format!("what did we say about {}?", RARE[i])).await
}

/// Two sessions of one tenant put the same twelve messages, one at a time, through memories
/// whose vector block recalls by a hybrid retriever (flat dense side, the engine's `text` index
/// as lexical side): every archived message is in exactly one batch, the same in both indexes;
/// flushing again, or from a new memory over the same stores, adds nothing; a question naming a
/// flushed message's rare word recalls that message. A [`Forgetter`] with the history, the
/// sessions, the vector store and `text` forgets the first session: both indexes lose its
/// batches (the receipt counts them), the block recalls nothing there, and the second session
/// keeps everything.
pub async fn hybrid_memory_flushes_once_recalls_and_forgets(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    text: Arc<dyn TextIndex>,
) {
    let vectors = Arc::new(InMemoryVectorStore::new());
    let hybrid = Arc::new(HybridRetriever::new(
        Arc::new(DenseRetriever::new(Arc::new(FlatEmbedder), vectors.clone())),
        Arc::new(LexicalRetriever::new(text.clone())),
    ));
    let block = Arc::new(
        VectorMemoryBlock::with_retriever(hybrid)
            .with_similarity_top_k(1)
            .with_retrieval_context_window(1),
    );
    let first = random_scope();
    let second = Scope::new(first.tenant().clone(), random_session_id());
    let sessions_under_test = [
        session(first, &history, &sessions, &block),
        session(second, &history, &sessions, &block),
    ];
    let mut batches = Vec::new();
    for s in &sessions_under_test {
        let mut deliveries = 0;
        for i in 0..RARE.len() {
            let report = s.memory.put(message(i)).await.expect_ok("put a message");
            deliveries += report.deliveries;
        }
        let points = point_ids(&vectors, &s.block_scope).await;
        assert!(
            points.len() >= 2,
            "twelve messages of about 50 tokens, flushed 100 tokens at a time, make several \
             batches: {}",
            points.len()
        );
        assert_eq!(points.len(), deliveries, "one point per block delivery");
        assert_eq!(
            text.count(&s.block_scope).await.expect_ok("count"),
            points.len() as u64,
            "the text index holds one document per batch, as the vector store"
        );
        let archived = archived_seqs(history.as_ref(), &s.scope).await;
        assert_eq!(
            text_ranges(text.as_ref(), &s.block_scope, &points).await,
            archived,
            "each archived message is in exactly one batch"
        );
        assert_eq!(
            s.memory.flush().await.expect_ok("flush again"),
            FlushReport::default(),
            "a flush within the threshold does nothing"
        );
        let restarted = session(s.scope.clone(), &history, &sessions, &s.block);
        restarted
            .memory
            .flush()
            .await
            .expect_ok("flush from a new memory");
        assert_eq!(
            point_ids(&vectors, &s.block_scope).await,
            points,
            "a new memory over the same stores flushes nothing again"
        );
        assert_eq!(
            text.count(&s.block_scope).await.expect_ok("count"),
            points.len() as u64,
            "a new memory over the same stores adds no document"
        );
        // Recall: the question's rare word picks the batch (the dense side ranks all alike).
        for i in [1, 4] {
            assert!(
                archived.len() > i,
                "message {i} was flushed: archived {archived:?}"
            );
            let shown = recall(s, i).await;
            assert!(
                shown.contains(&message(i).text()),
                "a question naming {} recalls its batch: {shown}",
                RARE[i]
            );
            let found = s
                .block
                .search(&s.scope, RARE[i], 1)
                .await
                .expect_ok("search the block");
            assert!(
                found
                    .first()
                    .and_then(|r| r.text())
                    .is_some_and(|t| t.contains(&message(i).text())),
                "the block's search finds the batch of {}: {found:?}",
                RARE[i]
            );
        }
        batches.push(points);
    }

    let [forgotten, kept] = &sessions_under_test;
    let forgetter = Forgetter::new()
        .history(history.clone())
        .sessions(sessions.clone())
        .vectors(vectors.clone())
        .texts(text.clone());
    let filter = ScopeFilter::tenant(forgotten.scope.tenant().clone())
        .with_session(forgotten.scope.session_id().clone());
    let dry = forgetter
        .forget(&filter, ForgetMode::DryRun)
        .await
        .expect_ok("dry run");
    let receipt = forgetter
        .forget(&filter, ForgetMode::Delete)
        .await
        .expect_ok("forget the first session");
    for name in ["vectors", "texts"] {
        let items = receipt
            .stores
            .iter()
            .find(|r| r.store == name)
            .map(|r| r.items);
        assert_eq!(
            items,
            Some(batches[0].len() as u64),
            "the {name} receipt counts the forgotten session's batches: {receipt}"
        );
        let counted = dry.stores.iter().find(|r| r.store == name).map(|r| r.items);
        assert_eq!(
            counted, items,
            "the dry run counted what the forget deleted"
        );
    }
    assert!(
        point_ids(&vectors, &forgotten.block_scope).await.is_empty(),
        "the vector store lost the forgotten session's batches"
    );
    assert_eq!(
        text.count(&forgotten.block_scope).await.expect_ok("count"),
        0,
        "the text index lost the forgotten session's batches"
    );
    let ids: Vec<Uuid> = batches[0].iter().copied().collect();
    assert!(
        text.get(&forgotten.block_scope, &ids)
            .await
            .expect_ok("get")
            .is_empty(),
        "no forgotten document is read back"
    );
    assert!(
        forgotten
            .block
            .search(&forgotten.scope, RARE[1], 5)
            .await
            .expect_ok("search")
            .is_empty(),
        "the block finds nothing in the forgotten session"
    );
    assert_eq!(
        point_ids(&vectors, &kept.block_scope).await,
        batches[1],
        "the other session keeps its points"
    );
    assert_eq!(
        text.count(&kept.block_scope).await.expect_ok("count"),
        batches[1].len() as u64,
        "the other session keeps its documents"
    );
    assert!(
        recall(kept, 4).await.contains(&message(4).text()),
        "the other session still recalls"
    );
    let again = forgetter
        .forget(&filter, ForgetMode::Delete)
        .await
        .expect_ok("forget again");
    assert_eq!(
        again.total_items(),
        0,
        "a second forget finds nothing: {again}"
    );
}
