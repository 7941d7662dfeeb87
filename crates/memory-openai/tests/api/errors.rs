//! Retries and the mapping of failures to error kinds, as OpenAI's "Error codes" page lists
//! them.

use std::error::Error as _;
use std::time::{Duration, Instant};

use memory_core::{ChatMessage, ChatModel, ChatRequest, Embedder, Error, ErrorKind};
use memory_http::testing::CapturedLogs;
use memory_openai::{HttpClientConfig, OpenAiChatModel, OpenAiEmbedder};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{KEY, config, error_body, request_count};

fn hello() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user("Hello")],
        ..ChatRequest::default()
    }
}

fn ok_answer() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
}

/// Mounts `first` for the first `times` requests, then a successful answer.
async fn fail_then_succeed(server: &MockServer, first: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(first)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ok_answer())
        .with_priority(2)
        .mount(server)
        .await;
}

async fn always(server: &MockServer, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .mount(server)
        .await;
}

/// Asserts the key is in none of the error's texts, its sources' included.
fn assert_no_key(err: &Error) {
    assert!(!err.to_string().contains(KEY), "{err}");
    assert!(!format!("{err:?}").contains(KEY), "{err:?}");
    let mut source = err.source();
    while let Some(cause) = source {
        assert!(!cause.to_string().contains(KEY), "{cause}");
        assert!(!format!("{cause:?}").contains(KEY), "{cause:?}");
        source = cause.source();
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_once_then_succeeds() {
    let server = MockServer::start().await;
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "1")
        .set_body_json(error_body(
            "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3.",
            "requests",
            Some("rate_limit_exceeded"),
        ));
    fail_then_succeed(&server, limited, 1).await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let started = Instant::now();
    let response = model.complete(&hello()).await.unwrap();
    assert_eq!(response.messages[0].text(), "Hi!");
    assert_eq!(request_count(&server).await, 2);
    // It waited as long as Retry-After asked, not the 10 ms backoff.
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn retry_after_ms_is_honoured_and_a_5xx_is_retried() {
    let server = MockServer::start().await;
    let unavailable = ResponseTemplate::new(503).insert_header("retry-after-ms", "20");
    fail_then_succeed(&server, unavailable, 2).await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    model.complete(&hello()).await.unwrap();
    assert_eq!(request_count(&server).await, 3);
}

#[tokio::test]
async fn repeated_500s_are_unavailable_after_max_retries_plus_one_attempts() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(500).set_body_json(error_body(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        )),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini").with_max_retries(2)).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.is_temporary());
    assert!(err.to_string().contains("after 3 attempts"), "{err}");
    assert!(err.to_string().contains("Sorry about that"), "{err}");
    assert_eq!(request_count(&server).await, 3);
}

#[tokio::test]
async fn a_rate_limit_that_persists_is_limit_exceeded() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(429).set_body_json(error_body(
            "Rate limit reached",
            "tokens",
            Some("rate_limit_exceeded"),
        )),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini").with_max_retries(1)).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("rate_limit_exceeded"), "{err}");
    assert_eq!(request_count(&server).await, 2);
    // A rate limit passes: the error says so whatever its kind, and names where it happened.
    assert!(err.is_temporary(), "{err}");
    assert_eq!(err.backend(), Some("openai"));
    assert_eq!(err.operation(), Some("chat completion"));
    assert!(
        err.to_string()
            .starts_with("limit_exceeded (openai chat completion): OpenAI chat completion"),
        "{err}"
    );
}

#[tokio::test]
async fn a_retry_after_longer_than_the_cap_fails_at_once() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(429).insert_header("retry-after", "120"),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("120.0 s"), "{err}");
    assert_eq!(request_count(&server).await, 1);
    assert!(err.is_temporary(), "{err}");
}

#[tokio::test]
async fn insufficient_quota_is_not_retried() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(error_body(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                Some("insufficient_quota"),
            )),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("insufficient_quota"), "{err}");
    assert!(
        err.to_string().contains("exceeded your current quota"),
        "{err}"
    );
    assert_eq!(request_count(&server).await, 1);
    // A used-up quota does not pass by waiting.
    assert!(!err.is_temporary(), "{err}");
}

#[tokio::test]
async fn a_401_is_invalid_input_and_never_shows_the_key() {
    let server = MockServer::start().await;
    // A server that echoes the key back in its message, as some do.
    always(
        &server,
        ResponseTemplate::new(401).set_body_json(error_body(
            &format!(
                "Incorrect API key provided: {KEY}. You can find your API key at \
                 https://platform.openai.com/account/api-keys."
            ),
            "invalid_request_error",
            Some("invalid_api_key"),
        )),
    )
    .await;
    let config = config(&server, "gpt-4o-mini");
    let model = OpenAiChatModel::new(config.clone()).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .contains("API key is invalid or lacks permission"),
        "{err}"
    );
    assert!(err.to_string().contains("invalid_api_key"), "{err}");
    assert_no_key(&err);
    assert!(!format!("{model:?}").contains(KEY));
    assert!(!format!("{config:?}").contains(KEY));
    assert!(!format!("{config:#?}").contains(KEY));
    let embedder = OpenAiEmbedder::new(config.with_model("text-embedding-3-small")).unwrap();
    assert!(!format!("{embedder:?}").contains(KEY));
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn a_403_is_invalid_input_and_not_retried() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(403).set_body_json(error_body(
            "You have insufficient permissions for this operation. Missing scopes: model.request.",
            "invalid_request_error",
            None,
        )),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("Missing scopes"), "{err}");
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn client_errors_map_to_their_kinds_without_retries() {
    for (status, kind) in [
        (400, ErrorKind::InvalidInput),
        (422, ErrorKind::InvalidInput),
        (404, ErrorKind::NotFound),
    ] {
        let server = MockServer::start().await;
        let mut body = error_body(
            "The model `gpt-9` does not exist or you do not have access to it.",
            "invalid_request_error",
            Some("model_not_found"),
        );
        body["error"]["param"] = json!("model");
        always(&server, ResponseTemplate::new(status).set_body_json(body)).await;
        let model = OpenAiChatModel::new(config(&server, "gpt-9")).unwrap();
        let err = model.complete(&hello()).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{status}: {err}");
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(err.to_string().contains("param: model"), "{err}");
        assert_eq!(request_count(&server).await, 1, "{status}");
    }
}

#[tokio::test]
async fn malformed_json_is_a_serialization_error() {
    let server = MockServer::start().await;
    always(
        &server,
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/json")
            .set_body_string("{\"choices\": [ {\"message\": "),
    )
    .await;
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn a_slow_server_is_a_timeout() {
    let server = MockServer::start().await;
    always(&server, ok_answer().set_delay(Duration::from_secs(3))).await;
    let model = OpenAiChatModel::new(
        config(&server, "gpt-4o-mini")
            .with_timeout(Duration::from_millis(200))
            .with_max_retries(1),
    )
    .unwrap();
    let started = Instant::now();
    let err = model.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.is_temporary());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn a_dead_port_is_unavailable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = memory_openai::OpenAiConfig::new("text-embedding-3-small")
        .with_base_url(format!("http://127.0.0.1:{port}/v1"))
        .with_api_key(KEY)
        .with_max_retries(1)
        .with_initial_backoff(Duration::from_millis(5));
    let embedder = OpenAiEmbedder::new(config).unwrap();
    let err = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("after 2 attempts"), "{err}");
    assert_no_key(&err);
}

#[tokio::test]
async fn tracing_names_the_model_and_status_but_never_the_key() {
    let server = MockServer::start().await;
    fail_then_succeed(&server, ResponseTemplate::new(502), 1).await;
    let captured = CapturedLogs::default();
    let subscriber = captured.subscriber();
    let model = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    {
        // The test runs on one thread, so the default subscriber sees the whole request.
        let _guard = tracing::subscriber::set_default(subscriber);
        model.complete(&hello()).await.unwrap();
    }
    let output = captured.text();
    assert!(output.contains("openai.request"), "{output}");
    assert!(output.contains("model=\"gpt-4o-mini\""), "{output}");
    assert!(output.contains("status=502"), "{output}");
    assert!(output.contains("retrying"), "{output}");
    assert!(!output.contains(KEY), "{output}");
    assert!(!output.contains("SECRET"), "{output}");
}

#[tokio::test]
async fn an_answer_larger_than_max_body_bytes_is_limit_exceeded_and_not_retried() {
    let server = MockServer::start().await;
    let big = "x".repeat(4_096);
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-big",
            "object": "chat.completion",
            "created": 1_715_900_000,
            "model": "gpt-4o-mini",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": big},
                "finish_reason": "stop"
            }]
        })))
        .mount(&server)
        .await;
    let small =
        OpenAiChatModel::new(config(&server, "gpt-4o-mini").with_max_body_bytes(1_024)).unwrap();
    let err = small.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    assert!(err.to_string().contains("1024 bytes"), "{err}");
    assert_eq!(request_count(&server).await, 1);
    // The default cap reads the same answer.
    let default = OpenAiChatModel::new(config(&server, "gpt-4o-mini")).unwrap();
    let response = default.complete(&hello()).await.unwrap();
    assert_eq!(response.messages[0].text().len(), 4_096);
}
