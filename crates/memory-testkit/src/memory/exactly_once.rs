//! The checks of the exactly-once flush: a crash at each step, concurrent flushers and a re-
//! created thread deliver every archived message to every block once.

use std::sync::Arc;
use std::time::Duration;

use memory_core::memory::FlushReport;
use memory_core::memory::MemoryBlock;
use memory_core::memory::blocks::VectorMemoryBlock;
use memory_core::{ErrorKind, HistoryStore, InMemoryVectorStore, Memory, Scope, SessionStore};
use tokio::sync::Barrier;

use super::support::{
    archived_seqs, assert_flushed, conversation, delivered, memory_over, recorders, vector_batches,
};
use crate::doubles::{FaultyHistoryStore, FaultySessionStore, RecordingBlock, WordHashEmbedder};
use crate::fixtures::{ExpectOk, expect_error_kind, random_scope};

const RECORDERS: [&str; 3] = ["first", "second", "third"];

/// Puts 14 messages through `memory` (whose stores fail on purpose) and checks that the put
/// fails `Unavailable` and archives nothing of `scope` in `history`; `what` names the failure.
async fn put_fails_archiving_nothing(
    memory: &Memory,
    history: &dyn HistoryStore,
    scope: &Scope,
    what: &str,
) {
    expect_error_kind(
        memory.put_messages(&conversation("m", 14)).await,
        ErrorKind::Unavailable,
        &format!("put_messages while {what}"),
    );
    assert_eq!(
        archived_seqs(history, scope).await,
        Vec::<u64>::new(),
        "a flush that failed archives nothing ({what})"
    );
}

/// A new process after a crash: fresh recorders and a memory over the same stores, which
/// flushes the 14 messages of `scope`. Returns the recorders, the memory and its report.
async fn flush_in_a_new_process(
    history: &Arc<dyn HistoryStore>,
    sessions: &Arc<dyn SessionStore>,
    scope: &Scope,
) -> (Vec<Arc<RecordingBlock>>, Memory, FlushReport) {
    let (recorded, blocks) = recorders(&RECORDERS);
    let fresh = memory_over(scope, history.clone(), sessions.clone(), &blocks, 1000);
    let report = fresh.flush().await.expect_ok("flush in the new process");
    assert_flushed(history.as_ref(), scope, &report, 14).await;
    (recorded, fresh, report)
}

/// Checks that every one of the [`RECORDERS`] of `memory` holds exactly the seqs archived in
/// `scope`, and returns them; `what` names the case in a failure.
async fn assert_recorders_hold_the_archive(
    memory: &Memory,
    history: &dyn HistoryStore,
    scope: &Scope,
    what: &str,
) -> Vec<u64> {
    let archived = archived_seqs(history, scope).await;
    for name in RECORDERS {
        assert_eq!(
            delivered(memory, name).await,
            archived,
            "block {name} holds each flushed message once ({what})"
        );
    }
    archived
}

/// Appends 14 messages to `scope`, then flushes it at once through two memories (two
/// processes), each built by `build` over its own view of the session store, gated so that
/// both load the block states before either saves. Returns the two memories, their reports
/// and how many `Conflict`s their state saves met.
async fn flush_twice_at_once(
    history: &Arc<dyn HistoryStore>,
    sessions: &Arc<dyn SessionStore>,
    scope: &Scope,
    build: impl Fn(Arc<FaultySessionStore>, usize) -> Memory,
) -> ([Memory; 2], [FlushReport; 2], usize) {
    history
        .append(scope, &conversation("m", 14))
        .await
        .expect_ok("append 14 messages");
    let barrier = Arc::new(Barrier::new(2));
    let gated =
        || Arc::new(FaultySessionStore::new(sessions.clone()).gated_first_load(barrier.clone()));
    let (a_states, b_states) = (gated(), gated());
    let a = build(a_states.clone(), 0);
    let b = build(b_states.clone(), 1);
    let (ra, rb) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(a.flush(), b.flush())
    })
    .await
    .expect("two concurrent flushes finish within 30 s");
    let reports = [ra.expect_ok("flush A"), rb.expect_ok("flush B")];
    let conflicts = a_states.conflicts() + b_states.conflicts();
    ([a, b], reports, conflicts)
}

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
        put_fails_archiving_nothing(
            &memory,
            history.as_ref(),
            &scope,
            &format!("the state save of block {failing} fails"),
        )
        .await;
        assert_eq!(
            crashed[failing - 1].calls().len(),
            1,
            "block {failing} was given the batch before its save failed"
        );

        let (_, fresh, report) = flush_in_a_new_process(&history, &sessions, &scope).await;
        assert_eq!(
            report.deliveries,
            RECORDERS.len() - (failing - 1),
            "the retry delivers to the blocks whose watermark was not saved, only"
        );
        assert_recorders_hold_the_archive(
            &fresh,
            history.as_ref(),
            &scope,
            &format!("save {failing} failed"),
        )
        .await;
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
    put_fails_archiving_nothing(&memory, history.as_ref(), &scope, "the archive fails").await;
    let given = crashed[0].calls();
    assert_eq!(given.len(), 1, "the first block took the batch");
    for name in RECORDERS {
        assert_eq!(
            delivered(&memory, name).await,
            given[0],
            "block {name} saved the batch before the archive failed"
        );
    }

    let (fresh_blocks, fresh, report) = flush_in_a_new_process(&history, &sessions, &scope).await;
    assert_eq!(report.deliveries, 0, "no block is given the batch again");
    assert!(
        fresh_blocks.iter().all(|b| b.calls().is_empty()),
        "no put in the new process"
    );
    let archived =
        assert_recorders_hold_the_archive(&fresh, history.as_ref(), &scope, "after the retry")
            .await;
    assert_eq!(
        archived, given[0],
        "the retry archives what the blocks took"
    );
}

/// Two memories (two processes: separate objects over the same stores) flush one session at
/// once, both having loaded the block states before either saves: one save wins, the other
/// gets `Conflict` and redoes its flush from the winner's state; each block holds each
/// message once, and the two reports add up to what was archived (each counts what it moved).
pub async fn memory_concurrent_flushes_deliver_once(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let ([a, _], [ra, rb], conflicts) =
        flush_twice_at_once(&history, &sessions, &scope, |states, _| {
            let (_, blocks) = recorders(&RECORDERS);
            memory_over(&scope, history.clone(), states, &blocks, 1000)
        })
        .await;
    assert!(
        conflicts >= 1,
        "two flushes that loaded the same state version cannot both save it"
    );
    assert_eq!(
        ra.deliveries + rb.deliveries,
        RECORDERS.len(),
        "each block's delivery is saved by one of the two"
    );
    // Each flush reports what it moved out of the window, never what the other moved: the
    // two reports add up to what was archived.
    let both = FlushReport {
        messages: ra.messages + rb.messages,
        tokens: ra.tokens + rb.tokens,
        deliveries: ra.deliveries + rb.deliveries,
    };
    assert_flushed(history.as_ref(), &scope, &both, 14).await;
    let archived =
        assert_recorders_hold_the_archive(&a, history.as_ref(), &scope, "concurrent flushes").await;
    assert_eq!(
        archived.len(),
        both.messages,
        "the two reports add up to the archived messages"
    );
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

/// Two memories with vector blocks over one vector store flush one session at once and choose
/// different batches (different flush sizes); the loser of the state write deletes its point,
/// so every flushed message is recalled from one point only.
pub async fn memory_concurrent_flushes_leave_one_vector_point_per_message(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let vectors = Arc::new(InMemoryVectorStore::new());
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
    let (_, [ra, rb], conflicts) = flush_twice_at_once(&history, &sessions, &scope, |states, i| {
        build(states, [100, 400][i])
    })
    .await;
    assert_ne!(
        ra.messages, rb.messages,
        "the two flush sizes choose different batches"
    );
    assert!(conflicts >= 1, "one of the two lost the state write");
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
