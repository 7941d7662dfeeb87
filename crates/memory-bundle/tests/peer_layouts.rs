//! Bundles and migrations through the peers' layouts, on threads that repeat a message: Agent
//! Framework's Redis list (a user who says "ok" three times, without `message_id`) and
//! LlamaIndex's table (rows Python wrote, copied into other tables). Importing again, resuming
//! after a crash and migrating (with its verification) must work for every target layout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Duration;

use memory_bundle::{Endpoint, NoProgress, Selection, Tenants, export, import, migrate};
use memory_core::{
    ChatMessage, HistoryStore, InMemorySessionStore, MessageId, Scope, StoredMessage, TenantId,
    Window,
};
use memory_redis::redis::AsyncCommands;
use memory_redis::{AfKeyFormat, AfRedisHistory};
use memory_sql::sqlx::{AssertSqlSafe, SqlitePool};
use memory_sql::{LlamaIndexConfig, LlamaIndexHistoryStore, SqlStore};

fn redis_url() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn unique(tag: &str) -> String {
    format!("{tag}{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

fn endpoint(history: Arc<dyn HistoryStore>) -> Endpoint {
    Endpoint::new(history, Arc::new(InMemorySessionStore::new()))
}

async fn sqlite_store() -> SqlStore {
    let dir = std::env::temp_dir().join("memory-bundle-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", uuid::Uuid::new_v4()));
    SqlStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

fn every_tenant() -> Selection {
    Selection::new(Tenants::one(
        TenantId::new(memory_core::scope::DEFAULT_TENANT).unwrap(),
    ))
}

async fn bundle_of(from: &Endpoint) -> Vec<u8> {
    let mut bundle = Vec::new();
    export(from, &every_tenant(), &mut bundle, &NoProgress)
        .await
        .unwrap();
    bundle
}

async fn everything(store: &dyn HistoryStore, scope: &Scope) -> Vec<StoredMessage> {
    store.read(scope, Window::Everything).await.unwrap()
}

fn ids(messages: &[StoredMessage]) -> Vec<MessageId> {
    messages.iter().map(|m| m.message.id.clone()).collect()
}

fn texts(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.text()).collect()
}

/// An element of Agent Framework's list as Python writes it, without `message_id`.
fn af_element(role: &str, text: &str) -> String {
    format!(
        r#"{{"type": "message", "role": "{role}", "contents": [{{"type": "text", "text": "{text}", "additional_properties": {{}}}}], "additional_properties": {{}}}}"#
    )
}

/// Agent Framework's thread where the user says "ok" three times and the assistant answers
/// "Sure." twice, no message with a `message_id`: imported into a native store, again, and
/// migrated both ways, every turn is kept under an id of its own.
#[tokio::test]
async fn an_agent_framework_thread_that_repeats_itself_imports_again_and_migrates() {
    let application = unique("bundle-repeats-");
    let af = AfRedisHistory::builder(&redis_url(), AfKeyFormat::scoped(&application))
        .default_ttl(Duration::from_secs(2 * 3600))
        .connect()
        .await
        .unwrap();
    let scope = Scope::session("ok-thrice").unwrap();
    let elements = [
        af_element("user", "ok"),
        af_element("assistant", "Sure."),
        af_element("user", "ok"),
        af_element("assistant", "Sure."),
        af_element("user", "ok"),
    ];
    let client = memory_redis::redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = af.key_for(&scope).unwrap();
    let _: i64 = conn.rpush(&key, &elements).await.unwrap();
    let _: bool = conn.expire(&key, 7200).await.unwrap();
    let source = everything(&af, &scope).await;
    let source_ids = ids(&source);
    assert_eq!(
        source_ids
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        5
    );

    let from = endpoint(Arc::new(af.clone()));
    let bundle = bundle_of(&from).await;
    let native = sqlite_store().await;
    let to = Endpoint::new(Arc::new(native.clone()), Arc::new(native.clone()));
    for run in 0..2 {
        let summary = import(&to, bundle.as_slice(), &NoProgress)
            .await
            .unwrap_or_else(|e| panic!("import {run}: {e}"));
        assert_eq!(summary.messages, 5);
        let imported = everything(&native, &scope).await;
        assert_eq!(ids(&imported), source_ids, "import {run}");
        assert_eq!(texts(&imported), texts(&source));
    }

    // Migrated into another native store (verified), twice.
    let other = sqlite_store().await;
    let target = Endpoint::new(Arc::new(other.clone()), Arc::new(other.clone()));
    let report = migrate(&from, &target, &every_tenant(), &NoProgress)
        .await
        .unwrap();
    assert_eq!((report.copied.messages, report.verified_threads), (5, 1));
    let again = migrate(&from, &target, &every_tenant(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(again.already_present, 5);

    // And back into another Agent Framework list: Python's bytes for the first of each, the
    // repeats with their ids, verified.
    let back_application = unique("bundle-repeats-back-");
    let back = AfRedisHistory::builder(&redis_url(), AfKeyFormat::scoped(&back_application))
        .default_ttl(Duration::from_secs(2 * 3600))
        .connect()
        .await
        .unwrap();
    let report = migrate(
        &to,
        &endpoint(Arc::new(back.clone())),
        &every_tenant(),
        &NoProgress,
    )
    .await
    .unwrap();
    assert_eq!(report.verified_threads, 1);
    assert_eq!(ids(&everything(&back, &scope).await), source_ids);
    let written: Vec<String> = conn
        .lrange(back.key_for(&scope).unwrap(), 0, -1)
        .await
        .unwrap();
    assert_eq!(written[..2], elements[..2]);
    let _: i64 = conn.del(&key).await.unwrap();
    let _: i64 = conn.del(back.key_for(&scope).unwrap()).await.unwrap();
}

/// Rows Python wrote in LlamaIndex's table, repeating a message (and a row with blocks we have
/// no part for): the bundle imports into another LlamaIndex table again and again, resumes
/// after a crash, and migrates (verified) into another table, also one that an older version
/// filled with the rows' bytes alone.
#[tokio::test]
async fn llamaindex_rows_import_again_and_migrate_into_another_table() {
    let path = std::env::temp_dir()
        .join("memory-bundle-tests")
        .join(format!("llamaindex-{}.db", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let url = format!("sqlite://{}", path.display());
    let table = |name: &str| {
        let url = url.clone();
        let config = LlamaIndexConfig::new().with_table_name(name);
        async move {
            LlamaIndexHistoryStore::connect_with(&url, config)
                .await
                .unwrap()
        }
    };
    let python = table("llama_index_memory").await;
    let ok = r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "ok"}]}"#;
    let sure = r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "thinking", "content": "Agree.", "num_tokens": null, "additional_information": {}}, {"block_type": "text", "text": "Sure."}]}"#;
    let rows = [ok, sure, ok, sure, ok, sure];
    let raw = SqlitePool::connect(&url).await.unwrap();
    let insert = |table: &'static str, data: &'static str, ts: i64, role: &'static str| {
        let raw = raw.clone();
        async move {
            memory_sql::sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {table} (key, timestamp, role, status, data) \
                 VALUES ('chat', ?, ?, 'active', ?)"
            )))
            .bind(ts)
            .bind(role)
            .bind(data)
            .execute(&raw)
            .await
            .unwrap();
        }
    };
    let role = |data: &str| if data == ok { "user" } else { "assistant" };
    for (i, data) in rows.iter().enumerate() {
        insert(
            "llama_index_memory",
            data,
            1_700_000_000_000_000_000 + i as i64,
            role(data),
        )
        .await;
    }
    let scope = Scope::session("chat").unwrap();
    let source = everything(&python, &scope).await;
    assert_eq!(source.len(), 6);
    let from = endpoint(Arc::new(python.clone()));
    let bundle = bundle_of(&from).await;

    // Into another table, twice.
    let copy = table("copy").await;
    let to = endpoint(Arc::new(copy.clone()));
    for run in 0..2 {
        import(&to, bundle.as_slice(), &NoProgress)
            .await
            .unwrap_or_else(|e| panic!("import {run}: {e}"));
        let copied = everything(&copy, &scope).await;
        assert_eq!(ids(&copied), ids(&source), "import {run}");
        assert_eq!(texts(&copied), texts(&source));
    }

    // Resumed after a crash that stored the first three rows.
    let resumed = table("resumed").await;
    let first: Vec<ChatMessage> = source[..3]
        .iter()
        .map(|m| m.message.as_ref().clone())
        .collect();
    resumed.append(&scope, &first).await.unwrap();
    import(
        &endpoint(Arc::new(resumed.clone())),
        bundle.as_slice(),
        &NoProgress,
    )
    .await
    .unwrap();
    assert_eq!(ids(&everything(&resumed, &scope).await), ids(&source));

    // Migrated, verified, twice.
    let migrated = endpoint(Arc::new(table("migrated").await));
    let report = migrate(&from, &migrated, &every_tenant(), &NoProgress)
        .await
        .unwrap();
    assert_eq!((report.copied.messages, report.verified_threads), (6, 1));
    let again = migrate(&from, &migrated, &every_tenant(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(again.already_present, 6);

    // A table an older version filled with the rows' bytes alone (its rows read under its own
    // name and time) takes the bundle again, and verifies.
    let legacy = table("legacy").await;
    for (i, data) in rows.iter().enumerate() {
        insert(
            "legacy",
            data,
            1_800_000_000_000_000_000 + i as i64,
            role(data),
        )
        .await;
    }
    let legacy = endpoint(Arc::new(legacy));
    import(&legacy, bundle.as_slice(), &NoProgress)
        .await
        .unwrap();
    let report = migrate(&from, &legacy, &every_tenant(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(report.verified_threads, 1);
    raw.close().await;
    let _ = std::fs::remove_file(&path);
}
