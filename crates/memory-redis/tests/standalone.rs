//! Focused tests against the machine's Redis (or `AGENT_MEMORY_REDIS_URL`): `max_messages`
//! and its overflow modes, the key layout, round trips, reusing an application's connection,
//! option validation, and fast, password-free failures.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::error::Error as _;
use std::time::{Duration, Instant};

use futures::StreamExt;

use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, MessageId, Scope, SessionStore, ThreadCount, Window,
};
use memory_redis::redis::AsyncCommands;
use memory_redis::{Overflow, RedisConfig, RedisStore};
use support::{TEST_DATA_TTL, prefix, standalone_store, standalone_url};

fn scope() -> Scope {
    Scope::session(format!("s-{}", uuid::Uuid::new_v4().simple()))
        .unwrap()
        .with_tenant(format!("t-{}", uuid::Uuid::new_v4().simple()))
        .unwrap()
}

fn message(id: &str) -> ChatMessage {
    ChatMessage::user(format!("text of {id}")).with_id(MessageId::new(id).unwrap())
}

fn ids(messages: &[memory_core::StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.message.id.as_str().to_owned())
        .collect()
}

async fn store_with(max: usize, overflow: Overflow) -> RedisStore {
    RedisStore::builder(&standalone_url())
        .key_prefix(prefix())
        .default_ttl(TEST_DATA_TTL)
        .max_messages(max)
        .overflow(overflow)
        .connect()
        .await
        .unwrap()
}

async fn raw() -> memory_redis::redis::aio::MultiplexedConnection {
    memory_redis::redis::Client::open(standalone_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
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
async fn max_messages_delete_drops_bodies_but_keeps_ids() {
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
    let retry = store.append(&scope, &[message("m2")]).await.unwrap();
    assert_eq!(
        (retry.inserted, retry.seqs),
        (0, vec![2]),
        "a deleted message's id is still known, so a retry does not store it again"
    );
    // Nothing is left of the deleted bodies.
    let mut conn = raw().await;
    let msg_key = format!("{}:{{{}}}:msg", prefix(), scope.key());
    let mut fields: Vec<String> = conn.hkeys(&msg_key).await.unwrap();
    fields.sort();
    assert_eq!(fields, ["4", "5"]);
    assert_eq!(store.clear(&scope).await.unwrap(), 2);
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
    // Deleted ids still dedupe (they are kept for the thread's life).
    let retry = store.append(&pinned, &[message("m4")]).await.unwrap();
    assert_eq!((retry.inserted, retry.seqs), (0, vec![4]));
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
    let left: Vec<String> = conn.keys(format!("{own}:*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
