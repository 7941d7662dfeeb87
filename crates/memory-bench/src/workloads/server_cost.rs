//! `server_cost`: what the memory server adds to an operation. The server runs in-process on
//! the backend's stores on 127.0.0.1 ([`crate::server`]); a keep-alive client sends
//! it an append of one message (`POST /v1/threads/{session}/messages`) and a context read
//! (`GET /v1/memory/{session}/context`), and the same operations are called on the server's
//! own [`Ops`](memory_server::ops::Ops) object with no HTTP in between (`Ops::append`,
//! `Ops::memory_context`: what the routes call). The two are timed in turn, op by op, on two
//! threads preloaded alike with the first N messages, so a slower moment of a loaded machine
//! falls on both.
//!
//! The context reads come first, on threads of exactly N messages; the appends then grow both
//! threads alike, one message per op.
//!
//! Two lines, `phase` `append` and `context`: `p50_us` / `p99_us` of the HTTP request (the
//! request sent and the whole answer read, its body not decoded), `library_p50_us` /
//! `library_p99_us` of the library call, and `server_cost_us`: the difference of the p50s,
//! against the target `server_cost_target_us` (200 µs); `round_trips_per_op` counts the library
//! call's store round trips (the HTTP request makes the same ones). On `in-memory` that difference is the
//! server's own cost: routing, authentication, JSON in and out, HTTP over loopback.

use std::time::{Duration, Instant};

use memory_server::ops::{Address, MessageInput};

use super::threads::{check_len, preload};
use super::timer::Trips;
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::{DataMessage, DataRole};
use crate::harness::{Ctx, Recorder, Report, micros};
use crate::server::{self, RunningServer};

/// Operations per phase when `--ops` is not given.
const DEFAULT_OPS: usize = 1_000;
/// Untimed operations of each kind before the timed ones.
const WARMUP: usize = 20;
/// The target for the server's own cost, in µs.
const TARGET_US: f64 = 200.0;

/// The message of the `k`-th append, as the API takes it.
fn input(message: &DataMessage) -> MessageInput {
    let role = match message.role {
        DataRole::User => memory_core::Role::User,
        DataRole::Assistant => memory_core::Role::Assistant,
    };
    MessageInput::text(role, message.text.clone())
}

/// One HTTP request, its whole answer read; fails on a status other than 200.
async fn timed_http(request: reqwest::RequestBuilder) -> BenchResult<(Duration, usize)> {
    let started = Instant::now();
    let response = request.send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    if status != reqwest::StatusCode::OK {
        return Err(format!(
            "the server answered {status}: {}",
            String::from_utf8_lossy(&body)
        )
        .into());
    }
    Ok((elapsed, body.len()))
}

/// Runs the workload: two lines.
pub(super) async fn server_cost(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(DEFAULT_OPS);
    let running = server::start(stores).await?;
    let result = measure(ctx, stores, &running, ops).await;
    running.stop().await?;
    result
}

async fn measure(
    ctx: &Ctx<'_>,
    stores: &Stores,
    running: &RunningServer,
    ops: usize,
) -> BenchResult<Vec<Report>> {
    let session = |side: &str| format!("bench-{side}-{}", uuid::Uuid::new_v4().simple());
    let (http, library) = (
        Address::session(session("http")),
        Address::session(session("lib")),
    );
    let who = &running.principal;
    for address in [&http, &library] {
        let scope = running.ops.scope(who, address)?;
        preload(stores.history.as_ref(), &scope, ctx.thread()).await?;
    }
    let append_url = running.url(&format!("/v1/threads/{}/messages", http.session));
    let context_url = running.url(&format!("/v1/memory/{}/context", http.session));

    // The context reads first, on threads of exactly N; then the appends, which grow them.
    let mut trips = Trips::new(stores);
    let mut http_contexts = Recorder::new(ops);
    let mut library_contexts = Recorder::new(ops);
    let mut response_bytes = 0;
    let mut context_messages = 0;
    for k in 0..WARMUP + ops {
        let (elapsed, bytes) = timed_http(running.client.get(&context_url)).await?;
        let measured = k >= WARMUP;
        if measured {
            trips.start();
        }
        let started = Instant::now();
        let view = running.ops.memory_context(who, &library, None).await?;
        let library_elapsed = started.elapsed();
        if measured {
            trips.stop();
            http_contexts.push(elapsed);
            library_contexts.push(library_elapsed);
        }
        response_bytes = bytes;
        context_messages = view.messages.len();
    }

    let context_trips = trips.per_op(ops);
    let mut trips = Trips::new(stores);
    let mut http_appends = Recorder::new(ops);
    let mut library_appends = Recorder::new(ops);
    for k in 0..WARMUP + ops {
        let message = input(ctx.later(k));
        // The body is encoded before the clock starts: the client's JSON is not the server's.
        let body = serde_json::to_vec(&serde_json::json!({ "messages": [&message] }))?;
        let request = running
            .client
            .post(&append_url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let (elapsed, _) = timed_http(request).await?;
        let measured = k >= WARMUP;
        if measured {
            trips.start();
        }
        let started = Instant::now();
        running.ops.append(who, &library, vec![message]).await?;
        let library_elapsed = started.elapsed();
        if measured {
            trips.stop();
            http_appends.push(elapsed);
            library_appends.push(library_elapsed);
        }
    }
    let append_trips = trips.per_op(ops);
    let appended = ctx.n + WARMUP + ops;
    for address in [&http, &library] {
        check_len(
            stores.history.as_ref(),
            &running.ops.scope(who, address)?,
            appended,
        )
        .await?;
    }

    // Leave nothing behind: both threads are the case's own.
    for address in [&http, &library] {
        stores
            .history
            .clear(&running.ops.scope(who, address)?)
            .await?;
    }

    let line = |phase: &str, http: Recorder, library: Recorder| {
        let (http, library) = (http.finish(), library.finish());
        let cost = micros(http.p50) - micros(library.p50);
        ctx.report(&http)
            .field("phase", phase)
            .field("library_p50_us", micros(library.p50))
            .field("library_p99_us", micros(library.p99))
            .field("server_cost_us", crate::harness::round(cost, 2))
            .field("server_cost_target_us", TARGET_US)
            .field("within_target", cost <= TARGET_US)
    };
    Ok(vec![
        line("append", http_appends, library_appends)
            .field("thread_len_end", appended)
            .field("round_trips_per_op", append_trips),
        line("context", http_contexts, library_contexts)
            .field("response_bytes", response_bytes)
            .field("context_messages", context_messages)
            .field("round_trips_per_op", context_trips),
    ])
}
