//! `AfRedisHistory` against the machine's Redis (or `AGENT_MEMORY_REDIS_URL`): Agent Framework's
//! key names (golden, from the real samples in docs/interop/vectors/ and from Agent Framework's
//! own segment derivation), byte-identical list elements, reading what Python wrote, the
//! deduplication rules of `filter_new_messages`, `max_messages`, TTL, listing, and a layout
//! that never gains a key besides the list.
//!
//! Every test uses key prefixes of its own and deletes its keys at the end.

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::time::Duration;

use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, MAX_READ_PAGE, MessageId, PageRequest, Part, Scope,
    ScopeFilter, TenantId, Window, default_token_counter,
};
use memory_interop::agent_framework::{
    AfIdentity, AfOptions, from_agent_framework, to_agent_framework,
};
use memory_interop::python_json::dumps;
use memory_redis::redis::AsyncCommands;
use memory_redis::redis::aio::MultiplexedConnection;
use memory_redis::{AfKeyFormat, AfRedisHistory, AfRedisHistoryBuilder};
use serde_json::Value;

/// A user message with an empty `message_id`, as Python writes it.
const EMPTY_ID: &str = r#"{"type": "message", "role": "user", "contents": [{"type": "text", "text": "yes", "additional_properties": {}}], "message_id": "", "additional_properties": {}}"#;

const VECTOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/interop/vectors/agent_framework_redis_keys.json"
);

/// Test data that a failed test leaves behind expires by itself.
const LEFTOVER_TTL: Duration = Duration::from_secs(2 * 3600);

fn url() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix of this test alone: literal-safe (lowercase, digits, `-`).
fn unique_prefix() -> String {
    format!(
        "amtest-af-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

async fn raw() -> MultiplexedConnection {
    let client = memory_redis::redis::Client::open(url()).unwrap();
    client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("the Redis at {} is needed by these tests: {e}", url()))
}

/// Every key that starts with `prefix`.
async fn keys_under(conn: &mut MultiplexedConnection, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = memory_redis::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        found.extend(keys);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

/// Deletes every key under `prefix`.
async fn cleanup(prefix: &str) {
    let mut conn = raw().await;
    for key in keys_under(&mut conn, prefix).await {
        let _: i64 = conn.del(&key).await.unwrap();
    }
}

async fn lrange(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    conn.lrange(key, 0, -1).await.unwrap()
}

fn builder(format: AfKeyFormat) -> AfRedisHistoryBuilder {
    AfRedisHistory::builder(&url(), format)
}

async fn connect(format: AfKeyFormat) -> AfRedisHistory {
    builder(format)
        .default_ttl(LEFTOVER_TTL)
        .connect()
        .await
        .unwrap()
}

/// The format most tests use: application `app` under the test's own key prefix.
fn app(prefix: &str) -> AfKeyFormat {
    AfKeyFormat::scoped("app").with_key_prefix(prefix)
}

/// A key prefix of the test's own and a store in `app(prefix)` (data expire after
/// `LEFTOVER_TTL`).
async fn app_store() -> (String, AfRedisHistory) {
    let prefix = unique_prefix();
    let store = connect(app(&prefix)).await;
    (prefix, store)
}

/// A store in `app(prefix)` over a `RedisStore` of its own, whose round trips a test counts.
async fn counted_store(prefix: &str) -> (memory_redis::RedisStore, AfRedisHistory) {
    let shared = memory_redis::RedisStore::connect(&url()).await.unwrap();
    let store = shared
        .agent_framework(app(prefix))
        .default_ttl(LEFTOVER_TTL)
        .connect()
        .await
        .unwrap();
    (shared, store)
}

/// A store in `app(prefix)` that keeps the last three messages.
async fn bounded_store(prefix: &str) -> AfRedisHistory {
    builder(app(prefix))
        .max_messages(3)
        .default_ttl(LEFTOVER_TTL)
        .connect()
        .await
        .unwrap()
}

/// Redis's `TYPE` of `key`.
async fn key_type(conn: &mut MultiplexedConnection, key: &str) -> String {
    memory_redis::redis::cmd("TYPE")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

fn vector() -> Vec<Value> {
    let text = std::fs::read_to_string(VECTOR).unwrap();
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The key format of a sample's `provider_args`, with `key_prefix` replaced when given.
fn format_of(args: &Value, key_prefix: Option<&str>) -> AfKeyFormat {
    let text = |name: &str| args[name].as_str().map(str::to_owned);
    let prefix = key_prefix
        .map(str::to_owned)
        .or_else(|| text("key_prefix"))
        .unwrap();
    let format = match args["key_format"].as_str().unwrap() {
        "legacy" => AfKeyFormat::legacy(),
        "scoped" => {
            let mut format = AfKeyFormat::scoped(text("application_id").unwrap())
                .with_source(text("source_id").unwrap());
            if let Some(tenant) = text("tenant_id") {
                format = format.with_tenant(tenant);
            }
            if let Some(agent) = text("agent_id") {
                format = format.with_agent(agent);
            }
            format
        }
        other => panic!("unknown key format {other}"),
    };
    format.with_key_prefix(prefix)
}

fn elements_of(sample: &Value) -> Vec<String> {
    sample["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect()
}

fn read_element(element: &str) -> ChatMessage {
    from_agent_framework(&serde_json::from_str(element).unwrap()).unwrap()
}

/// The list element we write for `message`.
fn element_of(message: &ChatMessage) -> String {
    dumps(&to_agent_framework(message, &AfOptions::default()))
}

/// Agent Framework 1.23's `get_message_identity` of an element, and whether it is an id-less
/// user message: `("id", str(message_id))` when `message_id` is not null (even `""`), else
/// `("content", role, json.dumps(contents, sort_keys=True, ensure_ascii=False))`.
fn identity_of(element: &str) -> (String, bool) {
    let value: Value = serde_json::from_str(element).unwrap();
    match value.get("message_id") {
        Some(Value::String(id)) => (format!("id:{id}"), false),
        Some(Value::Null) | None => {
            let identity = AfIdentity::of(&value);
            (identity.to_string(), identity.is_id_less_user())
        }
        Some(other) => (format!("id:{other}"), false),
    }
}

/// Agent Framework 1.23's `filter_new_messages` (agent_framework/_sessions.py), transcribed:
/// how many leading messages of `incoming` it drops.
fn filter_skip(existing: &[(String, bool)], incoming: &[(String, bool)]) -> usize {
    let (n, m) = (existing.len(), incoming.len());
    if n == 0 {
        return 0;
    }
    let single_user = n == 1 && existing[0].1;
    if n <= m {
        for i in 0..=m - n {
            if incoming[i..i + n] == *existing {
                if i == 0 && single_user {
                    break;
                }
                return i + n;
            }
        }
    }
    for overlap in (1..=n.min(m)).rev() {
        if existing[n - overlap..] != incoming[..overlap] {
            continue;
        }
        if overlap == 1 && existing[n - 1].1 {
            continue;
        }
        return overlap;
    }
    0
}

fn session(name: &str) -> Scope {
    Scope::session(name).unwrap()
}

fn with_id(id: &str, text: &str) -> ChatMessage {
    ChatMessage::user(text).with_id(MessageId::new(id).unwrap())
}

/// An id-less message as Python writes it (read back with a content-derived id).
fn id_less(role: &str, text: &str) -> ChatMessage {
    read_element(&format!(
        r#"{{"type": "message", "role": "{role}", "contents": [{{"type": "text", "text": "{text}", "additional_properties": {{}}}}], "additional_properties": {{}}}}"#
    ))
}

fn seqs(messages: &[memory_core::StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// The seqs that a read of `window` returns.
async fn read_seqs(store: &AfRedisHistory, scope: &Scope, window: Window) -> Vec<u64> {
    seqs(&store.read(scope, window).await.unwrap())
}

/// `n` messages with the ids `m0`, `m1`, … and the text `w`.
fn numbered(n: usize) -> Vec<ChatMessage> {
    (0..n).map(|i| with_id(&format!("m{i}"), "w")).collect()
}

#[test]
fn golden_keys_of_the_samples() {
    for sample in vector() {
        let args = &sample["provider_args"];
        let format = format_of(args, None);
        let session = args["session_id"].as_str().unwrap();
        assert_eq!(
            format.key(session).unwrap(),
            sample["key"].as_str().unwrap()
        );
        assert_eq!(
            format
                .session_of(sample["key"].as_str().unwrap())
                .as_deref(),
            Some(session)
        );
    }
}

/// Expected keys computed with Agent Framework's `_storage_key_segment` (agent_framework/_filesystem.py)
/// for every branch: verbatim, base32 (device names, a leading `.`, a trailing space or `.`,
/// uppercase, non-ASCII, control characters, the `~none` marker itself), the 180-character
/// boundary and the SHA-256 digest.
#[test]
fn every_segment_encoding_branch() {
    #[allow(clippy::type_complexity)]
    let rows: [(&str, Option<&str>, &str, Option<&str>, &str, String, &str); 10] = [
        (
            "chat_messages",
            None,
            "demo-app",
            Some("demo-agent"),
            "redis_memory",
            "con.txt".into(),
            "chat_messages|v2|~none|demo-app|demo-agent|redis_memory|~redis-session-mnxw4ltupb2a",
        ),
        (
            "Chat Messages",
            Some("Tenant A"),
            "App",
            Some("Agent/1"),
            "My Source",
            ".hidden".into(),
            "~redis-key-prefix-inugc5bajvsxg43bm5sxg|v2|~redis-tenant-krsw4ylooqqec|~redis-application-ifyha|~redis-agent-iftwk3tuf4yq|~redis-source-jv4sau3povzggzi|~redis-session-fzugszdemvxa",
        ),
        (
            "chat_messages",
            Some("aux"),
            "lpt1.txt",
            Some("com9"),
            "prn",
            "trailing ".into(),
            "chat_messages|v2|~redis-tenant-mf2xq|~redis-application-nryhimjoor4hi|~redis-agent-mnxw2oi|~redis-source-obzg4|~redis-session-orzgc2lmnfxgoia",
        ),
        (
            "chat_messages",
            None,
            "naïve",
            None,
            "redis_memory",
            "日本語 🎉".into(),
            "chat_messages|v2|~none|~redis-application-nzq4hl3wmu|~none|redis_memory|~redis-session-42l2lzu4vtukvhra6cpy5ci",
        ),
        (
            "chat_messages",
            None,
            "demo-app",
            None,
            "redis_memory",
            "A".repeat(103),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|~redis-session-ifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifaucqkbifauc",
        ),
        (
            "chat_messages",
            None,
            "demo-app",
            None,
            "redis_memory",
            "A".repeat(104),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|~redis-session-sha256-7f9578a31905e95a16cc9d3e7b57dc3158a23dccf359a1f2cf09e73eb13e5cde",
        ),
        (
            "chat_messages",
            None,
            "demo-app",
            None,
            "redis_memory",
            "Z".repeat(200),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|~redis-session-sha256-d64527abf8bbf8d23129cd790bba661f5cfa61b4a5661b30da2e821653575abb",
        ),
        (
            "chat_messages",
            None,
            "demo-app",
            None,
            "redis_memory",
            "tab\there".into(),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|~redis-session-orqweclimvzgk",
        ),
        (
            "",
            None,
            "demo-app",
            None,
            "",
            "~none".into(),
            "~redis-key-prefix-|v2|~none|demo-app|~none|~redis-source-|~redis-session-pzxg63tf",
        ),
        (
            "chat_messages",
            None,
            "demo-app",
            None,
            "redis_memory",
            "com0".into(),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|com0",
        ),
    ];
    for (prefix, tenant, application, agent, source, session, expected) in rows {
        let mut format = AfKeyFormat::scoped(application)
            .with_key_prefix(prefix)
            .with_source(source);
        if let Some(tenant) = tenant {
            format = format.with_tenant(tenant);
        }
        if let Some(agent) = agent {
            format = format.with_agent(agent);
        }
        assert_eq!(format.key(&session).unwrap(), expected, "{session:?}");
        let back = format.session_of(expected);
        if expected.contains("sha256-") {
            assert_eq!(back, None);
        } else {
            assert_eq!(back.as_deref(), Some(session.as_str()));
        }
    }
    // A literal-safe value stays verbatim whatever its length.
    let long = "x".repeat(200);
    assert_eq!(
        AfKeyFormat::scoped("demo-app").key(&long).unwrap(),
        format!("chat_messages|v2|~none|demo-app|~none|redis_memory|{long}")
    );
    for (segment, expected) in [
        ("CON", "~redis-session-inhu4"),
        ("com1", "~redis-session-mnxw2mi"),
        ("lpt9.log", "~redis-session-nryhiojonrxwo"),
        ("nul", "~redis-session-nz2wy"),
        ("trailing.", "~redis-session-orzgc2lmnfxgolq"),
        ("con.", "~redis-session-mnxw4lq"),
        ("Upper", "~redis-session-kvyhazls"),
        ("com¹", "~redis-session-mnxw3qvz"),
        ("a b", "~redis-session-meqge"),
        ("user-1_a.b", "user-1_a.b"),
        ("", "~redis-session-"),
    ] {
        assert_eq!(
            AfKeyFormat::storage_key_segment(segment, "~redis-session-"),
            expected
        );
    }
    // Legacy keys: verbatim, `default` for an empty session.
    let legacy = AfKeyFormat::legacy();
    assert_eq!(legacy.key("session-1").unwrap(), "chat_messages:session-1");
    assert_eq!(legacy.key("").unwrap(), "chat_messages:default");
    assert_eq!(
        legacy
            .clone()
            .with_key_prefix("My Prefix")
            .key("User 42")
            .unwrap(),
        "My Prefix:User 42"
    );
    assert_eq!(
        legacy.session_of("chat_messages:a:b").as_deref(),
        Some("a:b")
    );
    // Agent Framework's constructor checks.
    assert_eq!(
        AfKeyFormat::scoped("").key("s").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        AfKeyFormat::scoped("a").key("").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let empty_tenant = AfKeyFormat::scoped("a").with_tenant("");
    assert_eq!(
        empty_tenant.key("s").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let empty_agent = AfKeyFormat::scoped("a").with_agent("");
    assert_eq!(
        empty_agent.validate().unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[tokio::test]
async fn writes_the_samples_byte_for_byte() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    for sample in vector() {
        let args = &sample["provider_args"];
        let format = format_of(args, Some(&prefix));
        let store = connect(format).await;
        let session_id = args["session_id"].as_str().unwrap();
        let scope = session(session_id);
        let key = store.key_for(&scope).unwrap();
        let expected_key = sample["key"]
            .as_str()
            .unwrap()
            .replacen("chat_messages", &prefix, 1);
        assert_eq!(key, expected_key);

        let elements = elements_of(&sample);
        let messages: Vec<ChatMessage> = elements.iter().map(|e| read_element(e)).collect();
        let outcome = store.append(&scope, &messages).await.unwrap();
        assert_eq!(outcome.inserted, messages.len());
        assert_eq!(
            outcome.seqs,
            (1..=messages.len() as u64).collect::<Vec<_>>()
        );
        assert_eq!(lrange(&mut conn, &key).await, elements, "{key}");
        assert_eq!(key_type(&mut conn, &key).await, "list");

        let again = store.append(&scope, &messages).await.unwrap();
        if messages.len() > 1 {
            // A retry changes nothing.
            assert_eq!(again.inserted, 0);
            assert_eq!(again.seqs, outcome.seqs);
            assert_eq!(lrange(&mut conn, &key).await, elements);
        } else {
            // Agent Framework's rule: one id-less user message again is a new turn.
            assert_eq!((again.inserted, again.seqs), (1, vec![2]));
            assert_eq!(
                lrange(&mut conn, &key).await,
                [elements[0].as_str(), elements[0].as_str()]
            );
        }
    }
    cleanup(&prefix).await;
}

#[tokio::test]
async fn reads_what_python_wrote() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    let sample = &vector()[0];
    let store = connect(format_of(&sample["provider_args"], Some(&prefix))).await;
    let scope = session("session-1");
    let key = store.key_for(&scope).unwrap();
    let elements = elements_of(sample);
    // As Python's save does: one RPUSH per message in a transaction.
    for element in &elements {
        let _: i64 = conn.rpush(&key, element).await.unwrap();
    }
    let expected: Vec<ChatMessage> = elements.iter().map(|e| read_element(e)).collect();

    let all = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(seqs(&all), [1, 2, 3, 4]);
    let read: Vec<ChatMessage> = all.iter().map(|m| (*m.message).clone()).collect();
    assert_eq!(read, expected);
    assert!(all.iter().all(|m| !m.archived && m.tokens > 0));
    assert!(matches!(&read[1].parts[0], Part::ToolCall { name, .. } if name == "get_calendar"));
    assert!(matches!(&read[2].parts[0], Part::ToolResult { call_id, .. } if call_id == "call_1"));
    assert_eq!(read[3].author_name.as_deref(), Some("planner"));
    assert_eq!(read[3].id.as_str(), "msg_0002");
    assert_eq!(store.read(&scope, Window::Everything).await.unwrap(), all);

    for (window, expected) in [
        (Window::Last(2), &[3, 4][..]),
        (Window::Last(10), &[1, 2, 3, 4]),
        (Window::Last(0), &[]),
        (Window::After(3), &[4]),
        (Window::After(4), &[]),
    ] {
        assert_eq!(
            read_seqs(&store, &scope, window).await,
            expected,
            "{window:?}"
        );
    }

    let counter = default_token_counter();
    let tokens: Vec<u64> = expected
        .iter()
        .map(|m| u64::from(counter.count_message(m)))
        .collect();
    assert_eq!(
        all.iter().map(|m| u64::from(m.tokens)).collect::<Vec<_>>(),
        tokens
    );
    let budget = tokens[2] + tokens[3];
    for (budget, expected) in [
        (budget, &[3, 4][..]),
        (budget - 1, &[4]),
        (u64::MAX, &[1, 2, 3, 4]),
        (0, &[]),
    ] {
        let window = Window::TokenBudget(budget);
        assert_eq!(
            read_seqs(&store, &scope, window).await,
            expected,
            "{window:?}"
        );
    }

    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.active, count.archived, count.last_seq), (4, 0, 4));
    assert_eq!(count.active_tokens, tokens.iter().sum::<u64>());

    // A Rust agent replays the transcript it read plus its answer: only the answer is new, and
    // Python's elements stay as they were.
    let mut replay = read.clone();
    replay.push(ChatMessage::user("And the day after?"));
    let outcome = store.append(&scope, &replay).await.unwrap();
    assert_eq!(outcome.inserted, 1);
    assert_eq!(outcome.seqs, [1, 2, 3, 4, 5]);
    let stored = lrange(&mut conn, &key).await;
    assert_eq!(stored[..4], elements[..]);
    assert_eq!(stored[4], element_of(&replay[4]));
    assert_eq!(
        *store.read(&scope, Window::Last(1)).await.unwrap()[0].message,
        replay[4]
    );
    cleanup(&prefix).await;
}

#[tokio::test]
async fn a_budget_read_spans_several_chunks() {
    let (prefix, store) = app_store().await;
    let scope = session("long");
    let messages: Vec<ChatMessage> = (0..300)
        .map(|i| with_id(&format!("m{i}"), "word"))
        .collect();
    store.append(&scope, &messages).await.unwrap();
    let each = u64::from(default_token_counter().count_message(&messages[0]));
    let window = store
        .read(&scope, Window::TokenBudget(each * 250))
        .await
        .unwrap();
    assert_eq!(seqs(&window), (51..=300).collect::<Vec<_>>());
    assert_eq!(window[0].message.id.as_str(), "m50");
    cleanup(&prefix).await;
}

/// A token counter that plays another writer: on its first message, it appends one element
/// and trims the front, as a Python provider at `max_messages` does, between the chunks of a
/// budgeted read.
#[derive(Debug)]
struct InterferingCounter {
    key: String,
    fired: std::sync::atomic::AtomicBool,
}

impl InterferingCounter {
    /// A store in `format` whose token counter interferes with the list at `key`.
    async fn reader(format: AfKeyFormat, key: String) -> AfRedisHistory {
        let counter = Self {
            key,
            fired: false.into(),
        };
        builder(format)
            .token_counter(std::sync::Arc::new(counter))
            .connect()
            .await
            .unwrap()
    }
}

impl memory_core::TokenCounter for InterferingCounter {
    fn count_text(&self, _text: &str) -> u32 {
        1
    }

    fn count_message(&self, _message: &ChatMessage) -> u32 {
        if !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let client = memory_redis::redis::Client::open(url()).unwrap();
            let mut conn = client.get_connection().unwrap();
            let _: i64 = memory_redis::redis::cmd("RPUSH")
                .arg(&self.key)
                .arg(element_of(&with_id("intruder", "x")))
                .query(&mut conn)
                .unwrap();
            let _: () = memory_redis::redis::cmd("LTRIM")
                .arg(&self.key)
                .arg(1)
                .arg(-1)
                .query(&mut conn)
                .unwrap();
        }
        1
    }
}

#[tokio::test]
async fn a_budget_read_stops_when_the_list_shifts_under_it() {
    let prefix = unique_prefix();
    let format = app(&prefix);
    let writer = connect(format.clone()).await;
    let scope = session("shifting");
    let key = writer.key_for(&scope).unwrap();
    let messages = numbered(100);
    writer.append(&scope, &messages).await.unwrap();
    let reader = InterferingCounter::reader(format, key).await;
    // The length stays 100, but every position moved by one after the first chunk: the read
    // returns that first chunk only, never a duplicated or skipped message.
    let window = reader
        .read(&scope, Window::TokenBudget(1000))
        .await
        .unwrap();
    assert_eq!(seqs(&window), (69..=100).collect::<Vec<_>>());
    let ids: Vec<&str> = window.iter().map(|m| m.message.id.as_str()).collect();
    let expected: Vec<String> = (68..100).map(|i| format!("m{i}")).collect();
    assert_eq!(ids, expected);
    cleanup(&prefix).await;
}

/// H4: a long list is read in pages of at most `MAX_READ_PAGE` elements, each its own short
/// script call, never in one step that blocks the server; the pages join without a gap or a
/// repeat.
#[tokio::test]
async fn a_long_list_is_read_in_pages() {
    let prefix = unique_prefix();
    let (shared, store) = counted_store(&prefix).await;
    let scope = session("long");
    let n = 2 * MAX_READ_PAGE + 10;
    let messages = numbered(n);
    store.append(&scope, &messages).await.unwrap();
    store.read(&scope, Window::Last(1)).await.unwrap();
    for (window, expected) in [
        (Window::All, 1..=n as u64),
        (Window::Everything, 1..=n as u64),
        (Window::After(5), 6..=n as u64),
        (
            Window::Last(MAX_READ_PAGE + 3),
            (n - MAX_READ_PAGE - 2) as u64..=n as u64,
        ),
        (Window::Last(usize::MAX), 1..=n as u64),
    ] {
        let before = shared.round_trips();
        let read = store.read(&scope, window).await.unwrap();
        let calls = shared.round_trips() - before;
        assert_eq!(seqs(&read), expected.collect::<Vec<_>>(), "{window:?}");
        assert!(
            read.iter()
                .all(|m| m.message.id.as_str() == format!("m{}", m.seq - 1)),
            "{window:?}"
        );
        let pages = read.len().div_ceil(MAX_READ_PAGE) as u64;
        assert!(
            calls >= pages,
            "{window:?}: {} elements in {calls} script calls, not one per page of \
             {MAX_READ_PAGE}",
            read.len()
        );
    }
    cleanup(&prefix).await;
}

/// A paged read that finds the list shifted between two pages (trimmed at the front) starts
/// over, so it never returns a duplicated or skipped element.
#[tokio::test]
async fn a_paged_read_starts_over_when_the_list_shifts() {
    let prefix = unique_prefix();
    let format = app(&prefix);
    let writer = connect(format.clone()).await;
    let scope = session("shifting-pages");
    let key = writer.key_for(&scope).unwrap();
    let n = MAX_READ_PAGE + 50;
    let messages = numbered(n);
    writer.append(&scope, &messages).await.unwrap();
    let reader = InterferingCounter::reader(format, key).await;
    // After the first page, another writer pushes one element and trims the first.
    let all = reader.read(&scope, Window::All).await.unwrap();
    assert_eq!(seqs(&all), (1..=n as u64).collect::<Vec<_>>());
    let ids: Vec<&str> = all.iter().map(|m| m.message.id.as_str()).collect();
    let expected: Vec<String> = (1..n)
        .map(|i| format!("m{i}"))
        .chain(["intruder".to_owned()])
        .collect();
    assert_eq!(
        ids, expected,
        "the list as it is after the shift, read again"
    );
    cleanup(&prefix).await;
}

#[tokio::test]
async fn a_retried_append_is_a_no_op() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;
    let scope = session("retry");
    let key = store.key_for(&scope).unwrap();
    let batch = [with_id("a", "A"), with_id("b", "B"), with_id("c", "C")];
    let first = store.append(&scope, &batch).await.unwrap();
    assert_eq!((first.inserted, first.seqs.clone()), (3, vec![1, 2, 3]));
    let retry = store.append(&scope, &batch).await.unwrap();
    assert_eq!((retry.inserted, retry.seqs), (0, vec![1, 2, 3]));
    // An overlapping batch: only what follows the overlap (`d`) is new; its retry adds nothing.
    for inserted in [1, 0] {
        let next = store
            .append(&scope, &[with_id("c", "C"), with_id("d", "D")])
            .await
            .unwrap();
        assert_eq!((next.inserted, next.seqs), (inserted, vec![3, 4]));
        assert_eq!(lrange(&mut conn, &key).await.len(), 4);
    }
    cleanup(&prefix).await;
}

#[tokio::test]
async fn windows_past_the_end_are_empty() {
    let (prefix, store) = app_store().await;
    let scope = session("past-the-end");
    store
        .append(&scope, &[with_id("a", "A"), with_id("b", "B")])
        .await
        .unwrap();
    for seq in [2, 3, i64::MAX as u64, u64::MAX] {
        let read = store.read(&scope, Window::After(seq)).await.unwrap();
        assert!(read.is_empty(), "After({seq})");
    }
    let after = store.read(&scope, Window::After(1)).await.unwrap();
    assert_eq!(seqs(&after), vec![2]);
    let last = store.read(&scope, Window::Last(usize::MAX)).await.unwrap();
    assert_eq!(seqs(&last), vec![1, 2]);
    cleanup(&prefix).await;
}

#[tokio::test]
async fn a_replayed_transcript_appends_only_the_new_tail() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;
    // With ids.
    let scope = session("replay");
    let key = store.key_for(&scope).unwrap();
    let all: Vec<ChatMessage> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| with_id(id, id))
        .collect();
    store.append(&scope, &all[..3]).await.unwrap();
    let outcome = store.append(&scope, &all).await.unwrap();
    assert_eq!((outcome.inserted, outcome.seqs), (2, vec![1, 2, 3, 4, 5]));
    let expected: Vec<String> = all.iter().map(element_of).collect();
    assert_eq!(lrange(&mut conn, &key).await, expected);

    // Without ids (as Python writes user messages and tool results): identity by content.
    let scope = session("replay-id-less");
    let key = store.key_for(&scope).unwrap();
    let elements = elements_of(&vector()[0]);
    let mut transcript: Vec<ChatMessage> = elements.iter().map(|e| read_element(e)).collect();
    store.append(&scope, &transcript[..2]).await.unwrap();
    store.append(&scope, &transcript).await.unwrap();
    assert_eq!(lrange(&mut conn, &key).await, elements);
    transcript.push(id_less("user", "Thanks"));
    transcript.push(id_less("assistant", "You are welcome."));
    let outcome = store.append(&scope, &transcript).await.unwrap();
    assert_eq!(
        (outcome.inserted, outcome.seqs),
        (2, vec![1, 2, 3, 4, 5, 6])
    );
    assert_eq!(lrange(&mut conn, &key).await.len(), 6);
    // A replay whose head was trimmed away: the head is not in the list (seq 0).
    let _: () = conn.ltrim(&key, 2, -1).await.unwrap();
    transcript.push(id_less("user", "Bye"));
    let outcome = store.append(&scope, &transcript).await.unwrap();
    assert_eq!(
        (outcome.inserted, outcome.seqs),
        (1, vec![0, 0, 1, 2, 3, 4, 5])
    );
    cleanup(&prefix).await;
}

#[tokio::test]
async fn repeated_id_less_user_turns_are_kept() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;

    // The same question twice in a row, each its own turn: an overlap of a single id-less user
    // message is not a duplicate.
    let scope = session("yes-twice");
    let key = store.key_for(&scope).unwrap();
    let yes = id_less("user", "yes");
    assert_eq!(
        store
            .append(&scope, std::slice::from_ref(&yes))
            .await
            .unwrap()
            .inserted,
        1
    );
    let second = store
        .append(&scope, std::slice::from_ref(&yes))
        .await
        .unwrap();
    assert_eq!((second.inserted, second.seqs), (1, vec![2]));
    let stored = lrange(&mut conn, &key).await;
    assert_eq!(stored, [element_of(&yes), element_of(&yes)]);
    let read = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(seqs(&read), [1, 2]);
    // The first keeps its content-derived id, the repeat has one of its own.
    assert_eq!(read[0].message.id, yes.id);
    assert_ne!(read[0].message.id, read[1].message.id);

    // Agent Framework's test: [yes, first reply] then [yes, second reply] keeps all four.
    let scope = session("yes-turns");
    let key = store.key_for(&scope).unwrap();
    store
        .append(&scope, &[yes.clone(), id_less("assistant", "first reply")])
        .await
        .unwrap();
    let outcome = store
        .append(&scope, &[yes.clone(), id_less("assistant", "second reply")])
        .await
        .unwrap();
    assert_eq!(outcome.inserted, 2);
    assert_eq!(lrange(&mut conn, &key).await.len(), 4);

    // But a list of that one message, found inside a replay after other messages, is the
    // replayed transcript (Agent Framework 1.23's rule): only what follows it is new.
    let scope = session("yes-replayed");
    let key = store.key_for(&scope).unwrap();
    store
        .append(&scope, std::slice::from_ref(&yes))
        .await
        .unwrap();
    let outcome = store
        .append(
            &scope,
            &[
                id_less("system", "Be brief."),
                yes.clone(),
                id_less("assistant", "ok"),
            ],
        )
        .await
        .unwrap();
    assert_eq!((outcome.inserted, outcome.seqs), (1, vec![0, 1, 2]));
    assert_eq!(lrange(&mut conn, &key).await.len(), 2);

    // With an id, the same message is a duplicate.
    let scope = session("identified");
    let key = store.key_for(&scope).unwrap();
    let turn = with_id("turn-1", "yes");
    store
        .append(&scope, std::slice::from_ref(&turn))
        .await
        .unwrap();
    assert_eq!(store.append(&scope, &[turn]).await.unwrap().inserted, 0);
    assert_eq!(lrange(&mut conn, &key).await.len(), 1);
    cleanup(&prefix).await;
}

/// A list where Python's user says "ok" three times (no `message_id`) reads with one id per
/// message in every window (each read that starts past the first element counts the equal
/// messages before it), the first keeping the id earlier versions gave it; appended to
/// another list, the messages read back with the same ids, the first still without
/// `message_id`.
#[tokio::test]
async fn repeated_id_less_messages_read_with_their_own_ids_in_every_window() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;
    let scope = session("ok-thrice");
    let key = store.key_for(&scope).unwrap();
    let (ok, sure) = (id_less("user", "ok"), id_less("assistant", "Sure."));
    let elements: Vec<String> = [&ok, &sure, &ok, &sure, &ok]
        .iter()
        .map(|m| element_of(m))
        .collect();
    let _: i64 = conn.rpush(&key, &elements).await.unwrap();
    let _: bool = conn
        .expire(&key, LEFTOVER_TTL.as_secs() as i64)
        .await
        .unwrap();
    let all = store.read(&scope, Window::All).await.unwrap();
    let ids: Vec<MessageId> = all.iter().map(|m| m.message.id.clone()).collect();
    assert_eq!(ids.len(), 5);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 5, "{ids:?}");
    assert_eq!((&ids[0], &ids[1]), (&ok.id, &sure.id));
    let of = |read: Vec<memory_core::StoredMessage>| -> Vec<(u64, MessageId)> {
        read.into_iter()
            .map(|m| (m.seq, m.message.id.clone()))
            .collect()
    };
    let expected: Vec<(u64, MessageId)> = (1..).zip(ids.iter().cloned()).collect();
    assert_eq!(
        of(store.read(&scope, Window::Last(2)).await.unwrap()),
        expected[3..]
    );
    assert_eq!(
        of(store.read(&scope, Window::After(2)).await.unwrap()),
        expected[2..]
    );
    assert_eq!(
        of(store
            .read(&scope, Window::TokenBudget(1_000))
            .await
            .unwrap()),
        expected
    );
    for after in 0..5u64 {
        let page = store.read_page(&scope, after, 1).await.unwrap();
        assert_eq!(
            of(page),
            expected[after as usize..=after as usize],
            "after {after}"
        );
    }
    // Copied to another list: the same ids; the first of each content stays as Python wrote it.
    let copy = session("ok-copied");
    let messages: Vec<ChatMessage> = all.iter().map(|m| m.message.as_ref().clone()).collect();
    store.append(&copy, &messages).await.unwrap();
    let copied = store.read(&copy, Window::All).await.unwrap();
    assert_eq!(
        copied
            .iter()
            .map(|m| m.message.id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    let written = lrange(&mut conn, &store.key_for(&copy).unwrap()).await;
    assert_eq!(written[..2], elements[..2]);
    assert!(written[2].contains("\"message_id\""));
    cleanup(&prefix).await;
}

/// The script's deduplication against Agent Framework's `filter_new_messages`, on random lists
/// and batches over a small alphabet of identified and id-less messages (an empty
/// `message_id` is an id, as in Python).
#[tokio::test]
async fn the_dedupe_matches_agent_framework_rules() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;
    let alphabet = [
        with_id("x1", "one"),
        with_id("x2", "two"),
        id_less("user", "yes"),
        id_less("user", "no"),
        id_less("assistant", "ok"),
        id_less("tool", "ok"),
        read_element(EMPTY_ID),
    ];
    assert_eq!(element_of(&alphabet[6]), EMPTY_ID);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % n).unwrap()
    };
    for round in 0..300 {
        let scope = session(&format!("round-{round}"));
        let key = store.key_for(&scope).unwrap();
        let existing: Vec<String> = (0..next(6))
            .map(|_| element_of(&alphabet[next(7)]))
            .collect();
        let incoming: Vec<ChatMessage> = (0..1 + next(6))
            .map(|_| alphabet[next(7)].clone())
            .collect();
        for element in &existing {
            let _: i64 = conn.rpush(&key, element).await.unwrap();
        }
        let incoming_elements: Vec<String> = incoming.iter().map(element_of).collect();
        let skip = filter_skip(
            &existing.iter().map(|e| identity_of(e)).collect::<Vec<_>>(),
            &incoming_elements
                .iter()
                .map(|e| identity_of(e))
                .collect::<Vec<_>>(),
        );
        let outcome = store.append(&scope, &incoming).await.unwrap();
        let mut expected = existing.clone();
        expected.extend_from_slice(&incoming_elements[skip..]);
        let stored = lrange(&mut conn, &key).await;
        assert_eq!(
            stored, expected,
            "round {round}: {existing:?} + {incoming_elements:?}"
        );
        assert_eq!(outcome.inserted, incoming.len() - skip, "round {round}");
        for (i, seq) in outcome.seqs.iter().enumerate() {
            if *seq > 0 {
                let at = usize::try_from(*seq).unwrap() - 1;
                assert_eq!(
                    identity_of(&stored[at]),
                    identity_of(&incoming_elements[i]),
                    "round {round}"
                );
            } else {
                assert!(i < skip, "round {round}: a new message has no seq");
            }
        }
    }
    cleanup(&prefix).await;
}

#[tokio::test]
async fn max_messages_trims_in_the_same_step() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    let store = bounded_store(&prefix).await;
    let scope = session("bounded");
    let key = store.key_for(&scope).unwrap();
    let all: Vec<ChatMessage> = (1..=7).map(|i| with_id(&format!("m{i}"), "x")).collect();
    let outcome = store.append(&scope, &all[..5]).await.unwrap();
    assert_eq!((outcome.inserted, outcome.seqs), (5, vec![0, 0, 1, 2, 3]));
    let expected: Vec<String> = all[2..5].iter().map(element_of).collect();
    assert_eq!(lrange(&mut conn, &key).await, expected);
    let outcome = store.append(&scope, &all[5..]).await.unwrap();
    assert_eq!((outcome.inserted, outcome.seqs), (2, vec![2, 3]));
    let expected: Vec<String> = all[4..].iter().map(element_of).collect();
    assert_eq!(lrange(&mut conn, &key).await, expected);
    let count = store.count(&scope).await.unwrap();
    assert_eq!((count.active, count.archived, count.last_seq), (3, 0, 3));

    assert_eq!(
        builder(AfKeyFormat::scoped("app"))
            .max_messages(0)
            .connect()
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    cleanup(&prefix).await;
}

#[tokio::test]
async fn ttl_is_applied_and_can_be_changed() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    let format = app(&prefix);
    let store = builder(format.clone())
        .default_ttl(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let scope = session("expiring");
    let key = store.key_for(&scope).unwrap();
    store.append(&scope, &[with_id("a", "A")]).await.unwrap();
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((1..=60_000).contains(&ttl), "{ttl}");

    store.set_ttl(&scope, None).await.unwrap();
    assert_eq!(conn.pttl::<_, i64>(&key).await.unwrap(), -1);
    store
        .set_ttl(&scope, Some(Duration::from_secs(10)))
        .await
        .unwrap();
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((1..=10_000).contains(&ttl), "{ttl}");
    // An append re-applies the default TTL.
    store.append(&scope, &[with_id("b", "B")]).await.unwrap();
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((10_001..=60_000).contains(&ttl), "{ttl}");

    let missing = session("never-written");
    assert_eq!(
        store
            .set_ttl(&missing, Some(Duration::from_secs(1)))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        store.set_ttl(&missing, None).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        store
            .set_ttl(&scope, Some(Duration::ZERO))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(store.purge_expired().await.unwrap(), 0);

    // Without a default TTL, like Python: no expiry, and appends keep a TTL set by hand.
    let plain = builder(format).connect().await.unwrap();
    let scope = session("plain");
    let key = plain.key_for(&scope).unwrap();
    plain.append(&scope, &[with_id("a", "A")]).await.unwrap();
    assert_eq!(conn.pttl::<_, i64>(&key).await.unwrap(), -1);
    plain
        .set_ttl(&scope, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    plain.append(&scope, &[with_id("b", "B")]).await.unwrap();
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((1..=30_000).contains(&ttl), "{ttl}");
    cleanup(&prefix).await;
}

#[tokio::test]
async fn the_compatible_layout_gains_no_keys() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    let format = AfKeyFormat::scoped("demo-app")
        .with_agent("demo-agent")
        .with_key_prefix(&prefix);
    let store = builder(format.clone()).connect().await.unwrap();
    let scope = session("session-1");
    let key = store.key_for(&scope).unwrap();
    store
        .append(
            &scope,
            &[ChatMessage::user("hi"), ChatMessage::assistant("hello")],
        )
        .await
        .unwrap();
    store.read(&scope, Window::All).await.unwrap();
    store.read(&scope, Window::TokenBudget(1000)).await.unwrap();
    store.count(&scope).await.unwrap();
    store.set_ttl(&scope, Some(LEFTOVER_TTL)).await.unwrap();
    // Another store (another process) appends to the same thread.
    let other = builder(format).connect().await.unwrap();
    let mut transcript: Vec<ChatMessage> = other
        .read(&scope, Window::All)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.into_message())
        .collect();
    transcript.push(ChatMessage::user("more"));
    assert_eq!(other.append(&scope, &transcript).await.unwrap().inserted, 1);
    other
        .list_threads(
            &ScopeFilter::tenant(TenantId::new("default").unwrap()),
            PageRequest::first(10),
        )
        .await
        .unwrap();

    assert_eq!(
        keys_under(&mut conn, &prefix).await,
        BTreeSet::from([key.clone()])
    );
    assert_eq!(key_type(&mut conn, &key).await, "list");
    assert_eq!(lrange(&mut conn, &key).await.len(), 3);
    assert_eq!(store.clear(&scope).await.unwrap(), 3);
    assert!(keys_under(&mut conn, &prefix).await.is_empty());
    assert!(store.read(&scope, Window::All).await.unwrap().is_empty());
    assert_eq!(store.count(&scope).await.unwrap().active, 0);
    assert_eq!(store.clear(&scope).await.unwrap(), 0);
}

#[tokio::test]
async fn list_threads_maps_keys_back() {
    let prefix = unique_prefix();
    let mut conn = raw().await;
    let template = Scope::session("ignored")
        .unwrap()
        .with_tenant("acme")
        .unwrap()
        .with_user("u-1")
        .unwrap();
    let store = builder(
        AfKeyFormat::scoped("Demo App")
            .with_tenant("tenant-1")
            .with_key_prefix(&prefix),
    )
    .scope_template(&template)
    .default_ttl(LEFTOVER_TTL)
    .connect()
    .await
    .unwrap();
    let in_template = |name: &str| {
        Scope::session(name)
            .unwrap()
            .with_tenant("acme")
            .unwrap()
            .with_user("u-1")
            .unwrap()
    };
    let long = "A".repeat(104); // its key segment is a digest
    for name in ["s-1", "User:42/chat", long.as_str()] {
        store
            .append(&in_template(name), &[with_id("m", "x")])
            .await
            .unwrap();
    }
    // A session id Python may use and we cannot (a space), and a key of another type.
    let python_key = AfKeyFormat::scoped("Demo App")
        .with_tenant("tenant-1")
        .with_key_prefix(&prefix)
        .key("User 42")
        .unwrap();
    let _: i64 = conn
        .rpush(&python_key, element_of(&with_id("m", "x")))
        .await
        .unwrap();
    let string_key = store.key_for(&in_template("a-string")).unwrap();
    let _: () = conn.set(&string_key, "x").await.unwrap();

    let filter = ScopeFilter::tenant(TenantId::new("acme").unwrap());
    let page = store
        .list_threads(&filter, PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(
        page.items,
        [in_template("User:42/chat"), in_template("s-1")]
    );
    assert_eq!(page.next_cursor, None);
    let first = store
        .list_threads(&filter, PageRequest::first(1))
        .await
        .unwrap();
    assert_eq!(first.items, [in_template("User:42/chat")]);
    let cursor = first.next_cursor.unwrap();
    let second = store
        .list_threads(&filter, PageRequest::after(1, cursor))
        .await
        .unwrap();
    assert_eq!(
        (second.items, second.next_cursor),
        (vec![in_template("s-1")], None)
    );
    let other_tenant = ScopeFilter::tenant(TenantId::new("default").unwrap());
    assert!(
        store
            .list_threads(&other_tenant, PageRequest::first(10))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // The digest session is still readable by its id.
    assert_eq!(
        store
            .read(&in_template(&long), Window::All)
            .await
            .unwrap()
            .len(),
        1
    );

    // Legacy keys.
    let legacy = builder(AfKeyFormat::legacy().with_key_prefix(format!("{prefix}-legacy")))
        .default_ttl(LEFTOVER_TTL)
        .connect()
        .await
        .unwrap();
    legacy
        .append(&session("session-1"), &[with_id("m", "x")])
        .await
        .unwrap();
    assert_eq!(
        legacy.key_for(&session("session-1")).unwrap(),
        format!("{prefix}-legacy:session-1")
    );
    let page = legacy
        .list_threads(&other_tenant, PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(page.items, [session("session-1")]);
    cleanup(&prefix).await;
}

#[tokio::test]
async fn other_scopes_and_operations_are_refused() {
    let (prefix, store) = app_store().await;
    let scope = session("s");
    for other in [
        scope.clone().with_user("u").unwrap(),
        scope.clone().with_agent("a").unwrap(),
        scope.clone().with_tenant("t").unwrap(),
        scope.clone().with_source("memory").unwrap(),
    ] {
        let err = store
            .append(&other, &[with_id("m", "x")])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{other}");
        assert_eq!(
            store.read(&other, Window::All).await.unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
    store.append(&scope, &[with_id("m", "x")]).await.unwrap();
    assert_eq!(
        store.archive(&scope, 1..=1).await.unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    // No epoch in the layout (Python would never change one): no cursor reads.
    assert_eq!(
        store
            .read_since(&scope, Window::All, None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
    let capabilities = store.capabilities();
    assert!(capabilities.ttl && capabilities.multi_process);
    assert!(
        !capabilities.dedupes_ids
            && !capabilities.counts_purged
            && !capabilities.lists_every_thread
            && !capabilities.cursor_reads
    );
    assert_eq!(store.append(&scope, &[]).await.unwrap().inserted, 0);
    store.ping().await.unwrap();
    cleanup(&prefix).await;
}

#[tokio::test]
async fn corrupt_elements_are_skipped_by_reads() {
    let (prefix, store) = app_store().await;
    let mut conn = raw().await;
    let scope = session("corrupt");
    let key = store.key_for(&scope).unwrap();
    let _: i64 = conn.rpush(&key, "not json").await.unwrap();
    // Reads leave an undecodable element out (with a warning) instead of failing (D8).
    assert!(store.read(&scope, Window::All).await.unwrap().is_empty());
    // An append, which deduplicates against the tail, refuses a tail it cannot read.
    let err = store
        .append(&scope, &[with_id("m", "x")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization, "{err}");
    assert!(err.to_string().contains("not a JSON object"), "{err}");
    assert_eq!(lrange(&mut conn, &key).await, ["not json"]);
    // JSON that is not a message.
    let _: i64 = conn.rpush(&key, r#"{"role": 1}"#).await.unwrap();
    for window in [Window::Last(1), Window::TokenBudget(u64::MAX)] {
        assert!(
            read_seqs(&store, &scope, window).await.is_empty(),
            "{window:?}"
        );
    }
    assert_eq!(store.count(&scope).await.unwrap().active, 2);
    cleanup(&prefix).await;
}

#[tokio::test]
async fn unreachable_servers_fail_fast() {
    let started = std::time::Instant::now();
    let err = AfRedisHistory::builder("redis://:secret@127.0.0.1:1", AfKeyFormat::scoped("app"))
        .connection_timeout(Duration::from_millis(200))
        .response_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Timeout),
        "{err}"
    );
    assert!(!format!("{err:?}").contains("secret"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn timeouts_too_long_to_add_up_are_refused() {
    for history in [
        AfRedisHistory::builder(&url(), AfKeyFormat::scoped("timeouts"))
            .response_timeout(Duration::MAX),
        AfRedisHistory::builder(&url(), AfKeyFormat::scoped("timeouts"))
            .connection_timeout(Duration::MAX),
    ] {
        let err = history.connect().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
}

/// Agent Framework's list trims itself on append when `max_messages` is set, so it says so
/// (`reduces_on_append`); and it cannot archive, so a `Memory` refuses it either way (a flush
/// would hand a batch to the blocks and then fail to archive it, every time).
#[tokio::test]
async fn a_memory_refuses_the_agent_framework_list() {
    use std::sync::Arc;
    let prefix = unique_prefix();
    let bounded = bounded_store(&prefix).await;
    assert!(bounded.capabilities().reduces_on_append);
    let unbounded = connect(app(&prefix)).await;
    assert!(!unbounded.capabilities().reduces_on_append);
    assert!(!unbounded.capabilities().archive);
    for store in [bounded, unbounded] {
        let err = memory_core::Memory::builder(
            session("refused"),
            Arc::new(store),
            Arc::new(memory_core::InMemorySessionStore::new()),
        )
        .build()
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    }
    cleanup(&prefix).await;
}

/// `read_page` pages by list position: one script call per page, together the whole list;
/// limits clamp, the end and past it are empty, and a page of undecodable elements goes on
/// after them. There is no `list_tenants`: the keys do not carry a scope's tenant.
#[tokio::test]
async fn read_page_pages_by_position() {
    let prefix = unique_prefix();
    let (shared, store) = counted_store(&prefix).await;
    let caps = store.capabilities();
    assert!(caps.paged_reads && !caps.lists_tenants);
    let listed = store
        .list_tenants(PageRequest::first(10))
        .await
        .unwrap_err();
    assert_eq!(listed.kind(), ErrorKind::Unsupported);

    let scope = session("paged");
    let n = MAX_READ_PAGE + 50;
    let messages = numbered(n);
    store.append(&scope, &messages).await.unwrap();
    store.read_page(&scope, 0, 1).await.unwrap();
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let before = shared.round_trips();
        let page = store.read_page(&scope, after, MAX_READ_PAGE).await.unwrap();
        assert_eq!(shared.round_trips() - before, 1, "the page after {after}");
        let Some(last) = page.last() else { break };
        after = last.seq;
        paged.push(page);
    }
    assert_eq!(
        paged.iter().map(Vec::len).collect::<Vec<_>>(),
        [MAX_READ_PAGE, 50]
    );
    let paged: Vec<_> = paged.into_iter().flatten().collect();
    assert_eq!(paged, store.read(&scope, Window::Everything).await.unwrap());
    assert!(
        paged
            .iter()
            .all(|m| m.message.id.as_str() == format!("m{}", m.seq - 1) && !m.archived)
    );
    assert_eq!(seqs(&store.read_page(&scope, 4, 0).await.unwrap()), [5]);
    assert_eq!(
        store.read_page(&scope, 0, usize::MAX).await.unwrap().len(),
        MAX_READ_PAGE
    );
    let last = n as u64;
    assert_eq!(
        seqs(&store.read_page(&scope, last - 1, 5).await.unwrap()),
        [last]
    );
    for (scope, after) in [(&scope, last), (&scope, u64::MAX), (&session("unknown"), 0)] {
        let page = store.read_page(scope, after, 5).await.unwrap();
        assert!(page.is_empty(), "{scope} after {after}");
    }

    // Positions 2 and 3 do not decode: a page of them alone goes on to position 4.
    let key = store.key_for(&scope).unwrap();
    let mut conn = raw().await;
    for index in [1, 2] {
        let _: () = conn.lset(&key, index, "not json").await.unwrap();
    }
    assert_eq!(seqs(&store.read_page(&scope, 0, 3).await.unwrap()), [1]);
    assert_eq!(seqs(&store.read_page(&scope, 1, 2).await.unwrap()), [4, 5]);
    // A key outside the store's scope template is refused, as by every call.
    let other = Scope::session("paged")
        .unwrap()
        .with_tenant("other")
        .unwrap();
    assert_eq!(
        store.read_page(&other, 0, 5).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    cleanup(&prefix).await;
}
