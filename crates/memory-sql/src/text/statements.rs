//! The statements of the text index, rendered once per dialect and prefix: the search, count
//! and clear texts, and the upsert and engine query texts built per call.

use std::sync::Arc;

use crate::dialect::{Backend, Dialect};
use crate::prefix::TablePrefix;

/// The fixed statements of the text index, rendered for one dialect and prefix.
pub(super) struct TextSql {
    pub(super) backend: Backend,
    /// Bound values per upserted row.
    pub(super) params_per_row: usize,
    pub(super) search: Arc<str>,
}

impl TextSql {
    pub(super) fn new(dialect: Dialect, prefix: &TablePrefix) -> Self {
        let backend = dialect.backend;
        Self {
            backend,
            params_per_row: if backend == Backend::MySql { 10 } else { 9 },
            search: Arc::from(dialect.render(prefix, &search_template(backend, &["scope_key"]))),
        }
    }

    /// The search of the documents whose scope `columns` equal the bound values (the columns a
    /// [`ScopeFilter`](memory_core::ScopeFilter) fixes), a template.
    pub(super) fn search_where(&self, columns: &[&str]) -> String {
        search_template(self.backend, columns)
    }

    /// The upsert of `rows` documents (a template).
    pub(super) fn upsert(&self, rows: usize) -> String {
        let mysql = self.backend == Backend::MySql;
        let one = if mysql {
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        } else {
            "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
        };
        let values = vec![one; rows].join(", ");
        let columns = if mysql {
            "(scope_key, tenant, user_id, agent_id, source, session_id, doc_id, body, words, payload)"
        } else {
            "(scope_key, tenant, user_id, agent_id, source, session_id, doc_id, body, payload)"
        };
        match self.backend {
            Backend::Sqlite => format!(
                "INSERT INTO {{prefix}}texts {columns} VALUES {values} \
                 ON CONFLICT (scope_key, doc_id) DO UPDATE SET \
                 body = excluded.body, payload = excluded.payload \
                 WHERE {{prefix}}texts.body IS NOT excluded.body \
                 OR {{prefix}}texts.payload IS NOT excluded.payload"
            ),
            Backend::Postgres => format!(
                "INSERT INTO {{prefix}}texts AS t {columns} VALUES {values} \
                 ON CONFLICT (scope_key, doc_id) DO UPDATE SET \
                 body = EXCLUDED.body, payload = EXCLUDED.payload \
                 WHERE t.body IS DISTINCT FROM EXCLUDED.body \
                 OR t.payload IS DISTINCT FROM EXCLUDED.payload"
            ),
            Backend::MySql => format!(
                "INSERT INTO {{prefix}}texts {columns} VALUES {values} \
                 ON DUPLICATE KEY UPDATE body = VALUES(body), words = VALUES(words), \
                 payload = VALUES(payload)"
            ),
        }
    }

    /// The query as the engine reads it, from distinct words (letters and digits only, so
    /// nothing in them is syntax): FTS5 strings joined by `OR`, `to_tsquery` lexemes joined
    /// by `|`, or words joined by spaces (natural language mode: any word).
    pub(super) fn engine_query(&self, words: &[String]) -> String {
        match self.backend {
            Backend::Sqlite => words
                .iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(" OR "),
            Backend::Postgres => words
                .iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" | "),
            Backend::MySql => words.join(" "),
        }
    }
}

/// The ranked search of the documents matching the engine query whose `columns` equal the
/// bound values: columns id, payload, score and scope key; by decreasing score, then id, then
/// scope key; a page (`LIMIT ? OFFSET ?`). Bound in order: the engine query (twice on MySQL),
/// the columns' values, the limit and the offset.
fn search_template(backend: Backend, columns: &[&str]) -> String {
    let conditions = |column_prefix: &str| {
        columns
            .iter()
            .map(|c| format!("{column_prefix}{c} = ?"))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    match backend {
        // `bm25()` is negative, lower for better matches. The unary `+` keeps SQLite from
        // answering the scope condition from the (scope_key, doc_id) index and then running
        // the full-text query once per row of the scope (the plan the bundled SQLite chose:
        // a p50 of 122 ms for a 600-row scope, 1 ms with the `+`; docs/quality.md): the
        // `MATCH` runs once and the scope condition filters its rows.
        Backend::Sqlite => format!(
            "SELECT t.doc_id, t.payload, -bm25({{prefix}}texts_fts) AS score, t.scope_key \
             FROM {{prefix}}texts_fts JOIN {{prefix}}texts t ON t.rid = {{prefix}}texts_fts.rowid \
             WHERE {{prefix}}texts_fts MATCH ? AND {} \
             ORDER BY score DESC, t.doc_id, t.scope_key LIMIT ? OFFSET ?",
            conditions("+t.")
        ),
        Backend::Postgres => format!(
            "SELECT doc_id, payload, CAST(ts_rank(words, q) AS DOUBLE PRECISION) AS score, \
             scope_key FROM {{prefix}}texts, to_tsquery('english', ?) AS q \
             WHERE {} AND words @@ q \
             ORDER BY score DESC, doc_id, scope_key LIMIT ? OFFSET ?",
            conditions("")
        ),
        Backend::MySql => format!(
            "SELECT doc_id, payload, MATCH (words) AGAINST (? IN NATURAL LANGUAGE MODE) AS score, \
             scope_key FROM {{prefix}}texts \
             WHERE MATCH (words) AGAINST (? IN NATURAL LANGUAGE MODE) AND {} \
             ORDER BY score DESC, doc_id, scope_key LIMIT ? OFFSET ?",
            conditions("")
        ),
    }
}

#[cfg(test)]
mod tests {
    use memory_core::lexical::query_words;

    use super::*;
    use crate::text::documents::distinct;

    #[test]
    fn engine_queries_quote_every_word() {
        let words = distinct(query_words(
            "\"Caroline\" AND -melanie* : caroline's NEAR(x)",
        ));
        assert_eq!(words, ["caroline", "and", "melanie", "s", "near", "x"]);
        let prefix = TablePrefix::new("p_").unwrap();
        let sql = |b| TextSql::new(Dialect::new(b), &prefix).engine_query(&words);
        assert_eq!(
            sql(Backend::Sqlite),
            "\"caroline\" OR \"and\" OR \"melanie\" OR \"s\" OR \"near\" OR \"x\""
        );
        assert_eq!(
            sql(Backend::Postgres),
            "'caroline' | 'and' | 'melanie' | 's' | 'near' | 'x'"
        );
        assert_eq!(sql(Backend::MySql), "caroline and melanie s near x");
    }

    #[test]
    fn sqlite_search_runs_the_match_once() {
        // Regression: with a plain `t.scope_key = ?` SQLite answered the scope from its index
        // and ran the full-text query once per row (122 ms against 1 ms, docs/quality.md).
        let prefix = TablePrefix::new("p_").unwrap();
        let sql = TextSql::new(Dialect::new(Backend::Sqlite), &prefix);
        assert!(sql.search.contains("MATCH ? AND +t.scope_key = ?"));
    }
}
