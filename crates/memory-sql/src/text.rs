//! [`SqlTextIndex`]: a [`TextIndex`] on the database's own full-text search, in the table
//! `{prefix}texts` (schema v6): SQLite FTS5 ranked by `bm25()`, PostgreSQL `tsvector` ranked
//! by `ts_rank`, MySQL/MariaDB InnoDB `FULLTEXT` ranked by `MATCH … AGAINST`.
//!
//! Query text never reaches the engine as syntax: its words ([`query_words`]) are quoted (FTS5
//! strings, `to_tsquery` lexemes) or joined by spaces (natural language mode) and bound as one
//! parameter, and a document matches when it holds any of them.
//!
//! The statements are [`statements`]; documents become rows and rows results in [`documents`].

mod documents;
mod statements;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use memory_core::lexical::{
    ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery, check_documents,
    check_query, query_words,
};
use memory_core::{Error, Result, Scope, ScopeFilter, ScopedHit};
use uuid::Uuid;

use self::documents::{Prepared, distinct, prepare, scored};
use self::statements::TextSql;
use crate::dialect::Backend;
use crate::driver::{Col, Query, Row};
use crate::retry::with_retries;
use crate::rows::{scope_args, to_i64};
use crate::scoped_rows::{ScopedRows, Within, chunk_len, distinct_ids, impl_scoped_index};
use crate::store::SqlStore;

/// The schema version that created `{prefix}texts`.
const TEXT_SCHEMA_VERSION: u32 = 6;

/// The most result rows a filtered search reads per page while it looks for `top_k` documents
/// whose payload matches.
const FILTER_PAGE_MAX: usize = 1024;

/// The fewest, so that a small `top_k` with a selective filter does not take many trips.
const FILTER_PAGE_MIN: usize = 64;

/// A [`TextIndex`] on the database of a [`SqlStore`], using the engine's full-text search.
///
/// Get one with [`SqlStore::text_index`]; it shares the store's pool, table prefix, schema
/// and operation timeout, and cloning it is cheap. Documents live in `{prefix}texts`, one row
/// per document keyed by the scope (its key and its columns, as the sessions table keys them)
/// and the id, so [`delete_matching`](TextIndex::delete_matching) selects a tenant, user,
/// agent or session with plain column conditions.
///
/// | database | index | words | score |
/// | --- | --- | --- | --- |
/// | SQLite | FTS5 (external content, kept in step by triggers) | Unicode letters and digits, case and diacritics folded, Porter stemming | `-bm25()` |
/// | PostgreSQL | generated `tsvector` (`english`), GIN | the `english` parser: stemming, stop words | `ts_rank` |
/// | MySQL, MariaDB | InnoDB `FULLTEXT` on a column of the text's words | case folded; words shorter than `innodb_ft_min_token_size` (3) and InnoDB's stop words are not indexed | `MATCH … AGAINST` (natural language mode) |
///
/// Every engine sees a query as its [`query_words`] (lower-cased runs of letters and digits),
/// each quoted (FTS5) or as a lexeme (`to_tsquery`) or joined by spaces (natural language
/// mode), combined with OR. A query whose words are all stop words or too short for the
/// engine finds nothing. Payload filters are evaluated on the rows the engine ranks, page by
/// page, exactly as [`PayloadFilter::matches`](memory_core::PayloadFilter::matches) says, so
/// every filter is supported; a selective filter over a large scope reads many rows.
#[derive(Clone)]
pub struct SqlTextIndex {
    rows: ScopedRows,
    sql: Arc<TextSql>,
}

impl SqlStore {
    /// The [`TextIndex`] on this store's database (the `{prefix}texts` table).
    ///
    /// # Errors
    /// [`Unsupported`](memory_core::ErrorKind::Unsupported) when the store's tables are at a
    /// schema version older than 6, which created the table.
    pub fn text_index(&self) -> Result<SqlTextIndex> {
        SqlTextIndex::new(self)
    }
}

impl SqlTextIndex {
    /// The text index on `store`'s database; see [`SqlStore::text_index`].
    ///
    /// # Errors
    /// As [`SqlStore::text_index`].
    pub fn new(store: &SqlStore) -> Result<Self> {
        let inner = &store.inner;
        let version = store.opened_schema_version();
        if version < TEXT_SCHEMA_VERSION {
            return Err(Error::unsupported(format!(
                "the tables with prefix {:?} are at schema version {version}; the text index \
                 needs version {TEXT_SCHEMA_VERSION}: upgrade the schema (`agent-memory \
                 upgrade`, or the library's default open)",
                inner.prefix.as_str()
            )));
        }
        Ok(Self {
            rows: ScopedRows::new(store, "{prefix}texts", "doc_id", "text document"),
            sql: Arc::new(TextSql::new(inner.db.dialect, &inner.prefix)),
        })
    }

    fn store(&self) -> &SqlStore {
        self.rows.store()
    }

    async fn upsert_rows(&self, scope: &Scope, rows: &[Prepared<'_>]) -> Result<()> {
        const CTX: &str = "upsert text documents";
        let db = &self.store().inner.db;
        let key = scope.key();
        let mut tx = db.begin(CTX).await?;
        let mut rest = rows;
        while !rest.is_empty() {
            let n = chunk_len(rest.iter().map(Prepared::bytes), self.sql.params_per_row);
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            let mut q = Query::built(self.store().render(&self.sql.upsert(chunk.len())), true);
            for row in chunk {
                q = q.text(&key).args(scope_args(scope)).text(&row.id);
                q = q.text(row.text);
                if self.sql.backend == Backend::MySql {
                    q = q.text(&row.words);
                }
                q = q.text(&row.payload);
            }
            tx.execute(CTX, q).await?;
        }
        tx.commit(CTX).await
    }

    /// One page of the engine's ranking within `within`: id, payload, score and scope key,
    /// from `offset`.
    async fn ranked(
        &self,
        tx: Option<&mut crate::driver::Tx<'_>>,
        within: &Within<'_>,
        engine_query: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Row>> {
        const CTX: &str = "search text documents";
        let columns = within.columns();
        let q = match within {
            Within::Scope(_) => Query::shared(&self.sql.search),
            Within::Matching(_) => {
                let names: Vec<&str> = columns.iter().map(|(c, _)| *c).collect();
                Query::built(self.store().render(&self.sql.search_where(&names)), true)
            }
        };
        let mut q = q.text(engine_query);
        if self.sql.backend == Backend::MySql {
            q = q.text(engine_query);
        }
        for (_, value) in columns {
            q = q.text(value);
        }
        let q = q.int(to_i64(limit)).int(to_i64(offset));
        let cols = [Col::Text, Col::Text, Col::Float, Col::Text];
        match tx {
            Some(tx) => tx.fetch(CTX, q, &cols).await,
            None => self.store().inner.db.fetch(CTX, q, &cols).await,
        }
    }

    /// The best `top_k` documents within `within`, each with its scope key.
    async fn search_rows(
        &self,
        within: Within<'_>,
        query: &TextQuery,
    ) -> Result<Vec<(String, ScoredDocument)>> {
        const CTX: &str = "search text documents";
        let words = distinct(query_words(&query.text));
        if words.is_empty() || query.top_k == 0 {
            return Ok(Vec::new());
        }
        let engine_query = self.sql.engine_query(&words);
        let hit = |mut row: Row| -> Result<(String, ScoredDocument)> {
            let key = row.take_text(3)?;
            Ok((key, scored(&self.rows, row)?))
        };
        let mut found = Vec::new();
        match &query.filter {
            None => {
                for row in self
                    .ranked(None, &within, &engine_query, query.top_k, 0)
                    .await?
                {
                    found.push(hit(row)?);
                }
            }
            Some(filter) => {
                let page = query
                    .top_k
                    .saturating_mul(4)
                    .clamp(FILTER_PAGE_MIN, FILTER_PAGE_MAX);
                // One snapshot for every page, so no document is seen twice or skipped.
                let db = &self.store().inner.db;
                let mut tx = db.begin_read(CTX).await?;
                let mut offset = 0usize;
                loop {
                    let rows = self
                        .ranked(Some(&mut tx), &within, &engine_query, page, offset)
                        .await?;
                    let last_page = rows.len() < page;
                    for row in rows {
                        let (key, doc) = hit(row)?;
                        if filter.matches(&doc.payload) {
                            found.push((key, doc));
                        }
                    }
                    if last_page || found.len() >= query.top_k {
                        break;
                    }
                    offset = offset.saturating_add(page);
                }
                tx.commit(CTX).await?;
            }
        }
        // The engine ordered by its own (double) score; order again by the reported one, so
        // equal reported scores come by ascending id (then scope key).
        found.sort_by(|(key_a, a), (key_b, b)| {
            b.score
                .total_cmp(&a.score)
                .then(a.id.cmp(&b.id))
                .then(key_a.cmp(key_b))
        });
        found.truncate(query.top_k);
        Ok(found)
    }

    async fn get_rows(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        const CTX: &str = "get text documents";
        let wanted = distinct_ids(ids);
        let key = scope.key();
        let mut by_id = HashMap::with_capacity(wanted.len());
        for chunk in self.rows.id_chunks(&wanted) {
            let q = self
                .rows
                .by_ids("SELECT doc_id, body, payload FROM", &key, chunk);
            let rows = self
                .store()
                .inner
                .db
                .fetch(CTX, q, &[Col::Text, Col::Text, Col::Text])
                .await?;
            for mut row in rows {
                let id = self.rows.parse_id(&row.take_text(0)?)?;
                let text = row.take_text(1)?;
                let payload = self.rows.parse_payload(&row.take_text(2)?, id)?;
                by_id.insert(id, TextDocument { id, text, payload });
            }
        }
        Ok(wanted
            .iter()
            .filter_map(|(id, _)| by_id.remove(id))
            .collect())
    }
}

impl fmt::Debug for SqlTextIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlTextIndex")
            .field("backend", &self.store().backend())
            .field("table_prefix", &self.store().inner.prefix)
            .finish()
    }
}

impl_scoped_index! {
impl TextIndex with TextCapabilities for SqlTextIndex {
    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        const CTX: &str = "upsert text documents";
        check_documents(documents)?;
        if documents.is_empty() {
            return Ok(());
        }
        let rows = prepare(documents, self.sql.backend == Backend::MySql)?;
        let write = with_retries(CTX, || self.upsert_rows(scope, &rows));
        self.rows.bounded("upsert", CTX, write).await
    }

    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        check_query(query)?;
        let key = scope.key();
        let search = self.search_rows(Within::Scope(&key), query);
        let found = self
            .rows
            .bounded("search", "search text documents", search)
            .await?;
        Ok(found.into_iter().map(|(_, doc)| doc).collect())
    }

    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &TextQuery,
    ) -> Result<Vec<ScopedHit<ScoredDocument>>> {
        check_query(query)?;
        let search = self.search_rows(Within::Matching(filter), query);
        let found = self
            .rows
            .bounded("search_matching", "search text documents", search)
            .await?;
        found
            .into_iter()
            .map(|(key, doc)| Ok(ScopedHit::new(self.rows.parse_scope_key(&key)?, doc)))
            .collect()
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.rows
            .bounded("get", "get text documents", self.get_rows(scope, ids))
            .await
    }
}
}
