//! Fault tests on redis-server processes the tests start, kill and restart themselves.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::error::Error as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memory_core::{ErrorKind, HistoryStore, Scope, SessionStore, Window};
use memory_redis::RedisStore;
use memory_testkit::fault_net::{failures_around_the_kill, kill_and_restart_after};
use support::{RedisServer, message};

use crate::support;

/// The longest a call to a dead server may take before it fails.
const FAIL_FAST: Duration = Duration::from_secs(10);

async fn store_on(server: &RedisServer) -> RedisStore {
    RedisStore::builder(&server.url())
        .response_timeout(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap()
}

/// A writer appends batches continuously, retrying a failed batch with the same message ids
/// until it is acknowledged; in the middle of the run the server (AOF, fsync always) is killed
/// with SIGKILL and restarted on the same port and directory. Afterwards every acknowledged
/// message is there, once, in order, with gap-free seqs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_appends_survive_a_kill_and_restart() {
    const BATCHES: usize = 60;
    const PER_BATCH: usize = 3;
    let server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = store_on(&server).await;
    let scope = Scope::session("fault").unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));

    let writer = {
        let store = store.clone();
        let scope = scope.clone();
        let acked = acked.clone();
        let killed = killed.clone();
        tokio::spawn(async move {
            let mut failures = Vec::new();
            for b in 0..BATCHES {
                let batch: Vec<_> = (0..PER_BATCH)
                    .map(|i| message(&format!("b{b}-m{i}")))
                    .collect();
                let started = Instant::now();
                loop {
                    match store.append(&scope, &batch).await {
                        Ok(out) => {
                            let first = (b * PER_BATCH) as u64 + 1;
                            assert_eq!(
                                out.seqs,
                                (first..first + PER_BATCH as u64).collect::<Vec<_>>(),
                                "batch {b} lands contiguously after the previous ones"
                            );
                            // After a third of the batches, wait for the kill, so the
                            // next append meets the dead (or restarting) server however
                            // fast appends are.
                            if acked.fetch_add(1, Ordering::SeqCst) + 1 == BATCHES / 3 {
                                while !killed.load(Ordering::SeqCst) {
                                    tokio::time::sleep(Duration::from_millis(1)).await;
                                }
                            }
                            break;
                        }
                        Err(e) => {
                            assert!(
                                matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout),
                                "a failed append while the server restarts is temporary: {e}"
                            );
                            failures.push(e.kind());
                            assert!(
                                started.elapsed() < Duration::from_secs(60),
                                "batch {b} was not acknowledged within 60 s: {e}"
                            );
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            failures
        })
    };

    let server = kill_and_restart_after(
        server,
        (&acked, BATCHES / 3),
        killed,
        Duration::from_millis(700),
        (RedisServer::kill, RedisServer::restart),
    )
    .await;
    failures_around_the_kill(writer).await;

    let everything = store.read(&scope, Window::Everything).await.unwrap();
    let expected: Vec<String> = (0..BATCHES)
        .flat_map(|b| (0..PER_BATCH).map(move |i| format!("b{b}-m{i}")))
        .collect();
    let got: Vec<String> = everything
        .iter()
        .map(|m| m.message.id.as_str().to_owned())
        .collect();
    assert_eq!(got, expected, "every acknowledged message, once, in order");
    let seqs: Vec<u64> = everything.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=(BATCHES * PER_BATCH) as u64).collect::<Vec<_>>());
    drop(server);
}

/// While the server is down every call fails fast with `Unavailable`; once it is back the
/// store reconnects by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_fast_while_down_and_reconnect_after_restart() {
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = store_on(&server).await;
    let scope = Scope::session("reconnect").unwrap();
    store.append(&scope, &[message("before")]).await.unwrap();
    store
        .save(&scope, &serde_json::json!({"v": 1}), None)
        .await
        .unwrap();

    server.kill();
    for i in 0..4 {
        let started = Instant::now();
        let result = if i % 2 == 0 {
            store.append(&scope, &[message("during")]).await.map(|_| ())
        } else {
            store.load(&scope).await.map(|_| ())
        };
        let elapsed = started.elapsed();
        let err = result.expect_err("a call to a dead server fails");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "call {i}: {err}");
        assert!(elapsed < FAIL_FAST, "call {i} took {elapsed:?}");
        // A server that went away may come back; the error names the store and the call.
        assert!(err.is_temporary(), "call {i}: {err}");
        let operation = if i % 2 == 0 { "append" } else { "load" };
        assert_eq!(err.backend(), Some("redis"), "call {i}: {err}");
        assert_eq!(err.operation(), Some(operation), "call {i}: {err}");
    }

    let mut server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let started = Instant::now();
    loop {
        match store.append(&scope, &[message("after")]).await {
            Ok(_) => break,
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "no reconnect within 20 s: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let ids: Vec<String> = store
        .read(&scope, Window::All)
        .await
        .unwrap()
        .iter()
        .map(|m| m.message.id.as_str().to_owned())
        .collect();
    assert_eq!(ids, ["before", "after"]);
    assert_eq!(store.load(&scope).await.unwrap().unwrap().version, 1);
    server.kill();
}

/// With a password-protected server: the password is never in `Debug` output, and a wrong
/// password's error does not show it.
#[tokio::test]
async fn passwords_never_show() {
    let server = RedisServer::start(&["--requirepass", "hunter2"]);
    let url = format!("redis://:hunter2@127.0.0.1:{}", server.port());
    let store = RedisStore::connect(&url).await.unwrap();
    store.ping().await.unwrap();
    assert!(!format!("{store:?}").contains("hunter2"));

    let wrong = format!("redis://:hunter3@127.0.0.1:{}", server.port());
    let err = RedisStore::connect(&wrong).await.unwrap_err();
    let mut text = format!("{err} {err:?}");
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(&format!(" {s} {s:?}"));
        source = s.source();
    }
    assert!(!text.contains("hunter3"), "{text}");
    // A refused password does not pass by retrying.
    assert!(!err.is_temporary(), "{err}");
    assert_eq!(
        (err.backend(), err.operation()),
        (Some("redis"), Some("connect"))
    );
}
