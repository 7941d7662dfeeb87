//! A request re-sent after its reply was lost (what the cluster client does after a lost
//! connection) runs its script a second time with the same nonce: it must get the reply of the
//! applied request. Against the machine's Redis (or `AGENT_MEMORY_REDIS_URL`), under a key
//! prefix of this test with a TTL on all its data.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use memory_core::{ChatMessage, ErrorKind, HistoryStore, Scope, SessionStore};
use serde_json::json;

use crate::RedisStore;

async fn store() -> RedisStore {
    let url = std::env::var("AGENT_MEMORY_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let prefix = format!("amtest-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    RedisStore::builder(&url)
        .key_prefix(prefix)
        .default_ttl(Duration::from_secs(3600))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("the Redis at {url} is needed by these tests: {e}"))
}

fn scope() -> Scope {
    Scope::session(format!("s-{}", uuid::Uuid::new_v4().simple())).unwrap()
}

#[tokio::test]
async fn a_resent_save_gets_its_own_version_not_a_conflict() {
    let store = store().await;
    let scope = scope();
    assert_eq!(
        store
            .save_once(&scope, &json!({"n": 1}), None, "nonce-1")
            .await
            .unwrap(),
        1
    );
    // The create, re-sent: its own save is there.
    assert_eq!(
        store
            .save_once(&scope, &json!({"n": 1}), None, "nonce-1")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .save_once(&scope, &json!({"n": 2}), Some(1), "nonce-2")
            .await
            .unwrap(),
        2
    );
    // The update, re-sent: the same new version, and nothing saved twice.
    assert_eq!(
        store
            .save_once(&scope, &json!({"n": 2}), Some(1), "nonce-2")
            .await
            .unwrap(),
        2
    );
    assert_eq!(store.load(&scope).await.unwrap().unwrap().version, 2);
    // Another writer with the same expected version still conflicts.
    let err = store
        .save_once(&scope, &json!({"n": 9}), Some(1), "nonce-other")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("at version 2"), "{err}");
    // Once a later save is applied, the old request no longer matches: a conflict.
    assert_eq!(
        store
            .save_once(&scope, &json!({"n": 3}), Some(2), "nonce-3")
            .await
            .unwrap(),
        3
    );
    let err = store
        .save_once(&scope, &json!({"n": 2}), Some(1), "nonce-2")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let stored = store.load(&scope).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.state), (3, json!({"n": 3})));
}

#[tokio::test]
async fn a_resent_create_of_a_recreated_session_gets_its_own_version() {
    let store = store().await;
    let scope = scope();
    store
        .save_once(&scope, &json!(1), None, "c-1")
        .await
        .unwrap();
    store
        .save_once(&scope, &json!(2), Some(1), "c-2")
        .await
        .unwrap();
    assert!(store.delete(&scope).await.unwrap());
    // Created again above its last version; the create re-sent gets that version.
    assert_eq!(
        store
            .save_once(&scope, &json!(3), None, "c-3")
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        store
            .save_once(&scope, &json!(3), None, "c-3")
            .await
            .unwrap(),
        3
    );
    let err = store
        .save_once(&scope, &json!(4), None, "c-4")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let stored = store.load(&scope).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.state), (3, json!(3)));
}

#[tokio::test]
async fn resent_archive_clear_and_delete_get_the_applied_reply() {
    let store = store().await;
    let scope = scope();
    let batch: Vec<_> = (0..5).map(|i| ChatMessage::user(format!("m{i}"))).collect();
    store.append(&scope, &batch).await.unwrap();

    assert_eq!(store.archive_once(&scope, 1..=2, "a-1").await.unwrap(), 2);
    assert_eq!(store.archive_once(&scope, 1..=2, "a-1").await.unwrap(), 2);
    assert_eq!(store.archive_once(&scope, 1..=2, "a-2").await.unwrap(), 0);
    assert_eq!(store.count(&scope).await.unwrap().active, 3);

    assert_eq!(store.clear_once(&scope, "c-1").await.unwrap(), 5);
    // Re-sent after another writer started the thread again: the reply of the applied clear,
    // and the new message is not cleared by it.
    store
        .append(&scope, &[ChatMessage::user("new")])
        .await
        .unwrap();
    assert_eq!(store.clear_once(&scope, "c-1").await.unwrap(), 5);
    assert_eq!(store.count(&scope).await.unwrap().active, 1);

    store.save(&scope, &json!(1), None).await.unwrap();
    assert!(store.delete_once(&scope, "d-1").await.unwrap());
    assert!(store.delete_once(&scope, "d-1").await.unwrap());
    assert!(!store.delete_once(&scope, "d-2").await.unwrap());
}
