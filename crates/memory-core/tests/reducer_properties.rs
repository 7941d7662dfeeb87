//! Properties of the message grouping and of the reducers that cut along it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Test helpers fail loudly.

use std::collections::HashMap;

use memory_core::{
    ChatMessage, ChatReducer, MessageCountReducer, Reduction, Role, Segmentation, StoredMessage,
    TokenBudgetReducer,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Event {
    User,
    Assistant,
    ToolRound(usize),
    Orphan,
    System,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => Just(Event::User),
        4 => Just(Event::Assistant),
        2 => (1usize..=3).prop_map(Event::ToolRound),
        1 => Just(Event::Orphan),
        1 => Just(Event::System),
    ]
}

fn history() -> impl Strategy<Value = Vec<StoredMessage>> {
    (
        any::<bool>(),
        prop::collection::vec(event(), 0..40),
        prop::collection::vec(1u32..200, 200),
    )
        .prop_map(|(leading_system, events, tokens)| {
            let mut msgs = Vec::new();
            if leading_system {
                msgs.push(ChatMessage::system("You are helpful."));
            }
            let mut call = 0;
            for e in events {
                match e {
                    Event::User => msgs.push(ChatMessage::user("question")),
                    Event::Assistant => msgs.push(ChatMessage::assistant("answer")),
                    Event::System => msgs.push(ChatMessage::system("note")),
                    Event::Orphan => msgs.push(ChatMessage::tool_result("nobody", "late")),
                    Event::ToolRound(k) => {
                        let mut m = ChatMessage::tool_call(format!("c{call}"), "f", "{}");
                        for extra in 1..k {
                            m.parts.push(memory_core::Part::ToolCall {
                                id: format!("c{call}-{extra}"),
                                name: "g".into(),
                                arguments: "{}".into(),
                            });
                        }
                        msgs.push(m);
                        msgs.push(ChatMessage::tool_result(format!("c{call}"), "r"));
                        for extra in 1..k {
                            msgs.push(ChatMessage::tool_result(format!("c{call}-{extra}"), "r"));
                        }
                        call += 1;
                    }
                }
            }
            msgs.into_iter()
                .enumerate()
                .map(|(i, message)| StoredMessage {
                    seq: i as u64 + 1,
                    tokens: tokens[i % tokens.len()],
                    archived: false,
                    message,
                })
                .collect()
        })
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// Checks every property a reduction must have; `cost` is the reducer's measure, `pinned_counts`
/// whether the pinned message is charged against the limit.
fn check(
    msgs: &[StoredMessage],
    r: &Reduction,
    limit: u64,
    cost: impl Fn(&StoredMessage) -> u64,
    pinned_counts: bool,
) {
    let seg = Segmentation::of(msgs);
    let kept: Vec<usize> = (0..msgs.len()).filter(|i| !r.is_dropped(*i)).collect();
    // The count and budget reducers drop one run right after the pinned message.
    let start = r.pinned.map_or(0, |p| p + 1);
    assert!(
        r.dropped.len() <= 1,
        "more than one dropped run: {:?}",
        r.dropped
    );
    assert!(r.dropped.iter().all(|d| d.start == start && !d.is_empty()));
    assert!(r.summary.is_none());
    let first_kept = r.dropped.first().map_or(start, |d| d.end);

    // The leading system message is pinned and kept.
    if msgs
        .first()
        .is_some_and(|m| matches!(m.message.role, Role::System | Role::Developer))
    {
        assert_eq!(r.pinned, Some(0));
    } else {
        assert_eq!(r.pinned, None);
    }

    // The cut is on a group boundary.
    assert!(
        first_kept == msgs.len()
            || seg.groups.iter().any(|g| g.start == first_kept)
            || first_kept == r.pinned.map_or(0, |p| p + 1),
        "cut at {} is not a group boundary: {:?}",
        first_kept,
        seg.groups
    );

    // A kept tool result keeps its call, and a kept call keeps its results.
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        for id in m.message.tool_call_ids() {
            call_at.insert(id, i);
        }
        for id in m.message.tool_result_ids() {
            if let Some(&c) = call_at.get(id) {
                assert_eq!(
                    kept.contains(&i),
                    kept.contains(&c),
                    "call {c} and its result {i} are split"
                );
            }
        }
    }

    // The last user turn is kept.
    if let Some(u) = msgs.iter().rposition(|m| m.message.role == Role::User)
        && (u > 0 || r.pinned.is_none())
    {
        assert!((u..msgs.len()).all(|i| kept.contains(&i)), "last turn cut");
    }

    // The kept cost fits unless the protected turn alone does not; and one more group would not.
    let pinned_cost = if pinned_counts {
        r.pinned.map_or(0, |p| cost(&msgs[p]))
    } else {
        0
    };
    let suffix_cost: u64 = msgs[first_kept.min(msgs.len())..].iter().map(&cost).sum();
    let protected_start = seg.group_start(seg.protected_from, msgs.len());
    if pinned_cost + suffix_cost > limit {
        assert!(
            first_kept >= protected_start || first_kept == r.pinned.map_or(0, |p| p + 1),
            "over the limit but dropped less than it could"
        );
        assert!(first_kept <= protected_start, "dropped into the last turn");
    }
    if !r.is_noop() {
        let prev = seg
            .groups
            .iter()
            .rfind(|g| g.end == first_kept)
            .expect("a dropped group precedes the cut");
        let prev_cost: u64 = msgs[prev.clone()].iter().map(&cost).sum();
        assert!(
            pinned_cost + suffix_cost + prev_cost > limit,
            "the group before the cut would still have fit"
        );
    }
    let total: u64 = msgs
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != r.pinned || pinned_counts)
        .map(|(_, m)| cost(m))
        .sum();
    if total <= limit {
        assert!(r.is_noop(), "everything fits but something was dropped");
    }

    // Applying the reduction keeps order.
    let applied = r.apply(msgs);
    assert!(applied.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(applied.len(), kept.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn groups_cover_everything_once(msgs in history()) {
        let seg = Segmentation::of(&msgs);
        let mut covered: Vec<usize> = seg.pinned.into_iter().collect();
        for g in &seg.groups {
            prop_assert!(!g.is_empty());
            covered.extend(g.clone());
        }
        prop_assert_eq!(covered, (0..msgs.len()).collect::<Vec<_>>());
    }

    #[test]
    fn message_count_reducer_properties(msgs in history(), target in 0u64..30) {
        let r = block_on(MessageCountReducer::new(target as usize).reduce(&msgs)).unwrap();
        check(&msgs, &r, target, |_| 1, false);
    }

    #[test]
    fn token_budget_reducer_properties(msgs in history(), budget in 0u64..3000) {
        let r = block_on(TokenBudgetReducer::new(budget).reduce(&msgs)).unwrap();
        check(&msgs, &r, budget, |m| u64::from(m.tokens), true);
    }
}
