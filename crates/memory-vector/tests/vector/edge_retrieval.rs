//! The memory-testkit `Retriever` suite with the embedded Qdrant engine as the dense side:
//! `DenseRetriever` (`WordHashEmbedder` over `QdrantEdgeStore`) alone, and hybrid retrievers
//! over it and the testkit's reference text index, with the default fusion and with
//! reciprocal rank fusion.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use memory_core::retrieval::{
    DEFAULT_RRF_K, DenseRetriever, Fusion, HybridRetriever, LexicalRetriever,
};
use memory_testkit::memory::WordHashEmbedder;
use memory_testkit::text_reference::ReferenceTextIndex;
use memory_vector::QdrantEdgeStore;

/// A dense retriever over a store in a fresh directory under Cargo's test scratch directory
/// (removed by `cargo clean`).
async fn dense() -> DenseRetriever {
    let dir = tempfile::Builder::new()
        .prefix("edge-retrieval-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map(tempfile::TempDir::keep)
        .unwrap();
    DenseRetriever::new(
        Arc::new(WordHashEmbedder),
        Arc::new(QdrantEdgeStore::open(dir).await.unwrap()),
    )
}

async fn hybrid(fusion: Fusion) -> HybridRetriever {
    HybridRetriever::new(
        Arc::new(dense().await),
        Arc::new(LexicalRetriever::new(Arc::new(ReferenceTextIndex::new()))),
    )
    .with_fusion(fusion)
}

memory_testkit::retriever_tests!(mod qdrant_edge_dense, async { dense().await });
memory_testkit::retriever_tests!(mod qdrant_edge_hybrid_default, async {
    hybrid(Fusion::default()).await
});
memory_testkit::retriever_tests!(mod qdrant_edge_hybrid_rrf, async {
    hybrid(Fusion::reciprocal_rank(DEFAULT_RRF_K)).await
});
