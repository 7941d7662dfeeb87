//! `agent-memory migrate`, `export` and `import` against SQLite files and the real PostgreSQL,
//! MariaDB and Redis: 100,000 messages SQLite → PostgreSQL → Redis → MariaDB → SQLite compared
//! message by message, a migration killed half-way and resumed, and a bundle round trip.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_memory::{Scope, Stores};
use predicates::prelude::*;
use serde_json::Value;
use support::{Snapshot, TestStore, cli, json_of, seed, snapshot};

const TENANTS: [&str; 2] = ["default", "acme"];

/// Four threads in two tenants, with users, an agent and sessions.
fn scopes() -> Vec<Scope> {
    vec![
        Scope::session("s1").unwrap().with_user("u1").unwrap(),
        Scope::session("s2")
            .unwrap()
            .with_user("u2")
            .unwrap()
            .with_agent("planner")
            .unwrap(),
        Scope::session("s3")
            .unwrap()
            .with_tenant("acme")
            .unwrap()
            .with_user("u3")
            .unwrap(),
        Scope::session("s4").unwrap().with_tenant("acme").unwrap(),
    ]
}

/// Runs `migrate` from `from` to `to` over [`TENANTS`] and returns its JSON report.
fn migrate(from: &str, to: &str) -> Value {
    let output = cli()
        .args(["migrate", "--json", "--from", from, "--to", to])
        .args(TENANTS.iter().flat_map(|t| ["--tenant", t]))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "migrate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_of(&output)
}

/// Every message id of every thread is there once.
fn assert_no_duplicates(snapshot: &Snapshot) {
    for (thread, rows) in &snapshot.threads {
        let ids: HashSet<&Value> = rows.iter().map(|r| &r.3["id"]).collect();
        assert_eq!(ids.len(), rows.len(), "duplicates in {thread}");
        let seqs: Vec<u64> = rows.iter().map(|r| r.0).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{thread}: seqs {seqs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_100k_messages_through_every_backend() {
    const PER_THREAD: usize = 25_000;
    let started = Instant::now();
    let first = TestStore::sqlite();
    let source = support::open(&first).await;
    seed(&source, &scopes(), PER_THREAD, 700).await;
    let expected = snapshot(&source, &TENANTS).await;
    assert_eq!(expected.messages(), 100_000);
    assert_eq!(expected.sessions.len(), 4);
    eprintln!("seeded 100,000 messages in {:.1?}", started.elapsed());

    let chain = [
        first,
        TestStore::postgres("chain"),
        TestStore::redis("chain"),
        TestStore::mysql("chain"),
        TestStore::sqlite(),
    ];
    for hop in chain.windows(2) {
        let (from, to) = (&hop[0], &hop[1]);
        let t = Instant::now();
        let report = migrate(&from.url, &to.url);
        eprintln!(
            "{} -> {}: {:.1?}, {:.0} messages/s",
            from.name(),
            to.name(),
            t.elapsed(),
            report["messages_per_second"].as_f64().unwrap()
        );
        assert_eq!(report["copied"]["messages"], 100_000, "{report}");
        assert_eq!(report["copied"]["archived"], 4 * 700, "{report}");
        assert_eq!(report["already_present"], 0, "{report}");
        assert_eq!(report["verified_threads"], 4, "{report}");
        assert_eq!(report["verified_sessions"], 4, "{report}");
        assert!(report["messages_per_second"].as_f64().unwrap() > 0.0);
    }
    let last = support::open(&chain[4]).await;
    let got = snapshot(&last, &TENANTS).await;
    assert_no_duplicates(&got);
    // Every message: seq, token count, archive flag, id, role, parts, metadata, time.
    for (thread, rows) in &expected.threads {
        let copied = got
            .threads
            .get(thread)
            .unwrap_or_else(|| panic!("{thread} is missing"));
        assert_eq!(copied.len(), rows.len(), "{thread}");
        for (a, b) in rows.iter().zip(copied) {
            assert_eq!(a, b, "{thread}");
        }
    }
    assert_eq!(got, expected);
    // The people's report names the throughput.
    cli()
        .args(["migrate", "--from", &chain[0].url, "--to", &chain[4].url])
        .args(["--tenant", "default", "--tenant", "acme"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("100000 messages were already present")
                .and(predicate::str::contains("messages/s.")),
        );
    eprintln!("the whole chain test took {:.1?}", started.elapsed());
}

/// The messages `stores` holds in the threads of [`TENANTS`].
async fn messages_in(stores: &Stores) -> u64 {
    let mut total = 0;
    for tenant in TENANTS {
        let filter =
            agent_memory::ScopeFilter::tenant(agent_memory::TenantId::new(tenant).unwrap());
        let page = stores
            .history
            .list_threads(&filter, agent_memory::PageRequest::first(100))
            .await
            .unwrap();
        for scope in page.items {
            let count = stores.history.count(&scope).await.unwrap();
            total += count.active + count.archived;
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_migration_resumes_with_no_duplicate_and_no_loss() {
    const PER_THREAD: usize = 15_000;
    let from = TestStore::sqlite();
    let source = support::open(&from).await;
    seed(&source, &scopes(), PER_THREAD, 300).await;
    let expected = snapshot(&source, &TENANTS).await;
    let total = u64::try_from(expected.messages()).unwrap();
    let to = TestStore::postgres("resume");
    // Opening creates the tables before the migration starts.
    let target = support::open(&to).await;

    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agent-memory"))
        .env_remove(agent_memory::URL_ENV)
        .args(["migrate", "--from", &from.url, "--to", &to.url])
        .args(["--tenant", "default", "--tenant", "acme"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if messages_in(&target).await > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the migration copied nothing");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the migration ended before it was killed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    let partial = messages_in(&target).await;
    assert!(
        partial > 0 && partial < total,
        "killed after {partial} of {total} messages: not half-way"
    );
    assert_no_duplicates(&snapshot(&target, &TENANTS).await);

    // Resumed: the rest is copied, nothing twice.
    let report = migrate(&from.url, &to.url);
    let present = report["already_present"].as_u64().unwrap();
    assert!(present >= partial.min(1), "{report}");
    assert_eq!(
        report["copied"]["messages"].as_u64().unwrap() + present,
        total,
        "{report}"
    );
    let got = snapshot(&target, &TENANTS).await;
    assert_no_duplicates(&got);
    assert_eq!(got, expected);
    // A third run copies nothing.
    let again = migrate(&from.url, &to.url);
    assert_eq!(again["copied"]["messages"], 0, "{again}");
    assert_eq!(again["already_present"].as_u64().unwrap(), total);
}

#[tokio::test(flavor = "multi_thread")]
async fn export_then_import_gives_the_same_store() {
    for (from, to) in [
        (TestStore::sqlite(), TestStore::redis("bundle")),
        (TestStore::mysql("bundle"), TestStore::sqlite()),
    ] {
        let source = support::open(&from).await;
        seed(&source, &scopes(), 50, 5).await;
        let expected = snapshot(&source, &TENANTS).await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.jsonl");
        let exported = cli()
            .args([
                "--url",
                &from.url,
                "export",
                "--all-tenants",
                "--json",
                "-o",
            ])
            .arg(&file)
            .output()
            .unwrap();
        // A store that cannot list its tenants says so; then name them.
        let exported = if exported.status.success() {
            json_of(&exported)
        } else {
            let stderr = String::from_utf8_lossy(&exported.stderr).into_owned();
            assert!(
                stderr.starts_with("error: could not export the bundle"),
                "{stderr}"
            );
            let mut tenants = Vec::new();
            for tenant in TENANTS {
                let part = dir.path().join(format!("{tenant}.jsonl"));
                let out = cli()
                    .args([
                        "--url", &from.url, "export", "--tenant", tenant, "--json", "-o",
                    ])
                    .arg(&part)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                tenants.push((part, json_of(&out)));
            }
            for (part, _) in &tenants {
                cli()
                    .args(["--url", &to.url, "import"])
                    .arg(part)
                    .assert()
                    .success()
                    .stdout(predicate::str::starts_with("Imported "));
            }
            let got = snapshot(&support::open(&to).await, &TENANTS).await;
            assert_eq!(got, expected, "{} -> {}", from.name(), to.name());
            continue;
        };
        assert_eq!(exported["messages"], 200, "{exported}");
        let imported = cli()
            .args(["--url", &to.url, "--json", "import"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(imported.status.success());
        assert_eq!(json_of(&imported)["messages"], 200);
        // Importing again changes nothing.
        cli()
            .args(["--url", &to.url, "import"])
            .arg(&file)
            .assert()
            .success();
        let got = snapshot(&support::open(&to).await, &TENANTS).await;
        assert_eq!(got, expected, "{} -> {}", from.name(), to.name());
    }
    // To stdout: the bundle is the whole output, one JSON document per line.
    let store = TestStore::sqlite();
    seed(&support::open(&store).await, &scopes()[..1], 3, 0).await;
    let out = cli()
        .args(["--url", &store.url, "export"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() >= 5, "{text}");
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    // From standard input.
    let piped = TestStore::sqlite();
    cli()
        .args(["--url", &piped.url, "--json", "import", "-"])
        .write_stdin(text.clone())
        .assert()
        .success()
        .stdout(predicate::str::contains("\"messages\": 3"));
    assert_eq!(
        snapshot(&support::open(&piped).await, &TENANTS).await,
        snapshot(&support::open(&store).await, &TENANTS).await
    );
    // A truncated bundle is refused with a sentence.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&cut, lines[..lines.len() - 1].join("\n")).unwrap();
    cli()
        .args(["--url", &TestStore::sqlite().url, "import"])
        .arg(&cut)
        .assert()
        .failure()
        .stderr(predicate::str::starts_with(
            "error: could not import the bundle",
        ));
}
