//! rig `Message` → `ChatMessage` (→ stored JSON →) `ChatMessage` → rig `Message` is the
//! identity for what rig can express; what rig cannot hold is a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::{ChatMessage, ErrorKind, Media, Part, Role};
use memory_rig::convert::{
    RIG_BLOCK_MEDIA_TYPE, RIG_METADATA_KEY, to_chat_message, to_rig_message, to_rig_messages,
};
use proptest::prelude::*;
use rig_core::completion::message::{
    AssistantContent, AssistantMessage, Audio, AudioMediaType, CallId, Document, DocumentMediaType,
    DocumentSourceKind, Image, ImageDetail, ImageMediaType, LocalCallId, Message, Opaque,
    Reasoning, StopReason, Text, ToolCall, ToolFunction, ToolName, ToolResult, ToolResultContent,
    UserContent,
};
use serde_json::{Value, json};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ,.!?_-]{0,24}",
        "\\PC{0,12}",
        Just(String::new())
    ]
}

fn name() -> impl Strategy<Value = ToolName> {
    "[a-z_]{1,12}".prop_map(|n| ToolName::new(n).unwrap())
}

fn call_id() -> impl Strategy<Value = CallId> {
    prop_oneof![
        "call_[a-zA-Z0-9]{1,16}".prop_map(CallId::from_wire),
        Just(()).prop_map(|()| CallId::Local(LocalCallId::new())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn source() -> impl Strategy<Value = DocumentSourceKind> {
    prop_oneof![
        "https://example\\.com/[a-z]{1,8}\\.png".prop_map(DocumentSourceKind::Url),
        "[A-Za-z0-9+/]{4,16}".prop_map(DocumentSourceKind::Base64),
        "file-[a-z0-9]{4,8}".prop_map(DocumentSourceKind::FileId),
        prop::collection::vec(any::<u8>(), 0..8).prop_map(DocumentSourceKind::Raw),
        text().prop_map(DocumentSourceKind::String),
        Just(DocumentSourceKind::Unknown),
    ]
}

fn image() -> impl Strategy<Value = Image> {
    (
        source(),
        prop::option::of(prop_oneof![
            Just(ImageMediaType::PNG),
            Just(ImageMediaType::JPEG),
            Just(ImageMediaType::SVG)
        ]),
        prop::option::of(prop_oneof![
            Just(ImageDetail::Low),
            Just(ImageDetail::High),
            Just(ImageDetail::Auto)
        ]),
    )
        .prop_map(|(data, media_type, detail)| Image {
            data,
            media_type,
            detail,
            native: None,
        })
}

fn tool_result() -> impl Strategy<Value = ToolResult> {
    let item = prop_oneof![
        text().prop_map(|t| ToolResultContent::Text(Text::new(t))),
        json_value().prop_map(|value| ToolResultContent::Json { value }),
        image().prop_map(ToolResultContent::Image),
    ];
    (
        call_id(),
        name(),
        prop::collection::vec(item, 0..3),
        any::<bool>(),
    )
        .prop_map(|(call, name, content, is_error)| ToolResult {
            call,
            name,
            content,
            is_error,
        })
}

fn user_content() -> impl Strategy<Value = UserContent> {
    prop_oneof![
        text().prop_map(|t| UserContent::Text(Text::new(t))),
        tool_result().prop_map(UserContent::ToolResult),
        image().prop_map(UserContent::Image),
        (
            source(),
            prop::option::of(prop_oneof![
                Just(AudioMediaType::WAV),
                Just(AudioMediaType::MP3)
            ])
        )
            .prop_map(|(data, media_type)| UserContent::Audio(Audio { data, media_type })),
        (
            source(),
            prop::option::of(prop_oneof![
                Just(DocumentMediaType::PDF),
                Just(DocumentMediaType::MARKDOWN)
            ]),
            prop::option::of(json_value().prop_map(|v| json!({ "title": v })))
        )
            .prop_map(|(data, media_type, additional_params)| {
                UserContent::Document(Document {
                    data,
                    media_type,
                    additional_params,
                })
            }),
    ]
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    let args = prop_oneof![
        prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        // Arguments that are not an object: kept verbatim as invalid arguments.
        json_value(),
        text().prop_map(Value::String),
        Just(Value::String("{\"q\": \"ab".to_owned())),
    ];
    (call_id(), name(), args)
        .prop_map(|(id, name, args)| ToolCall::new(id, ToolFunction::new(name, args)))
}

fn assistant_content() -> impl Strategy<Value = AssistantContent> {
    prop_oneof![
        text().prop_map(|t| AssistantContent::Text(Text::new(t))),
        (text(), json_value()).prop_map(|(t, item)| {
            AssistantContent::Text(Text::new(t)).with_native(json!({ "raw": item }))
        }),
        tool_call().prop_map(AssistantContent::ToolCall),
        (text(), any::<bool>()).prop_map(|(t, redacted)| {
            AssistantContent::Reasoning(Reasoning {
                redacted,
                ..Reasoning::new(t)
            })
        }),
        image().prop_map(AssistantContent::Image),
        (json_value(), any::<bool>())
            .prop_map(|(item, replay)| AssistantContent::Opaque(Opaque { item, replay })),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        text().prop_map(|content| Message::System { content }),
        prop::collection::vec(user_content(), 0..4).prop_map(|content| Message::User { content }),
        prop::collection::vec(tool_result().prop_map(UserContent::ToolResult), 1..4)
            .prop_map(|content| Message::User { content }),
        (
            prop::collection::vec(assistant_content(), 0..4),
            prop::option::of(prop_oneof![
                Just(StopReason::Stop),
                Just(StopReason::ToolUse),
                text().prop_map(StopReason::Aborted)
            ])
        )
            .prop_map(|(content, stop)| {
                Message::Assistant(AssistantMessage::new(content).with_stop(stop))
            }),
    ]
}

/// What a store does to a message: its JSON form, written and read back.
fn stored(message: &ChatMessage) -> ChatMessage {
    ChatMessage::from_json(&message.to_json().unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rig_to_chat_to_rig_is_the_identity(message in message()) {
        let chat = stored(&to_chat_message(&message).unwrap());
        prop_assert_eq!(to_rig_message(&chat).unwrap(), message.clone());
        prop_assert_eq!(to_rig_messages(std::slice::from_ref(&chat)).unwrap(), vec![message]);
    }

    #[test]
    fn a_conversation_round_trips(messages in prop::collection::vec(message(), 0..6)) {
        let chats: Vec<ChatMessage> = messages
            .iter()
            .map(|m| stored(&to_chat_message(m).unwrap()))
            .collect();
        prop_assert_eq!(to_rig_messages(&chats).unwrap(), messages);
    }
}

#[test]
fn a_tool_call_and_its_result_become_our_own_parts() {
    let call = ToolCall::new(
        CallId::from_wire("call_1"),
        ToolFunction::new(ToolName::new("add").unwrap(), json!({"a": 2, "b": 3})),
    );
    let turn = to_chat_message(&Message::Assistant(AssistantMessage::new(vec![
        AssistantContent::ToolCall(call.clone()),
    ])))
    .unwrap();
    assert_eq!(turn.role, Role::Assistant);
    assert_eq!(
        turn.parts,
        vec![Part::ToolCall {
            id: "call_1".into(),
            name: "add".into(),
            arguments: r#"{"a":2,"b":3}"#.into(),
        }]
    );
    // A call with a provider id and object arguments needs nothing beside its part.
    assert!(!turn.metadata.contains_key(RIG_METADATA_KEY));

    let result = to_chat_message(&Message::tool_results(vec![
        call.result(vec![ToolResultContent::text("5")]),
    ]))
    .unwrap();
    assert_eq!(result.role, Role::Tool);
    assert_eq!(
        result.parts,
        vec![Part::ToolResult {
            call_id: "call_1".into(),
            content: "5".into(),
        }]
    );
    assert_eq!(
        result.metadata[RIG_METADATA_KEY],
        json!({"tool_names": {"call_1": "add"}})
    );
}

#[test]
fn reasoning_is_a_data_part_of_rig_blocks() {
    let chat = to_chat_message(&Message::Assistant(AssistantMessage::new(vec![
        AssistantContent::reasoning("thinking"),
    ])))
    .unwrap();
    match &chat.parts[..] {
        [Part::Data { media_type, .. }] => assert_eq!(media_type, RIG_BLOCK_MEDIA_TYPE),
        other => panic!("expected one data part, got {other:?}"),
    }
}

#[test]
fn messages_written_by_agent_memory_convert_with_names_from_their_calls() {
    // What agent-memory's own Agent stores: one tool message per result, no rig metadata.
    let thread = vec![
        ChatMessage::system("be brief"),
        ChatMessage::user("2+3?"),
        ChatMessage::tool_call("c1", "add", r#"{"a":2,"b":3}"#),
        ChatMessage::tool_result("c1", "5"),
        ChatMessage::assistant("5"),
    ];
    let rig = to_rig_messages(&thread).unwrap();
    assert_eq!(rig[0], Message::system("be brief"));
    assert_eq!(rig[1], Message::user("2+3?"));
    assert_eq!(
        rig[3],
        Message::tool_result(CallId::from_wire("c1"), ToolName::new("add").unwrap(), "5")
    );
    assert_eq!(rig[4], Message::assistant("5"));
}

#[test]
fn what_rig_cannot_hold_is_an_unsupported_error() {
    let cases = vec![
        // A result whose call is nowhere and whose name was not recorded.
        vec![ChatMessage::tool_result("lost", "5")],
        // Application data in a user message.
        vec![ChatMessage::new(
            Role::User,
            vec![Part::Data {
                media_type: "application/x-app".into(),
                data: json!({"k": 1}),
            }],
        )],
        // Media in a system message.
        vec![ChatMessage::new(
            Role::System,
            vec![Part::Image(Media::url("https://example.com/a.png"))],
        )],
        // Audio from the assistant.
        vec![ChatMessage::new(
            Role::Assistant,
            vec![Part::Audio(Media::url("https://example.com/a.wav"))],
        )],
        // A tool call in a user message.
        vec![ChatMessage::new(
            Role::User,
            vec![Part::ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: "{}".into(),
            }],
        )],
        // A tool call with an empty name.
        vec![ChatMessage::tool_call("c", "", "{}")],
    ];
    for thread in cases {
        let error = to_rig_messages(&thread).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    }
}

#[test]
fn damaged_rig_metadata_is_a_serialization_error() {
    let mut chat = to_chat_message(&Message::user("hi")).unwrap();
    chat.metadata
        .insert(RIG_METADATA_KEY.into(), json!({"blocks": [1, 2, 3]}));
    assert_eq!(
        to_rig_message(&chat).unwrap_err().kind(),
        ErrorKind::Serialization
    );
    chat.metadata.insert(RIG_METADATA_KEY.into(), json!("x"));
    assert_eq!(
        to_rig_message(&chat).unwrap_err().kind(),
        ErrorKind::Serialization
    );
}

#[test]
fn a_refusal_becomes_assistant_text() {
    let chat = ChatMessage::new(
        Role::Assistant,
        vec![Part::Refusal {
            text: "I can't".into(),
        }],
    );
    assert_eq!(
        to_rig_message(&chat).unwrap(),
        Message::assistant("I can't")
    );
}
