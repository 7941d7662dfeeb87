//! A bounded load on a real server on 127.0.0.1:0, on every backend (SQLite file, PostgreSQL,
//! MariaDB, Redis): 16 concurrent clients on one thread — 12 appenders, each appending 48
//! messages with ids of its own in batches of 2 (every 4th batch sent twice, as a retry), and 4
//! readers reading windows and the memory context meanwhile. Then nothing acknowledged may be
//! lost, nothing stored twice, and every client must have seen one order (memory-testkit's
//! `http_load`, which `cargo xtask load` runs at larger counts).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use memory_testkit::http_load::{self, LoadPlan, LoadTarget};
use support::{Kind, TOKEN_A, TestServer};

async fn sixteen_clients_on_one_thread(kind: Kind) {
    let mut srv = TestServer::start(kind, "load").await;
    let plan = LoadPlan {
        appenders: 12,
        readers: 4,
        appends: 24,
        batch: 2,
        retry_every: 4,
        context_token_limit: 1_000,
        session: "load-thread".to_owned(),
    };
    let target = LoadTarget {
        base: srv.base.clone(),
        token: Some(TOKEN_A.to_owned()),
        client: srv.client.clone(),
    };
    let run = http_load::run(&target, &plan).await;
    let verified = run
        .verify()
        .unwrap_or_else(|problems| panic!("{}: {}", kind.name(), problems.join("\n")));
    assert_eq!(verified.messages, 12 * 48, "{}", kind.name());
    assert_eq!(verified.retried_batches, 12 * 6, "{}", kind.name());
    // Every reader read at least twice (once while appends ran or after, once more after).
    assert!(verified.reads >= 4 * 4, "{}: {verified:?}", kind.name());
    assert!(
        run.readers.iter().all(|r| !r.contexts.is_empty()),
        "{}",
        kind.name()
    );
    srv.stop().await;
}

support::on_each_kind!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    sixteen_clients_on_one_thread:
        sixteen_clients_on_one_thread_on_sqlite => Sqlite,
        sixteen_clients_on_one_thread_on_postgres => Postgres,
        sixteen_clients_on_one_thread_on_mariadb => Mysql,
        sixteen_clients_on_one_thread_on_redis => Redis,
);
