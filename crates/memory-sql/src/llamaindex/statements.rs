//! The SQL of the store, rendered once for its backend and table.

use std::sync::Arc;

use memory_interop::AGENT_MEMORY_KEY;

use crate::dialect::{Backend, numbered_placeholders};
use crate::driver::Col;

/// The columns of [`NUMBERED_ROWS`].
pub(super) const ROW_COLS: [Col; 5] = [Col::Int, Col::Int, Col::Text, Col::Text, Col::Int];

/// The statements of the store, rendered once for its backend and table.
pub(super) struct Statements {
    /// `?` → `$n` on PostgreSQL.
    pub(super) postgres: bool,
    /// The table as statements name it.
    pub(super) table: String,
    /// Rows `(seq, row id, status, data, timestamp)` of one key: active ones, in order.
    pub(super) read_all: Arc<str>,
    /// … the last `n` active ones, newest first.
    pub(super) read_last: Arc<str>,
    /// … the active ones after a position.
    pub(super) read_after: Arc<str>,
    /// … all of them.
    pub(super) read_everything: Arc<str>,
    /// … all of them after a position, `n` at most.
    pub(super) read_page: Arc<str>,
    /// … the active ones before a position, newest first, `n` at most.
    pub(super) read_before_desc: Arc<str>,
    /// `(rows, active rows)` of one key.
    pub(super) counts: Arc<str>,
    /// `(rows, last timestamp)` of one key.
    pub(super) stats: Arc<str>,
    /// Archives the active rows of one key at positions `first..=last`.
    pub(super) archive: Arc<str>,
    /// Deletes the rows of one key.
    pub(super) clear: Arc<str>,
    /// Distinct keys after a cursor.
    pub(super) list: Arc<str>,
    /// … that start with a prefix of `n` characters.
    pub(super) list_prefixed: Arc<str>,
    /// PostgreSQL's transaction-scoped advisory lock on two names.
    pub(super) lock: Arc<str>,
}

/// The rows of one key numbered in LlamaIndex's order, with the columns reads need.
const NUMBERED_ROWS: &str = "SELECT w.seq, w.rid, w.status, w.data, w.ts FROM (SELECT \
     ROW_NUMBER() OVER (ORDER BY \"timestamp\", id) AS seq, CAST(id AS BIGINT) AS rid, status, \
     CAST(data AS TEXT) AS data, \"timestamp\" AS ts FROM {t} WHERE \"key\" = ?) AS w";

impl Statements {
    pub(super) fn new(backend: Backend, table: String) -> Self {
        let postgres = backend == Backend::Postgres;
        let r = |template: &str| -> Arc<str> { Arc::from(render(postgres, &table, template)) };
        let rows = |rest: &str| r(&format!("{NUMBERED_ROWS} {rest}"));
        Self {
            read_all: rows("WHERE w.status = 'active' ORDER BY w.seq"),
            read_last: rows("WHERE w.status = 'active' ORDER BY w.seq DESC LIMIT ?"),
            read_after: rows("WHERE w.status = 'active' AND w.seq > ? ORDER BY w.seq"),
            read_everything: rows("ORDER BY w.seq"),
            read_page: rows("WHERE w.seq > ? ORDER BY w.seq LIMIT ?"),
            read_before_desc: rows(
                "WHERE w.status = 'active' AND w.seq < ? ORDER BY w.seq DESC LIMIT ?",
            ),
            counts: r(
                "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END), 0) \
                 FROM {t} WHERE \"key\" = ?",
            ),
            stats: r("SELECT COUNT(*), MAX(\"timestamp\") FROM {t} WHERE \"key\" = ?"),
            archive: r(
                "UPDATE {t} SET status = 'archived' WHERE id IN (SELECT w.rid FROM (SELECT \
                 ROW_NUMBER() OVER (ORDER BY \"timestamp\", id) AS seq, id AS rid, status FROM \
                 {t} WHERE \"key\" = ?) AS w WHERE w.status = 'active' AND w.seq >= ? AND \
                 w.seq <= ?)",
            ),
            clear: r("DELETE FROM {t} WHERE \"key\" = ?"),
            list: r("SELECT DISTINCT \"key\" FROM {t} WHERE \"key\" > ? ORDER BY \"key\" LIMIT ?"),
            list_prefixed: r("SELECT DISTINCT \"key\" FROM {t} WHERE \"key\" > ? \
                 AND substr(\"key\", 1, CAST(? AS INTEGER)) = ? ORDER BY \"key\" LIMIT ?"),
            lock: r("SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))"),
            postgres,
            table,
        }
    }

    /// Renders a statement built for one call.
    pub(super) fn render(&self, template: &str) -> String {
        render(self.postgres, &self.table, template)
    }

    /// The recorded message id of a row, or `NULL`.
    pub(super) fn recorded_id(&self) -> String {
        if self.postgres {
            format!("(data -> 'additional_kwargs' -> '{AGENT_MEMORY_KEY}' ->> 'id')")
        } else {
            format!(
                "(CASE WHEN json_valid(data) THEN \
                 json_extract(data, '$.additional_kwargs.{AGENT_MEMORY_KEY}.id') END)"
            )
        }
    }

    /// The placeholder of a `data` value.
    pub(super) fn data_param(&self) -> &'static str {
        if self.postgres {
            "CAST(? AS json)"
        } else {
            "?"
        }
    }
}

/// Substitutes the table for `{t}` and, on PostgreSQL, numbers the placeholders (`$1`, `$2`,
/// …). Templates hold no `?` but placeholders, and the table name is validated.
fn render(postgres: bool, table: &str, template: &str) -> String {
    let sql = template.replace("{t}", table);
    if !postgres {
        return sql;
    }
    numbered_placeholders(&sql)
}

pub(super) fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}
