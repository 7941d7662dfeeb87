//! When writes are committed (`CommitPolicy`), and what holds whatever the policy: a read sees
//! every write that returned before it started, from any task; counts are exact under
//! concurrent writers and readers; a delete and a re-upsert of one id in one uncommitted run
//! leave the new document; a directory keeps what was committed (by `commit`, by a read, by
//! the last drop, or by every write with `EveryWrite`) across a reopen.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own small numbers.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::Arc;

use memory_core::{Scope, TextDocument, TextIndex, TextQuery};
use memory_lexical::{CommitPolicy, TantivyTextIndex};
use uuid::Uuid;

fn document(id: Uuid, text: &str) -> TextDocument {
    TextDocument {
        id,
        text: text.into(),
        payload: serde_json::Map::new(),
    }
}

async fn found(index: &dyn TextIndex, scope: &Scope, query: &str) -> Vec<Uuid> {
    index
        .search(scope, &TextQuery::new(query, 100))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// The documents committed in the directory, read by a tantivy reader of its own (no
/// writer lock needed): what a crash now would leave.
fn committed_in(dir: &Path) -> u64 {
    let index = tantivy::Index::open_in_dir(dir).unwrap();
    index.reader().unwrap().searcher().num_docs()
}

fn both_policies() -> [CommitPolicy; 2] {
    [CommitPolicy::BeforeRead, CommitPolicy::EveryWrite]
}

#[tokio::test]
async fn a_directory_commits_every_write_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let index = TantivyTextIndex::open_async(dir.path().join("text"))
        .await
        .unwrap();
    assert_eq!(index.commit_policy(), CommitPolicy::EveryWrite);
}

#[test]
fn before_read_is_the_default_in_memory_and_the_policy_is_per_handle() {
    let index = TantivyTextIndex::in_memory().unwrap();
    assert_eq!(index.commit_policy(), CommitPolicy::BeforeRead);
    let every = index.clone().with_commit_policy(CommitPolicy::EveryWrite);
    assert_eq!(every.commit_policy(), CommitPolicy::EveryWrite);
    assert_eq!(index.commit_policy(), CommitPolicy::BeforeRead);
    assert!(format!("{every:?}").contains("EveryWrite"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_seen_by_every_read_of_another_task_that_starts_after_it() {
    for policy in both_policies() {
        let index = Arc::new(
            TantivyTextIndex::in_memory()
                .unwrap()
                .with_commit_policy(policy),
        );
        let scope = Scope::session("ryw").unwrap();
        for i in 0..30u64 {
            let id = Uuid::new_v4();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let writer = {
                let (index, scope) = (Arc::clone(&index), scope.clone());
                tokio::spawn(async move {
                    index
                        .upsert(&scope, &[document(id, &format!("lantern{i} walrus"))])
                        .await
                        .unwrap();
                    tx.send(()).unwrap();
                })
            };
            let reader = {
                let (index, scope) = (Arc::clone(&index), scope.clone());
                tokio::spawn(async move {
                    rx.await.unwrap();
                    // Each read kind on its own: the first of them commits.
                    match i % 4 {
                        0 => assert_eq!(found(&*index, &scope, &format!("lantern{i}")).await, [id]),
                        1 => assert_eq!(index.get(&scope, &[id]).await.unwrap().len(), 1),
                        2 => assert_eq!(index.count(&scope).await.unwrap(), i + 1),
                        _ => assert_eq!(found(&*index, &scope, "walrus").await.len() as u64, i + 1),
                    }
                })
            };
            writer.await.unwrap();
            reader.await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_readers_lose_nothing_and_count_exactly() {
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    for policy in both_policies() {
        let index = Arc::new(
            TantivyTextIndex::in_memory()
                .unwrap()
                .with_commit_policy(policy),
        );
        let scope = Scope::session("busy").unwrap();
        let other = Scope::session("busy-other").unwrap();
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let (index, scope, other) = (Arc::clone(&index), scope.clone(), other.clone());
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in 0..EACH {
                    let id = Uuid::new_v4();
                    let text = format!("writer{w} note{i} teapot");
                    index.upsert(&scope, &[document(id, &text)]).await.unwrap();
                    index
                        .upsert(&other, &[document(id, "elsewhere")])
                        .await
                        .unwrap();
                    // This task's own write, read back at once.
                    let got = index.get(&scope, &[id]).await.unwrap();
                    assert_eq!(got.len(), 1);
                    assert_eq!(got[0].text, text);
                    mine.push(id);
                    if i % 5 == 4 {
                        // Delete one, re-upsert another: both right away.
                        assert_eq!(index.delete(&scope, &[mine[i - 4]]).await.unwrap(), 1);
                        let again = document(mine[i - 3], &format!("writer{w} again{i} teapot"));
                        index.upsert(&scope, &[again]).await.unwrap();
                    }
                }
            }));
        }
        for _ in 0..4 {
            let (index, scope) = (Arc::clone(&index), scope.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..40 {
                    let n = index.count(&scope).await.unwrap();
                    assert!(n <= (WRITERS * EACH) as u64);
                    assert!(found(&*index, &scope, "teapot").await.len() as u64 <= n.max(100));
                    tokio::task::yield_now().await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let deleted = WRITERS * (EACH / 5);
        let expected = (WRITERS * EACH - deleted) as u64;
        assert_eq!(index.count(&scope).await.unwrap(), expected, "{policy:?}");
        assert_eq!(index.count(&other).await.unwrap(), (WRITERS * EACH) as u64);
        assert_eq!(found(&*index, &scope, "again4").await.len(), WRITERS);
        assert_eq!(index.clear(&scope).await.unwrap(), expected);
        assert_eq!(index.count(&scope).await.unwrap(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_and_a_reupsert_of_one_id_in_one_uncommitted_run_leave_the_new_document() {
    let index = TantivyTextIndex::in_memory().unwrap();
    let scope = Scope::session("reupsert").unwrap();
    let id = Uuid::new_v4();
    index
        .upsert(&scope, &[document(id, "first walrus")])
        .await
        .unwrap();
    // The delete commits the upsert to count it, then stays pending itself; the two
    // upserts after it are pending too.
    assert_eq!(index.delete(&scope, &[id]).await.unwrap(), 1);
    index
        .upsert(&scope, &[document(id, "second lantern")])
        .await
        .unwrap();
    index
        .upsert(&scope, &[document(id, "third teapot")])
        .await
        .unwrap();
    assert_eq!(index.count(&scope).await.unwrap(), 1);
    let got = index.get(&scope, &[id]).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].text, "third teapot");
    assert!(found(&index, &scope, "walrus").await.is_empty());
    assert!(found(&index, &scope, "lantern").await.is_empty());
    assert_eq!(found(&index, &scope, "teapot").await, [id]);

    // Replaced twice with no read between, then deleted and re-upserted with no read between.
    let other = Uuid::new_v4();
    for text in ["one parcel", "two parcels", "three parcel boxes"] {
        index
            .upsert(&scope, &[document(other, text)])
            .await
            .unwrap();
    }
    assert_eq!(index.delete(&scope, &[other]).await.unwrap(), 1);
    assert_eq!(
        index.delete(&scope, &[other]).await.unwrap(),
        0,
        "already gone"
    );
    index
        .upsert(&scope, &[document(other, "four boxes")])
        .await
        .unwrap();
    assert_eq!(index.count(&scope).await.unwrap(), 2);
    assert_eq!(
        index.get(&scope, &[other]).await.unwrap()[0].text,
        "four boxes"
    );
    assert!(found(&index, &scope, "parcel").await.is_empty());
    // A clear pending with an upsert after it: the upsert stays.
    assert_eq!(index.clear(&scope).await.unwrap(), 2);
    index
        .upsert(&scope, &[document(id, "after the clear")])
        .await
        .unwrap();
    assert_eq!(index.count(&scope).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_keeps_what_was_committed_across_a_drop_and_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("text");
    let scope = Scope::session("durable").unwrap();
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    {
        let index = TantivyTextIndex::open_async(&path)
            .await
            .unwrap()
            .with_commit_policy(CommitPolicy::BeforeRead);
        index
            .upsert(&scope, &[document(a, "alpha walrus")])
            .await
            .unwrap();
        assert_eq!(
            committed_in(&path),
            0,
            "BeforeRead: pending until something commits"
        );
        index.commit().await.unwrap();
        assert_eq!(committed_in(&path), 1, "commit() made it durable");
        index.commit().await.unwrap();

        let every = index.clone().with_commit_policy(CommitPolicy::EveryWrite);
        every
            .upsert(&scope, &[document(b, "beta walrus")])
            .await
            .unwrap();
        assert_eq!(
            committed_in(&path),
            2,
            "EveryWrite: durable when it returned"
        );

        index
            .upsert(&scope, &[document(c, "gamma walrus")])
            .await
            .unwrap();
        assert_eq!(committed_in(&path), 2);
        // Both handles dropped: the last drop commits what is pending.
        drop(every);
        tokio::task::spawn_blocking(move || drop(index))
            .await
            .unwrap();
    }
    assert_eq!(committed_in(&path), 3);
    let index = TantivyTextIndex::open_async(&path).await.unwrap();
    assert_eq!(index.count(&scope).await.unwrap(), 3);
    let mut all = found(&index, &scope, "walrus").await;
    all.sort();
    let mut expected = vec![a, b, c];
    expected.sort();
    assert_eq!(all, expected);
    // A delete pending at the drop is committed too.
    let index = index.with_commit_policy(CommitPolicy::BeforeRead);
    assert_eq!(index.delete(&scope, &[b]).await.unwrap(), 1);
    tokio::task::spawn_blocking(move || drop(index))
        .await
        .unwrap();
    let index = TantivyTextIndex::open_async(&path).await.unwrap();
    assert_eq!(index.count(&scope).await.unwrap(), 2);
    assert!(index.get(&scope, &[b]).await.unwrap().is_empty());
}
