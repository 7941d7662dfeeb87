//! The command and the peers' layouts: a bundle of Agent Framework's thread that repeats a
//! message imports whole (and again), and a Redis that holds Agent Framework's lists rather
//! than agent-memory's data is refused with a sentence, never "forgotten" with nothing deleted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;

use agent_memory::bundle::{Endpoint, NoProgress, Selection, Tenants};
use agent_memory::redis::redis::AsyncCommands;
use agent_memory::redis::{AfKeyFormat, AfRedisHistory};
use agent_memory::{InMemorySessionStore, Scope, TenantId};
use support::{TestStore, cli, json_of};

fn redis_url() -> String {
    memory_testkit::engines::redis_url()
}

/// An element of Agent Framework's list as Python writes it, without `message_id`.
fn af_element(role: &str, text: &str) -> String {
    format!(
        r#"{{"type": "message", "role": "{role}", "contents": [{{"type": "text", "text": "{text}", "additional_properties": {{}}}}], "additional_properties": {{}}}}"#
    )
}

/// Python's provider (`RedisHistoryProvider(application_id=…)`) after a user said "ok" three
/// times and the assistant answered "Sure." each time (six messages), no message with a
/// `message_id`: the store and its list's key.
async fn python_thread(application: &str, scope: &Scope) -> (AfRedisHistory, String) {
    let af = AfRedisHistory::builder(&redis_url(), AfKeyFormat::scoped(application))
        .connect()
        .await
        .unwrap();
    let key = af.key_for(scope).unwrap();
    let turn = [af_element("user", "ok"), af_element("assistant", "Sure.")];
    let elements: Vec<String> = std::iter::repeat_n(turn, 3).flatten().collect();
    let mut conn = redis_conn().await;
    let _: i64 = conn.rpush(&key, &elements).await.unwrap();
    let _: bool = conn.expire(&key, 7200).await.unwrap();
    (af, key)
}

async fn redis_conn() -> agent_memory::redis::redis::aio::MultiplexedConnection {
    agent_memory::redis::redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn unique(tag: &str) -> String {
    memory_testkit::engines::unique(tag)
}

/// `agent-memory import` of a bundle exported from Agent Framework's list where the user says
/// "ok" three times: every turn arrives (the repeats have ids of their own), and importing
/// again, as the error of a failed import says to, is a no-op that succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_of_an_agent_framework_thread_that_repeats_a_message_imports_whole_and_again() {
    let scope = Scope::session("ok-thrice").unwrap();
    let application = unique("cli-repeats");
    let (af, key) = python_thread(&application, &scope).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("af.jsonl");
    let mut out = std::fs::File::create(&bundle).unwrap();
    let from = Endpoint::new(Arc::new(af), Arc::new(InMemorySessionStore::new()));
    let selection = Selection::new(Tenants::one(TenantId::new("default").unwrap()));
    agent_memory::bundle::export(&from, &selection, &mut out, &NoProgress)
        .await
        .unwrap();
    drop(out);

    let target = TestStore::sqlite();
    for run in 0..2 {
        let output = cli()
            .args(["--url", &target.url, "--json", "import"])
            .arg(&bundle)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "import {run}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(json_of(&output)["messages"], 6, "import {run}");
    }
    let output = cli()
        .args([
            "--url",
            &target.url,
            "--json",
            "show",
            "--session",
            "ok-thrice",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let shown = json_of(&output);
    let texts: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["ok", "Sure.", "ok", "Sure.", "ok", "Sure."]);
    let _: i64 = redis_conn().await.del(&key).await.unwrap();
}

/// `forget --user` against a Redis that holds Agent Framework's lists and no agent-memory data
/// under the prefix: a sentence and exit 1, not "deleted 0" and exit 0; Python's lists are
/// left as they were.
#[tokio::test(flavor = "multi_thread")]
async fn forget_on_a_redis_of_agent_framework_lists_refuses_with_a_sentence() {
    let scope = Scope::session("dana-chat").unwrap();
    let application = unique("cli-forget");
    let (_af, key) = python_thread(&application, &scope).await;
    let store = TestStore::redis("afforget");
    for args in [
        &["forget", "--user", "dana"][..],
        &["forget", "--user", "dana", "--dry-run"],
        &["threads"],
    ] {
        let output = cli()
            .args(["--url", &store.url])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no agent-memory data with key prefix"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("Agent Framework"), "{args:?}: {stderr}");
        assert!(
            !String::from_utf8_lossy(&output.stdout).contains("deleted"),
            "{args:?}"
        );
    }
    let mut conn = redis_conn().await;
    let len: i64 = conn.llen(&key).await.unwrap();
    assert_eq!(len, 6, "Python's list was changed");
    let _: i64 = conn.del(&key).await.unwrap();
}
