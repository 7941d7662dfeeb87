//! Forgetting: one call that deletes everything a scope filter selects — a tenant, a user, an
//! agent or a session — across every store an application configured, and returns a receipt
//! of what each store deleted.
//!
//! A [`Forgetter`] holds the stores to forget in (each a [`Forget`] target: the adapters
//! [`HistoryForget`], [`SessionForget`], [`VectorForget`] and [`TextForget`] here, Mem0's in
//! `memory-mem0`),
//! and [`Forgetter::forget`] runs them in order with one [`ScopeFilter`]:
//!
//! ```
//! # async fn run() -> memory_core::Result<()> {
//! use std::sync::Arc;
//! use memory_core::forget::{ForgetMode, Forgetter};
//! use memory_core::{InMemoryHistoryStore, InMemorySessionStore, ScopeFilter, TenantId, UserId};
//!
//! let history = Arc::new(InMemoryHistoryStore::new());
//! let sessions = Arc::new(InMemorySessionStore::new());
//! let forgetter = Forgetter::new().history(history).sessions(sessions);
//! let dana = ScopeFilter::tenant(TenantId::new("acme")?).with_user(UserId::new("dana")?);
//! let receipt = forgetter.forget(&dana, ForgetMode::Delete).await?;
//! println!("{receipt}");
//! # Ok(())
//! # }
//! ```
//!
//! # Behavior
//! - A filter always names one tenant and never reaches another tenant's data; the user, agent,
//!   session and source narrow it. A scope matches when every part the filter names is equal
//!   (a filter naming a user does not match a scope without a user): [`ScopeFilter::matches`].
//! - [`ForgetMode::Delete`] deletes, in each store, every item of every matching scope: a
//!   history's threads with their active and archived messages, every session state (block
//!   states of a `Memory` included: they are sessions under the
//!   [`BLOCK_STATE_SOURCE`](crate::memory::BLOCK_STATE_SOURCE) source), vector points, text
//!   index documents, Mem0 memories. Afterwards no read of any API returns data of a matching scope.
//! - [`ForgetMode::DryRun`] counts what `Delete` would delete and changes nothing.
//! - Expired data is gone too: a store whose data can expire may keep an expired thread's or
//!   session's rows until it is purged, and listings never show them, so a `Delete` first
//!   purges the store's expired data ([`HistoryStore::purge_expired`],
//!   [`SessionStore::purge_expired`]; every tenant's, since none of it is readable any more).
//! - Idempotent: forgetting again finds nothing and reports zeros. A run stopped half-way (a
//!   crash, a dead server) leaves some stores forgotten and others not; running it again
//!   finishes the work. A failing store stops the run with its error, naming the store.
//! - Data written to a matching scope while a forget runs may survive it; run it again once
//!   writers are stopped.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::history::HistoryStore;
use crate::lexical::TextIndex;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter};
use crate::session::SessionStore;
use crate::vector::VectorStore;

/// How many scopes a forget lists per page.
const LIST_PAGE: usize = 200;

/// Whether a forget deletes or only counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgetMode {
    /// Delete what the filter selects.
    Delete,
    /// Count what [`Delete`](Self::Delete) would delete; change nothing.
    DryRun,
}

/// What one store deleted (or, in a dry run, would delete).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreReceipt {
    /// The store, as the application named it ("history", "sessions", "vectors", "texts",
    /// "mem0").
    pub store: String,
    /// The scopes (threads, sessions) that held matching data; 0 when the store cannot tell
    /// its items' scopes apart (a vector store deleting by filter, Mem0).
    pub scopes: u64,
    /// The items deleted: messages, session states, vector points, text documents or memories
    /// (see [`unit`](Self::unit)).
    pub items: u64,
    /// What [`items`](Self::items) counts, plural: "messages", "sessions", "points",
    /// "documents", "memories".
    pub unit: String,
}

impl StoreReceipt {
    /// A receipt of `items` `unit` in `scopes` scopes of `store`.
    pub fn new(store: impl Into<String>, scopes: u64, items: u64, unit: impl Into<String>) -> Self {
        Self {
            store: store.into(),
            scopes,
            items,
            unit: unit.into(),
        }
    }

    /// The scopes that held matching data as a reader should see them: `None` when the store
    /// cannot tell its items' scopes apart and deleted some ([`scopes`](Self::scopes) is 0
    /// then, which would read as "items in no scope"); the count otherwise (0 when nothing
    /// matched, which is exact for every store). The server's and the command's receipts
    /// both show this.
    pub fn known_scopes(&self) -> Option<u64> {
        (self.scopes > 0 || self.items == 0).then_some(self.scopes)
    }
}

/// What a [`Forgetter::forget`] did, store by store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForgetReceipt {
    /// The filter it ran with.
    pub filter: ScopeFilter,
    /// Whether it was a dry run (nothing deleted).
    pub mode: ForgetMode,
    /// Each store's receipt, in the order the stores ran.
    pub stores: Vec<StoreReceipt>,
}

impl ForgetReceipt {
    /// The items deleted across every store.
    pub fn total_items(&self) -> u64 {
        self.stores
            .iter()
            .fold(0u64, |sum, store| sum.saturating_add(store.items))
    }
}

impl fmt::Display for ForgetReceipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match self.mode {
            ForgetMode::Delete => "deleted",
            ForgetMode::DryRun => "would delete",
        };
        write!(f, "Forget {}:", self.filter)?;
        if self.stores.is_empty() {
            return write!(f, " no store was configured.");
        }
        for store in &self.stores {
            write!(
                f,
                "\n  {}: {verb} {} {}",
                store.store, store.items, store.unit
            )?;
            if store.scopes > 0 {
                let noun = if store.scopes == 1 { "scope" } else { "scopes" };
                write!(f, " in {} {noun}", store.scopes)?;
            }
        }
        Ok(())
    }
}

/// A store a [`Forgetter`] can forget in.
///
/// # Behavior
/// - [`forget`](Forget::forget) with [`ForgetMode::Delete`] deletes every item of the store
///   that belongs to a scope the filter [matches](ScopeFilter::matches), and nothing else;
///   afterwards no read of the store returns such an item. It returns what it deleted.
/// - With [`ForgetMode::DryRun`] it returns what `Delete` would delete now and changes
///   nothing.
/// - It is idempotent: a second call deletes nothing and returns zeros; a call after one that
///   failed half-way deletes the rest.
/// - A store that cannot select exactly the filter's data (Mem0 has no tenant; an index that
///   does not keep the source cannot narrow by it) refuses with
///   [`InvalidInput`](crate::ErrorKind::InvalidInput) or
///   [`Unsupported`](crate::ErrorKind::Unsupported) and deletes nothing: it never deletes
///   more than asked.
#[async_trait]
pub trait Forget: Send + Sync + fmt::Debug {
    /// The store's name in receipts and errors ("history", "sessions", ...).
    fn store_name(&self) -> &str;

    /// Deletes (or counts) what `filter` selects.
    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt>;
}

/// Declares a [`Forget`] adapter: a struct holding a receipt name and the store it forgets in
/// (in the field named in braces), with `new` (the default name) and `named`.
macro_rules! forget_adapter {
    (
        $(#[$meta:meta])*
        pub struct $Adapter:ident<$S:ident: $Store:ident> { $field:ident } named $default:literal
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $Adapter<$S> {
            name: String,
            $field: $S,
        }

        impl<$S: $Store> $Adapter<$S> {
            #[doc = concat!("Forgets in `", stringify!($field), "`, named \"", $default, "\" in receipts.")]
            pub fn new($field: $S) -> Self {
                Self::named($default, $field)
            }

            #[doc = concat!("Forgets in `", stringify!($field), "`, named `name` in receipts.")]
            pub fn named(name: impl Into<String>, $field: $S) -> Self {
                Self {
                    name: name.into(),
                    $field,
                }
            }
        }
    };
}

/// A store forgotten scope by scope: its scopes are listed, then each one's items deleted or
/// counted ([`forget_listed`]).
#[async_trait]
trait ForgetByScope: Sync {
    /// One page of the scopes `filter` selects.
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>>;

    /// Deletes (or counts) the scope's items; returns how many.
    async fn forget_scope(&self, scope: &Scope, mode: ForgetMode) -> Result<u64>;
}

/// Forgets (or counts) the items of every scope `store` lists, page after page, that `filter`
/// matches (checked again: a forget never deletes more than asked, whatever the listing);
/// returns how many scopes held items and how many items in all.
async fn forget_listed(
    store: &impl ForgetByScope,
    filter: &ScopeFilter,
    mode: ForgetMode,
) -> Result<(u64, u64)> {
    let mut page = PageRequest::first(LIST_PAGE);
    let (mut scopes, mut items) = (0u64, 0u64);
    loop {
        let listed = store.list(filter, page).await?;
        for scope in listed.items.iter().filter(|s| filter.matches(s)) {
            let found = store.forget_scope(scope, mode).await?;
            if found > 0 {
                scopes = scopes.saturating_add(1);
                items = items.saturating_add(found);
            }
        }
        match listed.next_cursor {
            Some(cursor) => page = PageRequest::after(LIST_PAGE, cursor),
            None => break,
        }
    }
    Ok((scopes, items))
}

/// Calls `delete` in a [`ForgetMode::Delete`] and `count` in a [`ForgetMode::DryRun`], and only
/// that one: a store may start work when the call is made, before its future is polled.
async fn delete_or_count<Delete, Count>(
    mode: ForgetMode,
    delete: impl FnOnce() -> Delete,
    count: impl FnOnce() -> Count,
) -> Result<u64>
where
    Delete: Future<Output = Result<u64>>,
    Count: Future<Output = Result<u64>>,
{
    match mode {
        ForgetMode::Delete => delete().await,
        ForgetMode::DryRun => count().await,
    }
}

forget_adapter! {
    /// Forgets the threads of a [`HistoryStore`]: each matching thread, active and archived
    /// messages, is cleared.
    pub struct HistoryForget<H: HistoryStore> { store } named "history"
}

#[async_trait]
impl<H: HistoryStore> Forget for HistoryForget<H> {
    fn store_name(&self) -> &str {
        &self.name
    }

    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt> {
        // Expired threads are never listed, but a store may still hold their rows.
        if mode == ForgetMode::Delete && self.store.capabilities().ttl {
            self.store.purge_expired().await?;
        }
        let (threads, messages) = forget_listed(self, filter, mode).await?;
        Ok(StoreReceipt::new(&self.name, threads, messages, "messages"))
    }
}

#[async_trait]
impl<H: HistoryStore> ForgetByScope for HistoryForget<H> {
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.store.list_threads(filter, page).await
    }

    async fn forget_scope(&self, scope: &Scope, mode: ForgetMode) -> Result<u64> {
        match mode {
            ForgetMode::Delete => self.store.clear(scope).await,
            ForgetMode::DryRun => {
                let count = self.store.count(scope).await?;
                Ok(count.active.saturating_add(count.archived))
            }
        }
    }
}

forget_adapter! {
    /// Forgets the sessions of a [`SessionStore`]: each matching session state is deleted,
    /// whatever its source (a `Memory`'s block states included).
    pub struct SessionForget<S: SessionStore> { store } named "sessions"
}

#[async_trait]
impl<S: SessionStore> Forget for SessionForget<S> {
    fn store_name(&self) -> &str {
        &self.name
    }

    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt> {
        // Expired sessions are never listed, but a store may still hold their states.
        if mode == ForgetMode::Delete && self.store.capabilities().ttl {
            self.store.purge_expired().await?;
        }
        let (sessions, _) = forget_listed(self, filter, mode).await?;
        Ok(StoreReceipt::new(
            &self.name, sessions, sessions, "sessions",
        ))
    }
}

#[async_trait]
impl<S: SessionStore> ForgetByScope for SessionForget<S> {
    async fn list(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.store.list(filter, page).await
    }

    async fn forget_scope(&self, scope: &Scope, mode: ForgetMode) -> Result<u64> {
        let found = match mode {
            ForgetMode::Delete => self.store.delete(scope).await?,
            ForgetMode::DryRun => self.store.load(scope).await?.is_some(),
        };
        Ok(u64::from(found))
    }
}

forget_adapter! {
    /// Forgets the points of a [`VectorStore`] that supports
    /// [`delete_matching`](VectorStore::delete_matching) (see
    /// [`VectorCapabilities::deletes_matching`](crate::vector::VectorCapabilities::deletes_matching)).
    pub struct VectorForget<V: VectorStore> { store } named "vectors"
}

#[async_trait]
impl<V: VectorStore> Forget for VectorForget<V> {
    fn store_name(&self) -> &str {
        &self.name
    }

    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt> {
        let points = delete_or_count(
            mode,
            || self.store.delete_matching(filter),
            || self.store.count_matching(filter),
        )
        .await?;
        Ok(StoreReceipt::new(&self.name, 0, points, "points"))
    }
}

forget_adapter! {
    /// Forgets the documents of a [`TextIndex`] that supports
    /// [`delete_matching`](TextIndex::delete_matching) (see
    /// [`TextCapabilities::deletes_matching`](crate::lexical::TextCapabilities::deletes_matching));
    /// an index without it refuses with [`Unsupported`](crate::ErrorKind::Unsupported) and
    /// deletes nothing.
    pub struct TextForget<T: TextIndex> { index } named "texts"
}

#[async_trait]
impl<T: TextIndex> Forget for TextForget<T> {
    fn store_name(&self) -> &str {
        &self.name
    }

    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt> {
        let documents = delete_or_count(
            mode,
            || self.index.delete_matching(filter),
            || self.index.count_matching(filter),
        )
        .await?;
        Ok(StoreReceipt::new(&self.name, 0, documents, "documents"))
    }
}

/// Forgets a filter's data across several stores, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct Forgetter {
    targets: Vec<Arc<dyn Forget>>,
}

impl Forgetter {
    /// A forgetter with no store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a history store, named "history".
    #[must_use]
    pub fn history(self, store: Arc<dyn HistoryStore>) -> Self {
        self.target(Arc::new(HistoryForget::new(store)))
    }

    /// Adds a session store, named "sessions".
    #[must_use]
    pub fn sessions(self, store: Arc<dyn SessionStore>) -> Self {
        self.target(Arc::new(SessionForget::new(store)))
    }

    /// Adds a vector store, named "vectors".
    #[must_use]
    pub fn vectors(self, store: Arc<dyn VectorStore>) -> Self {
        self.target(Arc::new(VectorForget::new(store)))
    }

    /// Adds a text index, named "texts".
    #[must_use]
    pub fn texts(self, index: Arc<dyn TextIndex>) -> Self {
        self.target(Arc::new(TextForget::new(index)))
    }

    /// Adds any store that can forget (Mem0's, say).
    #[must_use]
    pub fn target(mut self, target: Arc<dyn Forget>) -> Self {
        self.targets.push(target);
        self
    }

    /// The stores' names, in order.
    pub fn store_names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.store_name()).collect()
    }

    /// Deletes (or, with [`ForgetMode::DryRun`], counts) what `filter` selects in every store;
    /// see the module's `# Behavior` list.
    ///
    /// # Errors
    /// The first failing store's error, its message prefixed with the store's name and the
    /// stores already done; running the same forget again is safe and finishes the work.
    pub async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<ForgetReceipt> {
        let span = tracing::info_span!(
            "agent_memory.forget",
            otel.status_code = tracing::field::Empty,
            agent_memory.scope.tenant = %filter.tenant,
            agent_memory.scope.user = filter.user.as_ref().map(|u| u.as_str()),
            agent_memory.scope.agent = filter.agent.as_ref().map(|a| a.as_str()),
            agent_memory.scope.session = filter.session.as_ref().map(|s| s.as_str()),
            agent_memory.scope.source = filter.source.as_ref().map(|s| s.as_str()),
            agent_memory.forget.dry_run = mode == ForgetMode::DryRun,
            agent_memory.forget.stores = crate::span_fields::int(self.targets.len()),
            agent_memory.forget.items = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let mut stores = Vec::with_capacity(self.targets.len());
        for target in &self.targets {
            match target.forget(filter, mode).instrument(span.clone()).await {
                Ok(receipt) => stores.push(receipt),
                Err(error) => {
                    span.record("otel.status_code", "ERROR");
                    span.record("error.type", error.kind().as_str());
                    return Err(failed_in(target.store_name(), &stores, error));
                }
            }
        }
        let items = stores
            .iter()
            .fold(0u64, |sum, store| sum.saturating_add(store.items));
        span.record("agent_memory.forget.items", crate::span_fields::int(items));
        if mode == ForgetMode::Delete {
            for store in &stores {
                tracing::event!(
                    target: "agent_memory::metrics",
                    parent: None,
                    tracing::Level::DEBUG,
                    monotonic_counter.agent_memory.forget.deleted_items = store.items,
                    agent_memory.forget.store = store.store.as_str(),
                    agent_memory.forget.unit = store.unit.as_str(),
                );
            }
        }
        Ok(ForgetReceipt {
            filter: filter.clone(),
            mode,
            stores,
        })
    }
}

/// The error of a forget that failed in `store` after `done` succeeded.
fn failed_in(store: &str, done: &[StoreReceipt], error: Error) -> Error {
    let done = if done.is_empty() {
        "no store was finished".to_owned()
    } else {
        let names: Vec<&str> = done.iter().map(|r| r.store.as_str()).collect();
        format!("{} finished", names.join(", "))
    };
    let message = format!(
        "forgetting in the {store} store failed ({done}; running the forget again is safe and finishes it): {}",
        error.message()
    );
    Error::new_like(&error, message)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        ChatMessage, InMemoryHistoryStore, InMemorySessionStore, Scope, SessionId, TenantId, UserId,
    };

    #[test]
    fn scopes_are_unknown_only_where_items_were_deleted_without_them() {
        let known = StoreReceipt::new("history", 2, 5, "messages");
        assert_eq!(known.known_scopes(), Some(2));
        let uncounted = StoreReceipt::new("vectors", 0, 4, "points");
        assert_eq!(
            uncounted.known_scopes(),
            None,
            "4 points in no scope is not a count"
        );
        let nothing = StoreReceipt::new("vectors", 0, 0, "points");
        assert_eq!(
            nothing.known_scopes(),
            Some(0),
            "nothing deleted is in 0 scopes"
        );
    }

    #[tokio::test]
    async fn a_forget_purges_expired_threads_and_sessions_it_cannot_list() {
        let history = Arc::new(InMemoryHistoryStore::new());
        let sessions = Arc::new(InMemorySessionStore::new());
        let scope = Scope::session("s1")
            .and_then(|s| s.with_tenant("acme"))
            .and_then(|s| s.with_user("dana"))
            .expect("valid ids");
        history
            .append(&scope, &[ChatMessage::user("my name is Dana")])
            .await
            .expect("append");
        sessions
            .save(&scope, &serde_json::json!({"name": "Dana"}), None)
            .await
            .expect("save");
        let ttl = Some(Duration::from_millis(1));
        history.set_ttl(&scope, ttl).await.expect("history ttl");
        sessions.set_ttl(&scope, ttl).await.expect("session ttl");
        tokio::time::sleep(Duration::from_millis(20)).await;

        let forgetter = Forgetter::new()
            .history(history.clone())
            .sessions(sessions.clone());
        let filter = ScopeFilter::tenant(TenantId::new("acme").expect("tenant"))
            .with_user(UserId::new("dana").expect("user"));
        let dry = forgetter
            .forget(&filter, ForgetMode::DryRun)
            .await
            .expect("dry run");
        assert_eq!(dry.total_items(), 0, "expired data is not listed");
        // A dry run purges nothing: the expired rows are still there to purge.
        forgetter
            .forget(&filter, ForgetMode::Delete)
            .await
            .expect("forget");
        // The forget purged them: nothing expired is left.
        assert_eq!(history.purge_expired().await.expect("purge"), 0);
        assert_eq!(sessions.purge_expired().await.expect("purge"), 0);
    }

    #[test]
    fn a_receipt_reads_as_sentences() {
        let receipt = ForgetReceipt {
            filter: ScopeFilter::tenant(TenantId::new("acme").expect("tenant"))
                .with_session(SessionId::new("s1").expect("session")),
            mode: ForgetMode::DryRun,
            stores: vec![
                StoreReceipt::new("history", 1, 18, "messages"),
                StoreReceipt::new("sessions", 2, 2, "sessions"),
                StoreReceipt::new("vectors", 0, 4, "points"),
            ],
        };
        assert_eq!(
            receipt.to_string(),
            "Forget tenant acme, session s1:\n  history: would delete 18 messages in 1 scope\n  \
             sessions: would delete 2 sessions in 2 scopes\n  vectors: would delete 4 points"
        );
    }

    #[tokio::test]
    async fn a_dry_run_purges_nothing() {
        let history = Arc::new(InMemoryHistoryStore::new());
        let scope = Scope::session("s1").expect("valid id");
        history
            .append(&scope, &[ChatMessage::user("hello")])
            .await
            .expect("append");
        history
            .set_ttl(&scope, Some(Duration::from_millis(1)))
            .await
            .expect("ttl");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let forgetter = Forgetter::new().history(history.clone());
        let filter = ScopeFilter::tenant(scope.tenant().clone());
        forgetter
            .forget(&filter, ForgetMode::DryRun)
            .await
            .expect("dry run");
        assert_eq!(history.purge_expired().await.expect("purge"), 1);
    }
    /// A text index holding one document per listed scope, for the [`TextForget`] tests.
    #[derive(Debug, Default)]
    struct ScopesIndex {
        scopes: std::sync::Mutex<Vec<Scope>>,
        deletes_matching: bool,
    }

    impl ScopesIndex {
        fn holding(scopes: Vec<Scope>, deletes_matching: bool) -> Self {
            Self {
                scopes: std::sync::Mutex::new(scopes),
                deletes_matching,
            }
        }

        fn left(&self) -> usize {
            self.scopes.lock().expect("lock").len()
        }
    }

    #[async_trait]
    impl TextIndex for ScopesIndex {
        fn capabilities(&self) -> crate::TextCapabilities {
            crate::TextCapabilities::none().with_deletes_matching(self.deletes_matching)
        }
        async fn upsert(&self, _: &Scope, _: &[crate::TextDocument]) -> Result<()> {
            Ok(())
        }
        async fn search(
            &self,
            _: &Scope,
            _: &crate::TextQuery,
        ) -> Result<Vec<crate::ScoredDocument>> {
            Ok(Vec::new())
        }
        async fn get(&self, _: &Scope, _: &[uuid::Uuid]) -> Result<Vec<crate::TextDocument>> {
            Ok(Vec::new())
        }
        async fn delete(&self, _: &Scope, _: &[uuid::Uuid]) -> Result<u64> {
            Ok(0)
        }
        async fn count(&self, scope: &Scope) -> Result<u64> {
            let scopes = self.scopes.lock().expect("lock");
            Ok(scopes.iter().filter(|s| *s == scope).count() as u64)
        }
        async fn clear(&self, _: &Scope) -> Result<u64> {
            Ok(0)
        }
        async fn delete_matching(&self, filter: &ScopeFilter) -> Result<u64> {
            if !self.deletes_matching {
                return Err(crate::Error::unsupported("no delete_matching here"));
            }
            let mut scopes = self.scopes.lock().expect("lock");
            let before = scopes.len();
            scopes.retain(|s| !filter.matches(s));
            Ok(before.saturating_sub(scopes.len()) as u64)
        }
        async fn count_matching(&self, filter: &ScopeFilter) -> Result<u64> {
            if !self.deletes_matching {
                return Err(crate::Error::unsupported("no count_matching here"));
            }
            let scopes = self.scopes.lock().expect("lock");
            Ok(scopes.iter().filter(|s| filter.matches(s)).count() as u64)
        }
    }

    fn scope_of(tenant: &str, user: &str, session: &str) -> Scope {
        Scope::session(session)
            .and_then(|s| s.with_tenant(tenant))
            .and_then(|s| s.with_user(user))
            .expect("valid ids")
    }

    #[tokio::test]
    async fn a_text_index_is_forgotten_by_filter() {
        let index = Arc::new(ScopesIndex::holding(
            vec![
                scope_of("acme", "dana", "s1"),
                scope_of("acme", "dana", "s2"),
                scope_of("acme", "dana", "s2"),
                scope_of("acme", "eli", "s1"),
                scope_of("other", "dana", "s1"),
            ],
            true,
        ));
        let forgetter = Forgetter::new().texts(index.clone());
        assert_eq!(forgetter.store_names(), ["texts"]);
        let dana = ScopeFilter::tenant(TenantId::new("acme").expect("tenant"))
            .with_user(UserId::new("dana").expect("user"));
        let dry = forgetter
            .forget(&dana, ForgetMode::DryRun)
            .await
            .expect("dry run");
        assert_eq!(dry.stores, [StoreReceipt::new("texts", 0, 3, "documents")]);
        assert_eq!(index.left(), 5, "a dry run deletes nothing");
        let done = forgetter
            .forget(&dana, ForgetMode::Delete)
            .await
            .expect("forget");
        assert_eq!(done.stores, [StoreReceipt::new("texts", 0, 3, "documents")]);
        assert_eq!(
            done.to_string(),
            "Forget tenant acme, user dana:\n  texts: deleted 3 documents"
        );
        assert_eq!(
            index.left(),
            2,
            "eli's and the other tenant's documents stay"
        );
        assert_eq!(
            index
                .count(&scope_of("acme", "eli", "s1"))
                .await
                .expect("count"),
            1
        );
        let again = forgetter
            .forget(&dana, ForgetMode::Delete)
            .await
            .expect("forget again");
        assert_eq!(again.total_items(), 0, "forgetting again finds nothing");
    }

    #[tokio::test]
    async fn a_text_index_without_deletes_matching_is_refused_and_kept() {
        let index = Arc::new(ScopesIndex::holding(
            vec![scope_of("acme", "dana", "s1")],
            false,
        ));
        let forgetter = Forgetter::new()
            .history(Arc::new(InMemoryHistoryStore::new()))
            .target(Arc::new(TextForget::named("lexical", index.clone())));
        let filter = ScopeFilter::tenant(TenantId::new("acme").expect("tenant"));
        for mode in [ForgetMode::DryRun, ForgetMode::Delete] {
            let error = forgetter
                .forget(&filter, mode)
                .await
                .expect_err("an index that cannot delete by filter is refused");
            assert_eq!(error.kind(), crate::ErrorKind::Unsupported);
            assert!(
                error
                    .message()
                    .contains("lexical store failed (history finished"),
                "the error names the store: {}",
                error.message()
            );
        }
        assert_eq!(index.left(), 1, "nothing was deleted");
    }
}
