//! Writer processes killed with SIGKILL mid-batch and writer processes racing, on a standalone
//! Redis (the machine's) and on the three-master test cluster: afterwards no acknowledged
//! message is lost, none is stored twice, a batch is all or nothing, seqs are gap-free and
//! each writer's messages keep their order. The harness is `memory_testkit::faults::writers`;
//! this binary re-executes itself as the writer children (`fault_writer_child`).
//!
//! CI runs smaller counts; `cargo xtask faults` (`AGENT_MEMORY_FAULTS_FULL=1`) runs the issue's
//! 16 writers in 2 processes × 1,000 appends.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::sync::Arc;

use memory_core::HistoryStore;
use memory_redis::RedisStore;
use memory_testkit::faults::writers::{
    self, KillOptions, RaceOptions, kill_and_resume, racing_processes,
};

/// The child test every writer process runs: nothing unless it was started as a writer.
const CHILD: &str = "fault_writer_child";

/// The target of a job: the parent's key prefix and the server's URL, so the children write
/// where the parent reads.
fn target(url: &str) -> String {
    format!("{} {url}", support::prefix())
}

/// Opens the store a job's target names, with a TTL on all its data.
async fn open(target: &str) -> RedisStore {
    let (prefix, url) = target
        .split_once(' ')
        .expect("a target is `<prefix> <url>`");
    RedisStore::builder(url)
        .key_prefix(prefix)
        .default_ttl(support::TEST_DATA_TTL)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to the Redis at {url}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_writer_child() {
    let Some(job) = writers::child_job() else {
        return;
    };
    let store = open(&job.target).await;
    writers::run_writer_job(Arc::new(store), &job).await;
}

async fn kill_test(engine: &str, url: &str) {
    let target = target(url);
    let store: Arc<dyn HistoryStore> = Arc::new(open(&target).await);
    let report = kill_and_resume(store, CHILD, &target, KillOptions::standard()).await;
    eprintln!("{engine}: kill and resume: {report:?}");
}

async fn race_test(engine: &str, url: &str, thread_per_writer: bool) {
    let target = target(url);
    let store: Arc<dyn HistoryStore> = Arc::new(open(&target).await);
    let options = RaceOptions::standard(thread_per_writer);
    let report = racing_processes(store, CHILD, &target, options).await;
    eprintln!("{engine}: race {options:?}: {report:?}");
}

mod standalone {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_writer_loses_and_doubles_nothing() {
        kill_test("redis", &support::standalone_url()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_one_thread_lose_and_double_nothing() {
        race_test("redis", &support::standalone_url(), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_sixteen_threads_lose_and_double_nothing() {
        race_test("redis", &support::standalone_url(), true).await;
    }
}

mod cluster {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_writer_loses_and_doubles_nothing() {
        kill_test("redis cluster", &support::cluster().url()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_one_thread_lose_and_double_nothing() {
        race_test("redis cluster", &support::cluster().url(), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_sixteen_threads_lose_and_double_nothing() {
        race_test("redis cluster", &support::cluster().url(), true).await;
    }
}
