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

use async_trait::async_trait;
use memory_core::ScopeFilter;
use memory_core::lexical::{
    ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery, check_documents,
    check_query, query_words,
};
use memory_core::{Error, Result, Scope};
use uuid::Uuid;

use self::documents::{
    Prepared, chunk_len, distinct, distinct_ids, first_count, parse_id, parse_payload,
    power_of_two_at_most, prepare, scored,
};
use self::statements::TextSql;
use crate::dialect::{Backend, Dialect, MAX_PARAMS};
use crate::driver::{Arg, Col, Query, Row};
use crate::retry::with_retries;
use crate::rows::{scope_args, to_i64};
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
    store: SqlStore,
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
            store: store.clone(),
            sql: Arc::new(TextSql::new(inner.db.dialect, &inner.prefix)),
        })
    }

    fn dialect(&self) -> Dialect {
        self.store.inner.db.dialect
    }

    fn render(&self, template: &str) -> String {
        self.dialect().render(&self.store.inner.prefix, template)
    }

    async fn upsert_rows(&self, scope: &Scope, rows: &[Prepared<'_>]) -> Result<()> {
        const CTX: &str = "upsert text documents";
        let db = &self.store.inner.db;
        let key = scope.key();
        let mut tx = db.begin(CTX).await?;
        let mut rest = rows;
        while !rest.is_empty() {
            let n = chunk_len(rest, self.sql.params_per_row);
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            let mut q = Query::built(self.render(&self.sql.upsert(chunk.len())), true);
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

    /// One page of the engine's ranking: id, payload, score, from `offset`.
    async fn ranked(
        &self,
        tx: Option<&mut crate::driver::Tx<'_>>,
        scope_key: &str,
        engine_query: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Row>> {
        const CTX: &str = "search text documents";
        let mut q = Query::shared(&self.sql.search).text(engine_query);
        if self.sql.backend == Backend::MySql {
            q = q.text(engine_query);
        }
        let q = q.text(scope_key).int(to_i64(limit)).int(to_i64(offset));
        let cols = [Col::Text, Col::Text, Col::Float];
        match tx {
            Some(tx) => tx.fetch(CTX, q, &cols).await,
            None => self.store.inner.db.fetch(CTX, q, &cols).await,
        }
    }

    async fn search_rows(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        const CTX: &str = "search text documents";
        let words = distinct(query_words(&query.text));
        if words.is_empty() || query.top_k == 0 {
            return Ok(Vec::new());
        }
        let engine_query = self.sql.engine_query(&words);
        let key = scope.key();
        let mut found = Vec::new();
        match &query.filter {
            None => {
                for row in self
                    .ranked(None, &key, &engine_query, query.top_k, 0)
                    .await?
                {
                    found.push(scored(row)?);
                }
            }
            Some(filter) => {
                let page = query
                    .top_k
                    .saturating_mul(4)
                    .clamp(FILTER_PAGE_MIN, FILTER_PAGE_MAX);
                // One snapshot for every page, so no document is seen twice or skipped.
                let db = &self.store.inner.db;
                let mut tx = db.begin_read(CTX).await?;
                let mut offset = 0usize;
                loop {
                    let rows = self
                        .ranked(Some(&mut tx), &key, &engine_query, page, offset)
                        .await?;
                    let last_page = rows.len() < page;
                    for row in rows {
                        let doc = scored(row)?;
                        if filter.matches(&doc.payload) {
                            found.push(doc);
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
        // equal reported scores come by ascending id.
        found.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        found.truncate(query.top_k);
        Ok(found)
    }

    async fn get_rows(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        const CTX: &str = "get text documents";
        let wanted = distinct_ids(ids);
        let key = scope.key();
        let mut by_id = HashMap::with_capacity(wanted.len());
        for chunk in self.id_chunks(&wanted) {
            let q = self.by_ids(
                "SELECT doc_id, body, payload FROM {prefix}texts WHERE scope_key = ? AND",
                &key,
                chunk,
            );
            let rows = self
                .store
                .inner
                .db
                .fetch(CTX, q, &[Col::Text, Col::Text, Col::Text])
                .await?;
            for mut row in rows {
                let id = parse_id(&row.take_text(0)?)?;
                let text = row.take_text(1)?;
                let payload = parse_payload(&row.take_text(2)?, id)?;
                by_id.insert(id, TextDocument { id, text, payload });
            }
        }
        Ok(wanted
            .iter()
            .filter_map(|(id, _)| by_id.remove(id))
            .collect())
    }

    async fn delete_rows(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        const CTX: &str = "delete text documents";
        let wanted = distinct_ids(ids);
        if wanted.is_empty() {
            return Ok(0);
        }
        let key = scope.key();
        let mut tx = self.store.inner.db.begin(CTX).await?;
        let mut deleted = 0u64;
        for chunk in self.id_chunks(&wanted) {
            let q = self.by_ids(
                "DELETE FROM {prefix}texts WHERE scope_key = ? AND",
                &key,
                chunk,
            );
            deleted = deleted.saturating_add(tx.execute(CTX, q).await?);
        }
        tx.commit(CTX).await?;
        Ok(deleted)
    }

    /// The ids in chunks a statement can carry: one chunk on PostgreSQL (an array), else at
    /// most `MAX_PARAMS - 1` ids in power-of-two sizes (so few statement shapes are cached).
    fn id_chunks<'w>(&self, wanted: &'w [(Uuid, String)]) -> Vec<&'w [(Uuid, String)]> {
        if self.sql.backend == Backend::Postgres {
            return vec![wanted];
        }
        let mut out = Vec::new();
        let mut rest = wanted;
        while !rest.is_empty() {
            let n = power_of_two_at_most(rest.len().min(MAX_PARAMS.saturating_sub(1)));
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            out.push(chunk);
            rest = after;
        }
        out
    }

    /// `head` (ending in `AND`) followed by the condition that the id is one of `chunk`'s.
    fn by_ids<'q>(&self, head: &str, key: &'q str, chunk: &'q [(Uuid, String)]) -> Query<'q> {
        if self.sql.backend == Backend::Postgres {
            let sql = self.render(&format!("{head} doc_id = ANY(?)"));
            return Query::built(sql, true)
                .text(key)
                .arg(Arg::Texts(chunk.iter().map(|(_, s)| s.as_str()).collect()));
        }
        let marks = vec!["?"; chunk.len()].join(", ");
        let sql = self.render(&format!("{head} doc_id IN ({marks})"));
        Query::built(sql, true)
            .text(key)
            .args(chunk.iter().map(|(_, s)| Arg::Text(s.as_str())))
    }

    /// `WHERE …` selecting the rows of the scopes `filter` selects, and its arguments.
    fn matching(filter: &ScopeFilter) -> (String, Vec<Arg<'_>>) {
        let mut sql = String::from(" WHERE tenant = ?");
        let mut args = vec![Arg::Text(filter.tenant.as_str())];
        if let Some(user) = filter.user.as_ref() {
            sql.push_str(" AND user_id = ?");
            args.push(Arg::Text(user.as_str()));
        }
        if let Some(agent) = filter.agent.as_ref() {
            sql.push_str(" AND agent_id = ?");
            args.push(Arg::Text(agent.as_str()));
        }
        if let Some(session) = filter.session.as_ref() {
            sql.push_str(" AND session_id = ?");
            args.push(Arg::Text(session.as_str()));
        }
        if let Some(source) = filter.source.as_ref() {
            sql.push_str(" AND source = ?");
            args.push(Arg::Text(source.as_str()));
        }
        (sql, args)
    }

    async fn bounded<T>(
        &self,
        operation: &'static str,
        ctx: &str,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.store.bounded(operation, ctx, op).await
    }
}

impl fmt::Debug for SqlTextIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlTextIndex")
            .field("backend", &self.store.backend())
            .field("table_prefix", &self.store.inner.prefix)
            .finish()
    }
}

#[async_trait]
impl TextIndex for SqlTextIndex {
    fn capabilities(&self) -> TextCapabilities {
        TextCapabilities::none().with_deletes_matching(true)
    }

    async fn upsert(&self, scope: &Scope, documents: &[TextDocument]) -> Result<()> {
        const CTX: &str = "upsert text documents";
        check_documents(documents)?;
        if documents.is_empty() {
            return Ok(());
        }
        let rows = prepare(documents, self.sql.backend == Backend::MySql)?;
        let write = with_retries(CTX, || self.upsert_rows(scope, &rows));
        self.bounded("upsert", CTX, write).await
    }

    async fn search(&self, scope: &Scope, query: &TextQuery) -> Result<Vec<ScoredDocument>> {
        check_query(query)?;
        self.bounded(
            "search",
            "search text documents",
            self.search_rows(scope, query),
        )
        .await
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<TextDocument>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.bounded("get", "get text documents", self.get_rows(scope, ids))
            .await
    }

    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        const CTX: &str = "delete text documents";
        let delete = with_retries(CTX, || self.delete_rows(scope, ids));
        self.bounded("delete", CTX, delete).await
    }

    async fn count(&self, scope: &Scope) -> Result<u64> {
        const CTX: &str = "count text documents";
        let key = scope.key();
        let q = Query::shared(&self.sql.count).text(&key);
        let rows = self
            .bounded("count", CTX, self.store.inner.db.fetch(CTX, q, &[Col::Int]))
            .await?;
        first_count(&rows)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        const CTX: &str = "clear text documents";
        let key = scope.key();
        let db = &self.store.inner.db;
        let clear = with_retries(CTX, || {
            db.execute(CTX, Query::shared(&self.sql.clear).text(&key))
        });
        self.bounded("clear", CTX, clear).await
    }

    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        const CTX: &str = "delete the text documents of a filter";
        let (condition, args) = Self::matching(filter);
        let sql = self.render(&format!("DELETE FROM {{prefix}}texts{condition}"));
        let db = &self.store.inner.db;
        let delete = with_retries(CTX, || {
            db.execute(CTX, Query::built(sql.clone(), false).args(args.clone()))
        });
        self.bounded("delete_matching", CTX, delete).await
    }

    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        const CTX: &str = "count the text documents of a filter";
        let (condition, args) = Self::matching(filter);
        let sql = self.render(&format!("SELECT COUNT(*) FROM {{prefix}}texts{condition}"));
        let q = Query::built(sql, false).args(args);
        let rows = self
            .bounded(
                "count_matching",
                CTX,
                self.store.inner.db.fetch(CTX, q, &[Col::Int]),
            )
            .await?;
        first_count(&rows)
    }
}
