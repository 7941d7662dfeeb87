//! The history store's own calls, one at a time: `append_one`, `read_window` and
//! `bulk_import`.

use std::hint::black_box;

use memory_core::ChatMessage;

use super::threads::{Growth, check_len, grow, preload};
use super::timer::Timer;
use super::{IMPORT_BATCH, WINDOW};
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::DataMessage;
use crate::harness::{Ctx, Report, fresh_scope, round};

/// `append_one`: append one message to a thread of N. The ops run in
/// [`rounds`](super::threads) on fresh threads of N.
pub(super) async fn append_one(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let growth = Growth::new(ctx, 50, 1_000, 1);
    let history = stores.history.as_ref();
    let grown = grow(ctx, stores, growth, async |session, k, timer| {
        let (scope, message) = (session.scope(), ctx.later(k).to_chat());
        timer
            .time(stores, async || {
                black_box(history.append(scope, &[message]).await?);
                Ok(0)
            })
            .await
    })
    .await?;
    Ok(vec![grown.with_rounds(ctx, grown.report(ctx, 1))])
}

/// `read_window`: read the 30,000-token window of a thread of N.
pub(super) async fn read_window(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(1_000);
    let warmup = 50;
    let history = stores.history.as_ref();
    let scope = fresh_scope()?;
    preload(history, &scope, ctx.thread()).await?;
    let window = history.read(&scope, WINDOW).await?;
    let window_len = window.len();
    let window_tokens: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
    drop(window);
    for _ in 0..warmup {
        black_box(history.read(&scope, WINDOW).await?);
    }
    let mut timer = Timer::new(ops);
    for _ in 0..ops {
        timer
            .time(stores, async || {
                black_box(history.read(&scope, WINDOW).await?);
                Ok(())
            })
            .await?;
    }
    let timed = timer.finish();
    history.clear(&scope).await?;
    Ok(vec![
        ctx.report(&timed.stats)
            .field("store_calls_per_op", 1)
            .field("round_trips_per_op", timed.round_trips_per_op())
            .field("window_len", window_len)
            .field("window_tokens", window_tokens),
    ])
}

/// `bulk_import`: append N messages to an empty thread in batches of up to 1,000, repeated on
/// fresh threads. One op = one batch; throughput is messages per second.
pub(super) async fn bulk_import(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let imports = ctx.ops.unwrap_or((20_000 / ctx.n).clamp(3, 50)).max(1);
    let history = stores.history.as_ref();
    let messages: Vec<ChatMessage> = ctx.thread().iter().map(DataMessage::to_chat).collect();
    // Warm-up: one batch on a throwaway thread.
    let scope = fresh_scope()?;
    let warm = &messages[..messages.len().min(IMPORT_BATCH)];
    history.append(&scope, warm).await?;
    history.clear(&scope).await?;
    let mut timer = Timer::new(imports * ctx.n.div_ceil(IMPORT_BATCH));
    for _ in 0..imports {
        let scope = fresh_scope()?;
        for batch in messages.chunks(IMPORT_BATCH) {
            timer
                .time(stores, async || {
                    black_box(history.append(&scope, batch).await?);
                    Ok(())
                })
                .await?;
        }
        check_len(history, &scope, ctx.n).await?;
        history.clear(&scope).await?;
    }
    // Only the appends count: checking and clearing between imports is not the workload.
    let timed = timer.finish();
    let stats = &timed.stats;
    let busy = stats.total;
    let total_messages = imports * ctx.n;
    let import_ms = busy.as_secs_f64() * 1e3 / imports as f64;
    let us_per_message = busy.as_secs_f64() * 1e6 / total_messages as f64;
    Ok(vec![
        Report::with_units(
            ctx.workload,
            ctx.backend,
            ctx.n,
            stats,
            total_messages as f64,
        )
        .field("rate_unit", "messages")
        .field("round_trips_per_op", timed.round_trips_per_op())
        .field("round_trips_per_import", timed.round_trips_per(imports))
        .field("batch_size", ctx.n.min(IMPORT_BATCH))
        .field("imports", imports)
        .field("import_ms", round(import_ms, 3))
        .field("us_per_message", round(us_per_message, 3)),
    ])
}
