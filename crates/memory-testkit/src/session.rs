//! The [`SessionStore`] conformance suite.
//!
//! Each check is an async function taking the store under test; it writes under its own random
//! tenant (see [`random_scope`]), so checks can run in parallel against one shared server and
//! one store instance can run them all ([`run_all_session_checks`]). A check panics, with a
//! message saying what was expected, when the store breaks the contract.
//!
//! The checks follow the `# Behavior` contract of [`SessionStore`] line by line, plus the round
//! trip of a whole [`AgentSession`] ([`AgentSession::serialize`] through the store and back,
//! equal to the original).
//!
//! # Capabilities
//! The checks select by [`capabilities`](SessionStore::capabilities), honestly: the TTL and
//! purge checks run in full when the store declares `ttl`, and otherwise assert that `set_ttl`
//! and `purge_expired` answer [`ErrorKind::Unsupported`] and leave the session as it was, so a
//! store that lies about the capability, either way, fails.
//!
//! # Assumptions
//! TTL checks sleep for a few hundred milliseconds, so the store's expiry must be precise to
//! about 100 ms.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    AgentId, AgentSession, ChatMessage, ErrorKind, PageRequest, Scope, ScopeFilter, SessionStore,
    SourceId, StoredSession, TenantId, UserId,
};
use serde_json::{Value, json};

use crate::SharedCheck;
use crate::fixtures::{
    ExpectOk, assert_one_page_lists_all, assert_ttl_unsupported, every_page, expect_error_kind,
    random_scope, random_tenant, scope_in, scope_keys, scope_of, scope_variants, tenant_filter,
    text_of_bytes, tricky_messages, tricky_texts,
};
use crate::ttl::{self, ExpiringRecords, PAST_SHORT_TTL, SHORT_TTL};

/// A JSON document that storage layers commonly change: unicode (with a NUL), nested objects
/// and arrays, empty containers, an empty key, integers at the edges of `u64` and `i64`, and
/// floats, including ones that only survive a JSON text round trip when parsed exactly.
pub fn tricky_state() -> Value {
    let unicode: serde_json::Map<String, Value> = tricky_texts()
        .into_iter()
        .map(|(name, text)| (name.to_owned(), Value::String(text)))
        .collect();
    json!({
        "unicode": unicode,
        "ключ 🔑": "значение",
        "": "the empty key",
        "nested": {"deep": {"deeper": [1, [2, [3, {"k": null}]]]}, "empty_obj": {}, "empty_arr": []},
        "u64_max": u64::MAX,
        "i64_min": i64::MIN,
        "zero": 0,
        "floats": [
            0.1, -2.5, 1.0 / 3.0, std::f64::consts::PI, 1e-300, f64::MAX, f64::MIN_POSITIVE,
            5e-324, 1.0715660391465826e-75, -1.603964615428183e143
        ],
        "bools": [true, false],
        "null": null,
        "escapes": "she said \"hi\"\\n\t\r\n\u{1b}",
    })
}

/// A session state with every part [`AgentSession`] holds: per-agent histories (with tricky
/// messages), a snapshot, provider states, a history window, turns and a service conversation.
pub fn sample_agent_session(scope: &Scope) -> AgentSession {
    let mut session = AgentSession::new(scope.clone());
    for message in tricky_messages() {
        session
            .add_history_message("planner", message)
            .expect_ok("add a planner message");
    }
    session
        .add_history_message("critic", ChatMessage::assistant("looks fine"))
        .expect_ok("add a critic message");
    session.update_snapshot("step", json!("flights"));
    session.update_snapshot("state", tricky_state());
    session.set_provider_state(
        SourceId::new("mem0").expect("valid source"),
        json!({"user_id": "dana", "seen": [1, 2, 3]}),
    );
    session.set_history_window(Some(12));
    session.record_turn().expect("a new session counts turns");
    session.record_turn().expect("a new session counts turns");
    session.set_service_conversation_id("conv_ü_123");
    session
}

async fn load(store: &dyn SessionStore, scope: &Scope) -> Option<StoredSession> {
    store.load(scope).await.expect_ok("load")
}

async fn create(store: &dyn SessionStore, scope: &Scope, state: &Value) {
    let version = store
        .save(scope, state, None)
        .await
        .expect_ok("create a session (save with expected None)");
    assert_eq!(version, 1, "creating a session returns version 1");
}

/// Creates the session again after it was deleted or expired at version `last`: the new
/// version must be above `last` (versions never repeat for a scope). Returns it.
async fn create_again(store: &dyn SessionStore, scope: &Scope, state: &Value, last: u64) -> u64 {
    let version = store
        .save(scope, state, None)
        .await
        .expect_ok("create a session again (save with expected None)");
    assert!(
        version > last,
        "a re-created session must get a version above its last one ({last}), got {version}"
    );
    version
}

/// Saves `scope` (at version 1) up to version 3.
async fn save_to_v3(store: &dyn SessionStore, scope: &Scope) {
    for v in 1..=2 {
        store
            .save(scope, &json!({"old": v + 1}), Some(v))
            .await
            .expect_ok("save the old session");
    }
}

/// After a re-creation at `version`, stale writers of the old session (holding version 1 or
/// 3) get `Conflict` and change nothing.
async fn stale_writers_conflict(store: &dyn SessionStore, scope: &Scope, version: u64) {
    for stale in [1, 3] {
        expect_error_kind(
            store
                .save(scope, &json!({"stale": stale}), Some(stale))
                .await,
            ErrorKind::Conflict,
            &format!("a save expecting version {stale} of the deleted session"),
        );
    }
    assert_eq!(
        load(store, scope).await,
        Some(StoredSession {
            state: json!({"new": true}),
            version
        }),
        "stale writers of the old session change nothing in the new one"
    );
}

/// Contract: versions never repeat for a scope: a session saved to version 3, deleted and
/// created again gets a version above 3, and a writer still holding version 1 or 3 of the old
/// session gets `Conflict` and changes nothing (no ABA). Deleting and re-creating again keeps
/// climbing.
pub async fn recreated_session_never_repeats_a_version(store: &dyn SessionStore) {
    let scope = random_scope();
    create(store, &scope, &json!({"old": 1})).await;
    save_to_v3(store, &scope).await;
    assert!(store.delete(&scope).await.expect_ok("delete"));
    let version = create_again(store, &scope, &json!({"new": true}), 3).await;
    stale_writers_conflict(store, &scope, version).await;
    assert!(store.delete(&scope).await.expect_ok("delete again"));
    create_again(store, &scope, &json!({"newer": true}), version).await;
}

/// Contract: versions never repeat for a scope across expiry either: a session saved to
/// version 3 that expires (`set_ttl`), and one that expires and is purged, are created again
/// above version 3, and stale writers get `Conflict`. Stores without TTL skip it.
pub async fn expired_session_never_repeats_a_version(store: &dyn SessionStore) {
    if !store.capabilities().ttl {
        return;
    }
    let expiring = random_scope();
    let purged = scope_in(expiring.tenant(), "purged");
    for scope in [&expiring, &purged] {
        create(store, scope, &json!({"old": 1})).await;
        save_to_v3(store, scope).await;
        store
            .set_ttl(scope, Some(SHORT_TTL))
            .await
            .expect_ok("set_ttl");
    }
    tokio::time::sleep(PAST_SHORT_TTL).await;
    // Another check sharing the store may purge them first: the count is not asserted here.
    store.purge_expired().await.expect_ok("purge_expired");
    for scope in [&expiring, &purged] {
        assert_eq!(load(store, scope).await, None, "the session expired");
        let version = create_again(store, scope, &json!({"new": true}), 3).await;
        stale_writers_conflict(store, scope, version).await;
    }
}

/// Contract: a state whose JSON is over `MAX_SESSION_STATE_BYTES` is `InvalidInput` and
/// changes nothing, on creation and on a save over an existing session.
pub async fn oversized_state_is_refused(store: &dyn SessionStore) {
    let scope = random_scope();
    let big = json!({"big": "x".repeat(memory_core::MAX_SESSION_STATE_BYTES)});
    expect_error_kind(
        store.save(&scope, &big, None).await,
        ErrorKind::InvalidInput,
        "creating a session with a state over the limit",
    );
    assert_eq!(
        load(store, &scope).await,
        None,
        "a refused create stores nothing"
    );
    create(store, &scope, &json!({"small": 1})).await;
    expect_error_kind(
        store.save(&scope, &big, Some(1)).await,
        ErrorKind::InvalidInput,
        "saving a state over the limit",
    );
    assert_eq!(
        load(store, &scope).await,
        Some(StoredSession {
            state: json!({"small": 1}),
            version: 1
        }),
        "a refused save changes nothing"
    );
}

/// Every scope `list` returns for `filter`, paging with `limit`, in listing order.
async fn list_all(store: &dyn SessionStore, filter: &ScopeFilter, limit: usize) -> Vec<Scope> {
    every_page("list", limit, async |request| {
        store.list(filter, request).await.expect_ok("list")
    })
    .await
}

async fn is_listed(store: &dyn SessionStore, scope: &Scope) -> bool {
    list_all(store, &tenant_filter(scope.tenant()), 100)
        .await
        .contains(scope)
}

/// The store supports TTL; otherwise checks that the TTL calls answer `Unsupported`.
async fn ttl_supported(store: &dyn SessionStore) -> bool {
    if store.capabilities().ttl {
        return true;
    }
    let scope = random_scope();
    create(store, &scope, &json!({"ttl": false})).await;
    assert_ttl_unsupported(
        store.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        store.set_ttl(&scope, None).await,
        store.purge_expired().await,
    );
    assert!(
        load(store, &scope).await.is_some(),
        "a refused set_ttl leaves the session"
    );
    false
}

/// Contract: `save` with `expected_version: None` creates the session at version 1, and `load`
/// returns the state exactly as saved (unicode with NUL, nested objects, `u64::MAX`, floats).
pub async fn create_then_load_is_exact(store: &dyn SessionStore) {
    let scope = random_scope();
    let state = tricky_state();
    create(store, &scope, &state).await;
    assert_eq!(
        load(store, &scope).await,
        Some(StoredSession { state, version: 1 }),
        "load returns the state exactly as saved, at version 1"
    );
}

/// Contract (state round trips): an [`AgentSession::serialize`] state saved and
/// loaded deserializes to a session equal to the original.
pub async fn agent_session_state_round_trips(store: &dyn SessionStore) {
    let scope = random_scope().with_user("dana").expect("valid user");
    let session = sample_agent_session(&scope);
    let state = session.serialize().expect_ok("serialize the session");
    create(store, &scope, &state).await;
    let stored = load(store, &scope).await.expect("the saved session loads");
    assert_eq!(stored.state, state, "the state loads exactly as saved");
    let restored =
        AgentSession::deserialize_at(&stored.state, &scope).expect_ok("deserialize the state");
    assert_eq!(
        restored, session,
        "the restored session equals the original"
    );
}

/// Contract: `load` returns the state exactly as saved, for a state of about 1 MiB too.
pub async fn large_state_round_trips(store: &dyn SessionStore) {
    let scope = random_scope();
    let state = json!({
        "big": text_of_bytes(1 << 20),
        "many": (0..10_000).map(|i| json!({"i": i, "s": format!("item-{i}")})).collect::<Vec<_>>(),
    });
    create(store, &scope, &state).await;
    let loaded = load(store, &scope).await.expect("the saved session loads");
    assert!(
        loaded.state == state,
        "a ~1 MiB state loads exactly as saved"
    );
}

/// Contract: `save` with `Some(v)` replaces the state when the stored version is `v` and
/// returns `v + 1`.
pub async fn save_with_expected_version_increments(store: &dyn SessionStore) {
    let scope = random_scope();
    create(store, &scope, &json!({"n": 0})).await;
    for v in 1..=3u64 {
        let state = json!({"n": v});
        assert_eq!(
            store
                .save(&scope, &state, Some(v))
                .await
                .expect_ok(&format!("save expecting version {v}")),
            v + 1,
            "save expecting the current version {v} returns {}",
            v + 1
        );
        assert_eq!(
            load(store, &scope).await,
            Some(StoredSession {
                state,
                version: v + 1
            }),
            "load after the save at version {}",
            v + 1
        );
    }
}

/// Contract: a stale save (expected version not the stored one) fails with `Conflict` and
/// changes nothing: a stale writer never overwrites silently.
pub async fn stale_save_conflicts_and_changes_nothing(store: &dyn SessionStore) {
    let scope = random_scope();
    create(store, &scope, &json!({"who": "first"})).await;
    store
        .save(&scope, &json!({"who": "second"}), Some(1))
        .await
        .expect_ok("save at version 1");
    let current = load(store, &scope).await;
    for stale in [Some(1), Some(0), Some(3), Some(u64::MAX)] {
        expect_error_kind(
            store.save(&scope, &json!({"who": "stale"}), stale).await,
            ErrorKind::Conflict,
            &format!("save expecting {stale:?} when the stored version is 2"),
        );
        assert_eq!(
            load(store, &scope).await,
            current,
            "a refused save expecting {stale:?} leaves state and version unchanged"
        );
    }
}

/// Contract: `save` with `expected_version: None` fails with `Conflict` when the session
/// exists, and changes nothing.
pub async fn create_existing_conflicts(store: &dyn SessionStore) {
    let scope = random_scope();
    create(store, &scope, &json!({"v": "original"})).await;
    expect_error_kind(
        store.save(&scope, &json!({"v": "again"}), None).await,
        ErrorKind::Conflict,
        "creating a session that exists",
    );
    assert_eq!(
        load(store, &scope).await,
        Some(StoredSession {
            state: json!({"v": "original"}),
            version: 1
        }),
        "a refused create leaves the session unchanged"
    );
}

/// Contract: `save` with `Some(v)` on a missing session is a `Conflict` and creates nothing.
pub async fn save_with_version_on_missing_session_conflicts(store: &dyn SessionStore) {
    let scope = random_scope();
    for v in [0, 1, 5] {
        expect_error_kind(
            store.save(&scope, &json!({"x": 1}), Some(v)).await,
            ErrorKind::Conflict,
            &format!("save expecting version {v} on a missing session"),
        );
    }
    assert_eq!(
        load(store, &scope).await,
        None,
        "a refused save creates no session"
    );
    assert!(
        !is_listed(store, &scope).await,
        "a refused save lists nothing"
    );
}

/// Contract: `load` of a session never saved returns `None`.
pub async fn load_unknown_is_none(store: &dyn SessionStore) {
    let sibling = random_scope();
    create(store, &sibling, &json!({})).await;
    assert_eq!(
        load(store, &scope_in(sibling.tenant(), "never-saved")).await,
        None,
        "a session never saved loads as None"
    );
}

/// Contract: `delete` removes the session and returns whether it existed; a deleted session
/// loads as `None`, is not listed and can be created again (above its last version).
pub async fn delete_returns_whether_it_existed(store: &dyn SessionStore) {
    let scope = random_scope();
    create(store, &scope, &json!({"a": 1})).await;
    store
        .save(&scope, &json!({"a": 2}), Some(1))
        .await
        .expect_ok("save at 1");
    assert!(
        store.delete(&scope).await.expect_ok("delete"),
        "delete of an existing session returns true"
    );
    assert!(
        !store.delete(&scope).await.expect_ok("delete again"),
        "delete of a deleted session returns false"
    );
    assert_eq!(
        load(store, &scope).await,
        None,
        "a deleted session loads as None"
    );
    assert!(
        !is_listed(store, &scope).await,
        "a deleted session is not listed"
    );
    create_again(store, &scope, &json!({"a": 3}), 2).await;
    assert!(
        !store
            .delete(&random_scope())
            .await
            .expect_ok("delete unknown"),
        "delete of a session never saved returns false"
    );
}

/// Contract: `list` pages through the sessions of the filter, each once, in a stable order:
/// the same order for every page size, the last page has no cursor, and every page holds at
/// most `limit` scopes.
pub async fn list_pages_each_session_once(store: &dyn SessionStore) {
    let tenant = random_tenant();
    let mut expected = BTreeSet::new();
    for i in 1..=7 {
        let scope = scope_in(&tenant, &format!("s-{i}"));
        create(store, &scope, &json!({"i": i})).await;
        expected.insert(scope.key());
    }
    let filter = tenant_filter(&tenant);
    let reference = list_all(store, &filter, 2).await;
    assert_eq!(
        reference.len(),
        7,
        "paging by 2 lists 7 sessions, each once: {reference:?}"
    );
    assert_eq!(
        scope_keys(&reference),
        expected,
        "the listing is exactly the tenant's sessions"
    );
    for limit in [1, 3, 7, 100] {
        assert_eq!(
            list_all(store, &filter, limit).await,
            reference,
            "paging by {limit} lists the same sessions in the same order as paging by 2"
        );
    }
    let one_page = store
        .list(&filter, PageRequest::first(100))
        .await
        .expect_ok("list one big page");
    assert_one_page_lists_all(&one_page, &reference, "session");
}

/// Contract: `list` returns only the sessions matching the filter's user, agent and source, and
/// never another tenant's.
pub async fn list_filters_by_user_agent_source_and_tenant(store: &dyn SessionStore) {
    let tenant = random_tenant();
    let other_source = SourceId::new("other-src").expect("valid source");
    let s1 = scope_of(&tenant, "s-1", Some("u1"), Some("a1"), None);
    let s2 = scope_of(&tenant, "s-2", Some("u1"), Some("a2"), None);
    let s3 = scope_of(&tenant, "s-3", Some("u2"), Some("a1"), Some(&other_source));
    let s4 = scope_of(&tenant, "s-4", None, None, None);
    let other_tenant = random_tenant();
    let foreign = scope_of(&other_tenant, "s-1", Some("u1"), Some("a1"), None);
    for scope in [&s1, &s2, &s3, &s4, &foreign] {
        create(store, scope, &json!({"scope": scope.key()})).await;
    }
    let u1 = UserId::new("u1").expect("valid");
    let a1 = AgentId::new("a1").expect("valid");
    let base = tenant_filter(&tenant);
    let cases: Vec<(ScopeFilter, Vec<&Scope>, &str)> = vec![
        (base.clone(), vec![&s1, &s2, &s3, &s4], "tenant only"),
        (
            base.clone().with_user(u1.clone()),
            vec![&s1, &s2],
            "user u1",
        ),
        (
            base.clone().with_agent(a1.clone()),
            vec![&s1, &s3],
            "agent a1",
        ),
        (
            base.clone().with_source(other_source),
            vec![&s3],
            "source other-src",
        ),
        (
            base.clone().with_user(u1).with_agent(a1),
            vec![&s1],
            "user u1 and agent a1",
        ),
        (
            base.with_user(UserId::new("nobody").expect("valid")),
            vec![],
            "a user with no session",
        ),
        (
            tenant_filter(&other_tenant),
            vec![&foreign],
            "the other tenant",
        ),
    ];
    for (filter, want, why) in cases {
        let got = list_all(store, &filter, 2).await;
        assert_eq!(
            got.len(),
            want.len(),
            "filter {why}: each session once, got {got:?}"
        );
        assert_eq!(
            scope_keys(&got),
            want.iter().map(|s| s.key()).collect(),
            "filter {why}"
        );
    }
}

/// Contract: data of one scope is never visible through another: sessions with the same session
/// id under a different tenant, user, agent or source are separate, and saving or deleting one
/// leaves the others alone.
pub async fn scopes_are_isolated(store: &dyn SessionStore) {
    let base = random_scope();
    let variants = scope_variants(&base);
    for (name, scope) in &variants {
        create(store, scope, &json!({"owner": name})).await;
    }
    store
        .save(&variants[0].1, &json!({"owner": "base", "n": 2}), Some(1))
        .await
        .expect_ok("update base");
    assert!(
        store
            .delete(&variants[2].1)
            .await
            .expect_ok("delete user x"),
        "delete user x"
    );
    for (i, (name, scope)) in variants.iter().enumerate() {
        let expected = match i {
            0 => Some(StoredSession {
                state: json!({"owner": "base", "n": 2}),
                version: 2,
            }),
            2 => None,
            _ => Some(StoredSession {
                state: json!({"owner": name}),
                version: 1,
            }),
        };
        assert_eq!(
            load(store, scope).await,
            expected,
            "scope {name} after updating base and deleting user x"
        );
    }
}

/// Contract: a state copied into another scope's key is refused there. A session saved under
/// tenant A, copied byte for byte and saved under tenant B's key, loads from B as it was
/// written, but [`AgentSession::deserialize_at`] with B is an `InvalidInput` error that names
/// both scopes, and A's session is untouched.
pub async fn a_state_copied_to_another_scope_is_refused(store: &dyn SessionStore) {
    let a = random_scope().with_user("dana").expect("valid user");
    let b = scope_in(&random_tenant(), a.session_id().as_str())
        .with_user("dana")
        .expect("valid user");
    let state = sample_agent_session(&a)
        .serialize()
        .expect_ok("serialize the session");
    create(store, &a, &state).await;
    let copied = load(store, &a).await.expect("A's session loads").state;
    create(store, &b, &copied).await;
    let loaded = load(store, &b).await.expect("B's copy loads");
    assert_eq!(loaded.state, state, "the copy loads byte for byte");
    let err = expect_error_kind(
        AgentSession::deserialize_at(&loaded.state, &b),
        ErrorKind::InvalidInput,
        "a state of scope A restored at scope B",
    );
    let message = err.to_string();
    assert!(message.contains(&a.key()), "the error names A: {message}");
    assert!(message.contains(&b.key()), "the error names B: {message}");
    assert_eq!(
        load(store, &a).await,
        Some(StoredSession { state, version: 1 }),
        "A's session is untouched"
    );
    let restored = AgentSession::deserialize_at(&copied, &a).expect_ok("A's state at A");
    assert_eq!(restored.scope(), &a, "A's state restores at A");
}

/// A session store's sessions, as the TTL checks see them: a session is created with
/// `{"n": 1}` at version 1 and written again with `{"n": 2}` at version 2.
struct Sessions<'a>(&'a dyn SessionStore);

impl ExpiringRecords for Sessions<'_> {
    type Written = ();
    const RECORD: &'static str = "session";
    const WRITE: &'static str = "a save";

    async fn ttl_supported(&self) -> bool {
        ttl_supported(self.0).await
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> memory_core::Result<()> {
        self.0.set_ttl(scope, ttl).await
    }

    async fn purge_expired(&self) -> memory_core::Result<u64> {
        self.0.purge_expired().await
    }

    /// Every session store counts the sessions `purge_expired` removed.
    fn counts_purged(&self) -> bool {
        true
    }

    async fn listed(&self, tenant: &TenantId) -> Vec<Scope> {
        list_all(self.0, &tenant_filter(tenant), 10).await
    }

    async fn create(&self, scope: &Scope) {
        create(self.0, scope, &json!({"n": 1})).await;
    }

    async fn assert_created(&self, scope: &Scope, why: &str) {
        assert!(load(self.0, scope).await.is_some(), "{why}");
    }

    async fn write_again(&self, scope: &Scope, what: &str) {
        let version = self
            .0
            .save(scope, &json!({"n": 2}), Some(1))
            .await
            .expect_ok(what);
        assert_eq!(version, 2, "{what} returns the next version");
    }

    async fn assert_written_again(&self, scope: &Scope, why: &str) {
        let alive = load(self.0, scope).await.map(|s| (s.state, s.version));
        assert_eq!(alive, Some((json!({"n": 2}), 2)), "{why}");
    }

    async fn assert_gone(&self, scope: &Scope, what: &str) {
        assert_eq!(load(self.0, scope).await, None, "{what} loads as None");
    }

    /// A save expecting the expired session's version conflicts; the session can be created
    /// again, above its last version.
    async fn assert_written_anew(&self, scope: &Scope, (): ()) {
        expect_error_kind(
            self.0.save(scope, &json!({"n": 2}), Some(1)).await,
            ErrorKind::Conflict,
            "saving over an expired session expecting its old version",
        );
        let version = create_again(self.0, scope, &json!({"n": "new"}), 1).await;
        assert_eq!(
            load(self.0, scope).await,
            Some(StoredSession {
                state: json!({"n": "new"}),
                version
            }),
            "an expired session can be created again, above its last version"
        );
    }
}

/// Contract: TTL. `set_ttl` makes the session expire; an expired session loads as `None`, is
/// not listed and can be created again (above its last version). Stores without TTL answer
/// `Unsupported`.
pub async fn ttl_expires_a_session(store: &dyn SessionStore) {
    ttl::ttl_expires_a_record(&Sessions(store)).await;
}

/// Contract: `set_ttl(None)` removes the expiry.
pub async fn ttl_none_removes_the_expiry(store: &dyn SessionStore) {
    ttl::ttl_none_removes_the_expiry(&Sessions(store)).await;
}

/// Contract: the session expires `ttl` after its last save: each save restarts the clock.
pub async fn ttl_is_refreshed_by_save(store: &dyn SessionStore) {
    ttl::ttl_is_refreshed_by_a_write(&Sessions(store)).await;
}

/// Contract: `set_ttl` on an unknown session is `NotFound`.
pub async fn ttl_on_unknown_session_is_not_found(store: &dyn SessionStore) {
    ttl::ttl_on_unknown_record_is_not_found(&Sessions(store)).await;
}

/// Contract: a TTL under 1 ms or over `MAX_TTL` is `InvalidInput`, and the session stays as it
/// was.
pub async fn ttl_out_of_range_is_refused(store: &dyn SessionStore) {
    ttl::ttl_out_of_range_is_refused(&Sessions(store)).await;
}

/// Contract: `purge_expired` deletes expired sessions now and returns how many it removed;
/// sessions that did not expire stay.
///
/// On a store shared with other running checks, other expired sessions may be purged too, so
/// the check asserts at least the two sessions it let expire.
pub async fn purge_expired_removes_expired_sessions(store: &dyn SessionStore) {
    ttl::purge_expired_removes_expired_records(&Sessions(store)).await;
}

/// Contract: optimistic concurrency loses no update: 8 tasks (spawned with `tokio::spawn`)
/// each increment a counter 10 times by load, modify, save with the loaded version, retrying on
/// `Conflict`; the counter ends at 80 and the version at 81.
pub async fn concurrent_load_modify_save_loses_no_update(store: Arc<dyn SessionStore>) {
    const TASKS: u64 = 8;
    const INCREMENTS: u64 = 10;
    let scope = Arc::new(random_scope());
    create(&*store, &scope, &json!({"counter": 0, "by": {}})).await;
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let (store, scope) = (store.clone(), scope.clone());
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..INCREMENTS {
                loop {
                    let current = store
                        .load(&scope)
                        .await
                        .expect_ok("load")
                        .expect("the session exists");
                    let mut state = current.state.clone();
                    let counter = state["counter"].as_u64().expect("counter is a number");
                    state["counter"] = json!(counter + 1);
                    let mine = state["by"][task.to_string()].as_u64().unwrap_or(0);
                    state["by"][task.to_string()] = json!(mine + 1);
                    match store.save(&scope, &state, Some(current.version)).await {
                        Ok(version) => {
                            assert_eq!(
                                version,
                                current.version + 1,
                                "a successful save returns the loaded version + 1"
                            );
                            break;
                        }
                        Err(err) if err.kind() == ErrorKind::Conflict => {
                            conflicts += 1;
                            assert!(
                                conflicts < 10_000,
                                "task {task} kept conflicting: no progress"
                            );
                            tokio::task::yield_now().await;
                        }
                        Err(err) => panic!("task {task}: save failed with {err}"),
                    }
                }
            }
        }));
    }
    for handle in handles {
        match handle.await {
            Ok(()) => {}
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(err) => panic!("a spawned check task failed: {err}"),
        }
    }
    let last = load(&*store, &scope).await.expect("the session exists");
    assert_eq!(
        last.state["counter"],
        json!(TASKS * INCREMENTS),
        "{TASKS} tasks x {INCREMENTS} increments: no update is lost"
    );
    assert_eq!(
        last.version,
        TASKS * INCREMENTS + 1,
        "one version per successful save after the create"
    );
    for task in 0..TASKS {
        assert_eq!(
            last.state["by"][task.to_string()],
            json!(INCREMENTS),
            "task {task}'s increments all landed"
        );
    }
}

/// Contract: `list_tenants` (optional: `lists_tenants`) pages through the tenants that hold a
/// live session, each once, in the same order for every page size; a tenant whose sessions
/// were all deleted is not listed. Without the capability it answers `Unsupported` and changes
/// nothing.
pub async fn list_tenants_pages_each_tenant_once(store: &dyn SessionStore) {
    let listed: Vec<memory_core::TenantId> = (0..4).map(|_| random_tenant()).collect();
    for (i, tenant) in listed.iter().enumerate() {
        for s in 0..=i {
            create(
                store,
                &scope_in(tenant, &format!("s{s}")),
                &json!({ "n": s }),
            )
            .await;
        }
    }
    let deleted = random_tenant();
    for s in ["s1", "s2"] {
        let scope = scope_in(&deleted, s);
        create(store, &scope, &json!({})).await;
        assert!(
            store.delete(&scope).await.expect_ok("delete"),
            "the session existed"
        );
    }
    if !store.capabilities().lists_tenants {
        expect_error_kind(
            store.list_tenants(PageRequest::first(10)).await,
            ErrorKind::Unsupported,
            "list_tenants on a store without the lists_tenants capability",
        );
        assert_eq!(
            load(store, &scope_in(&listed[0], "s0"))
                .await
                .map(|s| s.version),
            Some(1),
            "a refused list_tenants changes nothing"
        );
        return;
    }
    crate::history::check_tenant_listings(
        "list_tenants",
        &listed,
        &[deleted, random_tenant()],
        async |page| store.list_tenants(page).await.expect_ok("list_tenants"),
    )
    .await;
}

/// Every check of the suite that takes `&dyn SessionStore` (all but the one that spawns tasks
/// on an `Arc`), each with its name, in the order [`run_all_session_checks`] runs them: for
/// tests that pick checks by name and run them on stores of their own.
pub fn every_shared_check() -> Vec<(&'static str, SharedCheck<dyn SessionStore>)> {
    crate::__session_checks!(named(memory_core::SessionStore))
}

/// Runs every check of the suite, one after the other, on `store`.
pub async fn run_all_session_checks(store: Arc<dyn SessionStore>) {
    crate::__session_checks!(run_all(store));
}
