//! [`LexicalRetriever`]: items found by their words, through a [`TextIndex`].

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryItem, RetrievalQuery, Retrieved, Retriever, retrieved_across};
use crate::error::Result;
use crate::lexical::{MAX_QUERY_BYTES, MAX_TEXT_BYTES, TextDocument, TextIndex, TextQuery};
use crate::scope::{Scope, ScopeFilter, ScopedHit};

/// Keeps each item as a document of a [`TextIndex`] and answers a query with the documents
/// whose words match it best (BM25 or the engine's full-text ranking). An item sharing no word
/// with the query is not retrieved, so a search may return fewer than `top_k` items.
#[derive(Debug, Clone)]
pub struct LexicalRetriever {
    index: Arc<dyn TextIndex>,
}

impl LexicalRetriever {
    /// A retriever over `index`.
    pub fn new(index: Arc<dyn TextIndex>) -> Self {
        Self { index }
    }

    /// The text index it writes to.
    pub fn text_index(&self) -> &Arc<dyn TextIndex> {
        &self.index
    }
}

/// `text` as a text index accepts it: NUL characters become spaces, and at most `max` bytes
/// are kept (cut at a character boundary), the first ones or, with `keep_end`, the last ones.
/// A memory item or query is never refused for its length: what is searched by words is its
/// beginning (an item) or its newest words (a query, whose end is the latest message).
fn indexable(text: &str, max: usize, keep_end: bool) -> String {
    let kept = if text.len() <= max {
        text
    } else if keep_end {
        let mut start = text.len().saturating_sub(max);
        while !text.is_char_boundary(start) {
            start = start.saturating_add(1);
        }
        text.get(start..).unwrap_or_default()
    } else {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end = end.saturating_sub(1);
        }
        text.get(..end).unwrap_or_default()
    };
    kept.replace('\0', " ")
}

#[async_trait]
impl Retriever for LexicalRetriever {
    async fn index(&self, scope: &Scope, items: &[MemoryItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let documents: Vec<TextDocument> = items
            .iter()
            .map(|item| TextDocument {
                id: item.id,
                text: indexable(&item.indexed_text(), MAX_TEXT_BYTES, false),
                payload: item.stored_payload(),
            })
            .collect();
        self.index.upsert(scope, &documents).await
    }

    async fn retrieve(&self, scope: &Scope, query: &RetrievalQuery) -> Result<Vec<Retrieved>> {
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let documents = self.index.search(scope, &text_query(query)).await?;
        Ok(documents.into_iter().map(Retrieved::from).collect())
    }

    async fn retrieve_matching(
        &self,
        filter: &ScopeFilter,
        query: &RetrievalQuery,
    ) -> Result<Vec<ScopedHit<Retrieved>>> {
        let search = text_query(query);
        retrieved_across(query, self.index.search_matching(filter, &search)).await
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.index.delete(scope, ids).await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.index.clear(scope).await
    }
}

/// The text search for `query`: its text made indexable, its `top_k` and filter.
fn text_query(query: &RetrievalQuery) -> TextQuery {
    let mut search = TextQuery::new(indexable(&query.text, MAX_QUERY_BYTES, true), query.top_k);
    search.filter.clone_from(&query.filter);
    search
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_and_nul_characters_become_indexable() {
        assert_eq!(indexable("a\0b", 10, false), "a b");
        // 'é' is two bytes: a cut never splits it.
        assert_eq!(indexable("éééé", 3, false), "é");
        assert_eq!(indexable("éééé", 3, true), "é");
        assert_eq!(indexable("old words, newest", 6, true), "newest");
        assert_eq!(indexable("first words later", 5, false), "first");
        let long = "word ".repeat(MAX_QUERY_BYTES);
        assert!(indexable(&long, MAX_QUERY_BYTES, true).len() <= MAX_QUERY_BYTES);
    }
}
