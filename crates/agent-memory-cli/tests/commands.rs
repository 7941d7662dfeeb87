//! The `agent-memory` binary against SQLite files and the real PostgreSQL, MariaDB and Redis:
//! threads, show, stats, forget (and its dry run), purge-expired, export formats, and errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use agent_memory::{Scope, TextDocument, Window};
use predicates::prelude::*;
use serde_json::Value;
use support::{TestStore, cli, json_of, seed, snapshot};

/// Two users' threads (u1: two sessions, u2: one) in the default tenant, and one thread in
/// tenant `other`.
fn scopes() -> (Vec<Scope>, Vec<Scope>, Scope) {
    let u1 = vec![
        Scope::session("s1").unwrap().with_user("u1").unwrap(),
        Scope::session("s2").unwrap().with_user("u1").unwrap(),
    ];
    let u2 = vec![Scope::session("s1").unwrap().with_user("u2").unwrap()];
    let other = Scope::session("s9")
        .unwrap()
        .with_tenant("other")
        .unwrap()
        .with_user("u1")
        .unwrap();
    (u1, u2, other)
}

async fn seeded(store: &TestStore) {
    let stores = support::open(store).await;
    let (u1, u2, other) = scopes();
    seed(&stores, &u1, 12, 2).await;
    seed(&stores, &u2, 5, 0).await;
    seed(&stores, std::slice::from_ref(&other), 3, 0).await;
}

fn run_json(url: &str, args: &[&str]) -> Value {
    let output = cli()
        .arg("--url")
        .arg(url)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "agent-memory {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_of(&output)
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_show_and_stats_on_every_backend() {
    for store in TestStore::every("inspect") {
        let name = store.name();
        seeded(&store).await;
        let threads = run_json(&store.url, &["threads"]);
        let threads = threads.as_array().unwrap();
        assert_eq!(threads.len(), 3, "{name}: {threads:?}");
        let s1 = threads
            .iter()
            .find(|t| t["user"] == "u1" && t["session"] == "s1")
            .unwrap();
        assert_eq!(s1["active"], 10, "{name}");
        assert_eq!(s1["archived"], 2, "{name}");
        assert_eq!(s1["last_seq"], 12, "{name}");
        let only_u2 = run_json(&store.url, &["threads", "--user", "u2"]);
        assert_eq!(only_u2.as_array().unwrap().len(), 1, "{name}");
        let other = run_json(&store.url, &["threads", "--tenant", "other"]);
        assert_eq!(other.as_array().unwrap().len(), 1, "{name}");

        let shown = run_json(&store.url, &["show", "--user", "u1", "--session", "s1"]);
        let messages = shown["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 10, "{name}");
        assert_eq!(messages[0]["seq"], 3, "{name}");
        assert!(messages[0]["tokens"].as_u64().unwrap() > 0, "{name}");
        assert_eq!(
            messages[0]["text"],
            support::message(0, 2).text(),
            "{name}: the text"
        );
        let all = run_json(
            &store.url,
            &["show", "--user", "u1", "--session", "s1", "--all"],
        );
        assert_eq!(all["messages"].as_array().unwrap().len(), 12, "{name}");
        let archived = run_json(
            &store.url,
            &["show", "--user", "u1", "--session", "s1", "--archived"],
        );
        let archived = archived["messages"].as_array().unwrap();
        assert_eq!(archived.len(), 2, "{name}");
        assert!(archived.iter().all(|m| m["archived"] == true), "{name}");
        let last = run_json(
            &store.url,
            &["show", "--user", "u1", "--session", "s1", "--last", "3"],
        );
        assert_eq!(last["messages"][0]["seq"], 10, "{name}");
        let state = run_json(
            &store.url,
            &["show", "--user", "u1", "--session", "s2", "--session-state"],
        );
        assert_eq!(state["state"]["format"], "agent-memory/session", "{name}");
        assert!(state["version"].as_u64().unwrap() >= 1, "{name}");
        assert!(
            state["state"].to_string().contains(r#""facts":["a","b"]"#),
            "{name}: {state}"
        );

        // Every tenant: on a store that lists its tenants, both; else a sentence saying so.
        for command in ["threads", "stats"] {
            let output = cli()
                .args(["--url", &store.url, "--json", command, "--all-tenants"])
                .output()
                .unwrap();
            if output.status.success() {
                let listed = json_of(&output);
                let tenants: std::collections::BTreeSet<&str> = listed
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|row| row["tenant"].as_str().unwrap())
                    .collect();
                assert_eq!(tenants.len(), 2, "{name} {command}: {listed}");
            } else {
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    stderr.starts_with("error: could not list the tenants of this store"),
                    "{name} {command}: {stderr}"
                );
            }
        }

        let stats = run_json(&store.url, &["stats"]);
        let row = &stats[0];
        assert_eq!(row["tenant"], "default", "{name}");
        assert_eq!(row["threads"], 3, "{name}");
        assert_eq!(row["messages"], 10 + 10 + 5, "{name}");
        assert_eq!(row["archived"], 4, "{name}");
        assert_eq!(row["sessions"], 3, "{name}");

        // The people's forms: a table with the thread and a sentence at the end.
        cli()
            .args(["--url", &store.url, "threads"])
            .assert()
            .success()
            .stdout(predicate::str::contains("u2").and(predicate::str::contains("3 threads.")));
        cli()
            .args([
                "--url",
                &store.url,
                "show",
                "--user",
                "u2",
                "--session",
                "s1",
            ])
            .assert()
            .success()
            .stdout(
                predicate::str::contains("thread 0 message 4")
                    .and(predicate::str::contains("5 messages.")),
            );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn forget_leaves_nothing_readable_and_dry_run_changes_nothing() {
    for store in TestStore::every("forget") {
        let name = store.name();
        seeded(&store).await;
        let stores = support::open(&store).await;
        // A text document of u1 where the backend has a text index, whose deletes do not
        // tell the documents' scopes apart.
        if let Some(texts) = stores.text_index() {
            let document = TextDocument {
                id: uuid::Uuid::new_v4(),
                text: "walrus lantern".to_owned(),
                payload: serde_json::Map::new(),
            };
            texts.upsert(&scopes().0[0], &[document]).await.unwrap();
        }
        let before = snapshot(&stores, &["default", "other"]).await;

        // A dry run counts and changes nothing.
        let receipt = run_json(&store.url, &["forget", "--user", "u1", "--dry-run"]);
        assert_eq!(receipt["dry_run"], true, "{name}");
        let history = &receipt["stores"][0];
        assert_eq!(history["store"], "history", "{name}");
        assert_eq!(
            history["items"], 24,
            "{name}: both of u1's threads, archived included"
        );
        assert_eq!(receipt["stores"][1]["items"], 2, "{name}: u1's sessions");
        assert_eq!(history["scopes"], 2, "{name}: u1's two threads");
        for store_receipt in receipt["stores"].as_array().unwrap() {
            let scopes = &store_receipt["scopes"];
            let items = store_receipt["items"].as_u64().unwrap();
            assert!(
                scopes.as_u64().is_some_and(|n| n > 0)
                    || (scopes.is_null() && items > 0)
                    || (scopes == 0 && items == 0),
                "{name}: {store_receipt}: scopes counts the scopes that held items, or is null \
                 where the store cannot tell them apart (never 0 scopes of some items)"
            );
        }
        assert_eq!(
            snapshot(&stores, &["default", "other"]).await,
            before,
            "{name}: the dry run changed the store"
        );
        cli()
            .args(["--url", &store.url, "forget", "--user", "u1", "--dry-run"])
            .assert()
            .success()
            .stdout(predicate::str::contains("would delete 24 messages"));

        // A whole tenant needs --yes.
        cli()
            .args(["--url", &store.url, "forget"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("add --yes"));
        assert_eq!(
            snapshot(&stores, &["default", "other"]).await,
            before,
            "{name}"
        );

        // The real forget.
        cli()
            .args(["--url", &store.url, "forget", "--user", "u1"])
            .assert()
            .success()
            .stdout(
                predicate::str::contains("deleted 24 messages")
                    .and(predicate::str::contains("deleted 2 sessions")),
            );
        // Nothing of u1 is readable through the command...
        assert_eq!(
            run_json(&store.url, &["threads", "--user", "u1"]),
            Value::Array(vec![]),
            "{name}"
        );
        for session in ["s1", "s2"] {
            let shown = run_json(
                &store.url,
                &["show", "--user", "u1", "--session", session, "--all"],
            );
            assert_eq!(shown["messages"], Value::Array(vec![]), "{name}");
            cli()
                .args(["--url", &store.url, "show", "--user", "u1"])
                .args(["--session", session, "--session-state"])
                .assert()
                .failure()
                .stderr(predicate::str::contains("no session state is stored"));
        }
        let stats = run_json(&store.url, &["stats"]);
        assert_eq!(stats[0]["threads"], 1, "{name}");
        assert_eq!(stats[0]["messages"], 5, "{name}");
        assert_eq!(stats[0]["archived"], 0, "{name}");
        assert_eq!(stats[0]["sessions"], 1, "{name}");
        // ... nor through the library.
        let (u1, u2, other) = scopes();
        for scope in &u1 {
            assert!(
                stores
                    .history
                    .read(scope, Window::Everything)
                    .await
                    .unwrap()
                    .is_empty(),
                "{name}"
            );
            assert_eq!(stores.history.count(scope).await.unwrap().archived, 0);
            assert!(
                stores.sessions.load(scope).await.unwrap().is_none(),
                "{name}"
            );
        }
        // Others are untouched: u2, and u1 in another tenant.
        let after = snapshot(&stores, &["default", "other"]).await;
        for scope in u2.iter().chain([&other]) {
            assert_eq!(
                after.threads.get(&scope.key()),
                before.threads.get(&scope.key()),
                "{name}"
            );
            assert_eq!(
                after.sessions.get(&scope.key()),
                before.sessions.get(&scope.key()),
                "{name}"
            );
        }
        // Forgetting again is idempotent: nothing left to delete.
        let again = run_json(&store.url, &["forget", "--user", "u1"]);
        assert_eq!(again["total_items"], 0, "{name}");
        // A whole tenant with --yes.
        let tenant = run_json(&store.url, &["forget", "--tenant", "other", "--yes"]);
        assert_eq!(tenant["stores"][0]["items"], 3, "{name}");
        assert!(
            snapshot(&stores, &["other"]).await.threads.is_empty(),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn purge_expired_prints_counts() {
    for store in TestStore::every("purge") {
        seeded(&store).await;
        let purged = run_json(&store.url, &["purge-expired"]);
        // Nothing has a time to live, so nothing is purged (a store without TTLs says null).
        assert!(
            purged["threads"] == 0 || purged["threads"].is_null(),
            "{}: {purged}",
            store.name()
        );
        assert!(purged["sessions"] == 0 || purged["sessions"].is_null());
        let stores = support::open(&store).await;
        assert_eq!(
            snapshot(&stores, &["default"]).await.messages(),
            12 + 12 + 5,
            "{}",
            store.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn export_one_thread_in_the_peers_formats() {
    let store = TestStore::sqlite();
    seeded(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let af = dir.path().join("af.json");
    cli()
        .args(["--url", &store.url, "export", "--format", "agent-framework"])
        .args(["--user", "u2", "--session", "s1", "--output"])
        .arg(&af)
        .assert()
        .success();
    let af: Value = serde_json::from_slice(&std::fs::read(&af).unwrap()).unwrap();
    assert_eq!(af["type"], "session");
    let text = af.to_string();
    assert!(text.contains("thread 0 message 4"), "{text}");
    let li = cli()
        .args(["--url", &store.url, "export", "--format", "llamaindex"])
        .args(["--user", "u2", "--session", "s1"])
        .output()
        .unwrap();
    assert!(li.status.success());
    let li = json_of(&li);
    let li = li.as_array().unwrap();
    assert_eq!(li.len(), 5);
    assert_eq!(li[0]["role"], "user");
    assert_eq!(li[1]["blocks"][0]["block_type"], "text");
    // One thread only: the session is required.
    cli()
        .args(["--url", &store.url, "export", "--format", "llamaindex"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--session"));
}

/// The password of every URL in the error tests; it must never be printed.
const SECRET: &str = "hunter2canary";

#[test]
fn errors_are_sentences_with_a_non_zero_exit() {
    // An unknown scheme.
    cli()
        .args(["--url", "ftp://x/y", "threads"])
        .assert()
        .failure()
        .stdout(predicate::str::is_empty())
        .stderr(
            predicate::str::starts_with("error: could not open the store at ftp://x/y\n")
                .and(predicate::str::contains(
                    "no agent-memory backend handles URLs",
                ))
                .and(predicate::str::contains("Error {").not()),
        );
    // Dead ports, with a password in the URL.
    for url in [
        format!("postgres://postgres:{SECRET}@127.0.0.1:1/test"),
        format!("mysql://root:{SECRET}@127.0.0.1:1/test"),
        format!("redis://:{SECRET}@127.0.0.1:1"),
    ] {
        let output = cli().args(["--url", &url, "stats"]).output().unwrap();
        assert!(!output.status.success(), "{url}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stderr.starts_with("error: could not open the store at "),
            "{stderr}"
        );
        assert!(stderr.contains(":***@127.0.0.1:1"), "{stderr}");
        assert!(
            !stderr.contains("Error {") && !stderr.contains("kind:"),
            "{stderr}"
        );
        assert!(
            !stderr.contains(SECRET) && !stdout.contains(SECRET),
            "{stderr}"
        );
    }
    // The password from the environment, and a wrong one on a live server.
    let output = cli()
        .env(
            agent_memory::URL_ENV,
            format!("redis://:{SECRET}@127.0.0.1:6379"),
        )
        .args(["threads"])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{all}");
    assert!(!all.contains(SECRET), "{all}");
    // --help shows the variable's name, never its value.
    let help = cli()
        .env(
            agent_memory::URL_ENV,
            format!("postgres://postgres:{SECRET}@127.0.0.1:5432/test"),
        )
        .args(["threads", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success());
    assert!(text.contains(agent_memory::URL_ENV), "{text}");
    assert!(!text.contains(SECRET), "{text}");
    // An unknown flag.
    cli()
        .args(["threads", "--no-such-flag"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "unexpected argument '--no-such-flag'",
        ));
    // An invalid id.
    cli()
        .args(["--url", "memory:", "show", "--session", "bad id!"])
        .assert()
        .failure()
        .stderr(predicate::str::starts_with(
            "error: the session \"bad id!\" is not a valid id",
        ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_that_works_is_never_printed() {
    // PostgreSQL trusts local connections, so a password in the URL is accepted and ignored.
    let store = TestStore::postgres("secret");
    let url = store.url.replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{SECRET}@"),
        1,
    );
    assert!(
        url.contains(SECRET),
        "the test's URL has no password: {url}"
    );
    seeded(&store).await;
    let copy = TestStore::sqlite();
    for args in [
        vec!["threads"],
        vec!["stats"],
        vec!["show", "--user", "u1", "--session", "s1"],
        vec!["forget", "--user", "u1", "--dry-run"],
        vec!["purge-expired"],
        vec!["doctor"],
        vec!["export", "--session", "s1"],
        vec![
            "migrate", "--from", &url, "--to", &copy.url, "--tenant", "default",
        ],
    ] {
        for json in [false, true] {
            let mut cmd = cli();
            cmd.args(["--url", &url]).args(&args);
            if json {
                cmd.arg("--json");
            }
            let output = cmd.output().unwrap();
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(output.status.success(), "{args:?}: {all}");
            assert!(!all.contains(SECRET), "{args:?}: {all}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_prints_the_diagnosis() {
    for store in TestStore::every("doctor") {
        let name = store.name();
        seeded(&store).await;
        // The URL as an argument, or --url.
        let by_arg = cli()
            .args(["--json", "doctor", &store.url])
            .output()
            .unwrap();
        let by_flag = cli()
            .args(["--json", "--url", &store.url, "doctor"])
            .output()
            .unwrap();
        for output in [&by_arg, &by_flag] {
            let diagnosis = json_of(output);
            let checks = diagnosis["checks"].as_array().unwrap();
            assert!(
                checks.iter().any(|c| c["name"] == "connection"),
                "{name}: {diagnosis}"
            );
            if name == "redis" {
                assert!(
                    checks.iter().any(|c| c["name"] == "maxmemory-policy"),
                    "{diagnosis}"
                );
            } else {
                let schema = checks.iter().find(|c| c["name"] == "schema version");
                assert_eq!(schema.unwrap()["status"], "ok", "{name}: {diagnosis}");
            }
            if name == "sqlite" {
                assert!(
                    checks.iter().any(|c| c["name"] == "journal mode"),
                    "{diagnosis}"
                );
            }
            // Exit 0 exactly when no check failed.
            let failed = checks.iter().any(|c| c["status"] == "error");
            assert_eq!(output.status.success(), !failed, "{name}: {diagnosis}");
        }
        cli()
            .args(["doctor", &store.url])
            .assert()
            .stdout(predicate::str::contains("connection"));
    }
    // A dead port: an unhealthy diagnosis, a non-zero exit, no password.
    let url = format!("postgres://postgres:{SECRET}@127.0.0.1:1/test");
    let output = cli().args(["doctor", &url]).output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{all}");
    assert!(all.contains("connection"), "{all}");
    assert!(all.contains("failed a check"), "{all}");
    assert!(!all.contains(SECRET), "{all}");
}
