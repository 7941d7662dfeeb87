//! The server's memory searched by words and fused (`[memory] retrieval = "lexical"` and
//! `"hybrid"`) on a real server: lexical search with no embedder on the SQL store's own text
//! index (SQLite file, PostgreSQL), hybrid with the hashing embedder and tantivy in memory,
//! ranking, scope isolation through HTTP and MCP, and forget, clear and delete leaving nothing
//! in the text index.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;

use agent_memory::ScopeFilter;
use agent_memory::forget::Forgetter;
use agent_memory::{ForgetMode, SessionId, TenantId, TextIndex};
use memory_server::embedder::{EmbedderConfig, EmbedderKind};
use memory_server::http::Server;
use memory_server::ops::Ops;
use memory_server::retrieval::{RetrievalKind, TextIndexKind};
use serde_json::{Value, json};
use support::{Kind, TOKEN_A, TOKEN_B, TestServer, TestStore, fill_memory, mcp_client, tool_ok};

/// How many documents of the session `session` of `tenant` the text index holds (a dry-run
/// forget counts them through the index itself).
async fn indexed(index: &Arc<dyn TextIndex>, tenant: &str, session: &str) -> u64 {
    let filter = ScopeFilter::tenant(TenantId::new(tenant).unwrap())
        .with_session(SessionId::new(session).unwrap());
    Forgetter::new()
        .texts(Arc::clone(index))
        .forget(&filter, ForgetMode::DryRun)
        .await
        .unwrap()
        .total_items()
}

/// A server on `kind` whose memory is `retrieval` over `text_index` (hybrid and dense with the
/// hashing embedder), and the text index it writes (the store's own, or the server's tantivy).
async fn start(
    kind: Kind,
    tag: &str,
    retrieval: RetrievalKind,
    text_index: TextIndexKind,
) -> (TestServer, Arc<dyn TextIndex>) {
    let store = TestStore::new(kind, tag);
    let mut config = support::config(&store);
    config.memory.retrieval = Some(retrieval);
    config.memory.text_index = Some(text_index);
    if retrieval != RetrievalKind::Lexical {
        config.embedder = EmbedderConfig {
            kind: EmbedderKind::Hashing,
            dimensions: Some(512),
            ..EmbedderConfig::default()
        };
    }
    let stores = agent_memory::open(&store.url).await.unwrap();
    let memory = config.vector_memory(&stores).await.unwrap().unwrap();
    assert_eq!(memory.retrieval, retrieval);
    let index = match text_index {
        TextIndexKind::Store => {
            assert!(memory.text_index.is_none(), "the store's own index");
            stores.text_index().unwrap()
        }
        _ => memory.text_index.clone().expect("the server's own index"),
    };
    let ops = Ops::new(stores, config.ops_limits().unwrap()).with_vector_memory(memory);
    (TestServer::start_with_ops(ops, &config, store).await, index)
}

/// Tenant A's search of the session `sea` for "lighthouse" (which [`fill_memory`] put there).
async fn search_the_lighthouse(srv: &TestServer) -> (u16, Value) {
    let query = json!({"query": "lighthouse"});
    srv.post("/v1/memory/sea/search", TOKEN_A, &query).await
}

fn results(body: &Value) -> &Vec<Value> {
    body["results"].as_array().unwrap()
}

/// Search ranks the batch holding the query's rare words first; other tenants and scopes see
/// nothing; forget, a thread clear and a session delete leave nothing in the text index.
async fn search_and_forget(srv: &TestServer, index: &Arc<dyn TextIndex>) {
    fill_memory(srv, TOKEN_A, "sea").await;
    let query = json!({"query": "where does the lighthouse keeper feed seagulls", "top_k": 3});
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_A, &query).await;
    assert_eq!(s, 200, "{b}");
    let found = results(&b);
    assert!(!found.is_empty() && found.len() <= 3, "{b}");
    assert!(
        found[0]["text"].as_str().unwrap().contains("lighthouse"),
        "only one batch holds `lighthouse`, and it ranks first: {b}"
    );
    assert_eq!(found[0]["first_seq"], 1, "{b}");
    assert!(
        found
            .iter()
            .skip(1)
            .all(|r| !r["text"].as_str().unwrap().contains("lighthouse")),
        "{b}"
    );
    let scores: Vec<f64> = found.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {b}");

    // Another tenant, same session id; another agent's scope of the same tenant: nothing.
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_B, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");
    let (s, b) = srv
        .post("/v1/memory/sea/search?agent=other", TOKEN_A, &query)
        .await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");
    let (s, b) = srv.post("/v1/memory/other/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");

    // Tenant B's memory under the same session id, to outlive A's forget.
    fill_memory(srv, TOKEN_B, "sea").await;
    let before = indexed(index, "tenanta", "sea").await;
    assert!(before >= 1, "the flushed batches are in the text index");
    let b_before = indexed(index, "tenantb", "sea").await;
    assert!(b_before >= 1);

    let (s, receipt) = srv
        .post("/v1/forget", TOKEN_A, &json!({"session": "sea"}))
        .await;
    assert_eq!(s, 200, "{receipt}");
    let texts: u64 = receipt["stores"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["store"] == "texts" || r["store"] == "memory texts")
        .map(|r| r["items"].as_u64().unwrap())
        .sum();
    assert!(
        texts >= before,
        "the receipt counts the text index: {receipt}"
    );
    assert_eq!(indexed(index, "tenanta", "sea").await, 0, "{receipt}");
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");
    assert_eq!(indexed(index, "tenantb", "sea").await, b_before);
    let (s, b) = srv.post("/v1/memory/sea/search", TOKEN_B, &query).await;
    assert!(s == 200 && !results(&b).is_empty(), "{b}");

    // A thread clear and a session delete take the text index's items with them.
    fill_memory(srv, TOKEN_A, "cleared").await;
    assert!(indexed(index, "tenanta", "cleared").await >= 1);
    let (s, b) = srv.delete("/v1/threads/cleared", TOKEN_A).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(indexed(index, "tenanta", "cleared").await, 0);
    fill_memory(srv, TOKEN_A, "deleted").await;
    assert!(indexed(index, "tenanta", "deleted").await >= 1);
    let (s, b) = srv.delete("/v1/sessions/deleted", TOKEN_A).await;
    assert!(s == 200 || s == 204, "{s} {b}");
    assert_eq!(indexed(index, "tenanta", "deleted").await, 0);
    let (s, b) = srv.post("/v1/memory/deleted/search", TOKEN_A, &query).await;
    assert_eq!((s, b["results"].clone()), (200, json!([])), "{b}");
}

/// [`search_and_forget`] on a server of its own (see [`start`]), stopped after.
async fn search_and_forget_on(
    kind: Kind,
    tag: &str,
    retrieval: RetrievalKind,
    text_index: TextIndexKind,
) {
    let (mut srv, index) = start(kind, tag, retrieval, text_index).await;
    search_and_forget(&srv, &index).await;
    srv.stop().await;
}

async fn lexical_on_the_store_index(kind: Kind) {
    let (retrieval, text_index) = (RetrievalKind::Lexical, TextIndexKind::Store);
    search_and_forget_on(kind, "lexical_store", retrieval, text_index).await;
}

support::on_each_kind!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    lexical_on_the_store_index:
        lexical_search_without_an_embedder_on_sqlite_s_own_index => Sqlite,
        lexical_search_without_an_embedder_on_postgres_s_own_index => Postgres,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_search_with_tantivy_in_memory() {
    let (retrieval, text_index) = (RetrievalKind::Hybrid, TextIndexKind::Memory);
    search_and_forget_on(Kind::Sqlite, "hybrid_tantivy", retrieval, text_index).await;
}

/// The whole configuration path (`Server::bind` from a TOML file's `[memory]`), lexical with
/// no embedder: search answers, and the MCP `search_memory` tool runs on the same block
/// (`mode: lexical`), within the tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_search_over_lexical_memory_from_a_toml_config() {
    let toml = memory_server::config::ServerConfig::from_toml(
        "[memory]\nretrieval = \"lexical\"\ntext_index = \"store\"\n",
    )
    .unwrap();
    let mut srv = TestServer::start_configured(Kind::Sqlite, "lexical_mcp", |config| {
        config.memory = toml.memory;
    })
    .await;
    fill_memory(&srv, TOKEN_A, "sea").await;
    let a = mcp_client(&srv, TOKEN_A).await;
    let b = mcp_client(&srv, TOKEN_B).await;
    let args = json!({"session": "sea", "query": "lighthouse seagulls", "limit": 2});
    let found = tool_ok(&a, "search_memory", args.clone()).await;
    assert_eq!(found["mode"], "lexical", "{found}");
    let hits = found["results"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{found}");
    assert!(
        hits[0]["text"].as_str().unwrap().contains("lighthouse"),
        "{found}"
    );
    let other = tool_ok(&b, "search_memory", args).await;
    assert_eq!(other["mode"], "lexical", "{other}");
    assert_eq!(
        other["results"],
        json!([]),
        "tenant B sees nothing: {other}"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    srv.stop().await;
}

/// `text_index = "store"` on a store without one is refused when the server starts, with a
/// sentence; Redis gets tantivy in memory by default instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_index_on_redis_is_a_config_error() {
    let store = TestStore::new(Kind::Redis, "lexical_redis");
    let mut config = support::config(&store);
    config.memory.retrieval = Some(RetrievalKind::Lexical);
    config.memory.text_index = Some(TextIndexKind::Store);
    let error = Server::bind(&config).await.unwrap_err().to_string();
    assert!(error.contains("has none"), "{error}");
    config.memory.text_index = None;
    let mut srv = TestServer::start_with(config, store).await;
    fill_memory(&srv, TOKEN_A, "sea").await;
    let (s, b) = search_the_lighthouse(&srv).await;
    assert!(s == 200 && !results(&b).is_empty(), "{b}");
    srv.stop().await;
}

/// `text_index = "directory"`: tantivy on disk, so what a server indexed is searched by the
/// next server over the same directory (and the SQLite file), after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_text_index_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!(
        "am-server-text-{}-{}",
        std::process::id(),
        uuid_like()
    ));
    let store = TestStore::new(Kind::Sqlite, "lexical_dir");
    let mut config = support::config(&store);
    config.memory.retrieval = Some(RetrievalKind::Lexical);
    config.memory.text_index = Some(TextIndexKind::Directory);
    config.memory.text_index_dir = Some(dir.clone());
    let mut srv = TestServer::start_with(config.clone(), store).await;
    fill_memory(&srv, TOKEN_A, "sea").await;
    srv.stop().await;
    let TestServer { store, .. } = srv;
    let mut srv = TestServer::start_with(config, store).await;
    let (s, b) = search_the_lighthouse(&srv).await;
    assert_eq!(s, 200, "{b}");
    assert!(
        results(&b)[0]["text"]
            .as_str()
            .unwrap()
            .contains("lighthouse"),
        "{b}"
    );
    srv.stop().await;
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
