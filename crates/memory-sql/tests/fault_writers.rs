//! Writer processes killed with SIGKILL mid-batch and writer processes racing, on every SQL
//! engine (SQLite file, PostgreSQL, MariaDB/MySQL): afterwards no acknowledged message is lost,
//! none is stored twice, a batch is all or nothing, seqs are gap-free and each writer's
//! messages keep their order. The harness is `memory_testkit::faults::writers`; this binary
//! re-executes itself as the writer children (`fault_writer_child`).
//!
//! CI runs smaller counts; `cargo xtask faults` (`AGENT_MEMORY_FAULTS_FULL=1`) runs the issue's
//! 16 writers in 2 processes × 1,000 appends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code fails loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::sync::Arc;

use memory_core::HistoryStore;
use memory_sql::SqlStore;
use memory_testkit::faults::writers::{
    self, KillOptions, RaceOptions, kill_and_resume, racing_processes,
};

/// The child test every writer process runs: nothing unless it was started as a writer.
const CHILD: &str = "fault_writer_child";

/// Opens the store a job's target names: the URL of a database, always with the test prefix.
async fn open(url: &str) -> SqlStore {
    SqlStore::builder(url)
        .table_prefix(support::shared_prefix())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("open the store of the fault tests: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_writer_child() {
    let Some(job) = writers::child_job() else {
        return;
    };
    let store = open(&job.target).await;
    writers::run_writer_job(Arc::new(store.clone()), &job).await;
    store.close().await;
}

async fn kill_test(engine: &str, url: &str) {
    let store = open(url).await;
    let shared: Arc<dyn HistoryStore> = Arc::new(store.clone());
    let report = kill_and_resume(shared, CHILD, url, KillOptions::standard()).await;
    eprintln!("{engine}: kill and resume: {report:?}");
    store.close().await;
}

async fn race_test(engine: &str, url: &str, thread_per_writer: bool) {
    let store = open(url).await;
    let shared: Arc<dyn HistoryStore> = Arc::new(store.clone());
    let options = RaceOptions::standard(thread_per_writer);
    let report = racing_processes(shared, CHILD, url, options).await;
    eprintln!("{engine}: race {options:?}: {report:?}");
    store.close().await;
}

/// A new SQLite file for one test, removed with its journal files when dropped.
struct SqliteFile {
    url: String,
    path: std::path::PathBuf,
}

impl SqliteFile {
    fn new() -> Self {
        let (url, path) = support::temp_sqlite_url();
        Self { url, path }
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = self.path.clone().into_os_string();
            name.push(suffix);
            let _ = std::fs::remove_file(name);
        }
    }
}

#[cfg(feature = "sqlite")]
mod sqlite_file {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_writer_loses_and_doubles_nothing() {
        let file = SqliteFile::new();
        kill_test("sqlite file", &file.url).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_one_thread_lose_and_double_nothing() {
        let file = SqliteFile::new();
        race_test("sqlite file", &file.url, false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_sixteen_threads_lose_and_double_nothing() {
        let file = SqliteFile::new();
        race_test("sqlite file", &file.url, true).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_writer_loses_and_doubles_nothing() {
        kill_test("postgres", &support::postgres_url()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_one_thread_lose_and_double_nothing() {
        race_test("postgres", &support::postgres_url(), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_sixteen_threads_lose_and_double_nothing() {
        race_test("postgres", &support::postgres_url(), true).await;
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_writer_loses_and_doubles_nothing() {
        kill_test("mysql", &support::mysql_url()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_one_thread_lose_and_double_nothing() {
        race_test("mysql", &support::mysql_url(), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writer_processes_on_sixteen_threads_lose_and_double_nothing() {
        race_test("mysql", &support::mysql_url(), true).await;
    }
}
