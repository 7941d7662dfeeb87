//! `inspect`: a read-only look at real Redis servers: the machine's, private ones started with
//! the settings under test (an evicting policy, `CONFIG` renamed away), and the three-master
//! test cluster, before and after a master goes down.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::ErrorKind;
use memory_core::doctor::{Check, CheckStatus};
use memory_redis::{RedisConfig, RedisInspection, inspect};
use memory_testkit::error_text;
use support::RedisServer;

use crate::support;

fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:?}"))
}

fn quick() -> RedisConfig {
    let mut config = RedisConfig::default();
    config.connection_timeout = Duration::from_millis(500);
    config.response_timeout = Duration::from_secs(1);
    config
}

fn dbsize(port: u16) -> String {
    support::command_reply(port, &["DBSIZE"]).unwrap()
}

#[tokio::test]
async fn the_machines_redis_reports_its_actual_policy() {
    let raw = support::RawConn::standalone().await;
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory-policy");
    let reply = raw.run(&cmd).await.unwrap();
    let actual: Vec<String> = redis::from_redis_value(reply).unwrap();
    let actual = actual[1].clone();

    let found = inspect(&support::standalone_url(), &RedisConfig::default())
        .await
        .unwrap();
    assert!(!found.cluster);
    assert_eq!(found.nodes.len(), 1);
    let node = &found.nodes[0];
    assert_eq!(node.maxmemory_policy.as_deref(), Some(actual.as_str()));
    assert!(node.config_refused.is_none());
    assert!(
        node.server_version
            .as_deref()
            .unwrap()
            .starts_with("Redis ")
            || node
                .server_version
                .as_deref()
                .unwrap()
                .starts_with("Valkey ")
    );
    let checks = found.checks();
    assert_eq!(check(&checks, "connection").status, CheckStatus::Ok);
    let policy = check(&checks, "maxmemory-policy");
    let expected = if actual == "noeviction" {
        CheckStatus::Ok
    } else {
        CheckStatus::Warning
    };
    assert_eq!(policy.status, expected, "{policy}");
    assert!(policy.detail.contains(&actual), "{policy}");
    assert_eq!(check(&checks, "persistence").status, CheckStatus::Ok);
}

#[tokio::test]
async fn an_evicting_policy_is_a_warning_and_nothing_is_written() {
    let server = RedisServer::start(&["--maxmemory-policy", "allkeys-lru", "--appendonly", "yes"]);
    let found = inspect(&server.url(), &quick()).await.unwrap();
    let node = &found.nodes[0];
    assert_eq!(node.maxmemory_policy.as_deref(), Some("allkeys-lru"));
    assert_eq!(node.appendonly, Some(true));
    assert_eq!(node.save.as_deref(), Some(""));
    let checks = found.checks();
    let policy = check(&checks, "maxmemory-policy");
    assert_eq!(policy.status, CheckStatus::Warning);
    assert!(policy.detail.contains("allkeys-lru"), "{policy}");
    assert!(
        check(&checks, "persistence")
            .detail
            .contains("append-only file is on")
    );
    assert_eq!(dbsize(server.port()), ":0\r\n");
}

#[tokio::test]
async fn config_renamed_away_falls_back_to_info_or_reports_unknown() {
    // CONFIG gone, INFO still there: the policy is read from INFO memory.
    let server = RedisServer::start(&[
        "--maxmemory-policy",
        "volatile-lru",
        "--rename-command",
        "CONFIG",
        "",
    ]);
    let found = inspect(&server.url(), &quick()).await.unwrap();
    let node = &found.nodes[0];
    assert!(node.config_refused.is_some(), "{node:?}");
    assert_eq!(node.maxmemory_policy.as_deref(), Some("volatile-lru"));
    let checks = found.checks();
    assert_eq!(
        check(&checks, "maxmemory-policy").status,
        CheckStatus::Warning
    );
    assert_eq!(check(&checks, "connection").status, CheckStatus::Ok);

    // CONFIG and INFO gone: unknown, a warning, not an error.
    let server = RedisServer::start(&[
        "--rename-command",
        "CONFIG",
        "",
        "--rename-command",
        "INFO",
        "",
    ]);
    let found: RedisInspection = inspect(&server.url(), &quick()).await.unwrap();
    let node = &found.nodes[0];
    assert_eq!(node.maxmemory_policy, None);
    assert_eq!(node.server_version, None);
    let checks = found.checks();
    let policy = check(&checks, "maxmemory-policy");
    assert_eq!(policy.status, CheckStatus::Warning);
    assert!(policy.detail.starts_with("unknown"), "{policy}");
    assert!(
        checks.iter().all(|c| c.status != CheckStatus::Error),
        "{checks:?}"
    );
}

#[tokio::test]
async fn a_dead_port_and_a_refused_password_are_sentences_without_the_url() {
    let err = inspect("redis://:hunter2@127.0.0.1:1", &quick())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let text = error_text(&err);
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(!text.contains("://"), "the URL was repeated: {text}");
    assert!(err.to_string().contains("the server"), "{err}");

    // A server with a password, given the wrong one.
    let server = RedisServer::start(&["--requirepass", "right-one"]);
    let url = format!("redis://:hunter2@127.0.0.1:{}", server.port());
    let err = inspect(&url, &quick()).await.unwrap_err();
    let text = error_text(&err);
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(!text.contains("://"), "the URL was repeated: {text}");
    // The right one: inspected, and the password appears nowhere.
    let url = format!("redis://:right-one@127.0.0.1:{}", server.port());
    let found = inspect(&url, &quick()).await.unwrap();
    let text = format!("{found:?} {:?}", found.checks());
    assert!(!text.contains("right-one"), "{text}");

    let err = inspect("http://:hunter2@h", &quick()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!error_text(&err).contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cluster_master_is_checked_and_one_down_is_an_error() {
    // A cluster of its own: this test shuts a master down, and the other tests of the binary
    // share `support::cluster()`.
    let cluster = support::Cluster::start().unwrap();
    let found = inspect(&cluster.url(), &quick()).await.unwrap();
    assert!(found.cluster);
    let mut addresses: Vec<String> = found
        .nodes
        .iter()
        .map(|n| n.address.clone().unwrap())
        .collect();
    addresses.sort();
    let mut expected: Vec<String> = cluster
        .ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    expected.sort();
    assert_eq!(addresses, expected);
    let checks = found.checks();
    assert_eq!(
        check(&checks, "cluster").status,
        CheckStatus::Ok,
        "{checks:?}"
    );
    for address in &expected {
        assert_eq!(
            check(&checks, &format!("connection {address}")).status,
            CheckStatus::Ok
        );
        check(&checks, &format!("maxmemory-policy {address}"));
    }

    // One master goes down.
    let down = cluster.ports()[2];
    let _ = support::command_reply(down, &["SHUTDOWN", "NOSAVE"]);
    for _ in 0..50 {
        if support::command_reply(down, &["PING"]).is_none() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let found = inspect(&cluster.url(), &quick()).await.unwrap();
    let checks = found.checks();
    let summary = check(&checks, "cluster");
    assert_eq!(summary.status, CheckStatus::Error, "{checks:?}");
    assert!(
        summary.detail.contains(&format!("127.0.0.1:{down}")),
        "{summary}"
    );
    assert_eq!(
        check(&checks, &format!("connection 127.0.0.1:{down}")).status,
        CheckStatus::Error
    );
}
