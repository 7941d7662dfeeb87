//! The check of `delete_matching` and `count_matching`, written once for every trait that has
//! them ([`VectorStore`](memory_core::VectorStore) and [`TextIndex`](memory_core::TextIndex)):
//! the check sees the store through [`ScopedItems`], which each suite implements for its trait.

use async_trait::async_trait;
use memory_core::{
    AgentId, ErrorKind, Result, Scope, ScopeFilter, SessionId, SourceId, TenantId, UserId,
};

use crate::fixtures::{ExpectOk, expect_error_kind, random_tenant, scope_owned_by};

/// A store of items kept per scope and deleted by [`ScopeFilter`], as the check sees it.
#[async_trait]
pub(crate) trait ScopedItems: Sync {
    /// What an item is called in the check's messages (`"point"`, `"document"`).
    const ITEM: &'static str;
    /// What the store is called in the check's messages (`"store"`, `"index"`).
    const HOLDER: &'static str;

    /// Whether the store declares `delete_matching` and `count_matching`.
    fn deletes_matching(&self) -> bool;
    /// Empties `scope`, then puts `n` new items in it, every one found by
    /// [`found`](Self::found).
    async fn reseed(&self, scope: &Scope, n: usize);
    /// How many items `scope` holds (`count`).
    async fn count(&self, scope: &Scope) -> u64;
    /// How many items a search of `scope` finds (at most 10).
    async fn found(&self, scope: &Scope) -> u64;
    /// The store's `delete_matching`.
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64>;
    /// The store's `count_matching`.
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64>;
}

/// Six scopes over two tenants, for the checks of the operations across scopes: in `tenant`,
/// u1's session s1 with agent g1, u1's s2, u2's s1 with g1, and s3 of no user with the source
/// `memory.blocks`; in `other`, u1's s1 with g1 and s3 of no user.
pub(crate) fn six_scopes(tenant: &TenantId, other: &TenantId) -> [Scope; 6] {
    [
        scope_owned_by(tenant, Some("u1"), Some("g1"), "s1"),
        scope_owned_by(tenant, Some("u1"), None, "s2"),
        scope_owned_by(tenant, Some("u2"), Some("g1"), "s1"),
        scope_owned_by(tenant, None, None, "s3")
            .with_source("memory.blocks")
            .expect("a valid source"),
        scope_owned_by(other, Some("u1"), Some("g1"), "s1"),
        scope_owned_by(other, None, None, "s3"),
    ]
}

/// Contract: `delete_matching` (optional: `deletes_matching`) removes every item of every scope
/// a filter selects (its tenant, and its user, agent, session and source when it names them)
/// and no other, and returns how many; `count_matching` returns that number beforehand and
/// changes nothing; repeating the delete removes nothing. Without the capability both answer
/// `Unsupported` and change nothing; so may a store for a filter naming a source it cannot
/// narrow by.
pub(crate) async fn delete_matching_removes_the_selected_scopes<S: ScopedItems + ?Sized>(
    store: &S,
) {
    let (item, holder) = (S::ITEM, S::HOLDER);
    let (tenant, other) = (random_tenant(), random_tenant());
    // Scope i holds i + 1 items.
    let scopes = six_scopes(&tenant, &other);
    let seed = async || {
        for (i, scope) in scopes.iter().enumerate() {
            store.reseed(scope, i + 1).await;
        }
    };
    let counts = async || {
        let mut out = Vec::new();
        for scope in &scopes {
            out.push(store.count(scope).await);
        }
        out
    };
    let filter = || ScopeFilter::tenant(tenant.clone());
    seed().await;
    if !store.deletes_matching() {
        for (operation, result) in [
            ("delete_matching", store.delete_matching(&filter()).await),
            ("count_matching", store.count_matching(&filter()).await),
        ] {
            expect_error_kind(
                result,
                ErrorKind::Unsupported,
                &format!("{operation} on a {holder} without the deletes_matching capability"),
            );
        }
        assert_eq!(
            counts().await,
            [1, 2, 3, 4, 5, 6],
            "a refused delete_matching changes nothing"
        );
        return;
    }
    let user = |u: &str| UserId::new(u).unwrap();
    let cases = [
        (filter(), [0, 0, 0, 0, 5, 6]),
        (filter().with_user(user("u1")), [0, 0, 3, 4, 5, 6]),
        (
            filter().with_agent(AgentId::new("g1").unwrap()),
            [0, 2, 0, 4, 5, 6],
        ),
        (
            filter().with_session(SessionId::new("s1").unwrap()),
            [0, 2, 0, 4, 5, 6],
        ),
        (
            filter()
                .with_user(user("u2"))
                .with_session(SessionId::new("s1").unwrap()),
            [1, 2, 0, 4, 5, 6],
        ),
        (filter().with_user(user("nobody")), [1, 2, 3, 4, 5, 6]),
        (
            filter().with_source(SourceId::new("memory.blocks").unwrap()),
            [1, 2, 3, 0, 5, 6],
        ),
        (
            filter()
                .with_user(user("u1"))
                .with_source(SourceId::new(memory_core::scope::DEFAULT_SOURCE).unwrap()),
            [0, 0, 3, 4, 5, 6],
        ),
    ];
    for (filter, expected) in cases {
        seed().await;
        if filter.source.is_some()
            && let Err(error) = store.count_matching(&filter).await
        {
            // A store that cannot narrow by source refuses, and deletes nothing.
            assert_eq!(
                error.kind(),
                ErrorKind::Unsupported,
                "count_matching({filter}): {error}"
            );
            expect_error_kind(
                store.delete_matching(&filter).await,
                ErrorKind::Unsupported,
                &format!("delete_matching({filter}) where count_matching was refused"),
            );
            assert_eq!(
                counts().await,
                [1, 2, 3, 4, 5, 6],
                "a refused delete_matching changes nothing"
            );
            continue;
        }
        let removed: u64 = 21 - expected.iter().sum::<u64>();
        assert_eq!(
            store
                .count_matching(&filter)
                .await
                .expect_ok("count_matching"),
            removed,
            "count_matching({filter}) counts the {item}s of the scopes it selects"
        );
        assert_eq!(
            counts().await,
            [1, 2, 3, 4, 5, 6],
            "count_matching({filter}) changes nothing"
        );
        assert_eq!(
            store
                .delete_matching(&filter)
                .await
                .expect_ok("delete_matching"),
            removed,
            "delete_matching({filter}) returns how many {item}s it removed"
        );
        assert_eq!(
            counts().await,
            expected,
            "delete_matching({filter}) removes exactly the {item}s of the scopes it selects"
        );
        for (scope, &left) in scopes.iter().zip(&expected) {
            assert_eq!(
                store.found(scope).await,
                left,
                "search of {} after delete_matching({filter})",
                scope.key()
            );
        }
        assert_eq!(
            store
                .delete_matching(&filter)
                .await
                .expect_ok("delete_matching again"),
            0,
            "delete_matching({filter}) again removes nothing"
        );
        assert_eq!(
            store
                .count_matching(&filter)
                .await
                .expect_ok("count_matching"),
            0
        );
        assert_eq!(
            counts().await,
            expected,
            "a repeated delete_matching changes nothing"
        );
    }
}
