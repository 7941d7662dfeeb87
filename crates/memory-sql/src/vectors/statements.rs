//! The statements of the vector store, rendered once per dialect and prefix (the scans and the
//! dimension's record), and the upsert text built per batch size. From schema v8 a point's row
//! also holds the compact copy of its vector (`quantized`), which the scans read in place of
//! the `f32` values when a row has one.

use std::sync::Arc;

use crate::dialect::Backend;
use crate::store::SqlStore;

/// The fixed statements of the vector store, rendered for one store.
pub(super) struct VectorSql {
    backend: Backend,
    /// Whether the rows have the `quantized` column (schema v8).
    quantized: bool,
    /// Every point of a scope: scope key, id and vector (its compact copy when it has one).
    pub(super) scan: Arc<str>,
    /// Every point of a scope: scope key, id, vector (as `scan`) and payload.
    pub(super) scan_with_payloads: Arc<str>,
    /// Records the store's dimension (one bound value) unless one is recorded.
    pub(super) record_dimensions: Arc<str>,
    /// The recorded dimension: no row when none is.
    pub(super) read_dimensions: Arc<str>,
}

impl VectorSql {
    /// Bound values per upserted row: id, scope key, the five scope columns, vector, payload,
    /// and the compact vector from schema v8.
    pub(super) fn params_per_row(&self) -> usize {
        if self.quantized { 10 } else { 9 }
    }

    /// Whether the rows have the `quantized` column (schema v8), which upserts write.
    pub(super) fn writes_quantized(&self) -> bool {
        self.quantized
    }

    /// The statements of `store`'s vector table; `quantized` when its schema has the compact
    /// vectors' column (v8).
    pub(super) fn new(store: &SqlStore, quantized: bool) -> Self {
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
            quantized,
            scan: render(&scan_template(&["scope_key"], false, quantized)),
            scan_with_payloads: render(&scan_template(&["scope_key"], true, quantized)),
            record_dimensions: render(record_dimensions),
            read_dimensions: render(
                "SELECT dimensions FROM {prefix}vector_dimensions WHERE only_row = 1",
            ),
        }
    }

    /// Every point whose scope `columns` equal the bound values (the columns a
    /// [`ScopeFilter`](memory_core::ScopeFilter) fixes): scope key, id, vector, and the
    /// payload when asked for (a template).
    pub(super) fn scan_where(&self, columns: &[&str], with_payloads: bool) -> String {
        scan_template(columns, with_payloads, self.quantized)
    }

    /// The `f32` vectors and payloads of `points` points, each named by its scope key and id
    /// (bound in pairs): scope key, id, vector, payload (a template). Each pair is a lookup
    /// of the primary key: a row-value `IN` list on PostgreSQL and MySQL; on SQLite, whose
    /// planner scans the table for one, an `OR` of the pairs (a multi-index `OR`).
    pub(super) fn candidates(&self, points: usize) -> String {
        let condition = match self.backend {
            Backend::Sqlite => vec!["(scope_key = ? AND point_id = ?)"; points].join(" OR "),
            Backend::Postgres | Backend::MySql => format!(
                "(scope_key, point_id) IN ({})",
                vec!["(?, ?)"; points].join(", ")
            ),
        };
        format!(
            "SELECT scope_key, point_id, vector, payload FROM {{prefix}}vectors WHERE {condition}"
        )
    }

    /// The upsert of `rows` points (a template): the values bound in the order of
    /// [`params_per_row`](Self::params_per_row)'s list.
    pub(super) fn upsert(&self, rows: usize) -> String {
        let (columns, values) = if self.quantized {
            (", quantized", "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        } else {
            ("", "(?, ?, ?, ?, ?, ?, ?, ?, ?)")
        };
        let values = vec![values; rows].join(", ");
        let head = format!(
            "INSERT INTO {{prefix}}vectors (point_id, scope_key, tenant, user_id, agent_id, \
             source, session_id, vector, payload{columns}) VALUES {values}"
        );
        match (self.backend, self.quantized) {
            (Backend::Sqlite | Backend::Postgres, false) => format!(
                "{head} ON CONFLICT (scope_key, point_id) DO UPDATE SET \
                 vector = excluded.vector, payload = excluded.payload"
            ),
            (Backend::Sqlite | Backend::Postgres, true) => format!(
                "{head} ON CONFLICT (scope_key, point_id) DO UPDATE SET \
                 vector = excluded.vector, payload = excluded.payload, \
                 quantized = excluded.quantized"
            ),
            (Backend::MySql, false) => format!(
                "{head} ON DUPLICATE KEY UPDATE vector = VALUES(vector), payload = VALUES(payload)"
            ),
            (Backend::MySql, true) => format!(
                "{head} ON DUPLICATE KEY UPDATE vector = VALUES(vector), \
                 payload = VALUES(payload), quantized = VALUES(quantized)"
            ),
        }
    }
}

fn scan_template(columns: &[&str], with_payloads: bool, quantized: bool) -> String {
    let conditions: Vec<String> = columns.iter().map(|c| format!("{c} = ?")).collect();
    let payload = if with_payloads { ", payload" } else { "" };
    let vector = if quantized {
        "COALESCE(quantized, vector)"
    } else {
        "vector"
    };
    format!(
        "SELECT scope_key, point_id, {vector}{payload} FROM {{prefix}}vectors WHERE {}",
        conditions.join(" AND ")
    )
}
