//! The memory-testkit `Retriever` suite on retrievers over `SqlTextIndex` (SQLite in memory
//! and in a file, the PostgreSQL server, the MariaDB/MySQL server): the lexical retriever, and
//! hybrid retrievers (dense side: `WordHashEmbedder` over the in-memory vector store) with the
//! default fusion and with reciprocal rank fusion. Then, on each engine, a `Memory` whose
//! vector block recalls through a hybrid retriever over the engine's text index, with the
//! engine's history and session stores, flushed and forgotten
//! (`memory_testkit::hybrid_memory`). Every check writes under its own random scopes, so the
//! server suites share the tables of [`support::shared_prefix`] and run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::retrieval::{DenseRetriever, Fusion, HybridRetriever, LexicalRetriever};
use memory_core::{InMemoryVectorStore, TextIndex};
use memory_sql::SqlStore;
use memory_testkit::memory::WordHashEmbedder;

use crate::support;

fn lexical(store: &SqlStore) -> LexicalRetriever {
    LexicalRetriever::new(Arc::new(store.text_index().unwrap()))
}

fn hybrid(store: &SqlStore, fusion: Fusion) -> HybridRetriever {
    HybridRetriever::new(
        Arc::new(DenseRetriever::new(
            Arc::new(WordHashEmbedder),
            Arc::new(InMemoryVectorStore::new()),
        )),
        Arc::new(lexical(store)),
    )
    .with_fusion(fusion)
}

fn rrf() -> Fusion {
    Fusion::reciprocal_rank(memory_core::retrieval::DEFAULT_RRF_K)
}

async fn hybrid_memory(store: SqlStore) {
    let text: Arc<dyn TextIndex> = Arc::new(store.text_index().unwrap());
    memory_testkit::hybrid_memory::hybrid_memory_flushes_once_recalls_and_forgets(
        Arc::new(store.clone()),
        Arc::new(store),
        text,
    )
    .await;
}

/// One module per engine: the retriever suite with the lexical, hybrid (default fusion) and
/// hybrid (RRF) retrievers over the engine's text index, and the hybrid memory check.
macro_rules! engine {
    ($feature:literal, $module:ident, $store:expr) => {
        #[cfg(feature = $feature)]
        mod $module {
            use super::*;

            async fn store() -> SqlStore {
                $store
            }
            memory_testkit::retriever_tests!(mod lexical, async { super::lexical(&store().await) });
            memory_testkit::retriever_tests!(mod hybrid_default, async {
                super::hybrid(&store().await, Fusion::default())
            });
            memory_testkit::retriever_tests!(mod hybrid_rrf, async {
                super::hybrid(&store().await, rrf())
            });
            #[test]
            fn hybrid_memory_flushes_once_recalls_and_forgets() {
                memory_testkit::__private::block_on(async { hybrid_memory(store().await).await });
            }
        }
    };
}

engine!(
    "sqlite",
    sqlite_memory,
    SqlStore::in_memory().await.unwrap()
);
engine!("sqlite", sqlite_file, support::sqlite_file_store().await);
engine!("postgres", postgres, support::postgres_store().await);
engine!("mysql", mysql, support::mysql_store().await);
