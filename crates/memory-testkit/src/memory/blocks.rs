//! The checks of a [`Memory`](memory_core::Memory) and its blocks: the flush into every block,
//! truncation by priority, a reset, and how long block state lives.

use std::sync::Arc;
use std::time::Duration;

use memory_core::memory::blocks::{
    FactExtractionMemoryBlock, StaticMemoryBlock, VectorMemoryBlock,
};
use memory_core::memory::{FlushReport, MemoryBlock, render_memory};
use memory_core::message::tagged_transcript;
use memory_core::{
    ChatMessage, HistoryStore, InMemoryVectorStore, Memory, Role, Scope, SessionStore,
    StoredMessage, default_token_counter,
};

use super::support::{
    active, archived_seqs, assert_flushed, conversation, delivered, memory_over, memory_text,
    recorders, section, texts, vector_batches,
};
use crate::ScriptedChatModel;
use crate::doubles::{RecordingBlock, WordHashEmbedder};
use crate::fixtures::{ExpectOk, random_scope};

/// The static block's text.
const CORE_INFO: &str = "The user is Dana, an SRE on the billing team.";

/// The fact the scripted extraction model answers with first.
const FIRST_FACT: &str = "Dana is on call this week.";

fn stored_texts(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.text()).collect()
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

/// A memory over the [`full_blocks`] in a new scope (token limit 1000) after its first flush
/// (14 messages put), with what a check looks into: the fact block's model (answering
/// [`FIRST_FACT`] once), the vector block's store, the recorder, the batch and its report.
struct FullMemory {
    scope: Scope,
    model: Arc<ScriptedChatModel>,
    vectors: Arc<InMemoryVectorStore>,
    recorder: Arc<RecordingBlock>,
    blocks: Vec<Arc<dyn MemoryBlock>>,
    memory: Memory,
    batch: Vec<ChatMessage>,
    report: FlushReport,
}

impl FullMemory {
    async fn flushed_once(
        history: &Arc<dyn HistoryStore>,
        sessions: &Arc<dyn SessionStore>,
    ) -> Self {
        let scope = random_scope();
        let model = Arc::new(
            ScriptedChatModel::new()
                .reply_text(format!("<facts><fact>{FIRST_FACT}</fact></facts>")),
        );
        let vectors = Arc::new(InMemoryVectorStore::new());
        let recorder = RecordingBlock::new("recorder");
        let blocks = full_blocks(model.clone(), vectors.clone(), recorder.clone());
        let memory = memory_over(&scope, history.clone(), sessions.clone(), &blocks, 1000);
        let batch = conversation("m", 14);
        let report = memory
            .put_messages(&batch)
            .await
            .expect_ok("put 14 messages");
        assert_flushed(history.as_ref(), &scope, &report, 14).await;
        Self {
            scope,
            model,
            vectors,
            recorder,
            blocks,
            memory,
            batch,
            report,
        }
    }
}

/// The scope of the block states of the thread `scope`.
fn block_state_scope(scope: &Scope) -> Scope {
    scope
        .clone()
        .with_source(memory_core::memory::BLOCK_STATE_SOURCE)
        .expect_ok("the block state's scope")
}

/// `put_messages` past the threshold flushes the oldest messages once into every block (static,
/// fact extraction, vector, recorder), archives them, and `get` shows every block and the rest;
/// a second flush hands each block only the new messages.
pub async fn memory_flushes_into_every_block(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let full = FullMemory::flushed_once(&history, &sessions).await;
    let (scope, model, recorder, memory, batch, report) = (
        full.scope,
        full.model,
        full.recorder,
        full.memory,
        full.batch,
        full.report,
    );
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
    let full = FullMemory::flushed_once(&history, &sessions).await;
    let (scope, blocks, batch) = (full.scope, full.blocks, full.batch);

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

/// `reset` forgets the session's long-term memory (the vector block's points, every block's
/// state) and its thread; run again, it is harmless, and the memory starts afresh.
pub async fn memory_reset_forgets_every_block(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let full = FullMemory::flushed_once(&history, &sessions).await;
    let (scope, vectors, memory) = (full.scope, full.vectors, full.memory);
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
    let state_scope = block_state_scope(&scope);
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
/// ([`SessionCapabilities::expires_by_default`](memory_core::SessionCapabilities::expires_by_default)),
/// the block states live as long as the thread: each `put` restarts their clock as the append
/// restarts the thread's, so the states of a thread in use never expire between flushes. Without
/// it, a `put` that flushes nothing leaves the block states alone (no save).
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
    let state_scope = block_state_scope(&scope);
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
