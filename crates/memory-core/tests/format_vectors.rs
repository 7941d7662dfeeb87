//! The JSON test vectors of docs/format/ pin the message and session formats: every valid
//! vector decodes and re-encodes to the same JSON, every invalid one is a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Test helpers fail loudly.

use std::fs;
use std::path::{Path, PathBuf};

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
fn session_vector_round_trips_and_keeps_unknown_provider_state() {
    let text = read(&vectors_dir().join("session-v1.json"));
    let session = AgentSession::from_json(&text).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(session.serialize().unwrap(), expected);
    assert_eq!(session.provider_sources().count(), 2);
    assert_eq!(session.history_messages("planner", 10).unwrap().len(), 1);
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
