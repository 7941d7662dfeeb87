//! Block states: kept per session across rebuilds, old documents upgraded, bad ones refused.

use std::sync::Arc;

use memory_core::memory::BLOCK_STATE_SOURCE;
use memory_core::{ErrorKind, HistoryStore, InMemorySessionStore, Role, Scope, SessionStore};
use serde_json::{Value, json};

use super::support::*;

#[tokio::test]
async fn block_state_survives_a_rebuild() {
    let (history, states) = stores();
    let rec = Recorder::new("rec", 1, "seen");
    let m = memory(history.clone(), states.clone(), vec![rec.clone()]);
    let batch = alternating(6);
    m.put_messages(&batch).await.unwrap();
    drop(m);
    let rebuilt = memory(history, states, vec![Recorder::new("rec", 1, "seen")]);
    let out = rebuilt.get(&[]).await.unwrap();
    assert_eq!(out[0].text(), "<memory>\n<rec>\nseen 2\n</rec>\n</memory>");
}

#[tokio::test]
async fn corrupt_block_state_is_a_typed_error() {
    let (history, states) = stores();
    let m = memory(history, states.clone(), vec![Recorder::new("rec", 1, "r")]);
    let scope = m.scope().clone().with_source(BLOCK_STATE_SOURCE).unwrap();
    states
        .save(&scope, &json!({"format": "x"}), None)
        .await
        .unwrap();
    let err = m.get(&[]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    let _: Value = json!(null);
}

/// Saves a version-1 block-state document (no thread id, no watermark ids) holding the block
/// `rec` at `watermark` with `state`.
async fn save_version_1_rec(states: &InMemorySessionStore, watermark: u64, state: Value) {
    save_doc(
        states,
        json!({
            "format": "agent-memory/memory-blocks",
            "version": 1,
            "blocks": { "rec": { "watermark": watermark, "state": state } },
        }),
    )
    .await;
}

#[tokio::test]
async fn a_version_1_document_without_thread_or_watermark_ids_loads_and_is_upgraded() {
    let (history, states) = stores();
    save_version_1_rec(&states, 2, json!({ "n": 2 })).await;
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history, states.clone(), vec![rec.clone()]);
    let report = m.put_messages(&numbered(1, 8)).await.unwrap();
    assert_eq!(report.deliveries, 1);
    assert_eq!(
        rec.seen()[0],
        "m3",
        "the version-1 watermark holds: {:?}",
        rec.seen()
    );
    let doc = load_doc(states.as_ref()).await.unwrap();
    assert_eq!(doc["version"], 2, "a save writes version 2: {doc}");
    assert!(doc["thread"].is_string(), "{doc}");
    // The recorder counts on from the state's 2: the flushed messages past the watermark.
    assert_eq!(doc["blocks"]["rec"]["state"]["n"], report.messages as u64);

    // A version this binary does not know is refused with a sentence.
    let (history, states) = stores();
    save_doc(
        &states,
        json!({ "format": "agent-memory/memory-blocks", "version": 3, "blocks": {} }),
    )
    .await;
    let m = memory(history, states, vec![Recorder::new("rec", 1, "r")]);
    let err = m.get(&[]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("version 3"), "{err}");
}

#[tokio::test]
async fn a_re_created_thread_is_told_by_its_watermark_id_alone() {
    let (history, states) = stores();
    let scope = Scope::session("s").unwrap();
    history.append(&scope, &numbered(1, 8)).await.unwrap();
    // Seq 1 is archived (the window cannot show the seq-1 id), the watermark is below the last
    // seq: only the id at the watermark tells the new thread from the old one.
    history.archive(&scope, 1..=2).await.unwrap();
    save_doc(
        &states,
        json!({
            "format": "agent-memory/memory-blocks",
            "version": 2,
            "thread": "old-thread-first",
            "blocks": { "rec": { "watermark": 3, "watermark_id": "old-3", "state": {} } },
        }),
    )
    .await;
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history, states, vec![rec.clone()]);
    m.put(msg(Role::Assistant, 10, "m9")).await.unwrap();
    assert_eq!(
        rec.seen().first().map(String::as_str),
        Some("m3"),
        "{:?}",
        rec.seen()
    );
}

#[tokio::test]
async fn a_re_created_thread_is_told_by_a_watermark_past_its_last_seq_alone() {
    let (history, states) = stores();
    // A document without the seq-1 id or watermark ids, whose watermark is past the thread.
    save_version_1_rec(&states, 50, json!({})).await;
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history, states, vec![rec.clone()]);
    m.put_messages(&numbered(1, 8)).await.unwrap();
    assert_eq!(
        rec.seen().first().map(String::as_str),
        Some("m1"),
        "{:?}",
        rec.seen()
    );
}

#[tokio::test]
async fn a_reset_whose_clear_fails_keeps_the_block_states() {
    let (inner, states) = stores();
    let history = Arc::new(ReadLog {
        fail_clear: true,
        ..ReadLog::plain(inner)
    });
    let m = memory_dyn(history, states.clone(), vec![Recorder::new("rec", 1, "r")]);
    m.put_messages(&numbered(1, 6)).await.unwrap();
    let err = m.reset().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(
        load_doc(states.as_ref()).await.is_some(),
        "the thread is cleared first: a failed clear leaves the states (and the blocks) alone"
    );
}
