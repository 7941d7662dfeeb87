//! [`TextIndex`]: scoped text documents with payloads, searched by words (lexical retrieval).
//!
//! The lexical twin of [`VectorStore`](crate::VectorStore): the same scopes, ids, payloads,
//! filters and optional cross-scope operations, but a document is text and a search ranks
//! documents by how well their words match the query's (BM25 or the engine's own full-text
//! ranking). Backends: tantivy (in process, in memory or in a directory), SQLite FTS5,
//! PostgreSQL full-text search and MariaDB/MySQL `FULLTEXT` indexes.

mod layered;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Result;
use crate::scoped_index::scoped_index_trait;
use crate::vector::PayloadFilter;

pub use layered::LayeredTextIndex;

/// The longest document text, in bytes, a [`TextIndex`] must accept (1 MiB). A longer text is
/// [`InvalidInput`](crate::ErrorKind::InvalidInput).
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The longest query text, in bytes (16 KiB). A longer query is
/// [`InvalidInput`](crate::ErrorKind::InvalidInput).
pub const MAX_QUERY_BYTES: usize = 16 << 10;

/// One document: an id, its text and a JSON payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextDocument {
    /// The document's id, unique within its scope.
    pub id: Uuid,
    /// The text that is indexed and matched.
    pub text: String,
    /// Free-form payload, returned with search results and matched by filters.
    pub payload: serde_json::Map<String, serde_json::Value>,
}

/// A lexical search.
#[derive(Debug, Clone, PartialEq)]
pub struct TextQuery {
    /// The query's text; its words are matched against the documents' words.
    pub text: String,
    /// How many results at most.
    pub top_k: usize,
    /// Only documents whose payload matches.
    pub filter: Option<PayloadFilter>,
}

impl TextQuery {
    /// The `top_k` best matches for `text`.
    pub fn new(text: impl Into<String>, top_k: usize) -> Self {
        Self {
            text: text.into(),
            top_k,
            filter: None,
        }
    }

    /// Restricts the search to documents matching `filter`.
    #[must_use]
    pub fn with_filter(mut self, filter: PayloadFilter) -> Self {
        self.filter = Some(filter);
        self
    }
}

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredDocument {
    /// The document's id.
    pub id: Uuid,
    /// The engine's relevance score: higher is better, positive for every result. Scores rank
    /// the results of one search; they are not comparable across engines or searches.
    pub score: f32,
    /// The document's payload.
    pub payload: serde_json::Map<String, serde_json::Value>,
}

scoped_index_trait! {
    /// Scoped text documents searched by words.
    ///
    /// An index that wraps another and changes only some of its calls implements
    /// [`LayeredTextIndex`] instead: the rest is forwarded.
    ///
    /// # Behavior
    /// Each method states its contract in its own `# Behavior` section (the conformance suite in
    /// memory-testkit has a check per line of them). The rules that span the methods:
    /// - Every call names a scope; a document belongs to one scope, and no call on one scope reads
    ///   or changes another's documents, whatever query or filter is passed. Ids are unique within
    ///   a scope: the same id in two scopes is two documents. A scope never written is empty.
    /// - Writes are visible to every read that starts after the write returned.
    /// - [`capabilities`](TextIndex::capabilities) is constant and tells the truth; an absent
    ///   optional operation returns [`Unsupported`](crate::ErrorKind::Unsupported) and changes
    ///   nothing.
    pub trait TextIndex with TextCapabilities, a "text index" of "document" items holding "text" {
        /// Inserts or replaces documents.
        ///
        /// # Behavior
        /// Inserts or replaces documents by id within the scope (a replaced document takes the new
        /// text and payload, and its old words no longer match); a retried upsert of the same
        /// documents changes nothing; an empty batch is a no-op. A text longer than
        /// [`MAX_TEXT_BYTES`] or holding a NUL character is
        /// [`InvalidInput`](crate::ErrorKind::InvalidInput), and nothing of that batch is written.
        /// An empty text is allowed (it matches nothing).
        async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()>;

        /// The best matches for the query.
        ///
        /// # Behavior
        /// Returns at most `top_k` documents *of the scope* (none for a `top_k` of 0, and none for
        /// a query with no word, e.g. only punctuation) by decreasing score, ties by ascending id,
        /// each with a positive score and its payload. Only documents that share at least one word
        /// with the query are returned (after the engine's own normalisation: case folding always;
        /// stemming and stop words as the engine documents), and only those whose payload matches
        /// the query's [`PayloadFilter`]. A document holding more of the query's rare words ranks
        /// above one holding fewer. Query text is words, never syntax: quotes, operators (`AND`,
        /// `-`, `*`, `:` …) and other punctuation in it are not interpreted and never cause an
        /// error. A query longer than [`MAX_QUERY_BYTES`] is `InvalidInput`; a filter the backend
        /// cannot express is [`Unsupported`](crate::ErrorKind::Unsupported), never a wrong answer.
        async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>>;
    }
}

/// Checks a batch of documents against the [`TextIndex`] limits: every text at most
/// [`MAX_TEXT_BYTES`] and free of NUL characters.
///
/// # Errors
/// [`InvalidInput`](crate::ErrorKind::InvalidInput) naming the first bad document.
pub fn check_documents(documents: &[TextDocument]) -> Result<()> {
    for d in documents {
        if d.text.len() > MAX_TEXT_BYTES {
            return Err(crate::Error::invalid_input(format!(
                "the text of document {} is {} bytes, more than the {MAX_TEXT_BYTES} a text index accepts",
                d.id,
                d.text.len()
            )));
        }
        if d.text.contains('\0') {
            return Err(crate::Error::invalid_input(format!(
                "the text of document {} holds a NUL character",
                d.id
            )));
        }
    }
    Ok(())
}

/// Checks a query against the [`TextIndex`] limits.
///
/// # Errors
/// [`InvalidInput`](crate::ErrorKind::InvalidInput) for a query longer than
/// [`MAX_QUERY_BYTES`].
pub fn check_query(query: &TextQuery) -> Result<()> {
    if query.text.len() > MAX_QUERY_BYTES {
        return Err(crate::Error::invalid_input(format!(
            "the query is {} bytes, more than the {MAX_QUERY_BYTES} a text search accepts",
            query.text.len()
        )));
    }
    Ok(())
}

/// The query's words as every backend should see them: lowercased runs of letters and digits
/// (Unicode), in order, duplicates kept. Backends that build their own query syntax (FTS5
/// `MATCH`, `to_tsquery`, `MATCH … AGAINST`) quote these words, so no query text is ever
/// interpreted as syntax.
pub fn query_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_drop_syntax() {
        assert_eq!(
            query_words("\"Caroline\" AND -melanie* : pottery's  NEAR(x)"),
            ["caroline", "and", "melanie", "pottery", "s", "near", "x"]
        );
        assert!(query_words("?!  ...").is_empty());
    }

    #[test]
    fn limits_are_checked() {
        let long = TextDocument {
            id: Uuid::nil(),
            text: "a".repeat(MAX_TEXT_BYTES.saturating_add(1)),
            payload: serde_json::Map::new(),
        };
        assert!(check_documents(&[long]).is_err());
        let nul = TextDocument {
            id: Uuid::nil(),
            text: "a\0b".into(),
            payload: serde_json::Map::new(),
        };
        assert!(check_documents(&[nul]).is_err());
        assert!(
            check_query(&TextQuery::new(
                "x".repeat(MAX_QUERY_BYTES.saturating_add(1)),
                3
            ))
            .is_err()
        );
        assert!(check_query(&TextQuery::new("fine", 3)).is_ok());
    }
}
