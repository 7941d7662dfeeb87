//! Vector search over a session's memory (`POST /v1/memory/{session}/search` and the MCP
//! `search_memory` / `recall` tools) on a real server with the hashing embedder, on every
//! backend: results, 501 without an embedder, and tenant isolation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use support::{
    Kind, McpClient, TOKEN_A, TOKEN_ALICE, TOKEN_B, TestServer, TestStore, assert_problem,
    mcp_client,
};
use memory_server::embedder::{EmbedderConfig, EmbedderKind};
use reqwest::Method;
use serde_json::{Value, json};

async fn start(kind: Kind, tag: &str, embedder: bool) -> TestServer {
    TestServer::start_configured(kind, tag, |config| {
        if embedder {
            config.embedder = EmbedderConfig {
                kind: EmbedderKind::Hashing,
                dimensions: Some(512),
                ..EmbedderConfig::default()
            };
        }
    })
    .await
}

async fn fill(srv: &TestServer, token: &str, session: &str) {
    support::fill_memory(srv, token, session).await;
}

async fn search_route(kind: Kind) {
    let mut srv = start(kind, "search_route", true).await;
    fill(&srv, TOKEN_A, "sea").await;

    let query = json!({"query": "where does the lighthouse keeper feed seagulls", "top_k": 3});
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_A, &query).await;
    assert_eq!(s, 200, "{b}");
    let results = b["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 3, "{b}");
    let best = results[0]["text"].as_str().unwrap();
    assert!(
        best.contains("lighthouse"),
        "the best match is the facts' batch: {b}"
    );
    assert_eq!(results[0]["first_seq"], 1, "{b}");
    let scores: Vec<f64> = results
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {b}");

    // Another tenant's token, same session id: nothing of tenant A.
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_B, &query).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["results"], json!([]), "{b}");
    // Another scope of the same tenant (an agent's) sees nothing either.
    let (s, b) = srv
        .post("/v1/memory/sea/search?agent=other", TOKEN_A, &query)
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["results"], json!([]), "{b}");
    // A user-bound token cannot name another user.
    let (s, h, b) = srv
        .send(
            Method::POST,
            "/v1/memory/sea/search?user=bob",
            Some(TOKEN_ALICE),
            Some(&query),
        )
        .await;
    assert_problem(s, &h, &b, 403, "forbidden");

    // Bad input.
    for bad in [
        json!({"query": "   "}),
        json!({"query": "x", "top_k": 0}),
        json!({"query": "x", "top_k": 101}),
        json!({"query": "x", "limit": 3}),
        json!({}),
    ] {
        let (s, h, b) = srv
            .send(
                Method::POST,
                "/v1/memory/sea/search",
                Some(TOKEN_A),
                Some(&bad),
            )
            .await;
        assert_problem(s, &h, &b, 400, "invalid_input");
    }
    srv.stop().await;
}

async fn search_unavailable(kind: Kind) {
    let mut srv = start(kind, "search_none", false).await;
    let (s, h, b) = srv
        .send(
            Method::POST,
            "/v1/memory/sea/search",
            Some(TOKEN_A),
            Some(&json!({"query": "lighthouse"})),
        )
        .await;
    assert_problem(s, &h, &b, 501, "unsupported");
    assert!(
        b["detail"]
            .as_str()
            .unwrap()
            .contains("no embedder configured"),
        "{b}"
    );
    assert!(
        b["detail"]
            .as_str()
            .unwrap()
            .contains("retrieval = \"lexical\""),
        "the detail says what to configure: {b}"
    );
    // The MCP tool falls back to the text match.
    let client = mcp_client(&srv, TOKEN_A).await;
    let found = ok(
        &client,
        "search_memory",
        json!({"session": "sea", "query": "x"}),
    )
    .await;
    assert_eq!(found["mode"], "text", "{found}");
    client.cancel().await.unwrap();
    srv.stop().await;
}

async fn ok(client: &McpClient, tool: &str, args: Value) -> Value {
    support::tool_ok(client, tool, args).await
}

async fn search_tool_and_recall(kind: Kind) {
    let mut srv = start(kind, "search_tool", true).await;
    fill(&srv, TOKEN_A, "sea").await;
    let a = mcp_client(&srv, TOKEN_A).await;
    let b = mcp_client(&srv, TOKEN_B).await;

    let args = json!({"session": "sea", "query": "lighthouse keeper seagulls", "limit": 2});
    let found = ok(&a, "search_memory", args.clone()).await;
    assert_eq!(found["mode"], "vector", "{found}");
    let results = found["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 2, "{found}");
    assert!(
        results[0]["text"].as_str().unwrap().contains("lighthouse"),
        "{found}"
    );
    let other = ok(&b, "search_memory", args).await;
    assert_eq!(
        other["results"],
        json!([]),
        "tenant B sees nothing: {other}"
    );

    // recall carries the memory blocks' text, which opens the context.
    let recall = ok(&a, "recall", json!({"session": "sea"})).await;
    let memory = recall["memory"].as_str().expect("the blocks' text");
    assert!(memory.starts_with("<memory>"), "{recall}");
    assert!(
        recall["context"].as_str().unwrap().starts_with(memory),
        "{recall}"
    );
    let recall_b = ok(&b, "recall", json!({"session": "sea"})).await;
    assert!(
        !recall_b.to_string().contains("lighthouse"),
        "tenant B recalls nothing of A: {recall_b}"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    srv.stop().await;
}

/// What `forget`, a thread clear and a session delete remove is not found by a search again:
/// the vector memory's points go with the thread (review finding: they stayed searchable).
async fn forgotten_memory_is_not_searched(kind: Kind) {
    let mut srv = start(kind, "search_forget", true).await;
    let query = json!({"query": "where does the lighthouse keeper feed seagulls", "top_k": 3});
    let found = |b: &Value| !b["results"].as_array().unwrap().is_empty();

    fill(&srv, TOKEN_A, "gone").await;
    let (s, b) = srv.post("/v1/memory/gone/search", TOKEN_A, &query).await;
    assert!(s == 200 && found(&b), "{b}");
    let (s, receipt) = srv
        .post("/v1/forget", TOKEN_A, &json!({"session": "gone"}))
        .await;
    assert_eq!(s, 200, "{receipt}");
    let vectors = receipt["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["store"] == "vectors")
        .unwrap_or_else(|| panic!("the receipt names the vector memory: {receipt}"));
    assert!(vectors["items"].as_u64().unwrap() >= 1, "{receipt}");
    let (s, b) = srv.post("/v1/memory/gone/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");

    fill(&srv, TOKEN_A, "cleared").await;
    let (s, b) = srv.delete("/v1/threads/cleared", TOKEN_A).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = srv.post("/v1/memory/cleared/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");

    fill(&srv, TOKEN_A, "deleted").await;
    let (s, b) = srv.delete("/v1/sessions/deleted", TOKEN_A).await;
    assert!(s == 200 || s == 204, "{s} {b}");
    let (s, b) = srv.post("/v1/memory/deleted/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");

    // Tenant B's memory under the same session id is untouched by A's forget.
    fill(&srv, TOKEN_B, "gone").await;
    let (s, _) = srv
        .post("/v1/forget", TOKEN_A, &json!({"session": "gone"}))
        .await;
    assert_eq!(s, 200);
    let (s, b) = srv.post("/v1/memory/gone/search", TOKEN_B, &query).await;
    assert!(s == 200 && found(&b), "{b}");
    srv.stop().await;
}

macro_rules! on_every_backend {
    ($($kind:ident => $module:ident),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_search_route_ranks_flushed_memory_within_the_tenant() {
                search_route(Kind::$kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn without_an_embedder_search_is_501_and_the_tool_matches_text() {
                search_unavailable(Kind::$kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_search_tool_and_recall_use_the_vector_memory() {
                search_tool_and_recall(Kind::$kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn forgotten_cleared_and_deleted_memory_is_not_searched() {
                forgotten_memory_is_not_searched(Kind::$kind).await;
            }
        }
    )*};
}

on_every_backend!(Sqlite => sqlite, Postgres => postgres, Mysql => mariadb, Redis => redis);

/// `[mcp] enabled = false`: no `/mcp` endpoint (404), the HTTP API still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_can_be_disabled() {
    let store = TestStore::new(Kind::Sqlite, "mcp_off");
    let mut config = support::config(&store);
    config.mcp.enabled = false;
    let mut srv = TestServer::start_with(config, store).await;
    let (s, h, b) = srv
        .send(Method::POST, "/mcp", Some(TOKEN_A), Some(&json!({})))
        .await;
    assert_problem(s, &h, &b, 404, "not_found");
    let (s, b) = srv.get("/v1/threads", TOKEN_A).await;
    assert_eq!(s, 200, "{b}");
    srv.stop().await;
}

/// `[mcp] name` and `instructions` are what the handshake gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_name_and_instructions_come_from_the_config() {
    let store = TestStore::new(Kind::Sqlite, "mcp_name");
    let mut config: memory_server::config::ServerConfig = toml_config();
    config.listen = "127.0.0.1:0".to_owned();
    config.store_url = support::config(&store).store_url;
    config.plain_tokens = support::config(&store).plain_tokens;
    let mut srv = TestServer::start_with(config, store).await;
    let client = mcp_client(&srv, TOKEN_A).await;
    let info = client.peer_info().expect("the server's info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("team-memory")
    );
    assert_eq!(
        info.instructions.as_deref(),
        Some("Remember the team's decisions.")
    );
    client.cancel().await.unwrap();
    srv.stop().await;
}

fn toml_config() -> memory_server::config::ServerConfig {
    memory_server::config::ServerConfig::from_toml(
        "[mcp]\nname = \"team-memory\"\ninstructions = \"Remember the team's decisions.\"\n",
    )
    .unwrap()
}
