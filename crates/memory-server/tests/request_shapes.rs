//! Request shapes schemathesis found the server accepting against its OpenAPI document: a
//! JSON array where an object is required (`[null, null]` read as a `ForgetRequest` forgot the
//! whole tenant), and integers past the documented `int64` range. Each is refused with a 400
//! problem document and changes nothing. Also the heads hyper refuses before any route runs
//! (400, 414, 431: answered with a body, never empty) and the OpenAPI document's shape.

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

/// The thread the tests write to holds no active message.
async fn assert_nothing_stored(url: &str) {
    assert_eq!(active(&client(), url).await, 0, "nothing is stored");
}

/// A client as the API clients build theirs.
fn client() -> reqwest::Client {
    memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap()
}

/// The `host:port` of the server at `url`.
fn authority_of(url: &str) -> String {
    url.trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn a_json_array_body_is_refused_and_forgets_nothing() {
    let (url, _stop) = start().await;
    let client = client();
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
    let client = client();
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
    let client = client();
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

/// Issue 29: every operation of the OpenAPI document declares the `x-request-id` the server
/// echoes or assigns: an optional request header, and a header of each of its responses.
#[test]
fn every_operation_declares_the_request_id() {
    use utoipa::OpenApi;
    let doc = serde_json::to_value(memory_server::http::ApiDoc::openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            if !["get", "put", "post", "delete", "patch", "head", "options"]
                .contains(&method.as_str())
            {
                continue;
            }
            operations += 1;
            let what = format!("{method} {path}");
            let parameter = operation["parameters"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == "x-request-id"))
                .unwrap_or_else(|| panic!("{what}: no x-request-id parameter"));
            assert_eq!(parameter["in"], "header", "{what}: {parameter}");
            assert_ne!(parameter["required"], true, "{what}: {parameter}");
            assert_eq!(parameter["schema"]["type"], "string", "{what}: {parameter}");
            // Any value is accepted (an unusable one is replaced), so none is declared invalid.
            assert!(
                parameter["schema"].get("pattern").is_none()
                    && parameter["schema"].get("maxLength").is_none(),
                "{what}: {parameter}"
            );
            let limit = memory_server::http::access::MAX_REQUEST_ID_LEN.to_string();
            assert!(
                parameter["description"]
                    .as_str()
                    .is_some_and(|d| d.contains(&limit)),
                "{what}: the description gives the rule: {parameter}"
            );
            let responses = operation["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{what}");
            for (status, response) in responses {
                let header = &response["headers"]["x-request-id"];
                assert_eq!(
                    header["schema"]["type"], "string",
                    "{what} {status}: {response}"
                );
            }
        }
    }
    assert!(operations >= 16, "{operations} operations");
}

/// Issue 29 (16): a declared body over the limit with `Expect: 100-continue` is answered 413
/// at once, never `100 Continue` (which invites the client to send it all), on every route
/// that takes a body, `/mcp` included (as a JSON-RPC error there); and nothing is stored.
#[tokio::test]
async fn an_oversized_body_that_expects_100_continue_is_refused_first() {
    use tokio::io::AsyncWriteExt;

    let (url, _stop) = start().await;
    let authority = authority_of(&url);
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
        // The server closes the connection after its answer (the body is never read).
        let answer = read_until_closed(&mut socket).await;
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
    assert_nothing_stored(&url).await;
}

/// Sends `request` on a new connection to `authority` and reads the answer until the server
/// closes it. The request is written beside the read (the server may answer, and close, before
/// reading it all); a write or read cut short by the server's close ends the exchange with what
/// was read.
async fn raw_exchange(authority: &str, request: Vec<u8>) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let socket = tokio::net::TcpStream::connect(authority).await.unwrap();
    let (mut reader, mut writer) = socket.into_split();
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(&request).await;
        writer
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(15),
        reader.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "no answer within 15 s");
    drop(writing.await);
    answer
}

/// What the server sends on `socket` until it closes it (within 15 s).
async fn read_until_closed(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;

    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(15),
        socket.read_to_end(&mut answer),
    )
    .await
    .expect("an answer within 15 s")
    .unwrap();
    answer
}

/// A JSON `POST` of `body` to `path` on `authority` that accepts what `/mcp` answers, with
/// the header lines `extra_headers` (each ending in CRLF).
fn json_post(authority: &str, path: &str, extra_headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra_headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A raw HTTP/1.1 answer: its status, its headers (names in lower case) and its body.
struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawAnswer {
    fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no complete head in the answer: {text:?}"));
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {status_line:?}"));
        let headers = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.trim().to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        Self {
            status,
            headers,
            body: bytes[end + 4..].to_vec(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Checks the answer is `status` with a whole body (its `content-length`) of `media_type`
    /// that parses as JSON, and returns it.
    fn json_body(&self, status: u16, media_type: &str, what: &str) -> Value {
        assert_eq!(
            self.status,
            status,
            "{what}: {:?} {}",
            self.headers,
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.header("content-type"), Some(media_type), "{what}");
        assert_eq!(
            self.header("content-length"),
            Some(self.body.len().to_string().as_str()),
            "{what}: the body is whole"
        );
        assert_eq!(self.header("connection"), Some("close"), "{what}");
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{what}: the body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Checks `answer` is the server's problem document for `status` (HTTP API routes).
fn assert_problem(answer: &RawAnswer, status: u16, what: &str) {
    let problem = answer.json_body(status, "application/problem+json", what);
    let kind = if status == 400 {
        "invalid_input"
    } else {
        "limit_exceeded"
    };
    assert_eq!(problem["status"], status, "{what}: {problem}");
    assert_eq!(problem["kind"], kind, "{what}: {problem}");
    assert_eq!(
        problem["type"],
        format!("urn:agent-memory:problem:{kind}"),
        "{what}: {problem}"
    );
    assert!(problem["title"].is_string(), "{what}: {problem}");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.ends_with('.'), "{what}: a sentence: {problem}");
}

/// Checks `answer` is the MCP endpoint's JSON-RPC error for `status` (id `null`, -32600).
fn assert_jsonrpc_error(answer: &RawAnswer, status: u16, what: &str) {
    let error = answer.json_body(status, "application/json", what);
    assert_eq!(error["jsonrpc"], "2.0", "{what}: {error}");
    assert_eq!(error["id"], Value::Null, "{what}: {error}");
    assert_eq!(error["error"]["code"], -32600, "{what}: {error}");
    assert!(error["error"]["message"].is_string(), "{what}: {error}");
}

/// Issue 29 (8): a request line over hyper's URI limit is answered 414 with a body, never
/// hyper's empty answer: the problem document on the HTTP API, the JSON-RPC error on `/mcp`;
/// and nothing is stored.
#[tokio::test]
async fn a_uri_too_long_is_answered_414_with_a_document() {
    let (url, _stop) = start().await;
    let authority = authority_of(&url);
    let pad = "a".repeat(70_000);
    let append = r#"{"messages":[{"id":"m1","role":"user","text":"never stored"}]}"#;
    let request = |path: String, body: &str| json_post(&authority, &path, "", body);
    let answer = raw_exchange(
        &authority,
        request(format!("/v1/threads/s1/messages?pad={pad}"), append),
    )
    .await;
    assert_problem(&RawAnswer::parse(&answer), 414, "a long /v1 URI");
    let answer = raw_exchange(
        &authority,
        format!("GET /v1/threads/{pad}/count HTTP/1.1\r\nHost: {authority}\r\n\r\n").into_bytes(),
    )
    .await;
    assert_problem(&RawAnswer::parse(&answer), 414, "a long /v1 path");
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let answer = raw_exchange(&authority, request(format!("/mcp?pad={pad}"), call)).await;
    assert_jsonrpc_error(&RawAnswer::parse(&answer), 414, "a long /mcp URI");
    assert_nothing_stored(&url).await;
}

/// Issue 29 (8): a head with too many headers (150, hyper takes 100) or over hyper's buffer
/// (a 500 KiB header) is answered 431 with a body, never hyper's empty answer.
#[tokio::test]
async fn a_head_too_large_is_answered_431_with_a_document() {
    let (url, _stop) = start().await;
    let authority = authority_of(&url);
    let many: String = (0..150).map(|i| format!("x-pad-{i}: {i}\r\n")).collect();
    let huge = format!("x-pad: {}\r\n", "a".repeat(500 * 1024));
    let append = r#"{"messages":[{"id":"m1","role":"user","text":"never stored"}]}"#;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    for (headers, what) in [(&many, "150 headers"), (&huge, "a 500 KiB header")] {
        for (path, body) in [("/v1/threads/s1/messages", append), ("/mcp", call)] {
            let request = json_post(&authority, path, headers, body);
            let answer = RawAnswer::parse(&raw_exchange(&authority, request).await);
            let what = format!("{what} on {path}");
            if path == "/mcp" {
                assert_jsonrpc_error(&answer, 431, &what);
            } else {
                assert_problem(&answer, 431, &what);
            }
        }
    }
    assert_nothing_stored(&url).await;
}

/// Issue 29 (8): a head hyper cannot parse (a header line without a colon) is answered 400
/// with a body, never hyper's empty answer, and a keep-alive connection's next request that is
/// malformed too; a well-formed request before it is answered as usual.
#[tokio::test]
async fn a_malformed_head_is_answered_400_with_a_document() {
    let (url, _stop) = start().await;
    let authority = authority_of(&url);
    let bad = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nno colon here\r\nContent-Length: 2\r\n\r\n{{}}"
        )
    };
    let answer = raw_exchange(&authority, bad("/v1/forget").into_bytes()).await;
    assert_problem(&RawAnswer::parse(&answer), 400, "a malformed head on /v1");
    let answer = raw_exchange(&authority, bad("/mcp").into_bytes()).await;
    assert_jsonrpc_error(&RawAnswer::parse(&answer), 400, "a malformed head on /mcp");

    // After a request answered on the same connection.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(&authority).await.unwrap();
    socket
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut first = vec![0_u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(15), socket.read(&mut first))
        .await
        .expect("an answer within 15 s")
        .unwrap();
    let first = String::from_utf8_lossy(&first[..n]).into_owned();
    assert!(first.starts_with("HTTP/1.1 200 "), "{first}");
    socket.write_all(bad("/mcp").as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut socket).await;
    assert_jsonrpc_error(
        &RawAnswer::parse(&answer),
        400,
        "a malformed second request on /mcp",
    );
}
