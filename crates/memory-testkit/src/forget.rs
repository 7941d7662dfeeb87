//! The forget suite: [`Forgetter`] over one engine's history, session and (optionally) vector
//! stores, checked against every read API.
//!
//! Each check seeds two random tenants with threads (active and archived messages), session
//! states, a [`Memory`](memory_core::Memory)'s block states (under
//! [`BLOCK_STATE_SOURCE`]) and vector points, in
//! scopes that differ by user, agent, session and source, then forgets with one kind of
//! [`ScopeFilter`] and reads every scope back through every read API: `read` with every
//! [`Window`], `read_since` and `read_page` when the store has them, `count`, `list_threads`,
//! the session `load` and `list`, the vector `search`, `get` and `count`. What the filter
//! selects must read as nothing; everything else exactly as before. A dry run reports what the
//! delete then deletes and changes nothing; a second delete reports zeros; a forget stopped
//! half-way by a failing store is finished by running it again.
//!
//! A vector store takes part when it has
//! [`deletes_matching`](memory_core::VectorCapabilities::deletes_matching); without it the
//! vector forget must be refused with `Unsupported`, deleting nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::forget::{ForgetMode, ForgetReceipt, Forgetter, StoreReceipt};
use memory_core::memory::BLOCK_STATE_SOURCE;
use memory_core::{
    AgentId, CursorRead, Error, ErrorKind, HistoryStore, Page, PageRequest, Result, Scope,
    ScopeFilter, SessionId, SessionStore, SourceId, StoredMessage, StoredSession, TenantId,
    ThreadCount, UserId, VectorPoint, VectorQuery, VectorStore, Window,
};
use serde_json::json;
use uuid::Uuid;

use crate::fixtures::{ExpectOk, every_page, numbered_messages, point, random_tenant};

/// The stores of one engine that a forget runs over.
#[derive(Debug, Clone)]
pub struct ForgetStores {
    /// The history store.
    pub history: Arc<dyn HistoryStore>,
    /// The session store.
    pub sessions: Arc<dyn SessionStore>,
    /// The vector store, when the engine has one.
    pub vectors: Option<Arc<dyn VectorStore>>,
}

impl ForgetStores {
    /// The vector store when it can forget by filter.
    fn forgetting_vectors(&self) -> Option<&Arc<dyn VectorStore>> {
        self.vectors
            .as_ref()
            .filter(|v| v.capabilities().deletes_matching)
    }

    /// A forgetter over `history`, `sessions` and the vector store that can forget.
    fn forgetter_over(
        &self,
        history: Arc<dyn HistoryStore>,
        sessions: Arc<dyn SessionStore>,
    ) -> Forgetter {
        let forgetter = Forgetter::new().history(history).sessions(sessions);
        match self.forgetting_vectors() {
            Some(vectors) => forgetter.vectors(vectors.clone()),
            None => forgetter,
        }
    }

    fn forgetter(&self) -> Forgetter {
        self.forgetter_over(self.history.clone(), self.sessions.clone())
    }
}

/// What a check forgets, of the seeded tenant `T`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// All of `T`.
    Tenant,
    /// User `u1` of `T`.
    User,
    /// Agent `g1` of `T`.
    Agent,
    /// Session `s1` of `T` (every user's and agent's).
    Session,
    /// User `u1`'s session `s1` of `T`.
    UserSession,
    /// Source `notes` of `T` (every user's, agent's and session's).
    Source,
}

impl Kind {
    fn filter(self, tenant: &TenantId) -> ScopeFilter {
        let whole = ScopeFilter::tenant(tenant.clone());
        let user = || UserId::new("u1").unwrap();
        let session = || SessionId::new("s1").unwrap();
        match self {
            Self::Tenant => whole,
            Self::User => whole.with_user(user()),
            Self::Agent => whole.with_agent(AgentId::new("g1").unwrap()),
            Self::Session => whole.with_session(session()),
            Self::UserSession => whole.with_user(user()).with_session(session()),
            Self::Source => whole.with_source(SourceId::new("notes").unwrap()),
        }
    }

    /// Whether the filter selects `scope` (written out here, not with `ScopeFilter::matches`,
    /// so that a wrong match there fails too).
    fn selects(self, tenant: &TenantId, scope: &Scope) -> bool {
        let user = scope.user().map(|u| u.as_str());
        let agent = scope.agent().map(|a| a.as_str());
        let session = scope.session_id().as_str();
        let source = scope.source().as_str();
        scope.tenant() == tenant
            && match self {
                Self::Tenant => true,
                Self::User => user == Some("u1"),
                Self::Agent => agent == Some("g1"),
                Self::Session => session == "s1",
                Self::UserSession => user == Some("u1") && session == "s1",
                Self::Source => source == "notes",
            }
    }
}

/// Everything the checks seeded.
#[derive(Debug)]
struct World {
    /// The tenant the forgets select in.
    tenant: TenantId,
    /// A tenant no forget selects.
    other: TenantId,
    /// The threads.
    threads: Vec<Scope>,
    /// The sessions (block states included).
    sessions: Vec<Scope>,
    /// The vector points of each scope (by key).
    points: HashMap<String, Vec<Uuid>>,
}

/// A scope of `tenant` with the given parts.
fn scope_of(
    tenant: &TenantId,
    user: Option<&str>,
    agent: Option<&str>,
    session: &str,
    source: Option<&str>,
) -> Scope {
    let mut scope = Scope::new(tenant.clone(), SessionId::new(session).unwrap());
    if let Some(user) = user {
        scope = scope.with_user(user).unwrap();
    }
    if let Some(agent) = agent {
        scope = scope.with_agent(agent).unwrap();
    }
    if let Some(source) = source {
        scope = scope.with_source(source).unwrap();
    }
    scope
}

/// The scopes of one tenant: users, agents, sessions and sources that differ one part at a
/// time.
fn scopes_of(tenant: &TenantId) -> Vec<Scope> {
    vec![
        scope_of(tenant, Some("u1"), Some("g1"), "s1", None),
        scope_of(tenant, Some("u1"), None, "s2", None),
        scope_of(tenant, Some("u2"), Some("g1"), "s1", None),
        scope_of(tenant, None, None, "s3", None),
        scope_of(tenant, None, Some("g1"), "s1", None),
        scope_of(tenant, Some("u2"), None, "s2", Some("notes")),
        scope_of(tenant, Some("u1"), Some("g2"), "s1", Some("notes")),
    ]
}

/// Seeds two tenants.
async fn seed(stores: &ForgetStores) -> World {
    let (tenant, other) = (random_tenant(), random_tenant());
    let mut world = World {
        tenant: tenant.clone(),
        other: other.clone(),
        threads: Vec::new(),
        sessions: Vec::new(),
        points: HashMap::new(),
    };
    let history = &*stores.history;
    let caps = history.capabilities();
    for t in [&tenant, &other] {
        for (i, scope) in scopes_of(t).into_iter().enumerate() {
            let out = history
                .append(&scope, &numbered_messages(&format!("m{i}"), 5))
                .await
                .expect_ok("seed a thread");
            assert_eq!(out.inserted, 5, "the seeded messages are new");
            if caps.archive {
                assert_eq!(
                    history
                        .archive(&scope, 2..=3)
                        .await
                        .expect_ok("archive in the middle"),
                    2
                );
            }
            world.threads.push(scope.clone());
            if i % 3 != 2 {
                stores
                    .sessions
                    .save(&scope, &json!({ "scope": scope.key(), "n": i }), None)
                    .await
                    .expect_ok("seed a session");
                world.sessions.push(scope.clone());
            }
            if let Some(vectors) = &stores.vectors {
                let points: Vec<VectorPoint> = (0..=i % 3)
                    .map(|k| {
                        point(
                            Uuid::new_v4(),
                            [1.0, k as f32, 0.5, i as f32],
                            json!({ "k": k }),
                        )
                    })
                    .collect();
                vectors
                    .upsert(&scope, &points)
                    .await
                    .expect_ok("seed vector points");
                world
                    .points
                    .insert(scope.key(), points.iter().map(|p| p.id).collect());
            }
        }
        // A memory's thread and its block states, as a `Memory` writes them.
        if caps.archive && !caps.reduces_on_append {
            let scope = scope_of(t, Some("u1"), Some("g1"), "s1", Some("chat"));
            let (_, blocks) = crate::memory::recorders(&["recorder"]);
            let memory = crate::memory::memory_over(
                &scope,
                stores.history.clone(),
                stores.sessions.clone(),
                &blocks,
                1000,
            );
            memory
                .put_messages(&crate::memory::conversation("f", 14))
                .await
                .expect_ok("put a conversation into a memory");
            let count = history.count(&scope).await.expect_ok("count");
            assert!(count.archived > 0, "the memory flushed (archived) messages");
            let state_scope = scope.clone().with_source(BLOCK_STATE_SOURCE).unwrap();
            assert!(
                stores
                    .sessions
                    .load(&state_scope)
                    .await
                    .expect_ok("load the block states")
                    .is_some(),
                "the memory saved its block states"
            );
            world.threads.push(scope);
            world.sessions.push(state_scope);
        }
    }
    world
}

/// What one scope holds, read through every read API that returns it whole.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    messages: Vec<StoredMessage>,
    count: ThreadCount,
    session: Option<StoredSession>,
    points: Option<(u64, Vec<VectorPoint>)>,
}

/// Every scope of the world (threads and sessions), by key.
fn all_scopes(world: &World) -> Vec<Scope> {
    let mut keys = BTreeSet::new();
    world
        .threads
        .iter()
        .chain(&world.sessions)
        .filter(|s| keys.insert(s.key()))
        .cloned()
        .collect()
}

async fn held(stores: &ForgetStores, world: &World, scope: &Scope) -> Held {
    let points = match &stores.vectors {
        Some(vectors) => {
            let ids = world.points.get(&scope.key()).cloned().unwrap_or_default();
            let mut got = vectors.get(scope, &ids).await.expect_ok("vector get");
            got.sort_by_key(|p| p.id);
            Some((vectors.count(scope).await.expect_ok("vector count"), got))
        }
        None => None,
    };
    Held {
        messages: stores
            .history
            .read(scope, Window::Everything)
            .await
            .expect_ok("read Everything"),
        count: stores.history.count(scope).await.expect_ok("count"),
        session: stores.sessions.load(scope).await.expect_ok("load"),
        points,
    }
}

async fn snapshot(stores: &ForgetStores, world: &World) -> Vec<(Scope, Held)> {
    let mut out = Vec::new();
    for scope in all_scopes(world) {
        let h = held(stores, world, &scope).await;
        out.push((scope, h));
    }
    out
}

/// Every scope `list` returns for `filter`, all pages, each once.
async fn list_every_page(
    what: &str,
    list: impl AsyncFnMut(PageRequest) -> Page<Scope>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for scope in every_page(what, 3, list).await {
        assert!(
            out.insert(scope.key()),
            "{what} listed {} twice",
            scope.key()
        );
    }
    out
}

/// Checks that nothing of `scope` can be read any more, through any read API.
async fn assert_gone(stores: &ForgetStores, world: &World, scope: &Scope, what: &str) {
    let key = scope.key();
    let history = &*stores.history;
    for window in [
        Window::All,
        Window::Last(100),
        Window::After(0),
        Window::TokenBudget(u64::MAX),
        Window::Everything,
    ] {
        let read = history.read(scope, window).await.expect_ok("read");
        assert!(
            read.is_empty(),
            "{what}: read({window:?}) of forgotten {key} returned {} messages",
            read.len()
        );
    }
    let count = history.count(scope).await.expect_ok("count");
    assert_eq!(
        (count.active, count.archived, count.active_tokens),
        (0, 0, 0),
        "{what}: count of forgotten {key}"
    );
    let caps = history.capabilities();
    if caps.cursor_reads {
        let read: CursorRead = history
            .read_since(scope, Window::Everything, None)
            .await
            .expect_ok("read_since");
        assert!(
            read.messages.is_empty() && read.count.active == 0 && read.count.archived == 0,
            "{what}: read_since of forgotten {key} returned {} messages",
            read.messages.len()
        );
    }
    if caps.paged_reads {
        let page = history
            .read_page(scope, 0, 100)
            .await
            .expect_ok("read_page");
        assert!(
            page.is_empty(),
            "{what}: read_page of forgotten {key} returned {} messages",
            page.len()
        );
    }
    assert!(
        stores
            .sessions
            .load(scope)
            .await
            .expect_ok("load")
            .is_none(),
        "{what}: the session of forgotten {key} still loads"
    );
    if let Some(vectors) = stores.forgetting_vectors() {
        assert_eq!(
            vectors.count(scope).await.expect_ok("vector count"),
            0,
            "{what}: vector count of forgotten {key}"
        );
        let found = vectors
            .search(scope, &VectorQuery::new(vec![1.0, 0.0, 0.0, 0.0], 100))
            .await
            .expect_ok("vector search");
        assert!(
            found.is_empty(),
            "{what}: vector search of forgotten {key} found {} points",
            found.len()
        );
        let ids = world.points.get(&key).cloned().unwrap_or_default();
        let got = vectors.get(scope, &ids).await.expect_ok("vector get");
        assert!(
            got.is_empty(),
            "{what}: vector get of forgotten {key} found {} points",
            got.len()
        );
    }
}

/// Checks the world after a forget of `kind`: the selected scopes read as nothing, the others
/// exactly as `before`, and the listings of both tenants say so.
async fn assert_forgotten(
    stores: &ForgetStores,
    world: &World,
    kind: Kind,
    before: &[(Scope, Held)],
    what: &str,
) {
    for (scope, was) in before {
        if kind.selects(&world.tenant, scope) {
            assert_gone(stores, world, scope, what).await;
        } else {
            let now = held(stores, world, scope).await;
            assert_eq!(
                &now,
                was,
                "{what}: {} is not selected and must be intact",
                scope.key()
            );
        }
    }
    for tenant in [&world.tenant, &world.other] {
        let intact = |scopes: &[Scope]| -> BTreeSet<String> {
            scopes
                .iter()
                .filter(|s| s.tenant() == tenant && !kind.selects(&world.tenant, s))
                .map(Scope::key)
                .collect()
        };
        assert_lists(
            stores,
            &ScopeFilter::tenant(tenant.clone()),
            &intact(&world.threads),
            &intact(&world.sessions),
            &format!("{what}: tenant {tenant}"),
        )
        .await;
    }
    if kind == Kind::Tenant {
        assert_tenant_listed(stores, &world.tenant, false, what).await;
        assert_tenant_listed(stores, &world.other, true, what).await;
    }
}

/// Checks that the listings with the forget's own filter list exactly the scopes it selects:
/// a store narrows a listing by every part of a [`ScopeFilter`] (session and source included).
async fn assert_listed_by(stores: &ForgetStores, world: &World, kind: Kind, filter: &ScopeFilter) {
    let selected = |scopes: &[Scope]| -> BTreeSet<String> {
        scopes
            .iter()
            .filter(|s| kind.selects(&world.tenant, s))
            .map(Scope::key)
            .collect()
    };
    assert_lists(
        stores,
        filter,
        &selected(&world.threads),
        &selected(&world.sessions),
        "the forget's own filter",
    )
    .await;
}

/// Checks that `list_threads` and the session `list` with `filter` list the keys `threads` and
/// `sessions` (every page): exactly, or, for a history store without `lists_every_thread`, some
/// of the threads and nothing else. `what` names the case in a failure.
async fn assert_lists(
    stores: &ForgetStores,
    filter: &ScopeFilter,
    threads: &BTreeSet<String>,
    sessions: &BTreeSet<String>,
    what: &str,
) {
    for (listing, expected) in [("list_threads", threads), ("list", sessions)] {
        let listed = list_every_page(listing, async |page| {
            let listed = if listing == "list_threads" {
                stores.history.list_threads(filter, page).await
            } else {
                stores.sessions.list(filter, page).await
            };
            listed.expect_ok(listing)
        })
        .await;
        // Only a history store without `lists_every_thread` may leave threads out.
        if listing == "list" || stores.history.capabilities().lists_every_thread {
            assert_eq!(
                &listed, expected,
                "{what}: {listing}({filter}) lists what it selects"
            );
        } else {
            assert!(
                listed.is_subset(expected),
                "{what}: {listing}({filter}) lists only what it selects"
            );
        }
    }
}

/// Checks that `list_tenants` of the history and session stores (those that have it) lists
/// `tenant` or not.
async fn assert_tenant_listed(stores: &ForgetStores, tenant: &TenantId, listed: bool, what: &str) {
    let stores_listing_tenants = [
        ("history", stores.history.capabilities().lists_tenants),
        ("session", stores.sessions.capabilities().lists_tenants),
    ];
    for (store, lists_tenants) in stores_listing_tenants {
        if !lists_tenants {
            continue;
        }
        let all = every_tenant(async |page| {
            let tenants = if store == "history" {
                stores.history.list_tenants(page).await
            } else {
                stores.sessions.list_tenants(page).await
            };
            tenants.expect_ok("list_tenants")
        })
        .await;
        assert_eq!(
            all.contains(tenant),
            listed,
            "{what}: {store} list_tenants lists {tenant}: expected {listed}"
        );
    }
}

async fn every_tenant(list: impl AsyncFnMut(PageRequest) -> Page<TenantId>) -> BTreeSet<TenantId> {
    every_page("list_tenants", 500, list)
        .await
        .into_iter()
        .collect()
}

/// The receipt a forget of `kind` must give over `before`: per store, the scopes and items
/// selected.
fn expected_receipts(
    stores: &ForgetStores,
    world: &World,
    kind: Kind,
    before: &[(Scope, Held)],
) -> Vec<StoreReceipt> {
    let selected = || {
        before
            .iter()
            .filter(|(s, _)| kind.selects(&world.tenant, s))
    };
    let (mut threads, mut messages, mut sessions, mut points) = (0, 0, 0, 0);
    for (_, held) in selected() {
        let n = held.count.active + held.count.archived;
        if n > 0 {
            threads += 1;
            messages += n;
        }
        sessions += u64::from(held.session.is_some());
        points += held.points.as_ref().map_or(0, |(count, _)| *count);
    }
    let mut receipts = vec![
        StoreReceipt::new("history", threads, messages, "messages"),
        StoreReceipt::new("sessions", sessions, sessions, "sessions"),
    ];
    if stores.forgetting_vectors().is_some() {
        receipts.push(StoreReceipt::new("vectors", 0, points, "points"));
    }
    receipts
}

fn zero_receipts(stores: &ForgetStores) -> Vec<StoreReceipt> {
    let mut receipts = vec![
        StoreReceipt::new("history", 0, 0, "messages"),
        StoreReceipt::new("sessions", 0, 0, "sessions"),
    ];
    if stores.forgetting_vectors().is_some() {
        receipts.push(StoreReceipt::new("vectors", 0, 0, "points"));
    }
    receipts
}

async fn forget(
    forgetter: &Forgetter,
    filter: &ScopeFilter,
    mode: ForgetMode,
    what: &str,
) -> ForgetReceipt {
    forgetter.forget(filter, mode).await.expect_ok(what)
}

/// Seeds, dry-runs, forgets, checks every read API, and forgets again, for one filter kind.
async fn forget_kind(stores: ForgetStores, kind: Kind) {
    let world = seed(&stores).await;
    if let Some(vectors) = &stores.vectors
        && !vectors.capabilities().deletes_matching
    {
        let refused = vectors
            .delete_matching(&kind.filter(&world.tenant))
            .await
            .map(|_| ());
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(ErrorKind::Unsupported),
            "delete_matching on a vector store without deletes_matching"
        );
    }
    let before = snapshot(&stores, &world).await;
    let selected = before
        .iter()
        .filter(|(s, _)| kind.selects(&world.tenant, s))
        .count();
    assert!(
        selected >= 2,
        "the forget of {kind:?} selects several scopes"
    );
    let filter = kind.filter(&world.tenant);
    assert_listed_by(&stores, &world, kind, &filter).await;
    let expected = expected_receipts(&stores, &world, kind, &before);
    assert!(
        expected.iter().all(|r| r.items > 0),
        "every store holds data the forget of {kind:?} selects: {expected:?}"
    );
    let forgetter = stores.forgetter();

    let dry = forget(&forgetter, &filter, ForgetMode::DryRun, "a dry run").await;
    assert_eq!(
        dry.stores, expected,
        "a dry run of {kind:?} counts what is selected"
    );
    assert_eq!(dry.mode, ForgetMode::DryRun);
    assert!(
        snapshot(&stores, &world).await == before,
        "a dry run of {kind:?} changes nothing"
    );

    let done = forget(&forgetter, &filter, ForgetMode::Delete, "a forget").await;
    assert_eq!(
        done.stores, dry.stores,
        "the forget of {kind:?} deletes what its dry run counted"
    );
    assert_eq!(done.filter, filter);
    assert_forgotten(&stores, &world, kind, &before, &format!("forget {kind:?}")).await;

    let again = forget(&forgetter, &filter, ForgetMode::Delete, "a second forget").await;
    assert_eq!(
        again.stores,
        zero_receipts(&stores),
        "a second forget of {kind:?} finds nothing"
    );
    let dry_again = forget(&forgetter, &filter, ForgetMode::DryRun, "a dry run after").await;
    assert_eq!(dry_again.stores, zero_receipts(&stores));
    assert_forgotten(
        &stores,
        &world,
        kind,
        &before,
        &format!("forget {kind:?} twice"),
    )
    .await;
}

/// Defines one public check per `Kind`: each runs [`forget_kind`] with it.
macro_rules! forget_kind_checks {
    ($($(#[$doc:meta])* $name:ident => $kind:ident;)*) => {$(
        $(#[$doc])*
        pub async fn $name(stores: ForgetStores) {
            forget_kind(stores, Kind::$kind).await;
        }
    )*};
}

forget_kind_checks! {
    /// Contract: forgetting a whole tenant leaves nothing of it readable (nor listed by
    /// `list_tenants`), and the other tenant intact.
    forget_a_tenant => Tenant;
    /// Contract: forgetting a user leaves nothing of that user's scopes (every agent, session and
    /// source) readable, and every other scope of the tenant intact.
    forget_a_user => User;
    /// Contract: forgetting an agent leaves nothing of that agent's scopes (every user, session
    /// and source) readable, and every other scope intact.
    forget_an_agent => Agent;
    /// Contract: forgetting a session id selects it for every user and agent of the tenant, and
    /// nothing else.
    forget_a_session => Session;
    /// Contract: a user and a session together select only that user's session.
    forget_a_users_session => UserSession;
    /// Contract: forgetting a source selects that source's scopes of every user, agent and
    /// session of the tenant, and nothing else.
    forget_a_source => Source;
}

/// Contract: a forget stopped half-way (a history store that fails after `k` clears, then a
/// session store that fails after `k` deletes) fails with the failing store named, and
/// running it again finishes the work: nothing selected is left, the rest is intact.
pub async fn forget_stopped_half_way_is_finished_by_a_rerun(stores: ForgetStores) {
    for (k, failing) in [(2, Failing::History), (1, Failing::Sessions)] {
        let world = seed(&stores).await;
        let kind = Kind::Tenant;
        let filter = kind.filter(&world.tenant);
        let before = snapshot(&stores, &world).await;
        let expected = expected_receipts(&stores, &world, kind, &before);
        let counter = Arc::new(AtomicUsize::new(k));
        let (history, sessions): (Arc<dyn HistoryStore>, Arc<dyn SessionStore>) = match failing {
            Failing::History => (
                Arc::new(FailsAfter {
                    history: stores.history.clone(),
                    sessions: stores.sessions.clone(),
                    left: counter.clone(),
                }),
                stores.sessions.clone(),
            ),
            Failing::Sessions => (
                stores.history.clone(),
                Arc::new(FailsAfter {
                    history: stores.history.clone(),
                    sessions: stores.sessions.clone(),
                    left: counter.clone(),
                }),
            ),
        };
        let broken = stores.forgetter_over(history, sessions);
        let err = broken
            .forget(&filter, ForgetMode::Delete)
            .await
            .expect_err("a forget over a failing store fails");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        let name = match failing {
            Failing::History => "history",
            Failing::Sessions => "sessions",
        };
        assert!(
            err.message().contains(name),
            "the error names the failing store ({name}): {err}"
        );
        // Part of the work was done.
        let after_failure = snapshot(&stores, &world).await;
        assert!(
            after_failure != before,
            "the failed forget did part of the work"
        );

        let rerun = forget(
            &stores.forgetter(),
            &filter,
            ForgetMode::Delete,
            "the forget run again",
        )
        .await;
        let rerun_items: u64 = rerun.total_items();
        let expected_items: u64 = expected.iter().map(|r| r.items).sum();
        assert!(
            rerun_items > 0 && rerun_items < expected_items,
            "the rerun after a {name} failure deletes the rest ({rerun_items} of \
             {expected_items} items)"
        );
        assert_forgotten(
            &stores,
            &world,
            kind,
            &before,
            &format!("rerun after {name} failed"),
        )
        .await;
        let again = forget(
            &stores.forgetter(),
            &filter,
            ForgetMode::Delete,
            "a third forget",
        )
        .await;
        assert_eq!(again.stores, zero_receipts(&stores));
    }
}

#[derive(Debug, Clone, Copy)]
enum Failing {
    History,
    Sessions,
}

/// A history and session store that forwards to the real ones and, once `left` `clear`s or
/// `delete`s went through, fails every further one with `Unavailable`, deleting nothing.
#[derive(Debug)]
struct FailsAfter {
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    left: Arc<AtomicUsize>,
}

impl FailsAfter {
    fn take_one(&self) -> Result<()> {
        self.left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| {
                Error::new(
                    ErrorKind::Unavailable,
                    "the test store failed a delete on purpose",
                )
            })
    }
}

#[async_trait]
impl memory_core::LayeredHistory for FailsAfter {
    type Inner = dyn HistoryStore;
    fn inner(&self) -> &dyn HistoryStore {
        &*self.history
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.take_one()?;
        self.history.clear(scope).await
    }
}

#[async_trait]
impl memory_core::LayeredSessions for FailsAfter {
    type Inner = dyn SessionStore;
    fn inner(&self) -> &dyn SessionStore {
        &*self.sessions
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.take_one()?;
        self.sessions.delete(scope).await
    }
}

/// What [`forget_tests!`](crate::forget_tests) takes: a pair `(history, sessions)` or a triple
/// `(history, sessions, vectors)` of stores of one engine.
pub trait IntoForgetStores {
    /// The stores, shared.
    fn into_forget_stores(self) -> ForgetStores;
}

impl<H: HistoryStore, S: SessionStore> IntoForgetStores for (H, S) {
    fn into_forget_stores(self) -> ForgetStores {
        ForgetStores {
            history: Arc::new(self.0),
            sessions: Arc::new(self.1),
            vectors: None,
        }
    }
}

impl<H: HistoryStore, S: SessionStore, V: VectorStore> IntoForgetStores for (H, S, V) {
    fn into_forget_stores(self) -> ForgetStores {
        ForgetStores {
            history: Arc::new(self.0),
            sessions: Arc::new(self.1),
            vectors: Some(Arc::new(self.2)),
        }
    }
}

/// Runs every check of the suite, one after the other, on `stores`.
pub async fn run_all_forget_checks(stores: ForgetStores) {
    crate::__forget_checks!(run_all(stores));
}
