//! Connections cut in the middle of an append: the store reaches the machine's Redis through
//! memory-testkit's cutting TCP proxy, which closes every connection at points spread over one
//! append (before the script call, inside it, after it before the reply, inside the reply).
//! Each append is retried with the same ids until acknowledged; afterwards every message is
//! stored once, in order, with gap-free seqs, and no failed append left part of its batch.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use memory_redis::RedisStore;
use memory_testkit::fault_net::{
    Cut, CutProxy, cut_sweep, cut_sweep_where, server_addr, via_proxy,
};
use memory_testkit::fixtures::random_scope;

use crate::support;

/// A store with short timeouts, this process's key prefix and a TTL on its data.
async fn store_on(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .key_prefix(support::prefix())
        .default_ttl(support::TEST_DATA_TTL)
        .response_timeout(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// Cuts before the request, inside it, and after it before any of the reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_survive_connections_cut_before_the_reply() {
    let started = Instant::now();
    let url = support::standalone_url();
    let proxy = CutProxy::start(server_addr(&url)).await.unwrap();
    let through = store_on(&via_proxy(&url, &proxy)).await;
    let direct = store_on(&url).await;
    let report = cut_sweep_where(&proxy, &through, &direct, &random_scope(), |cut| {
        matches!(cut, Cut::AfterRequestBytes(_) | Cut::AfterReplyBytes(0))
    })
    .await;
    eprintln!("{url}: {report:?} in {:?}", started.elapsed());
}

/// Every cut point, also inside the reply. A reply cut short after its first bytes (e.g. 10 of
/// an append's reply) is what redis-rs reports as a `Parse` error; the append must fail with a
/// temporary `Unavailable` (the script may have run, the connection is gone), so the caller's
/// retry with the same ids stores the batch once. (Before the fix it was a permanent
/// `Serialization` error and the retry loop stopped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_survive_connections_cut_mid_append() {
    let started = Instant::now();
    let url = support::standalone_url();
    let proxy = CutProxy::start(server_addr(&url)).await.unwrap();
    let through = store_on(&via_proxy(&url, &proxy)).await;
    let direct = store_on(&url).await;
    let report = cut_sweep(&proxy, &through, &direct, &random_scope()).await;
    eprintln!("{url}: {report:?} in {:?}", started.elapsed());
}
