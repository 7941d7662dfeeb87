//! The checks of [`append`](memory_core::HistoryStore::append): sequence numbers, idempotent
//! retries and deduplication, concurrent writers, the size limits, and the token count stored
//! with each message.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memory_core::{
    AppendOutcome, ChatMessage, ErrorKind, HistoryStore, MAX_BATCH_MESSAGES, MAX_MESSAGE_BYTES,
    Media, Part, Role, ThreadCount, Window, default_token_counter,
};

use super::support::{
    append_checked, append_new, archive_if_capable, count, is_listed, join, read,
};
use crate::fixtures::{
    ExpectOk, chat_messages, expect_error_kind, message_with_id, numbered_messages, random_scope,
    seqs, text_of_bytes,
};

/// Contract: the store assigns per-thread sequence numbers, 1 for a thread's first message, then
/// consecutive, in the order given; `read` returns them in sequence order.
pub async fn append_assigns_consecutive_seqs(store: &dyn HistoryStore) {
    let scope = random_scope();
    let first = numbered_messages("a", 3);
    let out = store
        .append(&scope, &first)
        .await
        .expect_ok("append the first batch");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 3
        },
        "a thread's first batch of 3 gets seqs 1, 2, 3"
    );
    let second = numbered_messages("b", 2);
    assert_eq!(
        append_new(store, &scope, &second).await,
        vec![4, 5],
        "the next batch continues at 4"
    );
    let third = numbered_messages("c", 1);
    assert_eq!(
        append_new(store, &scope, &third).await,
        vec![6],
        "a batch of one continues at 6"
    );
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        (1..=6).collect::<Vec<_>>(),
        "read(All) returns seqs 1..=6 in order"
    );
    let expected: Vec<ChatMessage> = first.into_iter().chain(second).chain(third).collect();
    assert_eq!(
        chat_messages(&all),
        expected,
        "read(All) returns the messages exactly as appended, in the order given"
    );
    assert!(
        all.iter().all(|m| !m.archived),
        "new messages are not archived"
    );
}

/// Contract: an empty batch is a no-op (it creates no thread and assigns no seq).
pub async fn empty_batch_is_a_no_op(store: &dyn HistoryStore) {
    let scope = random_scope();
    let out = store
        .append(&scope, &[])
        .await
        .expect_ok("append an empty batch to a new thread");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![],
            inserted: 0
        },
        "an empty batch inserts nothing"
    );
    assert_eq!(
        count(store, &scope).await,
        ThreadCount::default(),
        "an empty batch leaves a new thread at zero"
    );
    assert!(
        !is_listed(store, &scope).await,
        "an empty batch does not create a listed thread"
    );
    append_new(store, &scope, &numbered_messages("m", 2)).await;
    let before = count(store, &scope).await;
    let out = store
        .append(&scope, &[])
        .await
        .expect_ok("append an empty batch to an existing thread");
    assert_eq!(out.inserted, 0, "an empty batch inserts nothing");
    assert!(out.seqs.is_empty(), "an empty batch returns no seqs");
    assert_eq!(
        count(store, &scope).await,
        before,
        "an empty batch changes no count"
    );
    assert_eq!(
        append_new(store, &scope, &numbered_messages("n", 1)).await,
        vec![3],
        "an empty batch consumes no sequence number"
    );
}

/// Contract: a retried append never duplicates: the same batch appended again inserts nothing
/// and returns the original seqs, even after other appends, and even when the retried message's
/// content differs (the first stored version stays).
///
/// Without `dedupes_ids`: a retry of the thread's last batch still inserts nothing and returns
/// the original seqs; the later retry and the changed content may be stored again, and each
/// append reports truly what it stored.
pub async fn retried_append_is_idempotent(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        retried_append_without_id_dedupe(store).await;
        return;
    }
    let scope = random_scope();
    let batch = numbered_messages("m", 3);
    append_new(store, &scope, &batch).await;
    let again = store
        .append(&scope, &batch)
        .await
        .expect_ok("append the same batch again");
    assert_eq!(
        again,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 0
        },
        "a retried batch inserts nothing and returns the original seqs"
    );
    append_new(store, &scope, &numbered_messages("n", 2)).await;
    let later = store
        .append(&scope, &batch)
        .await
        .expect_ok("retry after other appends");
    assert_eq!(
        later.seqs,
        vec![1, 2, 3],
        "a retry after other appends returns the original seqs"
    );
    assert_eq!(
        later.inserted, 0,
        "a retry after other appends inserts nothing"
    );
    let changed = batch[0].clone();
    let changed = ChatMessage {
        parts: vec![Part::text("changed text under the same id")],
        ..changed
    };
    let out = store
        .append(&scope, &[changed])
        .await
        .expect_ok("append a known id with new content");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1],
            inserted: 0
        },
        "a known id with new content is not stored again"
    );
    let all = read(store, &scope, Window::All).await;
    assert_eq!(all.len(), 5, "retries added no message");
    assert_eq!(
        *all[0].message, batch[0],
        "the first stored version of a message stays"
    );
    assert_eq!(
        count(store, &scope).await.last_seq,
        5,
        "retries consumed no seq"
    );
}

/// [`retried_append_is_idempotent`] on a store without `dedupes_ids`.
async fn retried_append_without_id_dedupe(store: &dyn HistoryStore) {
    let scope = random_scope();
    let batch = numbered_messages("m", 3);
    append_new(store, &scope, &batch).await;
    let again = append_checked(store, &scope, &batch, "append the same batch again").await;
    assert_eq!(
        again,
        AppendOutcome {
            seqs: vec![1, 2, 3],
            inserted: 0
        },
        "a retried batch inserts nothing and returns the original seqs (it is the thread's \
         tail, which even a store without dedupes_ids skips)"
    );
    let others = numbered_messages("n", 2);
    append_new(store, &scope, &others).await;
    append_checked(store, &scope, &batch, "retry after other appends").await;
    let changed = ChatMessage {
        parts: vec![Part::text("changed text under the same id")],
        ..batch[0].clone()
    };
    append_checked(
        store,
        &scope,
        &[changed],
        "append a known id with new content",
    )
    .await;
    let all = read(store, &scope, Window::All).await;
    assert_eq!(
        chat_messages(&all[..5]),
        [&batch[..], &others[..]].concat(),
        "the first stored versions of the messages stay, in order"
    );
}

/// Contract: a batch overlapping what the thread holds inserts only the new messages; the known
/// ones keep their seqs and the new ones continue the sequence in the order given.
///
/// Without `dedupes_ids`: a batch that starts with the thread's last message skips it and
/// appends the rest; the batch that repeats older messages reports truly what it stored.
pub async fn overlapping_batches_insert_only_new_messages(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        let scope = random_scope();
        let m = numbered_messages("m", 5);
        append_new(store, &scope, &m[0..2]).await;
        let out = append_checked(store, &scope, &m[1..4], "append [b, c, d] over [a, b]").await;
        assert_eq!(
            out,
            AppendOutcome {
                seqs: vec![2, 3, 4],
                inserted: 2
            },
            "b, the thread's tail, keeps 2; c and d get 3 and 4"
        );
        append_checked(
            store,
            &scope,
            &[m[0].clone(), m[3].clone(), m[4].clone()],
            "append [a, d, e]",
        )
        .await;
        assert_eq!(
            chat_messages(&read(store, &scope, Window::All).await[..4]),
            m[..4],
            "the thread starts with a..d once each, in order"
        );
        return;
    }
    let scope = random_scope();
    let m = numbered_messages("m", 5);
    append_new(store, &scope, &m[0..2]).await;
    let out = store
        .append(&scope, &m[1..4])
        .await
        .expect_ok("append [b, c, d] over [a, b]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![2, 3, 4],
            inserted: 2
        },
        "b keeps 2; c and d get 3 and 4"
    );
    let out = store
        .append(&scope, &[m[0].clone(), m[3].clone(), m[4].clone()])
        .await
        .expect_ok("append [a, d, e]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 4, 5],
            inserted: 1
        },
        "a and d keep 1 and 4; e gets 5"
    );
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        m,
        "the thread holds a..e once each, in order"
    );
}

/// Contract: a message that repeats an earlier id of the same batch is not stored again; its
/// seq is that of the first occurrence, whose content is the one kept.
///
/// Without `dedupes_ids`: a repeated id may be stored again; each append reports truly what it
/// stored, and the first occurrence is stored with its content.
pub async fn duplicate_ids_within_a_batch_are_stored_once(store: &dyn HistoryStore) {
    if !store.capabilities().dedupes_ids {
        let scope = random_scope();
        let a = message_with_id("dup-a", "first a");
        let b = message_with_id("dup-b", "b");
        let a_again = message_with_id("dup-a", "second a");
        let out = append_checked(
            store,
            &scope,
            &[a.clone(), b.clone(), a_again],
            "append [a, b, a']",
        )
        .await;
        assert_eq!(
            out.seqs[..2],
            [1, 2],
            "a and b, new to an empty thread, get 1 and 2"
        );
        let c = message_with_id("dup-c", "c");
        append_checked(
            store,
            &scope,
            &[c.clone(), c, b.clone()],
            "append [c, c, b]",
        )
        .await;
        assert_eq!(
            chat_messages(&read(store, &scope, Window::All).await[..2]),
            vec![a, b],
            "a and b are stored first, a with its first content"
        );
        return;
    }
    let scope = random_scope();
    let a = message_with_id("dup-a", "first a");
    let b = message_with_id("dup-b", "b");
    let a_again = message_with_id("dup-a", "second a");
    let out = store
        .append(&scope, &[a.clone(), b.clone(), a_again])
        .await
        .expect_ok("append [a, b, a']");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![1, 2, 1],
            inserted: 2
        },
        "the repeated id gets the first occurrence's seq and is not counted as inserted"
    );
    let c = message_with_id("dup-c", "c");
    let out = store
        .append(&scope, &[c.clone(), c.clone(), b.clone()])
        .await
        .expect_ok("append [c, c, b]");
    assert_eq!(
        out,
        AppendOutcome {
            seqs: vec![3, 3, 2],
            inserted: 1
        },
        "[c, c, b]: c once at 3, b known at 2"
    );
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        vec![a, b, c],
        "each id stored once, with its first content"
    );
}

/// Contract: under concurrent writers to one thread, seqs have no gap or repeat and each batch
/// lands contiguously; concurrent readers always see a gap-free prefix, in one order.
///
/// Eight tasks (spawned with `tokio::spawn`, so they run in parallel on a multi-thread runtime)
/// each append 25 batches of two messages while two readers read the thread in a loop.
pub async fn concurrent_writers_to_one_thread(store: Arc<dyn HistoryStore>) {
    const WRITERS: usize = 8;
    const BATCHES: usize = 25;
    let scope = Arc::new(random_scope());
    let done = Arc::new(AtomicBool::new(false));
    // seq -> message id, as the readers saw it.
    let seen: Arc<Mutex<HashMap<u64, String>>> = Arc::new(Mutex::new(HashMap::new()));
    let reads = Arc::new(AtomicUsize::new(0));

    let mut readers = Vec::new();
    for _ in 0..2 {
        let (store, scope, done, seen, reads) = (
            store.clone(),
            scope.clone(),
            done.clone(),
            seen.clone(),
            reads.clone(),
        );
        readers.push(tokio::spawn(async move {
            loop {
                let finished = done.load(Ordering::SeqCst);
                let got = store
                    .read(&scope, Window::All)
                    .await
                    .expect_ok("read during concurrent appends");
                let got_seqs = seqs(&got);
                let n = got_seqs.len() as u64;
                assert_eq!(
                    got_seqs,
                    (1..=n).collect::<Vec<_>>(),
                    "a read during concurrent appends must see a gap-free prefix 1..={n}"
                );
                {
                    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                    for m in &got {
                        let id = m.message.id.as_str();
                        let first = seen.entry(m.seq).or_insert_with(|| id.to_owned());
                        assert_eq!(
                            first, id,
                            "seq {} held message {first} in one read and {id} in another",
                            m.seq
                        );
                    }
                }
                reads.fetch_add(1, Ordering::SeqCst);
                if finished {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }));
    }

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, scope) = (store.clone(), scope.clone());
        writers.push(tokio::spawn(async move {
            let mut outcomes = Vec::with_capacity(BATCHES);
            for b in 0..BATCHES {
                let batch = [
                    ChatMessage::user(format!("w{w}-b{b}-0")),
                    ChatMessage::assistant(format!("w{w}-b{b}-1")),
                ];
                let out = store
                    .append(&scope, &batch)
                    .await
                    .expect_ok("concurrent append");
                assert_eq!(
                    out.inserted, 2,
                    "writer {w} batch {b}: both messages are new"
                );
                assert_eq!(out.seqs.len(), 2, "one seq per message");
                assert_eq!(
                    out.seqs[1],
                    out.seqs[0] + 1,
                    "writer {w} batch {b} must land contiguously, got {:?}",
                    out.seqs
                );
                outcomes.push((batch, out.seqs));
            }
            outcomes
        }));
    }
    let mut all_batches = Vec::new();
    for (w, handle) in writers.into_iter().enumerate() {
        let outcomes = join(handle).await;
        let firsts: Vec<u64> = outcomes.iter().map(|(_, s)| s[0]).collect();
        assert!(
            firsts.windows(2).all(|p| p[0] < p[1]),
            "writer {w}'s sequential batches must get increasing seqs: {firsts:?}"
        );
        all_batches.extend(outcomes);
    }
    done.store(true, Ordering::SeqCst);
    for handle in readers {
        join(handle).await;
    }

    let total = (WRITERS * BATCHES * 2) as u64;
    let all = read(&*store, &scope, Window::All).await;
    assert_eq!(
        seqs(&all),
        (1..=total).collect::<Vec<_>>(),
        "after {WRITERS} writers x {BATCHES} batches x 2 the seqs are exactly 1..={total}"
    );
    let unique: HashSet<&str> = all.iter().map(|m| m.message.id.as_str()).collect();
    assert_eq!(unique.len(), all.len(), "no message is stored twice");
    for (batch, batch_seqs) in &all_batches {
        for (message, seq) in batch.iter().zip(batch_seqs) {
            let at = &all[(*seq - 1) as usize];
            assert_eq!(
                &*at.message, message,
                "the message at seq {seq} is the one its append reported"
            );
        }
    }
    let c = count(&*store, &scope).await;
    assert_eq!(
        (c.active, c.last_seq),
        (total, total),
        "count after concurrent appends"
    );
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    for (seq, id) in seen.iter() {
        assert_eq!(
            all[(*seq - 1) as usize].message.id.as_str(),
            id,
            "readers saw at seq {seq} the message that is there in the end"
        );
    }
    assert!(reads.load(Ordering::SeqCst) >= 2, "the readers did read");
}

/// Contract: a message over `MAX_MESSAGE_BYTES` is refused with `LimitExceeded` and nothing of
/// the batch is written, not even its valid messages.
pub async fn oversized_message_is_refused_atomically(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 2)).await;
    let before = read(store, &scope, Window::Everything).await;
    let valid = ChatMessage::user("valid, but in a refused batch");
    let oversized = ChatMessage::user(text_of_bytes(MAX_MESSAGE_BYTES + 1));
    expect_error_kind(
        store
            .append(&scope, &[valid.clone(), oversized.clone()])
            .await,
        ErrorKind::LimitExceeded,
        "append of a batch holding a message over MAX_MESSAGE_BYTES",
    );
    assert_eq!(
        read(store, &scope, Window::Everything).await,
        before,
        "a refused batch leaves the thread unchanged"
    );
    assert_eq!(
        count(store, &scope).await.last_seq,
        2,
        "a refused batch consumes no seq"
    );
    assert_eq!(
        store
            .append(&scope, std::slice::from_ref(&valid))
            .await
            .expect_ok("append the valid message alone"),
        AppendOutcome {
            seqs: vec![3],
            inserted: 1
        },
        "the valid message of the refused batch was not recorded"
    );
    let fresh = random_scope();
    expect_error_kind(
        store.append(&fresh, &[oversized]).await,
        ErrorKind::LimitExceeded,
        "append of an oversized message to a new thread",
    );
    assert_eq!(
        count(store, &fresh).await,
        ThreadCount::default(),
        "a refused first batch creates no thread"
    );
    assert!(
        !is_listed(store, &fresh).await,
        "a refused first batch is not listed"
    );
}

/// Contract: a batch over `MAX_BATCH_MESSAGES` is refused with `LimitExceeded` and nothing is
/// written.
pub async fn oversized_batch_is_refused(store: &dyn HistoryStore) {
    let scope = random_scope();
    append_new(store, &scope, &numbered_messages("m", 1)).await;
    let batch = numbered_messages("x", MAX_BATCH_MESSAGES + 1);
    expect_error_kind(
        store.append(&scope, &batch).await,
        ErrorKind::LimitExceeded,
        "append of a batch over MAX_BATCH_MESSAGES",
    );
    assert_eq!(
        count(store, &scope).await,
        ThreadCount {
            active: 1,
            archived: 0,
            active_tokens: u64::from(read(store, &scope, Window::All).await[0].tokens),
            last_seq: 1
        },
        "a refused batch writes nothing"
    );
}

/// Contract: each message's token count is computed once, at append, and stored: it equals the
/// counter's count (the default counter, see the module docs), does not change on read or
/// archive, and `count().active_tokens` sums it.
pub async fn token_counts_match_the_counter(store: &dyn HistoryStore) {
    let counter = default_token_counter();
    let scope = random_scope();
    let messages = vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("What is the weather in Lisbon tomorrow?"),
        ChatMessage::assistant("Let me check.").with_author("planner"),
        ChatMessage::tool_call("call-1", "weather", "{\"city\":\"Lisbon\"}"),
        ChatMessage::tool_result("call-1", "18 °C and sunny"),
        ChatMessage::new(
            Role::User,
            vec![
                Part::text("and this picture?"),
                Part::Image(Media::url("https://example.com/a.png")),
            ],
        ),
        ChatMessage::new(
            Role::Assistant,
            vec![Part::Data {
                media_type: "application/json".into(),
                data: serde_json::json!({"k": [1, 2, 3]}),
            }],
        ),
        ChatMessage::user(text_of_bytes(5_000)),
    ];
    append_new(store, &scope, &messages).await;
    let first = read(store, &scope, Window::Everything).await;
    for (stored, original) in first.iter().zip(&messages) {
        assert_eq!(
            stored.tokens,
            counter.count_message(original),
            "seq {}: the stored count equals the default counter's count",
            stored.seq
        );
    }
    let sum: u64 = first.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(
        count(store, &scope).await.active_tokens,
        sum,
        "active_tokens sums the stored counts"
    );
    // Without the archive capability the counts are compared after the refused archive.
    archive_if_capable(store, &scope, 1..=3, "archive 1..=3").await;
    let second = read(store, &scope, Window::Everything).await;
    assert_eq!(
        second.iter().map(|m| m.tokens).collect::<Vec<_>>(),
        first.iter().map(|m| m.tokens).collect::<Vec<_>>(),
        "stored counts do not change on read or archive"
    );
    let active_sum: u64 = second
        .iter()
        .filter(|m| !m.archived)
        .map(|m| u64::from(m.tokens))
        .sum();
    assert_eq!(
        count(store, &scope).await.active_tokens,
        active_sum,
        "active_tokens sums only active messages"
    );
}
