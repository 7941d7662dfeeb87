//! `OpenAiChatModel` against "Create chat completion".

use memory_core::{ChatMessage, ChatModel, ChatRequest, ErrorKind, Part, Role, ToolDefinition};
use memory_openai::OpenAiChatModel;
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{KEY, config, request_count};

fn calendar_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_calendar".into(),
        description: "Reads the user's calendar for one day.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"day": {"type": "string", "format": "date"}},
            "required": ["day"],
            "additionalProperties": false
        }),
    }
}

#[tokio::test]
async fn sends_the_documented_request_and_reads_tool_calls_and_usage() {
    let server = MockServer::start().await;
    let expected_body = json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a calendar assistant."},
            {"role": "user", "content": "What is on tomorrow?", "name": "dana"},
            {"role": "assistant", "tool_calls": [{
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_calendar", "arguments": "{\"day\":\"2024-05-17\"}"}
            }]},
            {"role": "tool", "content": "[\"dentist 9:00\"]", "tool_call_id": "call_1"},
            {"role": "user", "content": "And the day after?"}
        ],
        "tools": [{
            "type": "function",
            "function": {
                "name": "get_calendar",
                "description": "Reads the user's calendar for one day.",
                "parameters": {
                    "type": "object",
                    "properties": {"day": {"type": "string", "format": "date"}},
                    "required": ["day"],
                    "additionalProperties": false
                }
            }
        }],
        "temperature": 0.25,
        "max_completion_tokens": 256
    });
    // The chat completion object, as the reference shows it.
    let answer = json!({
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1_715_900_000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "refusal": null,
                "annotations": [],
                "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "get_calendar", "arguments": "{\"day\":\"2024-05-18\"}"}},
                    {"id": "call_3", "type": "function",
                     "function": {"name": "get_calendar", "arguments": "{\"day\":\"2024-05-19\"}"}}
                ]
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {
            "prompt_tokens": 82,
            "completion_tokens": 17,
            "total_tokens": 99,
            "completion_tokens_details": {"reasoning_tokens": 0}
        }
    });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .and(header("content-type", "application/json"))
        .and(header("openai-organization", "org-test"))
        .and(header("openai-project", "proj_test"))
        .and(body_json(&expected_body))
        .respond_with(ResponseTemplate::new(200).set_body_json(&answer))
        .expect(1)
        .mount(&server)
        .await;

    let model = OpenAiChatModel::builder(
        config(&server, "gpt-4o-mini")
            .with_organization("org-test")
            .with_project("proj_test"),
    )
    .temperature(0.25)
    .max_completion_tokens(256)
    .build()
    .unwrap();
    let response = model
        .complete(&ChatRequest {
            messages: vec![
                ChatMessage::system("You are a calendar assistant."),
                ChatMessage::user("What is on tomorrow?").with_author("dana"),
                ChatMessage::tool_call("call_1", "get_calendar", "{\"day\":\"2024-05-17\"}"),
                ChatMessage::tool_result("call_1", "[\"dentist 9:00\"]"),
                ChatMessage::user("And the day after?"),
            ],
            tools: vec![calendar_tool()],
            conversation_id: None,
        })
        .await
        .unwrap();

    assert_eq!(response.messages.len(), 1);
    let message = &response.messages[0];
    assert_eq!(message.role, Role::Assistant);
    assert_eq!(
        message.tool_call_ids().collect::<Vec<_>>(),
        ["call_2", "call_3"]
    );
    assert_eq!(
        message.parts[0],
        Part::ToolCall {
            id: "call_2".into(),
            name: "get_calendar".into(),
            arguments: "{\"day\":\"2024-05-18\"}".into(),
        }
    );
    let usage = response.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (82, 17));
    assert_eq!(response.conversation_id, None);
}

#[tokio::test]
async fn omits_tools_and_options_when_unset_and_sends_no_key_when_none() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_json(json!({
            "model": "llama3.1",
            "messages": [{"role": "user", "content": "Hi"}]
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "llama3.1",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help?"},
                "finish_reason": "stop"
            }]
        })))
        .expect(1)
        .mount(&server)
        .await;

    let mut config = config(&server, "llama3.1");
    config.api_key = None;
    let model = OpenAiChatModel::new(config).unwrap();
    let response = model
        .complete(&ChatRequest {
            messages: vec![ChatMessage::user("Hi")],
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(response.messages[0].text(), "Hello! How can I help?");
    assert_eq!(response.usage, None);

    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
    assert!(requests[0].headers.get("openai-organization").is_none());
}

#[tokio::test]
async fn reads_a_refusal_and_text_parts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": null,
                            "refusal": "I can't help with that."},
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
        })))
        .mount(&server)
        .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o")).unwrap();
    let response = model
        .complete(&ChatRequest {
            messages: vec![ChatMessage::user("something bad")],
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(
        response.messages[0].parts,
        vec![Part::Refusal {
            text: "I can't help with that.".into()
        }]
    );
}

#[tokio::test]
async fn a_service_held_conversation_is_unsupported_and_sends_nothing() {
    let server = MockServer::start().await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model
        .complete(&ChatRequest {
            messages: vec![ChatMessage::user("Hi")],
            tools: Vec::new(),
            conversation_id: Some("conv_123".into()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.to_string().contains("conversation_id"), "{err}");
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn messages_without_an_openai_form_and_empty_requests_are_invalid_input() {
    let server = MockServer::start().await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model.complete(&ChatRequest::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let data = ChatMessage::new(
        Role::User,
        vec![Part::Data {
            media_type: "application/x-opaque".into(),
            data: json!(1),
        }],
    );
    let err = model
        .complete(&ChatRequest {
            messages: vec![data],
            ..ChatRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn an_answer_without_choices_is_a_serialization_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"choices": []})))
        .mount(&server)
        .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model
        .complete(&ChatRequest {
            messages: vec![ChatMessage::user("Hi")],
            ..ChatRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
}
