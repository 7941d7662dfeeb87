//! `memory-bench quality --server RETRIEVAL`: LoCoMo asked through `agent-memory serve` as an
//! HTTP client sees it. The server runs in-process on 127.0.0.1 with its defaults, a SQLite
//! file of its own and `[embedder] kind = "local"` (the model of `AGENT_MEMORY_MODEL_DIR`):
//! each turn is one `POST /v1/memory/{session}/messages?user=…` with the default token limit
//! (nothing is flushed; the memory indexes every put at once), and each question one
//! `POST /v1/memory/search?user=…` across the user's sessions.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use memory_server::Server;
use memory_server::config::ServerConfig;
use memory_server::embedder::{EmbedderConfig, EmbedderKind, MODEL_DIR_ENV};
use memory_server::retrieval::{MemoryConfig, RetrievalKind};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::BenchResult;

/// A server for the quality run, on its own SQLite file.
pub(crate) struct QualityServer {
    base: String,
    client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<()>,
}

/// The retrieval named on the command line.
pub(crate) fn retrieval(name: &str) -> BenchResult<RetrievalKind> {
    match name {
        "dense" => Ok(RetrievalKind::Dense),
        "lexical" => Ok(RetrievalKind::Lexical),
        "hybrid" => Ok(RetrievalKind::Hybrid),
        other => {
            Err(format!("unknown --server retrieval {other:?} (dense, lexical, hybrid)").into())
        }
    }
}

impl QualityServer {
    /// Starts a server on `sqlite://<dir>/server.db` searching with `retrieval`.
    ///
    /// # Errors
    /// When `AGENT_MEMORY_MODEL_DIR` is unset, or the server cannot start.
    pub(crate) async fn start(dir: &Path, retrieval: RetrievalKind) -> BenchResult<Self> {
        let model_dir = std::env::var_os(MODEL_DIR_ENV)
            .ok_or("--server needs the local model: set AGENT_MEMORY_MODEL_DIR")?;
        let config = ServerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).to_string(),
            store_url: Some(format!("sqlite://{}", dir.join("server.db").display())),
            embedder: EmbedderConfig {
                kind: EmbedderKind::Local,
                model_dir: Some(model_dir.into()),
                ..EmbedderConfig::default()
            },
            memory: MemoryConfig {
                retrieval: Some(retrieval),
                ..MemoryConfig::default()
            },
            ..ServerConfig::default()
        };
        let server = Server::bind(&config).await?;
        let base = format!("http://{}", server.local_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            if let Err(e) = server
                .run(async {
                    let _ = rx.await;
                })
                .await
            {
                eprintln!("quality: the server stopped: {e}");
            }
        });
        Ok(Self {
            base,
            client: memory_http::build_client(memory_http::http_client_builder()?)?,
            shutdown: Some(tx),
            handle,
        })
    }

    async fn post(&self, path: &str, body: &Value) -> BenchResult<Value> {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if !status.is_success() {
            return Err(format!("POST {path}: {status}: {answer}").into());
        }
        Ok(answer)
    }

    /// Puts one user message into `user`'s thread `session`.
    pub(crate) async fn put(
        &self,
        user: &str,
        session: &str,
        id: &str,
        text: &str,
    ) -> BenchResult<()> {
        let body = json!({"messages": [{"id": id, "role": "user", "text": text}]});
        self.post(&format!("/v1/memory/{session}/messages?user={user}"), &body)
            .await?;
        Ok(())
    }

    /// The `top_k` best batches of `user`'s memory for `query`: each one's session and first
    /// seq, best first.
    pub(crate) async fn search(
        &self,
        user: &str,
        query: &str,
        top_k: usize,
    ) -> BenchResult<Vec<(String, u64)>> {
        let body = json!({"query": query, "top_k": top_k});
        let answer = self
            .post(&format!("/v1/memory/search?user={user}"), &body)
            .await?;
        Ok(answer["results"]
            .as_array()
            .map(|results| {
                results
                    .iter()
                    .filter_map(|r| {
                        Some((r["session"].as_str()?.to_owned(), r["first_seq"].as_u64()?))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Stops the server.
    pub(crate) async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = self.handle.await;
    }
}
