//! DNS rebinding (issue 29, 1): a server without tokens answered every `/v1` route whatever
//! the `Host` header, so a page of another site whose name resolves to 127.0.0.1 could read
//! and delete memory. One check now covers every route, `/mcp` included: only loopback names,
//! the listen IP and `http.allowed_hosts` are answered (and browsers' `Origin` on them);
//! anything else is a 403 problem document and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use reqwest::Method;
use serde_json::{Value, json};

use support::{Kind, TOKEN_A, TestServer, assert_problem, start_in_memory};

/// Sends `method path` with the given `Host` and `Origin` headers (and a JSON body for the
/// methods that take one).
async fn send_as(
    srv: &TestServer,
    method: &Method,
    path: &str,
    host: Option<&str>,
    origin: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = srv
        .client
        .request(method.clone(), srv.url(path))
        .header("accept", "application/json, text/event-stream");
    if let Some(host) = host {
        request = request.header("host", host);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    if *method == Method::POST || *method == Method::PUT {
        let body = if path == "/mcp" {
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}})
        } else if path.ends_with("/messages") {
            json!({"messages": [{"id": "evil", "role": "user", "text": "planted"}]})
        } else {
            json!({})
        };
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, value)
}

/// Every route of the server, with a method it takes.
fn routes() -> Vec<(Method, &'static str)> {
    vec![
        (Method::GET, "/v1/threads/s/messages"),
        (Method::POST, "/v1/threads/s/messages"),
        (Method::GET, "/v1/threads/s/count"),
        (Method::DELETE, "/v1/threads/s"),
        (Method::GET, "/v1/threads"),
        (Method::POST, "/v1/forget"),
        (Method::GET, "/v1/sessions"),
        (Method::GET, "/v1/sessions/s"),
        (Method::GET, "/v1/memory/s/context"),
        (Method::POST, "/v1/memory/s/search"),
        (Method::GET, "/healthz"),
        (Method::GET, "/readyz"),
        (Method::GET, "/openapi.json"),
        (Method::POST, "/mcp"),
        (Method::GET, "/no/such/route"),
    ]
}

async fn seed(srv: &TestServer) {
    let (status, _, body) = send_as(srv, &Method::POST, "/v1/threads/s/messages", None, None).await;
    assert_eq!(status, 200, "{body}");
}

async fn messages(srv: &TestServer) -> Value {
    let (status, _, body) = send_as(srv, &Method::GET, "/v1/threads/s/messages", None, None).await;
    assert_eq!(status, 200, "{body}");
    body["messages"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_tokens_refuses_other_hosts_on_every_route() {
    let mut srv = start_in_memory(|_| {}).await;
    seed(&srv).await;
    let port = srv.authority().rsplit_once(':').unwrap().1.to_owned();
    let evil = format!("evil.example:{port}");
    for (method, path) in routes() {
        let (status, headers, body) = send_as(&srv, &method, path, Some(&evil), None).await;
        assert_problem(status, &headers, &body, 403, "forbidden");
        assert!(
            body["detail"].as_str().unwrap().contains("Host"),
            "{method} {path}: {body}"
        );
        assert!(
            !body["detail"].as_str().unwrap().contains("evil"),
            "the refusal does not echo the header: {body}"
        );
    }
    // A browser on another site, reaching a loopback name.
    for (method, path) in routes() {
        let (status, headers, body) =
            send_as(&srv, &method, path, None, Some(&format!("http://{evil}"))).await;
        assert_problem(status, &headers, &body, 403, "forbidden");
        let (status, headers, body) = send_as(&srv, &method, path, None, Some("null")).await;
        assert_problem(status, &headers, &body, 403, "forbidden");
    }
    // Nothing was read, written or deleted: the thread holds its one message.
    let stored = messages(&srv).await;
    assert_eq!(stored.as_array().unwrap().len(), 1, "{stored}");
    assert_ne!(stored[0]["id"], "evil");
    // Loopback names with any port, and a page of a loopback origin, are served.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".to_owned(),
    ] {
        let (status, _, body) = send_as(&srv, &Method::GET, "/v1/threads", Some(&host), None).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    let (status, _, body) = send_as(
        &srv,
        &Method::GET,
        "/v1/threads",
        None,
        Some("http://localhost:3000"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn configured_hosts_are_served_too() {
    let mut srv = start_in_memory(|config| {
        config.http.allowed_hosts =
            vec!["memory.internal".to_owned(), "pinned.example:1".to_owned()];
    })
    .await;
    let port = srv.authority().rsplit_once(':').unwrap().1.to_owned();
    let (status, _, body) = send_as(
        &srv,
        &Method::GET,
        "/v1/threads",
        Some(&format!("memory.internal:{port}")),
        Some(&format!("https://memory.internal:{port}")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, body) = send_as(
        &srv,
        &Method::GET,
        "/v1/threads",
        Some(&format!("pinned.example:{port}")),
        None,
    )
    .await;
    assert_problem(status, &headers, &body, 403, "forbidden");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_without_a_host_is_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut srv = start_in_memory(|_| {}).await;
    let mut socket = srv.connect().await;
    socket
        .write_all(b"GET /v1/threads HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.") && answer.contains(" 400 "),
        "{answer}"
    );
    assert!(answer.contains("application/problem+json"), "{answer}");
    srv.stop().await;
}

/// With tokens every host is answered: a request without a token is refused anyway, and one
/// with a token is not a browser's rebinding.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_with_tokens_answers_any_host() {
    let mut srv = TestServer::start(Kind::Sqlite, "anyhost").await;
    let response = srv
        .client
        .get(srv.url("/v1/threads"))
        .bearer_auth(TOKEN_A)
        .header("host", "memory.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    srv.stop().await;
}
