//! `Traced` is a store: the whole testkit runs through it (history, sessions, vectors) with a
//! subscriber that wants every span and event, so the instrumented path is what runs; and a
//! failing call is a span with its error kind and an error status.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use memory_core::telemetry::Traced;
use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, InMemoryHistoryStore, InMemorySessionStore,
    InMemoryVectorStore, Scope, SessionStore,
};
use memory_testkit::text_reference::ReferenceTextIndex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span's or event's fields, as text.
type FieldList = Vec<(String, String)>;

/// Wants everything; keeps each span's name and fields, and each metric event's fields.
#[derive(Default)]
struct Recorder {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, (String, FieldList)>>,
    events: Mutex<Vec<FieldList>>,
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .insert(id, (span.metadata().name().to_owned(), fields));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() == memory_core::telemetry::METRICS_TARGET {
            let mut fields = Vec::new();
            event.record(&mut Fields(&mut fields));
            self.events.lock().unwrap().push(fields);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

static RECORDER: std::sync::OnceLock<&'static Recorder> = std::sync::OnceLock::new();

/// Installs the recorder as the global subscriber, once.
fn listening() -> &'static Recorder {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let recorder: &'static Recorder = Box::leak(Box::default());
        RECORDER.set(recorder).ok();
        tracing::subscriber::set_global_default(Forward(recorder)).unwrap();
    });
    RECORDER.get().copied().unwrap()
}

/// The global subscriber must be owned: this one forwards to the leaked recorder.
struct Forward(&'static Recorder);

impl Subscriber for Forward {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.0.new_span(span)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        self.0.record(span, values);
    }
    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.0.record_follows_from(span, follows);
    }
    fn event(&self, event: &Event<'_>) {
        self.0.event(event);
    }
    fn enter(&self, span: &Id) {
        self.0.enter(span);
    }
    fn exit(&self, span: &Id) {
        self.0.exit(span);
    }
}

memory_testkit::history_store_tests!(mod traced_history, async {
    listening();
    Traced::new(InMemoryHistoryStore::new(), "memory")
});
memory_testkit::session_store_tests!(mod traced_sessions, async {
    listening();
    Traced::new(InMemorySessionStore::new(), "memory")
});
memory_testkit::vector_store_tests!(mod traced_vectors, async {
    listening();
    Traced::new(InMemoryVectorStore::new(), "memory")
});

fn has(fields: &[(String, String)], name: &str, value: &str) -> bool {
    fields.iter().any(|(n, v)| n == name && v == value)
}

#[tokio::test]
async fn every_call_is_a_span_and_a_duration_and_a_failure_says_its_kind() {
    let recorder = listening();
    let store = Traced::new(InMemoryHistoryStore::new(), "memory");
    assert_eq!(
        format!("{store:?}"),
        format!("{:?}", InMemoryHistoryStore::new()),
        "the wrapper is invisible in Debug"
    );
    let scope = Scope::session("traced-calls")
        .unwrap()
        .with_tenant("acme")
        .unwrap();
    store
        .append(
            &scope,
            &[
                ChatMessage::user("secret text"),
                ChatMessage::assistant("ok"),
            ],
        )
        .await
        .unwrap();
    let missing = Scope::session("traced-missing").unwrap();
    let err = store
        .set_ttl(&missing, Some(Duration::from_secs(60)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let sessions = Traced::new(InMemorySessionStore::new(), "memory");
    assert!(sessions.load(&scope).await.unwrap().is_none());

    let spans = recorder.spans.lock().unwrap();
    let of = |session: &str, op: &str| {
        spans
            .values()
            .find(|(name, fields)| {
                name == "agent_memory.store.op"
                    && has(fields, "agent_memory.scope.session", session)
                    && has(fields, "db.operation.name", op)
            })
            .map(|(_, fields)| fields.clone())
            .unwrap_or_else(|| panic!("no {op} span of {session}"))
    };
    let append = of("traced-calls", "append");
    assert!(has(&append, "db.system.name", "memory"));
    assert!(has(&append, "agent_memory.scope.tenant", "acme"));
    assert!(has(&append, "agent_memory.store.count", "2"));
    assert!(has(&append, "otel.name", "append memory"));
    assert!(!append.iter().any(|(_, v)| v.contains("secret text")));
    let failed = of("traced-missing", "set_ttl");
    assert!(has(&failed, "otel.status_code", "ERROR"));
    assert!(has(&failed, "error.type", "not_found"));
    assert!(has(
        &of("traced-calls", "load"),
        "agent_memory.store.count",
        "0"
    ));
    drop(spans);

    let events = recorder.events.lock().unwrap();
    assert!(events.iter().any(|fields| {
        fields
            .iter()
            .any(|(n, _)| n == "histogram.db.client.operation.duration")
            && has(fields, "db.operation.name", "set_ttl")
            && has(fields, "error.type", "not_found")
    }));
}

#[tokio::test]
async fn a_recall_and_a_forget_are_spans_with_their_counts() {
    use std::sync::Arc;

    use memory_core::memory::blocks::VectorMemoryBlock;
    use memory_core::{ForgetMode, Forgetter, Memory, ScopeFilter, TenantId};
    use memory_testkit::memory::WordHashEmbedder;

    let recorder = listening();
    let history: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let sessions: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::new());
    let vectors = Arc::new(InMemoryVectorStore::new());
    let scope = Scope::session("traced-recall")
        .unwrap()
        .with_tenant("recall")
        .unwrap();
    let block = VectorMemoryBlock::new(Arc::new(WordHashEmbedder), vectors.clone())
        .with_similarity_top_k(3);
    let memory = Memory::builder(scope.clone(), Arc::clone(&history), Arc::clone(&sessions))
        .token_limit(60)
        .block(Arc::new(block))
        .build()
        .unwrap();
    let notes: Vec<ChatMessage> = (0..8)
        .map(|i| {
            ChatMessage::user(format!(
                "note {i}: the teapot parcel goes to the garden door"
            ))
        })
        .collect();
    assert!(memory.put_messages(&notes).await.unwrap().messages > 0);
    memory
        .get(&[ChatMessage::user("where does the teapot parcel go?")])
        .await
        .unwrap();
    let receipt = Forgetter::new()
        .history(Arc::clone(&history))
        .sessions(Arc::clone(&sessions))
        .vectors(vectors)
        .forget(
            &ScopeFilter::tenant(TenantId::new("recall").unwrap()),
            ForgetMode::Delete,
        )
        .await
        .unwrap();

    let spans = recorder.spans.lock().unwrap();
    let find = |name: &str, tenant: &str| {
        spans
            .values()
            .find(|(n, fields)| n == name && has(fields, "agent_memory.scope.tenant", tenant))
            .map(|(_, fields)| fields.clone())
            .unwrap_or_else(|| panic!("no {name} span"))
    };
    let recall = find("agent_memory.retrieve", "recall");
    assert!(has(&recall, "agent_memory.retrieval.top_k", "3"));
    let hits: i64 = recall
        .iter()
        .find(|(n, _)| n == "agent_memory.retrieval.hits")
        .map(|(_, v)| v.parse().unwrap())
        .expect("hits recorded");
    assert!(hits >= 1, "{recall:?}");
    assert!(
        recall
            .iter()
            .any(|(n, _)| n == "agent_memory.retrieval.top_score"),
        "{recall:?}"
    );
    assert!(!recall.iter().any(|(_, v)| v.contains("teapot")), "no text");
    let forget = find("agent_memory.forget", "recall");
    assert!(has(&forget, "agent_memory.forget.dry_run", "false"));
    assert!(has(
        &forget,
        "agent_memory.forget.items",
        &receipt.total_items().to_string()
    ));
    assert!(receipt.total_items() > 0);
}

#[tokio::test]
async fn a_text_index_call_is_a_span_with_its_count_and_never_its_text() {
    use memory_core::{TextDocument, TextIndex, TextQuery};

    let recorder = listening();
    let index = Traced::new(
        ReferenceTextIndex::new().without_deletes_matching(),
        "words",
    );
    assert_eq!(index.capabilities(), memory_core::TextCapabilities::none());
    let scope = Scope::session("traced-text")
        .unwrap()
        .with_tenant("lexical")
        .unwrap();
    let doc = |text: &str| TextDocument {
        id: uuid::Uuid::new_v4(),
        text: text.into(),
        payload: serde_json::Map::new(),
    };
    let docs = [
        doc("the teapot SECRET-DOC sits on the shelf"),
        doc("the garden door is blue"),
    ];
    index.upsert(&scope, &docs).await.unwrap();
    let found = index
        .search(
            &scope,
            &TextQuery::new("where is the SECRET-QUERY teapot", 5),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 2, "both hold \"the\"");
    assert_eq!(index.get(&scope, &[docs[1].id]).await.unwrap().len(), 1);
    let long = "x".repeat(memory_core::lexical::MAX_QUERY_BYTES + 1);
    let err = index
        .search(&scope, &TextQuery::new(long, 3))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let forget = memory_core::ScopeFilter::tenant(memory_core::TenantId::new("lexical").unwrap());
    let err = index.delete_matching(&forget).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Unsupported,
        "forwarded, not answered"
    );
    assert_eq!(index.delete(&scope, &[docs[0].id]).await.unwrap(), 1);
    assert_eq!(index.count(&scope).await.unwrap(), 1);
    assert_eq!(index.clear(&scope).await.unwrap(), 1);

    let spans = recorder.spans.lock().unwrap();
    let ours: Vec<&FieldList> = spans
        .values()
        .filter(|(name, fields)| {
            name == "agent_memory.store.op" && has(fields, "db.system.name", "words")
        })
        .map(|(_, fields)| fields)
        .collect();
    let of = |op: &str, status: Option<&str>| {
        ours.iter()
            .find(|f| {
                has(f, "db.operation.name", op)
                    && status.is_none_or(|s| has(f, "otel.status_code", s))
            })
            .copied()
            .unwrap_or_else(|| panic!("no {op} span in {ours:?}"))
    };
    let upsert = of("upsert", None);
    assert!(has(upsert, "otel.name", "upsert words"));
    assert!(has(upsert, "agent_memory.scope.tenant", "lexical"));
    assert!(has(upsert, "agent_memory.scope.session", "traced-text"));
    assert!(has(upsert, "agent_memory.store.count", "2"));
    assert!(
        ours.iter()
            .any(|f| has(f, "db.operation.name", "search")
                && has(f, "agent_memory.store.count", "2"))
    );
    let failed = of("search", Some("ERROR"));
    assert!(has(failed, "error.type", "invalid_input"));
    assert!(has(
        of("delete_matching", None),
        "error.type",
        "unsupported"
    ));
    assert!(has(of("get", None), "agent_memory.store.count", "1"));
    assert!(has(of("delete", None), "agent_memory.store.count", "1"));
    assert!(has(of("count", None), "agent_memory.store.count", "1"));
    assert!(has(of("clear", None), "agent_memory.store.count", "1"));
    for fields in &ours {
        assert!(
            !fields
                .iter()
                .any(|(_, v)| v.contains("SECRET-DOC") || v.contains("SECRET-QUERY")),
            "text leaked: {fields:?}"
        );
    }
}
