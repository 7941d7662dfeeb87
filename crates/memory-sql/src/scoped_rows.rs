//! [`ScopedRows`]: the rows of a scoped index table (`{prefix}texts`, `{prefix}vectors`), and
//! what the text index and the vector store do alike on them.
//!
//! Such a table holds one row per item of a scope, keyed by the scope's key and the item's id,
//! with the scope's columns (tenant, user, agent, source, session) beside them, so that a
//! [`ScopeFilter`] selects rows with plain column conditions. Here: the ids in chunks a
//! statement can carry, the statements that select rows by id, scope or filter, the id, count,
//! clear and forget operations every index has, and the decoding of ids, payloads and counts.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use memory_core::{Error, Result, Scope, ScopeFilter};
use uuid::Uuid;

use crate::dialect::{Backend, MAX_PARAMS, MAX_STATEMENT_BYTES};
use crate::driver::{Arg, Col, Query, Row};
use crate::retry::with_retries;
use crate::store::SqlStore;

/// One scoped index table of a [`SqlStore`]: its name, its id column, what its items are
/// called (in errors), and its fixed statements rendered for the store's dialect and prefix.
#[derive(Clone)]
pub(crate) struct ScopedRows {
    store: SqlStore,
    /// The table, as a template (`{prefix}texts`).
    table: &'static str,
    id_column: &'static str,
    /// What one item is called in errors and contexts ("text document", "vector point").
    noun: &'static str,
    count: Arc<str>,
    clear: Arc<str>,
}

impl ScopedRows {
    /// The table `table` (a template such as `{prefix}texts`) of `store`, whose ids are in
    /// `id_column` and whose items are called `noun`.
    pub(crate) fn new(
        store: &SqlStore,
        table: &'static str,
        id_column: &'static str,
        noun: &'static str,
    ) -> Self {
        let render = |template: String| Arc::from(store.render(&template));
        Self {
            store: store.clone(),
            table,
            id_column,
            noun,
            count: render(format!("SELECT COUNT(*) FROM {table} WHERE scope_key = ?")),
            clear: render(format!("DELETE FROM {table} WHERE scope_key = ?")),
        }
    }

    /// The store the table belongs to.
    pub(crate) fn store(&self) -> &SqlStore {
        &self.store
    }

    fn backend(&self) -> Backend {
        self.store.inner.db.dialect.backend
    }

    /// Runs `op` within the store's operation timeout.
    pub(crate) async fn bounded<T>(
        &self,
        operation: &'static str,
        ctx: &str,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.store.bounded(operation, ctx, op).await
    }

    /// The ids in chunks a statement can carry: one chunk on PostgreSQL (an array), else at
    /// most `MAX_PARAMS - 1` ids in power-of-two sizes (so few statement shapes are cached).
    pub(crate) fn id_chunks<'w>(&self, wanted: &'w [(Uuid, String)]) -> Vec<&'w [(Uuid, String)]> {
        if self.backend() == Backend::Postgres {
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

    /// `head {table} WHERE scope_key = ? AND <the id is one of chunk's>`, with its arguments:
    /// `head` is the statement up to the table (`SELECT doc_id, body FROM`, `DELETE FROM`).
    pub(crate) fn by_ids<'q>(
        &self,
        head: &str,
        key: &'q str,
        chunk: &'q [(Uuid, String)],
    ) -> Query<'q> {
        let (table, id) = (self.table, self.id_column);
        if self.backend() == Backend::Postgres {
            let sql = self.store.render(&format!(
                "{head} {table} WHERE scope_key = ? AND {id} = ANY(?)"
            ));
            return Query::built(sql, true)
                .text(key)
                .arg(Arg::Texts(chunk.iter().map(|(_, s)| s.as_str()).collect()));
        }
        let marks = vec!["?"; chunk.len()].join(", ");
        let sql = self.store.render(&format!(
            "{head} {table} WHERE scope_key = ? AND {id} IN ({marks})"
        ));
        Query::built(sql, true)
            .text(key)
            .args(chunk.iter().map(|(_, s)| Arg::Text(s.as_str())))
    }

    /// Removes the items of `ids` from the scope (in one transaction, retried after a lost
    /// race, within the operation timeout); returns how many existed.
    pub(crate) async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        let ctx = format!("delete {}s", self.noun);
        let wanted = distinct_ids(ids);
        if wanted.is_empty() {
            return Ok(0);
        }
        let key = scope.key();
        let delete = with_retries(&ctx, || async {
            let mut tx = self.store.inner.db.begin(&ctx).await?;
            let mut deleted = 0u64;
            for chunk in self.id_chunks(&wanted) {
                let q = self.by_ids("DELETE FROM", &key, chunk);
                deleted = deleted.saturating_add(tx.execute(&ctx, q).await?);
            }
            tx.commit(&ctx).await?;
            Ok(deleted)
        });
        self.bounded("delete", &ctx, delete).await
    }

    /// How many items the scope holds.
    pub(crate) async fn count(&self, scope: &Scope) -> Result<u64> {
        let ctx = format!("count {}s", self.noun);
        let key = scope.key();
        let q = Query::shared(&self.count).text(&key);
        let db = &self.store.inner.db;
        let rows = self
            .bounded("count", &ctx, db.fetch(&ctx, q, &[Col::Int]))
            .await?;
        first_count(&rows)
    }

    /// Removes every item of the scope; returns how many.
    pub(crate) async fn clear(&self, scope: &Scope) -> Result<u64> {
        let ctx = format!("clear {}s", self.noun);
        let key = scope.key();
        let db = &self.store.inner.db;
        let clear = with_retries(&ctx, || {
            db.execute(&ctx, Query::shared(&self.clear).text(&key))
        });
        self.bounded("clear", &ctx, clear).await
    }

    /// Removes every item of the scopes `filter` selects; returns how many.
    pub(crate) async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let ctx = format!("delete the {}s of a filter", self.noun);
        let (condition, args) = matching(filter);
        let sql = self
            .store
            .render(&format!("DELETE FROM {}{condition}", self.table));
        let db = &self.store.inner.db;
        let delete = with_retries(&ctx, || {
            db.execute(&ctx, Query::built(sql.clone(), false).args(args.clone()))
        });
        self.bounded("delete_matching", &ctx, delete).await
    }

    /// How many items the scopes `filter` selects hold.
    pub(crate) async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let ctx = format!("count the {}s of a filter", self.noun);
        let (condition, args) = matching(filter);
        let sql = self
            .store
            .render(&format!("SELECT COUNT(*) FROM {}{condition}", self.table));
        let q = Query::built(sql, false).args(args);
        let db = &self.store.inner.db;
        let rows = self
            .bounded("count_matching", &ctx, db.fetch(&ctx, q, &[Col::Int]))
            .await?;
        first_count(&rows)
    }

    /// A stored id, which must be a UUID.
    pub(crate) fn parse_id(&self, text: &str) -> Result<Uuid> {
        Uuid::parse_str(text).map_err(|err| {
            Error::serialization(format!("a stored {} id {text:?} is not a UUID", self.noun))
                .with_source(err)
        })
    }

    /// A stored scope key, which must be one [`Scope::key`] made.
    pub(crate) fn parse_scope_key(&self, key: &str) -> Result<Scope> {
        Scope::from_key(key).map_err(|err| {
            Error::serialization(format!(
                "a stored {} has a scope key {key:?} that names no scope",
                self.noun
            ))
            .with_source(err)
        })
    }

    /// A stored payload, which must be a JSON object.
    pub(crate) fn parse_payload(
        &self,
        text: &str,
        id: Uuid,
    ) -> Result<serde_json::Map<String, serde_json::Value>> {
        serde_json::from_str(text).map_err(|err| {
            Error::serialization(format!(
                "the stored payload of {} {id} is not a JSON object",
                self.noun
            ))
            .with_source(err)
        })
    }
}

/// Implements a scoped index trait (`TextIndex`, `VectorStore`) for a type with a `rows:
/// ScopedRows` field: the capabilities (`deletes_matching`, `searches_matching`), and
/// `delete`, `count`, `clear`, `delete_matching` and `count_matching` on the rows; the
/// invocation brings the rest (`upsert`, `search`, `search_matching`, `get`).
macro_rules! impl_scoped_index {
    (impl $Trait:ident with $Caps:ident for $Type:ty { $($rest:tt)* }) => {
        #[::async_trait::async_trait]
        impl $Trait for $Type {
            fn capabilities(&self) -> $Caps {
                $Caps::none()
                    .with_deletes_matching(true)
                    .with_searches_matching(true)
            }

            $($rest)*

            async fn delete(
                &self,
                scope: &::memory_core::Scope,
                ids: &[::uuid::Uuid],
            ) -> ::memory_core::Result<u64> {
                self.rows.delete(scope, ids).await
            }

            async fn count(&self, scope: &::memory_core::Scope) -> ::memory_core::Result<u64> {
                self.rows.count(scope).await
            }

            async fn clear(&self, scope: &::memory_core::Scope) -> ::memory_core::Result<u64> {
                self.rows.clear(scope).await
            }

            async fn delete_matching(
                &self,
                filter: &::memory_core::ScopeFilter,
            ) -> ::memory_core::Result<u64> {
                self.rows.delete_matching(filter).await
            }

            async fn count_matching(
                &self,
                filter: &::memory_core::ScopeFilter,
            ) -> ::memory_core::Result<u64> {
                self.rows.count_matching(filter).await
            }
        }
    };
}
pub(crate) use impl_scoped_index;

/// Where a search looks: one scope (by its key), or every scope a filter selects.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Within<'a> {
    /// The scope of this key.
    Scope(&'a str),
    /// Every scope the filter selects.
    Matching(&'a ScopeFilter),
}

impl<'a> Within<'a> {
    /// The columns that select the rows, with their values: the scope key, or the columns the
    /// filter fixes ([`filter_columns`]).
    pub(crate) fn columns(&self) -> Vec<(&'static str, &'a str)> {
        match self {
            Within::Scope(key) => vec![("scope_key", *key)],
            Within::Matching(filter) => filter_columns(filter),
        }
    }
}

/// The scope columns a filter fixes, with their values: the tenant, then the user, agent,
/// session and source it names.
fn filter_columns(filter: &ScopeFilter) -> Vec<(&'static str, &str)> {
    let named = [
        ("user_id", filter.user.as_ref().map(|v| v.as_str())),
        ("agent_id", filter.agent.as_ref().map(|v| v.as_str())),
        ("session_id", filter.session.as_ref().map(|v| v.as_str())),
        ("source", filter.source.as_ref().map(|v| v.as_str())),
    ];
    std::iter::once(("tenant", filter.tenant.as_str()))
        .chain(
            named
                .into_iter()
                .filter_map(|(column, value)| Some((column, value?))),
        )
        .collect()
}

/// `WHERE …` selecting the rows of the scopes `filter` selects, and its arguments.
pub(crate) fn matching(filter: &ScopeFilter) -> (String, Vec<Arg<'_>>) {
    let columns = filter_columns(filter);
    let conditions: Vec<String> = columns.iter().map(|(c, _)| format!("{c} = ?")).collect();
    let sql = format!(" WHERE {}", conditions.join(" AND "));
    (
        sql,
        columns.into_iter().map(|(_, v)| Arg::Text(v)).collect(),
    )
}

/// A payload as its row stores it: JSON text.
pub(crate) fn payload_text(
    payload: &serde_json::Map<String, serde_json::Value>,
    noun: &str,
    id: Uuid,
) -> Result<String> {
    serde_json::to_string(payload).map_err(|err| {
        Error::serialization(format!("the payload of {noun} {id} cannot be written"))
            .with_source(err)
    })
}

/// The positions of a batch's items that are written: the last of each id, in the batch's
/// order (one statement cannot write a row twice on PostgreSQL).
pub(crate) fn last_of_each_id(ids: impl ExactSizeIterator<Item = Uuid> + Clone) -> Vec<usize> {
    let mut last = std::collections::HashMap::with_capacity(ids.len());
    for (at, id) in ids.clone().enumerate() {
        last.insert(id, at);
    }
    ids.enumerate()
        .filter(|(at, id)| last.get(id) == Some(at))
        .map(|(at, _)| at)
        .collect()
}

/// How many rows of `row_bytes` (each row's size) go in the next statement: a power of two
/// (few statement shapes to cache), within the parameter limit and, past the first row, the
/// statement byte budget.
pub(crate) fn chunk_len(row_bytes: impl Iterator<Item = usize>, params_per_row: usize) -> usize {
    let by_params = MAX_PARAMS.checked_div(params_per_row).unwrap_or(1).max(1);
    let mut n = 0usize;
    let mut bytes = 0usize;
    for size in row_bytes.take(by_params) {
        bytes = bytes.saturating_add(size);
        if n > 0 && bytes > MAX_STATEMENT_BYTES {
            break;
        }
        n = n.saturating_add(1);
    }
    power_of_two_at_most(n.max(1))
}

/// The largest power of two not above `n` (1 for 0).
pub(crate) fn power_of_two_at_most(n: usize) -> usize {
    match n.checked_ilog2() {
        Some(log) => 1usize.checked_shl(log).unwrap_or(1),
        None => 1,
    }
}

/// The ids in their first order, each once, with their stored form.
pub(crate) fn distinct_ids(ids: &[Uuid]) -> Vec<(Uuid, String)> {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter()
        .filter(|id| seen.insert(**id))
        .map(|id| (*id, id.hyphenated().to_string()))
        .collect()
}

/// The number a `COUNT(*)` answered.
pub(crate) fn first_count(rows: &[Row]) -> Result<u64> {
    match rows.first() {
        Some(row) => row.uint(0),
        None => Err(Error::serialization(
            "the database answered a count with no row",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_powers_of_two_within_budgets() {
        assert_eq!(power_of_two_at_most(0), 1);
        assert_eq!(power_of_two_at_most(1), 1);
        assert_eq!(power_of_two_at_most(7), 4);
        assert_eq!(power_of_two_at_most(8), 8);
        assert_eq!(chunk_len(std::iter::repeat_n(1, 5000), 9), 2048);
        assert_eq!(chunk_len(std::iter::repeat_n(1, 3), 9), 2);
        assert_eq!(chunk_len(std::iter::repeat_n(3 << 20, 2), 9), 1);
    }

    #[test]
    fn the_last_of_an_id_wins() {
        let ids = [1u128, 2, 1, 3, 3].map(Uuid::from_u128);
        assert_eq!(last_of_each_id(ids.iter().copied()), [1, 2, 4]);
    }

    #[test]
    fn filters_become_column_conditions() {
        use memory_core::{SessionId, TenantId, UserId};
        let filter = ScopeFilter::tenant(TenantId::new("t").unwrap())
            .with_user(UserId::new("u").unwrap())
            .with_session(SessionId::new("s").unwrap());
        let (sql, args) = matching(&filter);
        assert_eq!(sql, " WHERE tenant = ? AND user_id = ? AND session_id = ?");
        assert_eq!(args.len(), 3);
    }
}
