//! `agent-memory mcp`: the real binary as an MCP server over its stdin and stdout, driven by
//! rmcp's client (a child process), on SQLite and PostgreSQL; the tenant comes from the
//! command's flags or environment, and what it writes is in that tenant's stores.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use agent_memory::{Scope, SessionId, TenantId, Window};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::TestStore;

type Client = RunningService<RoleClient, ()>;

/// `agent-memory --url <url> mcp <args>` as a child process, with rmcp's client on its stdio.
async fn spawn(url: &str, args: &[&str], env: &[(&str, &str)]) -> Client {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"));
    command.env_remove(agent_memory::URL_ENV);
    command.env_remove(memory_server::mcp::STDIO_TENANT_ENV);
    command.env_remove(memory_server::mcp::STDIO_USER_ENV);
    command.args(["--url", url, "mcp"]).args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.unwrap()
}

/// Every tool and a resource through the binary, as the tenant `acme`.
async fn every_tool_over_stdio(store: &TestStore) {
    let name = store.name();
    let client = spawn(&store.url, &["--tenant", "acme"], &[]).await;
    let remembered = ok(
        &client,
        "remember",
        json!({"session": "s1", "messages": [
            {"id": "a", "role": "user", "text": "My cat is called Miso."},
            {"id": "b", "role": "assistant", "text": "Miso is a fine name."}
        ]}),
    )
    .await;
    assert_eq!(remembered, json!({"seqs": [1, 2], "inserted": 2}), "{name}");
    ok(
        &client,
        "remember",
        json!({"session": "s1", "fact": "Has a cat."}),
    )
    .await;
    let recall = ok(
        &client,
        "recall",
        json!({"session": "s1", "max_tokens": 500}),
    )
    .await;
    assert_eq!(
        recall["context"],
        "Facts:\n<fact>Has a cat.</fact>\n\nConversation:\n<message role='user'>My cat is called Miso.</message>\n<message role='assistant'>Miso is a fine name.</message>\n",
        "{name}"
    );
    let found = ok(
        &client,
        "search_memory",
        json!({"session": "s1", "query": "miso"}),
    )
    .await;
    assert_eq!(found["matches"].as_array().unwrap().len(), 2, "{name}");
    let threads = ok(&client, "list_threads", json!({})).await;
    assert_eq!(
        threads["items"].as_array().unwrap().len(),
        2,
        "{name}: {threads}"
    );
    let read = client
        .read_resource(ReadResourceRequestParams::new("thread://s1"))
        .await
        .unwrap();
    let [ResourceContents::TextResourceContents { text, .. }] = read.contents.as_slice() else {
        panic!("{read:?}")
    };
    let history: Value = serde_json::from_str(text).unwrap();
    assert_eq!(history["messages"].as_array().unwrap().len(), 2, "{name}");
    let dry = ok(&client, "forget", json!({"session": "s1", "dry_run": true})).await;
    assert_eq!(dry["total_items"], 3, "{name}: {dry}");
    client.cancel().await.unwrap();

    // What the binary stored is the tenant `acme`'s, read through the library.
    let stores = support::open(store).await;
    let scope = Scope::new(
        TenantId::new("acme").unwrap(),
        SessionId::new("s1").unwrap(),
    );
    let stored = stores.history.read(&scope, Window::All).await.unwrap();
    assert_eq!(stored.len(), 2, "{name}");
    assert_eq!(stored[0].message.text(), "My cat is called Miso.");

    // The tenant from the environment: another tenant sees none of it, and forgets nothing.
    let other = spawn(
        &store.url,
        &[],
        &[(memory_server::mcp::STDIO_TENANT_ENV, "other")],
    )
    .await;
    assert_eq!(
        ok(&other, "list_threads", json!({})).await["items"],
        json!([]),
        "{name}"
    );
    let recall = ok(&other, "recall", json!({"session": "s1"})).await;
    assert_eq!(recall["context"], "", "{name}");
    let forget = ok(&other, "forget", json!({"everything": true})).await;
    assert_eq!(forget["total_items"], 0, "{name}");
    other.cancel().await.unwrap();
    let kept = stores.history.read(&scope, Window::All).await.unwrap();
    assert_eq!(kept, stored, "{name}: the other tenant forgot nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_over_stdio_on_sqlite() {
    every_tool_over_stdio(&TestStore::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_over_stdio_on_postgres() {
    every_tool_over_stdio(&TestStore::postgres("mcpstdio")).await;
}

#[test]
fn an_invalid_tenant_is_a_sentence_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    let output = support::cli()
        .args(["--url", &url, "mcp", "--tenant", "not a tenant!"])
        .write_stdin("")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "stdout is the protocol's only");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("MCP tenant is invalid"), "{stderr}");
}

/// The binary's stdio, driven line by line.
struct Lines {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl Lines {
    async fn send(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(line).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next answer; fails when none comes within 60 s (the client would wait forever).
    async fn answer(&mut self) -> Value {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(60),
            self.stdout.read_line(&mut line),
        )
        .await
        .expect("an answer to every request")
        .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

/// `agent-memory mcp` answers every request: garbage (-32700), a 200-deep request and a 17 MiB
/// `remember` over the 16 MiB line limit (-32600, under their ids), and then still serves.
/// (Before: no answer to any of them, nothing stored, the client waiting forever.)
#[tokio::test(flavor = "multi_thread")]
async fn the_binary_answers_requests_it_cannot_serve() {
    let store = TestStore::sqlite();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"));
    command.env_remove(agent_memory::URL_ENV);
    command.env_remove(memory_server::mcp::STDIO_TENANT_ENV);
    command
        .args(["--url", &store.url, "mcp", "--tenant", "acme"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut lines = Lines {
        stdin: child.stdin.take().unwrap(),
        stdout: tokio::io::BufReader::new(child.stdout.take().unwrap()),
        child,
    };
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    });
    lines.send(initialize.to_string().as_bytes()).await;
    assert_eq!(lines.answer().await["id"], 1);
    lines
        .send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    lines.send(b"garbage, not a request").await;
    let answer = lines.answer().await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");

    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"recall","arguments":{{"session":"s","x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    lines.send(deep.as_bytes()).await;
    let answer = lines.answer().await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(2), json!(-32600)),
        "{answer}"
    );

    let big = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"session": "big", "messages": [
            {"role": "user", "text": "x".repeat(17 * 1024 * 1024)}
        ]}}
    });
    lines.send(big.to_string().as_bytes()).await;
    let answer = lines.answer().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("limit"), "{message}");

    let small = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"session": "small", "fact": "Fits."}}
    });
    lines.send(small.to_string().as_bytes()).await;
    let answer = lines.answer().await;
    assert_eq!(answer["id"], 4, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["inserted"], 1,
        "{answer}"
    );
    drop(lines.stdin);
    let _ = lines.child.wait().await;

    // Nothing of the refused request was stored.
    let stores = support::open(&store).await;
    let scope = Scope::new(
        TenantId::new("acme").unwrap(),
        SessionId::new("big").unwrap(),
    );
    assert_eq!(stores.history.count(&scope).await.unwrap().active, 0);
}
