//! A server killed in the middle of a run of appends: the steps every backend's kill test
//! takes around the writer it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

/// A step done to a server a test runs: killing it, or starting it again.
pub type ServerStep<S> = fn(&mut S);

/// How long the writer of a kill test may take, kill and restart included.
const WRITER_LIMIT: Duration = Duration::from_secs(120);

/// Waits until the writer counts `at` acknowledged batches in `acked`, then, off the runtime's
/// threads, runs `kill` on `server`, sets `killed` (the writer waits for it), waits `down`
/// and runs `restart`. Returns the server, restarted.
///
/// # Panics
/// When `kill` or `restart` panics.
pub async fn kill_and_restart_after<S: Send + 'static>(
    server: S,
    (acked, at): (&AtomicUsize, usize),
    killed: Arc<AtomicBool>,
    down: Duration,
    (kill, restart): (ServerStep<S>, ServerStep<S>),
) -> S {
    while acked.load(Ordering::SeqCst) < at {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::task::spawn_blocking(move || {
        let mut server = server;
        kill(&mut server);
        killed.store(true, Ordering::SeqCst);
        std::thread::sleep(down);
        restart(&mut server);
        server
    })
    .await
    .unwrap()
}

/// The failed attempts the writer of a kill test reports, once it finished (within two
/// minutes); the kill must have failed at least one append.
///
/// # Panics
/// When the writer does not finish in time, panics, or saw no failure.
pub async fn failures_around_the_kill<T>(writer: JoinHandle<Vec<T>>) -> Vec<T> {
    let failures = tokio::time::timeout(WRITER_LIMIT, writer)
        .await
        .expect("the writer finishes")
        .unwrap();
    assert!(
        !failures.is_empty(),
        "the kill should have failed at least one append"
    );
    failures
}
