//! [`VectorStore`]: scoped vector points with payloads, searched by similarity.

mod filter;
mod in_memory;
mod layered;
pub mod quantized;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use filter::PayloadFilter;
pub use in_memory::InMemoryVectorStore;
pub use layered::LayeredVectors;

use crate::error::{Error, Result};
use crate::scoped_index::scoped_index_trait;

/// One point: an id, a vector and a JSON payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorPoint {
    /// The point's id, unique within its scope.
    pub id: Uuid,
    /// The vector.
    pub vector: Vec<f32>,
    /// Free-form payload, returned with search results and matched by filters.
    pub payload: serde_json::Map<String, serde_json::Value>,
}

/// A similarity search.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorQuery {
    /// The query vector.
    pub vector: Vec<f32>,
    /// How many results at most.
    pub top_k: usize,
    /// Only points whose payload matches.
    pub filter: Option<PayloadFilter>,
    /// Only points scoring at least this.
    pub min_score: Option<f32>,
}

impl VectorQuery {
    /// The `top_k` nearest points to `vector`.
    pub fn new(vector: Vec<f32>, top_k: usize) -> Self {
        Self {
            vector,
            top_k,
            filter: None,
            min_score: None,
        }
    }

    /// Restricts the search to points matching `filter`.
    pub fn with_filter(mut self, filter: PayloadFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Drops results scoring below `min_score`.
    pub fn with_min_score(mut self, min_score: f32) -> Self {
        self.min_score = Some(min_score);
        self
    }
}

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredPoint {
    /// The point's id.
    pub id: Uuid,
    /// Cosine similarity to the query, in `[-1, 1]`.
    pub score: f32,
    /// The point's payload.
    pub payload: serde_json::Map<String, serde_json::Value>,
}

scoped_index_trait! {
    /// Scoped vector storage with cosine similarity search.
    ///
    /// A store that wraps another and changes only some of its calls implements
    /// [`LayeredVectors`] instead: the rest is forwarded.
    ///
    /// # Behavior
    /// Each method states its contract in its own `# Behavior` section (the conformance suite in
    /// memory-testkit has a check per line of them). The rules that span the methods:
    /// - Every call names a scope; a point belongs to one scope, and no call on one scope reads or
    ///   changes another's points, whatever filter is passed. Point ids are unique within a scope:
    ///   the same id in two scopes is two points. A scope never written is empty for every read.
    /// - [`capabilities`](VectorStore::capabilities) is constant for a store object and tells the
    ///   truth: each optional operation is present if and only if its capability says so; an
    ///   absent one returns [`Unsupported`](crate::ErrorKind::Unsupported) and changes nothing.
    pub trait VectorStore with VectorCapabilities, a "store" of "point" items holding "vectors" {
        /// Inserts or replaces points.
        ///
        /// # Behavior
        /// Inserts or replaces points by id within the scope (a replaced point takes the new vector
        /// and payload); a retried upsert of the same points changes nothing; an empty batch is a
        /// no-op. All vectors of a store have one dimension, fixed by the first upsert (or the
        /// store's configuration); a vector of another dimension, an empty vector, or a non-finite
        /// value is [`InvalidInput`](crate::ErrorKind::InvalidInput), and nothing of that batch is
        /// written.
        async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()>;

        /// The nearest points to the query.
        ///
        /// # Behavior
        /// Returns at most `top_k` points *of the scope* (none for a `top_k` of 0) by decreasing
        /// cosine similarity, ties by ascending id (a backend may bound how many points tied at the
        /// `top_k` boundary it compares, so that a zero vector or many equal vectors never read a
        /// whole scope: it says so in its docs), each with its score and payload; only points whose
        /// payload matches the query's [`PayloadFilter`] and that score at least its `min_score`
        /// are returned. A query vector of another dimension is `InvalidInput`; a filter the
        /// backend cannot express (an `Eq` on a float, say) is
        /// [`Unsupported`](crate::ErrorKind::Unsupported), never a wrong answer.
        async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>>;
    }
}

/// Checks that every vector is non-empty, finite and of `dimensions` (when known); returns the
/// dimension of the batch.
///
/// # Errors
/// [`InvalidInput`](crate::ErrorKind::InvalidInput) naming the first bad vector.
pub fn check_vectors<'a>(
    vectors: impl IntoIterator<Item = &'a [f32]>,
    dimensions: Option<usize>,
) -> Result<Option<usize>> {
    let mut dim = dimensions;
    for v in vectors {
        if v.is_empty() {
            return Err(Error::invalid_input("a vector must not be empty"));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid_input(
                "a vector holds a NaN or infinite value",
            ));
        }
        match dim {
            Some(d) if d != v.len() => {
                return Err(Error::invalid_input(format!(
                    "a vector has {} dimensions; this store holds {d}",
                    v.len()
                )));
            }
            _ => dim = Some(v.len()),
        }
    }
    Ok(dim)
}

/// Keeps the `top_k` best of `scored`, in order: by decreasing score, ties by ascending id, as
/// [`VectorStore::search`] returns them; `score_and_id` reads an item's score and id.
pub fn keep_best<T>(scored: &mut Vec<T>, top_k: usize, score_and_id: impl Fn(&T) -> (f32, Uuid)) {
    keep_best_by(scored, top_k, |a, b| {
        let ((score_a, id_a), (score_b, id_b)) = (score_and_id(a), score_and_id(b));
        score_b.total_cmp(&score_a).then(id_a.cmp(&id_b))
    });
}

/// Keeps the first `top_k` of `scored` in the total order `order` (best first), sorted.
/// Selects before it sorts, so ranking `n` items costs O(n + top_k log top_k).
pub fn keep_best_by<T>(
    scored: &mut Vec<T>,
    top_k: usize,
    order: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if top_k < scored.len() {
        if let Some(last) = top_k.checked_sub(1) {
            scored.select_nth_unstable_by(last, &order);
        }
        scored.truncate(top_k);
    }
    scored.sort_by(order);
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros).
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
