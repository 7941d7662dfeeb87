//! The checks of paged reads, tenant listings, deleting by filter and forgetting catch broken
//! stores: each store here wraps an in-memory store and breaks one line of those contracts,
//! and the check of that line must fail; an honest store without the capability passes.

// The broken stores are test doubles: unwrapping a poisoned lock is the simplest correct thing
// for them to do.
#![allow(clippy::unwrap_used)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use memory_core::{
    AppendOutcome, ChatMessage, HistoryCapabilities, HistoryStore, InMemoryHistoryStore,
    InMemorySessionStore, InMemoryVectorStore, Page, PageRequest, Result, Scope, ScopeFilter,
    SessionStore, StoredMessage, TenantId, VectorStore, Window,
};
use memory_testkit::__private::block_on;
use memory_testkit::forget::ForgetStores;
use memory_testkit::{forget, history, session, vector};

/// Whether `run` fails (panics).
fn fails(run: impl FnOnce()) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(run)).is_err()
}

/// What a [`BrokenPaging`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// None: the in-memory store as it is, without paged reads or tenant listings.
    HonestlyWithout,
    /// `read_page` leaves archived messages out.
    SkipsArchived,
    /// `read_page` ignores the limit's clamp to `MAX_READ_PAGE`.
    NoClamp,
    /// Declares `paged_reads` and `lists_tenants` but refuses both.
    DeclaresButRefuses,
    /// Declares neither but performs both.
    PerformsUndeclared,
    /// `list_tenants` repeats the last tenant of each page on the next.
    RepeatsTenants,
    /// `list_tenants` lists the tenants of cleared threads too.
    ListsCleared,
}

#[derive(Debug)]
struct BrokenPaging {
    inner: InMemoryHistoryStore,
    flaw: Flaw,
    /// Every tenant ever appended to (what a store that never forgets a tenant would list).
    ever: std::sync::Mutex<std::collections::BTreeSet<TenantId>>,
}

fn broken(flaw: Flaw) -> BrokenPaging {
    BrokenPaging {
        inner: InMemoryHistoryStore::new(),
        flaw,
        ever: std::sync::Mutex::default(),
    }
}

#[memory_core::async_trait]
impl memory_core::LayeredHistory for BrokenPaging {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        let honest = self.inner.capabilities();
        match self.flaw {
            Flaw::HonestlyWithout | Flaw::PerformsUndeclared => {
                honest.with_paged_reads(false).with_lists_tenants(false)
            }
            _ => honest,
        }
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        if !messages.is_empty() {
            self.ever.lock().unwrap().insert(scope.tenant().clone());
        }
        self.inner.append(scope, messages).await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        match self.flaw {
            Flaw::HonestlyWithout => Err(memory_core::Error::new(
                memory_core::ErrorKind::Unsupported,
                "no paging",
            )),
            Flaw::DeclaresButRefuses => Err(memory_core::Error::new(
                memory_core::ErrorKind::Unsupported,
                "no paging",
            )),
            Flaw::SkipsArchived => {
                let page = self.inner.read_page(scope, after, limit).await?;
                Ok(page.into_iter().filter(|m| !m.archived).collect())
            }
            Flaw::NoClamp => {
                let all = self.inner.read(scope, Window::Everything).await?;
                Ok(all
                    .into_iter()
                    .filter(|m| m.seq > after)
                    .take(limit.max(1))
                    .collect())
            }
            _ => self.inner.read_page(scope, after, limit).await,
        }
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        match self.flaw {
            Flaw::HonestlyWithout | Flaw::DeclaresButRefuses => Err(memory_core::Error::new(
                memory_core::ErrorKind::Unsupported,
                "no tenant listing",
            )),
            Flaw::RepeatsTenants => {
                let mut listed = self.inner.list_tenants(page).await?;
                if listed.next_cursor.is_some() && listed.items.len() >= 2 {
                    let before_last = listed.items[listed.items.len() - 2].as_str().to_owned();
                    listed.next_cursor = Some(before_last);
                }
                Ok(listed)
            }
            Flaw::ListsCleared => {
                let ever = self.ever.lock().unwrap().clone();
                let after = page.cursor.clone();
                let rest: Vec<TenantId> = ever
                    .into_iter()
                    .filter(|t| after.as_deref().is_none_or(|c| t.as_str() > c))
                    .collect();
                let limit = page.limit.max(1);
                let items: Vec<TenantId> = rest.iter().take(limit).cloned().collect();
                let next_cursor = (rest.len() > limit)
                    .then(|| items.last().map(|t| t.as_str().to_owned()))
                    .flatten();
                Ok(Page { items, next_cursor })
            }
            _ => self.inner.list_tenants(page).await,
        }
    }
}

fn read_page_fails(flaw: Flaw) -> bool {
    let store = broken(flaw);
    fails(|| block_on(history::read_page_pages_every_message_once(&store)))
}

fn list_tenants_fails(flaw: Flaw) -> bool {
    let store = broken(flaw);
    fails(|| block_on(history::list_tenants_pages_each_tenant_once(&store)))
}

#[test]
fn paging_checks_pass_on_an_honest_store_without_the_capabilities() {
    assert!(!read_page_fails(Flaw::HonestlyWithout));
    assert!(!list_tenants_fails(Flaw::HonestlyWithout));
    let store: Arc<dyn HistoryStore> = Arc::new(broken(Flaw::HonestlyWithout));
    block_on(history::read_page_racing_appends_reads_a_gap_free_prefix(
        store,
    ));
}

#[test]
fn read_page_checks_catch_broken_pages() {
    for flaw in [
        Flaw::SkipsArchived,
        Flaw::NoClamp,
        Flaw::DeclaresButRefuses,
        Flaw::PerformsUndeclared,
    ] {
        assert!(read_page_fails(flaw), "{flaw:?} is caught");
    }
}

#[test]
fn list_tenants_checks_catch_broken_listings() {
    for flaw in [
        Flaw::RepeatsTenants,
        Flaw::ListsCleared,
        Flaw::DeclaresButRefuses,
        Flaw::PerformsUndeclared,
    ] {
        assert!(list_tenants_fails(flaw), "{flaw:?} is caught");
    }
}

/// A session store whose `delete` says it deleted and keeps the session.
#[derive(Debug, Default)]
struct KeepsDeleted(InMemorySessionStore);

#[memory_core::async_trait]
impl memory_core::LayeredSessions for KeepsDeleted {
    type Inner = InMemorySessionStore;
    fn inner(&self) -> &InMemorySessionStore {
        &self.0
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        Ok(self.0.load(scope).await?.is_some())
    }
}

/// A vector store whose `delete_matching` and `count_matching` ignore all but the tenant.
#[derive(Debug, Default)]
struct DeletesTheWholeTenant(InMemoryVectorStore);

#[memory_core::async_trait]
impl memory_core::LayeredVectors for DeletesTheWholeTenant {
    type Inner = InMemoryVectorStore;
    fn inner(&self) -> &InMemoryVectorStore {
        &self.0
    }
    async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let whole = ScopeFilter::tenant(filter.tenant.clone());
        self.0.delete_matching(&whole).await
    }
    async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
        let whole = ScopeFilter::tenant(filter.tenant.clone());
        self.0.count_matching(&whole).await
    }
}

#[test]
fn tenant_listing_of_sessions_catches_a_store_that_keeps_deleted_sessions() {
    let store = KeepsDeleted::default();
    assert!(fails(|| block_on(
        session::list_tenants_pages_each_tenant_once(&store)
    )));
}

#[test]
fn delete_matching_check_catches_a_store_that_deletes_more_than_asked() {
    let store = DeletesTheWholeTenant::default();
    assert!(fails(|| block_on(
        vector::delete_matching_removes_the_selected_scopes(&store)
    )));
}

#[test]
fn forget_checks_catch_a_session_store_that_keeps_what_it_deletes() {
    let stores = ForgetStores {
        history: Arc::new(InMemoryHistoryStore::new()),
        sessions: Arc::new(KeepsDeleted::default()),
        vectors: None,
    };
    assert!(fails(|| block_on(forget::forget_a_user(stores.clone()))));
    assert!(fails(|| block_on(forget::forget_a_tenant(stores))));
}

#[test]
fn forget_checks_catch_a_vector_store_that_deletes_more_than_asked() {
    let stores = ForgetStores {
        history: Arc::new(InMemoryHistoryStore::new()),
        sessions: Arc::new(InMemorySessionStore::new()),
        vectors: Some(Arc::new(DeletesTheWholeTenant::default())),
    };
    assert!(fails(|| block_on(forget::forget_an_agent(stores.clone()))));
    // A whole tenant is what it deletes anyway: that forget passes.
    block_on(forget::forget_a_tenant(stores));
}
