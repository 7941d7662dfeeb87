//! The retriever suite and the hybrid memory check catch broken retrievers and indexes: each
//! breaks one line of the contract and the check for that line must fail with the message that
//! names it; the whole suite passes on retrievers over the reference text index.

use std::sync::Arc;

use async_trait::async_trait;
use memory_core::retrieval::{
    DenseRetriever, Fusion, HybridRetriever, LexicalRetriever, MemoryItem, RetrievalQuery,
    Retrieved, Retriever,
};
use memory_core::{
    InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore, Result, Scope, TextIndex,
    TextQuery,
};
use memory_testkit::__private::block_on;
use memory_testkit::hybrid_memory::hybrid_memory_flushes_once_recalls_and_forgets;
use memory_testkit::memory::WordHashEmbedder;
use memory_testkit::retrieval;
use memory_testkit::text_reference::{Flaw, ReferenceTextIndex};
use uuid::Uuid;

fn lexical(index: ReferenceTextIndex) -> LexicalRetriever {
    LexicalRetriever::new(Arc::new(index))
}

fn hybrid(index: ReferenceTextIndex) -> HybridRetriever {
    HybridRetriever::new(
        Arc::new(DenseRetriever::new(
            Arc::new(WordHashEmbedder),
            Arc::new(InMemoryVectorStore::new()),
        )),
        Arc::new(lexical(index)),
    )
}

/// Searches its index with the query text as given: no cut to the index's query limit, no NUL
/// replaced (what `LexicalRetriever` does so that no query is refused).
#[derive(Debug)]
struct LiteralQueries(LexicalRetriever, Arc<ReferenceTextIndex>);

impl LiteralQueries {
    fn new() -> Self {
        let index = Arc::new(ReferenceTextIndex::new());
        Self(LexicalRetriever::new(index.clone()), index)
    }
}

#[async_trait]
impl Retriever for LiteralQueries {
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
        self.0.index(scope, items).await
    }
    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
        let mut search = TextQuery::new(query.text.clone(), query.top_k);
        search.filter.clone_from(&query.filter);
        Ok(self
            .1
            .search(scope, &search)
            .await?
            .into_iter()
            .map(Retrieved::from)
            .collect())
    }
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.0.delete(scope, ids).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
}

#[test]
fn every_check_passes_on_lexical_and_hybrid_retrievers_over_the_reference_index() {
    block_on(async {
        memory_testkit::run_all_retriever_checks(Arc::new(lexical(ReferenceTextIndex::new())))
            .await;
        memory_testkit::run_all_retriever_checks(Arc::new(
            hybrid(ReferenceTextIndex::new()).with_fusion(Fusion::reciprocal_rank(60.0)),
        ))
        .await;
    });
}

#[test]
#[should_panic(expected = "returned the shared id 6 times, not once")]
fn a_lexical_retriever_searching_every_scope_fails_scope_isolation() {
    block_on(retrieval::scopes_differing_in_one_part_are_isolated(
        &lexical(ReferenceTextIndex::new().with_flaw(Flaw::SearchesEveryScope)),
    ));
}

#[test]
#[should_panic(expected = "returned an item of another scope")]
fn a_hybrid_retriever_searching_every_scope_fails_the_hostile_text_check() {
    block_on(retrieval::hostile_text_is_words_within_the_scope(&hybrid(
        ReferenceTextIndex::new().with_flaw(Flaw::SearchesEveryScope),
    )));
}

#[test]
#[should_panic(expected = "retrieve: expected success")]
fn a_retriever_refusing_long_or_nul_queries_fails_the_hostile_text_check() {
    block_on(retrieval::hostile_text_is_words_within_the_scope(
        &LiteralQueries::new(),
    ));
}

#[test]
#[should_panic(expected = "delete counted ids that did not exist")]
fn a_retriever_counting_missing_ids_fails_the_delete_check() {
    /// Counts every id it is asked to delete.
    #[derive(Debug)]
    struct CountsEveryId(LexicalRetriever);

    #[async_trait]
    impl Retriever for CountsEveryId {
        async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
            self.0.index(scope, items).await
        }
        async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
            self.0.retrieve(scope, query).await
        }
        async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
            self.0.delete(scope, ids).await?;
            Ok(ids.len() as u64)
        }
        async fn clear(&self, scope: &Scope) -> Result<u64> {
            self.0.clear(scope).await
        }
    }
    block_on(async {
        let r = CountsEveryId(lexical(ReferenceTextIndex::new()));
        retrieval::delete_and_clear_count(&r).await;
    });
}

#[test]
fn the_hybrid_memory_check_passes_on_the_reference_index() {
    block_on(hybrid_memory_flushes_once_recalls_and_forgets(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
        Arc::new(ReferenceTextIndex::new()),
    ));
}

#[test]
#[should_panic(expected = "dry run: expected success")]
fn the_hybrid_memory_check_fails_a_text_index_the_forgetter_cannot_reach() {
    block_on(hybrid_memory_flushes_once_recalls_and_forgets(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
        Arc::new(ReferenceTextIndex::new().without_deletes_matching()),
    ));
}

#[test]
#[should_panic(expected = "recalls its batch")]
fn the_hybrid_memory_check_fails_an_index_that_finds_nothing() {
    // The dense side ranks every batch alike: recall rests on the text index alone.
    block_on(hybrid_memory_flushes_once_recalls_and_forgets(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
        Arc::new(FindsNothing(ReferenceTextIndex::new())),
    ));
}

/// Stores documents and finds none.
#[derive(Debug)]
struct FindsNothing(ReferenceTextIndex);

#[async_trait]
impl memory_core::LayeredTextIndex for FindsNothing {
    type Inner = ReferenceTextIndex;
    fn inner(&self) -> &ReferenceTextIndex {
        &self.0
    }
    async fn search(
        &self,
        _scope: &Scope,
        _query: &TextQuery,
    ) -> Result<Vec<memory_core::ScoredDocument>> {
        Ok(Vec::new())
    }
}
