//! The real samples written by Agent Framework 1.23 and LlamaIndex 0.14.25 (docs/interop/vectors/,
//! copied byte for byte from the shared interop notes) pin the conversions of
//! `memory_interop`: every sample reads into our types and writes back to the same bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::fs;
use std::path::{Path, PathBuf};

use memory_core::{ChatMessage, Media, MessageId, Part, Role};
use memory_interop::agent_framework::session::{export_session, import_session};
use memory_interop::agent_framework::{
    AfIdentity, AfOptions, af_identity, filter_new_messages, from_agent_framework,
    to_agent_framework,
};
use memory_interop::llamaindex::{LiOptions, from_llamaindex, to_llamaindex};
use memory_interop::python_json::dumps;
use serde_json::{Value, json};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/interop/vectors");
const SHARED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/interop/vectors"
);
const FILES: [&str; 3] = [
    "agent_framework_redis_keys.json",
    "agent_framework_session.json",
    "llamaindex_memory_get.json",
];

fn read(name: &str) -> String {
    let path = Path::new(VECTORS).join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn vector(name: &str) -> Value {
    serde_json::from_str(&read(name)).unwrap()
}

/// The list elements of every key of the Redis sample, as stored (strings).
fn redis_elements() -> Vec<String> {
    let keys = vector("agent_framework_redis_keys.json");
    let mut out = Vec::new();
    for key in keys.as_array().unwrap() {
        for element in key["elements"].as_array().unwrap() {
            out.push(element.as_str().unwrap().to_owned());
        }
    }
    out
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn repo_copies_match_the_shared_samples() {
    for name in FILES {
        let shared: PathBuf = Path::new(SHARED).join(name);
        // CI has shared/ beside the repository; elsewhere the repo copy stands alone.
        let Ok(original) = fs::read(&shared) else {
            continue;
        };
        let copy = fs::read(Path::new(VECTORS).join(name)).unwrap();
        assert!(
            copy == original,
            "docs/interop/vectors/{name} differs from {}",
            shared.display()
        );
    }
}

#[test]
fn dumps_reproduces_the_stored_elements() {
    let elements = redis_elements();
    assert_eq!(elements.len(), 6);
    for element in &elements {
        assert_eq!(&dumps(&parse(element)), element);
    }
}

#[test]
fn every_redis_element_round_trips_byte_identically() {
    for element in redis_elements() {
        let msg = from_agent_framework(&parse(&element)).unwrap();
        assert_eq!(
            dumps(&to_agent_framework(&msg, &AfOptions::default())),
            element
        );
        // Reading the same element again gives the same message, id included.
        assert_eq!(from_agent_framework(&parse(&element)).unwrap(), msg);
        // Nothing had to be kept aside: every field of these samples maps to one of ours.
        assert!(msg.metadata.is_empty(), "{element}: {:?}", msg.metadata);
    }
}

#[test]
fn redis_elements_read_as_expected() {
    let elements = redis_elements();
    let msgs: Vec<ChatMessage> = elements[..4]
        .iter()
        .map(|e| from_agent_framework(&parse(e)).unwrap())
        .collect();
    assert_eq!(msgs[0].role, Role::User);
    assert_eq!(msgs[0].text(), "What is on my calendar tomorrow?");
    assert_eq!(
        msgs[1].parts,
        vec![Part::ToolCall {
            id: "call_1".into(),
            name: "get_calendar".into(),
            arguments: r#"{"day":"2024-05-17"}"#.into(),
        }]
    );
    assert_eq!(msgs[1].id.as_str(), "msg_0001");
    assert_eq!(msgs[2].role, Role::Tool);
    assert_eq!(
        msgs[2].parts,
        vec![Part::ToolResult {
            call_id: "call_1".into(),
            content: "09:00 stand-up; 14:00 design review".into(),
        }]
    );
    assert_eq!(msgs[3].author_name.as_deref(), Some("planner"));
    assert_eq!(msgs[3].id.as_str(), "msg_0002");
    // The id-less user message has the same derived id in every list it appears in.
    assert_eq!(
        msgs[0].id,
        from_agent_framework(&parse(&elements[4])).unwrap().id
    );
}

fn assert_af_round_trip(msg: &ChatMessage) {
    for options in [AfOptions::default(), AfOptions::session_state()] {
        let text = dumps(&to_agent_framework(msg, &options));
        let back = from_agent_framework(&parse(&text)).unwrap();
        assert_eq!(&back, msg, "{text}");
    }
}

#[test]
fn ours_to_agent_framework_and_back_is_lossless() {
    assert_af_round_trip(&ChatMessage::user("Plain text"));
    assert_af_round_trip(&ChatMessage::user(
        "Grüße, 東京, emoji 🎉🇵🇹, NUL \u{0}, LS \u{2028}",
    ));
    assert_af_round_trip(&ChatMessage::assistant("Done.").with_author("planner"));
    assert_af_round_trip(&ChatMessage::tool_call(
        "call_1",
        "get_calendar",
        r#"{"day":"2024-05-17"}"#,
    ));
    assert_af_round_trip(&ChatMessage::tool_call("call_2", "search", "not json {"));
    assert_af_round_trip(&ChatMessage::tool_call(
        "call_3",
        "search",
        r#"{"q": "spaced"}"#,
    ));
    assert_af_round_trip(&ChatMessage::tool_result("call_1", "09:00 stand-up"));
    assert_af_round_trip(&ChatMessage::tool_result("call_1", "{\"json\": true}"));
    assert_af_round_trip(
        &ChatMessage::new(
            Role::Assistant,
            vec![
                Part::text("Two calls:"),
                Part::ToolCall {
                    id: "a".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                },
                Part::ToolCall {
                    id: "b".into(),
                    name: "g".into(),
                    arguments: r#"{"n":1.5,"list":[1,2]}"#.into(),
                },
            ],
        )
        .with_id(MessageId::new("msg-42").unwrap())
        .with_metadata("model", json!("gpt-4o-mini")),
    );
    assert_af_round_trip(&ChatMessage::new(
        Role::User,
        vec![
            Part::text("what is this?"),
            Part::Image(Media::url("https://example.com/a.png").with_detail("low")),
            Part::Data {
                media_type: "application/json".into(),
                data: json!({"k": [1, 2]}),
            },
        ],
    ));
}

#[test]
fn agent_framework_identity_and_dedupe() {
    let elements: Vec<Value> = redis_elements()[..4].iter().map(|e| parse(e)).collect();
    assert_eq!(
        af_identity(&elements[0]),
        r#"content:user:[{"additional_properties": {}, "text": "What is on my calendar tomorrow?", "type": "text"}]"#
    );
    assert_eq!(af_identity(&elements[1]), "id:msg_0001");
    assert!(AfIdentity::of(&elements[0]).is_id_less_user());
    assert!(!AfIdentity::of(&elements[1]).is_id_less_user());

    let next = to_agent_framework(
        &ChatMessage::user("And the day after?").with_id(MessageId::new("msg_0003").unwrap()),
        &AfOptions::default(),
    );
    // Full-transcript replay: only the new message is kept.
    let mut replay = elements.clone();
    replay.push(next.clone());
    assert_eq!(
        filter_new_messages(&elements, &replay),
        std::slice::from_ref(&next)
    );
    // Overlap of the stored tail with the incoming head.
    let tail = [elements[2].clone(), elements[3].clone(), next.clone()];
    assert_eq!(
        filter_new_messages(&elements, &tail),
        std::slice::from_ref(&next)
    );
    // Nothing in common.
    assert_eq!(
        filter_new_messages(&elements, std::slice::from_ref(&next)).len(),
        1
    );
    // One id-less user message is not a duplicate: a user may ask the same question twice.
    let question = [elements[0].clone()];
    assert_eq!(filter_new_messages(&question, &question), &question);
    // The same message converted from ours has the same identity as the stored one.
    let ours = from_agent_framework(&elements[0]).unwrap();
    assert_eq!(
        AfIdentity::of(&to_agent_framework(&ours, &AfOptions::default())),
        AfIdentity::of(&elements[0])
    );
    // And a replay of everything read back through our types is recognised as a replay.
    let through_ours: Vec<Value> = elements
        .iter()
        .map(|e| to_agent_framework(&from_agent_framework(e).unwrap(), &AfOptions::default()))
        .collect();
    assert!(filter_new_messages(&elements, &through_ours).is_empty());
}

#[test]
fn session_sample_imports_and_exports_byte_identically() {
    let sample = vector("agent_framework_session.json");
    for name in ["in_memory_history", "redis_history"] {
        let original = &sample[name];
        let imported = import_session(original).unwrap();
        let exported = export_session(&imported.session, &imported.messages);
        assert_eq!(dumps(&exported), dumps(original), "{name}");
        assert_eq!(imported.session.id().as_str(), "session-1");
        assert_eq!(imported.session.service_conversation_id(), None);
        assert!(imported.session.snapshot().is_empty(), "{name}");
    }
    let imported = import_session(&sample["in_memory_history"]).unwrap();
    assert_eq!(imported.messages.len(), 2);
    // The messages of the session are the same messages as the Redis list's first two.
    let elements = redis_elements();
    for (msg, element) in imported.messages.iter().zip(&elements) {
        assert_eq!(msg, &from_agent_framework(&parse(element)).unwrap());
    }
    // With a Redis history the session keeps only the provider's empty dict.
    let redis = import_session(&sample["redis_history"]).unwrap();
    assert!(redis.messages.is_empty());
    let source = memory_core::SourceId::new("redis_memory").unwrap();
    assert_eq!(redis.session.provider_state(&source), Some(&json!({})));
}

#[test]
fn llamaindex_memory_get_round_trips_byte_identically() {
    let sample = vector("llamaindex_memory_get.json");
    let result = sample["get_result"].as_array().unwrap();
    assert_eq!(result.len(), 3);
    for element in result {
        let msg = from_llamaindex(element).unwrap();
        assert!(msg.metadata.is_empty());
        assert_eq!(
            dumps(&to_llamaindex(&msg, &LiOptions::default())),
            dumps(element)
        );
    }
    let system = from_llamaindex(&result[0]).unwrap();
    assert_eq!(system.role, Role::System);
    assert!(system.text().starts_with("<memory>\n<core_info>"));
}

/// The `data` column of the rows in the interop notes (section 2) and the memory-block message.
const LLAMAINDEX_ROWS: [&str; 7] = [
    r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Hi, I am Dana. I am on call this week."}]}"#,
    r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Noted, Dana. I will keep your on-call week in mind."}]}"#,
    r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Remind me: which service paged me last night at 02:13 UTC?"}]}"#,
    r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "The billing service paged you at 02:13 UTC for a slow query."}]}"#,
    r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Thanks. Please summarise the incident in one line."}]}"#,
    r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Billing latency spike from a slow query; mitigated by adding an index."}]}"#,
    r#"{"role": "system", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "<memory>\n<core_info>\nThe user is Dana, an SRE.\n</core_info>\n</memory>"}]}"#,
];

#[test]
fn llamaindex_rows_round_trip_byte_identically() {
    for row in LLAMAINDEX_ROWS {
        let msg = from_llamaindex(&parse(row)).unwrap();
        assert_eq!(dumps(&to_llamaindex(&msg, &LiOptions::default())), row);
    }
    // The two active rows are the sample's get() result after the memory-block message.
    let sample = vector("llamaindex_memory_get.json");
    let result = sample["get_result"].as_array().unwrap();
    assert_eq!(dumps(&result[1]), LLAMAINDEX_ROWS[4]);
    assert_eq!(dumps(&result[2]), LLAMAINDEX_ROWS[5]);
}

#[test]
fn ours_to_llamaindex_and_back_is_lossless() {
    for msg in [
        ChatMessage::user("Grüße 🎉"),
        ChatMessage::assistant("ok").with_author("planner"),
        ChatMessage::tool_call("call_1", "get_calendar", r#"{"day":"2024-05-17"}"#),
        ChatMessage::tool_call("call_2", "f", "not json"),
        ChatMessage::tool_result("call_1", "09:00 stand-up"),
        ChatMessage::system("rules").with_metadata("k", json!({"z": 1, "a": 2})),
    ] {
        let text = dumps(&to_llamaindex(&msg, &LiOptions::default()));
        assert_eq!(from_llamaindex(&parse(&text)).unwrap(), msg, "{text}");
    }
}
