//! Focused tests against the machine's Redis (or `AGENT_MEMORY_REDIS_URL`): `max_messages`
//! and its overflow modes, the key layout, round trips, reusing an application's connection,
//! option validation, and fast, password-free failures.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::error::Error as _;
use std::time::{Duration, Instant};

use futures::StreamExt;

use memory_core::{
    ErrorKind, HistoryStore, MAX_READ_PAGE, Scope, SessionStore, ThreadCount, Window,
};
use memory_redis::redis::AsyncCommands;
use memory_redis::{Overflow, RedisConfig, RedisStore};
use support::{
    TEST_DATA_TTL, message, prefix, raw, scope, standalone_store, standalone_url, store_with,
    tenant_scopes,
};

use crate::support;

fn ids(messages: &[memory_core::StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.message.id.as_str().to_owned())
        .collect()
}

#[tokio::test]
async fn max_messages_archives_the_oldest_by_default() {
    let store = store_with(3, Overflow::Archive).await;
    let scope = scope();
    let batch: Vec<_> = (1..=4).map(|i| message(&format!("m{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();
    store.append(&scope, &[message("m5")]).await.unwrap();
    let active = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(ids(&active), ["m3", "m4", "m5"]);
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    assert_eq!(ids(&everything), ["m1", "m2", "m3", "m4", "m5"]);
    let archived: Vec<bool> = everything.iter().map(|m| m.archived).collect();
    assert_eq!(archived, [true, true, false, false, false]);
    let count = store.count(&scope).await.unwrap();
    let tokens: u64 = active.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(
        count,
        ThreadCount {
            active: 3,
            archived: 2,
            active_tokens: tokens,
            last_seq: 5
        }
    );
    // An archived message is still known: retrying it inserts nothing.
    let retry = store.append(&scope, &[message("m1")]).await.unwrap();
    assert_eq!((retry.inserted, retry.seqs), (0, vec![1]));
    assert_eq!(store.clear(&scope).await.unwrap(), 5);
}

#[tokio::test]
async fn max_messages_delete_drops_bodies_and_their_ids() {
    let store = store_with(2, Overflow::Delete).await;
    let scope = scope();
    for i in 1..=5 {
        store
            .append(&scope, &[message(&format!("m{i}"))])
            .await
            .unwrap();
    }
    assert_eq!(
        ids(&store.read(&scope, Window::All).await.unwrap()),
        ["m4", "m5"]
    );
    assert_eq!(
        ids(&store.read(&scope, Window::Everything).await.unwrap()),
        ["m4", "m5"],
        "deleted messages are gone from every window"
    );
    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.active, count.archived, count.last_seq), (2, 0, 5));
    // Nothing is left of the deleted messages: bodies, token counts and ids (R1).
    let mut conn = raw().await;
    let key = |suffix: &str| format!("{}:{{{}}}:{suffix}", prefix(), scope.key());
    for suffix in ["msg", "tok"] {
        let mut fields: Vec<String> = conn.hkeys(key(suffix)).await.unwrap();
        fields.sort();
        assert_eq!(fields, ["4", "5"], "{suffix}");
    }
    let mut known: Vec<String> = conn.hkeys(key("ids")).await.unwrap();
    known.sort();
    assert_eq!(
        known,
        ["m4", "m5"],
        "the id index holds the stored messages only"
    );
    // A retry of the last append still stores nothing; a deleted id is a new message again.
    let retry = store.append(&scope, &[message("m5")]).await.unwrap();
    assert_eq!((retry.inserted, retry.seqs), (0, vec![5]));
    let again = store.append(&scope, &[message("m2")]).await.unwrap();
    assert_eq!(
        (again.inserted, again.seqs),
        (1, vec![6]),
        "a deleted message is no longer held by the thread"
    );
    assert_eq!(store.clear(&scope).await.unwrap(), 2);
}

/// R1: the id index never outgrows the thread. Under `Overflow::Delete` it holds the stored
/// messages' ids, plus, until the next append, those of a batch longer than `max_messages`
/// that its own append deleted (so a retry of that append still stores nothing); a clear
/// removes it and a TTL expires it with the thread.
#[tokio::test]
async fn the_id_index_is_bounded_by_the_thread() {
    let store = store_with(3, Overflow::Delete).await;
    let mut conn = raw().await;
    let scope = scope();
    let ids_key = format!("{}:{{{}}}:ids", prefix(), scope.key());
    for round in 0..20 {
        let batch: Vec<_> = (0..2).map(|i| message(&format!("r{round}-{i}"))).collect();
        store.append(&scope, &batch).await.unwrap();
        let len: u64 = conn.hlen(&ids_key).await.unwrap();
        assert!(len <= 3, "round {round}: {len} ids for 3 stored messages");
    }
    // A batch longer than max_messages deletes some of its own messages: their ids stay until
    // the next append, so its retry stores nothing.
    let long: Vec<_> = (0..5).map(|i| message(&format!("long-{i}"))).collect();
    let first = store.append(&scope, &long).await.unwrap();
    assert_eq!(first.inserted, 5);
    let len: u64 = conn.hlen(&ids_key).await.unwrap();
    assert_eq!(len, 5, "3 stored + 2 deleted by their own append");
    let retry = store.append(&scope, &long).await.unwrap();
    assert_eq!((retry.inserted, &retry.seqs), (0, &first.seqs));
    store.append(&scope, &[message("next")]).await.unwrap();
    let mut known: Vec<String> = conn.hkeys(&ids_key).await.unwrap();
    known.sort();
    assert_eq!(known, ["long-3", "long-4", "next"]);

    // The index expires with the thread and goes with a clear.
    HistoryStore::set_ttl(&store, &scope, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let ttl: i64 = conn.pttl(&ids_key).await.unwrap();
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the id index expires with the thread: {ttl}"
    );
    assert_eq!(store.clear(&scope).await.unwrap(), 3);
    let exists: bool = conn.exists(&ids_key).await.unwrap();
    assert!(!exists, "a clear removes the id index");
}

/// Writes 30 000 unrelated keys (for two minutes), so a scan of the keyspace would take 30 or
/// more steps.
async fn fill_keyspace(conn: &mut memory_redis::redis::aio::MultiplexedConnection) {
    let filler = format!("{}-filler-{}", prefix(), uuid::Uuid::new_v4().simple());
    for chunk in (0..30_000).collect::<Vec<u32>>().chunks(5_000) {
        let mut pipe = memory_redis::redis::pipe();
        for i in chunk {
            pipe.cmd("SET")
                .arg(format!("{filler}:{i}"))
                .arg(1)
                .arg("EX")
                .arg(120)
                .ignore();
        }
        let () = pipe.query_async(conn).await.unwrap();
    }
}

/// H4: `purge_expired` looks only at the threads due in its expiry index, not at the whole
/// keyspace: once the index is built (by the first purge), a purge costs a few round trips
/// however many keys the server holds.
#[tokio::test]
async fn purge_expired_reads_an_index_not_the_keyspace() {
    let own = format!("{}-pidx", prefix());
    let store = RedisStore::builder(&standalone_url())
        .key_prefix(own.clone())
        .default_ttl(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let mut conn = raw().await;
    fill_keyspace(&mut conn).await;
    HistoryStore::purge_expired(&store).await.unwrap();
    // One tenant: a purge also removes each purged thread from its tenant's thread index, a
    // few round trips per tenant.
    let (_tenant, scopes) = tenant_scopes(20);
    for scope in &scopes {
        store.append(scope, &[message("m")]).await.unwrap();
    }
    let kept = scope();
    store.append(&kept, &[message("m")]).await.unwrap();
    HistoryStore::set_ttl(&store, &kept, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = store.round_trips();
    assert_eq!(HistoryStore::purge_expired(&store).await.unwrap(), 20);
    let used = store.round_trips() - before;
    assert!(used <= 12, "a purge of 20 threads took {used} round trips");
    assert_eq!(HistoryStore::purge_expired(&store).await.unwrap(), 0);
    assert_eq!(store.count(&kept).await.unwrap().active, 1);
    let index = format!("{own}:{{|expiring}}:threads");
    let members: Vec<String> = conn.zrange(&index, 0, -1).await.unwrap();
    assert_eq!(
        members,
        [kept.key()],
        "only the live thread is left in the expiry index"
    );
    store.clear(&kept).await.unwrap();
}

/// H4: `list_threads` reads a page from its tenant's thread index, not by scanning the
/// keyspace: a page costs a few round trips however many keys the server holds. Threads
/// written before the index existed are found by a one-time scan; cleared and expired threads
/// leave the index as a listing meets them.
#[tokio::test]
async fn list_threads_reads_an_index_not_the_keyspace() {
    let store = standalone_store().await;
    let mut conn = raw().await;
    fill_keyspace(&mut conn).await;
    let (tenant, scopes) = tenant_scopes(5);
    for scope in &scopes {
        store.append(scope, &[message("m")]).await.unwrap();
    }
    let filter = memory_core::ScopeFilter::tenant(memory_core::TenantId::new(&tenant).unwrap());
    let list = |limit: usize, cursor: Option<String>| {
        let (store, filter) = (store.clone(), filter.clone());
        async move {
            let request = match cursor {
                None => memory_core::PageRequest::first(limit),
                Some(c) => memory_core::PageRequest::after(limit, c),
            };
            store.list_threads(&filter, request).await.unwrap()
        }
    };
    // The index is built (a one-time scan) on the tenant's first listing.
    assert_eq!(list(10, None).await.items, scopes);
    let before = store.round_trips();
    let page = list(2, None).await;
    assert_eq!(page.items, scopes[..2]);
    let used = store.round_trips() - before;
    assert!(used <= 4, "a page took {used} round trips");
    let page = list(2, page.next_cursor).await;
    assert_eq!(page.items, scopes[2..4]);

    // Cleared and expired threads are not listed, and leave the index.
    let index = format!("{}:{{{tenant}}}:threads", prefix());
    store.clear(&scopes[0]).await.unwrap();
    let gone: Option<f64> = conn.zscore(&index, scopes[0].key()).await.unwrap();
    assert_eq!(gone, None, "a clear removes the thread from the index");
    HistoryStore::set_ttl(&store, &scopes[1], Some(Duration::from_millis(50)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(list(10, None).await.items, scopes[2..]);
    let members: Vec<String> = conn.zrange(&index, 0, -1).await.unwrap();
    let expected: Vec<String> = [String::new()]
        .into_iter()
        .chain(scopes[2..].iter().map(Scope::key))
        .collect();
    assert_eq!(members, expected, "the listing removed the expired thread");

    // Threads written before the index existed (here: an index that was lost) are found again.
    let () = conn.del(&index).await.unwrap();
    assert_eq!(list(10, None).await.items, scopes[2..]);
    for scope in &scopes[2..] {
        store.clear(scope).await.unwrap();
    }
    assert!(list(10, None).await.items.is_empty());
}

#[tokio::test]
async fn two_sources_of_one_session_never_share_a_key() {
    let store = standalone_store().await;
    let history = scope();
    let mem0 = history.clone().with_source("mem0").unwrap();
    store.append(&history, &[message("h1")]).await.unwrap();
    store
        .append(&mem0, &[message("x1"), message("x2")])
        .await
        .unwrap();
    assert_eq!(
        ids(&store.read(&history, Window::All).await.unwrap()),
        ["h1"]
    );
    assert_eq!(
        ids(&store.read(&mem0, Window::All).await.unwrap()),
        ["x1", "x2"]
    );
    store
        .save(&history, &serde_json::json!({"a": 1}), None)
        .await
        .unwrap();

    let mut conn = raw().await;
    let tenant = history.tenant().as_str();
    let session = history.session_id().as_str();
    for (source, suffixes) in [
        (
            "history",
            &["meta", "ids", "msg", "tok", "active", "exp", "session"][..],
        ),
        ("mem0", &["meta", "ids", "msg", "tok", "active", "exp"][..]),
    ] {
        for suffix in suffixes {
            // The whole scope is the hash tag: tenant|user|agent|source|session.
            let key = format!("{}:{{{tenant}|~|~|{source}|{session}}}:{suffix}", prefix());
            let exists: bool = conn.exists(&key).await.unwrap();
            assert!(exists, "{key} should exist");
        }
    }
    let h: Vec<String> = conn
        .hkeys(format!("{}:{{{}}}:ids", prefix(), history.key()))
        .await
        .unwrap();
    assert_eq!(h, ["h1"]);
    // The expiry follows the store's default TTL on every key of the thread.
    let ttl: i64 = conn
        .pttl(format!("{}:{{{}}}:msg", prefix(), mem0.key()))
        .await
        .unwrap();
    assert!(
        ttl > 0 && ttl <= TEST_DATA_TTL.as_millis() as i64,
        "pttl {ttl}"
    );
}

#[tokio::test]
async fn one_round_trip_per_operation() {
    let store = standalone_store().await;
    let scope = scope();
    // The first call of each script may have to send its source; warm them up.
    store.append(&scope, &[message("warm")]).await.unwrap();
    store.read(&scope, Window::Last(1)).await.unwrap();
    store
        .save(&scope, &serde_json::json!(1), None)
        .await
        .unwrap();

    let before = store.round_trips();
    let batch: Vec<_> = (0..20).map(|i| message(&format!("b{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();
    assert_eq!(store.round_trips() - before, 1, "an append of 20 messages");

    for window in [
        Window::TokenBudget(50),
        Window::Last(5),
        Window::After(3),
        Window::All,
        Window::Everything,
    ] {
        let before = store.round_trips();
        store.read(&scope, window).await.unwrap();
        assert_eq!(store.round_trips() - before, 1, "read {window:?}");
    }
    let before = store.round_trips();
    store.count(&scope).await.unwrap();
    store.load(&scope).await.unwrap();
    store
        .save(&scope, &serde_json::json!(2), Some(1))
        .await
        .unwrap();
    assert_eq!(store.round_trips() - before, 3, "count, load, save");
}

#[tokio::test]
async fn token_budget_reads_only_the_window_of_a_long_thread() {
    let store = standalone_store().await;
    let scope = scope();
    let batch: Vec<_> = (0..3000).map(|i| message(&format!("m{i}"))).collect();
    let out = store.append(&scope, &batch).await.unwrap();
    assert_eq!(out.inserted, 3000);
    let budget = store.read(&scope, Window::TokenBudget(40)).await.unwrap();
    assert!(!budget.is_empty() && budget.len() < 20, "{}", budget.len());
    assert_eq!(budget.last().unwrap().seq, 3000);
    let used: u64 = budget.iter().map(|m| u64::from(m.tokens)).sum();
    assert!(used <= 40);
    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(all.len(), 3000);
    assert!(all.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
    assert_eq!(
        store
            .read(&scope, Window::Last(usize::MAX))
            .await
            .unwrap()
            .len(),
        3000
    );
    assert!(
        store
            .read(&scope, Window::After(u64::MAX))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.archive(&scope, 0..=u64::MAX).await.unwrap(), 3000);
    assert_eq!(store.count(&scope).await.unwrap().archived, 3000);
}

/// H4: a read of a long thread is never one long script: every window larger than
/// `MAX_READ_PAGE` messages takes one script call per page, and returns the same messages.
#[tokio::test]
async fn a_large_read_runs_in_pages_of_short_scripts() {
    let store = standalone_store().await;
    let scope = scope();
    let n = 2 * MAX_READ_PAGE + 345;
    let batch: Vec<_> = (0..n).map(|i| message(&format!("m{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();
    store.read(&scope, Window::Last(1)).await.unwrap();
    let pages = n.div_ceil(MAX_READ_PAGE) as u64;
    for window in [
        Window::All,
        Window::After(0),
        Window::Everything,
        Window::Last(usize::MAX),
        Window::TokenBudget(u64::MAX),
    ] {
        let before = store.round_trips();
        let read = store.read(&scope, window).await.unwrap();
        let calls = store.round_trips() - before;
        assert_eq!(read.len(), n, "{window:?}");
        assert!(
            read.iter().zip(1..).all(|(m, seq)| m.seq == seq),
            "{window:?} returns every seq once, in order"
        );
        assert!(
            (pages..=pages + 1).contains(&calls),
            "{window:?} of {n} messages took {calls} script calls, not one per page of \
             {MAX_READ_PAGE}"
        );
    }
    assert_eq!(store.clear(&scope).await.unwrap(), n as u64);
}

/// An `Everything` read of a thread that `Overflow::Delete` thinned out (one archived message
/// kept far below the active window) pages over the deleted seqs and finds both ends.
#[tokio::test]
async fn everything_pages_over_deleted_seqs() {
    let store = store_with(10, Overflow::Delete).await;
    let scope = scope();
    store.append(&scope, &[message("first")]).await.unwrap();
    assert_eq!(store.archive(&scope, 1..=1).await.unwrap(), 1);
    let n = 2 * MAX_READ_PAGE + 500;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<_> = chunk.iter().map(|i| message(&format!("m{i}"))).collect();
        store.append(&scope, &batch).await.unwrap();
    }
    let everything = store.read(&scope, Window::Everything).await.unwrap();
    let last = n as u64 + 1;
    let expected: Vec<u64> = [1].into_iter().chain(last - 9..=last).collect();
    assert_eq!(
        everything.iter().map(|m| m.seq).collect::<Vec<_>>(),
        expected
    );
    assert!(everything[0].archived && everything[1..].iter().all(|m| !m.archived));
    assert_eq!(ids(&everything[..1]), ["first"]);
    store.clear(&scope).await.unwrap();
}

#[tokio::test]
async fn reuses_an_application_connection_manager() {
    let client = memory_redis::redis::Client::open(standalone_url()).unwrap();
    let manager = memory_redis::redis::aio::ConnectionManager::new(client)
        .await
        .unwrap();
    let mut config = RedisConfig::default();
    config.key_prefix = prefix().to_owned();
    config.default_ttl = Some(TEST_DATA_TTL);
    let store = RedisStore::from_connection_manager(manager, config).unwrap();
    let scope = scope();
    store.append(&scope, &[message("a")]).await.unwrap();
    assert_eq!(store.count(&scope).await.unwrap().active, 1);
    assert!(!store.is_cluster());
}

#[tokio::test]
async fn timeouts_too_long_to_add_up_are_refused() {
    let set_response = |b: memory_redis::RedisStoreBuilder| b.response_timeout(Duration::MAX);
    let set_connection = |b: memory_redis::RedisStoreBuilder| b.connection_timeout(Duration::MAX);
    for set in [set_response, set_connection] {
        let err = set(RedisStore::builder(&standalone_url()))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    let mut config = RedisConfig::default();
    config.response_timeout = Duration::MAX;
    config.connection_timeout = Duration::MAX;
    assert_eq!(
        config.validate().unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[tokio::test]
async fn invalid_options_are_refused() {
    for prefix in ["", "Upper", "has space", "a{b}", &"x".repeat(33)] {
        let err = RedisStore::builder(&standalone_url())
            .key_prefix(prefix)
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{prefix:?}");
    }
    let err = RedisStore::builder(&standalone_url())
        .max_messages(0)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    for url in [
        "http://127.0.0.1:6379",
        "127.0.0.1:6379",
        "redis+cluster://",
    ] {
        let err = RedisStore::connect(url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}");
    }
}

/// Every rendering of an error and of its sources.
fn renderings(err: &memory_core::Error) -> String {
    let mut out = format!("{err} {err:?}");
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(&format!(" {s} {s:?}"));
        source = s.source();
    }
    out
}

#[tokio::test]
async fn a_dead_server_fails_fast_and_never_shows_the_password() {
    for url in [
        "redis://:hunter2@127.0.0.1:1",
        "redis://admin:hunter2@127.0.0.1:1/0",
        "redis+cluster://:hunter2@127.0.0.1:1,127.0.0.1:2",
    ] {
        let builder = RedisStore::builder(url);
        assert!(!format!("{builder:?}").contains("hunter2"));
        let started = Instant::now();
        let err = builder.connect().await.unwrap_err();
        let elapsed = started.elapsed();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{url}: {err}");
        assert!(
            elapsed < Duration::from_secs(10),
            "{url}: failing took {elapsed:?}"
        );
        let text = renderings(&err);
        assert!(!text.contains("hunter2"), "{text}");
    }
}

/// With the `tls` feature a `rediss://` URL is used (with rustls's ring provider): against a
/// server that does not speak TLS it fails cleanly, it does not panic for want of a provider.
#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_urls_fail_cleanly_against_a_plain_server() {
    let url = standalone_url().replacen("redis://", "rediss://", 1);
    let store = RedisStore::builder(&url)
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .connect()
        .await;
    let err = store.expect_err("a TLS handshake with a plain server fails");
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Unavailable | ErrorKind::Timeout | ErrorKind::Backend
        ),
        "{err}"
    );
}

/// Without the `tls` feature a `rediss://` URL is refused, naming the feature.
#[cfg(not(feature = "tls"))]
#[tokio::test]
async fn tls_urls_need_the_tls_feature() {
    let err = RedisStore::connect("rediss://127.0.0.1:6379")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("`tls` feature"), "{err}");
}

/// `Overflow::Delete` moves `first_kept` past the deleted seqs, so an `Everything` read walks
/// only stored ones; with an archived message below the deleted ones it lists the stored seqs
/// instead of walking the gap.
#[tokio::test]
async fn everything_reads_only_stored_seqs_after_deletes() {
    let store = store_with(2, Overflow::Delete).await;
    let mut conn = raw().await;

    let scope = scope();
    for i in 1..=6 {
        store
            .append(&scope, &[message(&format!("m{i}"))])
            .await
            .unwrap();
    }
    let meta = format!("{}:{{{}}}:meta", prefix(), scope.key());
    let first_kept: u64 = conn.hget(&meta, "first_kept").await.unwrap();
    assert_eq!(first_kept, 5, "seqs 1..=4 were deleted");
    assert_eq!(
        ids(&store.read(&scope, Window::Everything).await.unwrap()),
        ["m5", "m6"]
    );

    // m1 archived (kept) below the seqs the overflow deletes later.
    let pinned = self::scope();
    store
        .append(&pinned, &[message("m1"), message("m2")])
        .await
        .unwrap();
    assert_eq!(store.archive(&pinned, 1..=1).await.unwrap(), 1);
    for i in 3..=12 {
        store
            .append(&pinned, &[message(&format!("m{i}"))])
            .await
            .unwrap();
    }
    let everything = store.read(&pinned, Window::Everything).await.unwrap();
    assert_eq!(ids(&everything), ["m1", "m11", "m12"]);
    let archived: Vec<bool> = everything.iter().map(|m| m.archived).collect();
    assert_eq!(archived, [true, false, false]);
    let count = store.count(&pinned).await.unwrap();
    assert_eq!((count.active, count.archived, count.last_seq), (2, 1, 12));
    // R1: deleted ids are forgotten with their messages (the id index holds the stored ones),
    // so appending a deleted message's id again stores it again, as a new message.
    let again = store.append(&pinned, &[message("m4")]).await.unwrap();
    assert_eq!((again.inserted, again.seqs), (1, vec![13]));
}

/// Stored data the scripts did not write is refused as `Serialization`, never read as
/// something else or silently duplicated.
#[tokio::test]
async fn corrupt_stored_data_is_a_serialization_error() {
    let store = standalone_store().await;
    let mut conn = raw().await;
    let key = |scope: &Scope, suffix: &str| format!("{}:{{{}}}:{suffix}", prefix(), scope.key());

    // A token count too large for a u32, and one that is not a number.
    let scope = scope();
    store
        .append(&scope, &[message("a"), message("b")])
        .await
        .unwrap();
    let () = conn
        .hset(key(&scope, "tok"), "1", "99999999999")
        .await
        .unwrap();
    // That message is left out of reads (with a warning); the other one is read (D8).
    let read = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(read.iter().map(|m| m.seq).collect::<Vec<_>>(), [2]);
    // A count that is not a number is a damaged reply: the read fails, typed.
    let () = conn.hset(key(&scope, "tok"), "2", "many").await.unwrap();
    for window in [Window::All, Window::TokenBudget(1000), Window::Last(1)] {
        let err = store.read(&scope, window).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{window:?}: {err}");
    }
    let err = store.archive(&scope, 1..=2).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
    assert_eq!(
        store.count(&scope).await.unwrap().active,
        2,
        "nothing moved"
    );
    // Clearing still works: it is how a damaged thread is removed.
    assert_eq!(store.clear(&scope).await.unwrap(), 2);

    // An id whose seq is not a number: not stored again as a new message.
    let scope = self::scope();
    store.append(&scope, &[message("a")]).await.unwrap();
    let () = conn.hset(key(&scope, "ids"), "a", "x").await.unwrap();
    let err = store
        .append(&scope, &[message("b"), message("a")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert_eq!(
        store.count(&scope).await.unwrap().last_seq,
        1,
        "nothing written"
    );

    // The id index gone (evicted) while the thread holds messages: refused, not duplicated.
    let scope = self::scope();
    store.append(&scope, &[message("a")]).await.unwrap();
    let () = conn.del(key(&scope, "ids")).await.unwrap();
    let err = store.append(&scope, &[message("a")]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
    assert_eq!(
        ids(&store.read(&scope, Window::Everything).await.unwrap()),
        ["a"]
    );

    // A corrupt session version.
    let scope = self::scope();
    store
        .save(&scope, &serde_json::json!(1), None)
        .await
        .unwrap();
    let () = conn
        .hset(key(&scope, "session"), "version", "v1")
        .await
        .unwrap();
    let err = store
        .save(&scope, &serde_json::json!(2), Some(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
    // A corrupt session can still be deleted (it is how it is removed), and created again.
    assert!(store.delete(&scope).await.unwrap());
    assert!(store.load(&scope).await.unwrap().is_none());
    store
        .save(&scope, &serde_json::json!(3), None)
        .await
        .unwrap();
    // A damaged tombstone does not block a create either.
    store.delete(&scope).await.unwrap();
    let () = conn.set(key(&scope, "sver"), "garbage").await.unwrap();
    let version = store
        .save(&scope, &serde_json::json!(4), None)
        .await
        .unwrap();
    assert!(version >= 1);
}

/// `purge_expired` checks the expiry records in pipelined batches: a few round trips for many
/// threads, not one per thread.
#[tokio::test]
async fn purge_expired_batches_its_round_trips() {
    let url = standalone_url();
    // A prefix of its own: no other test's records are counted.
    let own = format!("{}-purge", prefix());
    let store = RedisStore::builder(&url)
        .key_prefix(own.clone())
        .default_ttl(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    const THREADS: u64 = 700;
    futures::stream::iter(0..THREADS)
        .map(|i| {
            let store = store.clone();
            async move {
                let scope = Scope::session(format!("s-{i}")).unwrap();
                store.append(&scope, &[message("m")]).await.unwrap();
            }
        })
        .buffer_unordered(50)
        .collect::<Vec<()>>()
        .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut conn = raw().await;
    let keyspace: u64 = memory_redis::redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = store.round_trips();
    assert_eq!(HistoryStore::purge_expired(&store).await.unwrap(), THREADS);
    let used = store.round_trips() - before;
    // The SCAN steps over the server's keyspace (1000 slots of its table per step), then two
    // batches of one EXISTS pipeline and one purge pipeline each.
    let scan_steps = 2 * keyspace / 1000 + 2;
    assert!(
        used <= scan_steps + 4 && used < THREADS,
        "{used} round trips for {THREADS} threads"
    );
    assert_eq!(HistoryStore::purge_expired(&store).await.unwrap(), 0);
    // Nothing of the threads is left, in their keys or in the indexes; only the mark that the
    // expiry index was synchronised by a scan (it lapses after 24 hours).
    let left: Vec<String> = conn.keys(format!("{own}:*")).await.unwrap();
    assert_eq!(left, [format!("{own}:{{|expiring}}:complete")], "{left:?}");
}

/// A store with `max_messages` moves messages out of the window in its append, so it says so
/// (`reduces_on_append`) and a `Memory` refuses it: those messages would never reach a block.
#[tokio::test]
async fn max_messages_makes_a_memory_refuse_the_store() {
    use std::sync::Arc;
    for overflow in [Overflow::Archive, Overflow::Delete] {
        let store = Arc::new(store_with(3, overflow).await);
        assert!(
            HistoryStore::capabilities(store.as_ref()).reduces_on_append,
            "{overflow:?}"
        );
        let err = memory_core::Memory::builder(scope(), store.clone(), store)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("max_messages"), "{err}");
    }
    let unlimited = Arc::new(standalone_store().await);
    assert!(!HistoryStore::capabilities(unlimited.as_ref()).reduces_on_append);
    memory_core::Memory::builder(scope(), unlimited.clone(), unlimited)
        .build()
        .unwrap();
}

/// Sessions expire by default exactly when the store has a default TTL (every save applies
/// it): a `Memory` then keeps its block states alive with its thread, and only then.
#[tokio::test]
async fn sessions_expire_by_default_only_with_a_default_ttl() {
    use memory_core::SessionStore;
    let with_ttl = standalone_store().await;
    assert!(SessionStore::capabilities(&with_ttl).expires_by_default);
    let without = RedisStore::builder(&standalone_url())
        .key_prefix(prefix())
        .connect()
        .await
        .unwrap();
    assert!(!SessionStore::capabilities(&without).expires_by_default);
    assert!(SessionStore::capabilities(&without).ttl);
}
