//! The in-memory [`HistoryStore`]: the reference implementation every backend is compared with.

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{
    AppendOutcome, CursorRead, Delta, HistoryCapabilities, HistoryStore, MAX_READ_PAGE, NO_EPOCH,
    PreparedBatch, StoredMessage, ThreadCount, ThreadCursor, Window,
};
use crate::error::{Error, ErrorKind, Result};
use crate::id::TenantId;
use crate::message::ChatMessage;
use crate::scope::{Page, PageRequest, Scope, ScopeFilter, paginate, paginate_tenants};
use crate::tokens::{TokenCounter, default_token_counter};

/// A [`HistoryStore`] in process memory: fast, exact, and gone when the process ends.
///
/// Cloning shares the same data.
///
/// ```
/// use memory_core::{ChatMessage, HistoryStore, InMemoryHistoryStore, Scope, Window};
///
/// # tokio_test_block_on(async {
/// let store = InMemoryHistoryStore::new();
/// let scope = Scope::session("s-1")?;
/// store.append(&scope, &[ChatMessage::user("hi"), ChatMessage::assistant("hello")]).await?;
/// let last = store.read(&scope, Window::Last(1)).await?;
/// assert_eq!(last[0].seq, 2);
/// # Ok::<(), memory_core::Error>(())
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryHistoryStore {
    threads: Arc<Mutex<BTreeMap<String, Thread>>>,
    counter: Arc<dyn TokenCounter>,
    default_ttl: Option<Duration>,
}

#[derive(Debug)]
struct Thread {
    scope: Scope,
    /// `messages[i].seq == i + 1`: nothing is removed but by clearing the whole thread.
    messages: Vec<StoredMessage>,
    ids: HashMap<String, u64>,
    /// Index of the first message that may be active: everything before it is archived, so
    /// archiving and reading never walk the archived prefix again.
    first_active: usize,
    active: u64,
    active_tokens: u64,
    ttl: Option<Duration>,
    expires_at: Option<Instant>,
    /// See [`HistoryStore::read_since`]: a value from [`next_epoch`], new at creation and after
    /// every archive that moved a message.
    epoch: u64,
}

/// A process-wide source of epochs: no two threads, and no two shapes of one thread, of any
/// in-memory store of this process ever share one.
fn next_epoch() -> u64 {
    static EPOCHS: AtomicU64 = AtomicU64::new(NO_EPOCH.saturating_add(1));
    EPOCHS.fetch_add(1, Ordering::Relaxed)
}

impl Thread {
    fn new(scope: Scope, ttl: Option<Duration>) -> Self {
        Self {
            epoch: next_epoch(),
            scope,
            messages: Vec::new(),
            ids: HashMap::new(),
            first_active: 0,
            active: 0,
            active_tokens: 0,
            ttl,
            expires_at: None,
        }
    }

    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    fn count(&self) -> ThreadCount {
        ThreadCount {
            active: self.active,
            archived: (self.messages.len() as u64).saturating_sub(self.active),
            active_tokens: self.active_tokens,
            last_seq: self.messages.len() as u64,
        }
    }

    /// The active messages `window` selects whose seqs are above `after` (0: the whole window).
    fn window(&self, window: Window, after: u64) -> Vec<StoredMessage> {
        let messages = &self.messages;
        let from = usize::try_from(after).unwrap_or(usize::MAX);
        let active_from_end = || {
            messages
                .get(from.min(messages.len())..)
                .unwrap_or_default()
                .iter()
                .rev()
                .filter(|m| !m.archived)
        };
        let forward_from = |start: usize| {
            messages
                .get(start.max(from).clamp(self.first_active, messages.len())..)
                .unwrap_or_default()
                .iter()
                .filter(|m| !m.archived)
                .cloned()
                .collect()
        };
        match window {
            Window::All => forward_from(self.first_active),
            Window::Everything => messages
                .get(from.min(messages.len())..)
                .unwrap_or_default()
                .to_vec(),
            Window::After(seq) => forward_from(usize::try_from(seq).unwrap_or(usize::MAX)),
            Window::Last(n) => {
                let mut v: Vec<_> = active_from_end().take(n).cloned().collect();
                v.reverse();
                v
            }
            Window::TokenBudget(budget) => {
                // The budget is spent from the newest message whatever `after` is: with a
                // cursor, the messages at or below it only stop the walk, they are not
                // returned.
                let mut used = 0u64;
                let mut v: Vec<_> = messages
                    .iter()
                    .rev()
                    .filter(|m| !m.archived)
                    .take_while(|m| {
                        used = used.saturating_add(u64::from(m.tokens));
                        used <= budget && m.seq > after
                    })
                    .cloned()
                    .collect();
                v.reverse();
                v
            }
        }
    }

    fn touch(&mut self, now: Instant) {
        // A TTL too long for the clock to represent never runs out.
        self.expires_at = self.ttl.and_then(|ttl| now.checked_add(ttl));
    }
}

impl Default for InMemoryHistoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryHistoryStore {
    /// An empty store counting tokens with the default counter (tiktoken `o200k_base`).
    pub fn new() -> Self {
        Self::with_token_counter(default_token_counter())
    }

    /// An empty store counting tokens with `counter`.
    pub fn with_token_counter(counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            threads: Arc::new(Mutex::new(BTreeMap::new())),
            counter,
            default_ttl: None,
        }
    }

    /// Gives every new thread a time to live (see [`HistoryStore::set_ttl`]).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a TTL under one millisecond or over
    /// [`MAX_TTL`](crate::MAX_TTL), as every store (see [`ttl_millis`](crate::ttl_millis)).
    pub fn with_default_ttl(mut self, ttl: Duration) -> Result<Self> {
        crate::ttl::ttl_millis(ttl)?;
        self.default_ttl = Some(ttl);
        Ok(self)
    }

    fn lock(&self) -> Result<MutexGuard<'_, BTreeMap<String, Thread>>> {
        self.threads.lock().map_err(|_| {
            Error::new(
                ErrorKind::Backend,
                "the in-memory history store was poisoned by a panic in another thread",
            )
        })
    }

    /// The live thread of `key`, dropping it first if it expired.
    fn live<'a>(
        threads: &'a mut BTreeMap<String, Thread>,
        key: &str,
        now: Instant,
    ) -> Option<&'a mut Thread> {
        if threads.get(key).is_some_and(|t| t.expired(now)) {
            threads.remove(key);
        }
        threads.get_mut(key)
    }
}

#[async_trait]
impl HistoryStore for InMemoryHistoryStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_ttl(true)
            .with_dedupes_ids(true)
            .with_counts_purged(true)
            .with_lists_every_thread(true)
            .with_cursor_reads(true)
            .with_paged_reads(true)
            .with_lists_tenants(true)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        // A large batch is counted off the async executor (`tokens::precount`).
        let counted = crate::tokens::precount(&self.counter, messages).await?;
        let batch = PreparedBatch::new(&counted, messages)?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let now = Instant::now();
        let key = scope.key();
        let mut threads = self.lock()?;
        if Self::live(&mut threads, &key, now).is_none() {
            threads.insert(key.clone(), Thread::new(scope.clone(), self.default_ttl));
        }
        let thread = threads
            .get_mut(&key)
            .ok_or_else(|| Error::new(ErrorKind::Backend, "thread vanished under its lock"))?;
        let mut unique_seqs = Vec::with_capacity(batch.unique.len());
        let mut inserted = 0usize;
        for prepared in &batch.unique {
            if let Some(&seq) = thread.ids.get(prepared.message.id.as_str()) {
                unique_seqs.push(seq);
                continue;
            }
            let seq = (thread.messages.len() as u64).saturating_add(1);
            thread
                .ids
                .insert(prepared.message.id.as_str().to_owned(), seq);
            thread.messages.push(StoredMessage {
                seq,
                tokens: prepared.tokens,
                archived: false,
                message: Arc::new(prepared.message.clone()),
            });
            thread.active = thread.active.saturating_add(1);
            thread.active_tokens = thread
                .active_tokens
                .saturating_add(u64::from(prepared.tokens));
            unique_seqs.push(seq);
            inserted = inserted.saturating_add(1);
        }
        thread.touch(now);
        tracing::debug!(scope = %scope, inserted, "history.append");
        Ok(AppendOutcome {
            seqs: batch.seqs_for_input(&unique_seqs),
            inserted,
        })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let mut threads = self.lock()?;
        Ok(Self::live(&mut threads, &scope.key(), Instant::now())
            .map(|thread| thread.window(window, 0))
            .unwrap_or_default())
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let mut threads = self.lock()?;
        Ok(Self::live(&mut threads, &scope.key(), Instant::now())
            .map(|t| t.count())
            .unwrap_or_default())
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let mut threads = self.lock()?;
        let Some(thread) = Self::live(&mut threads, &scope.key(), Instant::now()) else {
            return Ok(0);
        };
        let len = thread.messages.len() as u64;
        let first = (*seqs.start()).max((thread.first_active as u64).saturating_add(1));
        let last = (*seqs.end()).min(len);
        let mut moved = 0u64;
        if first <= last {
            let range = first.saturating_sub(1) as usize..last as usize;
            for m in thread.messages.get_mut(range).unwrap_or_default() {
                if !m.archived {
                    m.archived = true;
                    moved = moved.saturating_add(1);
                    thread.active = thread.active.saturating_sub(1);
                    thread.active_tokens = thread.active_tokens.saturating_sub(u64::from(m.tokens));
                }
            }
            while thread
                .messages
                .get(thread.first_active)
                .is_some_and(|m| m.archived)
            {
                thread.first_active = thread.first_active.saturating_add(1);
            }
            if moved > 0 {
                thread.epoch = next_epoch();
            }
        }
        tracing::debug!(scope = %scope, moved, first, last, "history.archive");
        Ok(moved)
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let mut threads = self.lock()?;
        let removed = Self::live(&mut threads, &scope.key(), Instant::now())
            .map(|t| t.messages.len() as u64)
            .unwrap_or(0);
        threads.remove(&scope.key());
        tracing::debug!(scope = %scope, removed, "history.clear");
        Ok(removed)
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let threads = self.lock()?;
        let now = Instant::now();
        Ok(paginate(&threads, &page, |t| {
            (!t.expired(now) && !t.messages.is_empty() && filter.matches(&t.scope))
                .then_some(&t.scope)
        }))
    }

    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let limit = limit.clamp(1, MAX_READ_PAGE);
        let mut threads = self.lock()?;
        let Some(thread) = Self::live(&mut threads, &scope.key(), Instant::now()) else {
            return Ok(Vec::new());
        };
        // `messages[i].seq == i + 1`: the page starts at index `after`.
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(thread
            .messages
            .iter()
            .skip(start)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        let threads = self.lock()?;
        let now = Instant::now();
        Ok(paginate_tenants(
            threads
                .values()
                .filter(|t| !t.expired(now) && !t.messages.is_empty())
                .map(|t| t.scope.tenant()),
            &page,
        ))
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        if let Some(ttl) = ttl {
            crate::ttl::ttl_millis(ttl)?;
        }
        let mut threads = self.lock()?;
        let now = Instant::now();
        let thread = Self::live(&mut threads, &scope.key(), now)
            .ok_or_else(|| Error::not_found(format!("no thread at {scope}")))?;
        thread.ttl = ttl;
        thread.touch(now);
        Ok(())
    }

    async fn purge_expired(&self) -> Result<u64> {
        let mut threads = self.lock()?;
        let now = Instant::now();
        let before = threads.len();
        threads.retain(|_, t| !t.expired(now));
        Ok(before.saturating_sub(threads.len()) as u64)
    }

    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        let mut threads = self.lock()?;
        let thread = Self::live(&mut threads, &scope.key(), Instant::now());
        let (epoch, count) = thread
            .as_ref()
            .map_or((NO_EPOCH, ThreadCount::default()), |t| (t.epoch, t.count()));
        let current = match since {
            Some(cursor) => cursor.check(scope, epoch, count.last_seq)?,
            None => false,
        };
        let (delta, after) = match since {
            Some(cursor) if current => (Delta::Appended, cursor.seq()),
            _ => (Delta::Whole, 0),
        };
        let messages = thread.map(|t| t.window(window, after)).unwrap_or_default();
        Ok(CursorRead::new(
            delta,
            messages,
            ThreadCursor::new(scope, epoch, count.last_seq),
            count,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_default_ttl_out_of_range_is_refused() {
        let scope = Scope::session("ttl").unwrap();
        for ttl in [
            Duration::MAX,
            Duration::ZERO,
            crate::MAX_TTL + Duration::from_secs(1),
        ] {
            let err = InMemoryHistoryStore::new()
                .with_default_ttl(ttl)
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ttl:?}");
        }
        let store = InMemoryHistoryStore::new()
            .with_default_ttl(Duration::from_secs(60))
            .unwrap();
        store
            .append(&scope, &[ChatMessage::user("hi")])
            .await
            .unwrap();
        assert_eq!(store.count(&scope).await.unwrap().active, 1);
    }

    #[tokio::test]
    async fn reads_share_the_stored_messages() {
        let scope = Scope::session("shared").unwrap();
        let store = InMemoryHistoryStore::new();
        let messages = [ChatMessage::user("hi"), ChatMessage::assistant("hello")];
        store.append(&scope, &messages).await.unwrap();
        let first = store.read(&scope, Window::All).await.unwrap();
        let second = store
            .read(&scope, Window::TokenBudget(u64::MAX))
            .await
            .unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(second.len(), 2);
        for ((a, b), original) in first.iter().zip(&second).zip(&messages) {
            assert!(
                Arc::ptr_eq(&a.message, &b.message),
                "two reads hand out the same message, not copies"
            );
            assert_eq!(*a.message, *original);
        }
        // Owned again: a copy while the store still shares it, equal to what was appended.
        let owned = first.into_iter().map(StoredMessage::into_message);
        assert!(owned.eq(messages));
    }
}
