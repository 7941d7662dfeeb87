//! The checks catch broken stores: each store here wraps an in-memory store and breaks one line
//! of its contract, and the check for that line must fail (with the message that names it).
//!
//! Capabilities are checked both ways: a store that honestly lacks an optional operation (and
//! answers `Unsupported`, as the trait's default body does) passes the checks of that
//! operation, and a store that lies about a capability (declares it and refuses the operation,
//! or declares it absent and performs it) fails every check of that operation.

// The broken stores are test doubles: unwrapping a poisoned lock or a cursor they wrote
// themselves is the simplest correct thing for them to do.
#![allow(clippy::unwrap_used)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::future::Future;
use std::ops::RangeInclusive;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Delta, Error, ErrorKind, HistoryCapabilities,
    HistoryStore, InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore, MessageId,
    NO_EPOCH, Page, PageRequest, Result, Scope, ScopeFilter, ScoredPoint, SessionCapabilities,
    SessionId, SessionStore, StoredMessage, TenantId, ThreadCursor, VectorPoint, VectorQuery,
    VectorStore, Window,
};
use memory_testkit::__private::block_on;
use memory_testkit::doubles::{DeclaredHistory, RequiredOnlySessions};
use memory_testkit::{SharedCheck, history, session, vector};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Flaw {
    /// Gives every appended message a fresh id: retries duplicate.
    DuplicatesOnRetry,
    /// Lists the matching threads of every tenant it has seen.
    ListsEveryTenant,
    /// Answers `TokenBudget` with every message that fits, skipping the ones that do not.
    BudgetSkipsWhatDoesNotFit,
    /// Writes the small messages of a batch it refuses for size.
    PartialBatchOnLimit,
    /// Has no TTL and says so.
    NoTtl,
    /// Says it has no TTL, yet accepts `set_ttl`.
    NoTtlButAccepts,
    /// Says it has TTL, yet refuses `set_ttl` and `purge_expired` with `Unsupported`.
    TtlButRefuses,
    /// Says it can archive, yet refuses `archive` with `Unsupported`.
    ArchiveButRefuses,
    /// Says it cannot archive, yet archives.
    NoArchiveButArchives,
    /// Gives every appended message a fresh id, and does not declare `dedupes_ids`: even a
    /// retry of the thread's tail duplicates, and the outcome's seqs hold other ids.
    DuplicatesWithoutDedupeClaim,
    /// Purges, yet returns 0, and declares `counts_purged`.
    PurgeReturnsZero,
    /// Purges, returns 0, and does not declare `counts_purged`: honest.
    PurgeReturnsZeroUndeclared,
    /// Leaves scopes with session ids of 100 characters or more out of listings, and declares
    /// `lists_every_thread`.
    SkipsLongSessions,
    /// Leaves scopes with session ids of 100 characters or more out of listings, and does not
    /// declare `lists_every_thread`: honest.
    SkipsLongSessionsUndeclared,
    /// Lists another scope in place of one with a session id of 100 characters or more, and does not
    /// declare `lists_every_thread`.
    ListsLongSessionsAsAnother,
}

/// Session ids this long are what the listing flaws leave out or replace (like Agent Framework's
/// layout, whose key segment of a long session id becomes a digest).
const LONG_SESSION: usize = 100;

#[derive(Debug)]
struct BrokenHistory {
    inner: InMemoryHistoryStore,
    flaw: Flaw,
    tenants: Mutex<Vec<TenantId>>,
}

fn broken_history(flaw: Flaw) -> BrokenHistory {
    BrokenHistory {
        inner: InMemoryHistoryStore::new(),
        flaw,
        tenants: Mutex::new(Vec::new()),
    }
}

#[memory_core::async_trait]
impl memory_core::LayeredHistory for BrokenHistory {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        let honest = self.inner.capabilities();
        match self.flaw {
            Flaw::NoTtl | Flaw::NoTtlButAccepts => honest.with_ttl(false),
            Flaw::NoArchiveButArchives => honest.with_archive(false),
            Flaw::DuplicatesWithoutDedupeClaim => honest.with_dedupes_ids(false),
            Flaw::PurgeReturnsZeroUndeclared => honest.with_counts_purged(false),
            Flaw::SkipsLongSessionsUndeclared | Flaw::ListsLongSessionsAsAnother => {
                honest.with_lists_every_thread(false)
            }
            _ => honest,
        }
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.tenants.lock().unwrap().push(scope.tenant().clone());
        match self.flaw {
            Flaw::DuplicatesOnRetry | Flaw::DuplicatesWithoutDedupeClaim => {
                let fresh: Vec<ChatMessage> = messages
                    .iter()
                    .map(|m| m.clone().with_id(MessageId::generate()))
                    .collect();
                self.inner.append(scope, &fresh).await
            }
            Flaw::PartialBatchOnLimit => match self.inner.append(scope, messages).await {
                Err(err) if err.kind() == ErrorKind::LimitExceeded => {
                    let small: Vec<ChatMessage> = messages
                        .iter()
                        .filter(|m| m.text().len() < 1 << 20)
                        .take(10)
                        .cloned()
                        .collect();
                    self.inner.append(scope, &small).await?;
                    Err(err)
                }
                other => other,
            },
            _ => self.inner.append(scope, messages).await,
        }
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        match (self.flaw, window) {
            (Flaw::BudgetSkipsWhatDoesNotFit, Window::TokenBudget(budget)) => {
                let mut used = 0u64;
                let mut out: Vec<StoredMessage> = self
                    .inner
                    .read(scope, Window::All)
                    .await?
                    .into_iter()
                    .rev()
                    .filter(|m| {
                        let fits = used + u64::from(m.tokens) <= budget;
                        if fits {
                            used += u64::from(m.tokens);
                        }
                        fits
                    })
                    .collect();
                out.reverse();
                Ok(out)
            }
            _ => self.inner.read(scope, window).await,
        }
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        match self.flaw {
            Flaw::ArchiveButRefuses => Err(Error::unsupported("no archive")),
            _ => self.inner.archive(scope, seqs).await,
        }
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let long = |scope: &Scope| scope.session_id().as_str().len() >= LONG_SESSION;
        match self.flaw {
            Flaw::ListsEveryTenant => {}
            Flaw::SkipsLongSessions | Flaw::SkipsLongSessionsUndeclared => {
                let mut listed = self.inner.list_threads(filter, page).await?;
                listed.items.retain(|scope| !long(scope));
                return Ok(listed);
            }
            Flaw::ListsLongSessionsAsAnother => {
                let mut listed = self.inner.list_threads(filter, page).await?;
                for scope in &mut listed.items {
                    if long(scope) {
                        *scope =
                            Scope::new(scope.tenant().clone(), SessionId::new("digest").unwrap());
                    }
                }
                return Ok(listed);
            }
            _ => return self.inner.list_threads(filter, page).await,
        }
        let tenants = self.tenants.lock().unwrap().clone();
        let mut items = Vec::new();
        for tenant in tenants {
            let mut f = filter.clone();
            f.tenant = tenant;
            for scope in self
                .inner
                .list_threads(&f, PageRequest::first(1000))
                .await?
                .items
            {
                if !items.contains(&scope) {
                    items.push(scope);
                }
            }
        }
        let start: usize = page.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
        let end = (start + page.limit).min(items.len());
        Ok(Page {
            items: items[start..end].to_vec(),
            next_cursor: (end < items.len()).then(|| end.to_string()),
        })
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        match self.flaw {
            Flaw::NoTtl | Flaw::TtlButRefuses => Err(Error::unsupported("no ttl")),
            _ => self.inner.set_ttl(scope, ttl).await,
        }
    }
    async fn purge_expired(&self) -> Result<u64> {
        match self.flaw {
            Flaw::NoTtl | Flaw::TtlButRefuses => Err(Error::unsupported("no ttl")),
            Flaw::PurgeReturnsZero | Flaw::PurgeReturnsZeroUndeclared => {
                self.inner.purge_expired().await?;
                Ok(0)
            }
            _ => self.inner.purge_expired().await,
        }
    }
}

/// A history check, its future boxed.
type Check = SharedCheck<dyn HistoryStore>;

/// The checks of a suite's list whose names `pick` selects (at least one).
fn picked<S: ?Sized>(
    every: Vec<(&'static str, SharedCheck<S>)>,
    pick: impl Fn(&str) -> bool,
) -> Vec<(&'static str, SharedCheck<S>)> {
    let picked: Vec<_> = every.into_iter().filter(|(name, _)| pick(name)).collect();
    assert!(!picked.is_empty(), "no check of the suite was picked");
    picked
}

/// Whether a check is one of the TTL capability's (`set_ttl`, `purge_expired`), by its name.
fn is_ttl_check(name: &str) -> bool {
    name.starts_with("ttl_") || name.starts_with("purge_expired_")
}

/// The named history checks, each with its name.
macro_rules! checks {
    ($($check:ident),* $(,)?) => {{
        $(
            fn $check(store: &dyn HistoryStore) -> Pin<Box<dyn Future<Output = ()> + '_>> {
                Box::pin(history::$check(store))
            }
        )*
        vec![$((stringify!($check), $check as Check)),*]
    }};
}

/// Whether `check` fails (panics) on `store`.
fn fails(store: &dyn HistoryStore, check: Check) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| block_on(check(store)))).is_err()
}

/// Every history check that archives.
fn every_archive_check() -> Vec<(&'static str, Check)> {
    checks![
        unknown_thread_reads_empty,
        window_all_returns_active_messages,
        window_last_returns_newest_active,
        window_after_returns_later_active,
        window_token_budget_is_contiguous_from_newest,
        window_everything_includes_archived,
        count_reports_active_archived_tokens_and_last_seq,
        archive_moves_a_range_out_of_the_window,
        archive_edge_ranges,
        archived_ids_still_dedupe,
        clear_deletes_the_thread,
        scopes_are_isolated,
        token_counts_match_the_counter,
    ]
}

/// A history store without archive (nor cursor reads) that says so, and refuses `archive` with
/// `Unsupported` as the trait's default body does.
fn no_archive_history() -> DeclaredHistory {
    DeclaredHistory::new(HistoryCapabilities::none().with_ttl(true))
}

#[test]
fn archive_checks_pass_on_a_store_without_archive() {
    for (name, check) in every_archive_check() {
        assert!(
            !fails(&no_archive_history(), check),
            "{name} must pass on a store that honestly has no archive"
        );
    }
}

#[test]
fn every_archive_check_catches_a_store_that_claims_archive_but_refuses() {
    for (name, check) in every_archive_check() {
        assert!(
            fails(&broken_history(Flaw::ArchiveButRefuses), check),
            "{name} must fail on a store that declares archive and refuses it"
        );
    }
}

#[test]
fn every_archive_check_catches_a_store_that_archives_without_the_capability() {
    for (name, check) in every_archive_check() {
        assert!(
            fails(&broken_history(Flaw::NoArchiveButArchives), check),
            "{name} must fail on a store that declares no archive and archives"
        );
    }
}

#[test]
#[should_panic(expected = "archive 2..=4: expected success, got error")]
fn archive_check_names_a_refused_archive() {
    block_on(history::archive_moves_a_range_out_of_the_window(
        &broken_history(Flaw::ArchiveButRefuses),
    ));
}

#[test]
#[should_panic(
    expected = "archive 2..=4 on a store without the archive capability: expected an error of \
                kind unsupported"
)]
fn archive_check_names_an_undeclared_archive() {
    block_on(history::archive_moves_a_range_out_of_the_window(
        &broken_history(Flaw::NoArchiveButArchives),
    ));
}

/// The whole suite, as a backend runs it, fails on a store that lies about archive.
#[test]
#[should_panic(expected = "on a store without the archive capability")]
fn the_whole_suite_fails_on_a_store_that_lies_about_archive() {
    block_on(memory_testkit::run_all_history_checks(Arc::new(
        broken_history(Flaw::NoArchiveButArchives),
    )));
}

#[test]
#[should_panic(expected = "a retried batch inserts nothing")]
fn retried_append_catches_duplicates() {
    block_on(history::retried_append_is_idempotent(&broken_history(
        Flaw::DuplicatesOnRetry,
    )));
}

#[test]
#[should_panic(expected = "lists exactly its own 3 threads")]
fn listing_catches_a_tenant_leak() {
    block_on(history::list_threads_never_crosses_tenants(
        &broken_history(Flaw::ListsEveryTenant),
    ));
}

#[test]
#[should_panic(expected = "not an older, smaller one")]
fn token_budget_catches_a_window_with_holes() {
    block_on(history::window_token_budget_is_contiguous_from_newest(
        &broken_history(Flaw::BudgetSkipsWhatDoesNotFit),
    ));
}

#[test]
#[should_panic(expected = "a refused batch leaves the thread unchanged")]
fn oversized_message_catches_a_partial_write() {
    block_on(history::oversized_message_is_refused_atomically(
        &broken_history(Flaw::PartialBatchOnLimit),
    ));
}

#[test]
#[should_panic(expected = "expected an error of kind unsupported")]
fn ttl_catches_a_store_that_lies_about_its_capability() {
    block_on(history::ttl_expires_a_thread(&broken_history(
        Flaw::NoTtlButAccepts,
    )));
}

#[test]
#[should_panic(expected = "set_ttl: expected success, got error")]
fn ttl_catches_a_store_that_claims_ttl_but_refuses() {
    block_on(history::ttl_expires_a_thread(&broken_history(
        Flaw::TtlButRefuses,
    )));
}

#[test]
fn every_ttl_check_catches_a_store_that_lies_about_ttl() {
    let every_ttl_check = picked(history::every_shared_check(), is_ttl_check);
    for (name, check) in every_ttl_check {
        for flaw in [Flaw::TtlButRefuses, Flaw::NoTtlButAccepts] {
            assert!(
                fails(&broken_history(flaw), check),
                "{name} must fail on a store with the flaw {flaw:?}"
            );
        }
    }
}

#[test]
fn ttl_checks_pass_on_a_store_without_ttl() {
    block_on(async {
        let store = broken_history(Flaw::NoTtl);
        history::ttl_expires_a_thread(&store).await;
        history::ttl_none_removes_the_expiry(&store).await;
        history::ttl_is_refreshed_by_append(&store).await;
        history::ttl_on_unknown_thread_is_not_found(&store).await;
        history::purge_expired_removes_expired_threads(&store).await;
    });
}

/// Every history check of id deduplication.
fn every_dedupe_check() -> Vec<(&'static str, Check)> {
    checks![
        retried_append_is_idempotent,
        overlapping_batches_insert_only_new_messages,
        duplicate_ids_within_a_batch_are_stored_once,
        archived_ids_still_dedupe,
    ]
}

/// A store that keeps every guarantee but declares none of `dedupes_ids`, `counts_purged` and
/// `lists_every_thread` (it promises less than it does).
fn promises_less() -> DeclaredHistory {
    DeclaredHistory::new(
        InMemoryHistoryStore::new()
            .capabilities()
            .with_dedupes_ids(false)
            .with_counts_purged(false)
            .with_lists_every_thread(false),
    )
}

/// The weaker checks of a guarantee that is not declared pass on a store that keeps it anyway.
#[test]
fn the_whole_suite_passes_on_a_store_that_promises_less() {
    block_on(memory_testkit::run_all_history_checks(Arc::new(
        promises_less(),
    )));
}

#[test]
fn every_dedupe_check_catches_a_store_that_claims_dedupe_and_duplicates() {
    for (name, check) in every_dedupe_check() {
        assert!(
            fails(&broken_history(Flaw::DuplicatesOnRetry), check),
            "{name} must fail on a store that declares dedupes_ids and duplicates"
        );
    }
}

#[test]
fn every_dedupe_check_catches_a_false_outcome_without_the_claim() {
    for (name, check) in every_dedupe_check() {
        assert!(
            fails(&broken_history(Flaw::DuplicatesWithoutDedupeClaim), check),
            "{name} must fail on a store whose outcome names messages it did not store"
        );
    }
}

#[test]
#[should_panic(expected = "append the same batch again: the thread holds a message with id")]
fn retried_append_catches_a_duplicated_tail_without_the_claim() {
    block_on(history::retried_append_is_idempotent(&broken_history(
        Flaw::DuplicatesWithoutDedupeClaim,
    )));
}

#[test]
#[should_panic(expected = "purge_expired must count the 2 expired threads it removed")]
fn purge_catches_a_store_that_claims_counts_purged_and_returns_zero() {
    block_on(history::purge_expired_removes_expired_threads(
        &broken_history(Flaw::PurgeReturnsZero),
    ));
}

#[test]
fn purge_check_passes_on_a_store_that_returns_zero_and_says_so() {
    block_on(history::purge_expired_removes_expired_threads(
        &broken_history(Flaw::PurgeReturnsZeroUndeclared),
    ));
}

#[test]
#[should_panic(expected = "a scope with max-length ids is listed exactly")]
fn longest_ids_catch_a_store_that_claims_lists_every_thread_and_skips_one() {
    block_on(history::longest_ids_round_trip(&broken_history(
        Flaw::SkipsLongSessions,
    )));
}

#[test]
fn longest_ids_pass_on_a_store_that_skips_long_sessions_and_says_so() {
    block_on(history::longest_ids_round_trip(&broken_history(
        Flaw::SkipsLongSessionsUndeclared,
    )));
}

#[test]
#[should_panic(expected = "lists no other scope in its place")]
fn longest_ids_catch_a_store_that_lists_another_scope_in_place_of_one() {
    block_on(history::longest_ids_round_trip(&broken_history(
        Flaw::ListsLongSessionsAsAnother,
    )));
}

/// A session store whose saves ignore the expected version (last writer wins) or overwrite on
/// create, or that lies about its TTL.
#[derive(Debug)]
struct BrokenSessions {
    inner: InMemorySessionStore,
    overwrite_on_create: bool,
    ttl_lie: Option<TtlLie>,
}

/// How a store lies about its TTL.
#[derive(Debug, Clone, Copy)]
enum TtlLie {
    /// Declares TTL, refuses `set_ttl` and `purge_expired` with `Unsupported`.
    DeclaredButRefused,
    /// Declares no TTL, performs `set_ttl` and `purge_expired`.
    UndeclaredButPerformed,
}

fn lying_sessions(lie: TtlLie) -> BrokenSessions {
    BrokenSessions {
        inner: InMemorySessionStore::new(),
        overwrite_on_create: false,
        ttl_lie: Some(lie),
    }
}

#[memory_core::async_trait]
impl memory_core::LayeredSessions for BrokenSessions {
    type Inner = InMemorySessionStore;
    fn inner(&self) -> &InMemorySessionStore {
        &self.inner
    }
    fn capabilities(&self) -> SessionCapabilities {
        let honest = self.inner.capabilities();
        match self.ttl_lie {
            Some(TtlLie::UndeclaredButPerformed) => honest.with_ttl(false),
            _ => honest,
        }
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        let current = self.inner.load(scope).await?.map(|s| s.version);
        match (expected, current) {
            (None, Some(_)) if self.overwrite_on_create => {
                self.inner.delete(scope).await?;
                self.inner.save(scope, state, None).await
            }
            (Some(_), Some(v)) if !self.overwrite_on_create && self.ttl_lie.is_none() => {
                self.inner.save(scope, state, Some(v)).await
            }
            _ => self.inner.save(scope, state, expected).await,
        }
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        match self.ttl_lie {
            Some(TtlLie::DeclaredButRefused) => Err(Error::unsupported("no ttl")),
            _ => self.inner.set_ttl(scope, ttl).await,
        }
    }
    async fn purge_expired(&self) -> Result<u64> {
        match self.ttl_lie {
            Some(TtlLie::DeclaredButRefused) => Err(Error::unsupported("no ttl")),
            _ => self.inner.purge_expired().await,
        }
    }
}

/// A session check, its future boxed.
type SessionCheck = SharedCheck<dyn SessionStore>;

/// Every session check of the TTL capability, each with its name.
fn every_session_ttl_check() -> Vec<(&'static str, SessionCheck)> {
    picked(session::every_shared_check(), is_ttl_check)
}

fn session_check_fails(store: &dyn SessionStore, check: SessionCheck) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| block_on(check(store)))).is_err()
}

#[test]
fn session_ttl_checks_pass_on_a_store_without_ttl() {
    for (name, check) in every_session_ttl_check() {
        assert!(
            !session_check_fails(&RequiredOnlySessions::default(), check),
            "{name} must pass on a session store that honestly has no TTL"
        );
    }
}

#[test]
fn every_session_ttl_check_catches_a_store_that_lies_about_ttl() {
    for (name, check) in every_session_ttl_check() {
        for lie in [TtlLie::DeclaredButRefused, TtlLie::UndeclaredButPerformed] {
            assert!(
                session_check_fails(&lying_sessions(lie), check),
                "{name} must fail on a session store with the lie {lie:?}"
            );
        }
    }
}

#[test]
#[should_panic(expected = "expected an error of kind conflict")]
fn stale_save_catches_last_writer_wins() {
    block_on(session::stale_save_conflicts_and_changes_nothing(
        &BrokenSessions {
            inner: InMemorySessionStore::new(),
            overwrite_on_create: false,
            ttl_lie: None,
        },
    ));
}

#[test]
#[should_panic(expected = "creating a session that exists")]
fn create_catches_an_overwrite() {
    block_on(session::create_existing_conflicts(&BrokenSessions {
        inner: InMemorySessionStore::new(),
        overwrite_on_create: true,
        ttl_lie: None,
    }));
}

/// A vector store whose search looks in every scope it has seen, or that writes the valid
/// points of a batch it refuses.
#[derive(Debug)]
struct BrokenVectors {
    inner: InMemoryVectorStore,
    scopes: Mutex<Vec<Scope>>,
    search_every_scope: bool,
}

fn broken_vectors(search_every_scope: bool) -> BrokenVectors {
    BrokenVectors {
        inner: InMemoryVectorStore::new(),
        scopes: Mutex::new(Vec::new()),
        search_every_scope,
    }
}

#[memory_core::async_trait]
impl memory_core::LayeredVectors for BrokenVectors {
    type Inner = InMemoryVectorStore;
    fn inner(&self) -> &InMemoryVectorStore {
        &self.inner
    }
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.scopes.lock().unwrap().push(scope.clone());
        if self.search_every_scope {
            return self.inner.upsert(scope, points).await;
        }
        for p in points {
            self.inner.upsert(scope, std::slice::from_ref(p)).await?;
        }
        Ok(())
    }
    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        if !self.search_every_scope {
            return self.inner.search(scope, query).await;
        }
        let scopes = self.scopes.lock().unwrap().clone();
        let mut all = Vec::new();
        for s in scopes {
            for hit in self.inner.search(&s, query).await? {
                if !all.iter().any(|h: &ScoredPoint| h.id == hit.id) {
                    all.push(hit);
                }
            }
        }
        all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        all.truncate(query.top_k);
        Ok(all)
    }
}

#[test]
#[should_panic(expected = "a filter matching only another scope's payloads finds nothing")]
fn scope_check_catches_a_search_across_scopes() {
    block_on(vector::scope_is_enforced_whatever_the_filter(
        &broken_vectors(true),
    ));
}

#[test]
#[should_panic(expected = "writes nothing")]
fn invalid_vectors_catch_a_partial_write() {
    block_on(vector::invalid_vectors_are_refused_atomically(
        &broken_vectors(false),
    ));
}

/// The suites' entry points accept shared stores too.
#[test]
fn checks_take_arc_stores() {
    block_on(history::concurrent_writers_to_one_thread(Arc::new(
        InMemoryHistoryStore::new(),
    )));
}

/// How a store breaks cursor reads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CursorFlaw {
    /// Declares `cursor_reads`, refuses `read_since` with `Unsupported` (the trait's default).
    ClaimsButRefuses,
    /// Declares no `cursor_reads`, answers `read_since`.
    PerformsUndeclared,
    /// Gives every thread that holds messages the same epoch, forever: an archive, a clear or
    /// an expiry never moves it, so a reader gets a stale `Appended` answer.
    EpochNeverMoves,
    /// Reads the messages, then counts the thread in a second step: the cursor may hold appends
    /// the messages do not (a reader following it skips them).
    CursorAheadOfMessages,
}

/// An in-memory store with one flaw of `read_since`.
#[derive(Debug)]
struct BrokenCursor {
    inner: InMemoryHistoryStore,
    flaw: CursorFlaw,
}

fn broken_cursor(flaw: CursorFlaw) -> BrokenCursor {
    BrokenCursor {
        inner: InMemoryHistoryStore::new(),
        flaw,
    }
}

#[memory_core::async_trait]
impl memory_core::LayeredHistory for BrokenCursor {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        self.inner
            .capabilities()
            .with_cursor_reads(self.flaw != CursorFlaw::PerformsUndeclared)
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        match self.flaw {
            CursorFlaw::ClaimsButRefuses => Err(Error::unsupported("no cursor reads")),
            CursorFlaw::PerformsUndeclared => self.inner.read_since(scope, window, since).await,
            CursorFlaw::EpochNeverMoves => {
                let count = self.inner.count(scope).await?;
                let epoch = if count.active + count.archived > 0 {
                    1
                } else {
                    NO_EPOCH
                };
                let current = match since {
                    Some(cursor) => cursor.check(scope, epoch, count.last_seq)?,
                    None => false,
                };
                let after = since.filter(|_| current).map_or(0, |c| c.seq());
                let messages = self
                    .inner
                    .read(scope, window)
                    .await?
                    .into_iter()
                    .filter(|m| m.seq > after)
                    .collect();
                Ok(CursorRead::new(
                    Delta::for_cursor(current),
                    messages,
                    ThreadCursor::new(scope, epoch, count.last_seq),
                    count,
                ))
            }
            CursorFlaw::CursorAheadOfMessages => {
                let out = self.inner.read_since(scope, window, since).await?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                let later = self.inner.count(scope).await?;
                Ok(CursorRead::new(
                    out.delta,
                    out.messages,
                    ThreadCursor::new(scope, out.cursor.epoch(), later.last_seq),
                    later,
                ))
            }
        }
    }
}

/// Every cursor-read check that takes a shared store.
fn every_cursor_check() -> Vec<(&'static str, Check)> {
    picked(history::every_shared_check(), |name| {
        name.starts_with("cursor_")
    })
}

/// Whether the racing cursor check fails (panics) on `store`.
fn racing_check_fails(store: impl HistoryStore) -> bool {
    let store: Arc<dyn HistoryStore> = Arc::new(store);
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        block_on(history::cursor_reads_racing_appends_skip_no_message(store))
    }))
    .is_err()
}

#[test]
fn cursor_checks_pass_on_a_store_without_cursor_reads() {
    for (name, check) in every_cursor_check() {
        assert!(
            !fails(&no_archive_history(), check),
            "{name} must pass on a store that honestly has no cursor reads"
        );
    }
    assert!(!racing_check_fails(no_archive_history()));
}

#[test]
fn every_cursor_check_catches_a_store_that_lies_about_cursor_reads() {
    for flaw in [CursorFlaw::ClaimsButRefuses, CursorFlaw::PerformsUndeclared] {
        for (name, check) in every_cursor_check() {
            assert!(
                fails(&broken_cursor(flaw), check),
                "{name} must fail on a store with the flaw {flaw:?}"
            );
        }
        assert!(
            racing_check_fails(broken_cursor(flaw)),
            "the racing check must fail on a store with the flaw {flaw:?}"
        );
    }
}

#[test]
#[should_panic(
    expected = "read_since(All, None) on a store without the cursor_reads capability: expected an \
                error of kind unsupported"
)]
fn cursor_check_names_an_undeclared_cursor_read() {
    block_on(history::cursor_read_without_cursor_is_the_whole_window(
        &broken_cursor(CursorFlaw::PerformsUndeclared),
    ));
}

#[test]
#[should_panic(
    expected = "after an archive that moved 2 messages: read_since(All) answers Delta::Whole"
)]
fn archive_check_catches_a_stale_appended_answer() {
    block_on(history::cursor_read_after_archive_is_whole(&broken_cursor(
        CursorFlaw::EpochNeverMoves,
    )));
}

#[test]
fn every_check_of_a_changed_thread_catches_an_epoch_that_never_moves() {
    let changed = checks![
        cursor_read_after_archive_is_whole,
        cursor_read_after_clear_is_whole,
        cursor_read_after_expiry_is_whole,
    ];
    for (name, check) in changed {
        assert!(
            fails(&broken_cursor(CursorFlaw::EpochNeverMoves), check),
            "{name} must fail on a store whose epoch never moves"
        );
    }
}

/// The whole suite, as a backend runs it, fails on a store whose epoch never moves.
#[test]
#[should_panic(expected = "answers Delta::Whole")]
fn the_whole_suite_fails_on_a_store_whose_epoch_never_moves() {
    block_on(memory_testkit::run_all_history_checks(Arc::new(
        broken_cursor(CursorFlaw::EpochNeverMoves),
    )));
}

#[test]
fn racing_check_catches_a_cursor_ahead_of_its_messages() {
    assert!(
        racing_check_fails(broken_cursor(CursorFlaw::CursorAheadOfMessages)),
        "the racing check must fail on a store whose cursor is counted after its messages"
    );
}

/// The honest cursor reads of the in-memory store pass where the flawed ones fail.
#[test]
fn racing_check_passes_on_the_in_memory_store() {
    assert!(!racing_check_fails(InMemoryHistoryStore::new()));
}
