//! The MCP server through rmcp's own client: every tool and resource over an in-process
//! stdio-style byte stream and over streamable HTTP on a real socket (the whole HTTP server,
//! bearer tokens), on SQLite and PostgreSQL; tenant isolation through every tool.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    missing_docs
)]

mod support;

use agent_memory::{OpenOptions, TenantId, UserId};
use memory_server::auth::Principal;
use memory_server::mcp::{serve_lines_with, thread_uri};
use memory_server::ops::{Ops, OpsLimits};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::{Kind, TOKEN_A, TOKEN_ALICE, TOKEN_B, TestServer, TestStore, texts};

async fn open_ops(store: &TestStore) -> Ops {
    let stores = OpenOptions::new()
        .open(&store.url)
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", store.name()));
    Ops::new(stores, OpsLimits::default())
}

fn principal(tenant: &str, user: Option<&str>) -> Principal {
    Principal {
        tenant: TenantId::new(tenant).unwrap(),
        user: user.map(|u| UserId::new(u).unwrap()),
    }
}

type Client = RunningService<RoleClient, ()>;

/// The line limit of the tests' stdio servers.
const LINE_LIMIT: usize = 64 * 1024;

/// A client connected to a server running as `who` over an in-process byte stream, through the
/// transport `agent-memory mcp` serves stdio with (newline-delimited JSON-RPC, every line
/// answered).
async fn stream_client(ops: Ops, who: Principal) -> Client {
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let (reader, writer) = tokio::io::split(server_end);
    tokio::spawn(serve_lines_with(ops, who, reader, writer, LINE_LIMIT));
    ().serve(client_end).await.unwrap()
}

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// rmcp's streamable HTTP client of `server`'s `/mcp`, with `token`.
async fn http_client(server: &TestServer, token: &str) -> Client {
    install_crypto();
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A tool's structured answer; fails on a tool error.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args).await;
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.expect("a structured answer")
}

/// A tool error's text; fails on success.
async fn tool_error(client: &Client, tool: &str, args: Value) -> String {
    let result = call(client, tool, args).await;
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} should fail: {result:?}"
    );
    assert!(result.structured_content.is_none());
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join(" ")
}

async fn read_thread(client: &Client, uri: &str) -> Value {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("read {uri}: {e}"));
    let [
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        },
    ] = result.contents.as_slice()
    else {
        panic!("one text content expected: {result:?}")
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    serde_json::from_str(text).unwrap()
}

fn sessions(page: &Value) -> Vec<(String, String)> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["session"].as_str().unwrap().to_owned(),
                t["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Calls every tool and resource method through `client` and checks what each answers.
async fn every_tool(client: &Client, backend: &str) {
    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "forget",
            "list_threads",
            "recall",
            "remember",
            "search_memory"
        ],
        "{backend}"
    );

    // remember: a batch, idempotent by ids.
    let batch = json!({
        "session": "trip:2026@lisbon",
        "messages": [
            {"id": "m1", "role": "user", "text": "I live in Lisbon and I like trams."},
            {"id": "m2", "role": "assistant", "text": "Noted: Lisbon, trams."}
        ]
    });
    let first = ok(client, "remember", batch.clone()).await;
    assert_eq!(first, json!({"seqs": [1, 2], "inserted": 2}), "{backend}");
    let again = ok(client, "remember", batch).await;
    assert_eq!(again, json!({"seqs": [1, 2], "inserted": 0}), "{backend}");
    // remember: a fact, stored once however often.
    let fact = json!({"session": "trip:2026@lisbon", "fact": "Prefers metric units."});
    assert_eq!(ok(client, "remember", fact.clone()).await["inserted"], 1);
    assert_eq!(ok(client, "remember", fact).await["inserted"], 0);

    // recall: facts, then the conversation, as text and messages.
    let recall = ok(client, "recall", json!({"session": "trip:2026@lisbon"})).await;
    assert_eq!(
        recall["context"],
        "Facts:\n<fact>Prefers metric units.</fact>\n\nConversation:\n<message role='user'>I live in Lisbon and I like trams.</message>\n<message role='assistant'>Noted: Lisbon, trams.</message>\n",
        "{backend}"
    );
    assert_eq!(
        texts(&recall["messages"]),
        [
            "I live in Lisbon and I like trams.",
            "Noted: Lisbon, trams."
        ]
    );
    assert_eq!(texts(&recall["facts"]), ["Prefers metric units."]);
    assert_eq!(recall["facts"][0]["message"]["metadata"]["kind"], "fact");
    let all_tokens = recall["tokens"].as_u64().unwrap();
    assert!(all_tokens > 0);
    // A budget that holds only the newest message and the fact.
    let last = recall["messages"][1]["tokens"].as_u64().unwrap();
    let fact_tokens = recall["facts"][0]["tokens"].as_u64().unwrap();
    let budget = (fact_tokens * 2).max(fact_tokens + last);
    let small = ok(
        client,
        "recall",
        json!({"session": "trip:2026@lisbon", "max_tokens": budget}),
    )
    .await;
    assert!(
        small["tokens"].as_u64().unwrap() <= budget,
        "{backend}: {small}"
    );
    assert_eq!(
        texts(&small["messages"]),
        ["Noted: Lisbon, trams."],
        "{backend}"
    );
    let tiny = ok(
        client,
        "recall",
        json!({"session": "trip:2026@lisbon", "max_tokens": 1}),
    )
    .await;
    assert_eq!(tiny["context"], "");
    let zero = tool_error(
        client,
        "recall",
        json!({"session": "trip:2026@lisbon", "max_tokens": 0}),
    )
    .await;
    assert!(zero.contains("budget"), "{zero}");

    // search_memory: case-insensitive text match, newest first.
    let found = ok(
        client,
        "search_memory",
        json!({"session": "trip:2026@lisbon", "query": "LISBON"}),
    )
    .await;
    let seqs: Vec<u64> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 1], "{backend}");
    let one = ok(
        client,
        "search_memory",
        json!({"session": "trip:2026@lisbon", "query": "trams", "limit": 1}),
    )
    .await;
    assert_eq!(texts(&one["matches"]), ["Noted: Lisbon, trams."]);
    let none = ok(
        client,
        "search_memory",
        json!({"session": "trip:2026@lisbon", "query": "Porto"}),
    )
    .await;
    assert_eq!(none["matches"], json!([]));
    let empty = tool_error(
        client,
        "search_memory",
        json!({"session": "trip:2026@lisbon", "query": "  "}),
    )
    .await;
    assert!(empty.contains("empty"), "{empty}");

    // list_threads: the history and the facts thread of the session.
    let mut listed = sessions(&ok(client, "list_threads", json!({})).await);
    listed.sort();
    assert_eq!(
        listed,
        [
            ("trip:2026@lisbon".to_owned(), "facts".to_owned()),
            ("trip:2026@lisbon".to_owned(), "history".to_owned())
        ],
        "{backend}"
    );
    let only_facts = ok(client, "list_threads", json!({"source": "facts"})).await;
    assert_eq!(sessions(&only_facts).len(), 1);

    // Resources: the template, the listed threads, a thread's history.
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "thread://{session}");
    let mut uris: Vec<String> = client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    uris.sort();
    assert_eq!(
        uris,
        [
            "thread://trip%3A2026%40lisbon",
            "thread://trip%3A2026%40lisbon?source=facts"
        ],
        "{backend}"
    );
    let history = read_thread(client, &uris[0]).await;
    assert_eq!(history["session"], "trip:2026@lisbon");
    assert_eq!(
        texts(&history["messages"]),
        [
            "I live in Lisbon and I like trams.",
            "Noted: Lisbon, trams."
        ]
    );
    let facts = read_thread(client, &uris[1]).await;
    assert_eq!(texts(&facts["messages"]), ["Prefers metric units."]);
    let unknown = read_thread(client, "thread://never-written").await;
    assert_eq!(unknown["messages"], json!([]));
    let bad = client
        .read_resource(ReadResourceRequestParams::new("file:///etc/passwd"))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("thread://"), "{bad}");

    // Errors are tool errors with sentences.
    let both = tool_error(
        client,
        "remember",
        json!({"session": "s", "fact": "x", "messages": [{"role": "user", "text": "y"}]}),
    )
    .await;
    assert!(
        both.contains("exactly one of `messages` and `fact`"),
        "{both}"
    );
    let role = tool_error(
        client,
        "remember",
        json!({"session": "s", "messages": [{"role": "narrator", "text": "y"}]}),
    )
    .await;
    assert!(role.contains("`narrator` is not a role"), "{role}");
    // An invalid id: the kind once, then the rule every description quotes.
    let id = tool_error(client, "recall", json!({"session": "no spaces allowed"})).await;
    assert!(
        id.starts_with("invalid_input: session id contains ' '"),
        "{id}"
    );
    assert_eq!(id.matches("invalid_input").count(), 1, "{id}");
    assert!(id.contains(agent_memory::ID_RULE), "{id}");
    let path = tool_error(
        client,
        "remember",
        json!({"session": "../etc/passwd", "messages": [{"role": "user", "text": "x"}]}),
    )
    .await;
    assert!(path.contains("path step"), "{path}");
    // A percent-escaped URI decodes as UTF-8: `é` is named as itself, not as `Ã©`.
    let accent = client
        .read_resource(ReadResourceRequestParams::new("thread://%C3%A9"))
        .await
        .unwrap_err()
        .to_string();
    assert!(accent.contains("'é'"), "{accent}");
    assert!(!accent.contains('Ã'), "{accent}");
    let whole = tool_error(client, "forget", json!({})).await;
    assert!(whole.contains("`everything: true`"), "{whole}");

    // forget: a dry run counts and keeps; the forget deletes; a second finds nothing.
    let dry = ok(
        client,
        "forget",
        json!({"session": "trip:2026@lisbon", "dry_run": true}),
    )
    .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["total_items"], 3, "{backend}: {dry}");
    let kept = ok(client, "recall", json!({"session": "trip:2026@lisbon"})).await;
    assert_eq!(kept["messages"].as_array().unwrap().len(), 2);
    let gone = ok(client, "forget", json!({"session": "trip:2026@lisbon"})).await;
    assert_eq!(gone["total_items"], 3, "{backend}: {gone}");
    let after = ok(client, "recall", json!({"session": "trip:2026@lisbon"})).await;
    assert_eq!(after["context"], "");
    assert_eq!(
        ok(client, "list_threads", json!({})).await["items"],
        json!([])
    );
    let again = ok(client, "forget", json!({"session": "trip:2026@lisbon"})).await;
    assert_eq!(again["total_items"], 0);
}

async fn every_tool_over_a_byte_stream(kind: Kind) {
    let store = TestStore::new(kind, "mcpstr");
    let client = stream_client(open_ops(&store).await, principal("acme", None)).await;
    every_tool(&client, kind.name()).await;
    client.cancel().await.unwrap();
}

async fn every_tool_over_streamable_http(kind: Kind) {
    let mut server = TestServer::start(kind, "mcphttp").await;
    let client = http_client(&server, TOKEN_A).await;
    every_tool(&client, kind.name()).await;
    client.cancel().await.unwrap();
    server.stop().await;
}

support::on_each_kind!(
    #[tokio::test(flavor = "multi_thread")]
    every_tool_over_a_byte_stream:
        every_tool_over_a_byte_stream_on_sqlite => Sqlite,
        every_tool_over_a_byte_stream_on_postgres => Postgres,
);

support::on_each_kind!(
    #[tokio::test(flavor = "multi_thread")]
    every_tool_over_streamable_http:
        every_tool_over_streamable_http_on_sqlite => Sqlite,
        every_tool_over_streamable_http_on_postgres => Postgres,
        every_tool_over_streamable_http_on_mariadb => Mysql,
        every_tool_over_streamable_http_on_redis => Redis,
);

/// Tenant A's data, seen through tenant B's token and a token bound to another user of A.
async fn isolation(kind: Kind) {
    let mut server = TestServer::start(kind, "mcpiso").await;
    let a = http_client(&server, TOKEN_A).await;
    let b = http_client(&server, TOKEN_B).await;
    let alice = http_client(&server, TOKEN_ALICE).await;
    let name = kind.name();

    ok(
        &a,
        "remember",
        json!({"session": "secret", "messages": [{"role": "user", "text": "the vault code is 1234"}]}),
    )
    .await;
    ok(
        &a,
        "remember",
        json!({"session": "secret", "fact": "A's fact"}),
    )
    .await;
    ok(
        &a,
        "remember",
        json!({"session": "mine", "user": "bob", "messages": [{"role": "user", "text": "bob's words"}]}),
    )
    .await;

    // B sees nothing of A's, whatever it names.
    assert_eq!(
        ok(&b, "list_threads", json!({})).await["items"],
        json!([]),
        "{name}"
    );
    assert_eq!(
        ok(&b, "list_threads", json!({"user": "bob"})).await["items"],
        json!([]),
        "{name}"
    );
    let recall = ok(&b, "recall", json!({"session": "secret"})).await;
    assert_eq!(recall["context"], "", "{name}");
    let search = ok(
        &b,
        "search_memory",
        json!({"session": "secret", "query": "vault"}),
    )
    .await;
    assert_eq!(search["matches"], json!([]), "{name}");
    assert_eq!(
        read_thread(&b, "thread://secret").await["messages"],
        json!([])
    );
    assert!(b.list_all_resources().await.unwrap().is_empty());
    let dry = ok(&b, "forget", json!({"everything": true, "dry_run": true})).await;
    assert_eq!(dry["total_items"], 0, "{name}");
    let forget = ok(&b, "forget", json!({"session": "secret"})).await;
    assert_eq!(forget["total_items"], 0, "{name}");
    let forget = ok(&b, "forget", json!({"everything": true})).await;
    assert_eq!(forget["total_items"], 0, "{name}");
    // B's own writes stay in B.
    ok(
        &b,
        "remember",
        json!({"session": "secret", "messages": [{"role": "user", "text": "B's note"}]}),
    )
    .await;
    assert_eq!(
        texts(&ok(&b, "recall", json!({"session": "secret"})).await["messages"]),
        ["B's note"]
    );

    // Alice's token (tenant A, bound to alice) cannot reach bob's or the user-less threads.
    for (tool, args) in [
        ("recall", json!({"session": "mine", "user": "bob"})),
        (
            "remember",
            json!({"session": "mine", "user": "bob", "fact": "x"}),
        ),
        (
            "search_memory",
            json!({"session": "mine", "user": "bob", "query": "bob"}),
        ),
        ("list_threads", json!({"user": "bob"})),
        ("forget", json!({"user": "bob"})),
    ] {
        let error = tool_error(&alice, tool, args).await;
        assert!(error.starts_with("forbidden"), "{name} {tool}: {error}");
    }
    assert_eq!(
        ok(&alice, "list_threads", json!({})).await["items"],
        json!([])
    );
    assert_eq!(
        ok(&alice, "recall", json!({"session": "secret"})).await["context"],
        "",
        "{name}: alice reads her own thread of `secret`, not A's user-less one"
    );
    let forget = ok(&alice, "forget", json!({})).await;
    assert_eq!(
        forget["total_items"], 0,
        "{name}: alice's forget is hers only"
    );
    let bob_uri = thread_uri("mine", Some("bob"), None, None);
    let refused = alice
        .read_resource(ReadResourceRequestParams::new(bob_uri.clone()))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("forbidden"), "{refused}");

    // A still has everything.
    let recall = ok(&a, "recall", json!({"session": "secret"})).await;
    assert_eq!(
        texts(&recall["messages"]),
        ["the vault code is 1234"],
        "{name}"
    );
    assert_eq!(texts(&recall["facts"]), ["A's fact"]);
    assert_eq!(
        texts(&read_thread(&a, &bob_uri).await["messages"]),
        ["bob's words"]
    );
    assert_eq!(
        ok(&a, "list_threads", json!({})).await["items"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    for client in [a, b, alice] {
        client.cancel().await.unwrap();
    }
    server.stop().await;
}

support::on_each_kind!(
    #[tokio::test(flavor = "multi_thread")]
    isolation:
        a_token_reaches_only_its_tenant_on_sqlite => Sqlite,
        a_token_reaches_only_its_tenant_on_postgres => Postgres,
        a_token_reaches_only_its_tenant_on_mariadb => Mysql,
        a_token_reaches_only_its_tenant_on_redis => Redis,
);

#[tokio::test(flavor = "multi_thread")]
async fn requests_without_a_valid_token_are_refused_before_mcp() {
    install_crypto();
    let mut server = TestServer::start(Kind::Sqlite, "mcpauth").await;
    let http = server.client.clone();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    });
    let bearer_a = format!("Bearer {TOKEN_A}");
    let basic_a = format!("Basic {TOKEN_A}");
    for header in [
        None,
        Some("Bearer wrong-token"),
        Some(basic_a.as_str()),
        Some(TOKEN_A),
    ] {
        let mut request = http
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(header) = header {
            request = request.header("authorization", header);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{header:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body = response.text().await.unwrap();
        assert!(body.contains("unauthorized"), "{body}");
        assert!(
            !body.contains(TOKEN_A) && !body.contains("wrong-token"),
            "{body}"
        );
    }
    // The right token initializes; rmcp's client refuses to start without one.
    let response = http
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("authorization", bearer_a.as_str())
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["result"]["serverInfo"]["name"], "agent-memory",
        "{body}"
    );
    // A body over the server's limit (64 KiB in the tests' configuration) is refused whole.
    let big = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"session": "s", "fact": "x".repeat(100 * 1024)}}
    });
    let response = http
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("authorization", bearer_a.as_str())
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    // With tokens, any Host is served (the token is the protection).
    let response = http
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("authorization", bearer_a.as_str())
        .header("host", "memory.example.com")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let refused = ().serve(StreamableHttpClientTransport::from_uri(server.url("/mcp"))).await;
    assert!(refused.is_err());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_server_serves_mcp_only_to_loopback_host_names() {
    let store = TestStore::new(Kind::Sqlite, "mcpopen");
    let mut config = support::config(&store);
    config.plain_tokens.clear();
    let mut server = TestServer::start_with(config, store).await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    });
    let send = |host: Option<&'static str>| {
        let mut request = server
            .client
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    // A page of another site that resolves to 127.0.0.1 (DNS rebinding) is refused.
    assert_eq!(send(Some("evil.example:8080")).await.unwrap().status(), 403);
    assert_eq!(send(None).await.unwrap().status(), 200);
    // Without a token every call is the `default` tenant.
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(server.url("/mcp")))
            .await
            .unwrap();
    ok(
        &client,
        "remember",
        json!({"session": "s", "messages": [{"role": "user", "text": "hello"}]}),
    )
    .await;
    let listed = ok(&client, "list_threads", json!({})).await;
    assert_eq!(sessions(&listed), [("s".to_owned(), "history".to_owned())]);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[test]
fn thread_uris_round_trip_every_id_character() {
    assert_eq!(thread_uri("s", None, None, None), "thread://s");
    assert_eq!(
        thread_uri("a:b@c", Some("u@x"), Some("ag"), Some("facts")),
        "thread://a%3Ab%40c?user=u%40x&agent=ag&source=facts"
    );
}

/// A raw client of the stdio transport: it writes lines and reads the answers, as a client
/// that sends what rmcp's client never would.
struct Lines {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    read: tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
}

impl Lines {
    /// A stdio server as `who` on a store of its own, initialized.
    async fn start(ops: Ops, who: Principal) -> Self {
        let (server_end, client_end) = tokio::io::duplex(1 << 20);
        let (reader, writer) = tokio::io::split(server_end);
        tokio::spawn(serve_lines_with(ops, who, reader, writer, LINE_LIMIT));
        let (read, write) = tokio::io::split(client_end);
        let mut lines = Self {
            write,
            read: tokio::io::BufReader::new(read),
        };
        lines.send(initialize(1).to_string().as_bytes()).await;
        assert_eq!(lines.answer().await["id"], 1);
        lines
            .send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        lines
    }

    async fn send(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.write.write_all(line).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// The next answer; fails if none comes within 20 s (the client would wait forever).
    async fn answer(&mut self) -> Value {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            self.read.read_line(&mut line),
        )
        .await
        .expect("an answer to every line")
        .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

fn initialize(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    })
}

fn remember_request(id: u64, session: &str, fact: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"session": session, "fact": fact}}
    })
}

/// The bad requests both transports must answer, each with the code and id of its answer:
/// garbage, bytes that are not UTF-8, a request 200 levels deep, a batch, and JSON that is no
/// JSON-RPC message (with no id, and with one).
fn bad_requests() -> Vec<(&'static str, Vec<u8>, i64, Value)> {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"recall","arguments":{{"session":"s","x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    vec![
        ("garbage", b"this is not json".to_vec(), -32700, Value::Null),
        (
            "not UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"x\":\"\xff\"}".to_vec(),
            -32700,
            json!(3),
        ),
        ("200 deep", deep.into_bytes(), -32600, json!(2)),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "not JSON-RPC",
            br#"{"role":1}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "a result and an error",
            br#"{"jsonrpc":"2.0","id":"five","result":{},"error":{}}"#.to_vec(),
            -32600,
            json!("five"),
        ),
    ]
}

fn assert_refused(what: &str, answer: &Value, code: i64, id: &Value) {
    assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
    assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
    assert_eq!(&answer["id"], id, "{what}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.len() > 10, "{what}: a sentence: {answer}");
    assert!(
        !message.contains("not valid JSON") || code == -32700,
        "{what}: {answer}"
    );
}

/// stdio answers every line: garbage, invalid UTF-8, a 200-deep request, a batch, JSON that is
/// not JSON-RPC, and a request over the line limit get JSON-RPC errors (with the request's id
/// when it can be read), and the session goes on. (Before: rmcp's transport answered none of
/// them, and the client waited forever.)
#[tokio::test(flavor = "multi_thread")]
async fn stdio_answers_every_request_it_cannot_read() {
    let store = TestStore::sqlite();
    let mut lines = Lines::start(open_ops(&store).await, principal("tenanta", None)).await;
    for (what, line, code, id) in bad_requests() {
        lines.send(&line).await;
        assert_refused(what, &lines.answer().await, code, &id);
    }
    // A request over the line limit: refused under its id, nothing stored.
    let big = remember_request(7, "big", &"x".repeat(LINE_LIMIT + 1));
    lines.send(big.to_string().as_bytes()).await;
    let answer = lines.answer().await;
    assert_refused("over the limit", &answer, -32600, &json!(7));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&LINE_LIMIT.to_string()),
        "{answer}"
    );
    // The session goes on: a request after all that is served.
    lines
        .send(remember_request(8, "small", "Fits.").to_string().as_bytes())
        .await;
    let answer = lines.answer().await;
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["inserted"], 1,
        "{answer}"
    );
    let stores = OpenOptions::new().open(&store.url).await.unwrap();
    let page = stores
        .history
        .list_threads(
            &agent_memory::ScopeFilter::tenant(TenantId::new("tenanta").unwrap()),
            agent_memory::PageRequest::first(10),
        )
        .await
        .unwrap();
    let sessions: Vec<&str> = page.items.iter().map(|s| s.session_id().as_str()).collect();
    assert_eq!(sessions, ["small"], "the refused request stored nothing");
}

/// `POST /mcp` answers a body it cannot read with 400 (413 over the limit) and a JSON-RPC
/// error, never rmcp's 415 text/plain; a 401 is a problem document. (Before: 415 for each,
/// `{"role":1}` called "not valid JSON", 401 as plain JSON.)
#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_answers_bad_requests_with_json_rpc_errors() {
    let mut server = TestServer::start(Kind::Sqlite, "mcpbad").await;
    let post = |body: Vec<u8>, token: Option<&str>| {
        let mut request = server
            .client
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    for (what, body, code, id) in bad_requests() {
        let response = post(body, Some(TOKEN_A)).await.unwrap();
        assert_eq!(response.status(), 400, "{what}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{what}"
        );
        let answer: Value = response.json().await.unwrap();
        assert_refused(what, &answer, code, &id);
    }
    // Over the body limit (64 KiB in the tests' configuration): 413, a JSON-RPC error.
    let big = remember_request(9, "big", &"x".repeat(100 * 1024));
    let response = post(big.to_string().into_bytes(), Some(TOKEN_A))
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit"),
        "{answer}"
    );
    // A 401 is a problem document, as the HTTP API's.
    let response = post(initialize(1).to_string().into_bytes(), Some("wrong"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["status"], 401, "{problem}");
    assert_eq!(problem["kind"], "unauthorized", "{problem}");
    assert_eq!(
        problem["type"], "urn:agent-memory:problem:unauthorized",
        "{problem}"
    );
    assert!(!problem["detail"].as_str().unwrap().is_empty());
    // A good request still initializes.
    let response = post(initialize(1).to_string().into_bytes(), Some(TOKEN_A))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.stop().await;
}

/// Every id description the tools give is the library's one rule (`ID_RULE`), and the docs
/// quote it as it is. (Before: `A-Z a-z 0-9 - _ . : @`, while `/ + =` were accepted.)
#[tokio::test(flavor = "multi_thread")]
async fn the_tools_and_the_docs_give_the_one_id_rule() {
    let store = TestStore::sqlite();
    let client = stream_client(open_ops(&store).await, principal("tenanta", None)).await;
    let tools = client.list_all_tools().await.unwrap();
    for tool in &tools {
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(
            !schema.contains("A-Z a-z 0-9 - _ . : @`"),
            "{}: {schema}",
            tool.name
        );
        let session = &tool.input_schema["properties"]["session"]["description"];
        if let Some(description) = session.as_str() {
            assert!(
                description.contains(agent_memory::ID_RULE),
                "{}: {description}",
                tool.name
            );
        }
    }
    let remember = tools.iter().find(|t| t.name == "remember").unwrap();
    let schema = serde_json::to_string(&remember.input_schema).unwrap();
    assert!(schema.contains(agent_memory::ID_RULE), "{schema}");
    client.cancel().await.unwrap();
    for doc in [
        include_str!("../../../docs/mcp.md"),
        include_str!("../../../docs/server.md"),
        include_str!("../../../docs/format.md"),
    ] {
        assert!(
            doc.contains(agent_memory::ID_RULE),
            "a doc without the rule"
        );
        assert!(
            !doc.contains("A-Z a-z 0-9 - _ . : @`"),
            "an old rule in a doc"
        );
    }
}
