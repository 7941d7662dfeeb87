//! The TTL checks the history and session suites share. A thread and a session expire alike
//! (`set_ttl`, `set_ttl(None)`, refresh by a write, `NotFound` on an unknown scope, the TTL
//! range, `purge_expired`), so each check is written once here, over [`ExpiringRecords`]: what
//! a record is, how it is written and how it reads when it is there or gone.

use std::time::Duration;

use memory_core::{Result, Scope, TenantId};

use crate::fixtures::{
    ExpectOk, assert_out_of_range_ttls_refused, assert_ttl_of_unknown_not_found, random_scope,
    random_tenant, scope_in, scope_keys, ttl_refresh_scenario,
};

/// A short TTL the expiry checks wait out.
pub(crate) const SHORT_TTL: Duration = Duration::from_millis(300);

/// How long the expiry checks sleep to be past [`SHORT_TTL`].
pub(crate) const PAST_SHORT_TTL: Duration = Duration::from_millis(600);

/// The records of a store under test that can expire, one per scope: a history store's
/// threads, a session store's sessions. The shared TTL checks write and check them only
/// through it; each method that checks something panics, with a message naming what was
/// expected, when the store breaks the contract.
pub(crate) trait ExpiringRecords {
    /// What [`create`](ExpiringRecords::create) wrote, for the checks that read it back.
    type Written;

    /// What one scope holds, as the messages name it: `"thread"`, `"session"`.
    const RECORD: &'static str;

    /// What [`write_again`](ExpiringRecords::write_again) does, as the messages name it:
    /// `"an append"`, `"a save"`.
    const WRITE: &'static str;

    /// Whether the store declares TTL. When it does not, first checks that its TTL calls
    /// answer `Unsupported` and change nothing (the TTL check ends there).
    async fn ttl_supported(&self) -> bool;

    /// The store's `set_ttl` on `scope`, its answer unchecked.
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()>;

    /// The store's `purge_expired`, its answer unchecked.
    async fn purge_expired(&self) -> Result<u64>;

    /// Whether `purge_expired` promises to count the records it removed.
    fn counts_purged(&self) -> bool;

    /// Every scope of `tenant` the store lists, every page read.
    async fn listed(&self, tenant: &TenantId) -> Vec<Scope>;

    /// Writes a new record at `scope` (which holds none) and checks the write succeeded.
    async fn create(&self, scope: &Scope) -> Self::Written;

    /// Checks that `scope` holds the record [`create`](ExpiringRecords::create) wrote (and
    /// nothing since); `why` says why it must.
    async fn assert_created(&self, scope: &Scope, why: &str);

    /// Writes the created record at `scope` again ([`WRITE`](ExpiringRecords::WRITE)) and
    /// checks the write succeeded; `what` names it when it fails.
    async fn write_again(&self, scope: &Scope, what: &str);

    /// Checks that `scope` holds what [`create`](ExpiringRecords::create) and then
    /// [`write_again`](ExpiringRecords::write_again) wrote; `why` says why it must.
    async fn assert_written_again(&self, scope: &Scope, why: &str);

    /// Checks that `scope` reads as holding nothing; `what` names the record in the messages
    /// (`"an expired thread"`).
    async fn assert_gone(&self, scope: &Scope, what: &str);

    /// Checks that the next write to `scope`, whose record (`written`) expired, starts a new
    /// record rather than continuing the old one.
    async fn assert_written_anew(&self, scope: &Scope, written: Self::Written);
}

/// A fresh scope for a TTL check, or `None` (after checking the refusals) when the store does
/// not declare TTL.
async fn ttl_check_scope(records: &impl ExpiringRecords) -> Option<Scope> {
    records.ttl_supported().await.then(random_scope)
}

/// Whether the store lists `scope`.
async fn is_listed(records: &impl ExpiringRecords, scope: &Scope) -> bool {
    records.listed(scope.tenant()).await.contains(scope)
}

/// Gives `scope` the [`SHORT_TTL`].
async fn set_short_ttl(records: &impl ExpiringRecords, scope: &Scope) {
    records
        .set_ttl(scope, Some(SHORT_TTL))
        .await
        .expect_ok("set_ttl");
}

/// `set_ttl` makes a record expire: it is there until then; after, it reads as gone, is not
/// listed, and the next write starts a new record.
pub(crate) async fn ttl_expires_a_record<R: ExpiringRecords>(records: &R) {
    let Some(scope) = ttl_check_scope(records).await else {
        return;
    };
    let written = records.create(&scope).await;
    set_short_ttl(records, &scope).await;
    let record = R::RECORD;
    records
        .assert_created(
            &scope,
            &format!("a {record} with a TTL is there until it expires"),
        )
        .await;
    tokio::time::sleep(PAST_SHORT_TTL).await;
    records
        .assert_gone(&scope, &format!("an expired {record}"))
        .await;
    assert!(
        !is_listed(records, &scope).await,
        "an expired {record} is not listed"
    );
    records.assert_written_anew(&scope, written).await;
}

/// `set_ttl(None)` removes the expiry: the record outlives the TTL it had and stays listed.
pub(crate) async fn ttl_none_removes_the_expiry<R: ExpiringRecords>(records: &R) {
    let Some(scope) = ttl_check_scope(records).await else {
        return;
    };
    records.create(&scope).await;
    set_short_ttl(records, &scope).await;
    records
        .set_ttl(&scope, None)
        .await
        .expect_ok("set_ttl(None)");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    records
        .assert_created(
            &scope,
            &format!("after set_ttl(None) the {} does not expire", R::RECORD),
        )
        .await;
    assert!(is_listed(records, &scope).await, "and it is still listed");
}

/// A record expires `ttl` after its last write: each write restarts the clock (see
/// [`ttl_refresh_scenario`]).
pub(crate) async fn ttl_is_refreshed_by_a_write<R: ExpiringRecords>(records: &R) {
    let Some(scope) = ttl_check_scope(records).await else {
        return;
    };
    records.create(&scope).await;
    ttl_refresh_scenario(
        async |ttl| {
            records
                .set_ttl(&scope, Some(ttl))
                .await
                .expect_ok("set_ttl");
        },
        async || records.write_again(&scope, R::WRITE).await,
        async |when| {
            let why = format!("{when} ({}) the {} is alive", R::WRITE, R::RECORD);
            records.assert_written_again(&scope, &why).await;
        },
    )
    .await;
}

/// `set_ttl` on a scope never written is `NotFound` and creates nothing.
pub(crate) async fn ttl_on_unknown_record_is_not_found<R: ExpiringRecords>(records: &R) {
    let Some(scope) = ttl_check_scope(records).await else {
        return;
    };
    assert_ttl_of_unknown_not_found(
        records.set_ttl(&scope, Some(Duration::from_secs(60))).await,
        R::RECORD,
    );
    records
        .assert_gone(&scope, "the scope of a refused set_ttl")
        .await;
    assert!(
        !is_listed(records, &scope).await,
        "a refused set_ttl creates no {}",
        R::RECORD
    );
}

/// A TTL under 1 ms or over `MAX_TTL` is `InvalidInput`, and the record stays as it was and
/// writable.
pub(crate) async fn ttl_out_of_range_is_refused<R: ExpiringRecords>(records: &R) {
    let Some(scope) = ttl_check_scope(records).await else {
        return;
    };
    records.create(&scope).await;
    assert_out_of_range_ttls_refused(async |ttl| records.set_ttl(&scope, Some(ttl)).await).await;
    records
        .assert_created(&scope, "a refused set_ttl changes nothing")
        .await;
    let what = format!("{} after a refused set_ttl", R::WRITE);
    records.write_again(&scope, &what).await;
    records
        .assert_written_again(
            &scope,
            &format!("the {} stays writable after a refused set_ttl", R::RECORD),
        )
        .await;
}

/// `purge_expired` deletes the expired records now and returns how many it removed (checked
/// when the store [counts purged records](ExpiringRecords::counts_purged)); records that did
/// not expire stay.
///
/// On a store shared with other running checks, other expired records may be purged too, so
/// the check asserts at least the two records it let expire.
pub(crate) async fn purge_expired_removes_expired_records<R: ExpiringRecords>(records: &R) {
    if !records.ttl_supported().await {
        return;
    }
    let record = R::RECORD;
    let tenant = random_tenant();
    let expiring = [
        scope_in(&tenant, "expiring-1"),
        scope_in(&tenant, "expiring-2"),
    ];
    let kept = scope_in(&tenant, "kept");
    let long_lived = scope_in(&tenant, "long-lived");
    for scope in expiring.iter().chain([&kept, &long_lived]) {
        records.create(scope).await;
    }
    for scope in &expiring {
        set_short_ttl(records, scope).await;
    }
    records
        .set_ttl(&long_lived, Some(Duration::from_secs(3600)))
        .await
        .expect_ok("set_ttl long");
    tokio::time::sleep(PAST_SHORT_TTL).await;
    let purged = records.purge_expired().await.expect_ok("purge_expired");
    if records.counts_purged() {
        assert!(
            purged >= 2,
            "purge_expired must count the 2 expired {record}s it removed, returned {purged}"
        );
    }
    assert_eq!(
        scope_keys(&records.listed(&tenant).await),
        scope_keys(&[kept.clone(), long_lived.clone()]),
        "after the purge only the {record}s that did not expire are listed"
    );
    for scope in [&kept, &long_lived] {
        records
            .assert_created(scope, &format!("a {record} that did not expire stays"))
            .await;
    }
    for scope in &expiring {
        records
            .assert_gone(scope, &format!("a purged {record}"))
            .await;
    }
}
