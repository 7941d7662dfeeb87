//! Server kills: a private PostgreSQL or MariaDB instance (the test's own, in a temporary
//! directory on a free port; never the machine's shared servers) is killed with SIGKILL in the
//! middle of a run of appends and restarted on the same port and data directory.
//!
//! Without the server binaries the tests print why and pass (under `CI=true` they fail).

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(any(feature = "postgres", feature = "mysql"))]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memory_core::HistoryStore;
use memory_sql::SqlStore;
use memory_testkit::fault_net::{
    append_until_acked, assert_thread, batch_messages, failures_around_the_kill,
    kill_and_restart_after,
};
use memory_testkit::fixtures::random_scope;

/// A private server the test can kill and restart.
trait KillableServer: Send + 'static {
    fn url(&self) -> String;
    fn kill(&mut self);
    fn restart(&mut self);
}

/// [`KillableServer`] for a testkit server, whose own methods have the same names.
macro_rules! killable {
    ($(#[$attr:meta])* $server:ty) => {
        $(#[$attr])*
        impl KillableServer for $server {
            fn url(&self) -> String {
                Self::url(self)
            }
            fn kill(&mut self) {
                Self::kill(self);
            }
            fn restart(&mut self) {
                Self::restart(self);
            }
        }
    };
}

killable!(
    #[cfg(feature = "postgres")]
    memory_testkit::fault_net::PrivatePostgres
);
killable!(
    #[cfg(feature = "mysql")]
    memory_testkit::fault_net::PrivateMariadb
);

/// A store with short timeouts, so calls to a dead server fail fast.
async fn store_on(url: &str) -> SqlStore {
    SqlStore::builder(url)
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(5))
        .busy_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to the private server {url}: {e}"))
}

/// A writer appends batches, retrying a failed batch with the same message ids until it is
/// acknowledged; after a third of them the server is killed with SIGKILL and restarted on the
/// same port and data directory. Afterwards every acknowledged message is there once, in
/// order, with gap-free seqs, and no failed append left part of its batch.
async fn acknowledged_appends_survive_a_kill<S: KillableServer>(server: S) {
    const BATCHES: usize = 45;
    const PER_BATCH: usize = 3;
    let started = Instant::now();
    let url = server.url();
    let store = Arc::new(store_on(&url).await);
    let observer = Arc::new(store_on(&url).await);
    let scope = random_scope();
    let acked = Arc::new(AtomicUsize::new(0));
    // Set once the server is killed: the writer waits for it after a third of the batches, so
    // its next append meets the dead (or restarting) server however fast appends are.
    let killed = Arc::new(AtomicBool::new(false));

    let writer = {
        let (store, observer, scope, acked, killed) = (
            store.clone(),
            observer.clone(),
            scope.clone(),
            acked.clone(),
            killed.clone(),
        );
        tokio::spawn(async move {
            let mut failures = Vec::new();
            for b in 0..BATCHES {
                failures.extend(
                    append_until_acked(
                        store.as_ref() as &dyn HistoryStore,
                        Some(observer.as_ref() as &dyn HistoryStore),
                        &scope,
                        &batch_messages(b, PER_BATCH),
                        (b * PER_BATCH) as u64 + 1,
                        Duration::from_secs(90),
                    )
                    .await,
                );
                if acked.fetch_add(1, Ordering::SeqCst) + 1 == BATCHES / 3 {
                    while !killed.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            failures
        })
    };

    let server = kill_and_restart_after(
        server,
        (&acked, BATCHES / 3),
        killed,
        Duration::from_millis(500),
        (S::kill, S::restart),
    )
    .await;
    let failures = failures_around_the_kill(writer).await;
    assert_thread(store.as_ref(), &scope, BATCHES, PER_BATCH).await;
    eprintln!(
        "{} failed attempts around the kill, {:?} in all; first: {}",
        failures.len(),
        started.elapsed(),
        failures[0]
    );
    store.close().await;
    observer.close().await;
    drop(server);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_acknowledged_appends_survive_a_kill_and_restart() {
    let Some(server) = memory_testkit::fault_net::PrivatePostgres::start() else {
        return;
    };
    acknowledged_appends_survive_a_kill(server).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_acknowledged_appends_survive_a_kill_and_restart() {
    let Some(server) = memory_testkit::fault_net::PrivateMariadb::start() else {
        return;
    };
    acknowledged_appends_survive_a_kill(server).await;
}
