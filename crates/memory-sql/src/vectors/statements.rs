//! The statements of the vector store, rendered once per dialect and prefix (the scans and the
//! dimension's record), and the upsert text built per batch size.

use std::sync::Arc;

use crate::dialect::Backend;
use crate::store::SqlStore;

/// The fixed statements of the vector store, rendered for one store.
pub(super) struct VectorSql {
    backend: Backend,
    /// Every point of a scope: id and vector.
    pub(super) scan: Arc<str>,
    /// Every point of a scope: id, vector and payload.
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
            scan: render("SELECT point_id, vector FROM {prefix}vectors WHERE scope_key = ?"),
            scan_with_payloads: render(
                "SELECT point_id, vector, payload FROM {prefix}vectors WHERE scope_key = ?",
            ),
            record_dimensions: render(record_dimensions),
            read_dimensions: render(
                "SELECT dimensions FROM {prefix}vector_dimensions WHERE only_row = 1",
            ),
        }
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
