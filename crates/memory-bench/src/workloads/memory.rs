//! The [`Memory`] workloads: `memory_get` (a memory with a static block) and `memory_turn`
//! (issue 17: `Agent::run` with a memory holding a fact-extraction block as its context
//! provider). Both import the first N messages through `put_messages` first (setup).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use memory_core::memory::MemoryBuilder;
use memory_core::memory::blocks::{FactExtractionMemoryBlock, StaticMemoryBlock};
use memory_core::{
    AgentSession, ChatMessage, ChatModel, ChatRequest, ChatResponse, Memory, MemoryBlock, Scope,
    TiktokenCounter, TokenCounter, Window,
};

use super::agents::constant_reply_agent;
use super::timer::Timer;
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::DataMessage;
use crate::harness::{Ctx, Report, average, fresh_scope, round};

/// How many messages one `Memory::put_messages` call of the import carries.
const MEMORY_PUT_BATCH: usize = 100;
/// The token limit of the memories (LlamaIndex's default).
const MEMORY_TOKEN_LIMIT: u64 = 30_000;
/// The static block of the `memory_get` memory: its name and its sentence.
const CORE_INFO_BLOCK: &str = "core_info";
const CORE_INFO: &str = "The user is Dana Whitfield, a site reliability engineer on the \
    payments team in Lisbon; she prefers short answers with commands she can paste.";

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

/// The memory of the session at `scope` on the backend's history and session stores, holding
/// `block`, with token_limit 30,000 and LlamaIndex's other defaults, to finish building.
fn memory_with(scope: Scope, stores: &Stores, block: Arc<dyn MemoryBlock>) -> MemoryBuilder {
    Memory::builder(
        scope,
        Arc::clone(&stores.history),
        Arc::clone(&stores.sessions),
    )
    .block(block)
    .token_limit(MEMORY_TOKEN_LIMIT)
}

/// What importing the first N messages into a memory did.
struct Import {
    /// The `put_messages` calls that flushed.
    flushes: usize,
    /// The messages they flushed.
    flushed: usize,
}

/// Imports the first N messages into `memory` through `put_messages`, [`MEMORY_PUT_BATCH`] at a
/// time.
async fn import(ctx: &Ctx<'_>, memory: &Memory) -> BenchResult<Import> {
    let mut import = Import {
        flushes: 0,
        flushed: 0,
    };
    for chunk in ctx.thread().chunks(MEMORY_PUT_BATCH) {
        let batch: Vec<ChatMessage> = chunk.iter().map(DataMessage::to_chat).collect();
        let flush = memory.put_messages(&batch).await?;
        if flush.messages > 0 {
            import.flushes += 1;
            import.flushed += flush.messages;
        }
    }
    Ok(import)
}

/// `memory_get`: a [`Memory`] with one [`StaticMemoryBlock`] (`core_info`, a sentence),
/// token_limit 30,000 and LlamaIndex's other defaults, on the backend's history and session
/// stores, after importing the first N messages through `put_messages` in batches of 100 (the
/// flushes along the way keep the active window within 70 % of the limit). One op =
/// `memory.get(&[])`. The import is setup, reported apart (`import_ms`, `flushes`).
pub(super) async fn memory_get(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(500);
    let warmup = 20;
    let scope = fresh_scope()?;
    let block = Arc::new(StaticMemoryBlock::new(CORE_INFO_BLOCK, CORE_INFO)?);
    let memory = memory_with(scope.clone(), stores, block).build()?;

    // The o200k tables load on the first count, once per process: not part of the import.
    black_box(TiktokenCounter::o200k().count_text(CORE_INFO));
    let import_trips_from = stores.round_trips();
    let import_started = Instant::now();
    let Import { flushes, flushed } = import(ctx, &memory).await?;
    let import = import_started.elapsed();
    let import_trips = stores.round_trips().saturating_sub(import_trips_from);
    let count = stores.history.count(&scope).await?;
    if count.active + count.archived != ctx.n as u64 || count.archived != flushed as u64 {
        return Err(format!(
            "after importing {} messages the thread holds {} active and {} archived; the \
             flushes reported {flushed}",
            ctx.n, count.active, count.archived
        )
        .into());
    }
    let first = memory.get(&[]).await?;
    let returned = first.len();
    if !first.first().is_some_and(|m| m.text().contains(CORE_INFO)) {
        return Err("Memory::get did not return the static block's text first".into());
    }
    drop(first);

    for _ in 0..warmup {
        black_box(memory.get(&[]).await?);
    }
    let mut timer = Timer::new(ops);
    for _ in 0..ops {
        timer
            .time(stores, async || {
                black_box(memory.get(&[]).await?);
                Ok(())
            })
            .await?;
    }
    let timed = timer.finish();
    memory.reset().await?;
    let import_ms = import.as_secs_f64() * 1e3;
    Ok(vec![
        ctx.report(&timed.stats)
            .field("round_trips_per_op", timed.round_trips_per_op())
            .field("active_len", count.active)
            .field("active_tokens", count.active_tokens)
            .field("archived", count.archived)
            .field("flushes", flushes)
            .field("messages_returned", returned)
            .field("put_batch", MEMORY_PUT_BATCH)
            .field("import_ms", round(import_ms, 1))
            .field(
                "import_us_per_message",
                round(import_ms * 1e3 / ctx.n as f64, 1),
            )
            .field("import_round_trips", import_trips),
    ])
}

/// `memory_turn`: `Agent::run` with [`ConstantReplyModel`](super::agents::ConstantReplyModel)
/// and a [`Memory`] as its context provider, the memory holding a [`FactExtractionMemoryBlock`]
/// whose extractor is [`FixedFactModel`] (token_limit 30,000, LlamaIndex's other defaults; the
/// agent reads `Window::All`, which the flushes keep within 70 % of the limit). The first N
/// messages are imported through `put_messages` in batches of 100 (setup, untimed), then the
/// ops are turns on that one session. One op = one run: the memory's context (count, last 32
/// messages, block states), the window read, the model, the append, and a flush when the window
/// passed the threshold (`flushes`: how many of the ops flushed, each one extractor call).
pub(super) async fn memory_turn(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 5;
    let extractor = Arc::new(FixedFactModel::default());
    let mut session = AgentSession::new(fresh_scope()?);
    let block = Arc::new(FactExtractionMemoryBlock::new(
        Arc::clone(&extractor) as Arc<dyn ChatModel>
    ));
    let memory = memory_with(session.scope().clone(), stores, block).build()?;
    let agent = constant_reply_agent(stores)
        .window(Window::All)
        .context_provider(Arc::new(memory.clone()))
        .build()?;
    let input = |k: usize| ChatMessage::user(ctx.later(k).text.clone());

    let import_flushes = import(ctx, &memory).await?.flushes;
    for k in 0..warmup {
        black_box(agent.run(input(k), &mut session).await?);
    }
    let before = stores.history.count(session.scope()).await?;

    let mut timer = Timer::new(ops);
    let mut flushes = 0usize;
    let mut window_total = 0;
    for k in warmup..warmup + ops {
        let message = input(k);
        let calls = extractor.calls();
        let session = &mut session;
        let window_len = timer
            .time(stores, async || {
                Ok(agent.run(message, session).await?.window_len)
            })
            .await?;
        if extractor.calls() > calls {
            flushes += 1;
        }
        window_total += window_len;
    }
    let timed = timer.finish();
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
        ctx.report(&timed.stats)
            .field("round_trips_per_op", timed.round_trips_per_op())
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
    use crate::data::test_messages;
    use crate::workloads::{Workload, run};

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn memory_turns_flush_past_the_threshold_and_count_it() {
        // 700 messages of about 60 tokens each, like the data set's.
        let data = test_messages(700, |i| {
            format!(
                "message {i}: the release branch migrated the config file, the design doc is \
                 reviewed, the pricing table needs one more pass before Friday, and the notes of \
                 the weekly sync go to the hiring committee after lunch today"
            )
        });
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
