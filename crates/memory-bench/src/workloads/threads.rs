//! The threads of N a workload runs on: preloading them, checking their length, and [`grow`],
//! which runs a growing workload's operations in rounds of fresh threads. All of it is setup,
//! never timed, but for the part of each operation the workload times.

use std::hint::black_box;

use memory_core::{AgentSession, ChatMessage, HistoryStore, Scope};

use super::IMPORT_BATCH;
use super::timer::{Timed, Timer};
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::DataMessage;
use crate::harness::{Ctx, Report, average, fresh_scope};

/// Appends `messages` to the thread of `scope` in batches (setup, untimed).
pub(super) async fn preload(
    history: &dyn HistoryStore,
    scope: &Scope,
    messages: &[DataMessage],
) -> BenchResult<()> {
    for chunk in messages.chunks(IMPORT_BATCH) {
        let batch: Vec<ChatMessage> = chunk.iter().map(DataMessage::to_chat).collect();
        let outcome = history.append(scope, &batch).await?;
        if outcome.inserted != batch.len() {
            return Err(format!(
                "preloading stored {} of {} messages",
                outcome.inserted,
                batch.len()
            )
            .into());
        }
    }
    Ok(())
}

/// The number of messages in the thread of `scope`, checked against `expected`.
pub(super) async fn check_len(
    history: &dyn HistoryStore,
    scope: &Scope,
    expected: usize,
) -> BenchResult<()> {
    let count = history.count(scope).await?;
    if count.active != expected as u64 {
        return Err(format!(
            "the thread holds {} active messages, expected {expected}",
            count.active
        )
        .into());
    }
    Ok(())
}

/// How a growing workload runs: each of its operations appends `messages_per_op` messages to
/// the thread it runs on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Growth {
    /// The untimed operations first, on a throwaway thread of N.
    warmup: usize,
    /// The timed operations.
    ops: usize,
    /// The messages each operation appends.
    messages_per_op: usize,
}

impl Growth {
    /// `warmup` untimed operations, then `--ops` timed ones (else `default_ops`), each
    /// appending `messages_per_op` messages.
    pub(super) fn new(
        ctx: &Ctx<'_>,
        warmup: usize,
        default_ops: usize,
        messages_per_op: usize,
    ) -> Self {
        Self {
            warmup,
            ops: ctx.ops.unwrap_or(default_ops),
            messages_per_op,
        }
    }
}

/// Runs a growing workload. Its `op` is given the session of the thread to run on (a fresh one
/// holding the first N messages), the operation's index `k` (counted across the rounds, for
/// [`Ctx::later`]) and the timer to time its measured part with, and returns the length of the
/// window it read (0 where it reads none). It runs `warmup` times on a throwaway thread (the
/// timer it is given then is discarded), then `ops` times in [`rounds`], each round on a fresh
/// thread that is then checked to have grown by the round's messages, and cleared.
pub(super) async fn grow(
    ctx: &Ctx<'_>,
    stores: &Stores,
    growth: Growth,
    mut op: impl AsyncFnMut(&mut AgentSession, usize, &mut Timer) -> BenchResult<usize>,
) -> BenchResult<Grown> {
    let history = stores.history.as_ref();
    let mut discarded = Timer::new(growth.warmup);
    let mut session = fresh_thread(ctx, history).await?;
    for k in 0..growth.warmup {
        black_box(op(&mut session, k, &mut discarded).await?);
    }
    history.clear(session.scope()).await?;

    let plan = rounds(ctx.n, growth.ops, growth.messages_per_op);
    let mut timer = Timer::new(growth.ops);
    let mut window_total = 0;
    let mut first = 0;
    for &len in &plan {
        let mut session = fresh_thread(ctx, history).await?;
        for k in first..first + len {
            window_total += op(&mut session, k, &mut timer).await?;
        }
        first += len;
        let expected = ctx.n + growth.messages_per_op * len;
        check_len(history, session.scope(), expected).await?;
        history.clear(session.scope()).await?;
    }
    Ok(Grown {
        timed: timer.finish(),
        growth,
        plan,
        window_total,
    })
}

/// A session on a fresh thread holding the first N messages.
async fn fresh_thread(ctx: &Ctx<'_>, history: &dyn HistoryStore) -> BenchResult<AgentSession> {
    let session = AgentSession::new(fresh_scope()?);
    preload(history, session.scope(), ctx.thread()).await?;
    Ok(session)
}

/// What a growing workload measured.
#[derive(Debug)]
pub(super) struct Grown {
    timed: Timed,
    growth: Growth,
    plan: Vec<usize>,
    window_total: usize,
}

impl Grown {
    /// The workload's line: its statistics, `store_calls_per_op` and `round_trips_per_op`.
    pub(super) fn report(&self, ctx: &Ctx<'_>, store_calls_per_op: usize) -> Report {
        ctx.report(&self.timed.stats)
            .field("store_calls_per_op", store_calls_per_op)
            .field("round_trips_per_op", self.timed.round_trips_per_op())
    }

    /// The average length of the windows the timed operations read, rounded to 0.1.
    pub(super) fn window_len_avg(&self) -> f64 {
        average(self.window_total, self.growth.ops)
    }

    /// `report` with the fields about the rounds last: how many, and the longest thread.
    pub(super) fn with_rounds(&self, ctx: &Ctx<'_>, report: Report) -> Report {
        let largest = self.plan.iter().copied().max().unwrap_or(0);
        report
            .field("rounds", self.plan.len())
            .field("n_max", ctx.n + largest * self.growth.messages_per_op)
    }
}

/// Splits `ops` operations that each append `messages_per_op` messages into rounds, each on a
/// fresh thread of N, so that no round grows its thread by more than about a tenth: the
/// operations of a case with N = 100 run on threads of 100 to 110 messages, not 100 to 500.
fn rounds(n: usize, ops: usize, messages_per_op: usize) -> Vec<usize> {
    let per_round = (n / 10 / messages_per_op.max(1)).max(1);
    let mut plan = Vec::with_capacity(ops.div_ceil(per_round));
    let mut left = ops;
    while left > 0 {
        let round = left.min(per_round);
        plan.push(round);
        left -= round;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_keep_threads_within_a_tenth_of_n() {
        assert_eq!(rounds(100, 200, 2), vec![5; 40]);
        assert_eq!(rounds(10_000, 200, 2), vec![200]);
        assert_eq!(rounds(1_000, 120, 2), vec![50, 50, 20]);
        assert_eq!(rounds(5, 3, 2), vec![1, 1, 1]);
        assert!(rounds(100, 0, 1).is_empty());
    }
}
