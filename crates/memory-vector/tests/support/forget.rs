//! The checks of `delete_matching` and `count_matching` (a forget), shared by the stores'
//! tests: filters of each kind, other tenants, users, agents and sessions untouched, every
//! read empty afterwards, idempotent.

use std::sync::Arc;

use memory_core::ScopeFilter;
use memory_core::forget::{ForgetMode, Forgetter};
use memory_core::{
    AgentId, Scope, SessionId, TenantId, UserId, VectorPoint, VectorQuery, VectorStore,
};
use serde_json::json;
use uuid::Uuid;

fn scope(tenant: &str, user: Option<&str>, agent: Option<&str>, session: &str) -> Scope {
    let mut scope = Scope::session(session)
        .unwrap()
        .with_tenant(tenant)
        .unwrap();
    if let Some(user) = user {
        scope = scope.with_user(user).unwrap();
    }
    if let Some(agent) = agent {
        scope = scope.with_agent(agent).unwrap();
    }
    scope
}

fn filter(tenant: &str) -> ScopeFilter {
    ScopeFilter::tenant(TenantId::new(tenant).unwrap())
}

/// The same two caller ids in every scope (so a delete by Qdrant id could not tell them
/// apart), a third id of its own, and vectors near `[1, 0, 0]`.
const SHARED_IDS: [Uuid; 2] = [Uuid::from_u128(1), Uuid::from_u128(2)];

fn points(own: u128) -> Vec<VectorPoint> {
    let mut ids = SHARED_IDS.to_vec();
    ids.push(Uuid::from_u128(own));
    ids.into_iter()
        .enumerate()
        .map(|(i, id)| VectorPoint {
            id,
            vector: vec![1.0, 0.1 * i as f32, 0.0],
            payload: json!({"text": format!("point {i}"), "tenant": "acme", "user": "dana"})
                .as_object()
                .cloned()
                .unwrap(),
        })
        .collect()
}

/// Every read of `scope` finds its 3 points (`true`) or nothing (`false`).
async fn assert_reads<S: VectorStore + ?Sized>(store: &S, scope: &Scope, present: bool) {
    let expected = if present { 3 } else { 0 };
    let mut ids = SHARED_IDS.to_vec();
    ids.push(Uuid::from_u128(100));
    let all: Vec<Uuid> = (0..200).map(Uuid::from_u128).collect();
    assert_eq!(
        store.count(scope).await.unwrap(),
        expected,
        "count of {scope:?}"
    );
    assert_eq!(
        store.get(scope, &all).await.unwrap().len() as u64,
        expected,
        "get of {scope:?}"
    );
    let hits = store
        .search(scope, &VectorQuery::new(vec![1.0, 0.0, 0.0], 10))
        .await
        .unwrap();
    assert_eq!(hits.len() as u64, expected, "search of {scope:?}");
}

/// Runs every forget check on `store`, which must be empty (a fresh store or collection).
pub(crate) async fn run_forget_checks(store: Arc<dyn VectorStore>) {
    assert!(store.capabilities().deletes_matching);

    // An empty store (no collection or shard yet) forgets nothing.
    assert_eq!(store.count_matching(&filter("acme")).await.unwrap(), 0);
    assert_eq!(store.delete_matching(&filter("acme")).await.unwrap(), 0);

    let a = scope("acme", Some("dana"), Some("bot"), "s1");
    let b = scope("acme", Some("dana"), Some("bot"), "s2")
        .with_source("other-source")
        .unwrap();
    let c = scope("acme", Some("eve"), Some("bot"), "s1");
    let d = scope("acme", None, None, "s1");
    let e = scope("globex", Some("dana"), Some("bot"), "s1");
    let f = scope("acme", Some("dana"), None, "s3");
    // A tenant whose name is a prefix of another's, and a user id that is the tenant's name.
    let g = scope("acm", Some("acme"), Some("bot"), "s1");
    let all = [&a, &b, &c, &d, &e, &f, &g];
    for (i, s) in all.iter().enumerate() {
        store.upsert(s, &points(100 + i as u128)).await.unwrap();
    }
    for s in all {
        assert_reads(&*store, s, true).await;
    }

    let dana = filter("acme").with_user(UserId::new("dana").unwrap());
    let dana_s1 = dana.clone().with_session(SessionId::new("s1").unwrap());

    // A dry run counts and changes nothing.
    let forgetter = Forgetter::new().vectors(Arc::clone(&store));
    let dry = forgetter
        .forget(&dana_s1, ForgetMode::DryRun)
        .await
        .unwrap();
    assert_eq!(dry.total_items(), 3);
    assert_eq!(store.count_matching(&dana).await.unwrap(), 9);
    for s in all {
        assert_reads(&*store, s, true).await;
    }

    // User and session: only `a`.
    let receipt = forgetter
        .forget(&dana_s1, ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(receipt.stores.len(), 1);
    assert_eq!(receipt.stores[0].store, "vectors");
    assert_eq!(receipt.stores[0].items, 3);
    assert_eq!(receipt.stores[0].unit, "points");
    assert_reads(&*store, &a, false).await;
    for s in [&b, &c, &d, &e, &f, &g] {
        assert_reads(&*store, s, true).await;
    }
    // Idempotent.
    assert_eq!(store.delete_matching(&dana_s1).await.unwrap(), 0);
    assert_eq!(store.count_matching(&dana_s1).await.unwrap(), 0);

    // A user, whatever the source, agent or session: `b` (another source) and `f` (no agent).
    assert_eq!(store.count_matching(&dana).await.unwrap(), 6);
    assert_eq!(store.delete_matching(&dana).await.unwrap(), 6);
    for s in [&a, &b, &f] {
        assert_reads(&*store, s, false).await;
    }
    for s in [&c, &d, &e, &g] {
        assert_reads(&*store, s, true).await;
    }
    assert_eq!(store.delete_matching(&dana).await.unwrap(), 0);

    // An agent: `c`, not `d` (no agent), not `e` or `g` (other tenants).
    let bot = filter("acme").with_agent(AgentId::new("bot").unwrap());
    assert_eq!(store.count_matching(&bot).await.unwrap(), 3);
    assert_eq!(store.delete_matching(&bot).await.unwrap(), 3);
    assert_reads(&*store, &c, false).await;
    for s in [&d, &e, &g] {
        assert_reads(&*store, s, true).await;
    }

    // A session alone: `d`'s session is `s1` in this tenant; `e` and `g` share it elsewhere.
    let s1 = filter("acme").with_session(SessionId::new("s1").unwrap());
    assert_eq!(store.count_matching(&s1).await.unwrap(), 3);

    // The whole tenant: `d`; `e` and `g` stay, and so does every read of them.
    let receipt = forgetter
        .forget(&filter("acme"), ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(receipt.total_items(), 3);
    assert_reads(&*store, &d, false).await;
    for s in [&e, &g] {
        assert_reads(&*store, s, true).await;
    }
    let again = forgetter
        .forget(&filter("acme"), ForgetMode::Delete)
        .await
        .unwrap();
    assert_eq!(again.total_items(), 0);

    // A scope forgotten is written again as a new one.
    store.upsert(&a, &points(100)).await.unwrap();
    assert_reads(&*store, &a, true).await;
    assert_eq!(store.count_matching(&filter("acme")).await.unwrap(), 3);

    // The other tenants go too when asked.
    assert_eq!(store.delete_matching(&filter("globex")).await.unwrap(), 3);
    assert_eq!(store.delete_matching(&filter("acm")).await.unwrap(), 3);
    for s in [&e, &g] {
        assert_reads(&*store, s, false).await;
    }
    assert_reads(&*store, &a, true).await;
}
