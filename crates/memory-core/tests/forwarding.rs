//! Every public trait works through `Arc<dyn _>` and `Box<dyn _>`: the forwarding impls reach
//! the pointee's own methods, including its overrides of provided methods, and the defaults of
//! optional store operations answer `Unsupported` with a sentence naming the store's type. A
//! layer that overrides nothing ([`Bare`]) reaches every method of its inner store the same way.
//!
//! Each check is a generic function over the trait, called with the pointer types, so the
//! forwarding impl (not auto-deref to the pointee) is what runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::memory::blocks::{RetrievalPostprocessor, SimilarityCutoff};
use memory_core::memory::{BlockContent, BlockGetContext, BlockPutContext};
use memory_core::telemetry::Traced;
use memory_core::{
    AiContext, AppendOutcome, ChatMessage, ChatModel, ChatReducer, ChatRequest, ChatResponse,
    ContextProvider, Delta, Embedder, ErrorKind, FnTokenCounter, HistoryCapabilities, HistoryStore,
    InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore, InvokedContext,
    InvokingContext, MediaTokenCosts, MemoryBlock, MessageCountReducer, Page, PageRequest, Result,
    Scope, ScopeFilter, ScoredPoint, SessionCapabilities, SessionStore, SourceId, StoredMessage,
    StoredSession, TextCapabilities, TextDocument, TextIndex, TextQuery, ThreadCount, TokenCounter,
    VectorCapabilities, VectorPoint, VectorQuery, VectorStore, Window, async_trait,
};
use memory_testkit::doubles::RequiredOnlySessions;
use memory_testkit::text_reference::ReferenceTextIndex;
use serde_json::{Value, json};
use uuid::Uuid;

fn scope(session: &str) -> Scope {
    Scope::session(session).unwrap()
}

/// A layer over each store trait that overrides nothing: every call must reach the inner
/// store's own method (its override of an optional operation, or its default).
#[derive(Debug, Default)]
struct Bare<S>(S);

impl<S: HistoryStore> memory_core::LayeredHistory for Bare<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.0
    }
}

impl<S: SessionStore> memory_core::LayeredSessions for Bare<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.0
    }
}

impl<S: VectorStore> memory_core::LayeredVectors for Bare<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.0
    }
}

impl<S: TextIndex> memory_core::LayeredTextIndex for Bare<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.0
    }
}

/// Asserts that each `(operation, error)` is `Unsupported` with a sentence naming `store` (the
/// store's type) and the operation.
fn assert_unsupported(
    store: &str,
    errors: impl IntoIterator<Item = (&'static str, memory_core::Error)>,
) {
    for (operation, err) in errors {
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{operation}: {err}");
        let text = err.message();
        assert!(
            text.contains(store) && text.contains(operation),
            "the error names the store's type and the operation: {text}"
        );
    }
}

/// `$store` (a `$trait` with required methods only, built by `Default`) as every pointer and
/// layer a caller may hold it through: `Box<dyn _>`, `Arc<dyn _>`, `Traced` and [`Bare`].
macro_rules! every_wrapping {
    ($trait:ident, $store:ty) => {{
        let stores: [Box<dyn $trait>; 4] = [
            Box::new(<$store>::default()),
            Box::new(Arc::new(<$store>::default()) as Arc<dyn $trait>),
            Box::new(Traced::new(<$store>::default(), "memory")),
            Box::new(Bare(<$store>::default())),
        ];
        stores
    }};
}

/// The tenant listing and TTL calls `HistoryStore` and `SessionStore` share, through `$store`
/// holding one thread `$s` of the only tenant: `$forget` removes that thread, after which no
/// tenant is listed.
macro_rules! tenants_and_ttl_through {
    ($store:expr, $s:expr, $forget:expr) => {{
        let tenants = $store.list_tenants(PageRequest::first(10)).await.unwrap();
        assert_eq!(
            (tenants.items, tenants.next_cursor),
            (vec![$s.tenant().clone()], None),
            "list_tenants reaches the pointee's own implementation"
        );
        $store
            .set_ttl(&$s, Some(Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!($store.purge_expired().await.unwrap(), 0);
        $forget;
        assert!(
            $store
                .list_tenants(PageRequest::first(10))
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }};
}

/// The calls `VectorStore` and `TextIndex` share, through `$store` holding exactly the two
/// `$items` (points or documents) in `$s`; it ends empty.
macro_rules! two_items_through {
    ($store:expr, $s:expr, $items:expr) => {{
        let (store, s, items) = (&$store, &$s, &$items);
        assert_eq!(
            store.get(s, &[items[1].id]).await.unwrap(),
            vec![items[1].clone()]
        );
        assert_eq!(store.count(s).await.unwrap(), 2);
        assert_eq!(store.delete(s, &[items[0].id]).await.unwrap(), 1);
        assert_eq!(store.clear(s).await.unwrap(), 1);
        store.upsert(s, items).await.unwrap();
        let filter = ScopeFilter::tenant(s.tenant().clone());
        assert_eq!(
            store.count_matching(&filter).await.unwrap(),
            2,
            "count_matching reaches the pointee's own implementation"
        );
        assert_eq!(
            store.delete_matching(&filter).await.unwrap(),
            2,
            "delete_matching reaches the pointee's own implementation"
        );
        assert_eq!(store.count(s).await.unwrap(), 0);
    }};
}

// ---------------------------------------------------------------------------------------------
// HistoryStore

/// Every method of a store with every optional operation, through `S`.
async fn history_through<S: HistoryStore>(store: S) {
    let s = scope("history");
    assert_eq!(
        store.capabilities(),
        HistoryCapabilities::none()
            .with_archive(true)
            .with_ttl(true)
            .with_dedupes_ids(true)
            .with_counts_purged(true)
            .with_lists_every_thread(true)
            .with_cursor_reads(true)
            .with_paged_reads(true)
            .with_lists_tenants(true)
    );
    let out = store
        .append(&s, &[ChatMessage::user("a"), ChatMessage::assistant("b")])
        .await
        .unwrap();
    assert_eq!(out.seqs, vec![1, 2]);
    assert_eq!(store.archive(&s, 1..=1).await.unwrap(), 1);
    assert_eq!(store.read(&s, Window::All).await.unwrap().len(), 1);
    assert_eq!(store.count(&s).await.unwrap().archived, 1);
    let listed = store
        .list_threads(
            &ScopeFilter::tenant(s.tenant().clone()),
            PageRequest::first(10),
        )
        .await
        .unwrap();
    assert_eq!(listed.items, vec![s.clone()]);
    let first = store.read_since(&s, Window::All, None).await.unwrap();
    assert_eq!((first.delta, first.messages.len()), (Delta::Whole, 1));
    store.append(&s, &[ChatMessage::user("c")]).await.unwrap();
    let next = store
        .read_since(&s, Window::All, Some(first.cursor))
        .await
        .unwrap();
    assert_eq!(
        (next.delta, next.messages.len(), next.cursor.seq()),
        (Delta::Appended, 1, 3),
        "read_since reaches the pointee's own implementation"
    );
    let page = store.read_page(&s, 0, 2).await.unwrap();
    assert_eq!(
        page.iter().map(|m| (m.seq, m.archived)).collect::<Vec<_>>(),
        vec![(1, true), (2, false)],
        "read_page reaches the pointee's own implementation"
    );
    assert_eq!(store.read_page(&s, 2, 10).await.unwrap().len(), 1);
    tenants_and_ttl_through!(store, s, assert_eq!(store.clear(&s).await.unwrap(), 3));
}

#[tokio::test]
async fn history_store_through_arc_and_box() {
    history_through(Arc::new(InMemoryHistoryStore::new()) as Arc<dyn HistoryStore>).await;
    history_through(Box::new(InMemoryHistoryStore::new()) as Box<dyn HistoryStore>).await;
    history_through(Arc::new(InMemoryHistoryStore::new())).await;
    history_through(Box::new(InMemoryHistoryStore::new())).await;
    history_through(Traced::new(InMemoryHistoryStore::new(), "memory")).await;
    history_through(Bare(InMemoryHistoryStore::new())).await;
    history_through(Bare(Bare(Arc::new(InMemoryHistoryStore::new())))).await;
}

/// A history store with the required methods only: the optional ones are the trait's defaults.
#[derive(Debug, Default)]
struct RequiredOnlyHistory(InMemoryHistoryStore);

#[async_trait]
impl HistoryStore for RequiredOnlyHistory {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.0.append(scope, messages).await
    }
    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.0.read(scope, window).await
    }
    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.0.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.0.list_threads(filter, page).await
    }
}

async fn history_defaults_through<S: HistoryStore>(store: S) {
    let s = scope("defaults");
    store.append(&s, &[ChatMessage::user("a")]).await.unwrap();
    let errors = [
        ("archive", store.archive(&s, 1..=1).await.unwrap_err()),
        (
            "set_ttl",
            store
                .set_ttl(&s, Some(Duration::from_secs(60)))
                .await
                .unwrap_err(),
        ),
        ("purge_expired", store.purge_expired().await.unwrap_err()),
        (
            "read_since",
            store.read_since(&s, Window::All, None).await.unwrap_err(),
        ),
        ("read_page", store.read_page(&s, 0, 10).await.unwrap_err()),
        (
            "list_tenants",
            store
                .list_tenants(PageRequest::first(10))
                .await
                .unwrap_err(),
        ),
    ];
    assert_unsupported("RequiredOnlyHistory", errors);
    assert_eq!(store.count(&s).await.unwrap().active, 1, "nothing changed");
}

#[tokio::test]
async fn optional_history_operations_default_to_unsupported() {
    let arc: Arc<dyn HistoryStore> = Arc::new(RequiredOnlyHistory::default());
    history_defaults_through(arc).await;
    let boxed: Box<dyn HistoryStore> = Box::new(RequiredOnlyHistory::default());
    history_defaults_through(boxed).await;
    history_defaults_through(Traced::new(RequiredOnlyHistory::default(), "memory")).await;
    history_defaults_through(Bare(RequiredOnlyHistory::default())).await;
    let err = RequiredOnlyHistory::default()
        .archive(&scope("s"), 1..=2)
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "forwarding::RequiredOnlyHistory does not support archive: its \
         HistoryCapabilities::archive is false"
    );
}

// ---------------------------------------------------------------------------------------------
// SessionStore

async fn sessions_through<S: SessionStore>(store: S) {
    let s = scope("session");
    assert_eq!(
        store.capabilities(),
        SessionCapabilities::none()
            .with_ttl(true)
            .with_lists_tenants(true)
    );
    assert_eq!(store.save(&s, &json!({"n": 1}), None).await.unwrap(), 1);
    assert_eq!(
        store.load(&s).await.unwrap(),
        Some(StoredSession {
            state: json!({"n": 1}),
            version: 1
        })
    );
    let listed = store
        .list(
            &ScopeFilter::tenant(s.tenant().clone()),
            PageRequest::first(10),
        )
        .await
        .unwrap();
    assert_eq!(listed.items, vec![s.clone()]);
    tenants_and_ttl_through!(store, s, assert!(store.delete(&s).await.unwrap()));
}

#[tokio::test]
async fn session_store_through_arc_and_box() {
    sessions_through(Arc::new(InMemorySessionStore::new()) as Arc<dyn SessionStore>).await;
    sessions_through(Box::new(InMemorySessionStore::new()) as Box<dyn SessionStore>).await;
    sessions_through(Traced::new(InMemorySessionStore::new(), "memory")).await;
    sessions_through(Bare(InMemorySessionStore::new())).await;
}

#[tokio::test]
async fn optional_session_operations_default_to_unsupported() {
    for store in every_wrapping!(SessionStore, RequiredOnlySessions) {
        let s = scope("session-defaults");
        store.save(&s, &json!({}), None).await.unwrap();
        assert_unsupported(
            "RequiredOnlySessions",
            [
                ("set_ttl", store.set_ttl(&s, None).await.unwrap_err()),
                ("purge_expired", store.purge_expired().await.unwrap_err()),
                (
                    "list_tenants",
                    store
                        .list_tenants(PageRequest::first(10))
                        .await
                        .unwrap_err(),
                ),
            ],
        );
        assert!(store.load(&s).await.unwrap().is_some(), "nothing changed");
    }
}

// ---------------------------------------------------------------------------------------------
// ContextProvider

/// A provider that overrides the provided `invoked` and records each call.
#[derive(Debug)]
struct Recording {
    source: SourceId,
    told: Mutex<Vec<String>>,
}

#[async_trait]
impl ContextProvider for Recording {
    fn source_id(&self) -> &SourceId {
        &self.source
    }
    async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext> {
        *context.state = json!({"seen": context.input.len()});
        Ok(AiContext {
            instructions: vec!["from recording".to_owned()],
            ..AiContext::default()
        })
    }
    async fn invoked(&self, context: InvokedContext<'_>) -> Result<()> {
        self.told
            .lock()
            .unwrap()
            .push(format!("{}", context.response.map_or(0, <[_]>::len)));
        Ok(())
    }
}

async fn provider_through<P: ContextProvider>(provider: P, recording: &Recording) {
    assert_eq!(provider.source_id().as_str(), "recording");
    let s = scope("provider");
    let input = [ChatMessage::user("hi")];
    let mut state = Value::Null;
    let added = provider
        .invoking(InvokingContext::new(&s, &input, &mut state))
        .await
        .unwrap();
    assert_eq!(added.instructions, ["from recording"]);
    assert_eq!(state, json!({"seen": 1}));
    let response = [ChatMessage::assistant("hello"), ChatMessage::assistant("!")];
    provider
        .invoked(InvokedContext::new(
            &s,
            &input,
            Some(&response),
            None,
            &mut state,
        ))
        .await
        .unwrap();
    assert_eq!(
        recording.told.lock().unwrap().pop().as_deref(),
        Some("2"),
        "the pointee's own invoked ran, not the default"
    );
}

#[tokio::test]
async fn context_provider_through_arc_and_box() {
    let recording = Arc::new(Recording {
        source: SourceId::new("recording").unwrap(),
        told: Mutex::new(Vec::new()),
    });
    provider_through(recording.clone() as Arc<dyn ContextProvider>, &recording).await;
    let boxed: Box<dyn ContextProvider> = Box::new(recording.clone());
    provider_through(boxed, &recording).await;
}

// ---------------------------------------------------------------------------------------------
// ChatModel and Embedder

#[derive(Debug)]
struct Echo;

#[async_trait]
impl ChatModel for Echo {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(format!(
                "{} messages",
                request.messages.len()
            ))],
            ..ChatResponse::default()
        })
    }
}

async fn model_through<M: ChatModel>(model: M) {
    let request = ChatRequest {
        messages: vec![ChatMessage::user("a"), ChatMessage::user("b")],
        ..ChatRequest::default()
    };
    let response = model.complete(&request).await.unwrap();
    assert_eq!(response.messages[0].text(), "2 messages");
}

#[tokio::test]
async fn chat_model_through_arc_and_box() {
    model_through(Arc::new(Echo) as Arc<dyn ChatModel>).await;
    model_through(Box::new(Echo) as Box<dyn ChatModel>).await;
}

#[derive(Debug)]
struct Lengths;

#[async_trait]
impl Embedder for Lengths {
    fn dimensions(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
    }
}

async fn embedder_through<E: Embedder>(embedder: E) {
    assert_eq!(embedder.dimensions(), 2);
    let vectors = embedder
        .embed(&["ab".to_owned(), "abc".to_owned()])
        .await
        .unwrap();
    assert_eq!(vectors, vec![vec![2.0, 1.0], vec![3.0, 1.0]]);
}

#[tokio::test]
async fn embedder_through_arc_and_box() {
    embedder_through(Arc::new(Lengths) as Arc<dyn Embedder>).await;
    embedder_through(Box::new(Lengths) as Box<dyn Embedder>).await;
}

// ---------------------------------------------------------------------------------------------
// VectorStore and RetrievalPostprocessor

async fn vectors_through<V: VectorStore>(store: V) {
    let s = scope("vectors");
    assert_eq!(
        store.capabilities(),
        VectorCapabilities::none()
            .with_deletes_matching(true)
            .with_searches_matching(true)
    );
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let points = [
        VectorPoint {
            id: a,
            vector: vec![1.0, 0.0],
            payload: serde_json::Map::new(),
        },
        VectorPoint {
            id: b,
            vector: vec![0.0, 1.0],
            payload: serde_json::Map::new(),
        },
    ];
    store.upsert(&s, &points).await.unwrap();
    let hits = store
        .search(&s, &VectorQuery::new(vec![1.0, 0.1], 1))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, a);
    let across = store
        .search_matching(
            &ScopeFilter::tenant(s.tenant().clone()),
            &VectorQuery::new(vec![1.0, 0.1], 2),
        )
        .await
        .unwrap();
    let found: Vec<(Uuid, &Scope)> = across.iter().map(|h| (h.hit.id, &h.scope)).collect();
    assert_eq!(found, [(a, &s), (b, &s)], "search_matching is forwarded");
    two_items_through!(store, s, points);
}

#[tokio::test]
async fn vector_store_through_arc_and_box() {
    vectors_through(Arc::new(InMemoryVectorStore::new()) as Arc<dyn VectorStore>).await;
    vectors_through(Box::new(InMemoryVectorStore::new()) as Box<dyn VectorStore>).await;
    vectors_through(Traced::new(InMemoryVectorStore::new(), "memory")).await;
    vectors_through(Bare(InMemoryVectorStore::new())).await;
}

async fn texts_through<T: TextIndex>(index: T) {
    let s = scope("texts");
    assert_eq!(
        index.capabilities(),
        TextCapabilities::none().with_deletes_matching(true)
    );
    let document = |text: &str| TextDocument {
        id: Uuid::new_v4(),
        text: text.into(),
        payload: serde_json::Map::new(),
    };
    let documents = [document("the walrus sings"), document("a quiet harbour")];
    index.upsert(&s, &documents).await.unwrap();
    let hits = index
        .search(&s, &TextQuery::new("walrus", 5))
        .await
        .unwrap();
    assert_eq!(
        hits.iter().map(|h| h.id).collect::<Vec<_>>(),
        [documents[0].id]
    );
    two_items_through!(index, s, documents);
}

#[tokio::test]
async fn text_index_through_arc_box_and_layers() {
    texts_through(Arc::new(ReferenceTextIndex::new()) as Arc<dyn TextIndex>).await;
    texts_through(Box::new(ReferenceTextIndex::new()) as Box<dyn TextIndex>).await;
    texts_through(Traced::new(ReferenceTextIndex::new(), "memory")).await;
    texts_through(Bare(ReferenceTextIndex::new())).await;
}

/// A vector store with the required methods only.
#[derive(Debug, Default)]
struct RequiredOnlyVectors(InMemoryVectorStore);

#[async_trait]
impl VectorStore for RequiredOnlyVectors {
    async fn upsert(&self, scope: &Scope, points: &[VectorPoint]) -> Result<()> {
        self.0.upsert(scope, points).await
    }
    async fn search(&self, scope: &Scope, query: &VectorQuery) -> Result<Vec<ScoredPoint>> {
        self.0.search(scope, query).await
    }
    async fn get(&self, scope: &Scope, ids: &[Uuid]) -> Result<Vec<VectorPoint>> {
        self.0.get(scope, ids).await
    }
    async fn delete(&self, scope: &Scope, ids: &[Uuid]) -> Result<u64> {
        self.0.delete(scope, ids).await
    }
    async fn count(&self, scope: &Scope) -> Result<u64> {
        self.0.count(scope).await
    }
    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.0.clear(scope).await
    }
}

#[tokio::test]
async fn optional_vector_operations_default_to_unsupported() {
    for store in every_wrapping!(VectorStore, RequiredOnlyVectors) {
        assert_eq!(store.capabilities(), VectorCapabilities::none());
        let s = scope("vector-defaults");
        let point = VectorPoint {
            id: Uuid::new_v4(),
            vector: vec![1.0, 0.0],
            payload: serde_json::Map::new(),
        };
        store.upsert(&s, &[point]).await.unwrap();
        let filter = ScopeFilter::tenant(s.tenant().clone());
        assert_unsupported(
            "RequiredOnlyVectors",
            [
                (
                    "delete_matching",
                    store.delete_matching(&filter).await.unwrap_err(),
                ),
                (
                    "count_matching",
                    store.count_matching(&filter).await.unwrap_err(),
                ),
            ],
        );
        assert_eq!(store.count(&s).await.unwrap(), 1, "nothing changed");
    }
}

fn postprocessor_through<P: RetrievalPostprocessor>(p: P) {
    let point = |score| ScoredPoint {
        id: Uuid::new_v4(),
        score,
        payload: serde_json::Map::new(),
    };
    let kept = p.process(vec![point(0.9), point(0.2)]);
    assert_eq!(kept.len(), 1);
    assert!((kept[0].score - 0.9).abs() < f32::EPSILON);
}

#[test]
fn retrieval_postprocessor_through_arc_and_box() {
    postprocessor_through(Arc::new(SimilarityCutoff(0.5)) as Arc<dyn RetrievalPostprocessor>);
    postprocessor_through(Box::new(SimilarityCutoff(0.5)) as Box<dyn RetrievalPostprocessor>);
}

// ---------------------------------------------------------------------------------------------
// MemoryBlock

/// A block that overrides the provided `truncate`.
#[derive(Debug)]
struct Shortening;

#[async_trait]
impl MemoryBlock for Shortening {
    fn name(&self) -> &str {
        "shortening"
    }
    fn priority(&self) -> u32 {
        4
    }
    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        Ok(BlockContent::Text(format!(
            "{} messages",
            context.messages.len()
        )))
    }
    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        *context.state = json!({"took": context.messages.len()});
        Ok(())
    }
    async fn truncate(
        &self,
        content: BlockContent,
        excess_tokens: u64,
        _counter: &dyn TokenCounter,
    ) -> Result<Option<BlockContent>> {
        Ok(Some(BlockContent::Text(format!(
            "{} minus {excess_tokens}",
            content.text()
        ))))
    }
}

async fn block_through<B: MemoryBlock>(block: B) {
    assert_eq!((block.name(), block.priority()), ("shortening", 4));
    let s = scope("block");
    let content = block
        .get(BlockGetContext {
            scope: &s,
            messages: &[ChatMessage::user("x")],
            state: &Value::Null,
            window_from_seq: None,
        })
        .await
        .unwrap();
    assert_eq!(content.text(), "1 messages");
    let stored = StoredMessage {
        seq: 1,
        tokens: 3,
        archived: false,
        message: ChatMessage::user("x").into(),
    };
    let mut state = Value::Null;
    block
        .put(BlockPutContext {
            scope: &s,
            messages: std::slice::from_ref(&stored),
            state: &mut state,
        })
        .await
        .unwrap();
    assert_eq!(state, json!({"took": 1}));
    let counter = FnTokenCounter::new(|t| t.len() as u32);
    let shorter = block.truncate(content, 5, &counter).await.unwrap();
    assert_eq!(
        shorter.map(|c| c.text()).as_deref(),
        Some("1 messages minus 5"),
        "the pointee's own truncate ran, not the default (which leaves the block out)"
    );
}

#[tokio::test]
async fn memory_block_through_arc_and_box() {
    block_through(Arc::new(Shortening) as Arc<dyn MemoryBlock>).await;
    block_through(Box::new(Shortening) as Box<dyn MemoryBlock>).await;
}

// ---------------------------------------------------------------------------------------------
// ChatReducer

async fn reducer_through<R: ChatReducer>(reducer: R) {
    let messages: Vec<StoredMessage> = (1..=4)
        .map(|seq| StoredMessage {
            seq,
            tokens: 1,
            archived: false,
            message: if seq % 2 == 1 {
                ChatMessage::user(format!("q{seq}")).into()
            } else {
                ChatMessage::assistant(format!("a{seq}")).into()
            },
        })
        .collect();
    let reduction = reducer.reduce(&messages).await.unwrap();
    assert_eq!(reduction.dropped, vec![0..2]);
}

#[tokio::test]
async fn chat_reducer_through_arc_and_box() {
    reducer_through(Arc::new(MessageCountReducer::new(2)) as Arc<dyn ChatReducer>).await;
    reducer_through(Box::new(MessageCountReducer::new(2)) as Box<dyn ChatReducer>).await;
}

// ---------------------------------------------------------------------------------------------
// TokenCounter

/// A counter that overrides both provided methods.
#[derive(Debug)]
struct Flat;

impl TokenCounter for Flat {
    fn count_text(&self, text: &str) -> u32 {
        text.len() as u32
    }
    fn media_costs(&self) -> MediaTokenCosts {
        MediaTokenCosts {
            image: 1,
            audio: 2,
            video: 3,
            document: 4,
        }
    }
    fn count_message(&self, _message: &ChatMessage) -> u32 {
        42
    }
}

fn counter_through<C: TokenCounter>(counter: C) {
    assert_eq!(counter.count_text("abcd"), 4);
    assert_eq!(
        counter.media_costs().document,
        4,
        "the override is forwarded"
    );
    assert_eq!(
        counter.count_message(&ChatMessage::user("long enough")),
        42,
        "the override is forwarded"
    );
}

#[test]
fn token_counter_through_arc_and_box() {
    counter_through(Arc::new(Flat) as Arc<dyn TokenCounter>);
    counter_through(Box::new(Flat) as Box<dyn TokenCounter>);
}
