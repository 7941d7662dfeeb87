//! The window cache's one promise, as a property: after any interleaving of two clients'
//! appends, archives, clears and reads (each client reading through its own cache over one
//! shared store, as two processes would), every read through a cache equals a plain read of
//! the store. It runs on the in-memory store, PostgreSQL and Redis.
//!
//! Cases: 64 in memory, 16 on each server; `PROPTEST_CASES` sets all three.
// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memory_core::{ChatMessage, HistoryStore, InMemoryHistoryStore, Scope, Window};
use memory_layers::WindowCache;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// One step of one client on one of two threads.
#[derive(Debug, Clone)]
enum Op {
    /// Appends 1-3 messages of these texts.
    Append {
        client: usize,
        thread: usize,
        texts: Vec<String>,
    },
    /// Archives `from..=from + len`.
    Archive {
        client: usize,
        thread: usize,
        from: u64,
        len: u64,
    },
    /// Clears the thread.
    Clear { client: usize, thread: usize },
    /// Reads a window through the client's cache and checks it against the store.
    Read {
        client: usize,
        thread: usize,
        window: Window,
    },
}

fn window() -> impl Strategy<Value = Window> {
    prop_oneof![
        // Few distinct windows, so that a client reads one window again after appends (a cache
        // hit) often.
        Just(Window::All),
        Just(Window::Last(3)),
        prop_oneof![Just(40u64), Just(100)].prop_map(Window::TokenBudget),
        Just(Window::After(2)),
        Just(Window::Everything),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let who = (0usize..2, 0usize..2);
    prop_oneof![
        4 => (who.clone(), prop::collection::vec("[a-z]{1,9}( [a-z]{1,9}){0,15}", 1..=3))
            .prop_map(|((client, thread), texts)| Op::Append { client, thread, texts }),
        1 => (who.clone(), 1u64..14, 0u64..4)
            .prop_map(|((client, thread), from, len)| Op::Archive { client, thread, from, len }),
        1 => who.clone().prop_map(|(client, thread)| Op::Clear { client, thread }),
        5 => (who, window()).prop_map(|((client, thread), window)| Op::Read { client, thread, window }),
    ]
}

/// Runs `ops` on two caches over `store`, in two fresh threads, then clears them. Adds the
/// caches' hits (reads served by merging a delta) to `hits`.
async fn run_ops<S: HistoryStore>(
    store: Arc<S>,
    ops: Vec<Op>,
    hits: &AtomicU64,
) -> std::result::Result<(), TestCaseError> {
    let clients = [
        WindowCache::new(store.clone()),
        WindowCache::new(store.clone()),
    ];
    let threads: Vec<Scope> = (0..2)
        .map(|_| Scope::session(format!("prop-{}", uuid::Uuid::new_v4().simple())).unwrap())
        .collect();
    let archives = store.capabilities().archive;
    let mut outcome = Ok(());
    for op in ops {
        match op {
            Op::Append {
                client,
                thread,
                texts,
            } => {
                let messages: Vec<ChatMessage> = texts.into_iter().map(ChatMessage::user).collect();
                clients[client]
                    .append(&threads[thread], &messages)
                    .await
                    .unwrap();
            }
            Op::Archive {
                client,
                thread,
                from,
                len,
            } if archives => {
                clients[client]
                    .archive(&threads[thread], from..=from + len)
                    .await
                    .unwrap();
            }
            Op::Archive { .. } => {}
            Op::Clear { client, thread } => {
                clients[client].clear(&threads[thread]).await.unwrap();
            }
            Op::Read {
                client,
                thread,
                window,
            } => {
                let cached = clients[client]
                    .read(&threads[thread], window)
                    .await
                    .unwrap();
                let fresh = store.read(&threads[thread], window).await.unwrap();
                if cached != fresh {
                    outcome = Err(TestCaseError::fail(format!(
                        "{window:?} through client {client}'s cache: seqs {:?}, the store: {:?}",
                        cached.iter().map(|m| m.seq).collect::<Vec<_>>(),
                        fresh.iter().map(|m| m.seq).collect::<Vec<_>>(),
                    )));
                    break;
                }
            }
        }
    }
    for thread in &threads {
        store.clear(thread).await.unwrap();
    }
    for client in &clients {
        hits.fetch_add(client.stats().hits, Ordering::Relaxed);
    }
    outcome
}

/// Checks the property on the store `make` opens, with `default_cases` cases.
fn check_property<S, F, Fut>(make: F, default_cases: u32)
where
    S: HistoryStore,
    F: FnOnce() -> Fut,
    Fut: Future<Output = S>,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default_cases);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(runtime.block_on(make()));
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let hits = AtomicU64::new(0);
    let result = runner.run(&prop::collection::vec(op(), 1..80), |ops| {
        runtime.block_on(run_ops(store.clone(), ops, &hits))
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    // Not vacuous: over a store with cursor reads, the cases did merge deltas.
    if store.capabilities().cursor_reads {
        assert!(hits.load(Ordering::Relaxed) > 0, "no read was a cache hit");
    }
}

#[test]
fn cached_reads_equal_store_reads_in_memory() {
    check_property(|| async { InMemoryHistoryStore::new() }, 64);
}

#[test]
fn cached_reads_equal_store_reads_on_postgres() {
    check_property(
        || async {
            let url = std::env::var("AGENT_MEMORY_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            memory_sql::SqlStore::builder(url)
                .table_prefix(format!("amtest_v{}_", memory_sql::SCHEMA_VERSION))
                .connect()
                .await
                .unwrap_or_else(|e| {
                    panic!("the PostgreSQL server (AGENT_MEMORY_POSTGRES_URL) is required: {e}")
                })
        },
        16,
    );
}

#[test]
fn cached_reads_equal_store_reads_on_redis() {
    check_property(
        || async {
            let url = std::env::var("AGENT_MEMORY_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            let prefix = format!(
                "amtest-layers-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            memory_redis::RedisStore::builder(&url)
                .key_prefix(prefix)
                .default_ttl(Duration::from_secs(2 * 3600))
                .connect()
                .await
                .unwrap_or_else(|e| {
                    panic!("the Redis at {url} (AGENT_MEMORY_REDIS_URL) is required: {e}")
                })
        },
        16,
    );
}
