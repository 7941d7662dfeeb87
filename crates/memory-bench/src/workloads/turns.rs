//! The turn workloads of issue 17: `agent_turn_cold` (the first turn of a process: a fresh
//! history-store object each op), `agent_turn_shared` (another writer appends between turns)
//! and `memory_turn` (`Agent::run` with a [`Memory`] holding a fact-extraction block).
//!
//! A child module of [`workloads`](super), so it shares its helpers (`turn`, `rounds`,
//! `Trips`, ...).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use memory_core::memory::blocks::FactExtractionMemoryBlock;
use memory_core::{
    Agent, AgentSession, ChatMessage, ChatModel, ChatRequest, ChatResponse, Memory, Window,
};

use super::{
    AGENT, CONSTANT_REPLY, MEMORY_PUT_BATCH, MEMORY_TOKEN_LIMIT, average, check_len, preload,
    rounds, turn, turn_messages, with_rounds,
};
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::DataMessage;
use crate::harness::{Ctx, Recorder, Report, fresh_scope, round};

/// The one fact [`FixedFactModel`] extracts, whatever it is shown.
pub(crate) const FIXED_FACT: &str = "Dana Whitfield is a site reliability engineer on the \
    payments team in Lisbon.";

/// A fact extractor for the benchmark: answers every request with the same one-fact list,
/// offline, and counts the requests (each flush asks it once: the fact never changes, so the
/// list never needs condensing).
#[derive(Debug, Default)]
pub(crate) struct FixedFactModel {
    calls: AtomicUsize,
}

impl FixedFactModel {
    /// The requests answered so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

#[memory_core::async_trait]
impl ChatModel for FixedFactModel {
    async fn complete(&self, _request: &ChatRequest) -> memory_core::Result<ChatResponse> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(format!(
                "<facts><fact>{FIXED_FACT}</fact></facts>"
            ))],
            ..ChatResponse::default()
        })
    }
}

/// `agent_turn_cold`: `agent_turn` where every op runs on a history-store object opened for it
/// ([`Stores::reopen`], untimed): the first turn a process makes on a thread of N, whose window
/// read is a whole read. One op = the same three store calls. The ops run in [`rounds`] on
/// fresh threads of N.
pub(super) async fn agent_turn_cold(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(100);
    let warmup = 5;
    let history = stores.history.as_ref();

    let scope = fresh_scope()?;
    preload(history, &scope, ctx.thread()).await?;
    for k in 0..warmup {
        let fresh = stores.reopen().await?;
        let (user, assistant) = turn_messages(ctx, k);
        black_box(turn(fresh.history.as_ref(), &scope, user, assistant).await?);
        fresh.close().await;
    }
    history.clear(&scope).await?;

    let plan = rounds(ctx.n, ops, 2);
    let mut window_total = 0;
    let mut recorder = Recorder::new(ops);
    let mut trips_total = 0u64;
    let mut k = 0;
    for &round in &plan {
        let scope = fresh_scope()?;
        preload(history, &scope, ctx.thread()).await?;
        let turns: Vec<_> = (k..k + round).map(|k| turn_messages(ctx, k)).collect();
        k += round;
        for (user, assistant) in turns {
            let fresh = stores.reopen().await?;
            let mark = fresh.round_trips();
            let started = Instant::now();
            let window_len = turn(fresh.history.as_ref(), &scope, user, assistant).await?;
            recorder.push(started.elapsed());
            trips_total += fresh.round_trips().saturating_sub(mark);
            fresh.close().await;
            window_total += window_len;
        }
        check_len(history, &scope, ctx.n + 2 * round).await?;
        history.clear(&scope).await?;
    }
    let stats = recorder.finish();
    let per_op = if stats.ops == 0 {
        0.0
    } else {
        round(trips_total as f64 / stats.ops as f64, 2)
    };
    let report = ctx
        .report(&stats)
        .field("store_calls_per_op", 3)
        .field("round_trips_per_op", per_op)
        .field("window_len_avg", average(window_total, ops))
        .field("store_object", stores.reopen_kind());
    Ok(vec![with_rounds(report, ctx.n, &plan, 2)])
}

/// `agent_turn_shared`: `agent_turn` on a thread another writer shares: before each turn, a
/// second store object over the same data ([`Stores::reopen`]: a second connection where the
/// backend has connections) appends one message to the thread, untimed. Only the turn is timed,
/// so the figure is a turn that must pick up someone else's append (the refresh path of a
/// caching or cursor-reading store). The ops run in [`rounds`] on fresh threads of N.
pub(super) async fn agent_turn_shared(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 10;
    let history = stores.history.as_ref();
    let writer = stores.reopen().await?;
    // The other writer's message of the `k`-th turn: a later message than the turn's own.
    let other = |k: usize| ChatMessage::user(ctx.later(3 * k + 2).text.clone());
    let turn_pair = |k: usize| {
        (
            ChatMessage::user(ctx.later(3 * k).text.clone()),
            ChatMessage::assistant(ctx.later(3 * k + 1).text.clone()),
        )
    };

    let scope = fresh_scope()?;
    preload(history, &scope, ctx.thread()).await?;
    for k in 0..warmup {
        writer.history.append(&scope, &[other(k)]).await?;
        let (user, assistant) = turn_pair(k);
        black_box(turn(history, &scope, user, assistant).await?);
    }
    history.clear(&scope).await?;

    let plan = rounds(ctx.n, ops, 3);
    let mut window_total = 0;
    let mut recorder = Recorder::new(ops);
    let mut trips = super::Trips::new(stores);
    let mut k = 0;
    for &round in &plan {
        let scope = fresh_scope()?;
        preload(history, &scope, ctx.thread()).await?;
        for k in k..k + round {
            writer.history.append(&scope, &[other(k)]).await?;
            let (user, assistant) = turn_pair(k);
            trips.start();
            let started = Instant::now();
            let window_len = turn(history, &scope, user, assistant).await?;
            recorder.push(started.elapsed());
            trips.stop();
            window_total += window_len;
        }
        k += round;
        check_len(history, &scope, ctx.n + 3 * round).await?;
        history.clear(&scope).await?;
    }
    writer.close().await;
    let stats = recorder.finish();
    let report = ctx
        .report(&stats)
        .field("store_calls_per_op", 3)
        .field("round_trips_per_op", trips.per_op(stats.ops))
        .field("window_len_avg", average(window_total, ops))
        .field("writer", stores.reopen_kind());
    Ok(vec![with_rounds(report, ctx.n, &plan, 3)])
}

/// `memory_turn`: `Agent::run` with [`ConstantReplyModel`](super::ConstantReplyModel) and a
/// [`Memory`] as its context provider, the memory holding a [`FactExtractionMemoryBlock`] whose
/// extractor is [`FixedFactModel`] (token_limit 30,000, LlamaIndex's other defaults; the agent
/// reads `Window::All`, which the flushes keep within 70 % of the limit). The first N messages
/// are imported through `put_messages` in batches of 100 (setup, untimed), then the ops are
/// turns on that one session. One op = one run: the memory's context (count, last 32 messages,
/// block states), the window read, the model, the append, and a flush when the window passed
/// the threshold (`flushes`: how many of the ops flushed, each one extractor call).
pub(super) async fn memory_turn(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 5;
    let extractor = Arc::new(FixedFactModel::default());
    let mut session = AgentSession::new(fresh_scope()?);
    let memory = Memory::builder(
        session.scope().clone(),
        Arc::clone(&stores.history),
        Arc::clone(&stores.sessions),
    )
    .block(Arc::new(FactExtractionMemoryBlock::new(
        Arc::clone(&extractor) as Arc<dyn ChatModel>,
    )))
    .token_limit(MEMORY_TOKEN_LIMIT)
    .build()?;
    let agent = Agent::builder(
        AGENT,
        Arc::new(super::ConstantReplyModel::new(CONSTANT_REPLY)),
        Arc::clone(&stores.history),
    )
    .instructions("You are a helpful assistant. Answer briefly.")
    .window(Window::All)
    .context_provider(Arc::new(memory.clone()))
    .build()?;
    let input = |k: usize| ChatMessage::user(ctx.later(k).text.clone());

    let mut import_flushes = 0usize;
    for chunk in ctx.thread().chunks(MEMORY_PUT_BATCH) {
        let batch: Vec<ChatMessage> = chunk.iter().map(DataMessage::to_chat).collect();
        if memory.put_messages(&batch).await?.messages > 0 {
            import_flushes += 1;
        }
    }
    for k in 0..warmup {
        black_box(agent.run(input(k), &mut session).await?);
    }
    let before = stores.history.count(session.scope()).await?;

    let mut recorder = Recorder::new(ops);
    let mut trips = super::Trips::new(stores);
    let mut flushes = 0usize;
    let mut window_total = 0;
    for k in warmup..warmup + ops {
        let message = input(k);
        let calls = extractor.calls();
        trips.start();
        let started = Instant::now();
        let run = agent.run(message, &mut session).await?;
        let window_len = run.window_len;
        drop(run);
        recorder.push(started.elapsed());
        trips.stop();
        if extractor.calls() > calls {
            flushes += 1;
        }
        window_total += window_len;
    }
    let stats = recorder.finish();
    let after = stores.history.count(session.scope()).await?;
    let grown = (after.active + after.archived) - (before.active + before.archived);
    if grown != 2 * ops as u64 {
        return Err(format!(
            "{ops} turns added {grown} messages to the thread, expected {}",
            2 * ops
        )
        .into());
    }
    // Once a flush has run, the memory shows the fact its extractor found.
    let facts_shown = memory.get(&[]).await?;
    let shows_fact = facts_shown
        .first()
        .is_some_and(|m| m.text().contains(FIXED_FACT));
    if shows_fact != (extractor.calls() > 0) {
        return Err(format!(
            "after {} extractor calls the memory {} the extracted fact",
            extractor.calls(),
            if shows_fact { "shows" } else { "does not show" }
        )
        .into());
    }
    drop(facts_shown);
    memory.reset().await?;
    Ok(vec![
        ctx.report(&stats)
            .field("round_trips_per_op", trips.per_op(stats.ops))
            .field("window_len_avg", average(window_total, ops))
            .field("flushes", flushes)
            .field("flushed", after.archived - before.archived)
            .field("import_flushes", import_flushes)
            .field("active_len", after.active)
            .field("active_tokens", after.active_tokens)
            .field("n_max", ctx.n + 2 * (warmup + ops)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Case;
    use crate::data::DataRole;
    use crate::workloads::{Workload, run};

    /// `len` messages of about 60 tokens each, like the data set's.
    fn long_data(len: usize) -> Vec<DataMessage> {
        (0..len)
            .map(|i| DataMessage {
                i,
                role: if i % 2 == 0 {
                    DataRole::User
                } else {
                    DataRole::Assistant
                },
                text: format!(
                    "message {i}: the release branch migrated the config file, the design doc \
                     is reviewed, the pricing table needs one more pass before Friday, and the \
                     notes of the weekly sync go to the hiring committee after lunch today"
                ),
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn memory_turns_flush_past_the_threshold_and_count_it() {
        let data = long_data(700);
        let case = Case {
            workload: Workload::MemoryTurn,
            backend: "in-memory".to_owned(),
            n: 600,
        };
        // 600 messages of ~50 tokens pass the 21,000-token threshold during the import, and
        // 60 turns of two ~50-token messages (6,000 tokens, twice the flush size) pass it again.
        let reports = run(&case, &data, Some(60)).await.unwrap();
        let json = serde_json::to_value(&reports[0]).unwrap();
        assert!(json["import_flushes"].as_u64().unwrap() > 0, "{json}");
        assert!(json["flushes"].as_u64().unwrap() > 0, "{json}");
        assert!(json["flushed"].as_u64().unwrap() > 0, "{json}");
        assert!(json["active_tokens"].as_u64().unwrap() <= 21_000, "{json}");
        assert_eq!(json["round_trips_per_op"], 0.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_fixed_fact_model_answers_a_fact_list_and_counts() {
        let model = FixedFactModel::default();
        let answer = model.complete(&ChatRequest::default()).await.unwrap();
        assert_eq!(
            answer.messages[0].text(),
            format!("<facts><fact>{FIXED_FACT}</fact></facts>")
        );
        assert_eq!(model.calls(), 1);
    }
}
