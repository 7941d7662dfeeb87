//! The access log and request ids (issue 29, 15): every request, MCP over HTTP included,
//! leaves one line (method, route template, status, duration, request id, tenant; never a
//! token, a raw path or a body), the request id is echoed, and a store outage (503) leaves a
//! line with the error's kind and sentence.
//!
//! The lines are captured as JSON by a global subscriber of this test binary; each test finds
//! its own lines by request id.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use memory_server::http::access::{ACCESS_LOG_TARGET, REQUEST_ID_HEADER};
use memory_testkit::fault_net::CutProxy;
use serde_json::{Value, json};

use support::{Kind, TOKEN_A, TOKEN_B, TestServer, TestStore};

/// Everything logged in this process, as JSON lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Captured::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .init();
        log
    })
}

/// The captured text and its JSON lines.
fn lines() -> (String, Vec<Value>) {
    let text = String::from_utf8(captured().0.lock().unwrap().clone()).unwrap();
    let values = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    (text, values)
}

/// The access-log lines of request `id`.
fn access_lines(id: &str) -> Vec<Value> {
    lines()
        .1
        .into_iter()
        .filter(|line| line["target"] == ACCESS_LOG_TARGET && line["fields"]["request_id"] == id)
        .collect()
}

async fn send_with_id(
    srv: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    id: Option<&str>,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut request = srv
        .client
        .request(method, srv.url(path))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = id {
        request = request.header(REQUEST_ID_HEADER, id);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_request_leaves_one_line_with_its_route_and_tenant_and_no_secret() {
    captured();
    let mut srv = TestServer::start(Kind::Sqlite, "access").await;
    let body =
        json!({"messages": [{"id": "m1", "role": "user", "text": "the body is never logged"}]});
    let response = send_with_id(
        &srv,
        reqwest::Method::POST,
        "/v1/threads/private-session-name/messages?user=alice",
        TOKEN_A,
        Some("client-id-1"),
        Some(&body),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[REQUEST_ID_HEADER], "client-id-1");
    let found = access_lines("client-id-1");
    assert_eq!(found.len(), 1, "{found:?}");
    let fields = &found[0]["fields"];
    assert_eq!(found[0]["level"], "INFO");
    assert_eq!(fields["method"], "POST");
    assert_eq!(fields["route"], "/v1/threads/{session}/messages");
    assert_eq!(fields["status"], 200);
    assert_eq!(fields["tenant"], "tenanta");
    assert!(fields["duration_ms"].as_f64().unwrap() >= 0.0, "{fields}");

    // An unusable id is replaced by one of the server's; a 401 has no tenant.
    let response = send_with_id(
        &srv,
        reqwest::Method::GET,
        "/v1/threads",
        "not-a-token",
        Some("has space\tand tab"),
        None,
    )
    .await;
    assert_eq!(response.status(), 401);
    let id = response.headers()[REQUEST_ID_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(uuid_like(&id), "{id}");
    let found = access_lines(&id);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["fields"]["status"], 401);
    assert_eq!(found[0]["fields"]["tenant"], "-");
    assert_eq!(found[0]["fields"]["route"], "/v1/threads");

    // MCP over HTTP goes through the same layer.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}});
    let response = send_with_id(
        &srv,
        reqwest::Method::POST,
        "/mcp",
        TOKEN_B,
        Some("mcp-call-1"),
        Some(&initialize),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[REQUEST_ID_HEADER], "mcp-call-1");
    let found = access_lines("mcp-call-1");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["fields"]["route"], "/mcp");
    assert_eq!(found[0]["fields"]["tenant"], "tenantb");

    // No route: the template is not the path.
    let response = send_with_id(
        &srv,
        reqwest::Method::GET,
        "/nothing/private-session-name",
        TOKEN_A,
        Some("no-route-1"),
        None,
    )
    .await;
    assert_eq!(response.status(), 404);
    assert_eq!(access_lines("no-route-1")[0]["fields"]["status"], 404);

    let (text, _) = lines();
    for secret in [
        TOKEN_A,
        TOKEN_B,
        "not-a-token",
        "private-session-name",
        "never logged",
    ] {
        assert!(!text.contains(secret), "the log holds {secret:?}");
    }
    srv.stop().await;
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The host and port of `url` (`scheme://[user@]host:port/...`).
fn server_addr(url: &str) -> std::net::SocketAddr {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap();
    std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .unwrap()
        .next()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_outage_leaves_a_line_with_its_kind() {
    captured();
    let store = TestStore::new(Kind::Redis, "outage");
    let proxy = CutProxy::start(server_addr(&store.url)).await.unwrap();
    let through = store.url.replacen(
        &server_addr(&store.url).to_string(),
        &proxy.addr().to_string(),
        1,
    );
    let mut config = support::config(&store);
    config.store_url = Some(through);
    let mut srv = TestServer::start_with(config, store).await;
    let response = send_with_id(
        &srv,
        reqwest::Method::GET,
        "/readyz",
        TOKEN_A,
        Some("ready-1"),
        None,
    )
    .await;
    assert_eq!(response.status(), 200);
    // Redis goes away.
    drop(proxy);
    for (path, id) in [("/readyz", "ready-2"), ("/v1/threads/s/messages", "read-2")] {
        let response =
            send_with_id(&srv, reqwest::Method::GET, path, TOKEN_A, Some(id), None).await;
        let status = response.status().as_u16();
        assert!(status == 503 || status == 504, "{path}: {status}");
        let found = access_lines(id);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0]["fields"]["status"], status);
        let errors: Vec<Value> = lines()
            .1
            .into_iter()
            .filter(|line| {
                line["level"] == "WARN"
                    && line["span"]["request_id"] == id
                    && line["fields"]["kind"].is_string()
            })
            .collect();
        assert_eq!(errors.len(), 1, "no error line for {path}: {errors:?}");
        let kind = errors[0]["fields"]["kind"].as_str().unwrap();
        assert!(kind == "unavailable" || kind == "timeout", "{errors:?}");
        let detail = errors[0]["fields"]["detail"].as_str().unwrap();
        assert!(detail.len() > 10, "{detail}");
    }
    srv.stop().await;
}
