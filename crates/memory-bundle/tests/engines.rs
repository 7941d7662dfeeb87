//! Migrations and bundles between the real engines on this machine: SQLite files, PostgreSQL,
//! Redis and MariaDB (each test on its own random tenants, so runs never collide). A store
//! without `paged_reads` is read through the `Window::Everything` fallback; one with it, page
//! by page: these tests run whichever each store has.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use memory_bundle::{Endpoint, NoProgress, Selection, export, import, migrate};
use memory_core::{ErrorKind, TenantId};
use memory_redis::RedisStore;
use memory_sql::SqlStore;
use support::*;

fn postgres_url() -> String {
    std::env::var("AGENT_MEMORY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn mysql_url() -> String {
    std::env::var("AGENT_MEMORY_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

fn redis_url() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The table prefix memory-sql's server suites share (random tenants keep runs apart).
fn shared_prefix() -> String {
    format!("amtest_v{}_", memory_sql::SCHEMA_VERSION)
}

fn sql(store: SqlStore) -> Endpoint {
    Endpoint::new(Arc::new(store.clone()), Arc::new(store))
}

async fn sqlite() -> Endpoint {
    let dir = std::env::temp_dir().join("memory-bundle-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", uuid::Uuid::new_v4()));
    sql(SqlStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open a SQLite file"))
}

async fn postgres() -> Endpoint {
    sql(SqlStore::builder(postgres_url())
        .table_prefix(shared_prefix())
        .connect()
        .await
        .expect("the PostgreSQL server (AGENT_MEMORY_POSTGRES_URL) is required"))
}

async fn mariadb() -> Endpoint {
    sql(SqlStore::builder(mysql_url())
        .table_prefix(shared_prefix())
        .connect()
        .await
        .expect("the MariaDB server (AGENT_MEMORY_MYSQL_URL) is required"))
}

async fn redis() -> Endpoint {
    let prefix = format!("amtest-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let store = RedisStore::builder(&redis_url())
        .key_prefix(prefix)
        .default_ttl(Duration::from_secs(2 * 3600))
        .connect()
        .await
        .expect("the Redis server (AGENT_MEMORY_REDIS_URL) is required");
    Endpoint::new(Arc::new(store.clone()), Arc::new(store))
}

fn tenant(tag: &str) -> String {
    format!("{tag}-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

async fn snapshot(
    ep: &Endpoint,
    tenants: &[String],
) -> Vec<(String, u64, bool, memory_core::ChatMessage)> {
    let mut all = Vec::new();
    for t in tenants {
        all.extend(dump(ep, t).await);
    }
    all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    all
}

async fn sessions(ep: &Endpoint, tenants: &[String]) -> Vec<(String, serde_json::Value)> {
    let mut all = Vec::new();
    for t in tenants {
        all.extend(dump_sessions(ep, t).await);
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// In memory → SQLite → PostgreSQL → Redis → MariaDB → SQLite: every hop verified by
/// `migrate`, and every hop compared message by message with the original.
#[tokio::test]
async fn migrate_across_every_engine() {
    let names = vec![tenant("acme"), tenant("zeta"), tenant("big")];
    let selection = Selection::tenants(names.iter().map(|n| TenantId::new(n).unwrap()));
    let origin = memory_endpoint();
    fill_sample_in(&origin, &names[0], &names[1]).await;
    fill_large_in(&origin, &names[2], 2, 1_500).await;
    let want = snapshot(&origin, &names).await;
    let want_sessions = sessions(&origin, &names).await;
    assert_eq!(want.len(), 9 + 3_000);

    let hops = [
        ("SQLite", sqlite().await),
        ("PostgreSQL", postgres().await),
        ("Redis", redis().await),
        ("MariaDB", mariadb().await),
        ("SQLite again", sqlite().await),
    ];
    let mut from = origin;
    for (name, to) in hops {
        let report = migrate(&from, &to, &selection, &NoProgress)
            .await
            .unwrap_or_else(|e| panic!("migrate into {name}: {e}"));
        assert_eq!(report.copied.messages, 3_009, "{name}");
        assert_eq!(report.verified_threads, 5, "{name}");
        assert_eq!(report.verified_sessions, 4, "{name}");
        assert_eq!(snapshot(&to, &names).await, want, "{name}");
        assert_eq!(sessions(&to, &names).await, want_sessions, "{name}");
        // Again: nothing copied, nothing duplicated.
        let again = migrate(&from, &to, &selection, &NoProgress).await.unwrap();
        assert_eq!(
            (again.copied.messages, again.already_present),
            (0, 3_009),
            "{name}"
        );
        from = to;
    }
}

/// Export from one engine, import into another, export again: the same bundle (threads in
/// each store's listing order aside, so compared as sorted lines).
#[tokio::test]
async fn a_bundle_moves_between_engines_unchanged() {
    let names = vec![tenant("acme"), tenant("zeta")];
    let selection = Selection::tenants(names.iter().map(|n| TenantId::new(n).unwrap()));
    let pg = postgres().await;
    fill_sample_in(&pg, &names[0], &names[1]).await;
    let mut bundle = Vec::new();
    let summary = export(&pg, &selection, &mut bundle, &NoProgress)
        .await
        .unwrap();
    assert_eq!(
        (summary.threads, summary.messages, summary.archived),
        (3, 9, 3)
    );
    for (name, to) in [
        ("Redis", redis().await),
        ("MariaDB", mariadb().await),
        ("SQLite", sqlite().await),
    ] {
        import(&to, bundle.as_slice(), &NoProgress)
            .await
            .unwrap_or_else(|e| panic!("import into {name}: {e}"));
        let mut again = Vec::new();
        export(&to, &selection, &mut again, &NoProgress)
            .await
            .unwrap();
        let mut a = body(&bundle);
        let mut b = body(&again);
        a.sort();
        b.sort();
        assert_eq!(a, b, "{name}");
        assert_eq!(
            snapshot(&to, &names).await,
            snapshot(&pg, &names).await,
            "{name}"
        );
    }
}

/// A migration into PostgreSQL whose appends fail after a few batches (the last one stored,
/// its answer lost), then run again: exact equality, no duplicate.
#[tokio::test]
async fn migrate_into_postgres_resumes_after_a_lost_answer() {
    let names = vec![tenant("big")];
    let selection = Selection::tenants(names.iter().map(|n| TenantId::new(n).unwrap()));
    let from = sqlite().await;
    fill_large_in(&from, &names[0], 3, 1_200).await;
    let pg = postgres().await;
    let mut failing = Wrapped::new(Arc::clone(&pg.history));
    failing.faults.appends_left = AtomicUsize::new(3);
    failing.faults.store_then_fail = true;
    let broken = Endpoint::new(Arc::new(failing), Arc::clone(&pg.sessions));
    let err = migrate(&from, &broken, &selection, &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let report = migrate(&from, &pg, &selection, &NoProgress).await.unwrap();
    assert!(report.already_present >= 3, "{report}");
    assert_eq!(report.copied.messages + report.already_present, 3_600);
    assert_eq!(snapshot(&pg, &names).await, snapshot(&from, &names).await);
    assert_eq!(sessions(&pg, &names).await, sessions(&from, &names).await);
}
