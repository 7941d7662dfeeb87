//! `agent_memory::doctor` on every server backend of the machine: a reachable server gives a
//! diagnosis of its checks, a dead port a diagnosis whose `connection` check is an error (a
//! sentence), and no output ever shows a password.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use agent_memory::doctor::{CheckStatus, Diagnosis};
use agent_memory::{ErrorKind, doctor};

/// The text and JSON forms of a diagnosis, which must never show `secret`.
fn shown(d: &Diagnosis, secret: &str) -> String {
    let text = format!("{d}\n{}", serde_json::to_string(d).unwrap());
    assert!(!text.contains(secret), "the password leaked: {text}");
    text
}

#[tokio::test]
async fn dead_ports_are_unhealthy_diagnoses_with_a_sentence() {
    for (url, backend) in [
        ("postgres://postgres:hunter2@127.0.0.1:1/test", "postgres"),
        ("mysql://root:hunter2@127.0.0.1:1/test", "mysql"),
        ("mariadb://root:hunter2@127.0.0.1:1/test", "mysql"),
        ("redis://:hunter2@127.0.0.1:1", "redis"),
    ] {
        let d = doctor(url).await.unwrap();
        let text = shown(&d, "hunter2");
        println!("{text}");
        assert_eq!(d.backend, backend);
        assert!(d.url.contains("***"), "{}", d.url);
        assert!(!d.healthy(), "{text}");
        let connection = d.check("connection").unwrap();
        assert_eq!(connection.status, CheckStatus::Error);
        assert!(connection.detail.ends_with('.'), "{connection}");
        assert!(!connection.detail.contains("://"), "{connection}");
    }
}

#[tokio::test]
async fn reachable_servers_are_diagnosed() {
    for (url, backend) in [
        (
            "postgres://postgres:hunter2@127.0.0.1:5432/test",
            "postgres",
        ),
        ("mysql://root@127.0.0.1:3306/test", "mysql"),
    ] {
        let d = doctor(url).await.unwrap();
        let text = shown(&d, "hunter2");
        println!("{text}");
        assert_eq!(d.backend, backend);
        assert_eq!(
            d.check("connection").unwrap().status,
            CheckStatus::Ok,
            "{text}"
        );
        assert!(d.check("schema version").is_some(), "{text}");
        assert!(d.check("journal mode").is_none(), "{text}");
    }
}

#[tokio::test]
async fn redis_reports_its_policy() {
    let client = redis::Client::open("redis://127.0.0.1:6379").unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(&mut conn)
        .await
        .unwrap();
    let d = doctor("redis://127.0.0.1:6379").await.unwrap();
    println!("{d}");
    assert!(d.healthy(), "{d}");
    let policy = d.check("maxmemory-policy").unwrap();
    assert!(policy.detail.contains(&reply[1]), "{policy}");
    assert_eq!(policy.status == CheckStatus::Ok, reply[1] == "noeviction");
}

#[tokio::test]
async fn urls_it_cannot_use_are_errors() {
    let err = doctor("redis+cluster://:hunter2@").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!format!("{err} {err:?}").contains("hunter2"));
    let err = doctor("mongodb://h").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}
