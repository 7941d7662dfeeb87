//! [`SqlVectorStore`]: a [`VectorStore`] in the store's own database, in the table
//! `{prefix}vectors` (schema v7; v8 adds the compact vectors), with exact cosine search.
//!
//! No vector extension is assumed (none is installable everywhere this runs): a vector is its
//! `f32` values, little-endian, in a binary column ([`encoding`]), beside its compact copy
//! ([`quantized`](memory_core::vector::quantized)); a search reads the compact vectors of the
//! scope, scores them in process, then reads the `f32` vectors and payloads of the best
//! candidates only and scores those exactly, in one read snapshot. The statements are
//! [`statements`].

mod encoding;
mod statements;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use memory_core::vector::quantized::{QueryScorer, quantize, rescoring_candidates};
use memory_core::vector::{check_vectors, keep_best_by};
use memory_core::{
    Error, Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorCapabilities, VectorPoint,
    VectorQuery, VectorStore,
};
use uuid::Uuid;

use self::encoding::{decode_vector, encode_vector};
use self::statements::VectorSql;
use crate::dialect::MAX_PARAMS;
use crate::driver::{Col, Query, Row, Tx};
use crate::retry::with_retries;
use crate::rows::scope_args;
use crate::scoped_rows::{
    ScopedRows, Within, chunk_len, distinct_ids, impl_scoped_index, last_of_each_id, payload_text,
    power_of_two_at_most,
};
use crate::store::SqlStore;

/// The schema version that created `{prefix}vectors`.
const VECTOR_SCHEMA_VERSION: u32 = 7;
/// The schema version that added the compact vectors (`quantized`).
const QUANTIZED_SCHEMA_VERSION: u32 = 8;

/// What one point is called in errors.
const NOUN: &str = "vector point";

/// A [`VectorStore`] on the database of a [`SqlStore`]: durable long-term memory with no other
/// service.
///
/// Get one with [`SqlStore::vector_store`]; it shares the store's pool, table prefix, schema and
/// operation timeout, and cloning it is cheap. Points live in `{prefix}vectors`, one row per
/// point keyed by the scope (its key and its columns, as the text index keys them) and the id,
/// so [`delete_matching`](VectorStore::delete_matching) selects a tenant, user, agent or
/// session with plain column conditions.
///
/// - **Vectors** are stored exactly (`f32`, little-endian: 4 bytes a dimension), so
///   [`get`](VectorStore::get) returns the values written. Every vector of the tables of one
///   prefix has one dimension, recorded in `{prefix}vector_dimensions` by the first upsert:
///   every process and replica on the database agrees on it, and a vector of another
///   dimension (an embedder changed under existing data, say) is refused with `InvalidInput`.
/// - **Search** returns exact cosine similarities, in two passes in one read snapshot: it reads
///   the compact vectors of the scope (one byte a dimension, written beside the `f32` values
///   from schema v8; a row written before has only its `f32` values, which are read instead)
///   and scores them in process, keeps the best
///   [`rescoring_candidates`](memory_core::vector::quantized::rescoring_candidates) (at least
///   four times `top_k`), then reads only those candidates' `f32` vectors and payloads, scores
///   them exactly and keeps the best `top_k`. The ranking is exact unless a point of the true
///   top `top_k` scores, approximately, below every candidate (the approximation errs by about
///   0.01). With a payload filter the first pass also reads the payloads and evaluates
///   [`PayloadFilter::matches`](memory_core::PayloadFilter::matches) on them, so every filter
///   is supported. The cost grows with the scope's points (about 400 bytes a point at 384
///   dimensions); Qdrant stays the choice for collections of millions.
#[derive(Clone)]
pub struct SqlVectorStore {
    rows: ScopedRows,
    sql: Arc<VectorSql>,
    /// The dimension recorded in the database, once read or written (it never changes).
    dimensions: Arc<OnceLock<usize>>,
}

impl SqlStore {
    /// The [`VectorStore`] on this store's database (the `{prefix}vectors` table).
    ///
    /// # Errors
    /// [`Unsupported`](memory_core::ErrorKind::Unsupported) when the store's tables are at a
    /// schema version older than 7, which created the table.
    pub fn vector_store(&self) -> Result<SqlVectorStore> {
        SqlVectorStore::new(self)
    }
}

impl SqlVectorStore {
    /// The vector store on `store`'s database; see [`SqlStore::vector_store`].
    ///
    /// # Errors
    /// As [`SqlStore::vector_store`].
    pub fn new(store: &SqlStore) -> Result<Self> {
        let version = store.opened_schema_version();
        if version < VECTOR_SCHEMA_VERSION {
            return Err(Error::unsupported(format!(
                "the tables with prefix {:?} are at schema version {version}; the vector store \
                 needs version {VECTOR_SCHEMA_VERSION}: upgrade the schema (`agent-memory \
                 upgrade`, or the library's default open)",
                store.inner.prefix.as_str()
            )));
        }
        Ok(Self {
            rows: ScopedRows::new(store, "{prefix}vectors", "point_id", NOUN),
            sql: Arc::new(VectorSql::new(store, version >= QUANTIZED_SCHEMA_VERSION)),
            dimensions: Arc::new(OnceLock::new()),
        })
    }

    fn store(&self) -> &SqlStore {
        self.rows.store()
    }

    /// The dimension recorded in the database, if any vector was ever written (as `tx` sees
    /// it: a read's snapshot caches it, a write caches it after its commit).
    async fn recorded_dimensions(&self, tx: &mut Tx<'_>, ctx: &str) -> Result<Option<usize>> {
        self.read_dimensions(tx, ctx)
            .await
            .map(|read| read.map(|d| *self.dimensions.get_or_init(|| d)))
    }

    /// The dimension known or recorded, not cached.
    async fn read_dimensions(&self, tx: &mut Tx<'_>, ctx: &str) -> Result<Option<usize>> {
        if let Some(known) = self.dimensions.get() {
            return Ok(Some(*known));
        }
        let rows = tx
            .fetch(ctx, Query::shared(&self.sql.read_dimensions), &[Col::Int])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let stored = row.uint(0)?;
        let dimensions = usize::try_from(stored)
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| {
                Error::serialization(format!(
                    "{}vector_dimensions records an impossible dimension {stored}",
                    self.store().inner.prefix.as_str()
                ))
            })?;
        Ok(Some(dimensions))
    }

    /// Records `dimensions` as the store's when none is, and checks that it is the store's
    /// (nothing is cached: the transaction may yet roll back).
    async fn claim_dimensions(&self, tx: &mut Tx<'_>, ctx: &str, dimensions: usize) -> Result<()> {
        if self.dimensions.get().is_none() {
            let wanted = i64::try_from(dimensions)
                .map_err(|_| Error::invalid_input("a vector has too many dimensions"))?;
            tx.execute(ctx, Query::shared(&self.sql.record_dimensions).int(wanted))
                .await?;
        }
        match self.read_dimensions(tx, ctx).await? {
            Some(recorded) if recorded != dimensions => Err(Error::invalid_input(format!(
                "a vector has {dimensions} dimensions; this store holds {recorded}"
            ))),
            _ => Ok(()),
        }
    }

    async fn upsert_rows(&self, scope: &Scope, points: &[&VectorPoint]) -> Result<()> {
        const CTX: &str = "upsert vector points";
        let Some(first) = points.first() else {
            return Ok(());
        };
        let quantized = self.sql.writes_quantized();
        let encoded: Vec<EncodedPoint> = points
            .iter()
            .map(|p| {
                Ok(EncodedPoint {
                    id: p.id.hyphenated().to_string(),
                    vector: encode_vector(&p.vector),
                    quantized: quantized.then(|| quantize(&p.vector)),
                    payload: payload_text(&p.payload, NOUN, p.id)?,
                })
            })
            .collect::<Result<_>>()?;
        let key = scope.key();
        let mut tx = self.store().inner.db.begin(CTX).await?;
        self.claim_dimensions(&mut tx, CTX, first.vector.len())
            .await?;
        let mut rest = encoded.as_slice();
        while !rest.is_empty() {
            let n = chunk_len(
                rest.iter().map(EncodedPoint::size),
                self.sql.params_per_row(),
            );
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            let mut q = Query::built(self.store().render(&self.sql.upsert(chunk.len())), true);
            for point in chunk {
                q = q.text(&point.id).text(&key).args(scope_args(scope));
                q = q.bytes(&point.vector).text(&point.payload);
                if let Some(quantized) = &point.quantized {
                    q = q.bytes(quantized);
                }
            }
            tx.execute(CTX, q).await?;
        }
        tx.commit(CTX).await?;
        // Committed: the dimension is the store's for good.
        self.dimensions.get_or_init(|| first.vector.len());
        Ok(())
    }

    /// The best `top_k` points within `within`, each with its scope key: the approximate pass
    /// over every point, then the exact one over its best candidates (see [`SqlVectorStore`]).
    async fn search_rows(
        &self,
        within: Within<'_>,
        query: &VectorQuery,
    ) -> Result<Vec<(String, ScoredPoint)>> {
        const CTX: &str = "search vector points";
        let db = &self.store().inner.db;
        let mut tx = db.begin_read(CTX).await?;
        let recorded = self.recorded_dimensions(&mut tx, CTX).await?;
        check_vectors([query.vector.as_slice()], recorded)?;
        if recorded.is_none() || query.top_k == 0 {
            tx.commit(CTX).await?;
            return Ok(Vec::new());
        }
        let scorer = QueryScorer::new(&query.vector);
        let with_payloads = query.filter.is_some();
        let scan = self.scan(within, with_payloads);
        let mut cols = vec![Col::Text, Col::Text, Col::Bytes];
        if with_payloads {
            cols.push(Col::Text);
        }
        let mut candidates = Vec::new();
        for mut row in tx.fetch(CTX, scan, &cols).await? {
            let key = row.take_text(0)?;
            let id = self.rows.parse_id(&row.take_text(1)?)?;
            if let Some(filter) = &query.filter {
                let payload = self.rows.parse_payload(&row.take_text(3)?, id)?;
                if !filter.matches(&payload) {
                    continue;
                }
            }
            let score = scorer.score(&row.take_bytes(2)?, &format_args!("{NOUN} {id}"))?;
            candidates.push((score, id, key));
        }
        keep_best_by(
            &mut candidates,
            rescoring_candidates(query.top_k),
            |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)),
        );
        let wanted: Vec<(&str, String)> = candidates
            .iter()
            .map(|(_, id, key)| (key.as_str(), id.hyphenated().to_string()))
            .collect();
        let mut exact = self.rescore(&mut tx, &wanted, &scorer).await?;
        tx.commit(CTX).await?;
        exact.retain(|hit| query.min_score.is_none_or(|min| hit.1.score >= min));
        keep_best_by(&mut exact, query.top_k, |a, b| {
            b.1.score
                .total_cmp(&a.1.score)
                .then(a.1.id.cmp(&b.1.id))
                .then(a.0.cmp(&b.0))
        });
        Ok(exact)
    }

    /// The scan of the points within `within`: scope key, id, vector (and payload).
    fn scan<'q>(&self, within: Within<'q>, with_payloads: bool) -> Query<'q> {
        let columns = within.columns();
        let mut q = match (within, with_payloads) {
            (Within::Scope(_), false) => Query::shared(&self.sql.scan),
            (Within::Scope(_), true) => Query::shared(&self.sql.scan_with_payloads),
            (Within::Matching(_), _) => {
                let names: Vec<&str> = columns.iter().map(|(c, _)| *c).collect();
                let sql = self.sql.scan_where(&names, with_payloads);
                Query::built(self.store().render(&sql), true)
            }
        };
        for (_, value) in columns {
            q = q.text(value);
        }
        q
    }

    /// The points `wanted` names (scope key, stored id) scored exactly from their `f32`
    /// vectors, with their payloads and scope keys; a point deleted since the first pass is
    /// not in the snapshot, so it is not here either.
    async fn rescore(
        &self,
        tx: &mut Tx<'_>,
        wanted: &[(&str, String)],
        scorer: &QueryScorer<'_>,
    ) -> Result<Vec<(String, ScoredPoint)>> {
        const CTX: &str = "score the best vector points exactly";
        let mut scored = Vec::with_capacity(wanted.len());
        let mut rest = wanted;
        while !rest.is_empty() {
            let n = power_of_two_at_most(rest.len().min(MAX_PARAMS / 2));
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            let sql = self.sql.candidates(chunk.len());
            let mut q = Query::built(self.store().render(&sql), true);
            for (key, id) in chunk {
                q = q.text(key).text(id);
            }
            let cols = [Col::Text, Col::Text, Col::Bytes, Col::Text];
            for mut row in tx.fetch(CTX, q, &cols).await? {
                let key = row.take_text(0)?;
                let id = self.rows.parse_id(&row.take_text(1)?)?;
                let vector = row.take_bytes(2)?;
                let score = scorer.score_exactly(&vector, &format_args!("{NOUN} {id}"))?;
                let payload = self.rows.parse_payload(&row.take_text(3)?, id)?;
                scored.push((key, ScoredPoint { id, score, payload }));
            }
        }
        Ok(scored)
    }

    async fn get_rows(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        const CTX: &str = "get vector points";
        let wanted = distinct_ids(ids);
        let key = scope.key();
        let db = &self.store().inner.db;
        let mut by_id = HashMap::with_capacity(wanted.len());
        for chunk in self.rows.id_chunks(&wanted) {
            let q = self
                .rows
                .by_ids("SELECT point_id, vector, payload FROM", &key, chunk);
            let cols = [Col::Text, Col::Bytes, Col::Text];
            for row in db.fetch(CTX, q, &cols).await? {
                let point = self.point(row)?;
                by_id.insert(point.id, point);
            }
        }
        Ok(wanted
            .iter()
            .filter_map(|(id, _)| by_id.remove(id))
            .collect())
    }

    /// A row (id, vector, payload) as a point.
    fn point(&self, mut row: Row) -> Result<VectorPoint> {
        let id = self.rows.parse_id(&row.take_text(0)?)?;
        let vector = decode_vector(&row.take_bytes(1)?, id)?;
        let payload = self.rows.parse_payload(&row.take_text(2)?, id)?;
        Ok(VectorPoint {
            id,
            vector,
            payload,
        })
    }
}

/// A point as an upsert binds it.
struct EncodedPoint {
    id: String,
    vector: Vec<u8>,
    /// The compact vector, when the schema has its column (v8).
    quantized: Option<Vec<u8>>,
    payload: String,
}

impl EncodedPoint {
    /// The bytes it binds (for the statement size limit).
    fn size(&self) -> usize {
        self.vector
            .len()
            .saturating_add(self.payload.len())
            .saturating_add(self.quantized.as_ref().map_or(0, Vec::len))
    }
}

impl fmt::Debug for SqlVectorStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlVectorStore")
            .field("backend", &self.store().backend())
            .field("table_prefix", &self.store().inner.prefix)
            .field("dimensions", &self.dimensions.get())
            .finish()
    }
}

impl_scoped_index! {
impl VectorStore with VectorCapabilities for SqlVectorStore {
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        const CTX: &str = "upsert vector points";
        let known = self.dimensions.get().copied();
        check_vectors(points.iter().map(|p| p.vector.as_slice()), known)?;
        let written: Vec<&VectorPoint> = last_of_each_id(points.iter().map(|p| p.id))
            .into_iter()
            .filter_map(|at| points.get(at))
            .collect();
        let write = with_retries(CTX, || self.upsert_rows(scope, &written));
        self.rows.bounded("upsert", CTX, write).await
    }

    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        const CTX: &str = "search vector points";
        let key = scope.key();
        let search = self.search_rows(Within::Scope(&key), query);
        let found = self.rows.bounded("search", CTX, search).await?;
        Ok(found.into_iter().map(|(_, point)| point).collect())
    }

    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        query: &VectorQuery,
    ) -> Result<Vec<ScopedHit<ScoredPoint>>> {
        const CTX: &str = "search vector points";
        let search = self.search_rows(Within::Matching(filter), query);
        let found = self.rows.bounded("search_matching", CTX, search).await?;
        found
            .into_iter()
            .map(|(key, point)| Ok(ScopedHit::new(self.rows.parse_scope_key(&key)?, point)))
            .collect()
    }

    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.rows
            .bounded("get", "get vector points", self.get_rows(scope, ids))
            .await
    }
}
}
