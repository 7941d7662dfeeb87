//! The JSON test vectors of docs/format/ pin the message and session formats: every valid
//! vector decodes and re-encodes to the same JSON, every invalid one is a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::fs;
use std::path::{Path, PathBuf};

use memory_core::session::SESSION_STATE_VERSION;
use memory_core::{AgentSession, ChatMessage, ErrorKind, OpenAiMessage};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/format")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn message_vectors_round_trip() {
    let found = files(&vectors_dir(), "message-");
    assert!(found.len() >= 5, "message vectors missing: {found:?}");
    for path in found {
        let text = read(&path);
        let msg =
            ChatMessage::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let expected: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(msg.to_json_value().unwrap(), expected, "{}", path.display());
    }
}

#[test]
fn session_v1_vector_loads_and_keeps_unknown_provider_state() {
    let text = read(&vectors_dir().join("session-v1.json"));
    let session = AgentSession::from_json(&text).unwrap();
    assert_eq!(session.provider_sources().count(), 2);
    assert_eq!(session.history_messages("planner", 10).unwrap().len(), 1);
    assert_eq!(session.scope().key(), "acme|dana|~|history|trip-2024-05");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(AgentSession::deserialize(&value).unwrap(), session);
}

#[test]
fn session_v1_vector_migrates_to_the_v2_vector() {
    let v1 = read(&vectors_dir().join("session-v1.json"));
    let v2 = read(&vectors_dir().join("session-v2.json"));
    let migrated = AgentSession::from_json(&v1).unwrap();
    let expected: Value = serde_json::from_str(&v2).unwrap();
    assert_eq!(migrated.serialize().unwrap(), expected);
    assert_eq!(migrated, AgentSession::from_json(&v2).unwrap());
}

#[test]
fn session_v2_vector_round_trips_byte_exact() {
    let text = read(&vectors_dir().join("session-v2.json"));
    let session = AgentSession::from_json(&text).unwrap();
    let pretty = serde_json::to_string_pretty(&session.serialize().unwrap()).unwrap() + "\n";
    assert_eq!(pretty, text);
    let compact = session.to_json().unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(compact, serde_json::to_string(&expected).unwrap());
    assert_eq!(AgentSession::from_json(&compact).unwrap(), session);
    assert_eq!(session.provider_sources().count(), 2);
    assert!(AgentSession::deserialize_at(&expected, session.scope()).is_ok());
}

#[test]
fn a_future_session_version_is_refused_naming_both_versions() {
    let text = read(&vectors_dir().join("invalid/session-future-version.json"));
    let err = AgentSession::from_json(&text).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    let message = err.to_string();
    assert!(message.contains("version 3"), "{message}");
    assert!(
        message.contains(&format!("versions 1 to {SESSION_STATE_VERSION}")),
        "{message}"
    );
}

#[test]
fn openai_vector_converts_both_ways() {
    let doc: Value =
        serde_json::from_str(&read(&vectors_dir().join("openai-conversation.json"))).unwrap();
    let openai: Vec<OpenAiMessage> = serde_json::from_value(doc["openai"].clone()).unwrap();
    let ours: Vec<ChatMessage> = serde_json::from_value(doc["agent_memory"].clone()).unwrap();
    assert_eq!(openai.len(), ours.len());
    for (wire, mine) in openai.iter().zip(&ours) {
        let mut converted = ChatMessage::from_openai(wire.clone()).unwrap();
        converted.id = mine.id.clone();
        converted.created_at = mine.created_at;
        assert_eq!(&converted, mine);
        assert_eq!(mine.to_openai().unwrap(), vec![wire.clone()]);
    }
}

#[test]
fn invalid_vectors_are_serialization_errors() {
    let dir = vectors_dir().join("invalid");
    let messages = files(&dir, "message-");
    let sessions = files(&dir, "session-");
    assert!(messages.len() >= 4 && sessions.len() >= 4);
    for path in messages {
        let err = ChatMessage::from_json(&read(&path)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{}", path.display());
    }
    for path in sessions {
        let err = AgentSession::from_json(&read(&path)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization, "{}", path.display());
    }
}
