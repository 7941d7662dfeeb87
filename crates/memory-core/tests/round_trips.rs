//! How many store round trips one agent turn makes: an agent alone reads its window and appends
//! its batch; with a `Memory` provider over the same stores, the turn adds one block-state load
//! (no count, no second read, no re-append) until a flush.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::history::{CursorRead, ThreadCursor};
use memory_core::memory::blocks::StaticMemoryBlock;
use memory_core::memory::{BlockContent, BlockGetContext, BlockPutContext, Memory, MemoryBlock};
use memory_core::{
    Agent, AgentSession, AppendOutcome, ChatMessage, ChatModel, ChatRequest, ChatResponse,
    DEFAULT_WINDOW, HistoryCapabilities, HistoryStore, InMemoryHistoryStore, InMemorySessionStore,
    MessageCountReducer, Page, PageRequest, ReducerTrigger, Result, Scope, ScopeFilter,
    SessionStore, StoredMessage, StoredSession, ThreadCount, Window, async_trait,
};
use memory_testkit::ScriptedChatModel;
use memory_testkit::fixtures::random_scope;
use serde_json::Value;

/// The operations the stores were asked for, in order.
#[derive(Debug, Default)]
struct Calls(Mutex<Vec<&'static str>>);

impl Calls {
    fn note(&self, op: &'static str) {
        self.0.lock().unwrap().push(op);
    }
    /// The calls since the last take.
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A history store that notes each call, then forwards it; `cursor_reads` can be hidden.
#[derive(Debug)]
struct CountingHistory {
    inner: InMemoryHistoryStore,
    calls: Arc<Calls>,
    cursor_reads: bool,
}

#[async_trait]
impl memory_core::LayeredHistory for CountingHistory {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        self.inner
            .capabilities()
            .with_cursor_reads(self.cursor_reads)
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.calls.note("history.append");
        self.inner.append(scope, messages).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.calls.note("history.read");
        self.inner.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.calls.note("history.count");
        self.inner.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.calls.note("history.clear");
        self.inner.clear(scope).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.calls.note("history.list_threads");
        self.inner.list_threads(filter, page).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.calls.note("history.archive");
        self.inner.archive(scope, seqs).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.calls.note("history.set_ttl");
        self.inner.set_ttl(scope, ttl).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        self.calls.note("history.purge_expired");
        self.inner.purge_expired().await
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.calls.note("history.read_since");
        self.inner.read_since(scope, window, since).await
    }
}

/// A session store that notes each call, then forwards it.
#[derive(Debug)]
struct CountingSessions {
    inner: InMemorySessionStore,
    calls: Arc<Calls>,
}

#[async_trait]
impl memory_core::LayeredSessions for CountingSessions {
    type Inner = InMemorySessionStore;
    fn inner(&self) -> &InMemorySessionStore {
        &self.inner
    }
    async fn load(&self, scope: &Scope) -> Result<Option<StoredSession>> {
        self.calls.note("sessions.load");
        self.inner.load(scope).await
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        self.calls.note("sessions.save");
        self.inner.save(scope, state, expected).await
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.calls.note("sessions.delete");
        self.inner.delete(scope).await
    }
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.calls.note("sessions.list");
        self.inner.list(filter, page).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.calls.note("sessions.set_ttl");
        self.inner.set_ttl(scope, ttl).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        self.calls.note("sessions.purge_expired");
        self.inner.purge_expired().await
    }
}

struct Stores {
    calls: Arc<Calls>,
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
}

fn stores(cursor_reads: bool) -> Stores {
    let calls = Arc::new(Calls::default());
    Stores {
        history: Arc::new(CountingHistory {
            inner: InMemoryHistoryStore::new(),
            calls: calls.clone(),
            cursor_reads,
        }),
        sessions: Arc::new(CountingSessions {
            inner: InMemorySessionStore::new(),
            calls: calls.clone(),
        }),
        calls,
    }
}

fn answers(n: usize) -> Arc<ScriptedChatModel> {
    let mut model = ScriptedChatModel::new();
    for i in 0..n {
        model = model.reply_text(format!("answer {i}"));
    }
    Arc::new(model)
}

fn memory(stores: &Stores, scope: &Scope, token_limit: u64) -> Arc<Memory> {
    Arc::new(
        Memory::builder(
            scope.clone(),
            stores.history.clone(),
            stores.sessions.clone(),
        )
        .token_limit(token_limit)
        .token_flush_size(10)
        .block(Arc::new(
            StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.").unwrap(),
        ))
        .build()
        .unwrap(),
    )
}

/// An agent of `model` over `history` that reads `window` and has `memory` as its provider.
fn memory_agent(
    model: Arc<dyn ChatModel>,
    history: &Arc<dyn HistoryStore>,
    window: Window,
    memory: Arc<Memory>,
) -> Agent {
    Agent::builder("helper", model, history.clone())
        .window(window)
        .context_provider(memory)
        .build()
        .unwrap()
}

/// The call an agent reads its window with: a cursor read where the store has them.
fn window_read(cursor_reads: bool) -> &'static str {
    if cursor_reads {
        "history.read_since"
    } else {
        "history.read"
    }
}

/// Runs the turns `turns` ("question {turn}") and asserts that each made exactly the calls
/// `expected`; `context` names the case in a failure.
async fn turns_each_make(
    agent: &Agent,
    session: &mut AgentSession,
    calls: &Calls,
    turns: std::ops::Range<usize>,
    expected: &[&str],
    context: &str,
) {
    for turn in turns {
        agent
            .run(format!("question {turn}"), session)
            .await
            .unwrap();
        assert_eq!(calls.take(), expected, "turn {turn} {context}");
    }
}

#[tokio::test]
async fn an_agent_turn_reads_once_and_appends_once() {
    for cursor_reads in [true, false] {
        let stores = stores(cursor_reads);
        let agent = Agent::builder("helper", answers(3), stores.history.clone())
            .build()
            .unwrap();
        let mut session = AgentSession::new(random_scope());
        turns_each_make(
            &agent,
            &mut session,
            &stores.calls,
            0..3,
            &[window_read(cursor_reads), "history.append"],
            &format!("(cursor reads: {cursor_reads})"),
        )
        .await;
    }
}

#[tokio::test]
async fn a_memory_turn_without_a_flush_is_read_block_state_load_and_append() {
    for cursor_reads in [true, false] {
        let stores = stores(cursor_reads);
        let scope = random_scope();
        let memory = memory(&stores, &scope, 30_000);
        let model = answers(4);
        let agent = memory_agent(model.clone(), &stores.history, Window::All, memory);
        let mut session = AgentSession::new(scope.clone());
        turns_each_make(
            &agent,
            &mut session,
            &stores.calls,
            0..4,
            &[window_read(cursor_reads), "sessions.load", "history.append"],
            &format!("(cursor reads: {cursor_reads})"),
        )
        .await;
        // The memory still did its work: its text reached the model, the turns are stored once.
        let last = model.requests().pop().unwrap();
        assert!(
            last.messages[0]
                .text()
                .contains("The user is Dana, an SRE.")
        );
        assert_eq!(stores.history.count(&scope).await.unwrap().active, 8);
    }
}

/// The default window (a token budget) read without counts does not show the active tokens:
/// the memory counts and reads as before, and the agent still appends once.
#[tokio::test]
async fn a_memory_turn_over_a_window_without_counts_reads_for_itself() {
    let stores = stores(false);
    let scope = random_scope();
    let memory = memory(&stores, &scope, 30_000);
    let agent = memory_agent(answers(2), &stores.history, DEFAULT_WINDOW, memory);
    let mut session = AgentSession::new(scope);
    turns_each_make(
        &agent,
        &mut session,
        &stores.calls,
        0..2,
        &[
            "history.read",
            "history.count",
            "history.read",
            "sessions.load",
            "history.append",
            "history.count",
        ],
        "",
    )
    .await;
}

/// A flush turn adds the flush's own round trips: it reads the window, loads the block
/// states, counts (the incarnation check), saves the states once per block that takes the
/// batch, and archives.
#[tokio::test]
async fn a_flush_turn_adds_the_flush_and_nothing_else() {
    let stores = stores(true);
    let scope = random_scope();
    // Flush past 28 tokens: the second turn crosses it.
    let memory = memory(&stores, &scope, 40);
    let agent = memory_agent(answers(2), &stores.history, Window::All, memory);
    let mut session = AgentSession::new(scope.clone());
    agent
        .run("question 0 about the staged rollout", &mut session)
        .await
        .unwrap();
    assert_eq!(
        stores.calls.take(),
        ["history.read_since", "sessions.load", "history.append"]
    );
    agent
        .run("question 1 about the staged rollout", &mut session)
        .await
        .unwrap();
    assert_eq!(
        stores.calls.take(),
        [
            "history.read_since",
            "sessions.load",
            "history.append",
            "history.read",
            "sessions.load",
            "history.count",
            "sessions.save",
            "history.archive",
        ]
    );
    assert_eq!(
        stores.history.count(&scope).await.unwrap().archived,
        2,
        "the first turn was flushed"
    );
}

/// An `AfterMessageAdded` reducer works on the window the agent holds: no second read after
/// the append; it archives only when it drops something.
#[tokio::test]
async fn an_after_message_added_reducer_does_not_read_again() {
    for cursor_reads in [true, false] {
        let stores = stores(cursor_reads);
        let scope = random_scope();
        let agent = Agent::builder("helper", answers(3), stores.history.clone())
            .window(Window::All)
            .reducer(
                Arc::new(MessageCountReducer::new(4)),
                ReducerTrigger::AfterMessageAdded,
            )
            .build()
            .unwrap();
        let mut session = AgentSession::new(scope.clone());
        let read = window_read(cursor_reads);
        turns_each_make(
            &agent,
            &mut session,
            &stores.calls,
            0..2,
            &[read, "history.append"],
            "",
        )
        .await;
        let run = agent.run("question 2", &mut session).await.unwrap();
        assert_eq!(
            stores.calls.take(),
            [read, "history.append", "history.archive"]
        );
        assert_eq!(run.archived, 2);
        let count = stores.history.count(&scope).await.unwrap();
        assert_eq!((count.active, count.archived), (4, 2));
    }
}

/// A block that records the retrieval context of each `get` and answers with a long text (a
/// priority 1 block: truncated, here left out, when the token budget is short).
#[derive(Debug, Default)]
struct RecordingGets {
    seen: Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl MemoryBlock for RecordingGets {
    fn name(&self) -> &str {
        "recording"
    }
    fn priority(&self) -> u32 {
        1
    }
    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        let texts: Vec<String> = context.messages.iter().map(ChatMessage::text).collect();
        let text = format!("seen {} messages; {}", texts.len(), "filler ".repeat(300));
        self.seen.lock().unwrap().push(texts);
        Ok(BlockContent::Text(text))
    }
    async fn put(&self, _context: BlockPutContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// 40 turns (more messages than the 32 of the retrieval context, with flushes and a budget
/// that sometimes leaves the block out) through an agent whose window the memory uses, and
/// through one whose window (a token budget read without counts) it cannot use: the memory
/// gives the blocks the same retrieval context and the model the same requests.
#[tokio::test]
async fn the_memory_adds_the_same_context_from_the_agents_window_as_from_its_own_reads() {
    const TURNS: usize = 40;
    let mut runs = Vec::new();
    for (cursor_reads, window) in [(true, Window::All), (false, Window::TokenBudget(30_000))] {
        let stores = stores(cursor_reads);
        let scope = Scope::session("same-context").unwrap();
        let block = Arc::new(RecordingGets::default());
        let memory = Arc::new(
            Memory::builder(
                scope.clone(),
                stores.history.clone(),
                stores.sessions.clone(),
            )
            .token_limit(800)
            .token_flush_size(100)
            .block(block.clone())
            .build()
            .unwrap(),
        );
        let model = answers(TURNS);
        let agent = memory_agent(model.clone(), &stores.history, window, memory);
        let mut session = AgentSession::new(scope.clone());
        for turn in 0..TURNS {
            agent
                .run(format!("question {turn} about the rollout"), &mut session)
                .await
                .unwrap();
        }
        let calls = stores.calls.take();
        let archived = stores.history.count(&scope).await.unwrap().archived;
        let seen = std::mem::take(&mut *block.seen.lock().unwrap());
        runs.push((seen, model.requests(), archived, calls));
    }
    let (held, fallback) = (&runs[0], &runs[1]);
    assert!(
        held.0.iter().any(|context| context.len() > 32),
        "the context was capped"
    );
    assert!(held.2 > 0, "the memory flushed");
    let left_out = |requests: &[ChatRequest]| {
        requests
            .iter()
            .filter(|r| !r.messages[0].text().contains("seen"))
            .count()
    };
    assert!(
        left_out(&held.1) > 0,
        "the budget left the block out at times"
    );
    assert_eq!(
        held.0, fallback.0,
        "the blocks saw the same retrieval context"
    );
    // Message ids differ between the runs (the scripted answers get fresh ids); the rest not.
    let sent = |requests: &[ChatRequest]| -> Vec<Vec<(memory_core::Role, String)>> {
        requests
            .iter()
            .map(|r| r.messages.iter().map(|m| (m.role, m.text())).collect())
            .collect()
    };
    assert_eq!(
        sent(&held.1),
        sent(&fallback.1),
        "the model saw the same requests"
    );
    assert_eq!(held.2, fallback.2, "the same messages were flushed");
    assert!(
        held.3.len() < fallback.3.len(),
        "the memory that used the agent's window made fewer round trips"
    );
}

/// A memory over another history store than the agent's stores the run itself.
#[tokio::test]
async fn a_memory_over_another_store_stores_the_turn_itself() {
    let agents = stores(true);
    let memories = stores(true);
    let scope = random_scope();
    let memory = memory(&memories, &scope, 30_000);
    let agent = memory_agent(answers(2), &agents.history, Window::All, memory);
    let mut session = AgentSession::new(scope.clone());
    for turn in 0..2 {
        agent
            .run(format!("question {turn}"), &mut session)
            .await
            .unwrap();
        assert_eq!(
            agents.calls.take(),
            ["history.read_since", "history.append"]
        );
        assert_eq!(
            memories.calls.take(),
            [
                "history.count",
                "history.read",
                "sessions.load",
                "history.append",
                "history.count"
            ]
        );
    }
    assert_eq!(memories.history.count(&scope).await.unwrap().active, 4);
}

/// A model that appends a message of another writer to the thread while it answers.
#[derive(Debug)]
struct InterleavingModel {
    history: Arc<dyn HistoryStore>,
    scope: Scope,
}

#[async_trait]
impl ChatModel for InterleavingModel {
    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse> {
        self.history
            .append(&self.scope, &[ChatMessage::user("another writer")])
            .await?;
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant("answer")],
            ..ChatResponse::default()
        })
    }
}

/// When another writer appended between the agent's read and its append, the memory cannot
/// add the batch to the window's tokens: it counts, as before.
#[tokio::test]
async fn a_memory_counts_when_another_writer_appended_during_the_run() {
    let stores = stores(true);
    let scope = random_scope();
    let memory = memory(&stores, &scope, 30_000);
    let model = Arc::new(InterleavingModel {
        history: stores.history.clone(),
        scope: scope.clone(),
    });
    let agent = memory_agent(model, &stores.history, Window::All, memory);
    let mut session = AgentSession::new(scope.clone());
    agent.run("question", &mut session).await.unwrap();
    assert_eq!(
        stores.calls.take(),
        [
            "history.read_since",
            "sessions.load",
            "history.append",
            "history.append",
            "history.count"
        ]
    );
    assert_eq!(stores.history.count(&scope).await.unwrap().active, 3);
}

#[tokio::test]
async fn memory_get_is_one_history_read_with_cursor_reads_and_gives_the_same_messages() {
    // With cursor reads, `get` takes the newest messages within the limit and the counts in one
    // call (one snapshot); without, it counts and reads. Both give the same messages, within
    // the limit and over it.
    let scope = random_scope();
    let with = stores(true);
    let without = stores(false);
    for k in 0..40 {
        let batch = [
            ChatMessage::user(format!("question {k} about the pager rotation")),
            ChatMessage::assistant(format!("answer {k}: the rotation changes on Mondays")),
        ];
        with.history.append(&scope, &batch).await.unwrap();
        without.history.append(&scope, &batch).await.unwrap();
        if k != 3 && k != 39 {
            continue;
        }
        // Within the limit at k = 3, over it at k = 39 (no flush: only `get` runs).
        let got_with = memory(&with, &scope, 300).get(&[]).await.unwrap();
        let got_without = memory(&without, &scope, 300).get(&[]).await.unwrap();
        let texts = |messages: &[ChatMessage]| -> Vec<String> {
            messages.iter().map(ChatMessage::text).collect()
        };
        assert_eq!(texts(&got_with), texts(&got_without), "after turn {k}");
        let history_calls = |calls: Vec<&'static str>| -> Vec<&'static str> {
            calls
                .into_iter()
                .filter(|c| c.starts_with("history."))
                .collect()
        };
        let calls_with = history_calls(with.calls.take());
        let calls_without = history_calls(without.calls.take());
        let reads_with: Vec<_> = calls_with
            .iter()
            .filter(|c| **c != "history.append")
            .collect();
        let reads_without: Vec<_> = calls_without
            .iter()
            .filter(|c| **c != "history.append")
            .collect();
        if k == 3 {
            assert_eq!(
                reads_with,
                [&"history.read_since"],
                "within the limit: one call"
            );
            assert_eq!(reads_without, [&"history.count", &"history.read"]);
        } else {
            assert_eq!(
                reads_with.first(),
                Some(&&"history.read_since"),
                "over the limit: the cursor read replaces the count and the budget read"
            );
            assert!(!reads_with.contains(&&"history.count"));
            assert_eq!(reads_with.len() + 1, reads_without.len());
        }
    }
}
