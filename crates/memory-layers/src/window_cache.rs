//! [`WindowCache`]: a [`HistoryStore`] that keeps each thread's decoded window and refreshes it
//! with one cursor read.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use memory_core::{
    CursorRead, Delta, ErrorKind, HistoryStore, LayeredHistory, Result, Scope, StoredMessage,
    ThreadCount, ThreadCursor, Window,
};
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::cached_window::{CachedWindow, WindowShape};
use crate::config::WindowCacheConfig;

/// About how large a cached window is taken to be when sizing the map's slots (the byte budget
/// is what bounds it; this only spares rehashing).
const TYPICAL_WINDOW_BYTES: u64 = 16 * 1024;

/// Which window of which thread an entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WindowKey {
    scope: Scope,
    shape: WindowShape,
}

/// Weighs an entry by the estimated bytes of its window.
#[derive(Debug, Clone, Copy)]
struct ByBytes;

impl Weighter<WindowKey, Arc<CachedWindow>> for ByBytes {
    fn weight(&self, _key: &WindowKey, window: &Arc<CachedWindow>) -> u64 {
        window.weight()
    }
}

/// How a [`WindowCache`] has answered reads so far (counters since it was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WindowCacheStats {
    /// Reads served from a cached window plus the messages the thread gained since (the store's
    /// [`Delta::Appended`]).
    pub hits: u64,
    /// Reads of a window the cache did not hold (read whole, then kept).
    pub misses: u64,
    /// Reads of a cached window whose thread had changed otherwise than by appends (the store
    /// answered [`Delta::Whole`]; the new window replaced the old).
    pub reloads: u64,
    /// Reads whose delta did not continue the cached window exactly (a gap in the sequence
    /// numbers) or whose cursor the store refused: the window was read whole again.
    pub refetches: u64,
    /// Reads passed to the store untouched (caching off, no cursor reads, or a window this
    /// cache does not know).
    pub passed_through: u64,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    reloads: AtomicU64,
    refetches: AtomicU64,
    passed_through: AtomicU64,
}

/// Counts one read answered as `result` (`hit`, `miss`, `reload`, `refetch`,
/// `pass_through`), in the cache's own stats and in the metric
/// `agent_memory.window_cache.requests`.
fn bump(counter: &AtomicU64, result: &'static str) {
    counter.fetch_add(1, Ordering::Relaxed);
    tracing::event!(
        target: "agent_memory::metrics",
        parent: None,
        tracing::Level::DEBUG,
        monotonic_counter.agent_memory.window_cache.requests = 1u64,
        agent_memory.window_cache.result = result,
    );
}

/// A window as the cache served it, with the cursor and counts of the store's answer when the
/// window came from a cursor read (a fallback plain read has neither).
struct Served {
    messages: Vec<StoredMessage>,
    read: Option<(ThreadCursor, ThreadCount)>,
}

impl Served {
    fn answered(messages: Vec<StoredMessage>, answer: &CursorRead) -> Self {
        Self {
            messages,
            read: Some((answer.cursor, answer.count)),
        }
    }

    fn plain(messages: Vec<StoredMessage>) -> Self {
        Self {
            messages,
            read: None,
        }
    }
}

/// A layer that keeps, for each thread and window read through it, the decoded window and the
/// store's [`ThreadCursor`], and refreshes it with one
/// [`read_since`](HistoryStore::read_since): a read then moves only what the thread gained
/// since the last one, and the messages already held are neither sent again nor decoded again.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use memory_core::{ChatMessage, HistoryStore, InMemoryHistoryStore, Scope, Window};
/// use memory_layers::WindowCache;
///
/// let store = WindowCache::new(InMemoryHistoryStore::new());
/// let scope = Scope::session("s1")?;
/// store.append(&scope, &[ChatMessage::user("hi")]).await?;
/// assert_eq!(store.read(&scope, Window::Last(20)).await?.len(), 1); // read whole, kept
/// store.append(&scope, &[ChatMessage::assistant("hello")]).await?;
/// assert_eq!(store.read(&scope, Window::Last(20)).await?.len(), 2); // one cursor read
/// assert_eq!(store.stats().hits, 1);
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
///
/// # Behavior
/// - It is a [`LayeredHistory`] (so a [`HistoryStore`]) with the wrapped store's
///   [`capabilities`](HistoryStore::capabilities): every method but
///   [`read`](HistoryStore::read) and [`read_since`](HistoryStore::read_since) without a cursor
///   is forwarded as it is. `read_since(scope, window, None)` (how the `Agent` reads its window)
///   is served like `read`, with the cursor and counts of the store's answer (a caller that
///   passes its own cursor keeps its own window: that call is forwarded).
/// - A [`read`](HistoryStore::read) returns what the wrapped store's `read` would return at
///   that moment; it never serves a window without asking the store. On a window it holds, it
///   calls `read_since` with the window's cursor (one round trip): [`Delta::Appended`] adds the
///   new messages and trims the result to the window ([`Window::Last`]: the last `n`;
///   [`Window::TokenBudget`]: the longest newest run whose stored tokens fit; the other windows
///   only grow); [`Delta::Whole`] (the thread's epoch moved: archive, clear, expiry, a new
///   thread) replaces the window. On a window it does not hold, it calls `read_since` without a
///   cursor and keeps the answer.
/// - A delta is merged only when its sequence numbers are exactly the ones after the cached
///   cursor, up to the new cursor. Anything else (the store left out a row it could not decode,
///   a budget stopped at a large message, more appended than the window holds) is not trusted:
///   the window is read whole again. A cursor the store refuses drops the window and reads it
///   whole; any other error is returned and drops the window.
/// - Memory is bounded by [`WindowCacheConfig::max_bytes`] (an estimate: strings plus a fixed
///   overhead per message); past it, the least useful windows are dropped (quick_cache's
///   CLOCK-Pro policy: recency with scan resistance). A window larger than the budget is served
///   but not kept.
/// - [`clear`](HistoryStore::clear) drops the thread's windows and
///   [`purge_expired`](HistoryStore::purge_expired) drops every window, so deleted messages do
///   not stay in memory; archives need nothing (the epoch moves, the next read replaces the
///   window).
/// - With caching off ([`WindowCacheConfig::disabled`]), or over a store without
///   [`HistoryCapabilities::cursor_reads`](memory_core::HistoryCapabilities::cursor_reads), it is
///   a pure pass-through.
/// - Concurrent reads are safe: a window is immutable once cached, each read refreshes from the
///   window it found and puts back its own result. Two reads of one thread may both call the
///   store; each returns a correct window. No lock is held across an `.await`.
pub struct WindowCache<S> {
    inner: S,
    config: WindowCacheConfig,
    /// `None` when the cache is a pass-through.
    windows: Option<Cache<WindowKey, Arc<CachedWindow>, ByBytes>>,
    counters: Counters,
}

impl<S: HistoryStore> WindowCache<S> {
    /// A cache over `inner` with the default settings ([`WindowCacheConfig::new`]).
    pub fn new(inner: S) -> Self {
        Self::with_config(inner, WindowCacheConfig::new())
    }

    /// A cache over `inner` with `config`.
    pub fn with_config(inner: S, config: WindowCacheConfig) -> Self {
        let caches = config.enabled() && inner.capabilities().cursor_reads;
        let windows = caches.then(|| {
            let slots = config.max_bytes() / TYPICAL_WINDOW_BYTES;
            let slots = usize::try_from(slots)
                .unwrap_or(usize::MAX)
                .clamp(16, 1 << 20);
            Cache::with_weighter(slots, config.max_bytes(), ByBytes)
        });
        Self {
            inner,
            config,
            windows,
            counters: Counters::default(),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The settings the cache was made with.
    pub fn config(&self) -> WindowCacheConfig {
        self.config
    }

    /// Whether the cache keeps windows: caching is on and the store has cursor reads.
    pub fn is_caching(&self) -> bool {
        self.windows.is_some()
    }

    /// About how many bytes the cached windows hold now.
    pub fn cached_bytes(&self) -> u64 {
        self.windows.as_ref().map_or(0, Cache::weight)
    }

    /// How many windows the cache holds now.
    pub fn cached_windows(&self) -> usize {
        self.windows.as_ref().map_or(0, Cache::len)
    }

    /// How the cache has answered reads so far.
    pub fn stats(&self) -> WindowCacheStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WindowCacheStats {
            hits: get(&self.counters.hits),
            misses: get(&self.counters.misses),
            reloads: get(&self.counters.reloads),
            refetches: get(&self.counters.refetches),
            passed_through: get(&self.counters.passed_through),
        }
    }

    /// Reads the window whole with a cursor read and keeps it.
    async fn load(
        &self,
        windows: &Cache<WindowKey, Arc<CachedWindow>, ByBytes>,
        key: WindowKey,
        window: Window,
    ) -> Result<Served> {
        let answer = self.inner.read_since(&key.scope, window, None).await?;
        match answer.delta {
            Delta::Whole => {
                let (cursor, count) = (answer.cursor, answer.count);
                let messages =
                    self.keep(windows, key, CachedWindow::whole(answer.messages, cursor));
                Ok(Served {
                    messages,
                    read: Some((cursor, count)),
                })
            }
            // Without a cursor the answer is whole; a store that says otherwise is not trusted.
            _ => {
                windows.remove(&key);
                Ok(Served::plain(self.inner.read(&key.scope, window).await?))
            }
        }
    }

    /// Keeps `cached` for `key` and returns its messages.
    fn keep(
        &self,
        windows: &Cache<WindowKey, Arc<CachedWindow>, ByBytes>,
        key: WindowKey,
        cached: CachedWindow,
    ) -> Vec<StoredMessage> {
        let messages = cached.to_messages();
        windows.insert(key, Arc::new(cached));
        messages
    }

    /// Refreshes the cached window of `key` with one cursor read.
    async fn refresh(
        &self,
        windows: &Cache<WindowKey, Arc<CachedWindow>, ByBytes>,
        key: WindowKey,
        window: Window,
        cached: Arc<CachedWindow>,
    ) -> Result<Served> {
        let answer = match self
            .inner
            .read_since(&key.scope, window, Some(cached.cursor()))
            .await
        {
            Ok(answer) => answer,
            Err(error) => {
                windows.remove(&key);
                if error.kind() == ErrorKind::InvalidInput {
                    // The store refused the cursor (its data were replaced under it): start over.
                    bump(&self.counters.refetches, "refetch");
                    return self.load(windows, key, window).await;
                }
                return Err(error);
            }
        };
        match answer.delta {
            Delta::Appended => {
                if answer.messages.is_empty() && answer.cursor == cached.cursor() {
                    bump(&self.counters.hits, "hit");
                    return Ok(Served::answered(cached.to_messages(), &answer));
                }
                let read = Some((answer.cursor, answer.count));
                match cached.extended(key.shape, answer.messages, answer.cursor) {
                    Some(extended) => {
                        bump(&self.counters.hits, "hit");
                        Ok(Served {
                            messages: self.keep(windows, key, extended),
                            read,
                        })
                    }
                    None => {
                        bump(&self.counters.refetches, "refetch");
                        windows.remove(&key);
                        self.load(windows, key, window).await
                    }
                }
            }
            Delta::Whole => {
                bump(&self.counters.reloads, "reload");
                let read = Some((answer.cursor, answer.count));
                Ok(Served {
                    messages: self.keep(
                        windows,
                        key,
                        CachedWindow::whole(answer.messages, answer.cursor),
                    ),
                    read,
                })
            }
            // A kind of answer this cache does not know: trust only a plain read.
            _ => {
                bump(&self.counters.refetches, "refetch");
                windows.remove(&key);
                Ok(Served::plain(self.inner.read(&key.scope, window).await?))
            }
        }
    }

    /// Serves `window` of `scope` from the cache (`None`: the cache does not keep this window).
    async fn serve(&self, scope: &Scope, window: Window) -> Option<Result<Served>> {
        let (Some(windows), Some(shape)) = (&self.windows, WindowShape::of(window)) else {
            bump(&self.counters.passed_through, "pass_through");
            return None;
        };
        let key = WindowKey {
            scope: scope.clone(),
            shape,
        };
        Some(match windows.get(&key) {
            Some(cached) => self.refresh(windows, key, window, cached).await,
            None => {
                bump(&self.counters.misses, "miss");
                self.load(windows, key, window).await
            }
        })
    }
}

impl<S: fmt::Debug> fmt::Debug for WindowCache<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowCache")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .field("caching", &self.windows.is_some())
            .finish_non_exhaustive()
    }
}

// A layer: the cache overrides the reads it serves and the calls that must drop cached windows;
// every other call is the inner store's.
#[async_trait]
impl<S: HistoryStore> LayeredHistory for WindowCache<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        match self.serve(scope, window).await {
            Some(served) => Ok(served?.messages),
            None => self.inner.read(scope, window).await,
        }
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let deleted = self.inner.clear(scope).await;
        if let Some(windows) = &self.windows {
            windows.retain(|key, _| key.scope != *scope);
        }
        deleted
    }

    async fn purge_expired(&self) -> Result<u64> {
        let purged = self.inner.purge_expired().await;
        if let Some(windows) = &self.windows {
            windows.clear();
        }
        purged
    }

    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        // A caller with its own cursor keeps its own window: forwarded. Without one, the
        // caller wants the whole window (the agent's turn): served from the cache.
        if since.is_some() {
            return self.inner.read_since(scope, window, since).await;
        }
        match self.serve(scope, window).await {
            Some(served) => match served? {
                Served {
                    messages,
                    read: Some((cursor, count)),
                } => Ok(CursorRead::new(Delta::Whole, messages, cursor, count)),
                Served { read: None, .. } => self.inner.read_since(scope, window, None).await,
            },
            None => self.inner.read_since(scope, window, None).await,
        }
    }
    // Paged reads (exports, migrations) read each page once: they are forwarded, never kept.
    // Appends, counts, archives and TTLs are forwarded: the cursor read that refreshes a window
    // sees what they changed (an archive gives the thread a new epoch).
}
