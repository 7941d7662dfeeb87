//! The checks of [`read`](memory_core::HistoryStore::read): every
//! [`Window`](memory_core::Window), an unknown thread, large windows and messages read back
//! exactly as appended.

use std::collections::BTreeSet;

use memory_core::{ChatMessage, HistoryStore, MAX_READ_PAGE, StoredMessage, ThreadCount, Window};

use super::support::{append_new, archive_if_capable, count, is_listed, read};
use crate::fixtures::{
    ExpectOk, chat_messages, numbered_messages, random_scope, scope_in, seqs, text_of_bytes, texts,
    tricky_messages,
};

/// Contract: an unknown thread reads as empty (every window), counts zero, is not listed, and
/// archiving or clearing it changes nothing.
pub async fn unknown_thread_reads_empty(store: &dyn HistoryStore) {
    let sibling = random_scope();
    append_new(store, &sibling, &numbered_messages("sibling", 2)).await;
    let scope = scope_in(sibling.tenant(), "never-written");
    for window in [
        Window::All,
        Window::Last(10),
        Window::After(0),
        Window::TokenBudget(1_000_000),
        Window::Everything,
    ] {
        assert!(
            read(store, &scope, window).await.is_empty(),
            "a thread never written reads empty with {window:?}"
        );
    }
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "a thread never written counts zero"
    );
    if let Some(moved) = archive_if_capable(store, &scope, 1..=10, "archive unknown thread").await {
        assert_eq!(moved, 0, "archiving a thread never written moves nothing");
    }
    assert_eq!(
        store.clear(&scope).await.expect_ok("clear unknown thread"),
        0,
        "clearing a thread never written deletes nothing"
    );
    assert!(
        !is_listed(store, &scope).await,
        "a thread never written is not listed"
    );
    assert_eq!(
        count(store, &sibling).await.active,
        2,
        "calls on an unknown thread leave its sibling alone"
    );
}

/// Contract: `Window::All` returns every active message in sequence order, and no archived one.
pub async fn window_all_returns_active_messages(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 5);
    append_new(store, &scope, &messages).await;
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        messages,
        "All returns every message of a thread with nothing archived"
    );
    if archive_if_capable(store, &scope, 2..=3, "archive 2..=3")
        .await
        .is_none()
    {
        return;
    }
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        vec![1, 4, 5],
        "All skips archived messages, keeps order"
    );
    assert_eq!(
        texts(&all),
        vec!["m-1", "m-4", "m-5"],
        "All returns the right messages"
    );
}

/// Contract: `Window::Last(n)` returns the last `n` active messages in sequence order.
pub async fn window_last_returns_newest_active(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 5)).await;
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(2)).await),
        vec![4, 5],
        "Last(2) is the two newest, oldest first"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(1)).await),
        vec![5],
        "Last(1) is the newest"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(5)).await),
        vec![1, 2, 3, 4, 5],
        "Last(len) is everything"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::Last(50)).await),
        vec![1, 2, 3, 4, 5],
        "Last(more than len) is everything"
    );
    assert!(
        read(store, &scope, Window::Last(0)).await.is_empty(),
        "Last(0) is empty"
    );
    if archive_if_capable(store, &scope, 4..=4, "archive 4")
        .await
        .is_none()
    {
        return;
    }
    let last = read(store, &scope, Window::Last(2)).await;
    assert_eq!(
        seqs(&last),
        vec![3, 5],
        "Last(2) counts only active messages"
    );
    assert_eq!(texts(&last), vec!["m-3", "m-5"], "Last(2) content");
}

/// Contract: `Window::After(seq)` returns the active messages with a greater sequence number.
pub async fn window_after_returns_later_active(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 5)).await;
    assert_eq!(
        seqs(&read(store, &scope, Window::After(0)).await),
        vec![1, 2, 3, 4, 5],
        "After(0) is everything"
    );
    assert_eq!(
        seqs(&read(store, &scope, Window::After(2)).await),
        vec![3, 4, 5],
        "After(2) starts at 3"
    );
    assert!(
        read(store, &scope, Window::After(5)).await.is_empty(),
        "After(last seq) is empty"
    );
    assert!(
        read(store, &scope, Window::After(u64::MAX))
            .await
            .is_empty(),
        "After(u64::MAX) is empty"
    );
    if archive_if_capable(store, &scope, 3..=3, "archive 3")
        .await
        .is_none()
    {
        return;
    }
    let after = read(store, &scope, Window::After(1)).await;
    assert_eq!(seqs(&after), vec![2, 4, 5], "After skips archived messages");
    assert_eq!(texts(&after), vec!["m-2", "m-4", "m-5"], "After(1) content");
}

/// Contract: `Window::TokenBudget(b)` returns the newest active messages whose *stored* token
/// counts add up to at most `b`; the window is contiguous and ends before the first message
/// (from the newest) that does not fit, even when older, smaller messages would.
pub async fn window_token_budget_is_contiguous_from_newest(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = vec![
        ChatMessage::user("one"),
        ChatMessage::assistant("two"),
        ChatMessage::user(text_of_bytes(2_000)),
        ChatMessage::assistant("four"),
        ChatMessage::user("five is the newest message and a little longer than four"),
    ];
    append_new(store, &scope, &messages).await;
    let stored = read(store, &scope, Window::Everything).await;
    let t: Vec<u64> = stored.iter().map(|m| u64::from(m.tokens)).collect();
    assert!(
        t[2] > t[0] + t[1] + 10,
        "fixture: the big message ({}) must outweigh the two oldest ({} + {})",
        t[2],
        t[0],
        t[1]
    );
    assert!(
        t[3] < t[4],
        "fixture: message 4 ({}) must be smaller than 5 ({})",
        t[3],
        t[4]
    );
    let budget = |b: u64| Window::TokenBudget(b);
    let cases: Vec<(u64, Vec<u64>, &str)> = vec![
        (0, vec![], "a zero budget fits nothing"),
        (
            t[4] - 1,
            vec![],
            "when the newest does not fit, nothing is returned (not an older, smaller one)",
        ),
        (t[4], vec![5], "a budget of exactly the newest"),
        (t[4] + t[3], vec![4, 5], "a budget of the two newest"),
        (
            t[4] + t[3] + t[2] - 1,
            vec![4, 5],
            "the window stops at the first message that does not fit, though 1 and 2 would",
        ),
        (
            t[4] + t[3] + t[2],
            vec![3, 4, 5],
            "a budget of the three newest",
        ),
        (t.iter().sum(), vec![1, 2, 3, 4, 5], "a budget of all"),
        (u64::MAX, vec![1, 2, 3, 4, 5], "an unlimited budget"),
    ];
    for (b, expected, why) in cases {
        assert_eq!(
            seqs(&read(store, &scope, budget(b)).await),
            expected,
            "TokenBudget({b}) with stored counts {t:?}: {why}"
        );
    }
    if archive_if_capable(store, &scope, 4..=4, "archive 4")
        .await
        .is_none()
    {
        return;
    }
    assert_eq!(
        seqs(&read(store, &scope, budget(t[4] + t[2])).await),
        vec![3, 5],
        "archived messages are skipped and not counted against the budget"
    );
}

/// Contract: `Window::Everything` returns every message, active and archived, in sequence
/// order, with the `archived` flag set on archived ones (on a store without the archive
/// capability: every message, none flagged).
pub async fn window_everything_includes_archived(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = numbered_messages("m", 4);
    append_new(store, &scope, &messages).await;
    let archived = archive_if_capable(store, &scope, 1..=2, "archive 1..=2")
        .await
        .is_some();
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        seqs(&everything),
        vec![1, 2, 3, 4],
        "Everything returns every seq in order"
    );
    assert_eq!(
        everything.iter().map(|m| m.archived).collect::<Vec<_>>(),
        vec![archived, archived, false, false],
        "Everything flags archived messages"
    );
    assert_eq!(
        chat_messages(&everything),
        messages,
        "archived messages keep their content"
    );
}

/// Contract: a window larger than [`MAX_READ_PAGE`] is returned whole, in sequence order, each
/// message once, exactly as a short one: a store that reads it in pages (Redis) joins the pages
/// without a gap or a repeat, also where archived messages sit across a page boundary, for
/// every window (`All`, `After`, `Last`, `TokenBudget`, `Everything`).
pub async fn large_windows_are_read_whole(store: &dyn HistoryStore) {
    let scope = random_scope();
    let n = 2 * MAX_READ_PAGE + 345;
    let messages = numbered_messages("big", n);
    append_new(store, &scope, &messages).await;
    let page = MAX_READ_PAGE as u64;
    // Archived runs at the start, across the first page boundary and alone near the end.
    let mut archived: BTreeSet<u64> = BTreeSet::new();
    for range in [1..=10, page - 5..=page + 5, 2 * page + 7..=2 * page + 7] {
        if archive_if_capable(store, &scope, range.clone(), "archive a run")
            .await
            .is_some()
        {
            archived.extend(range);
        }
    }
    let everything = read(store, &scope, Window::Everything).await;
    assert_eq!(
        seqs(&everything),
        (1..=n as u64).collect::<Vec<_>>(),
        "Everything of {n} messages returns every seq once, in order"
    );
    assert_eq!(
        chat_messages(&everything),
        messages,
        "Everything of {n} messages returns them exactly as appended"
    );
    assert!(
        everything
            .iter()
            .all(|m| m.archived == archived.contains(&m.seq)),
        "Everything of {n} messages flags exactly the archived ones"
    );
    let active: Vec<StoredMessage> = everything.into_iter().filter(|m| !m.archived).collect();
    let tail = |k: usize| active[active.len().saturating_sub(k)..].to_vec();
    assert_eq!(
        read(store, &scope, Window::All).await,
        active,
        "All of {} active messages returns each once, in order",
        active.len()
    );
    let after = page / 2;
    assert_eq!(
        read(store, &scope, Window::After(after)).await,
        active
            .iter()
            .filter(|m| m.seq > after)
            .cloned()
            .collect::<Vec<_>>(),
        "After({after}) returns every later active message"
    );
    for k in [
        MAX_READ_PAGE,
        MAX_READ_PAGE + 1,
        MAX_READ_PAGE + 500,
        usize::MAX,
    ] {
        assert_eq!(
            read(store, &scope, Window::Last(k)).await,
            tail(k),
            "Last({k}) returns the newest {k} active messages, in order"
        );
    }
    assert_eq!(
        read(store, &scope, Window::TokenBudget(u64::MAX)).await,
        active,
        "an unlimited TokenBudget returns every active message"
    );
    let k = MAX_READ_PAGE + 200;
    let budget: u64 = tail(k).iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(
        seqs(&read(store, &scope, Window::TokenBudget(budget)).await),
        seqs(&tail(k)),
        "TokenBudget({budget}), the stored counts of the newest {k} active messages, returns \
         exactly those"
    );
}

/// Contract: a 1 MiB message (under [`MAX_MESSAGE_BYTES`](memory_core::MAX_MESSAGE_BYTES))
/// round-trips exactly, and has a real token count.
pub async fn large_message_round_trips(store: &dyn HistoryStore) {
    let scope = random_scope();
    let big = ChatMessage::user(text_of_bytes(1 << 20));
    let small = ChatMessage::assistant("after the big one");
    append_new(store, &scope, &[big.clone(), small.clone()]).await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), 2, "both messages are stored");
    assert!(
        *all[0].message == big,
        "a 1 MiB message reads back exactly (got {} bytes of text)",
        all[0].message.text().len()
    );
    assert_eq!(*all[1].message, small, "the message after it is intact");
    assert!(
        all[0].tokens > 1000,
        "a 1 MiB message has a real token count"
    );
}

/// Contract: messages are stored exactly as given: CJK, emoji, right-to-left text, combining
/// marks, NUL and control characters, in text, author names, metadata and tool calls, round-trip
/// exactly (no normalization, no truncation at NUL).
pub async fn non_ascii_messages_round_trip(store: &dyn HistoryStore) {
    let scope = random_scope();
    let messages = tricky_messages();
    append_new(store, &scope, &messages).await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), messages.len(), "every tricky message is stored");
    for (stored, original) in all.iter().zip(&messages) {
        assert_eq!(
            &*stored.message,
            original,
            "message {:?} must round-trip exactly",
            original.metadata.get("case")
        );
    }
}
