//! The workloads: what one operation is, how a case is set up, and what each line reports.
//!
//! Setup (preloading the thread, building the session) is never timed. Each workload warms up
//! with a few untimed operations, then times every operation on its own.
//!
//! Every line on a backend reports `round_trips_per_op`: the store's round trips (SQL
//! statements, `BEGIN` and `COMMIT` included, or Redis requests) made by the timed operations,
//! read from the store's counter before and after each of them, divided by the operations; 0 for
//! the in-memory stores.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use clap::ValueEnum;
use memory_core::memory::blocks::StaticMemoryBlock;
use memory_core::{
    Agent, AgentSession, ChatMessage, ChatModel, ChatRequest, ChatResponse, HistoryStore, Memory,
    Scope, TiktokenCounter, TokenCounter, Window,
};

use crate::backends::{self, Stores};
use crate::data::DataMessage;
use crate::harness::{Ctx, Recorder, Report, Stats, fresh_scope, peak_rss_mb, round};
use crate::{BenchResult, Case, vectors};

mod migrate;
mod server_cost;
mod turns;

/// The context window every workload reads: what the model would get.
const WINDOW: Window = Window::TokenBudget(30_000);
/// The most messages one bulk-import append carries.
const IMPORT_BATCH: usize = 1_000;
/// The agent whose history the session of `session_roundtrip` holds, and the agent's name in
/// `agent_run`.
const AGENT: &str = "assistant-agent";
/// How many messages one `Memory::put_messages` call of the `memory_get` setup carries.
const MEMORY_PUT_BATCH: usize = 100;
/// The token limit of the `memory_get` memory (LlamaIndex's default).
const MEMORY_TOKEN_LIMIT: u64 = 30_000;
/// The static block of the `memory_get` memory: its name and its sentence.
const CORE_INFO_BLOCK: &str = "core_info";
const CORE_INFO: &str = "The user is Dana Whitfield, a site reliability engineer on the \
    payments team in Lisbon; she prefers short answers with commands she can paste.";
/// The average cl100k tokens per message text of the full data set, as published with it.
const README_AVG_CL100K_TOKENS: f64 = 57.9;
/// The answer of [`ConstantReplyModel`]: about as long as a data set message.
const CONSTANT_REPLY: &str = "Thanks for the update. I checked the release branch and the \
    billing service: the config file migrated as expected, the design doc is reviewed, and the \
    pricing table needs one more pass before Friday. I will follow up with the hiring committee \
    after lunch and post the notes in the weekly sync.";

/// What the benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum Workload {
    /// Append a user message, read the 30,000-token window, append an assistant message.
    AgentTurn,
    /// `Agent::run` with an offline constant-reply model.
    AgentRun,
    /// `Memory::get` with a static block on a thread of N imported through `put_messages`.
    MemoryGet,
    /// `agent_turn` on a history-store object opened for the op: a process's first turn.
    AgentTurnCold,
    /// `agent_turn` while a second store object appends one message before each turn.
    AgentTurnShared,
    /// `Agent::run` with a `Memory` provider holding a fact-extraction block.
    MemoryTurn,
    /// Append one message.
    AppendOne,
    /// Read the 30,000-token window.
    ReadWindow,
    /// Append N messages to an empty thread, in batches of up to 1,000.
    BulkImport,
    /// Serialize and deserialize a session holding N messages; save and load it in the store.
    SessionRoundtrip,
    /// Count the tokens of N messages with o200k and cl100k.
    CountTokens,
    /// Upsert N points of 384 dimensions into a vector store, 256 per batch.
    VectorUpsert,
    /// Top-10 search over N points of 384 dimensions.
    VectorSearch,
    /// Embed the first N message texts with the local model, 32 per batch.
    Embed,
    /// Decode the stored JSON bodies of N messages (`ChatMessage::from_json`).
    DecodeMessage,
    /// `memory_bundle::migrate` of a tenant of N messages into the backend and back out.
    Migrate,
    /// The memory server's own cost: an HTTP append and context read minus the same `Ops` call.
    #[value(alias = "server-cost")]
    ServerCost,
    /// Upsert one document, search after an upsert, and search, on a text index of N documents.
    #[value(alias = "text-index")]
    TextIndex,
}

/// What a workload runs on, and so which backends it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackendKind {
    /// The chat history and session stores ([`backends::BACKENDS`]).
    Stores,
    /// A vector store ([`vectors::VECTOR_BACKENDS`]).
    Vector,
    /// The local embedding model ([`vectors::EMBED_BACKEND`]).
    Embedder,
    /// A text index ([`text_index::TEXT_BACKENDS`](crate::text_index::TEXT_BACKENDS)).
    Text,
    /// Nothing: the backend is reported as [`backends::NO_BACKEND`].
    None,
}

impl Workload {
    /// Every workload, in the order they run.
    pub(crate) const ALL: [Workload; 18] = [
        Workload::AgentTurn,
        Workload::AgentRun,
        Workload::MemoryGet,
        Workload::AgentTurnCold,
        Workload::AgentTurnShared,
        Workload::MemoryTurn,
        Workload::AppendOne,
        Workload::ReadWindow,
        Workload::BulkImport,
        Workload::SessionRoundtrip,
        Workload::CountTokens,
        Workload::VectorUpsert,
        Workload::VectorSearch,
        Workload::Embed,
        Workload::DecodeMessage,
        Workload::Migrate,
        Workload::ServerCost,
        Workload::TextIndex,
    ];

    /// The name used on the command line and in the JSON lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::AgentTurn => "agent_turn",
            Workload::AgentRun => "agent_run",
            Workload::MemoryGet => "memory_get",
            Workload::AgentTurnCold => "agent_turn_cold",
            Workload::AgentTurnShared => "agent_turn_shared",
            Workload::MemoryTurn => "memory_turn",
            Workload::AppendOne => "append_one",
            Workload::ReadWindow => "read_window",
            Workload::BulkImport => "bulk_import",
            Workload::SessionRoundtrip => "session_roundtrip",
            Workload::CountTokens => "count_tokens",
            Workload::VectorUpsert => "vector_upsert",
            Workload::VectorSearch => "vector_search",
            Workload::Embed => "embed",
            Workload::DecodeMessage => "decode_message",
            Workload::Migrate => "migrate",
            Workload::ServerCost => "server_cost",
            Workload::TextIndex => "text_index",
        }
    }

    /// The workload called `name`.
    pub(crate) fn from_name(name: &str) -> BenchResult<Self> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| format!("unknown workload {name:?}").into())
    }

    /// One line for `--list`: what one operation is.
    pub(crate) fn description(self) -> &'static str {
        match self {
            Workload::AgentTurn => {
                "append a user message, read the 30,000-token window, append an assistant message"
            }
            Workload::AgentRun => "Agent::run with an offline constant-reply model",
            Workload::MemoryGet => {
                "Memory::get with a static block (token_limit 30,000) after put_messages of N"
            }
            Workload::AgentTurnCold => {
                "agent_turn on a store object opened for the op (a process's first turn)"
            }
            Workload::AgentTurnShared => {
                "agent_turn after a second store object appended one message to the thread"
            }
            Workload::MemoryTurn => {
                "Agent::run with a Memory provider holding a fact-extraction block (fixed fact)"
            }
            Workload::AppendOne => "append one message to a thread of N",
            Workload::ReadWindow => "read the 30,000-token window of a thread of N",
            Workload::BulkImport => "append N messages to an empty thread, 1,000 per batch",
            Workload::SessionRoundtrip => {
                "serialize / deserialize / save / load a session holding N messages"
            }
            Workload::CountTokens => "count the tokens of N messages (o200k, cl100k)",
            Workload::VectorUpsert => {
                "upsert N random unit vectors of 384 dimensions, 256 per batch (N = points)"
            }
            Workload::VectorSearch => "top-10 search over N vectors of 384 dimensions",
            Workload::Embed => {
                "embed the first N message texts with the local model (all-MiniLM-L6-v2), 32 per \
                 batch"
            }
            Workload::DecodeMessage => "decode the stored JSON bodies of N messages (from_json)",
            Workload::Migrate => {
                "memory_bundle::migrate of a tenant of N messages (10 threads, 3 % archived, 3 \
                 sessions) from memory into the backend (phase in) and back out (phase out), \
                 verified; N may exceed the data set"
            }
            Workload::ServerCost => {
                "the memory server's own cost on a thread of N: p50 of an HTTP append of one \
                 message and of a context read over loopback, minus p50 of the same Ops call"
            }
            Workload::TextIndex => {
                "on a text index of the first N message texts: upsert one document, search \
                 (top 10) right after an upsert, both, five upserts then a search, and search alone (one line \
                 each, `op`)"
            }
        }
    }

    /// What the workload runs on.
    pub(crate) fn backend_kind(self) -> BackendKind {
        match self {
            Workload::CountTokens | Workload::DecodeMessage => BackendKind::None,
            Workload::VectorUpsert | Workload::VectorSearch => BackendKind::Vector,
            Workload::Embed => BackendKind::Embedder,
            Workload::TextIndex => BackendKind::Text,
            _ => BackendKind::Stores,
        }
    }

    /// Whether the workload runs on a backend's chat stores.
    pub(crate) fn uses_backend(self) -> bool {
        self.backend_kind() == BackendKind::Stores
    }

    /// Whether N counts messages of the data set (and so may not exceed it); the vector
    /// workloads' N counts generated points, and `migrate` cycles the data set's texts.
    pub(crate) fn n_is_messages(self) -> bool {
        self.backend_kind() != BackendKind::Vector && self != Workload::Migrate
    }

    /// The sizes measured when `--n` is not given.
    pub(crate) fn default_ns(self) -> &'static [usize] {
        if self == Workload::Migrate {
            return &migrate::MIGRATE_NS;
        }
        match self.backend_kind() {
            BackendKind::Vector => &vectors::VECTOR_NS,
            BackendKind::Embedder => &vectors::EMBED_NS,
            BackendKind::Text => &crate::text_index::TEXT_NS,
            BackendKind::Stores | BackendKind::None => &crate::DEFAULT_NS,
        }
    }
}

/// A chat model for the benchmark: answers every request with the same assistant message,
/// offline and at no cost, so `agent_run` measures the memory pipeline alone.
#[derive(Debug, Clone)]
pub(crate) struct ConstantReplyModel {
    reply: String,
}

impl ConstantReplyModel {
    /// A model answering `reply` to everything.
    pub(crate) fn new(reply: impl Into<String>) -> Self {
        Self {
            reply: reply.into(),
        }
    }
}

#[memory_core::async_trait]
impl ChatModel for ConstantReplyModel {
    async fn complete(&self, _request: &ChatRequest) -> memory_core::Result<ChatResponse> {
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(self.reply.clone())],
            ..ChatResponse::default()
        })
    }
}

/// Runs one case and returns its lines, each with the process's peak RSS at the end of the case
/// (`peak_rss_mb`) and before the workload began (`start_rss_mb`: the data set loaded and the
/// stores opened, which for the in-memory store includes the o200k tables of its token
/// counter).
pub(crate) async fn run(
    case: &Case,
    data: &[DataMessage],
    ops: Option<usize>,
) -> BenchResult<Vec<Report>> {
    let ctx = Ctx {
        workload: case.workload.name(),
        backend: &case.backend,
        n: case.n,
        data,
        ops,
    };
    // The peak before the workload: the data set, and the stores once opened.
    let mut start_rss = peak_rss_mb();
    let reports = if case.workload == Workload::DecodeMessage {
        decode_message(&ctx)?
    } else if case.workload.backend_kind() == BackendKind::None {
        count_tokens(&ctx)?
    } else if case.workload.backend_kind() == BackendKind::Text {
        crate::text_index::run(&ctx, &mut start_rss).await?
    } else if !case.workload.uses_backend() {
        vectors::run(&ctx, &mut start_rss).await?
    } else {
        let backend = backends::find(&case.backend)?;
        let stores = (backend.connect)()
            .await
            .map_err(|e| format!("cannot open the {} backend: {e}", backend.name))?;
        start_rss = peak_rss_mb();
        let reports = match case.workload {
            Workload::AgentTurn => agent_turn(&ctx, &stores).await?,
            Workload::AgentRun => agent_run(&ctx, &stores).await?,
            Workload::MemoryGet => memory_get(&ctx, &stores).await?,
            Workload::AgentTurnCold => turns::agent_turn_cold(&ctx, &stores).await?,
            Workload::AgentTurnShared => turns::agent_turn_shared(&ctx, &stores).await?,
            Workload::MemoryTurn => turns::memory_turn(&ctx, &stores).await?,
            Workload::AppendOne => append_one(&ctx, &stores).await?,
            Workload::ReadWindow => read_window(&ctx, &stores).await?,
            Workload::BulkImport => bulk_import(&ctx, &stores).await?,
            Workload::SessionRoundtrip => session_roundtrip(&ctx, &stores).await?,
            Workload::Migrate => migrate::migrate_workload(&ctx, &stores).await?,
            Workload::ServerCost => server_cost::server_cost(&ctx, &stores).await?,
            Workload::CountTokens
            | Workload::VectorUpsert
            | Workload::VectorSearch
            | Workload::Embed
            | Workload::DecodeMessage
            | Workload::TextIndex => {
                return Err(format!("{} runs on no chat store", ctx.workload).into());
            }
        };
        stores.close().await;
        reports
    };
    Ok(reports
        .into_iter()
        .map(|report| match start_rss {
            Some(mb) => report.field("start_rss_mb", round(mb, 1)),
            None => report,
        })
        .map(with_common_fields)
        .map(Report::with_peak_rss)
        .collect())
}

/// The fields every line carries beyond the workload's own: `round_trips_per_op` (0 for the
/// workloads that make no store call: token counting, the vector stores, embedding, decoding)
/// and `base_rss_mb`, the process's resident set when it began, before the data set was read
/// (see [`harness::base_rss_mb`](crate::harness::base_rss_mb)).
fn with_common_fields(mut report: Report) -> Report {
    if !report.extra.contains_key("round_trips_per_op") {
        report = report.field("round_trips_per_op", 0.0);
    }
    match crate::harness::base_rss_mb() {
        Some(mb) => report.field("base_rss_mb", round(mb, 1)),
        None => report,
    }
}

/// Appends `messages` to the thread of `scope` in batches (setup, untimed).
async fn preload(
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
async fn check_len(history: &dyn HistoryStore, scope: &Scope, expected: usize) -> BenchResult<()> {
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

/// The average of `total` over `count` items, rounded to 0.1.
fn average(total: usize, count: usize) -> f64 {
    if count == 0 {
        0.0
    } else {
        round(total as f64 / count as f64, 1)
    }
}

/// The store round trips of the timed operations alone: [`start`](Trips::start) right before an
/// operation, [`stop`](Trips::stop) right after it, so the untimed setup between operations
/// (preloading, checking, clearing) never counts.
struct Trips<'a> {
    stores: &'a Stores,
    total: u64,
    mark: u64,
}

impl<'a> Trips<'a> {
    fn new(stores: &'a Stores) -> Self {
        Self {
            stores,
            total: 0,
            mark: 0,
        }
    }

    fn start(&mut self) {
        self.mark = self.stores.round_trips();
    }

    fn stop(&mut self) {
        self.total += self.stores.round_trips().saturating_sub(self.mark);
    }

    /// Round trips per operation, rounded to 0.01.
    fn per_op(&self, ops: usize) -> f64 {
        if ops == 0 {
            0.0
        } else {
            round(self.total as f64 / ops as f64, 2)
        }
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

/// The fields every growing workload reports about its rounds.
fn with_rounds(report: Report, n: usize, plan: &[usize], messages_per_op: usize) -> Report {
    let largest = plan.iter().copied().max().unwrap_or(0);
    report
        .field("rounds", plan.len())
        .field("n_max", n + largest * messages_per_op)
}

/// One agent turn on the thread of `scope`: append `user`, read the window, append
/// `assistant`. Returns the window's length.
async fn turn(
    history: &dyn HistoryStore,
    scope: &Scope,
    user: ChatMessage,
    assistant: ChatMessage,
) -> BenchResult<usize> {
    history.append(scope, &[user]).await?;
    let window = history.read(scope, WINDOW).await?;
    let len = window.len();
    drop(window);
    history.append(scope, &[assistant]).await?;
    Ok(len)
}

/// The user and assistant messages of the `k`-th agent turn.
fn turn_messages(ctx: &Ctx<'_>, k: usize) -> (ChatMessage, ChatMessage) {
    (
        ChatMessage::user(ctx.later(2 * k).text.clone()),
        ChatMessage::assistant(ctx.later(2 * k + 1).text.clone()),
    )
}

/// `agent_turn`: on a thread of N, append a user message, read the window, append an assistant
/// message. One op = those three store calls. The ops run in [`rounds`] on fresh threads of N.
async fn agent_turn(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 10;
    let history = stores.history.as_ref();

    let scope = fresh_scope()?;
    preload(history, &scope, ctx.thread()).await?;
    for k in 0..warmup {
        let (user, assistant) = turn_messages(ctx, k);
        black_box(turn(history, &scope, user, assistant).await?);
    }
    history.clear(&scope).await?;

    let plan = rounds(ctx.n, ops, 2);
    let mut window_total = 0;
    let mut recorder = Recorder::new(ops);
    let mut trips = Trips::new(stores);
    let mut k = 0;
    for &round in &plan {
        let scope = fresh_scope()?;
        preload(history, &scope, ctx.thread()).await?;
        let turns: Vec<_> = (k..k + round).map(|k| turn_messages(ctx, k)).collect();
        k += round;
        for (user, assistant) in turns {
            trips.start();
            let started = Instant::now();
            let window_len = turn(history, &scope, user, assistant).await?;
            recorder.push(started.elapsed());
            trips.stop();
            window_total += window_len;
        }
        check_len(history, &scope, ctx.n + 2 * round).await?;
        history.clear(&scope).await?;
    }
    let stats = recorder.finish();
    let report = ctx
        .report(&stats)
        .field("store_calls_per_op", 3)
        .field("round_trips_per_op", trips.per_op(stats.ops))
        .field("window_len_avg", average(window_total, ops));
    Ok(vec![with_rounds(report, ctx.n, &plan, 2)])
}

/// `agent_run`: `Agent::run` on a session whose thread holds N messages, with
/// [`ConstantReplyModel`]. One op = one run (window read, request, model, one append of input
/// and answer). The ops run in [`rounds`] on fresh sessions of N.
async fn agent_run(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200);
    let warmup = 10;
    let agent = Agent::builder(
        AGENT,
        Arc::new(ConstantReplyModel::new(CONSTANT_REPLY)),
        Arc::clone(&stores.history),
    )
    .instructions("You are a helpful assistant. Answer briefly.")
    .build()?;
    let history = stores.history.as_ref();
    let input = |k: usize| ChatMessage::user(ctx.later(k).text.clone());

    let mut session = AgentSession::new(fresh_scope()?);
    preload(history, session.scope(), ctx.thread()).await?;
    for k in 0..warmup {
        black_box(agent.run(input(k), &mut session).await?);
    }
    history.clear(session.scope()).await?;

    let plan = rounds(ctx.n, ops, 2);
    let mut window_total = 0;
    let mut recorder = Recorder::new(ops);
    let mut trips = Trips::new(stores);
    let mut k = 0;
    for &round in &plan {
        let mut session = AgentSession::new(fresh_scope()?);
        preload(history, session.scope(), ctx.thread()).await?;
        let inputs: Vec<ChatMessage> = (k..k + round).map(input).collect();
        k += round;
        for input in inputs {
            trips.start();
            let started = Instant::now();
            let run = agent.run(input, &mut session).await?;
            let window_len = run.window_len;
            drop(run);
            recorder.push(started.elapsed());
            trips.stop();
            window_total += window_len;
        }
        check_len(history, session.scope(), ctx.n + 2 * round).await?;
        history.clear(session.scope()).await?;
    }
    let stats = recorder.finish();
    let report = ctx
        .report(&stats)
        .field("store_calls_per_op", 2)
        .field("round_trips_per_op", trips.per_op(stats.ops))
        .field("window_len_avg", average(window_total, ops));
    Ok(vec![with_rounds(report, ctx.n, &plan, 2)])
}

/// `memory_get`: a [`Memory`] with one [`StaticMemoryBlock`] (`core_info`, a sentence),
/// token_limit 30,000 and LlamaIndex's other defaults, on the backend's history and session
/// stores, after importing the first N messages through `put_messages` in batches of 100 (the
/// flushes along the way keep the active window within 70 % of the limit). One op =
/// `memory.get(&[])`. The import is setup, reported apart (`import_ms`, `flushes`).
async fn memory_get(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(500);
    let warmup = 20;
    let scope = fresh_scope()?;
    let memory = Memory::builder(
        scope.clone(),
        Arc::clone(&stores.history),
        Arc::clone(&stores.sessions),
    )
    .block(Arc::new(StaticMemoryBlock::new(
        CORE_INFO_BLOCK,
        CORE_INFO,
    )?))
    .token_limit(MEMORY_TOKEN_LIMIT)
    .build()?;

    // The o200k tables load on the first count, once per process: not part of the import.
    black_box(TiktokenCounter::o200k().count_text(CORE_INFO));
    let mut flushes = 0usize;
    let mut flushed = 0usize;
    let import_trips_from = stores.round_trips();
    let import_started = Instant::now();
    for chunk in ctx.thread().chunks(MEMORY_PUT_BATCH) {
        let batch: Vec<ChatMessage> = chunk.iter().map(DataMessage::to_chat).collect();
        let flush = memory.put_messages(&batch).await?;
        if flush.messages > 0 {
            flushes += 1;
            flushed += flush.messages;
        }
    }
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
    let mut recorder = Recorder::new(ops);
    let mut trips = Trips::new(stores);
    for _ in 0..ops {
        trips.start();
        let started = Instant::now();
        let messages = memory.get(&[]).await?;
        black_box(&messages);
        drop(messages);
        recorder.push(started.elapsed());
        trips.stop();
    }
    let stats = recorder.finish();
    memory.reset().await?;
    let import_ms = import.as_secs_f64() * 1e3;
    Ok(vec![
        ctx.report(&stats)
            .field("round_trips_per_op", trips.per_op(stats.ops))
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

/// `append_one`: append one message to a thread of N. The ops run in [`rounds`] on fresh
/// threads of N.
async fn append_one(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(1_000);
    let warmup = 50;
    let history = stores.history.as_ref();

    let scope = fresh_scope()?;
    preload(history, &scope, ctx.thread()).await?;
    for k in 0..warmup {
        history.append(&scope, &[ctx.later(k).to_chat()]).await?;
    }
    history.clear(&scope).await?;

    let plan = rounds(ctx.n, ops, 1);
    let mut recorder = Recorder::new(ops);
    let mut trips = Trips::new(stores);
    let mut k = 0;
    for &round in &plan {
        let scope = fresh_scope()?;
        preload(history, &scope, ctx.thread()).await?;
        let messages: Vec<ChatMessage> = (k..k + round).map(|k| ctx.later(k).to_chat()).collect();
        k += round;
        for message in messages {
            trips.start();
            let started = Instant::now();
            black_box(history.append(&scope, &[message]).await?);
            recorder.push(started.elapsed());
            trips.stop();
        }
        check_len(history, &scope, ctx.n + round).await?;
        history.clear(&scope).await?;
    }
    let stats = recorder.finish();
    let report = ctx
        .report(&stats)
        .field("store_calls_per_op", 1)
        .field("round_trips_per_op", trips.per_op(stats.ops));
    Ok(vec![with_rounds(report, ctx.n, &plan, 1)])
}

/// `read_window`: read the 30,000-token window of a thread of N.
async fn read_window(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
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
    let mut recorder = Recorder::new(ops);
    let mut trips = Trips::new(stores);
    for _ in 0..ops {
        trips.start();
        let started = Instant::now();
        let window = history.read(&scope, WINDOW).await?;
        black_box(&window);
        drop(window);
        recorder.push(started.elapsed());
        trips.stop();
    }
    let stats = recorder.finish();
    history.clear(&scope).await?;
    Ok(vec![
        ctx.report(&stats)
            .field("store_calls_per_op", 1)
            .field("round_trips_per_op", trips.per_op(stats.ops))
            .field("window_len", window_len)
            .field("window_tokens", window_tokens),
    ])
}

/// `bulk_import`: append N messages to an empty thread in batches of up to 1,000, repeated on
/// fresh threads. One op = one batch; throughput is messages per second.
async fn bulk_import(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let imports = ctx.ops.unwrap_or((20_000 / ctx.n).clamp(3, 50)).max(1);
    let history = stores.history.as_ref();
    let messages: Vec<ChatMessage> = ctx.thread().iter().map(DataMessage::to_chat).collect();
    // Warm-up: one batch on a throwaway thread.
    let scope = fresh_scope()?;
    let warm = &messages[..messages.len().min(IMPORT_BATCH)];
    history.append(&scope, warm).await?;
    history.clear(&scope).await?;
    let mut samples = Vec::with_capacity(imports * ctx.n.div_ceil(IMPORT_BATCH));
    let mut trips = Trips::new(stores);
    for _ in 0..imports {
        let scope = fresh_scope()?;
        for batch in messages.chunks(IMPORT_BATCH) {
            trips.start();
            let started = Instant::now();
            black_box(history.append(&scope, batch).await?);
            samples.push(started.elapsed());
            trips.stop();
        }
        check_len(history, &scope, ctx.n).await?;
        history.clear(&scope).await?;
    }
    // Only the appends count: checking and clearing between imports is not the workload.
    let busy: std::time::Duration = samples.iter().sum();
    let stats = Stats::from_samples(samples, busy);
    let total_messages = imports * ctx.n;
    let import_ms = busy.as_secs_f64() * 1e3 / imports as f64;
    let us_per_message = busy.as_secs_f64() * 1e6 / total_messages as f64;
    Ok(vec![
        Report::with_units(
            ctx.workload,
            ctx.backend,
            ctx.n,
            &stats,
            total_messages as f64,
        )
        .field("rate_unit", "messages")
        .field("round_trips_per_op", trips.per_op(stats.ops))
        .field("round_trips_per_import", trips.per_op(imports))
        .field("batch_size", ctx.n.min(IMPORT_BATCH))
        .field("imports", imports)
        .field("import_ms", round(import_ms, 3))
        .field("us_per_message", round(us_per_message, 3)),
    ])
}

/// `session_roundtrip`: a session holding N messages in one agent's history; five lines:
/// `serialize` (`serialize()` + `serde_json::to_string`), `to_json` (`AgentSession::to_json`,
/// the same text written without a value tree), `deserialize`
/// (`AgentSession::from_json`), and the backend's `save` and `load` of the state.
async fn session_roundtrip(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let rounds = ctx.ops.unwrap_or((100_000 / ctx.n).clamp(10, 200)).max(1);
    let warmup = 2;
    let mut session = AgentSession::new(fresh_scope()?);
    for message in ctx.thread() {
        session.add_history_message(AGENT, message.to_chat())?;
    }

    let mut json = String::new();
    for _ in 0..warmup {
        json = serde_json::to_string(&session.serialize()?)?;
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let encoded = serde_json::to_string(&session.serialize()?)?;
        recorder.push(started.elapsed());
        json = encoded;
    }
    let serialize = recorder.finish();
    let bytes = json.len();

    // The same text, written straight from the session (`to_json`, no value tree).
    if session.to_json()? != json {
        return Err("to_json and serialize() write different texts".into());
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let encoded = session.to_json()?;
        recorder.push(started.elapsed());
        black_box(encoded);
    }
    let to_json = recorder.finish();

    if AgentSession::from_json(&json)? != session {
        return Err("the session does not survive its JSON round trip".into());
    }
    for _ in 0..warmup {
        black_box(AgentSession::from_json(&json)?);
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let restored = AgentSession::from_json(&json)?;
        black_box(&restored);
        drop(restored);
        recorder.push(started.elapsed());
    }
    let deserialize = recorder.finish();

    let sessions = stores.sessions.as_ref();
    let scope = session.scope();
    let state = session.serialize()?;
    let mut version = None;
    for _ in 0..warmup {
        version = Some(sessions.save(scope, &state, version).await?);
    }
    let mut recorder = Recorder::new(rounds);
    let mut save_trips = Trips::new(stores);
    for _ in 0..rounds {
        save_trips.start();
        let started = Instant::now();
        let saved = sessions.save(scope, &state, version).await?;
        recorder.push(started.elapsed());
        save_trips.stop();
        version = Some(saved);
    }
    let save = recorder.finish();

    for _ in 0..warmup {
        black_box(sessions.load(scope).await?);
    }
    let mut recorder = Recorder::new(rounds);
    let mut load_trips = Trips::new(stores);
    for _ in 0..rounds {
        load_trips.start();
        let started = Instant::now();
        let loaded = sessions.load(scope).await?;
        black_box(&loaded);
        drop(loaded);
        recorder.push(started.elapsed());
        load_trips.stop();
    }
    let load = recorder.finish();
    match sessions.load(scope).await? {
        Some(stored) if stored.state == state && Some(stored.version) == version => {}
        _ => return Err("the session store did not return the state it saved".into()),
    }
    sessions.delete(scope).await?;

    Ok([
        ("serialize", &serialize, 0.0),
        ("to_json", &to_json, 0.0),
        ("deserialize", &deserialize, 0.0),
        ("save", &save, save_trips.per_op(save.ops)),
        ("load", &load, load_trips.per_op(load.ops)),
    ]
    .into_iter()
    .map(|(phase, stats, round_trips)| {
        ctx.report(stats)
            .field("phase", phase)
            .field("round_trips_per_op", round_trips)
            .field("bytes", bytes)
            .field(
                "mb_per_s",
                round(stats.per_second(bytes as f64 * stats.ops as f64) / 1e6, 1),
            )
    })
    .collect())
}

/// `count_tokens`: count the tokens of the N messages with o200k and cl100k, a message at a
/// time (`count_message`), in as many passes as make about `--ops` messages (default 10,000).
/// One line per encoding, with tokens per second and the average tokens per message text.
fn count_tokens(ctx: &Ctx<'_>) -> BenchResult<Vec<Report>> {
    let target = ctx.ops.unwrap_or(10_000);
    let passes = target.div_ceil(ctx.n).max(1);
    let messages: Vec<ChatMessage> = ctx.thread().iter().map(DataMessage::to_chat).collect();
    let mut reports = Vec::new();
    for (encoding, counter) in [
        ("o200k_base", TiktokenCounter::o200k()),
        ("cl100k_base", TiktokenCounter::cl100k()),
    ] {
        let text_tokens: usize = ctx
            .thread()
            .iter()
            .map(|m| counter.count_text(&m.text) as usize)
            .sum();
        let avg_tokens = average(text_tokens, ctx.n);
        for message in messages.iter().take(100) {
            black_box(counter.count_message(message));
        }
        let mut tokens = 0u64;
        let mut recorder = Recorder::new(passes * ctx.n);
        for _ in 0..passes {
            for message in &messages {
                let started = Instant::now();
                let count = counter.count_message(black_box(message));
                recorder.push(started.elapsed());
                tokens += u64::from(count);
            }
        }
        let stats = recorder.finish();
        if encoding == "cl100k_base"
            && ctx.n == ctx.data.len()
            && (avg_tokens - README_AVG_CL100K_TOKENS).abs() > 0.5
        {
            eprintln!(
                "  WARNING: cl100k averages {avg_tokens} tokens per message text; \
                 the data set is published with {README_AVG_CL100K_TOKENS}"
            );
        }
        let message_tokens = tokens / passes as u64;
        reports.push(
            ctx.report(&stats)
                .field("encoding", encoding)
                .field("tokens_per_s", round(stats.per_second(tokens as f64), 0))
                .field("avg_tokens", avg_tokens)
                .field(
                    "avg_message_tokens",
                    average(message_tokens as usize, ctx.n),
                )
                .field("passes", passes),
        );
    }
    Ok(reports)
}

/// `decode_message`: decode the stored bodies (the versioned JSON form) of the N messages, as a
/// store's read does; one operation decodes all N, and `ns_per_message` is the median
/// operation's time over N. One line.
fn decode_message(ctx: &Ctx<'_>) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(20).max(1);
    let bodies: Vec<String> = ctx
        .thread()
        .iter()
        .map(|m| m.to_chat().to_json())
        .collect::<memory_core::Result<_>>()?;
    let bytes: usize = bodies.iter().map(String::len).sum();
    for body in &bodies {
        if ChatMessage::from_json(body)?.to_json()? != *body {
            return Err("a message does not survive its JSON round trip".into());
        }
    }
    let mut recorder = Recorder::new(ops);
    for _ in 0..ops {
        let started = Instant::now();
        for body in &bodies {
            black_box(ChatMessage::from_json(black_box(body))?);
        }
        recorder.push(started.elapsed());
    }
    let stats = recorder.finish();
    let per_message = |d: std::time::Duration| round(d.as_secs_f64() * 1e9 / ctx.n as f64, 1);
    Ok(vec![
        Report::with_units(
            ctx.workload,
            ctx.backend,
            ctx.n,
            &stats,
            (ops * ctx.n) as f64,
        )
        .field("rate_unit", "messages")
        .field("ns_per_message", per_message(stats.p50))
        .field("ns_per_message_p99", per_message(stats.p99))
        .field("avg_bytes", average(bytes, ctx.n)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataRole;

    fn data(len: usize) -> Vec<DataMessage> {
        (0..len)
            .map(|i| DataMessage {
                i,
                role: if i % 2 == 0 {
                    DataRole::User
                } else {
                    DataRole::Assistant
                },
                text: format!("message {i}: the release branch migrated the config file"),
            })
            .collect()
    }

    #[test]
    fn rounds_keep_threads_within_a_tenth_of_n() {
        assert_eq!(rounds(100, 200, 2), vec![5; 40]);
        assert_eq!(rounds(10_000, 200, 2), vec![200]);
        assert_eq!(rounds(1_000, 120, 2), vec![50, 50, 20]);
        assert_eq!(rounds(5, 3, 2), vec![1, 1, 1]);
        assert!(rounds(100, 0, 1).is_empty());
    }

    #[test]
    fn workload_names_match_the_command_line() {
        for workload in Workload::ALL {
            let value = workload.to_possible_value().unwrap();
            assert_eq!(value.get_name(), workload.name());
            assert_eq!(Workload::from_name(workload.name()).unwrap(), workload);
        }
        assert!(Workload::from_name("nope").is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn every_workload_runs_on_a_small_thread() {
        let data = data(40);
        for workload in Workload::ALL {
            let backend = match workload.backend_kind() {
                BackendKind::Stores => "in-memory",
                BackendKind::Vector => "exact",
                // The model is not part of the tests.
                BackendKind::Embedder => continue,
                BackendKind::Text => "tantivy-memory",
                BackendKind::None => backends::NO_BACKEND,
            };
            let case = Case {
                workload,
                backend: backend.to_owned(),
                n: 20,
            };
            let reports = run(&case, &data, Some(5)).await.unwrap();
            let expected = match workload {
                Workload::SessionRoundtrip => 5,
                Workload::CountTokens | Workload::Migrate | Workload::ServerCost => 2,
                Workload::TextIndex => 5,
                _ => 1,
            };
            assert_eq!(reports.len(), expected, "{workload:?}");
            for report in reports {
                assert!(
                    report.extra.contains_key("round_trips_per_op"),
                    "{workload:?} {report:?}"
                );
                if cfg!(target_os = "linux") {
                    assert!(report.extra.contains_key("base_rss_mb"), "{report:?}");
                }
                assert_eq!(report.workload, workload.name());
                assert_eq!(report.n, 20);
                assert!(report.ops > 0 && report.ops_per_s > 0.0, "{report:?}");
                assert!(report.p99_us >= report.p50_us, "{report:?}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_constant_model_answers_the_agent() {
        let stores = (backends::find("in-memory").unwrap().connect)()
            .await
            .unwrap();
        let agent = Agent::builder(
            AGENT,
            Arc::new(ConstantReplyModel::new("ok")),
            stores.history.clone(),
        )
        .build()
        .unwrap();
        let mut session = AgentSession::new(fresh_scope().unwrap());
        let run = agent.run("hello", &mut session).await.unwrap();
        assert_eq!(run.text(), "ok");
        assert_eq!(
            stores.history.count(session.scope()).await.unwrap().active,
            2
        );
    }
}
