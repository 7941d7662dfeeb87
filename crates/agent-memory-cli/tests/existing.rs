//! Every command but `import`, `migrate`'s target and `upgrade` opens only a store that exists
//! at the current schema: a mistyped URL or prefix fails (exit 1, a sentence) and creates
//! nothing, an old schema is refused and left as it is, and `upgrade` migrates it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use agent_memory::sql::{SCHEMA_VERSION, SqlConfig, SqlStore};
use agent_memory::{ChatMessage, Scope};
use support::{TestStore, cli, json_of};

/// The commands that only read or delete: none may create or migrate anything.
const COMMANDS: [&[&str]; 7] = [
    &["threads"],
    &["show", "--session", "s1"],
    &["stats"],
    &["export", "--session", "s1"],
    &["forget", "--user", "dana"],
    &["forget", "--user", "dana", "--dry-run"],
    &["purge-expired"],
];

fn fails_with(url: Option<&str>, args: &[&str], dir: &std::path::Path, needle: &str) {
    let mut cmd = cli();
    cmd.current_dir(dir);
    if let Some(url) = url {
        cmd.args(["--url", url]);
    }
    let output = cmd.args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: could not open the store at "),
        "{args:?}: {stderr}"
    );
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(!stderr.contains("Error {"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("deleted"),
        "{args:?}"
    );
}

/// The prefix a `TestStore`'s URL names.
fn prefix_of(url: &str) -> String {
    url.rsplit_once("prefix=").unwrap().1.to_owned()
}

fn base_of(url: &str) -> String {
    url.split_once('?').unwrap().0.to_owned()
}

#[test]
fn a_missing_sqlite_file_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let url = format!("sqlite://{}", path.display());
    for args in COMMANDS {
        fails_with(Some(&url), args, dir.path(), "there is no SQLite file at");
    }
    fails_with(
        Some(&url),
        &["migrate", "--from", &url, "--to", "memory:"],
        dir.path(),
        "there is no SQLite file at",
    );
    // No --url: the default ./agent-memory.db is not created either.
    fails_with(
        None,
        &["forget", "--user", "dana"],
        dir.path(),
        "there is no SQLite file at",
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files were created: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_prefix_on_a_server_is_an_error_and_creates_no_table() {
    let dir = tempfile::tempdir().unwrap();
    for store in [TestStore::postgres("nopfx"), TestStore::mysql("nopfx")] {
        let name = store.name();
        let prefix = prefix_of(&store.url);
        for args in COMMANDS {
            fails_with(
                Some(&store.url),
                args,
                dir.path(),
                &format!("no agent-memory tables with prefix {prefix:?}"),
            );
        }
        assert!(
            tables(&base_of(&store.url), &prefix).await.is_empty(),
            "{name}: tables were created"
        );
    }
}

/// The tables of `prefix` on the server of `base`, from information_schema.
async fn tables(base: &str, prefix: &str) -> Vec<String> {
    let like = format!("{prefix}%");
    if base.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(base).await.unwrap();
        sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = ANY(current_schemas(false)) AND table_name LIKE $1",
        )
        .bind(&like)
        .fetch_all(&pool)
        .await
        .unwrap()
    } else {
        let pool = sqlx::MySqlPool::connect(base).await.unwrap();
        sqlx::query_scalar(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name LIKE ?",
        )
        .bind(&like)
        .fetch_all(&pool)
        .await
        .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_schema_is_refused_left_as_it_is_and_upgraded_on_request() {
    let dir = tempfile::tempdir().unwrap();
    // Cleaned up (tables dropped) when they go out of scope.
    let (sqlite, pg, my) = (
        TestStore::sqlite(),
        TestStore::postgres("oldv"),
        TestStore::mysql("oldv"),
    );
    let stores = [
        (
            sqlite.url.clone(),
            "agent_memory_".to_owned(),
            sqlite.url.clone(),
        ),
        (base_of(&pg.url), prefix_of(&pg.url), pg.url.clone()),
        (base_of(&my.url), prefix_of(&my.url), my.url.clone()),
    ];
    let scope = Scope::session("s1").unwrap();
    for (base, prefix, url) in &stores {
        let old = || {
            SqlStore::builder(base.as_str()).config(
                SqlConfig::new()
                    .with_table_prefix(prefix)
                    .__schema_version(3),
            )
        };
        // (This build cannot write to v3 tables: they stay empty until upgraded.)
        old().connect().await.unwrap().close().await;
        for args in COMMANDS {
            fails_with(Some(url), args, dir.path(), "at schema version 3");
        }
        let store = old().connect().await.unwrap();
        assert_eq!(store.schema_version().await.unwrap(), 3, "{url}");
        store.close().await;

        let output = cli()
            .args(["--url", url, "--json", "upgrade"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(json_of(&output)["schema"], "current");
        let store = old().connect().await.unwrap();
        assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        agent_memory::HistoryStore::append(&store, &scope, &[ChatMessage::user("new")])
            .await
            .unwrap();
        store.close().await;
        let output = cli()
            .args(["--url", url, "--json", "threads"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{url}");
        assert_eq!(json_of(&output).as_array().unwrap().len(), 1, "{url}");
    }
}

/// Every key of the Redis server under `prefix`, with its type, whether it has a TTL, and its
/// content (hash fields, sorted-set members with scores, list elements, string value), each
/// sorted where Redis keeps no order.
async fn redis_state(prefix: &str) -> std::collections::BTreeMap<String, String> {
    use redis::AsyncCommands;

    let client = redis::Client::open(memory_testkit::engines::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys = Vec::new();
    let keys_of_the_prefix = redis::ScanOptions::default()
        .with_pattern(format!("{prefix}*"))
        .with_count(1000);
    let mut scan = conn
        .scan_options::<String>(keys_of_the_prefix)
        .await
        .unwrap();
    while let Some(key) = scan.next_item().await {
        keys.push(key.unwrap());
    }
    drop(scan);
    let mut state = std::collections::BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let (command, args): (&str, &[&str]) = match kind.as_str() {
            "hash" => ("HGETALL", &[]),
            "zset" => ("ZRANGE", &["0", "-1", "WITHSCORES"]),
            "list" => ("LRANGE", &["0", "-1"]),
            "set" => ("SMEMBERS", &[]),
            _ => ("GET", &[]),
        };
        let mut items: Vec<Vec<u8>> = match kind.as_str() {
            "string" => {
                let value: Vec<u8> = redis::cmd(command)
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                vec![value]
            }
            _ => redis::cmd(command)
                .arg(&key)
                .arg(args)
                .query_async(&mut conn)
                .await
                .unwrap(),
        };
        if kind == "hash" {
            let mut pairs: Vec<Vec<u8>> = items.chunks(2).map(|pair| pair.concat()).collect();
            pairs.sort();
            items = pairs;
        } else if kind == "set" {
            items.sort();
        }
        state.insert(key, format!("{kind} ttl:{} {items:?}", ttl >= 0));
    }
    state
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_prefix_on_redis_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = TestStore::redis("nopfx");
    for args in COMMANDS {
        fails_with(
            Some(&store.url),
            args,
            dir.path(),
            &format!("no agent-memory data with key prefix {:?}", store.prefix()),
        );
    }
    assert!(
        redis_state(store.prefix()).await.is_empty(),
        "keys were written under a prefix that held none"
    );
}

/// On an existing Redis store, the commands that only read (a forget's dry run included)
/// write nothing: not the tenant's thread index a listing would build, not a purge's mark.
#[tokio::test(flavor = "multi_thread")]
async fn read_only_commands_write_nothing_on_redis() {
    let dir = tempfile::tempdir().unwrap();
    let store = TestStore::redis("readonly");
    let stores = support::open(&store).await;
    let scopes = [
        Scope::session("s1").unwrap().with_user("dana").unwrap(),
        Scope::session("s2").unwrap().with_user("dana").unwrap(),
    ];
    support::seed(&stores, &scopes, 5, 1).await;
    // As a store written before thread indexes existed: the first listing would build one.
    let client = redis::Client::open(memory_testkit::engines::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let index = format!("{}:{{default}}:threads", store.prefix());
    let removed: i64 = redis::cmd("DEL")
        .arg(&index)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(removed, 1, "the thread index is {index}");
    let before = redis_state(store.prefix()).await;
    let bundle = dir.path().join("out.jsonl");
    let bundle = bundle.to_str().unwrap();
    for args in [
        &["threads"][..],
        &["threads", "--user", "dana"],
        &["show", "--user", "dana", "--session", "s1"],
        &["show", "--user", "dana", "--session", "s1", "--all"],
        &["stats"],
        &["export", "-o", bundle],
        &["forget", "--user", "dana", "--dry-run"],
    ] {
        let output = cli()
            .args(["--url", &store.url, "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let after = redis_state(store.prefix()).await;
        let changed: Vec<&String> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert!(changed.is_empty(), "{args:?} wrote {changed:?}");
    }
    // The listing still finds both threads.
    let output = cli()
        .args(["--url", &store.url, "--json", "threads"])
        .output()
        .unwrap();
    assert_eq!(json_of(&output).as_array().unwrap().len(), 2);
}
