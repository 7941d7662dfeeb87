//! The fuzz targets: one decoder (or the decoders of one kind of bytes) each, with its
//! properties.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use memory_bundle::format::{BundleReader, FormatError, Record};
use memory_bundle::{Endpoint, NoProgress, Selection, Tenants, export, import};
use memory_core::chat::{AgentChat, ChatSerializer};
use memory_core::memory::BLOCK_STATE_SOURCE;
use memory_core::memory::blocks::{FactExtractionMemoryBlock, StaticMemoryBlock};
use memory_core::{
    AgentSession, ChatMessage, ChatModel, ChatRequest, ChatResponse, Error, ErrorKind,
    FnTokenCounter, InMemoryHistoryStore, InMemorySessionStore, Memory, OpenAiMessage, Scope,
    SessionStore,
};
use memory_http::reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use memory_interop::agent_framework::session::{export_session, import_session_into};
use memory_interop::agent_framework::{AfOptions, from_agent_framework, to_agent_framework};
use memory_interop::llamaindex::{LiOptions, from_llamaindex, to_llamaindex};
use memory_interop::python_json::{DumpOptions, dumps, dumps_with, float_repr};
use memory_mem0::Mem0SessionState;
use serde_json::Value;

use crate::{Target, seeds};

/// Every target, in a fixed order.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "message_json",
            about: "ChatMessage::from_json (the versioned message JSON)",
            run: message_json,
            seeds: seeds::json,
            valid: valid_message,
        },
        Target {
            name: "bundle",
            about: "memory_bundle BundleReader and import (the portable bundle, JSON Lines)",
            run: bundle,
            seeds: seeds::bundle,
            valid: valid_bundle,
        },
        Target {
            name: "openai_message",
            about: "ChatMessage::from_openai (OpenAI's chat-completions message)",
            run: openai_message,
            seeds: seeds::json,
            valid: valid_openai_message,
        },
        Target {
            name: "session_state",
            about: "AgentSession::from_json / deserialize / deserialize_at",
            run: session_state,
            seeds: seeds::json,
            valid: valid_session,
        },
        Target {
            name: "chat_state",
            about: "ChatSerializer::deserialize and restore (multi-agent chat state)",
            run: chat_state,
            seeds: seeds::json,
            valid: valid_chat_state,
        },
        Target {
            name: "memory_block_state",
            about: "the memory block state document, read by Memory::get",
            run: memory_block_state,
            seeds: seeds::json,
            valid: valid_block_state,
        },
        Target {
            name: "agent_framework",
            about: "memory_interop from_agent_framework (Agent Framework messages)",
            run: agent_framework,
            seeds: seeds::json,
            valid: valid_agent_framework,
        },
        Target {
            name: "agent_framework_session",
            about: "memory_interop import_session (AgentSession.to_dict())",
            run: agent_framework_session,
            seeds: seeds::json,
            valid: valid_af_session,
        },
        Target {
            name: "llamaindex",
            about: "memory_interop from_llamaindex (LlamaIndex ChatMessage JSON)",
            run: llamaindex,
            seeds: seeds::json,
            valid: valid_llamaindex,
        },
        Target {
            name: "python_json",
            about: "memory_interop python_json dumps and float_repr",
            run: python_json,
            seeds: seeds::json,
            valid: any,
        },
        Target {
            name: "scope_key",
            about: "Scope::from_key",
            run: scope_key,
            seeds: seeds::text,
            valid: any,
        },
        Target {
            name: "url",
            about: "memory_core::redact_url and memory_http::parse_base_url",
            run: url,
            seeds: seeds::text,
            valid: any,
        },
        Target {
            name: "http_headers",
            about: "memory_http retry_after / retry_after_ms and the text helpers",
            run: http_headers,
            seeds: seeds::text,
            valid: any,
        },
        Target {
            name: "mem0_response",
            about: "Mem0 answers: add, search, list, history, get, error bodies",
            run: mem0_response,
            seeds: seeds::json,
            valid: valid_mem0_response,
        },
        Target {
            name: "mem0_session_state",
            about: "Mem0SessionState::from_value",
            run: mem0_session_state,
            seeds: seeds::json,
            valid: valid_mem0_state,
        },
        Target {
            name: "openai_response",
            about: "OpenAI answers: chat completions, embeddings, error bodies",
            run: openai_response,
            seeds: seeds::json,
            valid: valid_openai_response,
        },
    ]
}

/// Asserts that `err` is a typed decoding failure: one of `kinds`, with a message that is a
/// sentence rather than a `Debug` dump.
fn typed(err: &Error, kinds: &[ErrorKind], what: &str) {
    assert!(
        kinds.contains(&err.kind()),
        "{what}: unexpected error kind {:?}: {err}",
        err.kind()
    );
    let message = err.to_string();
    assert!(!message.is_empty(), "{what}: empty error message");
    assert!(
        !message.contains("Error {") && !message.contains("kind: "),
        "{what}: the error message looks like a Debug dump: {message}"
    );
}

fn any(_: &[u8]) -> bool {
    true
}

fn valid_message(input: &[u8]) -> bool {
    std::str::from_utf8(input).is_ok_and(|text| ChatMessage::from_json(text).is_ok())
}

fn valid_openai_message(input: &[u8]) -> bool {
    serde_json::from_slice::<OpenAiMessage>(input)
        .is_ok_and(|wire| ChatMessage::from_openai(wire).is_ok())
}

fn valid_session(input: &[u8]) -> bool {
    json(input).is_some_and(|v| {
        AgentSession::deserialize(&v).is_ok()
            || AgentSession::deserialize_at(&v, &session_scope()).is_ok()
    })
}

fn valid_chat_state(input: &[u8]) -> bool {
    ChatSerializer::deserialize(input).is_ok()
}

fn valid_block_state(input: &[u8]) -> bool {
    json(input).is_some_and(|v| v.get("format") == Some(&Value::from("agent-memory/memory-blocks")))
}

fn valid_agent_framework(input: &[u8]) -> bool {
    json(input).is_some_and(|v| from_agent_framework(&v).is_ok())
}

fn valid_af_session(input: &[u8]) -> bool {
    json(input).is_some_and(|v| import_session_into(&v, &session_scope()).is_ok())
}

fn valid_llamaindex(input: &[u8]) -> bool {
    json(input).is_some_and(|v| from_llamaindex(&v).is_ok())
}

fn valid_mem0_response(input: &[u8]) -> bool {
    use memory_mem0::fuzzing;
    json(input).is_some()
        && (fuzzing::search(input).is_ok_and(|r| !r.is_empty())
            || fuzzing::history(input).is_ok_and(|r| !r.is_empty())
            || fuzzing::add(input).is_ok_and(|r| !r.results.is_empty() || r.event_id.is_some())
            || fuzzing::get(input).is_ok_and(|r| r.is_some()))
}

fn valid_mem0_state(input: &[u8]) -> bool {
    json(input).is_some_and(|v| matches!(Mem0SessionState::from_value(&v), Ok(Some(_))))
}

fn valid_openai_response(input: &[u8]) -> bool {
    use memory_openai::fuzzing;
    fuzzing::completion(input).is_ok()
        || fuzzing::embeddings(input, 2, 3).is_ok()
        || json(input).is_some_and(|v| v.get("error").is_some())
}

const DECODE: &[ErrorKind] = &[ErrorKind::Serialization, ErrorKind::InvalidInput];

fn json(input: &[u8]) -> Option<Value> {
    serde_json::from_slice(input).ok()
}

fn message_json(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    match ChatMessage::from_json(&text) {
        Ok(message) => {
            let encoded = message.to_json();
            assert!(encoded.is_ok(), "a decoded message does not encode");
            if let Ok(encoded) = encoded {
                let again = ChatMessage::from_json(&encoded);
                assert!(again.is_ok(), "re-decoding failed: {again:?}");
                if let Ok(again) = again {
                    assert_eq!(again, message, "message JSON round trip");
                }
            }
        }
        Err(err) => typed(&err, DECODE, "ChatMessage::from_json"),
    }
}

fn read_bundle(input: &[u8]) -> Result<Vec<Record>, FormatError> {
    let mut reader = BundleReader::new(input)?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok(records)
}

fn valid_bundle(input: &[u8]) -> bool {
    read_bundle(input).is_ok()
}

/// The reader gives records or a typed error; a bundle it reads whole imports into the
/// in-memory stores (or fails with a typed error: an id repeated in a thread is a conflict),
/// and the import exports again to a bundle the reader reads.
fn bundle(input: &[u8]) {
    let records = match read_bundle(input) {
        Ok(records) => records,
        Err(err) => {
            let message = err.to_string();
            assert!(
                !message.is_empty() && !message.contains("kind: "),
                "{message}"
            );
            return;
        }
    };
    assert!(
        matches!(records.last(), Some(Record::End(_))),
        "a read bundle ends with end"
    );
    let to = Endpoint::new(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
    );
    let Some(imported) = block_on(import(&to, input, &NoProgress)) else {
        return;
    };
    if let Err(err) = imported {
        typed(
            &err,
            &[
                ErrorKind::Conflict,
                ErrorKind::InvalidInput,
                ErrorKind::LimitExceeded,
                ErrorKind::Serialization,
            ],
            "import",
        );
        return;
    }
    let mut out = Vec::new();
    let Some(exported) = block_on(export(
        &to,
        &Selection::new(Tenants::All),
        &mut out,
        &NoProgress,
    )) else {
        return;
    };
    assert!(exported.is_ok(), "re-export failed: {exported:?}");
    assert!(
        read_bundle(&out).is_ok(),
        "the re-export does not read back"
    );
}

fn openai_message(input: &[u8]) {
    let Ok(wire) = serde_json::from_slice::<OpenAiMessage>(input) else {
        return;
    };
    match ChatMessage::from_openai(wire) {
        Ok(message) => {
            if let Ok(wire) = message.to_openai() {
                for part in wire {
                    let _ = ChatMessage::from_openai(part);
                }
            }
            let json = message.to_json();
            assert!(
                json.is_ok(),
                "a message read from OpenAI's form does not encode"
            );
        }
        Err(err) => typed(&err, DECODE, "ChatMessage::from_openai"),
    }
}

fn session_scope() -> Scope {
    Scope::session("fuzz-session")
        .and_then(|s| s.with_tenant("fuzz"))
        .unwrap_or_else(|_| unreachable!("the scope's ids are valid"))
}

fn session_state(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let from_json = AgentSession::from_json(&text);
    if let Err(err) = &from_json {
        typed(err, DECODE, "AgentSession::from_json");
    }
    let Some(value) = json(input) else { return };
    match AgentSession::deserialize(&value) {
        Ok(session) => {
            // The decoded windows and histories are used as they are: reading them cannot panic.
            for agent in session.history_agents() {
                let _ = session.agent_window(agent);
                let _ = session.windowed_history(agent.as_str());
                for last in [0, 1, usize::MAX] {
                    let _ = session.history_messages(agent.as_str(), last);
                }
            }
            let mut restored = AgentSession::new(session_scope());
            if let Err(err) = restored.restore(&value) {
                typed(&err, DECODE, "AgentSession::restore");
            }
            let encoded = session.serialize();
            assert!(encoded.is_ok(), "a decoded session does not encode");
            if let Ok(encoded) = encoded {
                let again = AgentSession::deserialize(&encoded);
                assert!(again.is_ok(), "re-decoding a session failed: {again:?}");
                if let Ok(again) = again {
                    assert_eq!(again, session, "session round trip");
                }
            }
        }
        Err(err) => typed(&err, DECODE, "AgentSession::deserialize"),
    }
    if let Err(err) = AgentSession::deserialize_at(&value, &session_scope()) {
        typed(&err, DECODE, "AgentSession::deserialize_at");
    }
}

fn chat_state(input: &[u8]) {
    match ChatSerializer::deserialize(input) {
        Ok(state) => {
            let mut chat = AgentChat::new(session_scope());
            if state.restore(&mut chat).is_ok() {
                let mut bytes = Vec::new();
                let written = ChatSerializer::serialize(&chat, &mut bytes);
                assert!(written.is_ok(), "a restored chat does not serialize");
                let again = ChatSerializer::deserialize(bytes.as_slice());
                assert!(again.is_ok(), "re-reading a chat state failed: {again:?}");
                if let Ok(again) = again {
                    assert_eq!(again.history(), state.history(), "chat history round trip");
                }
            }
        }
        Err(err) => typed(&err, DECODE, "ChatSerializer::deserialize"),
    }
}

/// A model that is never asked: reading blocks does not call one.
#[derive(Debug)]
struct NoModel;

#[memory_core::async_trait]
impl ChatModel for NoModel {
    async fn complete(&self, _request: &ChatRequest) -> memory_core::Result<ChatResponse> {
        Err(Error::unsupported("the fuzz target has no model"))
    }
}

/// Runs a future that never waits on anything outside (the in-memory stores only).
fn block_on<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

fn memory_block_state(input: &[u8]) {
    let Some(value) = json(input) else { return };
    let scope = session_scope();
    let Ok(state_scope) = scope.clone().with_source(BLOCK_STATE_SOURCE) else {
        return;
    };
    let states = Arc::new(InMemorySessionStore::new());
    let saved = block_on(states.save(&state_scope, &value, None));
    // A store refuses only what it could not load back (too deep) or too large: nothing is
    // stored then, so there is nothing for a memory to read.
    let refused = matches!(&saved, Some(Err(e))
        if matches!(e.kind(), ErrorKind::LimitExceeded | ErrorKind::InvalidInput));
    assert!(
        refused || matches!(saved, Some(Ok(_))),
        "the in-memory store failed a save: {saved:?}"
    );
    if refused {
        return;
    }
    let static_block = StaticMemoryBlock::new("core_info", "The user is Dana.");
    let Ok(static_block) = static_block else {
        return;
    };
    let memory = Memory::builder(scope, Arc::new(InMemoryHistoryStore::new()), states)
        .token_counter(Arc::new(FnTokenCounter::new(|text| text.len() as u32 / 4)))
        .block(Arc::new(static_block))
        .block(Arc::new(FactExtractionMemoryBlock::new(Arc::new(NoModel))))
        .build();
    let Ok(memory) = memory else { return };
    let got = block_on(memory.get(&[ChatMessage::user("hello")]));
    assert!(got.is_some(), "Memory::get waited on an in-memory store");
    if let Some(Err(err)) = got {
        typed(&err, DECODE, "Memory::get on a fuzzed block state");
    }
}

fn agent_framework(input: &[u8]) {
    let Some(value) = json(input) else { return };
    match from_agent_framework(&value) {
        Ok(message) => {
            for options in [AfOptions::default(), AfOptions::session_state()] {
                let projected = to_agent_framework(&message, &options);
                let again = from_agent_framework(&projected);
                assert!(
                    again.is_ok(),
                    "a message projected to Agent Framework's form does not read back: {again:?}"
                );
            }
        }
        Err(err) => typed(&err, DECODE, "from_agent_framework"),
    }
}

fn agent_framework_session(input: &[u8]) {
    let Some(value) = json(input) else { return };
    match import_session_into(&value, &session_scope()) {
        Ok(imported) => {
            let exported = export_session(&imported.session, &imported.messages);
            let again = import_session_into(&exported, &session_scope());
            assert!(
                again.is_ok(),
                "an exported session does not import: {again:?}"
            );
            if let Ok(again) = again {
                assert_eq!(
                    again.messages.len(),
                    imported.messages.len(),
                    "session export/import lost messages"
                );
            }
        }
        Err(err) => typed(&err, DECODE, "import_session"),
    }
}

fn llamaindex(input: &[u8]) {
    let Some(value) = json(input) else { return };
    match from_llamaindex(&value) {
        Ok(message) => {
            for options in [LiOptions::default(), LiOptions::minimal()] {
                let projected = to_llamaindex(&message, &options);
                let again = from_llamaindex(&projected);
                assert!(
                    again.is_ok(),
                    "a message projected to LlamaIndex's form does not read back: {again:?}"
                );
            }
        }
        Err(err) => typed(&err, DECODE, "from_llamaindex"),
    }
}

fn python_json(input: &[u8]) {
    if let Some(value) = json(input) {
        for text in [
            dumps(&value),
            dumps_with(&value, DumpOptions::sorted_unicode()),
        ] {
            let back = serde_json::from_str::<Value>(&text);
            assert!(back.is_ok(), "json.dumps output is not JSON: {text}");
            if let Ok(back) = back {
                assert!(
                    same_json(&back, &value),
                    "json.dumps changed the value: {text}"
                );
            }
        }
    }
    // Every 8-byte window of the input as a float: repr must parse back to the same float.
    for chunk in input.chunks_exact(8).take(4) {
        let mut bits = [0u8; 8];
        bits.copy_from_slice(chunk);
        let x = f64::from_le_bytes(bits);
        let repr = float_repr(x);
        if x.is_finite() {
            let back = repr.parse::<f64>();
            assert!(
                matches!(back, Ok(b) if b.to_bits() == x.to_bits()),
                "float_repr({x:e}) = {repr} does not parse back"
            );
        } else {
            assert!(
                ["NaN", "Infinity", "-Infinity"].contains(&repr.as_str()),
                "float_repr({x}) = {repr}"
            );
        }
    }
}

/// Equal JSON, numbers compared as values (Python writes `1.0` where the input had `1.0`, but
/// may write `1e+16` where it had `10000000000000000.0`).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn scope_key(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    match Scope::from_key(&text) {
        Ok(scope) => {
            let key = scope.key();
            let again = Scope::from_key(&key);
            assert!(again.is_ok(), "a scope's own key does not parse: {key}");
            if let Ok(again) = again {
                assert_eq!(again, scope, "scope key round trip");
                assert_eq!(again.key(), key, "scope key is not canonical");
            }
        }
        Err(err) => typed(&err, DECODE, "Scope::from_key"),
    }
}

fn url(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let redacted = memory_core::redact_url(&text);
    let twice = memory_core::redact_url(&redacted);
    assert!(
        twice.len() <= redacted.len() + memory_core::REDACTED.len() * 4 + 8,
        "redacting twice grew the URL"
    );
    let _ = memory_core::url_secrets(&text);
    match memory_http::parse_base_url(&text, "Fuzz") {
        Ok(url) => {
            assert!(matches!(url.scheme(), "http" | "https"), "scheme of {url}");
            assert!(url.query().is_none() && url.fragment().is_none(), "{url}");
        }
        Err(err) => {
            typed(&err, &[ErrorKind::InvalidInput], "parse_base_url");
            // The password (when it is long enough not to be a common word) appears in the
            // message no more often than in the rest of the URL (a host can spell it too).
            if let Ok(parsed) = memory_http::reqwest::Url::parse(text.trim())
                && let Some(password) = parsed.password().filter(|p| p.len() >= 12)
            {
                let mut without = parsed.clone();
                let _ = without.set_password(None);
                let allowed = without.as_str().matches(password).count();
                let shown = err.to_string().matches(password).count();
                assert!(
                    shown <= allowed,
                    "parse_base_url's error shows the password"
                );
            }
        }
    }
}

fn http_headers(input: &[u8]) {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_bytes(input) {
        headers.insert(RETRY_AFTER, value.clone());
        headers.insert(HeaderName::from_static("retry-after-ms"), value);
    }
    for wait in [
        memory_http::retry_after(&headers),
        memory_http::retry_after_ms(&headers),
        memory_openai::fuzzing::retry_wait(&headers),
    ]
    .into_iter()
    .flatten()
    {
        assert!(
            wait <= memory_http::MAX_SERVER_WAIT,
            "wait {wait:?} over the cap"
        );
    }
    let retry = memory_http::Retry::from_hint(memory_http::retry_after(&headers));
    let _ = format!("{retry:?}");
    let text = String::from_utf8_lossy(input);
    let _ = memory_http::is_header_text(&text);
    let _ = memory_http::scrub(&text, None, "sk-");
    if let Some(quoted) = memory_http::quote_body(input) {
        assert!(
            quoted.len() <= memory_http::MAX_QUOTED_BODY * 4 + 16,
            "quote_body quoted {} bytes",
            quoted.len()
        );
    }
}

fn mem0_response(input: &[u8]) {
    use memory_mem0::fuzzing;
    if let Err(err) = fuzzing::add(input) {
        typed(&err, DECODE, "Mem0 add answer");
    }
    if let Err(err) = fuzzing::search(input) {
        typed(&err, DECODE, "Mem0 search answer");
    }
    match fuzzing::list(input) {
        Ok(page) => assert_eq!(page.has_more, page.next.is_some(), "has_more without next"),
        Err(err) => typed(&err, DECODE, "Mem0 list answer"),
    }
    if let Err(err) = fuzzing::history(input) {
        typed(&err, DECODE, "Mem0 history answer");
    }
    if let Err(err) = fuzzing::get(input) {
        typed(&err, DECODE, "Mem0 get answer");
    }
    let _ = fuzzing::error_detail(input);
}

fn mem0_session_state(input: &[u8]) {
    let Some(value) = json(input) else { return };
    match Mem0SessionState::from_value(&value) {
        Ok(Some(state)) => {
            let again = Mem0SessionState::from_value(&state.to_value());
            assert!(
                matches!(&again, Ok(Some(s)) if *s == state),
                "Mem0 session state round trip: {again:?}"
            );
        }
        Ok(None) => assert!(value.is_null(), "no state from a non-null value"),
        Err(err) => typed(&err, DECODE, "Mem0SessionState::from_value"),
    }
}

fn openai_response(input: &[u8]) {
    use memory_openai::fuzzing;
    match fuzzing::completion(input) {
        Ok(response) => assert_eq!(response.messages.len(), 1, "one message per completion"),
        Err(err) => typed(&err, DECODE, "OpenAI chat completion answer"),
    }
    match fuzzing::embeddings(input, 2, 3) {
        Ok(vectors) => {
            assert_eq!(vectors.len(), 2, "one vector per input");
            assert!(vectors.iter().all(|v| v.len() == 3), "vector lengths");
        }
        Err(err) => typed(
            &err,
            &[ErrorKind::Serialization, ErrorKind::Backend],
            "OpenAI embeddings answer",
        ),
    }
    let _ = fuzzing::error_detail(input);
}
