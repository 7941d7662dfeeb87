//! The memory-testkit suites against a Redis Cluster of three masters that the test tooling
//! starts on loopback ports (and stops when the test process ends). The store runs with its
//! default options (no TTL), the standalone suite covers the TTL-on-every-thread path.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

memory_testkit::history_store_tests!(
    mod redis_store_on_redis_cluster_history,
    async { support::cluster_store().await }
);
memory_testkit::session_store_tests!(
    mod redis_store_on_redis_cluster_session,
    async { support::cluster_store().await }
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
    let cluster = support::cluster();
    let pattern = format!("{}:{{{tenant}|*}}:meta", support::prefix());
    let mut holders = 0;
    for port in cluster.ports() {
        let reply =
            support::command_reply(port, &["SCAN", "0", "MATCH", &pattern, "COUNT", "100000"])
                .unwrap();
        if reply.contains(":meta") {
            holders += 1;
        }
    }
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
