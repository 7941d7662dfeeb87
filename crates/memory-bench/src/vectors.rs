//! The vector workloads: `vector_upsert` and `vector_search` on a vector store, `embed` with the
//! local model.
//!
//! Vectors are deterministic pseudo-random unit vectors of [`DIMENSIONS`] dimensions from a
//! fixed seed ([`XorShift`]), so every run and every backend sees the same points and queries.
//! Their N is a number of points, not of data set messages: [`VECTOR_NS`] by default.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memory_core::{Embedder, InMemoryVectorStore, Scope, VectorPoint, VectorQuery, VectorStore};
use memory_vector::{BertEmbedder, MODEL_DIR_ENV, QdrantEdgeStore};

use crate::BenchResult;
use crate::harness::{Ctx, Recorder, Report, Stats, fresh_scope, peak_rss_mb, round};

/// The dimension of the benchmark's vectors (all-MiniLM-L6-v2's).
pub(crate) const DIMENSIONS: usize = 384;
/// The point counts measured when `--n` is not given.
pub(crate) const VECTOR_NS: [usize; 2] = [10_000, 100_000];
/// The texts `embed` embeds when `--n` is not given: the first N messages of the data set.
pub(crate) const EMBED_NS: [usize; 1] = [1_000];
/// Points per timed `vector_upsert` call.
const UPSERT_BATCH: usize = 256;
/// Points per (untimed) upsert when `vector_search` preloads its points.
const PRELOAD_BATCH: usize = 1_000;
/// The `top_k` of `vector_search`.
const TOP_K: usize = 10;
/// Texts per timed `embed` call.
const EMBED_BATCH: usize = 32;
/// The seed of the points, and that of the queries.
pub(crate) const POINT_SEED: u64 = 0x5EED_0384_0000_0001;
pub(crate) const QUERY_SEED: u64 = 0x5EED_0384_0000_0002;

/// The vector store backends: name and description.
pub(crate) const VECTOR_BACKENDS: [(&str, &str); 2] = [
    (
        "exact",
        "InMemoryVectorStore (memory-core): exact cosine over every point of the scope",
    ),
    (
        "qdrant-edge",
        "QdrantEdgeStore (memory-vector): Qdrant's embedded engine in a fresh temporary \
         directory, removed afterwards",
    ),
];
/// The backend name of `embed`: the local model on candle.
pub(crate) const EMBED_BACKEND: &str = "candle";

/// Whether `embed` can run: `AGENT_MEMORY_MODEL_DIR` is set.
pub(crate) fn embed_available() -> Result<(), String> {
    match std::env::var(MODEL_DIR_ENV) {
        Ok(dir) if !dir.trim().is_empty() => Ok(()),
        _ => Err(format!(
            "{MODEL_DIR_ENV} is not set; `cargo xtask fetch-model` downloads the model and \
             prints its directory"
        )),
    }
}

/// A small deterministic generator (xorshift64*): no extra crate, the same numbers everywhere.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (any value; 0 is replaced).
    pub(crate) fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform value in [-1, 1).
    fn next_f32(&mut self) -> f32 {
        // The top 24 bits: exact in an f32.
        (self.next_u64() >> 40) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// A random unit vector of `dims` dimensions.
    pub(crate) fn unit_vector(&mut self, dims: usize) -> Vec<f32> {
        loop {
            let mut v: Vec<f32> = (0..dims).map(|_| self.next_f32()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 1e-6 {
                v.iter_mut().for_each(|x| *x /= norm);
                return v;
            }
        }
    }

    /// A random UUID (version 4 bits set).
    fn uuid(&mut self) -> uuid::Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// `count` random points with empty payloads.
    pub(crate) fn points(&mut self, count: usize) -> Vec<VectorPoint> {
        (0..count)
            .map(|_| VectorPoint {
                id: self.uuid(),
                vector: self.unit_vector(DIMENSIONS),
                payload: serde_json::Map::new(),
            })
            .collect()
    }
}

/// A temporary directory, removed (with everything in it) when dropped.
#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // A directory that was never created is not an error.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A vector store opened for one case.
struct OpenStore {
    store: Arc<dyn VectorStore>,
    temp_dir: Option<TempDir>,
}

impl OpenStore {
    /// Opens the vector backend called `name`.
    async fn open(name: &str) -> BenchResult<Self> {
        match name {
            "exact" => Ok(Self {
                store: Arc::new(InMemoryVectorStore::new()),
                temp_dir: None,
            }),
            "qdrant-edge" => {
                let dir = std::env::temp_dir()
                    .join(format!("bench-qdrant-edge-{}", uuid::Uuid::new_v4()));
                // The guard exists before the directory does: a failed open leaves nothing.
                let temp_dir = TempDir(dir);
                let store = QdrantEdgeStore::open_with_dimensions(&temp_dir.0, DIMENSIONS).await?;
                Ok(Self {
                    store: Arc::new(store),
                    temp_dir: Some(temp_dir),
                })
            }
            other => {
                let known: Vec<&str> = VECTOR_BACKENDS.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "unknown vector backend {other:?}; known: {}",
                    known.join(", ")
                )
                .into())
            }
        }
    }

    /// Closes the store (on the blocking pool: the engine may flush), then removes its
    /// directory.
    async fn close(self) -> BenchResult<()> {
        let Self { store, temp_dir } = self;
        tokio::task::spawn_blocking(move || drop(store)).await?;
        drop(temp_dir);
        Ok(())
    }
}

/// Runs a vector workload; `start_rss` becomes the peak once the store (or model) is open.
pub(crate) async fn run(ctx: &Ctx<'_>, start_rss: &mut Option<f64>) -> BenchResult<Vec<Report>> {
    match ctx.workload {
        "embed" => embed(ctx, start_rss).await,
        workload => {
            let open = OpenStore::open(ctx.backend)
                .await
                .map_err(|e| format!("cannot open the {} vector store: {e}", ctx.backend))?;
            *start_rss = peak_rss_mb();
            let reports = match workload {
                "vector_upsert" => vector_upsert(ctx, open.store.as_ref()).await,
                "vector_search" => vector_search(ctx, open.store.as_ref()).await,
                other => Err(format!("{other} is not a vector workload").into()),
            };
            open.close().await?;
            reports
        }
    }
}

/// The points of the thread `scope`, checked against `expected`.
async fn check_count(store: &dyn VectorStore, scope: &Scope, expected: usize) -> BenchResult<()> {
    let count = store.count(scope).await?;
    if count != expected as u64 {
        return Err(format!("the scope holds {count} points, expected {expected}").into());
    }
    Ok(())
}

/// `vector_upsert`: upsert N points into a fresh scope in batches of [`UPSERT_BATCH`]; one op
/// = one batch, throughput in points per second. `--ops K` repeats the import K times (default
/// once), each in a fresh scope cleared afterwards.
async fn vector_upsert(ctx: &Ctx<'_>, store: &dyn VectorStore) -> BenchResult<Vec<Report>> {
    let imports = ctx.ops.unwrap_or(1).max(1);
    // Warm-up: a few batches of other points into a throwaway scope.
    let scope = fresh_scope()?;
    let mut rng = XorShift::new(QUERY_SEED ^ POINT_SEED);
    for _ in 0..4 {
        store.upsert(&scope, &rng.points(UPSERT_BATCH)).await?;
    }
    store.clear(&scope).await?;

    let mut samples = Vec::with_capacity(imports * ctx.n.div_ceil(UPSERT_BATCH));
    for _ in 0..imports {
        let scope = fresh_scope()?;
        let mut rng = XorShift::new(POINT_SEED);
        let mut left = ctx.n;
        while left > 0 {
            let size = left.min(UPSERT_BATCH);
            // Generating the points is setup, not timed.
            let batch = rng.points(size);
            let started = Instant::now();
            store.upsert(&scope, &batch).await?;
            samples.push(started.elapsed());
            left -= size;
        }
        check_count(store, &scope, ctx.n).await?;
        store.clear(&scope).await?;
    }
    let busy: std::time::Duration = samples.iter().sum();
    let stats = Stats::from_samples(samples, busy);
    let points = imports * ctx.n;
    Ok(vec![
        Report::with_units(ctx.workload, ctx.backend, ctx.n, &stats, points as f64)
            .field("rate_unit", "points")
            .field("dimensions", DIMENSIONS)
            .field("batch_size", UPSERT_BATCH)
            .field("imports", imports)
            .field(
                "import_ms",
                round(busy.as_secs_f64() * 1e3 / imports as f64, 1),
            )
            .field(
                "us_per_point",
                round(busy.as_secs_f64() * 1e6 / points as f64, 2),
            ),
    ])
}

/// `vector_search`: top-[`TOP_K`] search with a random unit query over N preloaded points.
async fn vector_search(ctx: &Ctx<'_>, store: &dyn VectorStore) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 10;
    let scope = fresh_scope()?;
    let mut rng = XorShift::new(POINT_SEED);
    let preload_started = Instant::now();
    let mut left = ctx.n;
    while left > 0 {
        let size = left.min(PRELOAD_BATCH);
        store.upsert(&scope, &rng.points(size)).await?;
        left -= size;
    }
    let preload = preload_started.elapsed();
    check_count(store, &scope, ctx.n).await?;

    let expected = ctx.n.min(TOP_K);
    let mut queries = XorShift::new(QUERY_SEED);
    for _ in 0..warmup {
        let query = VectorQuery::new(queries.unit_vector(DIMENSIONS), TOP_K);
        black_box(store.search(&scope, &query).await?);
    }
    let mut recorder = Recorder::new(ops);
    let mut top_score = 0.0f64;
    for _ in 0..ops {
        let query = VectorQuery::new(queries.unit_vector(DIMENSIONS), TOP_K);
        let started = Instant::now();
        let hits = store.search(&scope, &query).await?;
        recorder.push(started.elapsed());
        if hits.len() != expected {
            return Err(
                format!("a search returned {} hits, expected {expected}", hits.len()).into(),
            );
        }
        top_score += f64::from(hits[0].score);
    }
    let stats = recorder.finish();
    store.clear(&scope).await?;
    Ok(vec![
        ctx.report(&stats)
            .field("dimensions", DIMENSIONS)
            .field("top_k", TOP_K)
            .field("preload_ms", round(preload.as_secs_f64() * 1e3, 1))
            .field(
                "top_score_avg",
                round(top_score / stats.ops.max(1) as f64, 4),
            ),
    ])
}

/// `embed`: embed the first N message texts with [`BertEmbedder`] in batches of
/// [`EMBED_BATCH`] (one op = one batch; `--ops K` = K batches, cycling through the N texts);
/// throughput in texts per second.
async fn embed(ctx: &Ctx<'_>, start_rss: &mut Option<f64>) -> BenchResult<Vec<Report>> {
    embed_available()?;
    let dir = PathBuf::from(std::env::var(MODEL_DIR_ENV)?.trim());
    let load_started = Instant::now();
    let embedder = BertEmbedder::load_async(&dir).await?;
    let load = load_started.elapsed();
    *start_rss = peak_rss_mb();
    let texts: Vec<String> = ctx.thread().iter().map(|m| m.text.clone()).collect();
    let batches = ctx.ops.unwrap_or(ctx.n.div_ceil(EMBED_BATCH)).max(1);
    let batch = |b: usize| -> Vec<String> {
        let size = EMBED_BATCH.min(texts.len());
        (b * size..(b + 1) * size)
            .map(|i| texts[i % texts.len()].clone())
            .collect()
    };
    for b in 0..2 {
        black_box(embedder.embed(&batch(b)).await?);
    }
    let mut recorder = Recorder::new(batches);
    let mut embedded = 0usize;
    for b in 0..batches {
        let texts = batch(b);
        let started = Instant::now();
        let vectors = embedder.embed(&texts).await?;
        recorder.push(started.elapsed());
        if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != DIMENSIONS) {
            return Err(format!(
                "the model returned {} vectors for {} texts (expected {DIMENSIONS} dimensions)",
                vectors.len(),
                texts.len()
            )
            .into());
        }
        embedded += texts.len();
    }
    let stats = recorder.finish();
    let model = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    Ok(vec![
        Report::with_units(ctx.workload, ctx.backend, ctx.n, &stats, embedded as f64)
            .field("rate_unit", "texts")
            .field("model", model)
            .field("dimensions", embedder.dimensions())
            .field("batch_size", EMBED_BATCH)
            .field("batches", stats.ops)
            .field("texts", embedded)
            .field("load_ms", round(load.as_secs_f64() * 1e3, 1)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic_and_its_vectors_are_unit() {
        let mut a = XorShift::new(POINT_SEED);
        let mut b = XorShift::new(POINT_SEED);
        let (pa, pb) = (a.points(3), b.points(3));
        assert_eq!(pa, pb);
        for p in &pa {
            assert_eq!(p.vector.len(), DIMENSIONS);
            let norm: f32 = p.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{norm}");
            assert!(p.vector.iter().all(|x| (-1.0..=1.0).contains(x)));
        }
        assert_ne!(pa[0].id, pa[1].id);
        assert_ne!(pa[0].vector, pa[1].vector);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_edge_store_directory_is_removed_after_the_case() {
        let open = OpenStore::open("qdrant-edge").await.unwrap();
        let dir = open.temp_dir.as_ref().unwrap().0.clone();
        let scope = fresh_scope().unwrap();
        let points = XorShift::new(1).points(20);
        open.store.upsert(&scope, &points).await.unwrap();
        let hits = open
            .store
            .search(&scope, &VectorQuery::new(points[3].vector.clone(), 1))
            .await
            .unwrap();
        assert_eq!(hits[0].id, points[3].id);
        assert!(dir.exists());
        open.close().await.unwrap();
        assert!(!dir.exists());
        assert!(OpenStore::open("nope").await.is_err());
    }
}
