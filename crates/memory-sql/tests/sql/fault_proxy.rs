//! Connections cut in the middle of an append: the store reaches the shared test server through
//! memory-testkit's cutting TCP proxy, which closes every connection at points spread over one
//! append (before a request, inside it, after it before the reply, inside the reply). Each
//! append is retried with the same ids until acknowledged; afterwards every message is stored
//! once, in order, with gap-free seqs, and no failed append left part of its batch.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(any(feature = "postgres", feature = "mysql"))]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use memory_sql::SqlStore;
use memory_testkit::fault_net::{CutProxy, cut_sweep, server_addr, via_proxy};
use memory_testkit::fixtures::random_scope;

use crate::support;

/// A store with short timeouts and one connection, so a cut is met by the append in flight
/// and a dead connection fails fast.
async fn store_on(url: &str) -> SqlStore {
    SqlStore::builder(url)
        .table_prefix(support::shared_prefix())
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(5))
        .busy_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

async fn sweep(url: &str) {
    let started = Instant::now();
    let proxy = CutProxy::start(server_addr(url)).await.unwrap();
    let through = store_on(&via_proxy(url, &proxy)).await;
    let direct = store_on(url).await;
    let report = cut_sweep(&proxy, &through, &direct, &random_scope()).await;
    eprintln!("{url}: {report:?} in {:?}", started.elapsed());
    through.close().await;
    direct.close().await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_appends_survive_connections_cut_mid_append() {
    sweep(&support::postgres_url()).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_appends_survive_connections_cut_mid_append() {
    sweep(&support::mysql_url()).await;
}
