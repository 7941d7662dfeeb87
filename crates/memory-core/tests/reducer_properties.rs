//! Properties of the message grouping and of the reducers that cut along it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::HashMap;

use memory_core::{
    ChatMessage, ChatModel, ChatReducer, ChatRequest, ChatResponse, MessageCountReducer, Reduction,
    Role, SUMMARY_METADATA_KEY, Segmentation, StoredMessage, SummarizingReducer,
    TokenBudgetReducer, is_summary,
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
                    message: message.into(),
                })
                .collect()
        })
}

/// `history()` with some assistant answers turned into summaries of earlier reductions.
///
/// As in a stored thread, a summary is never directly followed by a tool result: an agent
/// appends it at the end of the thread, and the next batch starts with the run's input. (A
/// summary followed by an orphan tool result forms one group with it, and folding the summary
/// into a new one would split that group: the reducer drops earlier summaries one message at a
/// time.)
fn history_with_summaries() -> impl Strategy<Value = Vec<StoredMessage>> {
    (
        history(),
        prop::collection::vec(prop::bool::weighted(0.3), 64),
    )
        .prop_map(|(mut msgs, marks)| {
            let followed_by_tool: Vec<bool> = (0..msgs.len())
                .map(|i| {
                    msgs.get(i + 1)
                        .is_some_and(|m| m.message.role == Role::Tool)
                })
                .collect();
            for (i, m) in msgs.iter_mut().enumerate() {
                if m.message.role == Role::Assistant
                    && !m.message.has_tool_calls()
                    && !followed_by_tool[i]
                    && marks[i % marks.len()]
                {
                    m.message = ChatMessage::assistant("Summary of the earlier conversation: old")
                        .with_metadata(
                            SUMMARY_METADATA_KEY,
                            serde_json::json!({"first_seq": 0, "last_seq": 0}),
                        )
                        .into();
                }
            }
            msgs
        })
}

/// A deterministic summarizer: answers with how many messages it was asked to summarize (the
/// `<message` tags of the transcript it is sent).
#[derive(Debug)]
struct CountingSummarizer;

#[memory_core::async_trait]
impl ChatModel for CountingSummarizer {
    async fn complete(&self, request: &ChatRequest) -> memory_core::Result<ChatResponse> {
        let transcript = request
            .messages
            .last()
            .map(ChatMessage::text)
            .unwrap_or_default();
        let n = transcript.matches("<message").count();
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(format!("{n} messages summarized"))],
            ..Default::default()
        })
    }
}

/// A kept tool result keeps its call, and a kept call keeps its results: `kept` holds the
/// indexes into `msgs` a reduction keeps.
fn assert_calls_kept_with_results(msgs: &[StoredMessage], kept: &[usize]) {
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
}

/// Every property a summarizing reduction must have (keep `target`, summarize past
/// `target + threshold` live messages).
fn check_summarizing(msgs: &[StoredMessage], r: &Reduction, target: usize, threshold: usize) {
    let seg = Segmentation::of(msgs);
    let live = |i: usize| Some(i) != seg.pinned && !is_summary(&msgs[i].message);
    let live_count = (0..msgs.len()).filter(|&i| live(i)).count();
    let kept: Vec<usize> = (0..msgs.len()).filter(|i| !r.is_dropped(*i)).collect();

    if live_count <= target + threshold {
        assert!(r.is_noop(), "within target + threshold but reduced");
    }
    if r.is_noop() {
        return;
    }

    // The leading system message is pinned and kept.
    if msgs
        .first()
        .is_some_and(|m| matches!(m.message.role, Role::System | Role::Developer))
    {
        assert_eq!(r.pinned, Some(0));
        assert!(!r.is_dropped(0), "the pinned message is dropped");
    } else {
        assert_eq!(r.pinned, None);
    }

    // Dropped ranges: sorted, disjoint, in bounds, non-empty.
    assert!(
        r.dropped
            .iter()
            .all(|d| !d.is_empty() && d.end <= msgs.len())
    );
    assert!(r.dropped.windows(2).all(|w| w[0].end <= w[1].start));

    // A summary is written exactly when something is dropped, marked, standing for exactly the
    // dropped messages.
    assert_eq!(r.summary.is_some(), r.dropped_count() > 0);
    if let Some(summary) = &r.summary {
        assert!(is_summary(summary), "the summary is not marked");
        assert_eq!(summary.role, Role::Assistant);
        let dropped: Vec<&StoredMessage> = (0..msgs.len())
            .filter(|i| r.is_dropped(*i))
            .map(|i| &msgs[i])
            .collect();
        assert_eq!(
            summary.metadata[SUMMARY_METADATA_KEY],
            serde_json::json!({
                "first_seq": dropped[0].seq,
                "last_seq": dropped[dropped.len() - 1].seq,
            })
        );
        assert!(
            summary
                .text()
                .ends_with(&format!("{} messages summarized", dropped.len())),
            "the model was sent exactly the dropped messages: {}",
            summary.text()
        );
        // Earlier summaries are folded into the new one: none is kept.
        assert!(
            kept.iter().all(|&i| !is_summary(&msgs[i].message)),
            "an earlier summary survives a new one"
        );
    }

    // Apart from earlier summaries, what goes is one run of whole groups after the pinned
    // message, cut on a group boundary.
    let start = r.pinned.map_or(0, |p| p + 1);
    // Right after the last dropped live message and the dropped summaries that follow it.
    let mut first_kept = (start..msgs.len())
        .rfind(|&i| r.is_dropped(i) && live(i))
        .map_or(start, |i| i + 1);
    while first_kept < msgs.len() && r.is_dropped(first_kept) {
        first_kept += 1;
    }
    assert!(
        (start..first_kept).all(|i| r.is_dropped(i)),
        "a message before the cut is kept"
    );
    assert!(
        (first_kept..msgs.len()).all(|i| !r.is_dropped(i) || is_summary(&msgs[i].message)),
        "a live message after the cut is dropped"
    );
    assert!(
        first_kept == msgs.len()
            || first_kept == start
            || seg.groups.iter().any(|g| g.start == first_kept),
        "cut at {first_kept} is not a group boundary: {:?}",
        seg.groups
    );

    assert_calls_kept_with_results(msgs, &kept);

    // The last user turn is kept.
    if let Some(u) = msgs.iter().rposition(|m| m.message.role == Role::User)
        && (u > 0 || r.pinned.is_none())
    {
        assert!(
            (u..msgs.len()).all(|i| kept.contains(&i) || is_summary(&msgs[i].message)),
            "last turn cut"
        );
    }

    // At most `target` live messages are kept, unless the last turn alone is more.
    let kept_live = kept.iter().filter(|&&i| live(i)).count();
    let protected_start = seg.group_start(seg.protected_from, msgs.len());
    if kept_live > target {
        assert!(
            first_kept >= protected_start || first_kept == start,
            "kept {kept_live} live messages over the target {target} though it could drop more"
        );
    }

    // The view: pinned first, then the summary, then the kept messages in order.
    let view = r.view(msgs);
    let mut at = 0;
    if let Some(p) = r.pinned {
        assert_eq!(view[0], *msgs[p].message);
        at = 1;
    }
    if let Some(summary) = &r.summary {
        assert_eq!(
            &view[at], summary,
            "the summary comes right after the pinned message"
        );
    }
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

    assert_calls_kept_with_results(msgs, &kept);

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

    #[test]
    fn summarizing_reducer_properties(
        msgs in history_with_summaries(),
        target in 0usize..20,
        threshold in 0usize..10,
    ) {
        let reducer = SummarizingReducer::new(std::sync::Arc::new(CountingSummarizer), target, threshold);
        let r = block_on(reducer.reduce(&msgs)).unwrap();
        check_summarizing(&msgs, &r, target, threshold);
    }
}
