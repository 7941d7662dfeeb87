//! The hosted platform flavour against a local fake (wiremock) that answers as Mem0's platform
//! API reference (docs.mem0.ai, "API Reference › Memory") describes its v3 add / search / list
//! endpoints and its v1 memory, history, delete-all and ping endpoints, with the headers and
//! `org_id` / `project_id` parameters of the mem0ai 2.2 Python client: every request must carry
//! exactly the documented method, path (ending in `/`), headers and JSON body, and documented
//! answers, failures included, must map to the right results and error kinds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use memory_core::ErrorKind;
use memory_mem0::{
    AddRequest, Field, Filters, HttpClientConfig, ListRequest, Mem0Client, Mem0Message, Mem0Scope,
    MemoryEvent, MemoryUpdate, SearchRequest,
};
use serde_json::json;
use support::{KEY, assert_no_key, platform, platform_config, request_count};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockBuilder, MockServer, ResponseTemplate};

use crate::support;

const AUTH: &str = "Token m0-test-SECRET-0123456789abcdef";

fn alice() -> Mem0Scope {
    Mem0Scope::user("alice").unwrap()
}

fn memory(id: &str, text: &str) -> serde_json::Value {
    json!({
        "id": id, "memory": text, "user_id": "alice", "agent_id": null,
        "metadata": {"source": "chat"}, "categories": ["food"],
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-02T00:00:00Z",
        "immutable": false, "expiration_date": null
    })
}

fn with_org(server: &MockServer) -> Mem0Client {
    Mem0Client::new(
        platform_config(server)
            .with_org_id("org-1")
            .with_project_id("proj-1"),
    )
    .unwrap()
}

/// Answers every `verb` request to `route` at `server` with `response`, and expects `times`
/// of them when that is given.
async fn answer(
    server: &MockServer,
    verb: &str,
    route: &str,
    response: ResponseTemplate,
    times: Option<u64>,
) {
    let mut mock = Mock::given(method(verb))
        .and(path(route))
        .respond_with(response);
    if let Some(times) = times {
        mock = mock.expect(times);
    }
    mock.mount(server).await;
}

/// Asserts that `err` is of `kind` and that its text says each of `says`.
fn assert_error(err: &memory_core::Error, kind: ErrorKind, says: &[&str]) {
    assert_eq!(err.kind(), kind, "{err}");
    for text in says {
        assert!(err.to_string().contains(text), "{text}: {err}");
    }
}

/// One client call whose error a test looks at.
enum Call {
    /// `Mem0Client::add`.
    Add(AddRequest),
    /// `Mem0Client::search`.
    Search(SearchRequest),
    /// `Mem0Client::get` of this id.
    Get(&'static str),
}

/// A search for `query` in Alice's memories.
fn search(query: &str) -> Call {
    Call::Search(SearchRequest::new(query, alice()))
}

/// Starts a fake platform answering every request to `route` ("VERB /path") with `response`,
/// makes `call` there with a platform client, expects `times` requests, and hands back the
/// server and the call's error.
async fn failing(
    route: &str,
    response: ResponseTemplate,
    times: u64,
    call: Call,
) -> (MockServer, memory_core::Error) {
    let server = MockServer::start().await;
    let (verb, route) = route.split_once(' ').unwrap();
    answer(&server, verb, route, response, Some(times)).await;
    let client = platform(&server);
    let err = match call {
        Call::Add(request) => client.add(&request).await.map(|_| ()),
        Call::Search(request) => client.search(&request).await.map(|_| ()),
        Call::Get(id) => client.get(id).await.map(|_| ()),
    }
    .unwrap_err();
    (server, err)
}

/// A mock of `verb` `route` whose request must carry the test key.
fn keyed(verb: &str, route: &str) -> MockBuilder {
    Mock::given(method(verb))
        .and(path(route))
        .and(header("authorization", AUTH))
}

/// Mounts `mock` at `server` answering `response`, and expects exactly one request.
async fn once(server: &MockServer, mock: MockBuilder, response: ResponseTemplate) {
    mock.respond_with(response).expect(1).mount(server).await;
}

/// Starts a fake platform where `mock` answers `response`, and expects exactly one request.
async fn serve_once(mock: MockBuilder, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    once(&server, mock, response).await;
    server
}

/// Starts a fake platform whose memory `m1` answers `first` once, then holds `text`; when
/// `times` is given, each of the two answers is expected that many times.
async fn m1_fails_once_then(first: ResponseTemplate, text: &str, times: Option<u64>) -> MockServer {
    let server = MockServer::start().await;
    let mut mock = Mock::given(method("GET"))
        .and(path("/v1/memories/m1/"))
        .respond_with(first)
        .up_to_n_times(1);
    if let Some(times) = times {
        mock = mock.expect(times);
    }
    mock.mount(&server).await;
    let then = ResponseTemplate::new(200).set_body_json(memory("m1", text));
    answer(&server, "GET", "/v1/memories/m1/", then, times).await;
    server
}

#[tokio::test]
async fn add_posts_messages_with_top_level_ids_and_reads_the_queued_event() {
    let server = serve_once(
        keyed("POST", "/v3/memories/add/")
            .and(header("content-type", "application/json"))
            .and(header("accept", "application/json"))
            .and(body_json(json!({
                "messages": [
                    {"role": "user", "content": "I'm vegetarian."},
                    {"role": "assistant", "content": "Noted."}
                ],
                "user_id": "alice",
                "agent_id": "chef",
                "metadata": {"source": "chat"},
                "infer": false,
                "async_mode": true,
                "org_id": "org-1",
                "project_id": "proj-1"
            }))),
        ResponseTemplate::new(200).set_body_json(json!({
            "message": "Memory processing has been queued for background execution",
            "status": "PENDING",
            "event_id": "evt-1"
        })),
    )
    .await;
    let request = AddRequest::new(
        alice().with_agent_id("chef").unwrap(),
        vec![
            Mem0Message::user("I'm vegetarian."),
            Mem0Message::assistant("Noted."),
        ],
    )
    .with_metadata("source", "chat")
    .with_infer(false)
    .with_async_mode(true);
    let response = with_org(&server).add(&request).await.unwrap();
    assert!(response.is_queued());
    assert_eq!(response.event_id.as_deref(), Some("evt-1"));
    assert_eq!(response.status.as_deref(), Some("PENDING"));
}

#[tokio::test]
async fn add_reads_the_v1_list_answer() {
    let server = MockServer::start().await;
    answer(
        &server,
        "POST",
        "/v3/memories/add/",
        ResponseTemplate::new(200).set_body_json(json!([
            {"id": "m1", "data": {"memory": "Is vegetarian"}, "event": "ADD"}
        ])),
        None,
    )
    .await;
    let response = platform(&server)
        .add(&AddRequest::new(alice(), vec![Mem0Message::user("x")]))
        .await
        .unwrap();
    assert_eq!(response.results[0].id.as_deref(), Some("m1"));
    assert_eq!(response.results[0].memory.as_deref(), Some("Is vegetarian"));
    assert_eq!(response.results[0].event, Some(MemoryEvent::Add));
}

#[tokio::test]
async fn search_puts_the_ids_inside_filters() {
    let server = serve_once(
        keyed("POST", "/v3/memories/search/").and(body_json(json!({
            "query": "What should I cook?",
            "filters": {"AND": [
                {"user_id": "alice"},
                {"run_id": "trip-1"},
                {"OR": [
                    {"categories": {"contains": "food"}},
                    {"created_at": {"gte": "2025-01-01"}}
                ]},
                {"agent_id": "*"}
            ]},
            "top_k": 3,
            "threshold": 0.3,
            "rerank": true
        }))),
        ResponseTemplate::new(200).set_body_json(json!({
            "results": [
                {"id": "m1", "memory": "Is vegetarian", "score": 0.91, "user_id": "alice"},
                {"id": "m2", "memory": "Likes pasta", "score": 0.72, "user_id": "alice"}
            ]
        })),
    )
    .await;
    let request = SearchRequest::new(
        "What should I cook?",
        alice().with_run_id("trip-1").unwrap(),
    )
    .with_filters(Filters::and([
        Filters::or([
            Filters::contains(Field::Categories, "food"),
            Filters::gte(Field::CreatedAt, "2025-01-01"),
        ]),
        Filters::any(Field::AgentId),
    ]))
    .with_top_k(3)
    .with_threshold(0.3)
    .with_rerank(true);
    let found = platform(&server).search(&request).await.unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].memory, "Is vegetarian");
    assert_eq!(found[0].score, Some(0.91));
}

#[tokio::test]
async fn search_reads_a_bare_list_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .and(body_json(json!({
            "query": "tea?",
            "filters": {"AND": [{"user_id": "alice"}]},
            "org_id": "org-1",
            "project_id": "proj-1"
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([memory("m1", "Likes tea")])))
        .mount(&server)
        .await;
    let found = with_org(&server)
        .search(&SearchRequest::new("tea?", alice()))
        .await
        .unwrap();
    assert_eq!(found[0].memory, "Likes tea");
    assert_eq!(found[0].categories, ["food"]);
    assert_eq!(found[0].metadata.as_ref().unwrap()["source"], "chat");
}

#[tokio::test]
async fn list_posts_filters_with_the_page_in_the_query() {
    let server = serve_once(
        keyed("POST", "/v3/memories/")
            .and(query_param("page", "2"))
            .and(query_param("page_size", "1"))
            .and(body_json(json!({
                "filters": {"AND": [{"user_id": "alice"}, {"metadata": {"source": "chat"}}]}
            }))),
        ResponseTemplate::new(200).set_body_json(json!({
            "count": 3,
            "next": "https://api.mem0.ai/v3/memories/?page=3&page_size=1",
            "previous": "https://api.mem0.ai/v3/memories/?page=1&page_size=1",
            "results": [memory("m2", "Likes pasta")]
        })),
    )
    .await;
    let page = platform(&server)
        .list(
            &ListRequest::new(alice())
                .with_filters(Filters::metadata("source", "chat"))
                .with_page(2, 1),
        )
        .await
        .unwrap();
    assert_eq!(page.count, Some(3));
    assert!(page.has_more);
    assert_eq!(page.results[0].id, "m2");
}

#[tokio::test]
async fn one_memory_get_update_delete_and_history_use_v1_paths_with_org_params() {
    let server = serve_once(
        keyed("GET", "/v1/memories/m1/")
            .and(query_param("org_id", "org-1"))
            .and(query_param("project_id", "proj-1")),
        ResponseTemplate::new(200).set_body_json(memory("m1", "Likes tea")),
    )
    .await;
    once(
        &server,
        keyed("PUT", "/v1/memories/m1/")
            .and(query_param("org_id", "org-1"))
            .and(body_json(
                json!({"text": "Likes green tea", "metadata": {"v": 2}}),
            )),
        ResponseTemplate::new(200).set_body_json(memory("m1", "Likes green tea")),
    )
    .await;
    once(
        &server,
        keyed("DELETE", "/v1/memories/m1/").and(query_param("project_id", "proj-1")),
        ResponseTemplate::new(200)
            .set_body_json(json!({"message": "Memory deleted successfully!"})),
    )
    .await;
    once(
        &server,
        keyed("GET", "/v1/memories/m1/history/"),
        ResponseTemplate::new(200).set_body_json(json!([
            {
                "id": "h1", "memory_id": "m1", "input": [{"role": "user", "content": "I like tea"}],
                "old_memory": null, "new_memory": "Likes tea", "user_id": "alice",
                "event": "ADD", "metadata": null, "categories": ["food"],
                "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"
            },
            {
                "id": "h2", "memory_id": "m1", "input": [],
                "old_memory": "Likes tea", "new_memory": "Likes green tea", "event": "UPDATE"
            }
        ])),
    )
    .await;
    let client = with_org(&server);
    assert_eq!(client.get("m1").await.unwrap().memory, "Likes tea");
    let mut metadata = serde_json::Map::new();
    metadata.insert("v".into(), json!(2));
    let updated = client
        .update(
            "m1",
            &MemoryUpdate::text("Likes green tea").with_metadata(metadata),
        )
        .await
        .unwrap();
    assert_eq!(updated.unwrap().memory, "Likes green tea");
    client.delete("m1").await.unwrap();
    let history = client.history("m1").await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].input[0].content, "I like tea");
    assert_eq!(history[1].event, Some(MemoryEvent::Update));
    assert_eq!(history[1].old_memory.as_deref(), Some("Likes tea"));
}

#[tokio::test]
async fn delete_all_sends_the_scope_as_query_parameters() {
    let server = serve_once(
        keyed("DELETE", "/v1/memories/")
            .and(query_param("user_id", "alice"))
            .and(query_param("app_id", "shop")),
        ResponseTemplate::new(200)
            .set_body_json(json!({"message": "Memories deleted successfully!"})),
    )
    .await;
    platform(&server)
        .delete_all(&alice().with_app_id("shop").unwrap())
        .await
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].url.query(), Some("user_id=alice&app_id=shop"));
}

#[tokio::test]
async fn ping_checks_the_key_and_reset_is_not_a_platform_endpoint() {
    let server = serve_once(
        keyed("GET", "/v1/ping/"),
        ResponseTemplate::new(200).set_body_json(json!({
            "status": "ok", "org_id": "org-1", "project_id": "proj-1",
            "user_email": "dev@example.com"
        })),
    )
    .await;
    let client = platform(&server);
    let ping = client.ping().await.unwrap();
    assert_eq!(ping.status.as_deref(), Some("ok"));
    assert_eq!(ping.project_id.as_deref(), Some("proj-1"));
    let err = client.reset().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_invalid_key_is_invalid_input_and_never_shown() {
    let response = ResponseTemplate::new(401)
        .set_body_json(json!({"detail": format!("Invalid token: {KEY}")}));
    let (server, err) = failing("POST /v3/memories/search/", response, 1, search("q")).await;
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        &["API key is invalid", "401"],
    );
    assert_no_key(&err);
    assert!(!format!("{:?}", platform(&server)).contains(KEY));
    assert!(!format!("{:?}", platform_config(&server)).contains(KEY));
}

#[tokio::test]
async fn a_missing_memory_is_not_found() {
    let response = ResponseTemplate::new(404).set_body_json(json!({"detail": "Memory not found"}));
    let (_, err) = failing("GET /v1/memories/nope/", response, 1, Call::Get("nope")).await;
    assert_error(&err, ErrorKind::NotFound, &["Memory not found"]);
}

#[tokio::test]
async fn a_rate_limit_is_retried_then_limit_exceeded() {
    let response =
        ResponseTemplate::new(429).set_body_json(json!({"detail": "Request was throttled."}));
    // max_retries = 2
    let (_, err) = failing("POST /v3/memories/search/", response, 3, search("q")).await;
    assert_error(
        &err,
        ErrorKind::LimitExceeded,
        &["rate limit", "after 3 attempts"],
    );
    // A rate limit passes: the error says so whatever its kind, and names where it happened.
    assert!(err.is_temporary(), "{err}");
    assert_eq!(err.backend(), Some("mem0"));
    assert_eq!(err.operation(), Some("search"));
    assert!(
        err.to_string()
            .starts_with("limit_exceeded (mem0 search): "),
        "{err}"
    );
}

#[tokio::test]
async fn a_used_up_quota_is_limit_exceeded_and_not_retried() {
    let response = ResponseTemplate::new(429).set_body_json(
        json!({"detail": "Monthly usage limit exceeded. Please upgrade your plan."}),
    );
    let add = Call::Add(AddRequest::new(alice(), vec![Mem0Message::user("x")]));
    let (_, err) = failing("POST /v3/memories/add/", response, 1, add).await;
    assert_error(&err, ErrorKind::LimitExceeded, &["quota"]);
    assert!(!err.is_temporary(), "{err}");
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let first = ResponseTemplate::new(503).insert_header("retry-after", "0.3");
    let server = m1_fails_once_then(first, "Likes tea", Some(1)).await;
    let started = Instant::now();
    let found = platform(&server).get("m1").await.unwrap();
    assert_eq!(found.id, "m1");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_retry_after_longer_than_the_longest_backoff_fails_at_once() {
    let response = ResponseTemplate::new(429).insert_header("retry-after", "3600");
    let (_, err) = failing("GET /v1/memories/m1/", response, 1, Call::Get("m1")).await;
    assert_error(&err, ErrorKind::LimitExceeded, &["asked to wait 3600.0 s"]);
    assert!(err.is_temporary(), "{err}");
}

#[tokio::test]
async fn a_bad_request_is_invalid_input_and_not_retried() {
    let response = ResponseTemplate::new(400)
        .set_body_json(json!({"error": "Invalid filters: unknown key 'colour'"}));
    let request = SearchRequest::new("q", alice())
        .with_filters(Filters::eq(Field::Other("colour".into()), "red"));
    let (_, err) = failing(
        "POST /v3/memories/search/",
        response,
        1,
        Call::Search(request),
    )
    .await;
    assert_error(&err, ErrorKind::InvalidInput, &["unknown key 'colour'"]);
}

#[tokio::test]
async fn an_answer_that_is_not_the_documented_json_is_a_serialization_error() {
    let server = MockServer::start().await;
    answer(
        &server,
        "POST",
        "/v3/memories/search/",
        ResponseTemplate::new(200).set_body_string("<html>hello</html>"),
        None,
    )
    .await;
    answer(
        &server,
        "GET",
        "/v1/memories/m1/",
        ResponseTemplate::new(200).set_body_json(json!({"memory": "no id"})),
        None,
    )
    .await;
    let client = platform(&server);
    let err = client
        .search(&SearchRequest::new("q", alice()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert_eq!(
        client.get("m1").await.unwrap_err().kind(),
        ErrorKind::Serialization
    );
}

#[tokio::test]
async fn invalid_requests_never_reach_the_server() {
    let server = MockServer::start().await;
    let client = platform(&server);
    let no_messages = client.add(&AddRequest::new(alice(), vec![])).await;
    assert_eq!(no_messages.unwrap_err().kind(), ErrorKind::InvalidInput);
    let no_query = client.search(&SearchRequest::new("  ", alice())).await;
    assert_eq!(no_query.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(
        client.get("").await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let nothing = client.update("m1", &MemoryUpdate::default()).await;
    assert_eq!(nothing.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_after_retries() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = support::quick(
        memory_mem0::Mem0Config::platform(KEY).with_base_url(format!("http://127.0.0.1:{port}")),
    )
    .with_max_retries(1);
    let err = Mem0Client::new(config)
        .unwrap()
        .get("m1")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("after 2 attempts"), "{err}");
    assert_no_key(&err);
}

#[tokio::test]
async fn traces_name_the_endpoint_and_status_but_never_the_key() {
    let server = m1_fails_once_then(ResponseTemplate::new(502), "x", None).await;
    let captured = support::Captured::default();
    let client = platform(&server);
    {
        let _guard = tracing::subscriber::set_default(captured.subscriber());
        client.get("m1").await.unwrap();
    }
    let output = captured.text();
    assert!(output.contains("mem0.request"), "{output}");
    assert!(output.contains("endpoint=\"get\""), "{output}");
    assert!(output.contains("status=502"), "{output}");
    assert!(output.contains("retrying"), "{output}");
    assert!(!output.contains("SECRET"), "{output}");
}

#[tokio::test]
async fn an_answer_larger_than_max_body_bytes_is_limit_exceeded_and_not_retried() {
    let server = MockServer::start().await;
    let results: Vec<serde_json::Value> = (0..50)
        .map(|i| memory(&format!("m{i}"), &"a long memory ".repeat(10)))
        .collect();
    answer(
        &server,
        "POST",
        "/v3/memories/search/",
        ResponseTemplate::new(200).set_body_json(json!({ "results": results })),
        None,
    )
    .await;
    let small = Mem0Client::new(platform_config(&server).with_max_body_bytes(1_024)).unwrap();
    let err = small
        .search(&SearchRequest::new("tea", alice()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    assert!(err.to_string().contains("1024 bytes"), "{err}");
    assert_eq!(request_count(&server).await, 1);
    // The default cap reads the same answer.
    let found = platform(&server)
        .search(&SearchRequest::new("tea", alice()))
        .await
        .unwrap();
    assert_eq!(found.len(), 50);
}
