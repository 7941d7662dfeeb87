//! Request shapes schemathesis found the server accepting against its OpenAPI document: a
//! JSON array where an object is required (`[null, null]` read as a `ForgetRequest` forgot the
//! whole tenant), and integers past the documented `int64` range. Each is refused with a 400
//! problem document and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use agent_memory::TenantId;
use memory_server::Server;
use memory_server::auth::{Authenticator, Principal};
use memory_server::ops::{Ops, OpsLimits};
use serde_json::{Value, json};

/// An in-process server on the in-memory stores; the base URL and the shutdown sender.
async fn start() -> (String, tokio::sync::oneshot::Sender<()>) {
    let stores = agent_memory::open("memory:").await.unwrap();
    let principal = Principal {
        tenant: TenantId::new("shapes").unwrap(),
        user: None,
    };
    let server = Server::bind_with(
        "127.0.0.1:0".parse().unwrap(),
        Ops::new(stores, OpsLimits::default()),
        Authenticator::Open(principal),
        1024 * 1024,
    )
    .await
    .unwrap();
    let url = format!("http://{}", server.local_addr());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async {
        let _ = rx.await;
    }));
    (url, tx)
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.unwrap();
    (status, body)
}

async fn seed(client: &reqwest::Client, url: &str) {
    let (status, body) = send(
        client
            .post(format!("{url}/v1/threads/s1/messages"))
            .json(&json!({"messages": [{"id": "m1", "role": "user", "text": "keep me"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

async fn active(client: &reqwest::Client, url: &str) -> u64 {
    let (status, body) = send(client.get(format!("{url}/v1/threads/s1/count"))).await;
    assert_eq!(status, 200, "{body}");
    body["active"].as_u64().unwrap()
}

#[tokio::test]
async fn a_json_array_body_is_refused_and_forgets_nothing() {
    let (url, _stop) = start().await;
    let client = memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap();
    seed(&client, &url).await;
    for body in ["[null, null]", "[]", " [\"s1\"]", "null", "\"s1\"", "3"] {
        let (status, problem) = send(
            client
                .post(format!("{url}/v1/forget"))
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        assert_eq!(status, 400, "{body}: {problem}");
        assert_eq!(problem["kind"], "invalid_input", "{body}: {problem}");
        assert_eq!(problem["detail"], "the request body must be a JSON object");
    }
    assert_eq!(
        active(&client, &url).await,
        1,
        "a refused forget deleted the thread"
    );
    // An object, even after whitespace, is read as before.
    let (status, receipt) = send(
        client
            .post(format!("{url}/v1/forget"))
            .header("content-type", "application/json; charset=utf-8")
            .body(" \n{\"session\": \"s1\", \"dry_run\": true}"),
    )
    .await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["total_items"], 1, "{receipt}");
    // And a body that is not declared JSON is still refused.
    let (status, problem) = send(
        client
            .post(format!("{url}/v1/forget"))
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(active(&client, &url).await, 1);
}

#[tokio::test]
async fn integers_past_int64_are_refused() {
    let (url, _stop) = start().await;
    let client = memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap();
    seed(&client, &url).await;
    let past = u64::try_from(i64::MAX).unwrap() + 1;
    for query in [format!("token_budget={past}"), format!("after={past}")] {
        let (status, problem) =
            send(client.get(format!("{url}/v1/threads/s1/messages?{query}"))).await;
        assert_eq!(status, 400, "{query}: {problem}");
        assert_eq!(problem["kind"], "invalid_input", "{problem}");
    }
    for query in [
        format!("token_budget={}", i64::MAX),
        format!("after={}", i64::MAX),
    ] {
        let (status, body) =
            send(client.get(format!("{url}/v1/threads/s1/messages?{query}"))).await;
        assert_eq!(status, 200, "{query}: {body}");
    }
    let (status, problem) = send(
        client
            .post(format!("{url}/v1/threads/s1/archive"))
            .json(&json!({"from": 1, "to": past})),
    )
    .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(
        active(&client, &url).await,
        1,
        "a refused archive archived the message"
    );
    let (status, body) = send(
        client
            .post(format!("{url}/v1/threads/s1/archive"))
            .json(&json!({"from": 1, "to": i64::MAX})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(active(&client, &url).await, 0);
}

#[tokio::test]
async fn a_session_state_is_any_json_value_as_documented() {
    let (url, _stop) = start().await;
    let client = memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap();
    // The document promised an object while the server kept any value: a number saved, then
    // loaded, was a response outside the document. It now says "any JSON value".
    let (status, doc) = send(client.get(format!("{url}/openapi.json"))).await;
    assert_eq!(status, 200);
    for (schema, field) in [("SaveBody", "state"), ("SessionView", "state")] {
        let property = &doc["components"]["schemas"][schema]["properties"][field];
        assert!(property.is_object(), "{schema}.{field}: {property}");
        assert!(
            property.get("type").is_none(),
            "{schema}.{field}: {property}"
        );
    }
    for (i, state) in [
        json!(-2.0e16),
        json!(null),
        json!("text"),
        json!([1, 2]),
        json!({"a": 1}),
    ]
    .into_iter()
    .enumerate()
    {
        let session = format!("st{i}");
        let (status, body) = send(
            client
                .put(format!("{url}/v1/sessions/{session}"))
                .json(&json!({ "state": state })),
        )
        .await;
        assert_eq!(status, 200, "{state}: {body}");
        let (status, loaded) = send(client.get(format!("{url}/v1/sessions/{session}"))).await;
        assert_eq!(status, 200, "{loaded}");
        assert_eq!(loaded["state"], state);
    }
}

/// The OpenAPI document gives a message's role as the enum of the roles the server accepts.
#[test]
fn the_openapi_role_is_an_enum_of_the_accepted_roles() {
    use utoipa::OpenApi;
    let doc = serde_json::to_value(memory_server::http::ApiDoc::openapi()).unwrap();
    let role = &doc["components"]["schemas"]["RoleName"];
    assert_eq!(
        role["enum"],
        serde_json::json!(["system", "developer", "user", "assistant", "tool"]),
        "{role}"
    );
    for name in ["system", "developer", "user", "assistant", "tool"] {
        let parsed: agent_memory::Role =
            serde_json::from_value(serde_json::Value::String(name.to_owned())).unwrap();
        assert_eq!(serde_json::to_value(parsed).unwrap(), name);
    }
}

/// Issue 29 (16): a declared body over the limit with `Expect: 100-continue` is answered 413
/// at once, never `100 Continue` (which invites the client to send it all), on every route
/// that takes a body, `/mcp` included (as a JSON-RPC error there); and nothing is stored.
#[tokio::test]
async fn an_oversized_body_that_expects_100_continue_is_refused_first() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (url, _stop) = start().await;
    let authority = url.trim_start_matches("http://").to_owned();
    for path in ["/v1/threads/s1/messages", "/v1/forget", "/mcp"] {
        let mut socket = tokio::net::TcpStream::connect(&authority).await.unwrap();
        socket
            .write_all(
                format!(
                    "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\nExpect: 100-continue\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let mut answer = Vec::new();
        // The server closes the connection after its answer (the body is never read).
        tokio::time::timeout(
            std::time::Duration::from_secs(15),
            socket.read_to_end(&mut answer),
        )
        .await
        .expect("an answer within 15 s")
        .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(!answer.contains("100 Continue"), "{path}: {answer}");
        if path == "/mcp" {
            // The MCP endpoint answers in its own protocol: a JSON-RPC error without an id.
            assert!(
                answer.contains("application/json")
                    && answer.contains("\"jsonrpc\":\"2.0\"")
                    && answer.contains("\"code\":-32600"),
                "{path}: {answer}"
            );
        } else {
            assert!(
                answer.contains("application/problem+json") && answer.contains("limit_exceeded"),
                "{path}: {answer}"
            );
        }
    }
    let client = memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap();
    let (status, body) = send(client.get(format!("{url}/v1/threads/s1/count"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["active"], 0);
}
