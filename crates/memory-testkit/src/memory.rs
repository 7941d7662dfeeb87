//! The `memory` suite: the features built on the stores — [`Memory`] and its blocks, the
//! exactly-once flush watermark, the reducers, [`TeamSession`], [`AgentChat`] and the
//! [`Agent`]'s tool loop — run against a real [`HistoryStore`] and [`SessionStore`].
//!
//! Each check is an async function taking the two stores (often one store implementing both);
//! it works under its own random tenant (see [`random_scope`]), so checks can run in parallel
//! against one shared server, and one pair of stores can run them all
//! ([`run_all_memory_checks`]). A check panics, with a message saying what was expected, when
//! the feature breaks its contract on these stores.
//!
//! # What "exactly once" is measured by
//! A [`MemoryBlock`] keeps what it was given in its durable state; a `put` whose state write is
//! lost is redone (see [`MemoryBlock`]'s contract). So the checks record what each block got in
//! its state (a [`RecordingBlock`]) and read it back through [`Memory::get`]: each archived
//! message must be there once, whatever crashed in between.
//!
//! # Assumptions
//! The history store supports `archive` (a [`Memory`] flush and an `AfterMessageAdded` reducer
//! archive), counts tokens so that a message of about 40 words costs between 20 and 200
//! tokens, and gives back each message's id and parts as they were appended.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use memory_core::chat::{AgentChat, ChatParticipant, ChatSerializer, RestoreOutcome, TeamSession};
use memory_core::memory::blocks::{
    FactExtractionMemoryBlock, StaticMemoryBlock, VectorMemoryBlock,
};
use memory_core::memory::{
    BlockContent, BlockGetContext, BlockPutContext, FlushReport, MemoryBlock, render_memory,
};
use memory_core::message::tagged_transcript;
use memory_core::{
    Agent, AgentBuilder, AgentId, AgentSession, AppendOutcome, ChatMessage, ChatReducer,
    ChatRequest, ChatResponse, Embedder, Error, ErrorKind, FnTool, HistoryStore,
    InMemoryVectorStore, Memory, MessageCountReducer, Part, ReducerTrigger, Result, Role, Scope,
    SessionStore, StopReason, StoredMessage, StoredSession, SummarizingReducer, TokenBudgetReducer,
    Tool, ToolCallStatus, VectorStore, Window, default_token_counter, is_summary,
};
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::ScriptedChatModel;
use crate::fixtures::{ExpectOk, expect_error_kind, random_scope};

/// The static block's text.
const CORE_INFO: &str = "The user is Dana, an SRE on the billing team.";
/// The fact the scripted extraction model answers with first.
const FIRST_FACT: &str = "Dana is on call this week.";
/// Filler that gives each message about 40 words.
const FILLER: &str = "and the notes go on about dashboards alerts queues retries budgets \
deploys rollbacks pagers runbooks owners timelines graphs latency errors saturation traffic \
capacity incidents reviews tickets";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `n` messages, alternating user and assistant from a user message, each of about 40 words
/// and tagged `{prefix}{i}` (its first word), with topic words that differ by message.
pub fn conversation(prefix: &str, n: usize) -> Vec<ChatMessage> {
    const TOPICS: [&str; 7] = [
        "billing outage postmortem",
        "database index migration",
        "kubernetes node upgrade",
        "certificate renewal cron",
        "payment gateway timeout",
        "search cluster reindex",
        "holiday oncall rotation",
    ];
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = format!("{prefix}{i} {} {FILLER}", TOPICS[i % TOPICS.len()]);
            ChatMessage::text_message(role, text)
        })
        .collect()
}

/// A deterministic [`Embedder`] of 64 dimensions: each word of four letters or more is hashed
/// (FNV-1a) into a bucket, and the vector is normalised. Texts that share words are similar.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordHashEmbedder;

impl WordHashEmbedder {
    /// The vector of `text`.
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; 64];
        for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
            if word.chars().count() >= 4 {
                let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                v[(hash % 64) as usize] += 1.0;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        } else {
            v[0] = 1.0;
        }
        v
    }
}

#[async_trait]
impl Embedder for WordHashEmbedder {
    fn dimensions(&self) -> usize {
        64
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

/// A [`MemoryBlock`] (priority 0) that keeps the sequence numbers it is given in its state and
/// shows them as its content (`"1 2 3"`), and logs every `put` call on the object (a redone
/// `put` shows there twice, never in the state).
#[derive(Debug)]
pub struct RecordingBlock {
    name: String,
    calls: Mutex<Vec<Vec<u64>>>,
}

impl RecordingBlock {
    /// A block named `name` (a valid block name).
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            calls: Mutex::new(Vec::new()),
        })
    }

    /// The sequence numbers of each `put` call on this object, in call order.
    pub fn calls(&self) -> Vec<Vec<u64>> {
        lock(&self.calls).clone()
    }
}

fn recorded(state: &Value) -> Vec<u64> {
    state["seqs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

#[async_trait]
impl MemoryBlock for RecordingBlock {
    fn name(&self) -> &str {
        &self.name
    }
    fn priority(&self) -> u32 {
        0
    }
    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        let seqs: Vec<String> = recorded(context.state).iter().map(u64::to_string).collect();
        Ok(BlockContent::Text(seqs.join(" ")))
    }
    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        let given: Vec<u64> = context.messages.iter().map(|m| m.seq).collect();
        lock(&self.calls).push(given.clone());
        let mut seqs = recorded(context.state);
        seqs.extend(given);
        *context.state = json!({ "seqs": seqs });
        Ok(())
    }
}

/// A [`SessionStore`] that forwards to another and fails chosen calls: the `n`th `save` from
/// its creation (with [`ErrorKind::Unavailable`], writing nothing), and optionally holds its
/// first `load` at a barrier (so two processes load the same version before either saves). It
/// counts the `Conflict` answers of the inner store's `save`.
#[derive(Debug)]
pub struct FaultySessionStore {
    inner: Arc<dyn SessionStore>,
    fail_save: Option<usize>,
    saves: AtomicUsize,
    gate: Option<Arc<Barrier>>,
    gated: AtomicBool,
    conflicts: AtomicUsize,
}

impl FaultySessionStore {
    /// Forwards everything to `inner`.
    pub fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            fail_save: None,
            saves: AtomicUsize::new(0),
            gate: None,
            gated: AtomicBool::new(false),
            conflicts: AtomicUsize::new(0),
        }
    }

    /// Fails the `n`th `save` (1-based) with `Unavailable`, without writing.
    pub fn failing_save(mut self, n: usize) -> Self {
        self.fail_save = Some(n);
        self
    }

    /// Waits at `barrier` after the first `load`.
    pub fn gated_first_load(mut self, barrier: Arc<Barrier>) -> Self {
        self.gate = Some(barrier);
        self
    }

    /// How many `save`s the inner store answered with `Conflict`.
    pub fn conflicts(&self) -> usize {
        self.conflicts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl memory_core::LayeredSessions for FaultySessionStore {
    type Inner = dyn SessionStore;
    fn inner(&self) -> &dyn SessionStore {
        &*self.inner
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        let loaded = self.inner.load(scope).await;
        if let Some(gate) = &self.gate
            && !self.gated.swap(true, Ordering::SeqCst)
        {
            gate.wait().await;
        }
        loaded
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        let n = self.saves.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_save == Some(n) {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("the test store failed save number {n} on purpose"),
            ));
        }
        let saved = self.inner.save(scope, state, expected).await;
        if saved
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::Conflict)
        {
            self.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        saved
    }
}

/// A [`HistoryStore`] that forwards to another and fails its next `archive` calls (as many as
/// set) with [`ErrorKind::Unavailable`], archiving nothing.
#[derive(Debug)]
pub struct FaultyHistoryStore {
    inner: Arc<dyn HistoryStore>,
    failing_archives: AtomicUsize,
}

impl FaultyHistoryStore {
    /// Forwards to `inner`; fails the next `archives` archive calls.
    pub fn failing_archive(inner: Arc<dyn HistoryStore>, archives: usize) -> Self {
        Self {
            inner,
            failing_archives: AtomicUsize::new(archives),
        }
    }
}

#[async_trait]
impl memory_core::LayeredHistory for FaultyHistoryStore {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.inner
    }
    async fn archive(&self, scope: &Scope, seqs: std::ops::RangeInclusive<u64>) -> Result<u64> {
        if self
            .failing_archives
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the test store failed an archive on purpose",
            ));
        }
        self.inner.archive(scope, seqs).await
    }
}

/// A memory over the stores with the suite's numbers (flush past 500 tokens, at least 100)
/// and `blocks`.
pub(crate) fn memory_over(
    scope: &Scope,
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    blocks: &[Arc<dyn MemoryBlock>],
    token_limit: u64,
) -> Memory {
    let mut builder = Memory::builder(scope.clone(), history, sessions)
        .token_limit(token_limit)
        .chat_history_token_ratio(0.5)
        .token_flush_size(100);
    for block in blocks {
        builder = builder.block(block.clone());
    }
    builder.build().expect_ok("build a memory")
}

/// The section `name` of the `<memory>` text, if there.
fn section<'a>(memory_text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>\n");
    let close = format!("\n</{name}>");
    let start = memory_text.find(&open)? + open.len();
    let end = start + memory_text[start..].find(&close)?;
    Some(&memory_text[start..end])
}

/// The `<memory>` text of the memory's `get` (empty without one).
async fn memory_text(memory: &Memory) -> String {
    let out = memory.get(&[]).await.expect_ok("get the memory");
    match out.first() {
        Some(m) if m.role == Role::System && m.text().starts_with("<memory>") => m.text(),
        _ => String::new(),
    }
}

/// What the recording block `name` holds in its durable state, read through `get`.
async fn delivered(memory: &Memory, name: &str) -> Vec<u64> {
    let text = memory_text(memory).await;
    section(&text, name)
        .map(|s| {
            s.split_whitespace()
                .map(|n| n.parse().expect("a recorded seq"))
                .collect()
        })
        .unwrap_or_default()
}

async fn archived_seqs(history: &dyn HistoryStore, scope: &Scope) -> Vec<u64> {
    history
        .read(scope, Window::Everything)
        .await
        .expect_ok("read everything")
        .iter()
        .filter(|m| m.archived)
        .map(|m| m.seq)
        .collect()
}

async fn active(history: &dyn HistoryStore, scope: &Scope) -> Vec<StoredMessage> {
    history
        .read(scope, Window::All)
        .await
        .expect_ok("read the active window")
}

fn texts(messages: &[ChatMessage]) -> Vec<String> {
    messages.iter().map(ChatMessage::text).collect()
}

fn stored_texts(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.text()).collect()
}

/// Asserts that a flush moved the oldest messages out and the rest starts with a user message.
async fn assert_flushed(history: &dyn HistoryStore, scope: &Scope, report: &FlushReport, n: usize) {
    let archived = archived_seqs(history, scope).await;
    assert!(
        report.messages > 0,
        "{n} messages of about 40 words are past the flush threshold of 500 tokens, yet the flush \
         moved nothing"
    );
    assert_eq!(
        archived,
        (1..=archived.len() as u64).collect::<Vec<_>>(),
        "a flush archives the oldest messages, a prefix of the thread"
    );
    let count = history.count(scope).await.expect_ok("count");
    assert_eq!(count.archived, archived.len() as u64, "count.archived");
    assert_eq!(
        count.active + count.archived,
        n as u64,
        "a flush archives, never deletes"
    );
    let window = active(history, scope).await;
    assert_eq!(
        window.first().map(|m| m.message.role),
        Some(Role::User),
        "after a flush the short-term window starts with a user message"
    );
}

/// The full set of blocks: static, fact extraction (on `model`), vector (on `vectors`) and a
/// recorder.
fn full_blocks(
    model: Arc<ScriptedChatModel>,
    vectors: Arc<InMemoryVectorStore>,
    recorder: Arc<RecordingBlock>,
) -> Vec<Arc<dyn MemoryBlock>> {
    vec![
        Arc::new(StaticMemoryBlock::new("core_info", CORE_INFO).expect_ok("a static block")),
        Arc::new(FactExtractionMemoryBlock::new(model)),
        Arc::new(VectorMemoryBlock::new(Arc::new(WordHashEmbedder), vectors)),
        recorder,
    ]
}

/// `put_messages` past the threshold flushes the oldest messages once into every block (static,
/// fact extraction, vector, recorder), archives them, and `get` shows every block and the rest;
/// a second flush hands each block only the new messages.
pub async fn memory_flushes_into_every_block(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let model = Arc::new(
        ScriptedChatModel::new().reply_text(format!("<facts><fact>{FIRST_FACT}</fact></facts>")),
    );
    let vectors = Arc::new(InMemoryVectorStore::new());
    let recorder = RecordingBlock::new("recorder");
    let blocks = full_blocks(model.clone(), vectors, recorder.clone());
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);

    let batch = conversation("m", 14);
    let report = memory
        .put_messages(&batch)
        .await
        .expect_ok("put 14 messages");
    assert_flushed(history.as_ref(), &scope, &report, 14).await;
    let archived = archived_seqs(history.as_ref(), &scope).await;
    assert_eq!(
        report.messages,
        archived.len(),
        "the report counts what was archived"
    );
    assert_eq!(
        report.deliveries, 4,
        "each of the 4 blocks took the batch once"
    );
    assert_eq!(model.remaining(), 0, "the fact block asked its model once");
    let flushed = &batch[..report.messages];
    let transcript = tagged_transcript(flushed.iter());
    let prompt = model.requests()[0].messages[1].text();
    assert!(
        prompt.contains(&transcript),
        "the extraction prompt holds the flushed messages as a transcript: {prompt}"
    );
    assert_eq!(
        recorder.calls(),
        vec![archived.clone()],
        "one put of the flushed seqs"
    );

    // get: every block, then the short-term messages.
    let query = vec![ChatMessage::user(batch[0].text())];
    let out = memory.get(&query).await.expect_ok("get");
    let seqs: Vec<String> = archived.iter().map(u64::to_string).collect();
    let expected = render_memory([
        ("core_info", CORE_INFO),
        (
            "fact_extraction_memory",
            format!("<fact>{FIRST_FACT}</fact>").as_str(),
        ),
        ("retrieval_based_memory", transcript.as_str()),
        ("recorder", seqs.join(" ").as_str()),
    ]);
    assert_eq!(
        out[0].role,
        Role::System,
        "the memory goes in a system message"
    );
    assert_eq!(
        out[0].text(),
        expected,
        "the <memory> text of the four blocks"
    );
    assert_eq!(
        texts(&out[1..]),
        stored_texts(&active(history.as_ref(), &scope).await),
        "then the short-term messages"
    );
    assert_eq!(
        memory.flush().await.expect_ok("flush again"),
        FlushReport::default(),
        "within the threshold a flush does nothing"
    );

    // A second flush: each block gets only the new messages.
    model.push(crate::ScriptedReply::Response(memory_core::ChatResponse {
        messages: vec![ChatMessage::assistant("<facts></facts>")],
        ..Default::default()
    }));
    let more = conversation("n", 8);
    let second = memory.put_messages(&more).await.expect_ok("put 8 more");
    assert!(second.messages > 0, "22 messages pass the threshold again");
    assert_eq!(second.deliveries, 4);
    let archived = archived_seqs(history.as_ref(), &scope).await;
    assert_eq!(archived, (1..=archived.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        delivered(&memory, "recorder").await,
        archived,
        "the recorder holds every archived message once"
    );
    let calls = recorder.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].first().copied(),
        Some(calls[0].last().copied().unwrap_or(0) + 1),
        "the second put starts after the first one's last message"
    );
    let text = memory_text(&memory).await;
    assert_eq!(
        section(&text, "fact_extraction_memory"),
        Some(format!("<fact>{FIRST_FACT}</fact>").as_str()),
        "the fact survives a flush with nothing new"
    );
}

/// `get` over the token limit truncates blocks by priority (the vector block, then the facts,
/// never priority 0), then drops the oldest short-term messages, never the last user turn.
pub async fn memory_get_truncates_by_priority(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let model = Arc::new(
        ScriptedChatModel::new().reply_text(format!("<facts><fact>{FIRST_FACT}</fact></facts>")),
    );
    let vectors = Arc::new(InMemoryVectorStore::new());
    let recorder = RecordingBlock::new("recorder");
    let blocks = full_blocks(model, vectors, recorder);
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
    let batch = conversation("m", 14);
    let report = memory
        .put_messages(&batch)
        .await
        .expect_ok("put 14 messages");
    assert_flushed(history.as_ref(), &scope, &report, 14).await;

    let window = active(history.as_ref(), &scope).await;
    let history_tokens: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
    let seqs: Vec<String> = archived_seqs(history.as_ref(), &scope)
        .await
        .iter()
        .map(u64::to_string)
        .collect();
    let seqs = seqs.join(" ");
    let fact = format!("<fact>{FIRST_FACT}</fact>");
    let counter = default_token_counter();
    let tokens = |text: &str| u64::from(counter.count_text(text));
    let with_facts = render_memory([
        ("core_info", CORE_INFO),
        ("fact_extraction_memory", fact.as_str()),
        ("recorder", seqs.as_str()),
    ]);
    let fixed_only = render_memory([("core_info", CORE_INFO), ("recorder", seqs.as_str())]);
    let query = [ChatMessage::user(batch[0].text())];

    // Room for everything but the vector block (priority 2, truncated first).
    let limit = history_tokens + tokens(&with_facts);
    let tight = memory_over(&scope, history.clone(), sessions.clone(), &blocks, limit);
    let out = tight
        .get(&query)
        .await
        .expect_ok("get within a tight limit");
    assert_eq!(out[0].text(), with_facts, "the vector block goes first");
    assert_eq!(
        texts(&out[1..]),
        stored_texts(&window),
        "no message dropped"
    );

    // Room for the priority-0 blocks only.
    let limit = history_tokens + tokens(&fixed_only);
    let tighter = memory_over(&scope, history.clone(), sessions.clone(), &blocks, limit);
    let out = tighter
        .get(&query)
        .await
        .expect_ok("get within a tighter limit");
    assert_eq!(
        out[0].text(),
        fixed_only,
        "then the facts; priority 0 stays"
    );
    assert_eq!(
        texts(&out[1..]),
        stored_texts(&window),
        "no message dropped"
    );

    // Room for the priority-0 blocks and the last user turn only.
    let last_turn = &window[window.len() - 2..];
    assert_eq!(last_turn[0].message.role, Role::User);
    let limit = tokens(&fixed_only) + last_turn.iter().map(|m| u64::from(m.tokens)).sum::<u64>();
    let tiny = memory_over(&scope, history.clone(), sessions, &blocks, limit);
    let out = tiny.get(&query).await.expect_ok("get within a tiny limit");
    assert_eq!(out[0].text(), fixed_only);
    assert_eq!(
        texts(&out[1..]),
        stored_texts(last_turn),
        "the oldest messages are dropped, the last user turn stays"
    );
    assert_eq!(
        active(history.as_ref(), &scope).await.len(),
        window.len(),
        "get drops messages from the view only, never from the store"
    );
}

pub(crate) fn recorders(names: &[&str]) -> (Vec<Arc<RecordingBlock>>, Vec<Arc<dyn MemoryBlock>>) {
    let blocks: Vec<Arc<RecordingBlock>> = names.iter().map(|n| RecordingBlock::new(n)).collect();
    let dyns = blocks
        .iter()
        .map(|b| b.clone() as Arc<dyn MemoryBlock>)
        .collect();
    (blocks, dyns)
}

const RECORDERS: [&str; 3] = ["first", "second", "third"];

/// A crash between a block's `put` and the save of its watermark (the `n`th state save fails,
/// for each block in turn) archives nothing; a fresh memory over the same stores finishes the
/// flush, and every block holds each flushed message exactly once.
pub async fn memory_crash_before_watermark_save_delivers_once(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    for failing in 1..=RECORDERS.len() {
        let scope = random_scope();
        let faulty: Arc<dyn SessionStore> =
            Arc::new(FaultySessionStore::new(sessions.clone()).failing_save(failing));
        let (crashed, blocks) = recorders(&RECORDERS);
        let memory = memory_over(&scope, history.clone(), faulty, &blocks, 1000);
        let batch = conversation("m", 14);
        expect_error_kind(
            memory.put_messages(&batch).await,
            ErrorKind::Unavailable,
            "put_messages while the state save of block {failing} fails",
        );
        assert_eq!(
            archived_seqs(history.as_ref(), &scope).await,
            Vec::<u64>::new(),
            "a flush that failed archives nothing (block {failing})"
        );
        assert_eq!(
            crashed[failing - 1].calls().len(),
            1,
            "block {failing} was given the batch before its save failed"
        );

        // A new process: fresh blocks and memory over the same stores.
        let (_, blocks) = recorders(&RECORDERS);
        let fresh = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
        let report = fresh.flush().await.expect_ok("flush in the new process");
        assert_flushed(history.as_ref(), &scope, &report, 14).await;
        assert_eq!(
            report.deliveries,
            RECORDERS.len() - (failing - 1),
            "the retry delivers to the blocks whose watermark was not saved, only"
        );
        let archived = archived_seqs(history.as_ref(), &scope).await;
        for name in RECORDERS {
            assert_eq!(
                delivered(&fresh, name).await,
                archived,
                "block {name} holds each flushed message once (save {failing} failed)"
            );
        }
    }
}

/// A crash between the last block's watermark save and the archive leaves the messages short
/// term; a fresh memory archives them without handing them to any block again.
pub async fn memory_crash_before_archive_delivers_once(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let faulty: Arc<dyn HistoryStore> =
        Arc::new(FaultyHistoryStore::failing_archive(history.clone(), 1));
    let (crashed, blocks) = recorders(&RECORDERS);
    let memory = memory_over(&scope, faulty, sessions.clone(), &blocks, 1000);
    let batch = conversation("m", 14);
    expect_error_kind(
        memory.put_messages(&batch).await,
        ErrorKind::Unavailable,
        "put_messages while the archive fails",
    );
    assert_eq!(
        archived_seqs(history.as_ref(), &scope).await,
        Vec::<u64>::new(),
        "nothing archived"
    );
    let given = crashed[0].calls();
    assert_eq!(given.len(), 1, "the first block took the batch");
    for name in RECORDERS {
        assert_eq!(
            delivered(&memory, name).await,
            given[0],
            "block {name} saved the batch before the archive failed"
        );
    }

    let (fresh_blocks, blocks) = recorders(&RECORDERS);
    let fresh = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
    let report = fresh.flush().await.expect_ok("flush in the new process");
    assert_flushed(history.as_ref(), &scope, &report, 14).await;
    assert_eq!(report.deliveries, 0, "no block is given the batch again");
    assert!(
        fresh_blocks.iter().all(|b| b.calls().is_empty()),
        "no put in the new process"
    );
    let archived = archived_seqs(history.as_ref(), &scope).await;
    assert_eq!(
        archived, given[0],
        "the retry archives what the blocks took"
    );
    for name in RECORDERS {
        assert_eq!(delivered(&fresh, name).await, archived, "block {name}");
    }
}

/// Two memories (two processes: separate objects over the same stores) flush one session at
/// once, both having loaded the block states before either saves: one save wins, the other
/// gets `Conflict` and redoes its flush from the winner's state; each block holds each
/// message once.
pub async fn memory_concurrent_flushes_deliver_once(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    history
        .append(&scope, &conversation("m", 14))
        .await
        .expect_ok("append 14 messages");
    let barrier = Arc::new(Barrier::new(2));
    let gated =
        || Arc::new(FaultySessionStore::new(sessions.clone()).gated_first_load(barrier.clone()));
    let (a_states, b_states) = (gated(), gated());
    let (_, a_blocks) = recorders(&RECORDERS);
    let (_, b_blocks) = recorders(&RECORDERS);
    let a = memory_over(&scope, history.clone(), a_states.clone(), &a_blocks, 1000);
    let b = memory_over(&scope, history.clone(), b_states.clone(), &b_blocks, 1000);
    let (ra, rb) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(a.flush(), b.flush())
    })
    .await
    .expect("two concurrent flushes finish within 30 s");
    let (ra, rb) = (ra.expect_ok("flush A"), rb.expect_ok("flush B"));
    assert!(
        a_states.conflicts() + b_states.conflicts() >= 1,
        "two flushes that loaded the same state version cannot both save it"
    );
    assert_eq!(
        ra.deliveries + rb.deliveries,
        RECORDERS.len(),
        "each block's delivery is saved by one of the two"
    );
    assert_eq!(ra.messages, rb.messages, "both flush the same messages");
    assert_flushed(history.as_ref(), &scope, &ra, 14).await;
    let archived = archived_seqs(history.as_ref(), &scope).await;
    assert_eq!(archived.len(), ra.messages);
    for name in RECORDERS {
        assert_eq!(delivered(&a, name).await, archived, "block {name}");
    }
}

/// The vector block's points of the session (every one: the suite's sessions hold few), as
/// `(first_seq, last_seq, first message id)`, sorted.
async fn vector_batches(vectors: &InMemoryVectorStore, scope: &Scope) -> Vec<(u64, u64, String)> {
    let vector_scope = scope
        .clone()
        .with_source("memory.vector.retrieval_based_memory")
        .expect_ok("the vector block's scope");
    let points = vectors
        .search(
            &vector_scope,
            &memory_core::VectorQuery::new(WordHashEmbedder::vector("anything at all"), 1000),
        )
        .await
        .expect_ok("list the vector points");
    let mut batches: Vec<(u64, u64, String)> = points
        .iter()
        .map(|p| {
            (
                p.payload["first_seq"].as_u64().unwrap_or(0),
                p.payload["last_seq"].as_u64().unwrap_or(0),
                p.payload
                    .get("first_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    batches.sort();
    batches
}

/// A thread cleared (or expired) after a flush starts again at seq 1: the next flush hands the
/// new thread's messages to every block from its first message (the old watermark belongs to
/// the old thread), and the vector block keeps the old batch beside the new one instead of
/// overwriting it (its point ids name the thread's incarnation). The blocks' states outlive
/// the short-term window.
pub async fn memory_recreated_thread_is_delivered_from_its_start(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let vectors = Arc::new(InMemoryVectorStore::new());
    let recorder = RecordingBlock::new("recorder");
    let blocks: Vec<Arc<dyn MemoryBlock>> = vec![
        Arc::new(VectorMemoryBlock::new(
            Arc::new(WordHashEmbedder),
            vectors.clone(),
        )),
        recorder.clone(),
    ];
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
    let first = memory
        .put_messages(&conversation("m", 14))
        .await
        .expect_ok("put 14 messages");
    assert!(first.messages > 0, "14 messages pass the threshold");
    let old = archived_seqs(history.as_ref(), &scope).await;

    history.clear(&scope).await.expect_ok("clear the thread");
    let second = memory
        .put_messages(&conversation("n", 14))
        .await
        .expect_ok("put 14 messages into the new thread");
    assert_eq!(
        second.deliveries, 2,
        "both blocks take the new thread's first batch"
    );
    let new = archived_seqs(history.as_ref(), &scope).await;
    assert_eq!(
        new.first(),
        Some(&1),
        "the new thread's flush archived from seq 1"
    );
    let calls = recorder.calls();
    assert_eq!(
        calls.last(),
        Some(&new),
        "the new thread's flushed messages reach the block from seq 1, none skipped"
    );
    let mut expected = old.clone();
    expected.extend(new.iter().copied());
    assert_eq!(
        delivered(&memory, "recorder").await,
        expected,
        "the block's state keeps the old thread's messages and adds the new thread's"
    );
    let batches = vector_batches(&vectors, &scope).await;
    assert_eq!(
        batches.len(),
        2,
        "the old thread's batch and the new thread's both stay: {batches:?}"
    );
    assert_ne!(
        batches[0].2, batches[1].2,
        "the two batches start at seq 1 of different threads"
    );
}

/// `reset` forgets the session's long-term memory (the vector block's points, every block's
/// state) and its thread; run again, it is harmless, and the memory starts afresh.
pub async fn memory_reset_forgets_every_block(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let model = Arc::new(
        ScriptedChatModel::new().reply_text(format!("<facts><fact>{FIRST_FACT}</fact></facts>")),
    );
    let vectors = Arc::new(InMemoryVectorStore::new());
    let recorder = RecordingBlock::new("recorder");
    let blocks = full_blocks(model, vectors.clone(), recorder);
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
    memory
        .put_messages(&conversation("m", 14))
        .await
        .expect_ok("put 14 messages");
    assert_eq!(vector_batches(&vectors, &scope).await.len(), 1);

    memory.reset().await.expect_ok("reset");
    assert!(
        vector_batches(&vectors, &scope).await.is_empty(),
        "reset deletes the vector block's points"
    );
    let count = history.count(&scope).await.expect_ok("count");
    assert_eq!(
        (count.active, count.archived),
        (0, 0),
        "reset clears the thread"
    );
    let state_scope = scope
        .clone()
        .with_source(memory_core::memory::BLOCK_STATE_SOURCE)
        .expect_ok("the block state's scope");
    assert!(
        sessions
            .load(&state_scope)
            .await
            .expect_ok("load the block states")
            .is_none(),
        "reset deletes the block states"
    );
    memory.reset().await.expect_ok("reset again");
    let query = [ChatMessage::user("m0 billing outage postmortem")];
    let out = memory.get(&query).await.expect_ok("get after the reset");
    assert_eq!(
        out[0].text(),
        render_memory([("core_info", CORE_INFO)]),
        "only the static block shows after a reset"
    );
}

/// With a session store whose sessions expire by default
/// ([`SessionCapabilities::expires_by_default`]), the block states live as long as the thread:
/// each `put` restarts their clock as the append restarts the thread's, so the states of a
/// thread in use never expire between flushes. Without it, a `put` that flushes nothing leaves
/// the block states alone (no save).
pub async fn memory_block_state_lives_as_long_as_its_thread(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let (_, blocks) = recorders(&["recorder"]);
    let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
    memory
        .put_messages(&conversation("m", 14))
        .await
        .expect_ok("put 14 messages");
    let flushed = delivered(&memory, "recorder").await;
    assert!(!flushed.is_empty(), "the first flush reached the block");
    let state_scope = scope
        .clone()
        .with_source(memory_core::memory::BLOCK_STATE_SOURCE)
        .expect_ok("the block state's scope");
    if !sessions.capabilities().expires_by_default {
        let version = |stored: Option<memory_core::StoredSession>| stored.map(|s| s.version);
        let before = version(
            sessions
                .load(&state_scope)
                .await
                .expect_ok("load the block states"),
        );
        let report = memory
            .put(ChatMessage::user("a short message"))
            .await
            .expect_ok("put a short message");
        assert_eq!(report.messages, 0, "a short message does not flush");
        assert_eq!(
            version(
                sessions
                    .load(&state_scope)
                    .await
                    .expect_ok("load the block states")
            ),
            before,
            "sessions do not expire by default: a put that flushed nothing saves no state"
        );
        return;
    }
    sessions
        .set_ttl(&state_scope, Some(Duration::from_millis(1500)))
        .await
        .expect_ok("make the block states expire in 1.5 s");
    for i in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let report = memory
            .put(ChatMessage::user(format!("short message {i}")))
            .await
            .expect_ok("put a short message");
        assert_eq!(report.messages, 0, "a short message does not flush");
    }
    assert_eq!(
        delivered(&memory, "recorder").await,
        flushed,
        "2 s of puts, each within the 1.5 s TTL of the last: the block states are still there"
    );
}

/// Two memories with vector blocks over one vector store flush one session at once and choose
/// different batches (different flush sizes); the loser of the state write deletes its point,
/// so every flushed message is recalled from one point only.
pub async fn memory_concurrent_flushes_leave_one_vector_point_per_message(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    history
        .append(&scope, &conversation("m", 14))
        .await
        .expect_ok("append 14 messages");
    let vectors = Arc::new(InMemoryVectorStore::new());
    let barrier = Arc::new(Barrier::new(2));
    let gated =
        || Arc::new(FaultySessionStore::new(sessions.clone()).gated_first_load(barrier.clone()));
    let (a_states, b_states) = (gated(), gated());
    let vector = || -> Arc<dyn MemoryBlock> {
        Arc::new(VectorMemoryBlock::new(
            Arc::new(WordHashEmbedder),
            vectors.clone(),
        ))
    };
    let build = |states: Arc<FaultySessionStore>, flush_size: u64| {
        Memory::builder(scope.clone(), history.clone(), states)
            .token_limit(1000)
            .chat_history_token_ratio(0.5)
            .token_flush_size(flush_size)
            .block(vector())
            .build()
            .expect_ok("build a memory")
    };
    let a = build(a_states.clone(), 100);
    let b = build(b_states.clone(), 400);
    let (ra, rb) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(a.flush(), b.flush())
    })
    .await
    .expect("two concurrent flushes finish within 30 s");
    let (ra, rb) = (ra.expect_ok("flush A"), rb.expect_ok("flush B"));
    assert_ne!(
        ra.messages, rb.messages,
        "the two flush sizes choose different batches"
    );
    assert!(
        a_states.conflicts() + b_states.conflicts() >= 1,
        "one of the two lost the state write"
    );
    let archived = archived_seqs(history.as_ref(), &scope).await;
    let mut covered = Vec::new();
    for (first, last, _) in vector_batches(&vectors, &scope).await {
        covered.extend(first..=last);
    }
    assert_eq!(
        covered, archived,
        "each archived message is in exactly one vector point"
    );
}

fn chat_model(replies: usize, prefix: &str) -> Arc<ScriptedChatModel> {
    let mut model = ScriptedChatModel::new();
    for i in 0..replies {
        model = model.reply_text(format!("{prefix} answer {i} about the rollout plan"));
    }
    Arc::new(model)
}

fn summarizer(replies: usize) -> Arc<ScriptedChatModel> {
    let mut model = ScriptedChatModel::new();
    for i in 1..=replies {
        model = model.reply_text(format!("summary {i} of the earlier turns"));
    }
    Arc::new(model)
}

/// Runs `turns` turns of an agent with `reducer` on `trigger`; returns the agent model.
async fn run_agent(
    history: &Arc<dyn HistoryStore>,
    scope: &Scope,
    reducer: Arc<dyn ChatReducer>,
    trigger: ReducerTrigger,
    turns: usize,
) -> Arc<ScriptedChatModel> {
    let model = chat_model(turns, "agent");
    let agent = Agent::builder("assistant", model.clone(), history.clone())
        .instructions("You help with the rollout.")
        .reducer(reducer, trigger)
        .build()
        .expect_ok("build the agent");
    let mut session = AgentSession::new(scope.clone());
    for turn in 0..turns {
        agent
            .run(
                format!("question {turn} about the staged rollout of the billing service"),
                &mut session,
            )
            .await
            .expect_ok("run a turn");
    }
    model
}

async fn everything(history: &dyn HistoryStore, scope: &Scope) -> Vec<StoredMessage> {
    history
        .read(scope, Window::Everything)
        .await
        .expect_ok("read everything")
}

/// With `AfterMessageAdded`, each reducer (message count, token budget, summarizing) archives
/// what it drops on the store — whole groups, oldest first, never the last user turn — and the
/// summarizer stores its marked summary; nothing is deleted.
pub async fn reducers_after_message_added_archive_on_the_store(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    let trigger = ReducerTrigger::AfterMessageAdded;

    // Message count: 4 turns, keep 4 messages.
    let scope = random_scope();
    run_agent(
        &history,
        &scope,
        Arc::new(MessageCountReducer::new(4)),
        trigger,
        4,
    )
    .await;
    let all = everything(history.as_ref(), &scope).await;
    assert_eq!(all.len(), 8, "nothing deleted");
    let flags: Vec<bool> = all.iter().map(|m| m.archived).collect();
    assert_eq!(
        flags,
        [true, true, true, true, false, false, false, false],
        "the 4 oldest messages archived"
    );
    let count = history.count(&scope).await.expect_ok("count");
    assert_eq!((count.active, count.archived), (4, 4));

    // Token budget: the active tokens end within the budget, archived a prefix.
    let scope = random_scope();
    let budget = 60;
    run_agent(
        &history,
        &scope,
        Arc::new(TokenBudgetReducer::new(budget)),
        trigger,
        6,
    )
    .await;
    let all = everything(history.as_ref(), &scope).await;
    assert_eq!(all.len(), 12, "nothing deleted");
    let count = history.count(&scope).await.expect_ok("count");
    assert!(count.archived > 0, "12 messages are over {budget} tokens");
    assert!(
        count.active_tokens <= budget || count.active == 2,
        "the active window fits the budget (or is the last turn): {count:?}"
    );
    let first_active = all
        .iter()
        .position(|m| !m.archived)
        .expect("an active message");
    assert!(
        all[first_active..].iter().all(|m| !m.archived),
        "the archived messages are the oldest"
    );
    assert_eq!(all[first_active].message.role, Role::User, "whole turns go");
    assert_eq!(count.archived, first_active as u64);

    // Summarizing: keep 2, summarize past 2 + 2: after 3 turns, 4 archived and one summary.
    let scope = random_scope();
    let model = summarizer(1);
    let reducer = Arc::new(SummarizingReducer::new(model.clone(), 2, 2));
    run_agent(&history, &scope, reducer, trigger, 3).await;
    assert_eq!(model.remaining(), 0, "one summary written");
    let all = everything(history.as_ref(), &scope).await;
    let flags: Vec<bool> = all.iter().map(|m| m.archived).collect();
    assert_eq!(flags, [true, true, true, true, false, false, false]);
    let summary = &all[6].message;
    assert!(is_summary(summary), "the stored summary is marked");
    assert!(
        summary.text().contains("summary 1 of the earlier turns"),
        "the summary holds the model's text: {}",
        summary.text()
    );
    assert!(!is_summary(&all[4].message) && all[4].message.role == Role::User);
    let count = history.count(&scope).await.expect_ok("count");
    assert_eq!((count.active, count.archived), (3, 4));
}

/// With `BeforeMessagesRetrieval`, each reducer shrinks only what the model is sent: the store
/// keeps every message active and gains no summary.
pub async fn reducers_before_retrieval_leave_the_store_untouched(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    let trigger = ReducerTrigger::BeforeMessagesRetrieval;
    let turns = 5;
    // The summarizer writes a summary on every run over 2 + 2 messages: runs 3 and 4.
    let summaries = summarizer(2);
    let reducers: [(&str, Arc<dyn ChatReducer>); 3] = [
        ("message count", Arc::new(MessageCountReducer::new(4))),
        ("token budget", Arc::new(TokenBudgetReducer::new(60))),
        (
            "summarizing",
            Arc::new(SummarizingReducer::new(summaries.clone(), 2, 2)),
        ),
    ];
    for (name, reducer) in reducers {
        let scope = random_scope();
        let model = run_agent(&history, &scope, reducer, trigger, turns).await;
        let all = everything(history.as_ref(), &scope).await;
        assert_eq!(
            all.len(),
            2 * turns,
            "{name}: every message stored, no summary"
        );
        assert!(
            all.iter().all(|m| !m.archived && !is_summary(&m.message)),
            "{name}: nothing archived"
        );
        let count = history.count(&scope).await.expect_ok("count");
        assert_eq!(
            (count.active, count.archived),
            (2 * turns as u64, 0),
            "{name}"
        );
        let sent = model.last_request().expect("a request").messages;
        // Instructions + the stored history + the input, had nothing been reduced.
        assert!(
            sent.len() < 1 + 2 * (turns - 1) + 1,
            "{name}: the model saw a reduced view ({} messages)",
            sent.len()
        );
        assert_eq!(
            sent.last().map(ChatMessage::text),
            Some(format!(
                "question {} about the staged rollout of the billing service",
                turns - 1
            )),
            "{name}: the input is sent"
        );
    }
    assert_eq!(
        summaries.remaining(),
        0,
        "the summarizer ran on runs 3 and 4"
    );
}

/// (role, author, text) of each message: what two runs on different scopes must agree on.
fn shape(messages: &[ChatMessage]) -> Vec<(Role, Option<String>, String)> {
    messages
        .iter()
        .map(|m| (m.role, m.author_name.clone(), m.text()))
        .collect()
}

/// A [`TeamSession`] saved to the session store half-way and restored into a fresh object
/// continues exactly as one that ran without interruption.
pub async fn team_session_resumes_like_an_uninterrupted_run(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let first: Vec<(&str, ChatMessage)> = vec![
        ("flights", ChatMessage::assistant("LIS 09:40 booked")),
        ("hotels", ChatMessage::assistant("Alfama, 3 nights")),
        ("flights", ChatMessage::assistant("return OPO 18:05 held")),
    ];
    let second: Vec<(&str, ChatMessage)> = vec![
        ("hotels", ChatMessage::assistant("late checkout confirmed")),
        ("flights", ChatMessage::assistant("return ticketed")),
        ("flights", ChatMessage::assistant("seats 12A and 12B")),
    ];
    async fn part(team: &mut TeamSession, messages: &[(&str, ChatMessage)], step: &str) {
        for (agent, message) in messages {
            team.add_history_message(agent, message.clone())
                .await
                .expect_ok("add a team message");
        }
        team.update_snapshot("step", json!(step));
    }
    async fn observe(team: &TeamSession) -> Value {
        let flights = team
            .history_messages("flights", 100)
            .await
            .expect_ok("flights");
        let hotels = team
            .history_messages("hotels", 100)
            .await
            .expect_ok("hotels");
        let whole = team.team_history(100).await.expect_ok("team history");
        json!({
            "flights": format!("{:?}", shape(&flights)),
            "hotels": format!("{:?}", shape(&hotels)),
            "team": format!("{:?}", shape(&whole)),
            "snapshot": team.snapshot(),
        })
    }

    // Uninterrupted.
    let scope = random_scope();
    let mut team = TeamSession::new(AgentSession::new(scope), history.clone());
    team.set_history_window("flights", Some(2))
        .expect_ok("window");
    part(&mut team, &first, "booked").await;
    part(&mut team, &second, "done").await;
    let uninterrupted = observe(&team).await;

    // Saved after the first part, restored into a new object, continued.
    let scope = random_scope();
    let mut team = TeamSession::new(AgentSession::new(scope.clone()), history.clone());
    team.set_history_window("flights", Some(2))
        .expect_ok("window");
    part(&mut team, &first, "booked").await;
    let state = team
        .session()
        .serialize()
        .expect_ok("serialize the team session");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the team session");
    drop(team);
    let stored = sessions
        .load(&scope)
        .await
        .expect_ok("load the team session")
        .expect("the saved team session");
    let session = AgentSession::deserialize_at(&stored.state, &scope).expect_ok("deserialize");
    let mut team = TeamSession::new(session, history.clone());
    part(&mut team, &second, "done").await;
    let resumed = observe(&team).await;
    assert_eq!(
        resumed, uninterrupted,
        "the resumed team equals the uninterrupted one"
    );
    assert_eq!(
        team.history_messages("flights", 100)
            .await
            .expect_ok("flights")
            .len(),
        2,
        "the flights window travelled with the saved session"
    );
}

fn participant(
    history: &Arc<dyn HistoryStore>,
    name: &str,
    replies: &[&str],
) -> (ChatParticipant, Arc<ScriptedChatModel>) {
    let mut model = ScriptedChatModel::new();
    for reply in replies {
        model = model.reply_text(*reply);
    }
    let model = Arc::new(model);
    let agent = Agent::builder(name, model.clone(), history.clone())
        .build()
        .expect_ok("build a chat agent");
    (
        ChatParticipant::new(Arc::new(agent), "chat_completion"),
        model,
    )
}

/// An [`AgentChat`] saved to the session store half-way (the agents' sub-histories in the
/// history store) and restored into a new chat with new agents continues exactly as one that
/// ran without interruption: same primary history, same requests to the models, same stored
/// sub-histories.
pub async fn agent_chat_resumes_like_an_uninterrupted_run(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    const WRITER: [&str; 2] = ["draft 1: an old pond", "draft 2: a frog jumps"];
    const CRITIC: [&str; 2] = ["too long", "better; ship it"];
    async fn observe(
        history: &Arc<dyn HistoryStore>,
        chat: &AgentChat,
        writer: &[ChatRequest],
        critic: &[ChatRequest],
    ) -> Value {
        let mut subs = Vec::new();
        for agent in ["writer", "critic"] {
            let scope = chat
                .scope()
                .clone()
                .with_agent_id(AgentId::new(agent).expect("a valid agent id"));
            let stored = active(history.as_ref(), &scope).await;
            let messages: Vec<ChatMessage> = stored.into_iter().map(|m| m.into_message()).collect();
            subs.push(format!("{:?}", shape(&messages)));
        }
        let requests = |requests: &[ChatRequest]| {
            requests
                .iter()
                .map(|r| format!("{:?}", shape(&r.messages)))
                .collect::<Vec<_>>()
        };
        json!({
            "history": format!("{:?}", shape(chat.history())),
            "sub_histories": subs,
            "writer_requests": requests(writer),
            "critic_requests": requests(critic),
        })
    }

    // Uninterrupted: writer, critic, writer, critic.
    let scope = random_scope();
    let mut chat = AgentChat::new(scope);
    let (writer, writer_model) = participant(&history, "writer", &WRITER);
    let (critic, critic_model) = participant(&history, "critic", &CRITIC);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    chat.add_message(ChatMessage::user("Write a haiku about a pond"));
    for _ in 0..4 {
        chat.invoke().await.expect_ok("a turn");
    }
    let uninterrupted = observe(
        &history,
        &chat,
        &writer_model.requests(),
        &critic_model.requests(),
    )
    .await;

    // Two turns, saved, restored with new agents (a new process), two more turns.
    let scope = random_scope();
    let mut chat = AgentChat::new(scope.clone());
    let (writer, first_writer) = participant(&history, "writer", &WRITER[..1]);
    let (critic, first_critic) = participant(&history, "critic", &CRITIC[..1]);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    chat.add_message(ChatMessage::user("Write a haiku about a pond"));
    chat.invoke_agent("writer").await.expect_ok("writer turn");
    chat.invoke_agent("critic").await.expect_ok("critic turn");
    let mut bytes = Vec::new();
    ChatSerializer::serialize(&chat, &mut bytes).expect_ok("serialize the chat");
    let state: Value = serde_json::from_slice(&bytes).expect("the chat state is JSON");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the chat");
    drop(chat);

    let stored = sessions
        .load(&scope)
        .await
        .expect_ok("load the chat")
        .expect("the saved chat");
    let bytes = serde_json::to_vec(&stored.state).expect("JSON");
    let serializer = ChatSerializer::deserialize(bytes.as_slice()).expect_ok("read the chat state");
    let mut chat = AgentChat::new(scope);
    let (writer, second_writer) = participant(&history, "writer", &WRITER[1..]);
    let (critic, second_critic) = participant(&history, "critic", &CRITIC[1..]);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    assert_eq!(
        serializer.restore(&mut chat).expect_ok("restore"),
        RestoreOutcome::Equivalent
    );
    chat.invoke_agent("writer").await.expect_ok("writer turn");
    chat.invoke_agent("critic").await.expect_ok("critic turn");

    // The two processes' models together saw what the uninterrupted ones saw.
    let joined = |a: &ScriptedChatModel, b: &ScriptedChatModel| {
        let mut all = a.requests();
        all.extend(b.requests());
        all
    };
    let writer_all = joined(&first_writer, &second_writer);
    let critic_all = joined(&first_critic, &second_critic);
    let resumed = observe(&history, &chat, &writer_all, &critic_all).await;
    assert_eq!(
        resumed, uninterrupted,
        "the resumed chat equals the uninterrupted one"
    );
}

/// A [`HistoryStore`] that forwards to another and counts the `append` calls.
#[derive(Debug)]
pub struct CountingHistoryStore {
    inner: Arc<dyn HistoryStore>,
    appends: AtomicUsize,
}

impl CountingHistoryStore {
    /// Forwards to `inner`.
    pub fn new(inner: Arc<dyn HistoryStore>) -> Self {
        Self {
            inner,
            appends: AtomicUsize::new(0),
        }
    }

    /// How many `append` calls it forwarded.
    pub fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl memory_core::LayeredHistory for CountingHistoryStore {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.inner
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(scope, messages).await
    }
}

/// The error sentence of the failing tool.
const DEPLOY_ERROR: &str = "the deploy window is closed until Monday";

/// The agent's two tools: `lookup_runbook` answers with a runbook of about 40 words, `deploy`
/// always fails.
fn agent_tools() -> Vec<Arc<dyn Tool>> {
    let lookup = FnTool::new(
        "lookup_runbook",
        "Finds the runbook of a topic.",
        json!({
            "type": "object",
            "properties": { "topic": { "type": "string" } },
            "required": ["topic"]
        }),
        |args: Value| async move {
            let topic = args["topic"].as_str().unwrap_or("nothing").to_owned();
            Ok(json!(format!("runbook for {topic} {FILLER}")))
        },
    );
    let deploy = FnTool::new(
        "deploy",
        "Deploys the billing service.",
        json!({ "type": "object" }),
        |_args: Value| async move { Err(Error::new(ErrorKind::Unavailable, DEPLOY_ERROR)) },
    );
    vec![Arc::new(lookup), Arc::new(deploy)]
}

/// An assistant message calling `lookup_runbook` twice (in parallel), with call ids
/// `{prefix}-a` and `{prefix}-b`.
fn parallel_lookups(prefix: &str) -> ChatResponse {
    let call = |suffix: &str, topic: &str| Part::ToolCall {
        id: format!("{prefix}-{suffix}"),
        name: "lookup_runbook".to_owned(),
        arguments: json!({ "topic": topic }).to_string(),
    };
    ChatResponse {
        messages: vec![ChatMessage::new(
            Role::Assistant,
            vec![call("a", "billing"), call("b", "queues")],
        )],
        ..Default::default()
    }
}

/// The final answer of tool turn `turn`.
fn tool_answer(turn: usize) -> String {
    format!("answer {turn}: the deploy waits {FILLER}")
}

/// Scripts one tool turn on `model`: two parallel lookups (`t{turn}-a`, `t{turn}-b`), then a
/// call to the failing `deploy` (`t{turn}-c`), then the final answer: 3 model calls, 7 stored
/// messages with the input.
fn script_tool_turn(model: &ScriptedChatModel, turn: usize) {
    model.push(crate::ScriptedReply::Response(parallel_lookups(&format!(
        "t{turn}"
    ))));
    model.push(crate::ScriptedReply::Response(ChatResponse {
        messages: vec![ChatMessage::tool_call(format!("t{turn}-c"), "deploy", "{}")],
        ..Default::default()
    }));
    model.push(crate::ScriptedReply::Response(ChatResponse {
        messages: vec![ChatMessage::assistant(tool_answer(turn))],
        ..Default::default()
    }));
}

/// The input of tool turn `turn`, of about 40 words.
fn tool_input(turn: usize) -> String {
    format!("question {turn}: can we deploy billing today {FILLER}")
}

/// An agent with the two tools on `model` and `history`.
fn tool_agent(model: Arc<ScriptedChatModel>, history: Arc<dyn HistoryStore>) -> AgentBuilder {
    let mut builder = Agent::builder("operator", model, history)
        .instructions("You operate the billing service.")
        .max_iterations(6);
    for tool in agent_tools() {
        builder = builder.tool(tool);
    }
    builder
}

/// Where `messages` split a tool group: a call message whose results do not all follow it
/// directly, or a tool result not directly after its call message (or that call's other
/// results). Empty when every group is whole.
fn split_groups(messages: &[ChatMessage]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut open: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            for id in m.tool_result_ids() {
                if !open.remove(id) {
                    problems.push(format!(
                        "message {i} answers call {id}, whose call message does not precede it"
                    ));
                }
            }
        } else {
            if !open.is_empty() {
                let mut ids: Vec<&String> = open.iter().collect();
                ids.sort();
                problems.push(format!(
                    "message {i} comes before the results of calls {ids:?}"
                ));
                open.clear();
            }
            open.extend(m.tool_call_ids().map(str::to_owned));
        }
    }
    if !open.is_empty() {
        let mut ids: Vec<&String> = open.iter().collect();
        ids.sort();
        problems.push(format!(
            "the results of calls {ids:?} are missing at the end"
        ));
    }
    problems
}

/// (id, role, parts) of each message: what a store must give back of what it was given.
fn identity(messages: &[ChatMessage]) -> Vec<(String, Role, Vec<Part>)> {
    messages
        .iter()
        .map(|m| (m.id.to_string(), m.role, m.parts.clone()))
        .collect()
}

fn stored_messages(stored: &[StoredMessage]) -> Vec<ChatMessage> {
    stored.iter().map(|m| (*m.message).clone()).collect()
}

/// An agent turn with two parallel tool calls, a failing call and a final answer stores, in one
/// append, the input, each assistant tool-call message, every result (the error as a result)
/// and the answer, with consecutive seqs; a fresh agent on the same stores, with the session
/// saved to and loaded from the session store, continues the thread and sends the model the
/// whole group.
pub async fn agent_tool_loop_stores_whole_groups(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let counting = Arc::new(CountingHistoryStore::new(history.clone()));
    let model = Arc::new(ScriptedChatModel::new());
    script_tool_turn(&model, 1);
    let agent = tool_agent(model.clone(), counting.clone())
        .build()
        .expect_ok("build the tool agent");
    let mut session = AgentSession::new(scope.clone());
    let input = ChatMessage::user(tool_input(1));
    let run = agent
        .run(input.clone(), &mut session)
        .await
        .expect_ok("run a turn with tool calls");
    assert_eq!(run.stop_reason, StopReason::Answered);
    assert_eq!(run.iterations, 3, "two tool iterations, then the answer");
    let statuses: Vec<ToolCallStatus> = run.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            ToolCallStatus::Succeeded,
            ToolCallStatus::Succeeded,
            ToolCallStatus::Failed
        ],
        "two lookups ran, the deploy failed"
    );
    assert_eq!(
        counting.appends(),
        1,
        "the whole turn is stored in one append"
    );

    let stored = everything(history.as_ref(), &scope).await;
    let seqs: Vec<u64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=7).collect::<Vec<u64>>(),
        "the input, 2 tool-call messages, 3 results and the answer, with consecutive seqs"
    );
    assert!(
        stored.iter().all(|m| !m.archived),
        "nothing of the turn is archived"
    );
    let messages = stored_messages(&stored);
    let mut expected = vec![input.clone()];
    expected.extend(run.messages.iter().cloned());
    assert_eq!(
        identity(&messages),
        identity(&expected),
        "the store holds the input and everything the run produced, in order"
    );
    assert_eq!(
        messages[1].tool_call_ids().collect::<Vec<_>>(),
        ["t1-a", "t1-b"],
        "the first assistant message holds both parallel calls"
    );
    let results: Vec<Vec<&str>> = [2, 3, 5]
        .iter()
        .map(|&i| messages[i].tool_result_ids().collect())
        .collect();
    assert_eq!(
        results,
        [vec!["t1-a"], vec!["t1-b"], vec!["t1-c"]],
        "every call has its result, in order"
    );
    let lookup = format!("runbook for billing {FILLER}");
    assert!(
        matches!(&messages[2].parts[..], [Part::ToolResult { content, .. }] if *content == lookup),
        "the lookup's result is stored verbatim: {:?}",
        messages[2].parts
    );
    assert!(
        matches!(&messages[5].parts[..], [Part::ToolResult { content, .. }] if content.contains(DEPLOY_ERROR)),
        "the deploy's error is stored as its result: {:?}",
        messages[5].parts
    );
    assert_eq!(messages[6].text(), tool_answer(1), "then the final answer");
    assert_eq!(split_groups(&messages), Vec::<String>::new());

    // A new process: the session through the session store, a fresh agent on the same stores.
    let state = session.serialize().expect_ok("serialize the session");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the session");
    drop(agent);
    drop(session);
    let loaded = sessions
        .load(&scope)
        .await
        .expect_ok("load the session")
        .expect("the saved session");
    let mut session =
        AgentSession::deserialize_at(&loaded.state, &scope).expect_ok("restore the session");
    assert_eq!(session.turns(), 1, "the restored session counts the turn");
    let model = Arc::new(ScriptedChatModel::new().reply_text("second answer: Monday it is"));
    let agent = tool_agent(model.clone(), counting.clone())
        .build()
        .expect_ok("build the second agent");
    let follow_up = ChatMessage::user("then schedule it for Monday");
    let second = agent
        .run(follow_up.clone(), &mut session)
        .await
        .expect_ok("continue the conversation");
    assert_eq!(second.text(), "second answer: Monday it is");
    assert_eq!(session.turns(), 2);
    let sent = model.last_request().expect("a request").messages;
    assert_eq!(
        sent.first().map(|m| m.role),
        Some(Role::System),
        "the instructions go first"
    );
    let mut expected = messages.clone();
    expected.push(follow_up);
    assert_eq!(
        identity(&sent[1..]),
        identity(&expected),
        "the second agent sends the whole first turn, every call with its result, then the input"
    );
    assert_eq!(counting.appends(), 2, "one append per turn");
    let stored = everything(history.as_ref(), &scope).await;
    assert_eq!(
        stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=9).collect::<Vec<u64>>(),
        "the second turn follows the first"
    );
}

/// The tool agent with a [`Memory`] (a recording block, a small token limit) as context
/// provider, over several tool turns: every flush hands the block whole tool groups (never a
/// call without its results), and every archived message reaches the block exactly once.
pub async fn agent_tool_loop_with_memory_flushes_groups_whole(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    const TURNS: usize = 5;
    let scope = random_scope();
    let recorder = RecordingBlock::new("recorder");
    let blocks: Vec<Arc<dyn MemoryBlock>> = vec![recorder.clone()];
    // Flush past 300 tokens: about one and a half tool turns.
    let memory = Arc::new(memory_over(
        &scope,
        history.clone(),
        sessions.clone(),
        &blocks,
        600,
    ));
    let model = Arc::new(ScriptedChatModel::new());
    for turn in 1..=TURNS {
        script_tool_turn(&model, turn);
    }
    let agent = tool_agent(model.clone(), history.clone())
        .window(Window::All)
        .context_provider(memory.clone())
        .build()
        .expect_ok("build the agent with a memory");
    let mut session = AgentSession::new(scope.clone());
    for turn in 1..=TURNS {
        let run = agent
            .run(tool_input(turn), &mut session)
            .await
            .expect_ok("run a tool turn with the memory");
        assert_eq!(run.text(), tool_answer(turn));
    }
    assert_eq!(model.remaining(), 0, "every scripted reply was used");

    let stored = everything(history.as_ref(), &scope).await;
    assert_eq!(
        stored.len(),
        7 * TURNS,
        "every message stored once, whatever the memory appended again"
    );
    let calls = recorder.calls();
    assert!(
        calls.len() >= 2,
        "{TURNS} tool turns of about 200 tokens pass a 300-token threshold more than once, yet the \
         block got {} batches",
        calls.len()
    );
    for batch in &calls {
        let messages: Vec<ChatMessage> = batch
            .iter()
            .map(|seq| {
                stored
                    .iter()
                    .find(|m| m.seq == *seq)
                    .map(|m| (*m.message).clone())
                    .expect("the block got a stored seq")
            })
            .collect();
        assert_eq!(
            split_groups(&messages),
            Vec::<String>::new(),
            "a flushed batch ({batch:?}) splits a tool group"
        );
    }
    let archived: Vec<u64> = stored
        .iter()
        .filter(|m| m.archived)
        .map(|m| m.seq)
        .collect();
    assert_eq!(
        archived,
        (1..=archived.len() as u64).collect::<Vec<_>>(),
        "the flushes archive a prefix of the thread"
    );
    let all_calls: Vec<u64> = calls.concat();
    assert_eq!(
        all_calls, archived,
        "each archived message reached the block once, in order"
    );
    assert_eq!(
        delivered(&memory, "recorder").await,
        archived,
        "the block's durable state holds each archived message once"
    );
    assert!(
        stored
            .iter()
            .filter(|m| m.archived)
            .any(|m| m.message.has_tool_calls()),
        "the flushes moved tool groups"
    );
    let active: Vec<ChatMessage> = stored
        .iter()
        .filter(|m| !m.archived)
        .map(|m| (*m.message).clone())
        .collect();
    assert_eq!(
        active.first().map(|m| m.role),
        Some(Role::User),
        "the short-term window starts with a user message"
    );
    assert_eq!(split_groups(&active), Vec::<String>::new());
}

/// A run of several tool iterations with a message-count reducer whose target the run passes:
/// no request the model sees splits a tool group (the reducer left earlier turns out between
/// iterations); with `BeforeMessagesRetrieval` the store keeps every message active, with
/// `AfterMessageAdded` it archives the earlier turn along group boundaries.
pub async fn agent_reducer_between_iterations_keeps_groups(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    const TARGET: usize = 6;
    for trigger in [
        ReducerTrigger::BeforeMessagesRetrieval,
        ReducerTrigger::AfterMessageAdded,
    ] {
        let scope = random_scope();
        let model = Arc::new(ScriptedChatModel::new());
        // Run 1: one tool turn (7 messages).
        script_tool_turn(&model, 1);
        // Run 2: three iterations of two parallel lookups, then the answer (11 messages).
        for i in 1..=3 {
            model.push(crate::ScriptedReply::Response(parallel_lookups(&format!(
                "r2-{i}"
            ))));
        }
        model.push(crate::ScriptedReply::Response(ChatResponse {
            messages: vec![ChatMessage::assistant(tool_answer(2))],
            ..Default::default()
        }));
        let agent = tool_agent(model.clone(), history.clone())
            .reducer(Arc::new(MessageCountReducer::new(TARGET)), trigger)
            .build()
            .expect_ok("build the agent with a reducer");
        let mut session = AgentSession::new(scope.clone());
        agent
            .run(tool_input(1), &mut session)
            .await
            .expect_ok("run 1");
        let input = ChatMessage::user(tool_input(2));
        let run = agent
            .run(input.clone(), &mut session)
            .await
            .expect_ok("run 2, with three tool iterations");
        assert_eq!(run.iterations, 4, "{trigger:?}");
        assert_eq!(
            model.remaining(),
            0,
            "{trigger:?}: every scripted reply used"
        );
        assert!(
            run.reduced > 0,
            "{trigger:?}: run 2 holds more than {TARGET} messages, yet the reducer left nothing out"
        );
        for (n, request) in model.requests().iter().enumerate() {
            assert_eq!(
                split_groups(&request.messages),
                Vec::<String>::new(),
                "{trigger:?}: request {} splits a tool group",
                n + 1
            );
        }
        let last = run.request.messages.clone();
        let mut own = vec![input.clone()];
        own.extend(run.messages[..run.messages.len() - 1].iter().cloned());
        assert!(
            last.len() >= own.len() && identity(&last[last.len() - own.len()..]) == identity(&own),
            "{trigger:?}: the last request holds the run's input and every call and result"
        );
        assert!(
            last.len() < 1 + 7 + own.len(),
            "{trigger:?}: the last request left out part of run 1 ({} messages)",
            last.len()
        );

        let stored = everything(history.as_ref(), &scope).await;
        assert_eq!(
            stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
            (1..=18).collect::<Vec<u64>>(),
            "{trigger:?}: both runs stored whole, nothing deleted"
        );
        let archived: Vec<StoredMessage> = stored.iter().filter(|m| m.archived).cloned().collect();
        match trigger {
            ReducerTrigger::BeforeMessagesRetrieval => {
                assert!(
                    archived.is_empty(),
                    "{trigger:?}: the view reduction archived {} messages",
                    archived.len()
                );
                assert_eq!(run.archived, 0);
            }
            _ => {
                assert_eq!(
                    archived.iter().map(|m| m.seq).collect::<Vec<_>>(),
                    (1..=7).collect::<Vec<u64>>(),
                    "{trigger:?}: run 1 archived whole, run 2 (the last user turn) kept"
                );
                assert_eq!(run.archived, 7);
                assert_eq!(
                    split_groups(&stored_messages(&archived)),
                    Vec::<String>::new(),
                    "{trigger:?}: the archived messages are whole groups"
                );
            }
        }
        let active: Vec<ChatMessage> = stored
            .iter()
            .filter(|m| !m.archived)
            .map(|m| (*m.message).clone())
            .collect();
        assert_eq!(
            split_groups(&active),
            Vec::<String>::new(),
            "{trigger:?}: the active window keeps whole groups"
        );
    }
}

/// Runs every check of the suite, one after the other, on `history` and `sessions`.
pub async fn run_all_memory_checks(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    crate::__memory_checks!(run_all(history, sessions));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_groups_finds_a_call_apart_from_its_results() {
        let calls = parallel_lookups("x").messages.remove(0);
        let a = ChatMessage::tool_result("x-a", "one");
        let b = ChatMessage::tool_result("x-b", "two");
        let user = ChatMessage::user("hi");
        let whole = [
            user.clone(),
            calls.clone(),
            a.clone(),
            b.clone(),
            user.clone(),
        ];
        assert!(split_groups(&whole).is_empty());
        assert_eq!(
            split_groups(&[calls.clone(), a.clone()]).len(),
            1,
            "a result missing"
        );
        assert_eq!(
            split_groups(&[a.clone(), b.clone()]).len(),
            2,
            "the call missing"
        );
        assert_eq!(
            split_groups(&[calls, a, user, b]).len(),
            2,
            "a result away from its call"
        );
    }
}
