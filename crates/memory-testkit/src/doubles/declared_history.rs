//! [`DeclaredHistory`]: an in-memory history store that declares the capabilities it is given
//! and performs only the optional operations they declare.

use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::Duration;

use memory_core::{
    AppendOutcome, ChatMessage, CursorRead, Error, HistoryCapabilities, HistoryStore,
    InMemoryHistoryStore, Page, PageRequest, Result, Scope, ScopeFilter, StoredMessage, TenantId,
    ThreadCount, ThreadCursor, Window,
};

/// An in-memory history store that declares the capabilities it is given, and performs only the
/// optional operations they declare.
///
/// # Behavior
///
/// - [`capabilities`](HistoryStore::capabilities) answers exactly the capabilities given to
///   [`new`](Self::new).
/// - The required operations (`append`, `read`, `count`, `clear`, `list_threads`) are the
///   in-memory store's, whatever is declared.
/// - Each optional operation whose capability is declared (`archive`; `set_ttl` and
///   `purge_expired` by `ttl`; `read_since` by `cursor_reads`; `read_page` by `paged_reads`;
///   `list_tenants` by `lists_tenants`) is the in-memory store's. One that is not declared
///   answers [`ErrorKind::Unsupported`](memory_core::ErrorKind::Unsupported) and changes
///   nothing, as the trait's default body does, and is recorded: [`refused`](Self::refused)
///   names it.
/// - The guarantees (`dedupes_ids`, `counts_purged`, `lists_every_thread`) are the in-memory
///   store's whatever is declared: declaring one off promises less than the store does, which
///   every check must accept.
#[derive(Debug)]
pub struct DeclaredHistory {
    inner: InMemoryHistoryStore,
    capabilities: HistoryCapabilities,
    refused: Mutex<Vec<&'static str>>,
}

impl DeclaredHistory {
    /// A new empty store that declares `capabilities`.
    pub fn new(capabilities: HistoryCapabilities) -> Self {
        Self {
            inner: InMemoryHistoryStore::new(),
            capabilities,
            refused: Mutex::new(Vec::new()),
        }
    }

    /// The optional operations this store refused because they are not declared, by name
    /// (`"archive"`, `"set_ttl"`, …), in the order they were called. A caller that reads the
    /// capabilities first leaves it empty.
    pub fn refused(&self) -> Vec<&'static str> {
        self.refused.lock().unwrap().clone()
    }

    /// `Ok(())` when `declared`; otherwise records `operation` and answers the error the trait's
    /// default body answers.
    fn allow(&self, declared: bool, operation: &'static str, field: &str) -> Result<()> {
        if declared {
            return Ok(());
        }
        self.refused.lock().unwrap().push(operation);
        Err(Error::unsupported(format!(
            "{} does not support {operation}: its HistoryCapabilities::{field} is false",
            std::any::type_name::<Self>()
        )))
    }
}

// A layer over the in-memory store that writes every method out
// (`clippy::missing_trait_methods` is denied): a method added to the trait must be gated by
// its capability here, never forwarded to the in-memory store unrecorded.
#[deny(clippy::missing_trait_methods)]
#[memory_core::async_trait]
impl memory_core::LayeredHistory for DeclaredHistory {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    fn capabilities(&self) -> HistoryCapabilities {
        self.capabilities
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.inner.append(scope, messages).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.inner.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.inner.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.inner.clear(scope).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.inner.list_threads(filter, page).await
    }
    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.allow(self.capabilities.archive, "archive", "archive")?;
        self.inner.archive(scope, seqs).await
    }
    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.allow(self.capabilities.ttl, "set_ttl", "ttl")?;
        self.inner.set_ttl(scope, ttl).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        self.allow(self.capabilities.ttl, "purge_expired", "ttl")?;
        self.inner.purge_expired().await
    }
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        self.allow(self.capabilities.cursor_reads, "read_since", "cursor_reads")?;
        self.inner.read_since(scope, window, since).await
    }
    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.allow(self.capabilities.paged_reads, "read_page", "paged_reads")?;
        self.inner.read_page(scope, after, limit).await
    }
    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        self.allow(
            self.capabilities.lists_tenants,
            "list_tenants",
            "lists_tenants",
        )?;
        self.inner.list_tenants(page).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[tokio::test]
    async fn performs_what_it_declares_and_records_what_it_refuses() {
        let store = DeclaredHistory::new(HistoryCapabilities::none().with_ttl(true));
        let scope = crate::fixtures::random_scope();
        store
            .append(&scope, &[ChatMessage::user("a"), ChatMessage::user("b")])
            .await
            .unwrap();
        store
            .set_ttl(&scope, Some(Duration::from_secs(60)))
            .await
            .unwrap();
        assert!(store.refused().is_empty());

        let err = store.archive(&scope, 1..=1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(err.to_string().contains("archive is false"), "{err}");
        assert_eq!(store.count(&scope).await.unwrap().archived, 0);
        let err = store.read_page(&scope, 0, 10).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert_eq!(store.refused(), ["archive", "read_page"]);
    }
}
