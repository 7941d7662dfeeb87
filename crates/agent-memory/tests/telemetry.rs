//! The OpenTelemetry signals of one full agent turn and one `Memory` flush, collected with the
//! SDK's in-memory exporters, on PostgreSQL opened from a URL holding a password.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::Arc;

use agent_memory::telemetry::{self, TelemetryConfig};
use agent_memory::{
    Agent, AgentSession, ChatMessage, ChatResponse, Memory, MessageCountReducer, ReducerTrigger,
    Scope, Usage,
};
use memory_testkit::ScriptedChatModel;
use opentelemetry::Value;
use opentelemetry_sdk::metrics::InMemoryMetricExporter;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};

const URL: &str = "postgres://postgres:hunter2-canary@127.0.0.1:5432/test";
const INPUT: &str = "what did I order? INPUT-CANARY";
const ANSWER: &str = "a blue teapot ANSWER-CANARY";

/// What one run collected.
struct Collected {
    spans: Vec<SpanData>,
    metrics: String,
    metric_names: Vec<String>,
    scope: Scope,
    flush_scope: Scope,
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attr(span, key) {
        Some(Value::I64(n)) => *n,
        other => panic!("{key} of {} is {other:?}", span.name),
    }
}

fn text(span: &SpanData, key: &str) -> String {
    attr(span, key)
        .unwrap_or_else(|| panic!("{} has no {key}", span.name))
        .as_str()
        .into_owned()
}

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        panic!("no span {name} in {names:?}")
    })
}

/// Every attribute value of every span, and the metrics' text.
fn everything(collected: &Collected) -> String {
    let mut all = collected.metrics.clone();
    for span in &collected.spans {
        all.push_str(&span.name);
        for kv in &span.attributes {
            all.push_str(&format!(" {}={}", kv.key, kv.value.as_str()));
        }
        all.push('\n');
    }
    all
}

/// One agent turn (six stored messages, a reducer keeping two, a model reporting usage) and
/// one flush of a `Memory`, with the pipeline installed for this thread.
async fn run(capture_content: bool) -> Collected {
    let spans = InMemorySpanExporter::default();
    let metrics = InMemoryMetricExporter::default();
    let config = TelemetryConfig::new("telemetry-test").with_capture_content(capture_content);
    let (subscriber, guard) = telemetry::build(&config, spans.clone(), metrics.clone());
    let default = tracing::subscriber::set_default(subscriber);

    let stores = agent_memory::open(URL).await.unwrap();
    let id = format!("otel-{}", uuid_like());
    let scope = Scope::session(&id)
        .unwrap()
        .with_tenant("acme")
        .unwrap()
        .with_user("dana")
        .unwrap();
    let earlier: Vec<ChatMessage> = (0..3)
        .flat_map(|i| {
            [
                ChatMessage::user(format!("earlier question {i}")),
                ChatMessage::assistant(format!("earlier answer {i}")),
            ]
        })
        .collect();
    stores.history.append(&scope, &earlier).await.unwrap();

    let model = ScriptedChatModel::new().reply(ChatResponse {
        messages: vec![ChatMessage::assistant(ANSWER)],
        usage: Some(Usage {
            input_tokens: 11,
            output_tokens: 7,
        }),
        ..ChatResponse::default()
    });
    let agent = Agent::builder("helper", Arc::new(model), Arc::clone(&stores.history))
        .reducer(
            Arc::new(MessageCountReducer::new(2)),
            ReducerTrigger::BeforeMessagesRetrieval,
        )
        .build()
        .unwrap();
    let mut session = AgentSession::new(scope.clone());
    let run = agent.run(INPUT, &mut session).await.unwrap();
    assert_eq!(run.messages.last().unwrap().text(), ANSWER);

    let flush_scope = Scope::session(format!("{id}-flush"))
        .unwrap()
        .with_tenant("acme")
        .unwrap();
    let memory = Memory::builder(
        flush_scope.clone(),
        Arc::clone(&stores.history),
        Arc::clone(&stores.sessions),
    )
    .token_limit(60)
    .build()
    .unwrap();
    let messages: Vec<ChatMessage> = (0..8)
        .map(|i| {
            ChatMessage::user(format!(
                "note {i}: the parcel goes to the side door, please"
            ))
        })
        .collect();
    let report = memory.put_messages(&messages).await.unwrap();
    assert!(
        report.messages > 0,
        "the memory flushed nothing: {report:?}"
    );

    // The text index open gives a SQL URL, traced like the stores: a document and a search
    // whose words must never reach the telemetry.
    let text = stores.text_index().expect("a SQL URL has a text index");
    let document: agent_memory::TextDocument = serde_json::from_value(serde_json::json!({
        "id": "0192f0c0-0000-7000-8000-00000000000a",
        "text": "the teapot sits in the DOCUMENT-CANARY cupboard",
        "payload": {},
    }))
    .unwrap();
    text.upsert(&flush_scope, &[document]).await.unwrap();
    let found = text
        .search(
            &flush_scope,
            &agent_memory::TextQuery::new("which cupboard holds the teapot QUERY-CANARY", 3),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(text.clear(&flush_scope).await.unwrap(), 1);

    drop(default);
    guard.force_flush().unwrap();
    let finished = spans.get_finished_spans().unwrap();
    let exported = metrics.get_finished_metrics().unwrap();
    let mut metric_names = Vec::new();
    for resource in &exported {
        for scope_metrics in resource.scope_metrics() {
            for metric in scope_metrics.metrics() {
                metric_names.push(metric.name().to_owned());
            }
        }
    }
    Collected {
        spans: finished,
        metrics: format!("{exported:?}"),
        metric_names,
        scope,
        flush_scope,
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

#[tokio::test]
async fn one_agent_turn_and_one_flush_are_traced_without_text_or_secrets() {
    let collected = run(false).await;
    let spans = &collected.spans;

    // The turn: gen_ai's invoke_agent span.
    let turn = span(spans, "invoke_agent helper");
    assert_eq!(text(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(turn, "gen_ai.agent.name"), "helper");
    assert_eq!(text(turn, "gen_ai.conversation.id"), collected.scope.key());
    assert_eq!(text(turn, "agent_memory.scope.tenant"), "acme");
    assert_eq!(text(turn, "agent_memory.scope.user"), "dana");
    assert_eq!(int(turn, "gen_ai.usage.input_tokens"), 11);
    assert_eq!(int(turn, "gen_ai.usage.output_tokens"), 7);
    assert_eq!(int(turn, "agent_memory.turn.window_messages"), 6);
    assert_eq!(int(turn, "agent_memory.reducer.messages_dropped"), 4);
    assert_eq!(int(turn, "agent_memory.turn.iterations"), 1);
    assert!(attr(turn, "gen_ai.input.messages").is_none());
    assert!(attr(turn, "gen_ai.output.messages").is_none());

    // The model call, a child of the turn.
    let chat = span(spans, "chat");
    assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
    assert_eq!(int(chat, "gen_ai.usage.input_tokens"), 11);
    assert_eq!(chat.parent_span_id, turn.span_context.span_id());

    // The reducer's decision: four of six messages dropped, with their stored tokens.
    let reduce = span(spans, "agent_memory.reducer.reduce");
    assert_eq!(
        text(reduce, "agent_memory.reducer.trigger"),
        "before_messages_retrieval"
    );
    assert_eq!(int(reduce, "agent_memory.reducer.messages_kept"), 2);
    assert_eq!(int(reduce, "agent_memory.reducer.messages_dropped"), 4);
    assert!(int(reduce, "agent_memory.reducer.tokens_dropped") > 0);
    assert!(int(reduce, "agent_memory.reducer.tokens_kept") > 0);

    // Store operations: the backend's round trips (the window cache reads with a cursor).
    let append = spans
        .iter()
        .find(|s| {
            s.name == "append postgresql"
                && attr(s, "agent_memory.scope.session").map(|v| v.as_str().into_owned())
                    == Some(collected.scope.session_id().to_string())
                && s.span_context.trace_id() == turn.span_context.trace_id()
        })
        .expect("the turn's append");
    assert_eq!(text(append, "db.system.name"), "postgresql");
    assert_eq!(text(append, "db.operation.name"), "append");
    assert_eq!(text(append, "agent_memory.scope.tenant"), "acme");
    assert_eq!(
        int(append, "agent_memory.store.count"),
        2,
        "input and answer"
    );
    assert!(
        spans.iter().any(|s| s.name == "read_since postgresql"
            && s.span_context.trace_id() == turn.span_context.trace_id()),
        "the turn's read"
    );

    // The flush.
    let flush = span(spans, "memory.flush");
    assert_eq!(
        text(flush, "gen_ai.conversation.id"),
        collected.flush_scope.key()
    );
    assert!(int(flush, "agent_memory.flush.messages") > 0);
    assert!(int(flush, "agent_memory.flush.tokens") > 0);
    assert!(
        spans.iter().any(|s| s.name == "archive postgresql"
            && s.span_context.trace_id() == flush.span_context.trace_id()),
        "the flush's archive"
    );

    // The text index: its calls are store spans too, with their counts.
    let text_span = |name: &str| {
        spans
            .iter()
            .find(|s| {
                s.name == name
                    && attr(s, "agent_memory.scope.session").map(|v| v.as_str().into_owned())
                        == Some(collected.flush_scope.session_id().to_string())
            })
            .unwrap_or_else(|| panic!("no {name} span of the flush scope"))
    };
    let upsert = text_span("upsert postgresql");
    assert_eq!(text(upsert, "db.operation.name"), "upsert");
    assert_eq!(text(upsert, "agent_memory.scope.tenant"), "acme");
    assert_eq!(int(upsert, "agent_memory.store.count"), 1);
    assert_eq!(
        int(text_span("search postgresql"), "agent_memory.store.count"),
        1
    );

    // Opening: the URL, without its password.
    let open = span(spans, "agent_memory.open");
    assert_eq!(text(open, "db.system.name"), "postgresql");
    assert!(text(open, "agent_memory.url").contains("127.0.0.1:5432"));

    // Metrics.
    for name in [
        "db.client.operation.duration",
        "gen_ai.client.token.usage",
        "agent_memory.reducer.messages_dropped",
        "agent_memory.reducer.tokens_dropped",
        "agent_memory.memory.flushes",
        "agent_memory.memory.flushed_messages",
        "agent_memory.history.archived_messages",
        "agent_memory.window_cache.requests",
    ] {
        assert!(
            collected.metric_names.iter().any(|n| n == name),
            "no metric {name} in {:?}",
            collected.metric_names
        );
    }
    assert!(collected.metrics.contains("postgresql"));

    // Never a secret, never message text by default.
    let all = everything(&collected);
    for canary in [
        "hunter2-canary",
        "INPUT-CANARY",
        "ANSWER-CANARY",
        "side door",
        "DOCUMENT-CANARY",
        "QUERY-CANARY",
    ] {
        assert!(!all.contains(canary), "{canary} leaked into telemetry");
    }

    // With the opt-in, the turn's span carries the text (and still no secret).
    let collected = run(true).await;
    let turn = span(&collected.spans, "invoke_agent helper");
    assert!(text(turn, "gen_ai.input.messages").contains("INPUT-CANARY"));
    assert!(text(turn, "gen_ai.output.messages").contains("ANSWER-CANARY"));
    let all = everything(&collected);
    assert!(!all.contains("hunter2-canary"));
    assert!(
        !all.contains("DOCUMENT-CANARY") && !all.contains("QUERY-CANARY"),
        "a text index's words are never captured"
    );
    agent_memory::telemetry::set_capture_content(false);
}
