//! Helpers of the server's tests: a real server on 127.0.0.1:0 with a real HTTP client, on a
//! store of its own on each engine (memory-testkit's `TestStore`, cleaned up when dropped).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    unreachable_pub
)]

use memory_server::auth::Principal;
use memory_server::config::ServerConfig;
use memory_server::http::{ServeError, Server};
use memory_server::ops::Ops;
pub use memory_testkit::engines::{Engine as Kind, TestStore};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One test per engine, each running `$check` (an `async fn(Kind)`) on its [`Kind`] under the
/// name given.
///
/// ```ignore
/// support::on_each_kind!(
///     #[tokio::test(flavor = "multi_thread")]
///     isolation:
///         a_token_reaches_only_its_tenant_on_sqlite => Sqlite,
///         a_token_reaches_only_its_tenant_on_postgres => Postgres,
/// );
/// ```
#[allow(
    unused_macros,
    reason = "only some test files run a check on several engines"
)]
macro_rules! on_each_kind {
    (#[$attr:meta] $check:ident: $($test:ident => $kind:ident),+ $(,)?) => {
        $(
            #[$attr]
            async fn $test() {
                $check($crate::support::Kind::$kind).await;
            }
        )+
    };
}
#[allow(
    unused_imports,
    reason = "only some test files run a check on several engines"
)]
pub(crate) use on_each_kind;

/// The token of tenant A (unbound), tenant B, and tenant A's user-bound token for `alice`.
pub const TOKEN_A: &str = "token-of-tenant-a-0123456789";
pub const TOKEN_B: &str = "token-of-tenant-b-9876543210";
pub const TOKEN_ALICE: &str = "token-of-alice-in-a-5555555";

/// A server running on a real socket, with a real client.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), ServeError>>>,
    /// The store, shared with the replicas of [`start_replica`](Self::start_replica).
    pub store: std::sync::Arc<TestStore>,
}

fn principal(tenant: &str, user: Option<&str>) -> Principal {
    Principal {
        tenant: agent_memory::TenantId::new(tenant).unwrap(),
        user: user.map(|u| agent_memory::UserId::new(u).unwrap()),
    }
}

/// The configuration of a test server on `store` with the three test tokens.
pub fn config(store: &TestStore) -> ServerConfig {
    let mut config = ServerConfig {
        listen: "127.0.0.1:0".to_owned(),
        store_url: Some(store.url.clone()),
        ..ServerConfig::default()
    };
    config.limits.max_body_bytes = 64 * 1024;
    config.limits.max_messages_per_append = 50;
    config.plain_tokens = vec![
        (TOKEN_A.to_owned(), principal("tenanta", None)),
        (TOKEN_B.to_owned(), principal("tenantb", None)),
        (TOKEN_ALICE.to_owned(), principal("tenanta", Some("alice"))),
    ];
    config
}

impl TestServer {
    pub async fn start(kind: Kind, tag: &str) -> Self {
        let store = TestStore::new(kind, tag);
        Self::start_with(config(&store), store).await
    }

    /// A server on a store of its own on `kind`, its configuration [`config`] changed by
    /// `change` (the embedder, the memory's retrieval, limits).
    pub async fn start_configured(
        kind: Kind,
        tag: &str,
        change: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let store = TestStore::new(kind, tag);
        let mut config = config(&store);
        change(&mut config);
        Self::start_with(config, store).await
    }

    pub async fn start_with(
        config: ServerConfig,
        store: impl Into<std::sync::Arc<TestStore>>,
    ) -> Self {
        let server = Server::bind(&config).await.unwrap();
        Self::start_server(server, store)
    }

    /// Another server (a replica, or this one restarted) on the same store, configured by
    /// `config`.
    pub async fn start_replica(&self, config: &ServerConfig) -> Self {
        let server = Server::bind(config).await.unwrap();
        let mut replica = Self::start_server(server, std::sync::Arc::clone(&self.store));
        replica.client = self.client.clone();
        replica
    }

    /// A server on `store` with operations the test opened itself (`ops`), and the tokens and
    /// body limit of `config`.
    pub async fn start_with_ops(ops: Ops, config: &ServerConfig, store: TestStore) -> Self {
        let server = Server::bind_with(
            "127.0.0.1:0".parse().unwrap(),
            ops,
            config.authenticator().unwrap(),
            config.max_body_bytes().unwrap(),
        )
        .await
        .unwrap();
        Self::start_server(server, store)
    }

    pub fn start_server(server: Server, store: impl Into<std::sync::Arc<TestStore>>) -> Self {
        let store = store.into();
        let addr = server.local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        let client =
            memory_http::build_client(memory_http::http_client_builder().unwrap()).unwrap();
        Self {
            base: format!("http://{addr}"),
            client,
            shutdown: Some(tx),
            handle: Some(handle),
            store,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Starts the graceful shutdown and waits for the server to stop.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.unwrap().unwrap();
        }
    }

    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Whether `run` returned.
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    pub async fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.await.unwrap().unwrap();
        }
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut req = self.client.request(method, self.url(path));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, headers, value)
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let (s, _, v) = self
            .send(reqwest::Method::GET, path, Some(token), None)
            .await;
        (s, v)
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        let (s, _, v) = self
            .send(reqwest::Method::POST, path, Some(token), Some(body))
            .await;
        (s, v)
    }

    pub async fn delete(&self, path: &str, token: &str) -> (u16, Value) {
        let (s, _, v) = self
            .send(reqwest::Method::DELETE, path, Some(token), None)
            .await;
        (s, v)
    }
}

/// Asserts `body` is a problem document of `status` and `kind`, with the problem media type.
pub fn assert_problem(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &Value,
    want_status: u16,
    want_kind: &str,
) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(
        headers.get("content-type").unwrap().to_str().unwrap(),
        "application/problem+json",
        "{body}"
    );
    assert_eq!(body["status"], want_status, "{body}");
    assert_eq!(body["kind"], want_kind, "{body}");
    assert!(
        body["type"].as_str().unwrap().ends_with(want_kind),
        "{body}"
    );
    assert!(!body["title"].as_str().unwrap().is_empty());
    assert!(!body["detail"].as_str().unwrap().is_empty());
}

/// The text of each stored message in `messages` (a JSON array of the API's and the MCP
/// tools' message views), in order.
pub fn texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["message"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// An MCP client of rmcp's own.
pub type McpClient = RunningService<RoleClient, ()>;

/// rmcp's streamable HTTP client of `server`'s `/mcp`, with `token`.
pub async fn mcp_client(server: &TestServer, token: &str) -> McpClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// A tool's structured answer; fails on a tool error.
pub async fn tool_ok(client: &McpClient, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.expect("a structured answer")
}

/// Puts two messages about a lighthouse keeper into the session's `Memory`, then enough filler
/// with a small token limit that the oldest messages (those two among them) are flushed to
/// the memory block.
pub async fn fill_memory(srv: &TestServer, token: &str, session: &str) {
    let first = json!({"messages": [
        {"id": "f1", "role": "user", "text": "The lighthouse keeper feeds the seagulls at dawn"},
        {"id": "f2", "role": "assistant", "text": "Noted: lighthouse, seagulls, dawn"},
    ]});
    let (s, b) = srv
        .post(&format!("/v1/memory/{session}/messages"), token, &first)
        .await;
    assert_eq!(s, 200, "{b}");
    let filler = json!({"messages": (0..30).map(|i| json!({"id": format!("q{i}"), "role": "user", "text": "several plain words in every filler message"})).collect::<Vec<_>>()});
    let (s, b) = srv
        .post(
            &format!("/v1/memory/{session}/messages?token_limit=100"),
            token,
            &filler,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert!(b["flushed_messages"].as_u64().unwrap() >= 2, "{b}");
}

/// A server on the in-memory stores, without tokens (the `default` tenant, loopback only),
/// its configuration changed by `change` (timeouts, cap, allowed hosts).
pub async fn start_in_memory(change: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let mut config = ServerConfig {
        listen: "127.0.0.1:0".to_owned(),
        store_url: Some("memory:".to_owned()),
        ..ServerConfig::default()
    };
    change(&mut config);
    let server = Server::bind(&config).await.unwrap();
    // The in-memory stores need no cleanup: a SQLite store of its own stands in as the handle.
    TestServer::start_server(server, TestStore::sqlite())
}

impl TestServer {
    /// The `host:port` it listens on.
    pub fn authority(&self) -> String {
        self.base.trim_start_matches("http://").to_owned()
    }

    /// A raw TCP connection to it.
    pub async fn connect(&self) -> tokio::net::TcpStream {
        tokio::net::TcpStream::connect(self.authority())
            .await
            .unwrap()
    }

    /// Waits (at most `limit`, a bound against hanging, never a timing assertion) for `run` to
    /// return; `true` when it did.
    pub async fn stopped_within(&mut self, limit: std::time::Duration) -> bool {
        let Some(handle) = self.handle.as_mut() else {
            return true;
        };
        match tokio::time::timeout(limit, handle).await {
            Ok(result) => {
                result.unwrap().unwrap();
                self.handle = None;
                true
            }
            Err(_) => false,
        }
    }
}

/// What the server sent on `socket` until it closed it, or `None` when it did not close it
/// within `limit` (a bound against hanging: the tests configure timeouts far below it).
pub async fn read_until_closed(
    socket: &mut tokio::net::TcpStream,
    limit: std::time::Duration,
) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut chunk = [0u8; 4096];
        loop {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&received).into_owned())
}

/// Reads one HTTP/1.1 response (headers and a `Content-Length` body) from `socket`, within
/// `limit`; `None` when none came.
pub async fn read_response(
    socket: &mut tokio::net::TcpStream,
    limit: std::time::Duration,
) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    tokio::time::timeout(limit, async {
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&received).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    return Some(text);
                }
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .ok()
    .flatten()
}
