//! Lexical and hybrid retrieval through the facade: `agent_memory::open(url)` gives a SQL
//! URL's text index (`Stores::text_index`), and the memory-testkit `Retriever` suite runs on
//! retrievers over it (lexical; hybrid with the default fusion and with reciprocal rank fusion,
//! the dense side `WordHashEmbedder` over the in-memory vector store). Then, on each SQL engine
//! (a store of the test's own: `memory_testkit::engines::TestStore`), a `Memory` recalling
//! through a hybrid retriever over the opened stores' text index, flushed and forgotten
//! (`memory_testkit::hybrid_memory`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use memory_core::TextIndex;
use memory_core::retrieval::{
    DEFAULT_RRF_K, DenseRetriever, Fusion, HybridRetriever, LexicalRetriever,
};
use memory_testkit::engines::TestStore;
use memory_testkit::memory::WordHashEmbedder;

/// The text index of a fresh in-memory SQLite database, opened by URL.
async fn text_index() -> Arc<dyn TextIndex> {
    agent_memory::open("sqlite::memory:")
        .await
        .unwrap()
        .text_index()
        .expect("a SQL URL has a text index")
}

async fn hybrid(fusion: Fusion) -> HybridRetriever {
    HybridRetriever::new(
        Arc::new(DenseRetriever::new(
            Arc::new(WordHashEmbedder),
            Arc::new(memory_core::InMemoryVectorStore::new()),
        )),
        Arc::new(LexicalRetriever::new(text_index().await)),
    )
    .with_fusion(fusion)
}

memory_testkit::retriever_tests!(mod facade_sqlite_lexical, async {
    LexicalRetriever::new(text_index().await)
});
memory_testkit::retriever_tests!(mod facade_sqlite_hybrid_default, async {
    hybrid(Fusion::default()).await
});
memory_testkit::retriever_tests!(mod facade_sqlite_hybrid_rrf, async {
    hybrid(Fusion::reciprocal_rank(DEFAULT_RRF_K)).await
});

/// The hybrid memory check on the stores `agent_memory::open` gives for `store`'s URL.
async fn hybrid_memory(store: &TestStore) {
    let stores = agent_memory::open(&store.url).await.unwrap();
    let text = stores.text_index().expect("a SQL URL has a text index");
    memory_testkit::hybrid_memory::hybrid_memory_flushes_once_recalls_and_forgets(
        stores.history.clone(),
        stores.sessions.clone(),
        text,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hybrid_memory_on_a_sqlite_file() {
    hybrid_memory(&TestStore::sqlite()).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hybrid_memory_on_postgres() {
    hybrid_memory(&TestStore::postgres("retrieval")).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hybrid_memory_on_mariadb() {
    hybrid_memory(&TestStore::mysql("retrieval")).await;
}
