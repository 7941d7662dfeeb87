//! The hostile-input suite: what every store must survive from a careless or hostile caller, or
//! from another program writing its tables and keys.
//!
//! Each check seeds a thread (or a session), throws bad input at the store — oversized
//! messages and batches, JSON nested at and past [`MAX_JSON_DEPTH`], NUL characters, ids at
//! the length limit and one past, huge windows, huge and tiny TTLs, corrupt stored rows,
//! stored session states with every field wrong — and asserts three things: the answer is a
//! typed error (or a correct result), nothing panics, and nothing already stored is lost (the
//! thread reads the same before and after).
//!
//! [`hostile_input_tests!`](crate::hostile_input_tests) generates one test per check. A
//! backend that can write its stored form directly passes a [`RawWriter`] too, and the
//! checks of undecodable rows run on it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::session::MAX_STATE_DEPTH;
use memory_core::{
    AgentSession, ChatMessage, ErrorKind, HistoryStore, MAX_BATCH_BYTES, MAX_BATCH_MESSAGES,
    MAX_ID_LEN, MAX_JSON_DEPTH, MAX_MESSAGE_BYTES, MAX_TTL, MessageId, Result, Scope, SessionId,
    SessionStore, StoredMessage, TenantId, ThreadCount, Window,
};
use serde_json::{Value, json};

use crate::fixtures::{message_with_id, random_scope, random_session_id, text_of_bytes};

/// Writes a backend's stored form of a message directly, bypassing the store: what another
/// program, a damaged disk or an old version may leave behind.
#[async_trait]
pub trait RawWriter: Send + Sync + fmt::Debug {
    /// Replaces the stored body of message `seq` of the thread of `scope` with `body`, bytes
    /// as given. Returns `false` when the backend's driver cannot carry these bytes at all (a
    /// PostgreSQL text column refuses bytes that are not UTF-8), so there is nothing to test.
    async fn overwrite(&self, scope: &Scope, seq: u64, body: &[u8]) -> Result<bool>;
}

/// A JSON array nested `levels` deep (`[]` is 1), built without recursion.
fn nested(levels: usize) -> Value {
    let mut value = Value::Array(Vec::new());
    for _ in 1..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// What a thread holds, to compare before and after.
#[derive(Debug, PartialEq)]
struct Snapshot {
    everything: Vec<(u64, String, String)>,
    count: ThreadCount,
}

async fn snapshot(store: &dyn HistoryStore, scope: &Scope) -> Snapshot {
    let window = if store.capabilities().archive {
        Window::Everything
    } else {
        Window::All
    };
    let everything = store
        .read(scope, window)
        .await
        .unwrap_or_else(|e| panic!("read {scope}: {e}"))
        .into_iter()
        .map(|m| (m.seq, m.message.id.to_string(), m.message.text()))
        .collect();
    let count = store
        .count(scope)
        .await
        .unwrap_or_else(|e| panic!("count {scope}: {e}"));
    Snapshot { everything, count }
}

/// A thread of three messages; returns its scope and what it holds.
async fn seeded(store: &dyn HistoryStore) -> (Scope, Snapshot) {
    let scope = random_scope();
    let messages: Vec<ChatMessage> = (1..=3)
        .map(|i| message_with_id(&format!("seed-{i}"), format!("seed message {i}")))
        .collect();
    store
        .append(&scope, &messages)
        .await
        .unwrap_or_else(|e| panic!("seed {scope}: {e}"));
    let before = snapshot(store, &scope).await;
    assert_eq!(before.everything.len(), 3, "the seed is stored");
    (scope, before)
}

/// Asserts the thread still holds exactly what it held.
async fn assert_intact(store: &dyn HistoryStore, scope: &Scope, before: &Snapshot, what: &str) {
    let after = snapshot(store, scope).await;
    assert_eq!(&after, before, "{what}: the thread changed");
}

/// Asserts `result` is an error of `kind` (the input was refused).
#[track_caller]
fn refused<T: fmt::Debug>(result: Result<T>, kind: ErrorKind, what: &str) {
    match result {
        Ok(v) => panic!("{what}: expected {kind}, got success {v:?}"),
        Err(err) => assert_eq!(err.kind(), kind, "{what}: expected {kind}, got {err}"),
    }
}

/// A message over [`MAX_MESSAGE_BYTES`], alone or after a good one in its batch, is refused
/// with `LimitExceeded` and nothing is written.
pub async fn oversized_message_is_refused_whole(store: Arc<dyn HistoryStore>) {
    let (scope, before) = seeded(store.as_ref()).await;
    let big = message_with_id("big", text_of_bytes(MAX_MESSAGE_BYTES + 1));
    refused(
        store.append(&scope, std::slice::from_ref(&big)).await,
        ErrorKind::LimitExceeded,
        "a message over MAX_MESSAGE_BYTES",
    );
    let good = message_with_id("good", "fits");
    refused(
        store.append(&scope, &[good, big]).await,
        ErrorKind::LimitExceeded,
        "a batch holding a message over MAX_MESSAGE_BYTES",
    );
    assert_intact(store.as_ref(), &scope, &before, "oversized message").await;
    // A new thread gets nothing either.
    let fresh = random_scope();
    let big = message_with_id("big", text_of_bytes(MAX_MESSAGE_BYTES + 1));
    refused(
        store.append(&fresh, &[big]).await,
        ErrorKind::LimitExceeded,
        "a message over the limit on a new thread",
    );
    assert_eq!(store.count(&fresh).await.unwrap(), ThreadCount::default());
}

/// A batch over [`MAX_BATCH_BYTES`] or [`MAX_BATCH_MESSAGES`] is refused with
/// `LimitExceeded` and nothing of it is written.
pub async fn oversized_batch_is_refused_whole(store: Arc<dyn HistoryStore>) {
    let (scope, before) = seeded(store.as_ref()).await;
    let each = MAX_MESSAGE_BYTES - 4096;
    let n = MAX_BATCH_BYTES / each + 1;
    let batch: Vec<ChatMessage> = (0..n)
        .map(|i| message_with_id(&format!("b-{i}"), text_of_bytes(each)))
        .collect();
    refused(
        store.append(&scope, &batch).await,
        ErrorKind::LimitExceeded,
        "a batch over MAX_BATCH_BYTES",
    );
    drop(batch);
    let many: Vec<ChatMessage> = (0..=MAX_BATCH_MESSAGES)
        .map(|i| message_with_id(&format!("m-{i}"), "x"))
        .collect();
    refused(
        store.append(&scope, &many).await,
        ErrorKind::LimitExceeded,
        "a batch over MAX_BATCH_MESSAGES",
    );
    assert_intact(store.as_ref(), &scope, &before, "oversized batch").await;
}

/// JSON nested up to [`MAX_JSON_DEPTH`] is stored and read back equal (or, where the store's
/// own form nests it deeper, refused with `LimitExceeded`); one level past, and the ~125
/// levels that used to be stored and then made every read of the thread fail, are refused;
/// the thread stays readable and unchanged.
pub async fn deep_json_is_refused_past_the_limit(store: Arc<dyn HistoryStore>) {
    let (scope, before) = seeded(store.as_ref()).await;
    // message → metadata → value: the value may nest MAX_JSON_DEPTH - 2 levels.
    let past = [
        ("one level past", MAX_JSON_DEPTH - 1),
        ("unreadable by serde_json", 125),
        ("far past", 10_000),
    ];
    for (what, levels) in past {
        let message = message_with_id("deep", "deep").with_metadata("deep", nested(levels));
        refused(
            store.append(&scope, std::slice::from_ref(&message)).await,
            ErrorKind::LimitExceeded,
            &format!("metadata nested {levels} levels ({what})"),
        );
        // A very deep value's drop recurses once per level; keep the test's stack out of it.
        std::mem::forget(message);
    }
    let data = ChatMessage::new(
        memory_core::Role::User,
        vec![memory_core::Part::Data {
            media_type: "application/json".into(),
            data: nested(MAX_JSON_DEPTH + 1),
        }],
    );
    refused(
        store.append(&scope, &[data]).await,
        ErrorKind::LimitExceeded,
        "a data part nested past the limit",
    );
    assert_intact(store.as_ref(), &scope, &before, "deep JSON").await;

    let at = message_with_id("at-limit", "at the limit")
        .with_metadata("deep", nested(MAX_JSON_DEPTH - 2));
    match store.append(&scope, std::slice::from_ref(&at)).await {
        Ok(outcome) => {
            assert_eq!(outcome.inserted, 1);
            let all = store.read(&scope, Window::All).await.unwrap();
            let last = all.last().expect("the thread is readable");
            assert_eq!(last.message.id, at.id);
            assert_eq!(last.message.metadata, at.metadata, "read back equal");
        }
        Err(err) => {
            assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
            assert_intact(store.as_ref(), &scope, &before, "deep JSON at the limit").await;
        }
    }
}

/// NUL characters in ids are refused when the id is made (`InvalidInput`); in text, author
/// names and metadata keys they are stored and read back exactly, or refused with a typed
/// error that leaves the thread unchanged.
pub async fn nul_bytes_are_stored_exactly_or_refused(store: Arc<dyn HistoryStore>) {
    for bad in ["a\0b", "\0", "nul\0"] {
        refused(
            MessageId::new(bad),
            ErrorKind::InvalidInput,
            "a message id with NUL",
        );
        refused(
            SessionId::new(bad),
            ErrorKind::InvalidInput,
            "a session id with NUL",
        );
        refused(
            TenantId::new(bad),
            ErrorKind::InvalidInput,
            "a tenant id with NUL",
        );
        refused(
            random_scope().with_agent(bad),
            ErrorKind::InvalidInput,
            "an agent id with NUL",
        );
    }
    let (scope, before) = seeded(store.as_ref()).await;
    let message = message_with_id("nul", "a\0b\0\0c")
        .with_author("auth\0or")
        .with_metadata("k\0ey", json!({"v\0": "x\0y"}));
    match store.append(&scope, std::slice::from_ref(&message)).await {
        Ok(_) => {
            let all = store.read(&scope, Window::All).await.unwrap();
            let last = all.last().expect("the thread is readable");
            assert_eq!(last.message.id, message.id);
            assert_eq!(last.message.text(), message.text(), "NUL kept in text");
            assert_eq!(last.message.author_name, message.author_name);
            assert_eq!(last.message.metadata, message.metadata);
        }
        Err(err) => {
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::InvalidInput | ErrorKind::Serialization | ErrorKind::Backend
                ),
                "a typed refusal: {err}"
            );
            assert_intact(store.as_ref(), &scope, &before, "NUL in a message").await;
        }
    }
}

/// Ids of exactly [`MAX_ID_LEN`] characters (every id of the scope and the message id) work
/// for every operation; one character more is refused when the id is made.
pub async fn ids_at_the_length_limit_work_and_one_past_is_refused(store: Arc<dyn HistoryStore>) {
    let long = |c: char| c.to_string().repeat(MAX_ID_LEN);
    let past = "x".repeat(MAX_ID_LEN + 1);
    refused(MessageId::new(&past), ErrorKind::InvalidInput, "message id");
    refused(SessionId::new(&past), ErrorKind::InvalidInput, "session id");
    refused(TenantId::new(&past), ErrorKind::InvalidInput, "tenant id");
    refused(
        random_scope().with_user(&past),
        ErrorKind::InvalidInput,
        "user id",
    );
    refused(
        random_scope().with_agent(&past),
        ErrorKind::InvalidInput,
        "agent id",
    );
    refused(
        random_scope().with_source(&past),
        ErrorKind::InvalidInput,
        "source id",
    );

    // A random prefix keeps runs apart on a shared server; the rest fills the limit.
    let random = random_session_id().to_string();
    let fill = |c: char| format!("{random}{}", &long(c)[random.len()..]);
    let scope = Scope::session(fill('s'))
        .unwrap()
        .with_tenant(fill('t'))
        .unwrap()
        .with_user(fill('u'))
        .unwrap()
        .with_agent(fill('a'))
        .unwrap()
        .with_source(fill('o'))
        .unwrap();
    let message = message_with_id(&long('m'), "longest ids");
    let outcome = store
        .append(&scope, std::slice::from_ref(&message))
        .await
        .unwrap_or_else(|e| panic!("append with ids at the limit: {e}"));
    assert_eq!(outcome.seqs, [1]);
    let read = store.read(&scope, Window::All).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].message.id, message.id);
    assert_eq!(store.count(&scope).await.unwrap().active, 1);
    // A retry of that append stores nothing new.
    let again = store.append(&scope, &[message]).await.unwrap();
    assert_eq!(again.seqs, [1]);
    assert_eq!(store.clear(&scope).await.unwrap(), 1);
}

/// Windows with the largest counts are answered correctly: `Last(usize::MAX)` and
/// `TokenBudget(u64::MAX)` are the whole active thread, `After(u64::MAX)` is empty; archiving
/// the widest range (where supported) and reading again never fails.
pub async fn huge_windows_are_answered(store: Arc<dyn HistoryStore>) {
    let (scope, before) = seeded(store.as_ref()).await;
    let all = store.read(&scope, Window::All).await.unwrap();
    let ids = |m: &[StoredMessage]| m.iter().map(|m| m.seq).collect::<Vec<_>>();
    for window in [
        Window::Last(usize::MAX),
        Window::Last(usize::MAX - 1),
        Window::TokenBudget(u64::MAX),
        Window::After(0),
    ] {
        let read = store
            .read(&scope, window)
            .await
            .unwrap_or_else(|e| panic!("read {window:?}: {e}"));
        assert_eq!(ids(&read), ids(&all), "{window:?} is the whole thread");
    }
    for window in [Window::After(u64::MAX), Window::After(i64::MAX as u64)] {
        let read = store.read(&scope, window).await.unwrap();
        assert!(read.is_empty(), "{window:?} is empty");
    }
    assert_intact(store.as_ref(), &scope, &before, "huge windows").await;
    if store.capabilities().archive {
        assert_eq!(store.archive(&scope, u64::MAX..=u64::MAX).await.unwrap(), 0);
        assert_eq!(store.archive(&scope, 4..=u64::MAX).await.unwrap(), 0);
        assert_intact(store.as_ref(), &scope, &before, "archive past the end").await;
        assert_eq!(store.archive(&scope, 0..=u64::MAX).await.unwrap(), 3);
        assert!(
            store
                .read(&scope, Window::Last(usize::MAX))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.read(&scope, Window::Everything).await.unwrap().len(),
            3
        );
    }
}

/// TTLs of zero, under a millisecond and over [`MAX_TTL`] (up to `Duration::MAX`) are refused
/// with `InvalidInput` and change nothing; `MAX_TTL` itself and 1 ms are accepted. A store
/// without TTLs answers `Unsupported` for all of them and changes nothing.
pub async fn huge_and_tiny_ttls_are_refused_or_kept(store: Arc<dyn HistoryStore>) {
    let (scope, before) = seeded(store.as_ref()).await;
    let bad = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
        MAX_TTL + Duration::from_millis(1),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    let kind = if store.capabilities().ttl {
        ErrorKind::InvalidInput
    } else {
        ErrorKind::Unsupported
    };
    for ttl in bad {
        refused(
            store.set_ttl(&scope, Some(ttl)).await,
            kind,
            &format!("a TTL of {ttl:?}"),
        );
    }
    assert_intact(store.as_ref(), &scope, &before, "refused TTLs").await;
    if !store.capabilities().ttl {
        refused(
            store.set_ttl(&scope, Some(MAX_TTL)).await,
            ErrorKind::Unsupported,
            "MAX_TTL without TTLs",
        );
        return;
    }
    store.set_ttl(&scope, Some(MAX_TTL)).await.unwrap();
    store.purge_expired().await.unwrap();
    assert_intact(store.as_ref(), &scope, &before, "a TTL of MAX_TTL").await;
    store.set_ttl(&scope, None).await.unwrap();
    assert_intact(store.as_ref(), &scope, &before, "no TTL").await;
    // The shortest TTL expires the thread; the next append starts it again at 1.
    store
        .set_ttl(&scope, Some(Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(store.read(&scope, Window::All).await.unwrap().is_empty());
    let outcome = store
        .append(&scope, &[message_with_id("after", "after expiry")])
        .await
        .unwrap();
    assert_eq!(outcome.seqs, [1]);
}

/// Stored bodies that do not decode — not JSON, not a message, JSON nested past what a
/// decoder reads, bytes that are not UTF-8 (where the driver carries them) — are left out of
/// reads of every window; every other message is read, and the thread can still be counted,
/// appended to and cleared.
pub async fn undecodable_rows_are_skipped(store: Arc<dyn HistoryStore>, raw: Arc<dyn RawWriter>) {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let bodies: [(&str, Vec<u8>); 5] = [
        ("not JSON", b"{not json".to_vec()),
        ("not a message", br#"{"v": 1, "role": 7}"#.to_vec()),
        ("too deep", deep.into_bytes()),
        ("not UTF-8", vec![0xff, 0xfe, b'{', 0x80]),
        ("empty", Vec::new()),
    ];
    for (what, body) in bodies {
        let (scope, before) = seeded(store.as_ref()).await;
        if !raw.overwrite(&scope, 2, &body).await.unwrap() {
            continue;
        }
        let all = store
            .read(&scope, Window::All)
            .await
            .unwrap_or_else(|e| panic!("{what}: the thread is unreadable: {e}"));
        let seqs: Vec<u64> = all.iter().map(|m| m.seq).collect();
        assert_eq!(
            seqs,
            [1, 3],
            "{what}: the bad row is left out, the others read"
        );
        let texts: Vec<String> = all.iter().map(|m| m.message.text()).collect();
        assert_eq!(
            texts,
            [
                before.everything[0].2.clone(),
                before.everything[2].2.clone()
            ]
        );
        for window in [
            Window::Last(2),
            Window::Last(usize::MAX),
            Window::After(1),
            Window::TokenBudget(u64::MAX),
            Window::TokenBudget(1_000_000),
        ] {
            let read = store
                .read(&scope, window)
                .await
                .unwrap_or_else(|e| panic!("{what}: read {window:?}: {e}"));
            assert!(
                read.iter().all(|m| m.seq != 2) && read.iter().any(|m| m.seq == 3),
                "{what}: {window:?} leaves the bad row out"
            );
        }
        if store.capabilities().archive {
            let everything = store.read(&scope, Window::Everything).await.unwrap();
            assert_eq!(everything.len(), 2, "{what}: Everything leaves it out");
        }
        store
            .count(&scope)
            .await
            .unwrap_or_else(|e| panic!("{what}: count: {e}"));
        let outcome = store
            .append(&scope, &[message_with_id("after", "after the bad row")])
            .await
            .unwrap_or_else(|e| panic!("{what}: append after a bad row: {e}"));
        assert_eq!(outcome.seqs, [4], "{what}");
        let all = store.read(&scope, Window::All).await.unwrap();
        assert_eq!(all.last().map(|m| m.seq), Some(4));
        store
            .clear(&scope)
            .await
            .unwrap_or_else(|e| panic!("{what}: clear: {e}"));
        assert!(store.read(&scope, Window::All).await.unwrap().is_empty());
    }
}

/// Values a stored field should never hold: null, a negative number, the largest `u64`, a
/// float, a string with a NUL, an empty array and an empty object.
fn wrong_values() -> Vec<Value> {
    vec![
        Value::Null,
        json!(-1),
        json!(u64::MAX),
        json!(1e308),
        json!("x\0y"),
        json!([]),
        json!({}),
    ]
}

/// Stored session states with every field wrong, saved through the store, load back exactly
/// as saved (the store does not judge them), and [`AgentSession::deserialize_at`] refuses
/// them with a typed error and never panics. A state nested past
/// [`MAX_STATE_DEPTH`] is refused at save and the
/// session saved before it is not lost; one at the limit loads back equal.
pub async fn hostile_session_states_are_typed_errors(store: Arc<dyn SessionStore>) {
    let scope = random_scope();
    let mut session = AgentSession::new(scope.clone());
    session
        .add_history_message("agent", ChatMessage::user("hi"))
        .unwrap();
    session.update_snapshot("step", json!(1));
    let good = session.serialize().unwrap();
    let Value::Object(fields) = &good else {
        panic!("a session state is an object");
    };
    let mut wrong_values = wrong_values();
    wrong_values.extend([json!([[[[[[[[["deep"]]]]]]]]]), json!({"\0": null})]);
    let mut version = store.save(&scope, &good, None).await.unwrap();
    for field in fields.keys() {
        for wrong in &wrong_values {
            let mut state = good.clone();
            state[field.as_str()] = wrong.clone();
            check_state(store.as_ref(), &scope, &state, &mut version, field).await;
        }
        let mut state = good.clone();
        if let Value::Object(map) = &mut state {
            map.remove(field.as_str());
        }
        check_state(store.as_ref(), &scope, &state, &mut version, field).await;
    }
    // Every field wrong at once, and documents that are not objects at all.
    let mut all_wrong = serde_json::Map::new();
    for (i, field) in fields.keys().enumerate() {
        all_wrong.insert(field.clone(), wrong_values[i % wrong_values.len()].clone());
    }
    for state in [
        Value::Object(all_wrong),
        json!(null),
        json!([good]),
        json!("state"),
    ] {
        check_state(store.as_ref(), &scope, &state, &mut version, "every field").await;
        let restored = AgentSession::deserialize_at(&state, &scope);
        assert!(
            restored.is_err(),
            "a state with every field wrong is refused"
        );
    }

    // A state nested past what decoders read: refused at save, or loads back equal.
    store.save(&scope, &good, Some(version)).await.unwrap();
    version += 1;
    let mut deep = good.clone();
    deep["snapshot"] = json!({"deep": nested(200)});
    refused(
        store.save(&scope, &deep, Some(version)).await,
        ErrorKind::LimitExceeded,
        "a state nested past MAX_STATE_DEPTH",
    );
    let loaded = store.load(&scope).await.unwrap().unwrap();
    assert_eq!(loaded.state, good, "the state saved before is not lost");
    assert_eq!(loaded.version, version);
    // At the limit, it is saved and loads back equal.
    let mut at = good.clone();
    at["snapshot"] = json!({"deep": nested(MAX_STATE_DEPTH - 2)});
    version = store.save(&scope, &at, Some(version)).await.unwrap();
    let loaded = store.load(&scope).await.unwrap().unwrap();
    assert_eq!(loaded.state, at);
    assert_eq!(loaded.version, version);
    std::mem::forget(deep);
    store.delete(&scope).await.unwrap();
}

/// Saves `state`, loads it back equal, and restores it as a session: a typed error or a
/// session, never a panic.
async fn check_state(
    store: &dyn SessionStore,
    scope: &Scope,
    state: &Value,
    version: &mut u64,
    field: &str,
) {
    *version = store
        .save(scope, state, Some(*version))
        .await
        .unwrap_or_else(|e| panic!("save a state with {field} wrong: {e}"));
    let loaded = store
        .load(scope)
        .await
        .unwrap_or_else(|e| panic!("load a state with {field} wrong: {e}"))
        .expect("the state is stored");
    assert_eq!(&loaded.state, state, "{field}: stored exactly");
    if let Err(err) = AgentSession::deserialize_at(&loaded.state, scope) {
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Serialization | ErrorKind::InvalidInput | ErrorKind::Unsupported
            ),
            "{field}: a typed error, got {err}"
        );
    }
}

/// Stored block-state documents of a [`Memory`](memory_core::Memory) (saved under
/// [`BLOCK_STATE_SOURCE`](memory_core::memory::BLOCK_STATE_SOURCE)) with every field wrong:
/// `get` and `flush` answer with a typed error (or a correct result) and never panic, and a
/// document they refuse is left as it was.
pub async fn hostile_block_states_are_typed_errors(store: Arc<dyn SessionStore>) {
    use memory_core::memory::BLOCK_STATE_SOURCE;
    use memory_core::memory::blocks::StaticMemoryBlock;
    use memory_core::{InMemoryHistoryStore, Memory};

    let scope = random_scope();
    let history: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let messages: Vec<ChatMessage> = (0..6)
        .map(|i| message_with_id(&format!("m-{i}"), "a few words of history ".repeat(40)))
        .collect();
    history.append(&scope, &messages).await.unwrap();
    let state_scope = scope.clone().with_source(BLOCK_STATE_SOURCE).unwrap();
    let good = json!({
        "format": "agent-memory/memory-blocks",
        "version": 1,
        "blocks": {"facts": {"watermark": 0, "state": null}},
    });
    let mut wrong_values = wrong_values();
    wrong_values.push(json!({"\0": [[[[]]]]}));
    let mut documents = Vec::new();
    for field in ["format", "version", "blocks"] {
        for wrong in &wrong_values {
            let mut doc = good.clone();
            doc[field] = wrong.clone();
            documents.push(doc);
        }
    }
    for wrong in &wrong_values {
        let mut doc = good.clone();
        doc["blocks"]["facts"]["watermark"] = wrong.clone();
        documents.push(doc.clone());
        doc["blocks"]["facts"] = wrong.clone();
        documents.push(doc);
    }
    let mut extra = good.clone();
    extra["password"] = json!("x");
    documents.extend([extra, json!(null), json!([good.clone()]), json!("blocks")]);

    let mut version = None;
    for doc in documents {
        store
            .save(&state_scope, &doc, version)
            .await
            .unwrap_or_else(|e| panic!("save the block state {doc}: {e}"));
        let memory = Memory::builder(scope.clone(), history.clone(), store.clone())
            .token_limit(400)
            .token_flush_size(50)
            .block(Arc::new(
                StaticMemoryBlock::new("facts", "static text").unwrap(),
            ))
            .build()
            .unwrap();
        let results = [
            ("get", memory.get(&[]).await.map(drop)),
            ("flush", memory.flush().await.map(drop)),
        ];
        let loaded = store
            .load(&state_scope)
            .await
            .unwrap()
            .expect("still stored");
        for (what, result) in results {
            if let Err(err) = result {
                assert!(
                    matches!(
                        err.kind(),
                        ErrorKind::Serialization | ErrorKind::InvalidInput | ErrorKind::Unsupported
                    ),
                    "{what} over the block state {doc}: a typed error, got {err}"
                );
                assert_eq!(
                    loaded.state, doc,
                    "{what}: a refused document is left as it was"
                );
            }
        }
        version = Some(loaded.version);
    }
    store.delete(&state_scope).await.unwrap();
}
