//! The check of `search_matching`, written once for every trait that has it
//! ([`VectorStore`](memory_core::VectorStore) and [`TextIndex`](memory_core::TextIndex)): the
//! check sees the store through [`ScopedSearch`], which each suite implements for its trait.

use std::collections::BTreeSet;

use async_trait::async_trait;
use memory_core::{AgentId, ErrorKind, Result, Scope, ScopeFilter, SessionId, SourceId, UserId};
use uuid::Uuid;

use crate::delete_matching::six_scopes;
use crate::fixtures::{expect_error_kind, random_tenant};

/// A store of items kept per scope and searched across the scopes a [`ScopeFilter`] selects,
/// as the check sees it.
#[async_trait]
pub(crate) trait ScopedSearch: Sync {
    /// What an item is called in the check's messages (`"point"`, `"document"`).
    const ITEM: &'static str;

    /// Whether the store declares `search_matching`.
    fn searches_matching(&self) -> bool;
    /// Puts the item `id` in `scope`; every item put is found by the check's searches, with a
    /// score that decreases as `rank` grows.
    async fn put(&self, scope: &Scope, id: Uuid, rank: usize);
    /// The store's `search_matching` with the check's query: each hit's scope, id and score.
    async fn search_matching(
        &self,
        filter: &ScopeFilter,
        top_k: usize,
    ) -> Result<Vec<(Scope, Uuid, f32)>>;
}

/// Contract: `search_matching` (optional: `searches_matching`) finds the items of every scope a
/// filter selects (its tenant, and its user, agent, session and source when it names them) and
/// of no other, each with the scope it lives in (the same id in two scopes is two hits), at
/// most `top_k` of them (none for 0), by decreasing score. Without the capability it answers
/// `Unsupported`.
pub(crate) async fn search_matching_finds_exactly_the_selected_scopes<S: ScopedSearch + ?Sized>(
    store: &S,
) {
    let item = S::ITEM;
    let (tenant, other) = (random_tenant(), random_tenant());
    let scopes = six_scopes(&tenant, &other);
    if !store.searches_matching() {
        let filter = ScopeFilter::tenant(tenant.clone());
        expect_error_kind(
            store.search_matching(&filter, 10).await,
            ErrorKind::Unsupported,
            &format!("search_matching of a store without searches_matching ({item}s)"),
        );
        return;
    }
    // One item a scope, and the first one's id again in the second scope: two items.
    let shared = Uuid::new_v4();
    let mut items: Vec<(Scope, Uuid)> = Vec::new();
    for (rank, scope) in scopes.iter().enumerate() {
        let id = if rank == 0 { shared } else { Uuid::new_v4() };
        store.put(scope, id, rank).await;
        items.push((scope.clone(), id));
    }
    store.put(&scopes[1], shared, 6).await;
    items.push((scopes[1].clone(), shared));

    let base = || ScopeFilter::tenant(tenant.clone());
    let filters = [
        ("the tenant", base()),
        ("a user", base().with_user(UserId::new("u1").unwrap())),
        ("an agent", base().with_agent(AgentId::new("g1").unwrap())),
        (
            "a session id",
            base().with_session(SessionId::new("s1").unwrap()),
        ),
        (
            "a source",
            base().with_source(SourceId::new("memory.blocks").unwrap()),
        ),
        (
            "a user and a session id",
            base()
                .with_user(UserId::new("u1").unwrap())
                .with_session(SessionId::new("s2").unwrap()),
        ),
        (
            "a user of no scope",
            base().with_user(UserId::new("nobody").unwrap()),
        ),
    ];
    for (what, filter) in filters {
        let hits = store
            .search_matching(&filter, 100)
            .await
            .unwrap_or_else(|e| panic!("search_matching of {what} ({filter}): {e}"));
        let got: BTreeSet<(String, Uuid)> = hits.iter().map(|(s, id, _)| (s.key(), *id)).collect();
        let expected: BTreeSet<(String, Uuid)> = items
            .iter()
            .filter(|(s, _)| filter.matches(s))
            .map(|(s, id)| (s.key(), *id))
            .collect();
        assert_eq!(
            got, expected,
            "search_matching of {what} ({filter}) finds the {item}s of exactly the scopes it \
             selects, each with its scope"
        );
        assert_eq!(hits.len(), expected.len(), "{what}: no {item} twice");
        assert!(
            hits.windows(2).all(|w| w[0].2 >= w[1].2),
            "{what}: hits by decreasing score: {hits:?}"
        );
    }
    let two = store.search_matching(&base(), 2).await.unwrap();
    assert_eq!(
        two.len(),
        2,
        "top_k bounds the {item}s of a search across scopes"
    );
    let none = store.search_matching(&base(), 0).await.unwrap();
    assert!(none.is_empty(), "a top_k of 0 finds nothing");
    let unknown = ScopeFilter::tenant(random_tenant());
    assert!(
        store
            .search_matching(&unknown, 10)
            .await
            .unwrap()
            .is_empty(),
        "a tenant never written has no {item}s"
    );
}
