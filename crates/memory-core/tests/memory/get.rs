//! `get`: what fits the token limit, in which order blocks are truncated, where memory goes.

use std::sync::Arc;

use memory_core::memory::blocks::StaticMemoryBlock;
use memory_core::memory::{InsertMethod, Memory};
use memory_core::{ChatMessage, HistoryStore, InMemoryHistoryStore, Role, Scope, Window};

use super::support::*;

#[tokio::test]
async fn get_truncates_blocks_by_priority_highest_number_first() {
    let (history, states) = stores();
    // Rendered, the three sections cost 40 words: 2 for <memory></memory>, 12 for core,
    // 13 each for low and high (their text ends with the count 0).
    let never = Arc::new(StaticMemoryBlock::new("core", "c c c c c c c c c c").unwrap());
    let low = Recorder::new("low", 1, "l l l l l l l l l l");
    let high = Recorder::new("high", 5, "h h h h h h h h h h");
    let m = Memory::builder(Scope::session("s").unwrap(), history.clone(), states)
        .token_limit(100)
        .chat_history_token_ratio(1.0)
        .token_counter(words())
        .block(never)
        .block(low)
        .block(high)
        .build()
        .unwrap();
    let sections = |out: &[ChatMessage]| -> Vec<&'static str> {
        let text = out[0].text();
        ["core", "low", "high"]
            .into_iter()
            .filter(|n| text.contains(&format!("<{n}>")))
            .collect()
    };
    m.put_messages(&[msg(Role::User, 20, "u0"), msg(Role::Assistant, 20, "a0")])
        .await
        .unwrap();
    assert_eq!(
        sections(&m.get(&[]).await.unwrap()),
        ["core", "low", "high"],
        "40 + 40 fits"
    );

    m.put(msg(Role::User, 25, "u1")).await.unwrap();
    assert_eq!(
        sections(&m.get(&[]).await.unwrap()),
        ["core", "low"],
        "65 + 40: priority 5 goes first"
    );

    m.put(msg(Role::Assistant, 20, "a1")).await.unwrap();
    let out = m.get(&[]).await.unwrap();
    assert_eq!(
        sections(&out),
        ["core"],
        "85 + 27: priority 1 goes next, priority 0 never"
    );
    assert_eq!(
        out.len(),
        5,
        "the messages all still fit beside the core block"
    );
}

#[tokio::test]
async fn priority_zero_blocks_stay_and_old_messages_go_instead() {
    let (history, states) = stores();
    let core = Arc::new(StaticMemoryBlock::new("core", "c ".repeat(60)).unwrap());
    let m = memory(history.clone(), states, vec![core]);
    m.put_messages(&[
        msg(Role::User, 20, "u0"),
        msg(Role::Assistant, 20, "a0"),
        msg(Role::User, 10, "u1"),
    ])
    .await
    .unwrap();
    let out = m.get(&[]).await.unwrap();
    let texts: Vec<String> = out
        .iter()
        .map(|m| m.text().split(' ').next().unwrap_or("").to_owned())
        .collect();
    assert!(out[0].text().contains("<core>"));
    assert_eq!(
        &texts[1..],
        ["a0", "u1"],
        "the oldest message was dropped to fit"
    );
    // Dropped from the view only: still stored and active.
    assert_eq!(history.count(m.scope()).await.unwrap().active, 3);
}

#[tokio::test]
async fn insert_into_the_latest_user_message() {
    let (history, states) = stores();
    let core = Arc::new(StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.").unwrap());
    let m = Memory::builder(Scope::session("s").unwrap(), history, states)
        .block(core)
        .insert_method(InsertMethod::User)
        .build()
        .unwrap();
    m.put_messages(&[
        ChatMessage::user("hi"),
        ChatMessage::assistant("hello"),
        ChatMessage::user("who am I?"),
    ])
    .await
    .unwrap();
    let out = m.get(&[]).await.unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(
        out[2].text(),
        "<memory>\n<core_info>\nThe user is Dana, an SRE.\n</core_info>\n</memory>\nwho am I?"
    );
}

#[tokio::test]
async fn the_llamaindex_sample_renders_byte_for_byte() {
    let (history, states) = stores();
    let core = Arc::new(StaticMemoryBlock::new("core_info", "The user is Dana, an SRE.").unwrap());
    let m = Memory::builder(Scope::session("demo-session").unwrap(), history, states)
        .block(core)
        .build()
        .unwrap();
    m.put_messages(&[
        ChatMessage::user("Thanks. Please summarise the incident in one line."),
        ChatMessage::assistant(
            "Billing latency spike from a slow query; mitigated by adding an index.",
        ),
    ])
    .await
    .unwrap();
    let out = m.get(&[]).await.unwrap();
    assert_eq!(out[0].role, Role::System);
    assert_eq!(
        out[0].text(),
        "<memory>\n<core_info>\nThe user is Dana, an SRE.\n</core_info>\n</memory>"
    );
    assert_eq!(out.len(), 3);
}

#[tokio::test]
async fn get_with_a_stale_count_never_starts_with_an_orphan_tool_result() {
    // Ten tool turns, large up to seq 31 (turn 7's tool result), small after.
    let mut all = Vec::new();
    for t in 0..10 {
        let big = t < 7;
        all.push(msg(
            Role::User,
            if big || t == 7 { 20 } else { 5 },
            &format!("u{t}"),
        ));
        all.push(ChatMessage::tool_call(format!("c{t}"), "lookup", "{}"));
        let result = if big {
            format!("r{t} w w w w w w")
        } else {
            format!("r{t}")
        };
        all.push(ChatMessage::tool_result(format!("c{t}"), result));
        all.push(msg(
            Role::Assistant,
            if big { 30 } else { 5 },
            &format!("a{t}"),
        ));
    }
    all.push(msg(Role::User, 5, "last"));
    all.push(msg(Role::Assistant, 5, "tail"));
    assert_eq!(all.len(), 42);
    // Token sums as the store counts them.
    use memory_core::MessageId;
    let scratch = InMemoryHistoryStore::with_token_counter(words());
    let scope = Scope::session("s").unwrap();
    scratch.append(&scope, &all).await.unwrap();
    let stored = scratch.read(&scope, Window::All).await.unwrap();
    let sum =
        |r: std::ops::Range<usize>| -> u64 { stored[r].iter().map(|m| u64::from(m.tokens)).sum() };
    // The limit fits the newest 32 messages of 42 exactly (from seq 11, a tool result), and is
    // below the 30 messages counted before the append.
    let limit = sum(10..42);
    assert!(limit < sum(0..30), "{limit}");
    assert_eq!(stored[10].message.role, Role::Tool);

    let (inner, states) = stores();
    inner.append(&scope, &all[..30]).await.unwrap();
    let history = ReadLog::new(inner);
    *history.before_last.lock().unwrap() = Some(all[30..].to_vec());
    let m = Memory::builder(scope, history.clone(), states)
        .token_limit(limit)
        .token_counter(words())
        .build()
        .unwrap();
    let got = m.get(&[]).await.unwrap();
    // A view of the thread after the append (not necessarily the one a read of the whole
    // window gives: what fits was measured before the append), starting with a whole group.
    assert_eq!(got[0].role, Role::User, "{got:?}");
    let ids: Vec<&MessageId> = stored.iter().map(|m| &m.message.id).collect();
    let got_ids: Vec<&MessageId> = got.iter().map(|m| &m.id).collect();
    assert!(ids.ends_with(&got_ids), "a suffix of the thread");
    let tokens: u64 = stored[stored.len() - got.len()..]
        .iter()
        .map(|m| u64::from(m.tokens))
        .sum();
    assert!(tokens <= limit, "{tokens} > {limit}");
}

/// The messages `get` reads beyond the window for the blocks' retrieval context (the private
/// `RETRIEVAL_CONTEXT_MESSAGES` of `memory.rs`).
const RETRIEVAL_CONTEXT_MESSAGES: usize = 32;

/// Over the limit, `get` reads only what can fit (plus the retrieval context), never the whole
/// thread; that it returns what the whole window gives is checked in `src/memory/tests.rs`.
#[tokio::test]
async fn get_over_the_limit_reads_only_what_can_fit() {
    for last_user in [6, 40, 400] {
        let (inner, states) = stores();
        let history = ReadLog::new(inner);
        let core = Arc::new(StaticMemoryBlock::new("core", "c c c c c").unwrap());
        history
            .append(&Scope::session("s").unwrap(), &tool_turns(60, last_user))
            .await
            .unwrap();
        for limit in (20..240).step_by(7) {
            let m = Memory::builder(
                Scope::session("s").unwrap(),
                history.clone(),
                states.clone(),
            )
            .token_limit(limit)
            .token_counter(words())
            .block(core.clone())
            .build()
            .unwrap();
            history.take();
            m.get(&[]).await.unwrap();
            let reads = history.take();
            assert!(
                reads
                    .iter()
                    .all(|w| !matches!(w, Window::All | Window::Everything)),
                "limit {limit}: a thread over the limit is not read whole: {reads:?}"
            );
            let read: usize = reads
                .iter()
                .map(|w| match w {
                    Window::Last(n) => *n,
                    _ => 0,
                })
                .max()
                .unwrap_or(0);
            assert!(
                read <= 4 * (limit as usize / 4 + 8) + RETRIEVAL_CONTEXT_MESSAGES * 2,
                "limit {limit}: read {read} messages of 241"
            );
        }
    }
}
