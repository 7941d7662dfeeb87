//! `user_search`: a user's long-term memory searched across their sessions, as
//! `VectorMemoryBlock::search_across` and the server's `POST /v1/memory/search` search it: N
//! points of 384 dimensions (one a turn, as a memory that indexes on append writes them) in
//! the backend's own vector store, [`TURNS_PER_SESSION`] a session, under one user of a fresh
//! tenant; one op = one top-10 `search_matching` over the user's sessions (the query's
//! embedding excluded: add `embed`'s figure for it). The line reports the index throughput
//! (points per second, one upsert a session) beside the search latency.

use std::hint::black_box;
use std::time::Instant;

use memory_core::{Scope, ScopeFilter, SessionId, TenantId, UserId, VectorQuery};

use crate::BenchResult;
use crate::backends::Stores;
use crate::harness::{Ctx, Recorder, Report, round};
use crate::vectors::{DIMENSIONS, POINT_SEED, QUERY_SEED, XorShift};

/// The turns (points) of one session.
pub(crate) const TURNS_PER_SESSION: usize = 20;
/// The sizes measured when `--n` is not given: a user with 600 turns, and one with 20,000.
pub(crate) const USER_SEARCH_NS: [usize; 2] = [600, 20_000];
/// The `top_k` of a search.
const TOP_K: usize = 10;

/// Runs `user_search` on `stores`' vector store.
pub(crate) async fn user_search(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 10;
    let tenant = TenantId::new(format!("bench-{}", uuid::Uuid::new_v4().simple()))?;
    let user = UserId::new("dana")?;
    let mut points = XorShift::new(POINT_SEED);
    let sessions = ctx.n.div_ceil(TURNS_PER_SESSION);
    let index_started = Instant::now();
    let mut left = ctx.n;
    let mut scopes = Vec::with_capacity(sessions);
    for session in 0..sessions {
        let size = left.min(TURNS_PER_SESSION);
        let scope = Scope::new(tenant.clone(), SessionId::new(format!("s{session}"))?)
            .with_user_id(user.clone())
            .with_source("memory.vector.retrieval_based_memory")?;
        stores.vectors.upsert(&scope, &points.points(size)).await?;
        scopes.push(scope);
        left -= size;
    }
    let index = index_started.elapsed();
    let mine = ScopeFilter::tenant(tenant.clone()).with_user(user);

    let expected = ctx.n.min(TOP_K);
    let mut queries = XorShift::new(QUERY_SEED);
    for _ in 0..warmup {
        let query = VectorQuery::new(queries.unit_vector(DIMENSIONS), TOP_K);
        black_box(stores.vectors.search_matching(&mine, &query).await?);
    }
    let before = stores.round_trips();
    let mut recorder = Recorder::new(ops);
    for _ in 0..ops {
        let query = VectorQuery::new(queries.unit_vector(DIMENSIONS), TOP_K);
        let started = Instant::now();
        let hits = stores.vectors.search_matching(&mine, &query).await?;
        recorder.push(started.elapsed());
        if hits.len() != expected {
            return Err(format!("a search found {} hits, expected {expected}", hits.len()).into());
        }
    }
    let round_trips = stores.round_trips().saturating_sub(before);
    let stats = recorder.finish();
    for scope in &scopes {
        stores.vectors.clear(scope).await?;
    }
    Ok(vec![
        ctx.report(&stats)
            .field("dimensions", DIMENSIONS)
            .field("top_k", TOP_K)
            .field("sessions", sessions)
            .field("index_ms", round(index.as_secs_f64() * 1e3, 1))
            .field(
                "index_points_per_s",
                round(ctx.n as f64 / index.as_secs_f64().max(1e-9), 1),
            )
            .field(
                "round_trips_per_op",
                round(round_trips as f64 / stats.ops.max(1) as f64, 2),
            ),
    ])
}
