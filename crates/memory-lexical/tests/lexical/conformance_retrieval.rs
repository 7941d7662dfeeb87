//! The memory-testkit `Retriever` suite on retrievers over tantivy, in memory and in a
//! directory: the lexical retriever, and hybrid retrievers (dense side: `WordHashEmbedder`
//! over the in-memory vector store) with the default fusion and with reciprocal rank fusion.
//! Then a `Memory` whose vector block recalls through a hybrid retriever over tantivy, flushed
//! and forgotten (`memory_testkit::hybrid_memory`), over the in-memory history and session
//! stores.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use memory_core::retrieval::{DenseRetriever, Fusion, HybridRetriever, LexicalRetriever};
use memory_core::{InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore};
use memory_lexical::TantivyTextIndex;
use memory_testkit::memory::WordHashEmbedder;

use crate::support;

/// An index in a fresh directory under Cargo's test scratch directory.
async fn in_a_directory() -> TantivyTextIndex {
    support::index_in_a_directory("tantivy-retrieval-").await
}

fn hybrid(index: TantivyTextIndex, fusion: Fusion) -> HybridRetriever {
    HybridRetriever::new(
        Arc::new(DenseRetriever::new(
            Arc::new(WordHashEmbedder),
            Arc::new(InMemoryVectorStore::new()),
        )),
        Arc::new(LexicalRetriever::new(Arc::new(index))),
    )
    .with_fusion(fusion)
}

fn rrf() -> Fusion {
    Fusion::reciprocal_rank(memory_core::retrieval::DEFAULT_RRF_K)
}

memory_testkit::retriever_tests!(mod tantivy_in_memory_lexical, async {
    LexicalRetriever::new(Arc::new(TantivyTextIndex::in_memory().unwrap()))
});
memory_testkit::retriever_tests!(mod tantivy_in_memory_hybrid_default, async {
    hybrid(TantivyTextIndex::in_memory().unwrap(), Fusion::default())
});
memory_testkit::retriever_tests!(mod tantivy_in_memory_hybrid_rrf, async {
    hybrid(TantivyTextIndex::in_memory().unwrap(), rrf())
});
memory_testkit::retriever_tests!(mod tantivy_in_a_directory_lexical, async {
    LexicalRetriever::new(Arc::new(in_a_directory().await))
});
memory_testkit::retriever_tests!(mod tantivy_in_a_directory_hybrid_default, async {
    hybrid(in_a_directory().await, Fusion::default())
});
memory_testkit::retriever_tests!(mod tantivy_in_a_directory_hybrid_rrf, async {
    hybrid(in_a_directory().await, rrf())
});

async fn hybrid_memory(index: TantivyTextIndex) {
    memory_testkit::hybrid_memory::hybrid_memory_flushes_once_recalls_and_forgets(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
        Arc::new(index),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_memory_on_tantivy_in_memory() {
    hybrid_memory(TantivyTextIndex::in_memory().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_memory_on_tantivy_in_a_directory() {
    hybrid_memory(in_a_directory().await).await;
}
