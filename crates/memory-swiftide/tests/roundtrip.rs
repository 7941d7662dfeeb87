//! swiftide message -> ours -> swiftide is the identity, also through our JSON form (what a
//! store writes), for every message swiftide can express.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::ChatMessage;
use memory_swiftide::swiftide_core::chat_completion::{
    ChatMessage as SwiftMessage, ToolCall, ToolOutput,
};
use memory_swiftide::{from_swiftide, to_swiftide, to_swiftide_all};
use proptest::prelude::*;
use serde_json::Value;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "\\PC{0,40}", "[a-z {}\":,0-9]{0,20}"]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    (
        "[A-Za-z0-9_-]{1,24}",
        "[a-z_]{1,16}",
        prop::option::of(text()),
    )
        .prop_map(|(id, name, args)| {
            ToolCall::builder()
                .id(id)
                .name(name)
                .maybe_args(args)
                .build()
                .unwrap()
        })
}

fn tool_output() -> impl Strategy<Value = ToolOutput> {
    prop_oneof![
        text().prop_map(ToolOutput::Text),
        text().prop_map(ToolOutput::Fail),
        prop::option::of(json_value()).prop_map(ToolOutput::FeedbackRequired),
        prop::option::of(json_value()).prop_map(ToolOutput::Stop),
        prop::option::of(json_value()).prop_map(ToolOutput::AgentFailed),
    ]
}

fn swiftide_message() -> impl Strategy<Value = SwiftMessage> {
    prop_oneof![
        text().prop_map(SwiftMessage::System),
        text().prop_map(SwiftMessage::User),
        text().prop_map(SwiftMessage::Summary),
        (
            prop::option::of(text()),
            prop::option::of(prop::collection::vec(tool_call(), 0..4))
        )
            .prop_map(|(text, calls)| SwiftMessage::Assistant(text, calls)),
        (tool_call(), tool_output()).prop_map(|(call, out)| SwiftMessage::ToolOutput(call, out)),
    ]
}

proptest! {
    #[test]
    fn swiftide_to_ours_and_back_is_the_identity(message in swiftide_message()) {
        let ours = from_swiftide(&message);
        prop_assert_eq!(to_swiftide(&ours).unwrap(), message.clone());
        // Through the JSON a store writes and reads.
        let stored = ChatMessage::from_json(&ours.to_json().unwrap()).unwrap();
        prop_assert_eq!(to_swiftide(&stored).unwrap(), message);
    }

    #[test]
    fn a_thread_converts_back_whole(messages in prop::collection::vec(swiftide_message(), 0..8)) {
        let ours: Vec<ChatMessage> = messages.iter().map(from_swiftide).collect();
        prop_assert_eq!(to_swiftide_all(&ours).unwrap(), messages);
    }
}
