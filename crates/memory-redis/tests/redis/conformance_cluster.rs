//! The memory-testkit suites against a Redis Cluster of three masters that the test tooling
//! starts on loopback ports (and stops when the test process ends). The store runs with its
//! default options (no TTL), the standalone suite covers the TTL-on-every-thread path.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

memory_testkit::history_store_tests!(
    mod redis_store_on_redis_cluster_history,
    async { support::cluster_store().await }
);
memory_testkit::session_store_tests!(
    mod redis_store_on_redis_cluster_session,
    async { support::cluster_store().await }
);
memory_testkit::vector_store_tests!(
    mod redis_vector_store_on_redis_cluster,
    async { support::cluster_vectors().await }
);
memory_testkit::memory_suite_tests!(mod redis_store_on_redis_cluster_memory, async {
    // One store holds the messages and the session states, as an application would use it.
    let store = std::sync::Arc::new(support::cluster_store().await);
    (store.clone(), store)
});
memory_testkit::forget_tests!(mod redis_store_on_redis_cluster_forget, async {
    // One store holds the messages and the session states; the engine has no vector store.
    let store = std::sync::Arc::new(support::cluster_store().await);
    (store.clone(), store)
});
memory_testkit::hostile_input_tests!(
    mod redis_store_on_redis_cluster_hostile,
    history: async { support::cluster_store().await },
    raw: async {
        (
            support::cluster_store().await,
            support::RedisRaw(support::RawConn::cluster().await),
        )
    },
    sessions: async { support::cluster_store().await },
);

/// The threads of the suite's random scopes spread over the masters: listing must find them on
/// every node, and every key of one thread must be in one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_spread_over_masters_and_list_from_all() {
    use memory_core::{ChatMessage, HistoryStore, PageRequest, Scope, ScopeFilter, TenantId};

    let store = support::cluster_store().await;
    let tenant = format!("t-{}", uuid::Uuid::new_v4().simple());
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..30 {
        let scope = Scope::session(format!("s-{i}"))
            .unwrap()
            .with_tenant(tenant.clone())
            .unwrap();
        store
            .append(&scope, &[ChatMessage::user("hi")])
            .await
            .unwrap();
        expected.insert(scope.key());
    }
    // Where the meta keys live: each master must hold some of them.
    let pattern = format!("{}:{{{tenant}|*}}:meta", support::prefix());
    let holders = masters_holding(&pattern);
    assert_eq!(holders, 3, "30 threads should land on all 3 masters");
    let filter = ScopeFilter::tenant(TenantId::new(tenant).unwrap());
    let mut listed = Vec::new();
    let mut request = PageRequest::first(7);
    loop {
        let page = store.list_threads(&filter, request).await.unwrap();
        listed.extend(page.items.iter().map(Scope::key));
        match page.next_cursor {
            Some(c) => request = PageRequest::after(7, c),
            None => break,
        }
    }
    assert_eq!(listed.len(), 30, "each thread once");
    assert_eq!(
        listed
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>(),
        expected
    );
}

/// `list_tenants` scans every master: tenants whose threads and sessions lie on all three are
/// each listed once, sorted, in pages; cleared threads and deleted sessions take their
/// tenants off. `read_page` runs in the thread's slot, one call per page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_list_from_every_master_and_pages_read_in_one_call() {
    use memory_core::{
        ChatMessage, HistoryStore, PageRequest, Scope, SessionStore, TenantId, Window,
    };

    // A prefix of its own: the listing sees this test's data alone.
    let prefix = format!("ampgc-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let cluster = support::cluster();
    let store = memory_redis::RedisStore::builder(&cluster.url())
        .key_prefix(&prefix)
        .connect()
        .await
        .unwrap();
    let scope = |tenant: usize| {
        Scope::session("s")
            .unwrap()
            .with_tenant(format!("t-{tenant:02}"))
            .unwrap()
    };
    for t in 0..30 {
        store
            .append(&scope(t), &[ChatMessage::user("hi")])
            .await
            .unwrap();
        store
            .save(&scope(t), &serde_json::json!({"t": t}), None)
            .await
            .unwrap();
    }
    // Where the meta keys live: each master must hold some of them.
    let pattern = format!("{prefix}:{{*}}:meta");
    let holders = masters_holding(&pattern);
    assert_eq!(
        holders, 3,
        "30 tenants' threads should land on all 3 masters"
    );
    for t in [3, 17] {
        assert_eq!(store.clear(&scope(t)).await.unwrap(), 1);
    }
    for t in [5, 17, 29] {
        assert!(store.delete(&scope(t)).await.unwrap());
    }

    async fn walk<F, Fut>(list: F) -> Vec<String>
    where
        F: Fn(PageRequest) -> Fut,
        Fut: std::future::Future<Output = memory_core::Result<memory_core::Page<TenantId>>>,
    {
        let mut listed = Vec::new();
        let mut request = PageRequest::first(7);
        loop {
            let page = list(request).await.unwrap();
            assert!(page.items.len() <= 7);
            listed.extend(page.items.iter().map(|t| t.as_str().to_owned()));
            match page.next_cursor {
                Some(c) => request = PageRequest::after(7, c),
                None => return listed,
            }
        }
    }
    let name = |t: usize| format!("t-{t:02}");
    let threads: Vec<String> = (0..30).filter(|t| ![3, 17].contains(t)).map(name).collect();
    assert_eq!(
        walk(|page| HistoryStore::list_tenants(&store, page)).await,
        threads
    );
    let sessions: Vec<String> = (0..30)
        .filter(|t| ![5, 17, 29].contains(t))
        .map(name)
        .collect();
    assert_eq!(
        walk(|page| SessionStore::list_tenants(&store, page)).await,
        sessions
    );

    // A paged read on a cluster: the thread's own slot, one call per page.
    let long = scope(0);
    let batch: Vec<ChatMessage> = (0..25)
        .map(|i| ChatMessage::user(format!("m{i}")))
        .collect();
    store.append(&long, &batch).await.unwrap();
    store.archive(&long, 2..=4).await.unwrap();
    store.read_page(&long, 0, 1).await.unwrap();
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let before = store.round_trips();
        let page = store.read_page(&long, after, 10).await.unwrap();
        assert_eq!(
            store.round_trips() - before,
            1,
            "one call for the page after {after}"
        );
        let Some(last) = page.last() else { break };
        after = last.seq;
        paged.extend(page);
    }
    assert_eq!(paged.len(), 26);
    assert_eq!(paged, store.read(&long, Window::Everything).await.unwrap());
    for t in 0..30 {
        store.clear(&scope(t)).await.unwrap();
        store.delete(&scope(t)).await.unwrap();
    }
}

/// How many of the test cluster's masters hold a meta key matching `pattern`.
fn masters_holding(pattern: &str) -> usize {
    support::cluster()
        .ports()
        .into_iter()
        .filter(|&port| {
            support::command_reply(port, &["SCAN", "0", "MATCH", pattern, "COUNT", "100000"])
                .unwrap()
                .contains(":meta")
        })
        .count()
}
