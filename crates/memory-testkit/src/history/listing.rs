//! The checks of [`list_threads`](memory_core::HistoryStore::list_threads): paging, filters,
//! and never another tenant's thread.

use std::collections::BTreeSet;

use memory_core::{AgentId, HistoryStore, Scope, ScopeFilter, SourceId, UserId};

use super::support::{append_new, list_all};
use crate::fixtures::{
    ExpectOk, assert_one_page_lists_all, numbered_messages, random_tenant, scope_in, scope_keys,
    scope_of, tenant_filter,
};

/// Contract: `list_threads` pages through the threads of the filter, each once, in a stable
/// order: the same order for every page size, the last page has no cursor, and every page
/// holds at most `limit` scopes.
pub async fn list_threads_pages_each_thread_once(store: &dyn HistoryStore) {
    let tenant = random_tenant();
    let mut expected = BTreeSet::new();
    for i in 1..=7 {
        let scope = scope_in(&tenant, &format!("s-{i}"));
        append_new(store, &scope, &numbered_messages("m", 1)).await;
        expected.insert(scope.key());
    }
    let filter = tenant_filter(&tenant);
    let reference = list_all(store, &filter, 2).await;
    assert_eq!(
        reference.len(),
        7,
        "paging by 2 lists 7 threads, each once: {reference:?}"
    );
    assert_eq!(
        scope_keys(&reference),
        expected,
        "the listing is exactly the tenant's threads"
    );
    for limit in [1, 2, 3, 7, 100] {
        assert_eq!(
            list_all(store, &filter, limit).await,
            reference,
            "paging by {limit} lists the same threads in the same order as paging by 2"
        );
    }
    let one_page = store
        .list_threads(&filter, memory_core::PageRequest::first(100))
        .await
        .expect_ok("list one big page");
    assert_one_page_lists_all(&one_page, &reference, "thread");
}

/// Contract: `list_threads` lists only the threads matching the filter's user, agent and source.
pub async fn list_threads_filters_by_user_agent_source(store: &dyn HistoryStore) {
    let tenant = random_tenant();
    let other_source = SourceId::new("other-src").expect("valid source");
    let mk = |session: &str, user: Option<&str>, agent: Option<&str>, source: Option<&SourceId>| {
        scope_of(&tenant, session, user, agent, source)
    };
    let s1 = mk("s-1", Some("u1"), Some("a1"), None);
    let s2 = mk("s-2", Some("u1"), Some("a2"), None);
    let s3 = mk("s-3", Some("u2"), Some("a1"), Some(&other_source));
    let s4 = mk("s-4", None, None, None);
    let s5 = mk("s-5", Some("u1"), Some("a1"), Some(&other_source));
    for scope in [&s1, &s2, &s3, &s4, &s5] {
        append_new(store, scope, &numbered_messages("m", 1)).await;
    }
    let u1 = UserId::new("u1").expect("valid");
    let a1 = AgentId::new("a1").expect("valid");
    let history = SourceId::new(memory_core::scope::DEFAULT_SOURCE).expect("valid");
    let base = tenant_filter(&tenant);
    let cases: Vec<(ScopeFilter, Vec<&Scope>, &str)> = vec![
        (base.clone(), vec![&s1, &s2, &s3, &s4, &s5], "tenant only"),
        (
            base.clone().with_user(u1.clone()),
            vec![&s1, &s2, &s5],
            "user u1",
        ),
        (
            base.clone().with_agent(a1.clone()),
            vec![&s1, &s3, &s5],
            "agent a1",
        ),
        (
            base.clone().with_source(other_source.clone()),
            vec![&s3, &s5],
            "source other-src",
        ),
        (
            base.clone().with_source(history),
            vec![&s1, &s2, &s4],
            "the default source",
        ),
        (
            base.clone().with_user(u1.clone()).with_agent(a1.clone()),
            vec![&s1, &s5],
            "user u1 and agent a1",
        ),
        (
            base.clone()
                .with_user(u1)
                .with_agent(a1)
                .with_source(other_source),
            vec![&s5],
            "user u1, agent a1 and source other-src",
        ),
        (
            base.with_user(UserId::new("nobody").expect("valid")),
            vec![],
            "a user with no thread",
        ),
    ];
    for (filter, want, why) in cases {
        let got = list_all(store, &filter, 2).await;
        assert_eq!(
            got.len(),
            want.len(),
            "filter {why}: each thread once, got {got:?}"
        );
        assert_eq!(
            scope_keys(&got),
            want.iter().map(|s| s.key()).collect(),
            "filter {why}"
        );
    }
}

/// Contract: a listing never crosses tenants: threads of another tenant with the very same
/// user, agent, source and session are not listed.
pub async fn list_threads_never_crosses_tenants(store: &dyn HistoryStore) {
    let (t1, t2) = (random_tenant(), random_tenant());
    let mut by_tenant = Vec::new();
    for tenant in [&t1, &t2] {
        let mut scopes = Vec::new();
        for i in 1..=3 {
            let scope = scope_in(tenant, &format!("s-{i}"))
                .with_user("same-user")
                .expect("valid user");
            append_new(store, &scope, &numbered_messages("m", 1)).await;
            scopes.push(scope);
        }
        by_tenant.push(scopes);
    }
    for (tenant, scopes) in [&t1, &t2].into_iter().zip(&by_tenant) {
        let got = list_all(store, &tenant_filter(tenant), 2).await;
        assert_eq!(
            scope_keys(&got),
            scope_keys(scopes),
            "tenant {tenant} lists exactly its own 3 threads"
        );
        assert!(
            got.iter().all(|s| s.tenant() == tenant),
            "no scope of another tenant is listed for {tenant}"
        );
    }
    assert!(
        list_all(store, &tenant_filter(&random_tenant()), 10)
            .await
            .is_empty(),
        "a tenant with no thread lists nothing"
    );
}
