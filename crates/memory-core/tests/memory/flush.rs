//! Flushing: which messages leave the window, exactly once per block, whatever fails or races.

use std::sync::atomic::Ordering;

use memory_core::memory::FlushReport;
use memory_core::{ChatMessage, ErrorKind, HistoryStore, Part, Role, Scope, SessionStore, Window};

use super::support::*;

#[tokio::test]
async fn flushes_exactly_the_oldest_messages_past_the_ratio() {
    let (history, states) = stores();
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history.clone(), states, vec![rec.clone()]);
    // 10 tokens each: the threshold is 50, so the sixth message passes it.
    for i in 0..5 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        assert_eq!(
            m.put(msg(role, 10, &format!("m{i}"))).await.unwrap(),
            FlushReport::default()
        );
    }
    let report = m.put(msg(Role::Assistant, 10, "m5")).await.unwrap();
    // 60 > 50: pop m0, m1 (20 tokens, rest 40 ≤ 50); the rest starts with m2, a user message.
    assert_eq!(report.messages, 2);
    assert_eq!(report.tokens, 20);
    assert_eq!(rec.seen(), ["m0", "m1"]);
    let count = history.count(m.scope()).await.unwrap();
    assert_eq!(
        (count.active, count.archived, count.active_tokens),
        (4, 2, 40)
    );
}

#[tokio::test]
async fn a_flush_continues_until_the_rest_starts_with_a_user_message() {
    let (history, states) = stores();
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history.clone(), states, vec![rec.clone()]);
    let batch = vec![
        msg(Role::User, 20, "u0"),
        msg(Role::Assistant, 10, "a0"),
        msg(Role::Assistant, 10, "a1"),
        msg(Role::User, 10, "u1"),
        msg(Role::Assistant, 10, "a2"),
    ];
    // 60 > 50: u0 alone is 20 tokens, but the rest would start with an assistant message.
    let report = m.put_messages(&batch).await.unwrap();
    assert_eq!(rec.seen(), ["u0", "a0", "a1"]);
    assert_eq!(report.messages, 3);
}

#[tokio::test]
async fn a_tool_call_and_its_result_flush_together_and_the_last_turn_stays() {
    let (history, states) = stores();
    let rec = Recorder::new("rec", 1, "r");
    let m = memory(history.clone(), states, vec![rec.clone()]);
    let mut call = ChatMessage::tool_call("c1", "lookup", "{}");
    call.parts.insert(
        0,
        Part::text("call w w w w w w w w w w w w w w w w w w w w"),
    );
    let batch = vec![
        msg(Role::User, 10, "u0"),
        call,
        ChatMessage::tool_result("c1", "res w w w w w w w w w w w w"),
        msg(Role::User, 30, "u1"),
        msg(Role::Assistant, 30, "a1"),
    ];
    m.put_messages(&batch).await.unwrap();
    let seen = rec.seen();
    assert!(
        seen.starts_with(&["u0".to_owned(), "call".to_owned(), "res".to_owned()]),
        "{seen:?}"
    );
    // The last user turn is never flushed, even though it alone is over the threshold.
    assert!(!seen.contains(&"u1".to_owned()));
    let active = history.read(m.scope(), Window::All).await.unwrap();
    assert_eq!(active[0].message.text().split(' ').next(), Some("u1"));
}

#[tokio::test]
async fn a_block_failing_mid_flush_loses_nothing_and_doubles_nothing() {
    let (history, states) = stores();
    let first = Recorder::new("first", 1, "a");
    let flaky = Recorder::new("flaky", 1, "b");
    flaky.fail_first.store(1, Ordering::SeqCst);
    let last = Recorder::new("last", 1, "c");
    let m = memory(
        history.clone(),
        states.clone(),
        vec![first.clone(), flaky.clone(), last.clone()],
    );
    let batch = alternating(6);
    let err = m.put_messages(&batch).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    // Nothing archived yet: the messages are still short-term memory.
    assert_eq!(history.count(m.scope()).await.unwrap().archived, 0);
    assert_eq!(first.seen(), ["m0", "m1"]);
    assert!(flaky.seen().is_empty() && last.seen().is_empty());

    // A rebuilt memory (a new process) retries: each block gets the batch exactly once.
    let again = memory(
        history.clone(),
        states,
        vec![first.clone(), flaky.clone(), last.clone()],
    );
    let report = again.flush().await.unwrap();
    assert_eq!(report.messages, 2);
    assert_eq!(
        report.deliveries, 2,
        "only the two blocks that had not taken it"
    );
    assert_eq!(first.seen(), ["m0", "m1"]);
    assert_eq!(flaky.seen(), ["m0", "m1"]);
    assert_eq!(last.seen(), ["m0", "m1"]);
    assert_eq!(history.count(m.scope()).await.unwrap().archived, 2);
    assert_eq!(again.flush().await.unwrap(), FlushReport::default());
}

#[tokio::test]
async fn a_stale_count_does_not_void_the_watermarks_of_a_concurrent_flush() {
    let (history, inner) = stores();
    let scope = Scope::session("s").unwrap();
    history.append(&scope, &numbered(1, 5)).await.unwrap();
    let rec = Recorder::new("rec", 1, "r");
    let seam = SessionSeam::new(inner.clone(), inner.capabilities());
    let a = memory_dyn(history.clone(), seam.clone(), vec![rec.clone()]);
    let b = memory(history.clone(), inner, vec![rec.clone()]);
    // A counts 6 messages; before it loads the states, B appends 8 more and flushes m1-m10.
    *seam.on_first_load.lock().unwrap() = Some((b, numbered(7, 8)));
    a.put(numbered(6, 1).remove(0)).await.unwrap();
    let seen = rec.seen();
    let expected: Vec<String> = (1..=10).map(|i| format!("m{i}")).collect();
    assert_eq!(seen, expected, "each message delivered once");
}

#[tokio::test]
async fn puts_save_the_block_states_again_only_when_sessions_expire_by_default() {
    for expires in [false, true] {
        let (history, inner) = stores();
        let caps = memory_core::SessionCapabilities::none()
            .with_ttl(true)
            .with_expires_by_default(expires);
        let states = SessionSeam::new(inner, caps);
        let m = memory_dyn(history, states.clone(), vec![Recorder::new("rec", 1, "r")]);
        assert_eq!(m.put_messages(&numbered(1, 6)).await.unwrap().deliveries, 1);
        let before = states.saves.load(Ordering::SeqCst);
        for i in 0..2 {
            let report = m.put(msg(Role::User, 5, &format!("s{i}"))).await.unwrap();
            assert_eq!(report.messages, 0);
        }
        let saves = states.saves.load(Ordering::SeqCst) - before;
        assert_eq!(
            saves,
            if expires { 2 } else { 0 },
            "expires by default: {expires}"
        );
    }
}
