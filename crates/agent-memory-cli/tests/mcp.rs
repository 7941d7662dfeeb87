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
        "Facts:\n- Has a cat.\n\nConversation:\nuser: My cat is called Miso.\nassistant: Miso is a fine name.\n",
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
    assert_eq!(
        stores
            .history
            .read(&scope, Window::All)
            .await
            .unwrap()
            .len(),
        2,
        "{name}"
    );
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
