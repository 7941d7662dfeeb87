//! Helpers of the integration tests of `Memory`: a word-counting tokenizer and messages of
//! exact sizes, a recording block, and store doubles that log reads, fail on cue or run
//! another writer at a chosen moment.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_trait_methods
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memory_core::memory::{
    BLOCK_STATE_SOURCE, BlockContent, BlockGetContext, BlockPutContext, Memory, MemoryBlock,
};
use memory_core::{
    ChatMessage, Error, ErrorKind, FnTokenCounter, HistoryStore, InMemoryHistoryStore,
    InMemorySessionStore, Part, Result, Role, Scope, SessionStore, StoredMessage, TokenCounter,
    Window, async_trait,
};
use serde_json::{Value, json};

/// One token per whitespace-separated word: a message costs 3 + 1 (role) + its words.
pub fn words() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|t| t.split_whitespace().count() as u32))
}

/// A message of exactly `tokens` stored tokens (≥ 5) under the word counter.
pub fn msg(role: Role, tokens: u32, tag: &str) -> ChatMessage {
    let mut text = tag.to_owned();
    for _ in 1..tokens - 4 {
        text.push_str(" w");
    }
    ChatMessage::text_message(role, text)
}

/// The first word of a message's text, or of its tool result.
pub fn tag(m: &ChatMessage) -> String {
    let text = match m.parts.first() {
        Some(Part::ToolResult { content, .. }) => content.clone(),
        _ => m.text(),
    };
    text.split(' ').next().unwrap_or("").to_owned()
}

pub fn stores() -> (Arc<InMemoryHistoryStore>, Arc<InMemorySessionStore>) {
    (
        Arc::new(InMemoryHistoryStore::with_token_counter(words())),
        Arc::new(InMemorySessionStore::new()),
    )
}

/// Records every message it is given; fails its first `fail_first` puts.
#[derive(Debug, Default)]
pub struct Recorder {
    pub name: String,
    pub priority: u32,
    pub seen: Mutex<Vec<String>>,
    pub fail_first: AtomicUsize,
    pub content: String,
}

impl Recorder {
    pub fn new(name: &str, priority: u32, content: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            priority,
            content: content.into(),
            ..Self::default()
        })
    }
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl MemoryBlock for Recorder {
    fn name(&self) -> &str {
        &self.name
    }
    fn priority(&self) -> u32 {
        self.priority
    }
    async fn get(&self, ctx: BlockGetContext<'_>) -> Result<BlockContent> {
        let n = ctx.state["n"].as_u64().unwrap_or(0);
        Ok(BlockContent::Text(format!("{} {n}", self.content)))
    }
    async fn put(&self, ctx: BlockPutContext<'_>) -> Result<()> {
        if self
            .fail_first
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Error::new(ErrorKind::Unavailable, "block down"));
        }
        let tags: Vec<String> = ctx.messages.iter().map(|m| tag(&m.message)).collect();
        self.seen.lock().unwrap().extend(tags);
        let n = ctx.state["n"].as_u64().unwrap_or(0) + ctx.messages.len() as u64;
        *ctx.state = json!({ "n": n });
        Ok(())
    }
}

pub fn memory(
    history: Arc<InMemoryHistoryStore>,
    states: Arc<InMemorySessionStore>,
    blocks: Vec<Arc<dyn MemoryBlock>>,
) -> Memory {
    memory_dyn(history, states, blocks)
}

/// Forwards to an in-memory store and logs every window read; can say it reduces on append or
/// cannot archive, fail its `clear`, and append messages of another writer just before its
/// next `Window::Last` read.
#[derive(Debug)]
pub struct ReadLog {
    pub inner: Arc<InMemoryHistoryStore>,
    pub reads: Mutex<Vec<Window>>,
    pub reduces_on_append: bool,
    pub no_archive: bool,
    pub fail_clear: bool,
    pub before_last: Mutex<Option<Vec<ChatMessage>>>,
}

impl ReadLog {
    pub fn plain(inner: Arc<InMemoryHistoryStore>) -> Self {
        Self {
            inner,
            reads: Mutex::new(Vec::new()),
            reduces_on_append: false,
            no_archive: false,
            fail_clear: false,
            before_last: Mutex::new(None),
        }
    }
    pub fn new(inner: Arc<InMemoryHistoryStore>) -> Arc<Self> {
        Arc::new(Self::plain(inner))
    }
    pub fn take(&self) -> Vec<Window> {
        std::mem::take(&mut *self.reads.lock().unwrap())
    }
}

#[async_trait]
impl HistoryStore for ReadLog {
    fn capabilities(&self) -> memory_core::HistoryCapabilities {
        let caps = self
            .inner
            .capabilities()
            .with_reduces_on_append(self.reduces_on_append);
        if self.no_archive {
            caps.with_archive(false)
        } else {
            caps
        }
    }
    async fn append(
        &self,
        scope: &Scope,
        messages: &[ChatMessage],
    ) -> Result<memory_core::AppendOutcome> {
        self.inner.append(scope, messages).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.reads.lock().unwrap().push(window);
        if matches!(window, Window::Last(_)) {
            let injected = self.before_last.lock().unwrap().take();
            if let Some(messages) = injected {
                self.inner.append(scope, &messages).await?;
            }
        }
        self.inner.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<memory_core::ThreadCount> {
        self.inner.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        if self.fail_clear {
            return Err(Error::new(ErrorKind::Unavailable, "clear failed"));
        }
        self.inner.clear(scope).await
    }
    async fn list_threads(
        &self,
        filter: &memory_core::ScopeFilter,
        page: memory_core::PageRequest,
    ) -> Result<memory_core::Page<Scope>> {
        self.inner.list_threads(filter, page).await
    }
    async fn archive(&self, scope: &Scope, seqs: std::ops::RangeInclusive<u64>) -> Result<u64> {
        self.inner.archive(scope, seqs).await
    }
    /// Logged as one read of `window`, like `read`.
    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<memory_core::ThreadCursor>,
    ) -> Result<memory_core::CursorRead> {
        self.reads.lock().unwrap().push(window);
        self.inner.read_since(scope, window, since).await
    }
}

/// A thread of `turns` turns: a user message, a tool call and its result, an answer; the last
/// user message is `last_user` tokens long.
pub fn tool_turns(turns: usize, last_user: u32) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for t in 0..turns {
        out.push(msg(Role::User, 8, &format!("u{t}")));
        out.push(ChatMessage::tool_call(format!("c{t}"), "lookup", "{}"));
        out.push(ChatMessage::tool_result(
            format!("c{t}"),
            format!("r{t} w w w w"),
        ));
        out.push(msg(Role::Assistant, 12, &format!("a{t}")));
    }
    out.push(msg(Role::User, last_user, "last"));
    out
}

/// Every text embeds to one vector: every point matches every query.
#[derive(Debug)]
pub struct FlatEmbedder;

#[async_trait]
impl memory_core::Embedder for FlatEmbedder {
    fn dimensions(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
    }
}

pub fn memory_dyn(
    history: Arc<dyn HistoryStore>,
    states: Arc<dyn SessionStore>,
    blocks: Vec<Arc<dyn MemoryBlock>>,
) -> Memory {
    let mut b = Memory::builder(Scope::session("s").unwrap(), history, states)
        .token_limit(100)
        .chat_history_token_ratio(0.5)
        .token_flush_size(20)
        .token_counter(words());
    for block in blocks {
        b = b.block(block);
    }
    b.build().unwrap()
}

/// `n` messages of 10 tokens, `m0`…, a user message at every even number.
pub fn alternating(n: usize) -> Vec<ChatMessage> {
    tagged(0..n, 0)
}

/// `n` messages of 10 tokens, `m<from>`…, a user message at every odd number.
pub fn numbered(from: usize, n: usize) -> Vec<ChatMessage> {
    tagged(from..from + n, 1)
}

/// Messages of 10 tokens tagged `m<i>` for each `i` of `range`: a user message where
/// `i % 2 == user`, else an assistant message.
fn tagged(range: std::ops::Range<usize>, user: usize) -> Vec<ChatMessage> {
    range
        .map(|i| {
            let role = if i % 2 == user {
                Role::User
            } else {
                Role::Assistant
            };
            msg(role, 10, &format!("m{i}"))
        })
        .collect()
}

/// Forwards to an in-memory session store, counts saves, has the capabilities it is given, and
/// runs another memory's `put_messages` on its first `load` (another process appending and
/// flushing between a flusher's count and its state load).
#[derive(Debug)]
pub struct SessionSeam {
    pub inner: Arc<InMemorySessionStore>,
    pub caps: memory_core::SessionCapabilities,
    pub saves: AtomicUsize,
    pub on_first_load: Mutex<Option<(Memory, Vec<ChatMessage>)>>,
}

impl SessionSeam {
    pub fn new(
        inner: Arc<InMemorySessionStore>,
        caps: memory_core::SessionCapabilities,
    ) -> Arc<Self> {
        Arc::new(Self {
            inner,
            caps,
            saves: AtomicUsize::new(0),
            on_first_load: Mutex::new(None),
        })
    }
}

#[async_trait]
impl SessionStore for SessionSeam {
    fn capabilities(&self) -> memory_core::SessionCapabilities {
        self.caps
    }
    async fn load(&self, scope: &Scope) -> Result<Option<memory_core::StoredSession>> {
        let other = self.on_first_load.lock().unwrap().take();
        if let Some((memory, messages)) = other {
            memory.put_messages(&messages).await?;
        }
        self.inner.load(scope).await
    }
    async fn save(&self, scope: &Scope, state: &Value, expected: Option<u64>) -> Result<u64> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        self.inner.save(scope, state, expected).await
    }
    async fn delete(&self, scope: &Scope) -> Result<bool> {
        self.inner.delete(scope).await
    }
    async fn list(
        &self,
        filter: &memory_core::ScopeFilter,
        page: memory_core::PageRequest,
    ) -> Result<memory_core::Page<Scope>> {
        self.inner.list(filter, page).await
    }
}

pub async fn save_doc(states: &InMemorySessionStore, doc: Value) {
    let scope = Scope::session("s")
        .unwrap()
        .with_source(BLOCK_STATE_SOURCE)
        .unwrap();
    states.save(&scope, &doc, None).await.unwrap();
}

pub async fn load_doc(states: &dyn SessionStore) -> Option<Value> {
    let scope = Scope::session("s")
        .unwrap()
        .with_source(BLOCK_STATE_SOURCE)
        .unwrap();
    states.load(&scope).await.unwrap().map(|s| s.state)
}
