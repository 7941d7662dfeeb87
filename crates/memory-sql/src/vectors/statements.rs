//! The statements of the vector store, rendered once per dialect and prefix (the scans and the
//! dimension's record), and the upsert text built per batch size.

use std::sync::Arc;

use crate::dialect::Backend;
use crate::store::SqlStore;

/// The fixed statements of the vector store, rendered for one store.
pub(super) struct VectorSql {
    backend: Backend,
    /// Every point of a scope: scope key, id and vector.
    pub(super) scan: Arc<str>,
    /// Every point of a scope: scope key, id, vector and payload.
    pub(super) scan_with_payloads: Arc<str>,
    /// Records the store's dimension (one bound value) unless one is recorded.
    pub(super) record_dimensions: Arc<str>,
    /// The recorded dimension: no row when none is.
    pub(super) read_dimensions: Arc<str>,
}

impl VectorSql {
    /// Bound values per upserted row: id, scope key, the five scope columns, vector, payload.
    pub(super) const PARAMS_PER_ROW: usize = 9;

    pub(super) fn new(store: &SqlStore) -> Self {
        let backend = store.backend();
        let record_dimensions = match backend {
            Backend::Sqlite => {
                "INSERT OR IGNORE INTO {prefix}vector_dimensions (only_row, dimensions) VALUES (1, ?)"
            }
            Backend::Postgres => {
                "INSERT INTO {prefix}vector_dimensions (only_row, dimensions) VALUES (1, ?) \
                 ON CONFLICT (only_row) DO NOTHING"
            }
            Backend::MySql => {
                "INSERT IGNORE INTO {prefix}vector_dimensions (only_row, dimensions) VALUES (1, ?)"
            }
        };
        let render = |template: &str| Arc::from(store.render(template));
        Self {
            backend,
            scan: render(&scan_template(&["scope_key"], false)),
            scan_with_payloads: render(&scan_template(&["scope_key"], true)),
            record_dimensions: render(record_dimensions),
            read_dimensions: render(
                "SELECT dimensions FROM {prefix}vector_dimensions WHERE only_row = 1",
            ),
        }
    }

    /// Every point whose scope `columns` equal the bound values (the columns a
    /// [`ScopeFilter`](memory_core::ScopeFilter) fixes): scope key, id, vector, and the
    /// payload when asked for (a template).
    pub(super) fn scan_where(columns: &[&str], with_payloads: bool) -> String {
        scan_template(columns, with_payloads)
    }

    /// The payloads of `points` points, each named by its scope key and id (bound in pairs):
    /// scope key, id, payload (a template).
    pub(super) fn payloads(points: usize) -> String {
        let pairs = vec!["(?, ?)"; points].join(", ");
        format!(
            "SELECT scope_key, point_id, payload FROM {{prefix}}vectors \
             WHERE (scope_key, point_id) IN ({pairs})"
        )
    }

    /// The upsert of `rows` points (a template).
    pub(super) fn upsert(&self, rows: usize) -> String {
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; rows].join(", ");
        let head = format!(
            "INSERT INTO {{prefix}}vectors (point_id, scope_key, tenant, user_id, agent_id, \
             source, session_id, vector, payload) VALUES {values}"
        );
        match self.backend {
            Backend::Sqlite | Backend::Postgres => format!(
                "{head} ON CONFLICT (scope_key, point_id) DO UPDATE SET \
                 vector = excluded.vector, payload = excluded.payload"
            ),
            Backend::MySql => format!(
                "{head} ON DUPLICATE KEY UPDATE vector = VALUES(vector), payload = VALUES(payload)"
            ),
        }
    }
}

fn scan_template(columns: &[&str], with_payloads: bool) -> String {
    let conditions: Vec<String> = columns.iter().map(|c| format!("{c} = ?")).collect();
    let payload = if with_payloads { ", payload" } else { "" };
    format!(
        "SELECT scope_key, point_id, vector{payload} FROM {{prefix}}vectors WHERE {}",
        conditions.join(" AND ")
    )
}
