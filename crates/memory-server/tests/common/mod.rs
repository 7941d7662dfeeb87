//! Helpers of the server's tests: a store per backend under a prefix of its own (cleaned up
//! when dropped), and a real server on 127.0.0.1:0 with a real HTTP client.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    unreachable_pub
)]

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use memory_server::auth::Principal;
use memory_server::config::ServerConfig;
use memory_server::http::{ServeError, Server};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A name no other test (or run) uses: lowercase letters, digits, at most 24 characters.
pub fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tail = format!("{:x}{:x}", nanos & 0xffff_ffff, std::process::id() & 0xffff);
    let tag: String = tag.chars().take(8).collect();
    format!("srv{tag}{tail}")
}

pub fn postgres_base() -> String {
    std::env::var("AGENT_MEMORY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

pub fn mysql_base() -> String {
    std::env::var("AGENT_MEMORY_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

pub fn redis_base() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn with_prefix(base: &str, prefix: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}prefix={prefix}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    Mysql,
    Redis,
}

/// A store on one backend, under a prefix of its own; cleaned up when dropped.
pub struct TestStore {
    pub url: String,
    pub kind: Kind,
    prefix: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    pub fn new(kind: Kind, tag: &str) -> Self {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path: PathBuf = dir.path().join("memory.db");
                Self {
                    url: format!("sqlite://{}", path.display()),
                    kind,
                    prefix: String::new(),
                    _dir: Some(dir),
                }
            }
            Kind::Postgres => Self::server(kind, &postgres_base(), tag),
            Kind::Mysql => Self::server(kind, &mysql_base(), tag),
            Kind::Redis => Self::server(kind, &redis_base(), tag),
        }
    }

    fn server(kind: Kind, base: &str, tag: &str) -> Self {
        let prefix = format!("{}_", unique(tag));
        Self {
            url: with_prefix(base, &prefix),
            kind,
            prefix,
            _dir: None,
        }
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        let (kind, prefix) = (self.kind, self.prefix.clone());
        if kind == Kind::Sqlite || std::thread::panicking() {
            return;
        }
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(cleanup(kind, &prefix));
        })
        .join();
    }
}

async fn cleanup(kind: Kind, prefix: &str) {
    use sqlx::Connection;
    match kind {
        Kind::Sqlite => {}
        Kind::Postgres => {
            let Ok(mut conn) = sqlx::PgConnection::connect(&postgres_base()).await else {
                return;
            };
            let tables: Vec<(String,)> = sqlx::query_as(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1",
            )
            .bind(format!("{prefix}%"))
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
            for (table,) in tables {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP TABLE IF EXISTS \"{table}\" CASCADE"
                )))
                .execute(&mut conn)
                .await;
            }
        }
        Kind::Mysql => {
            let Ok(mut conn) = sqlx::MySqlConnection::connect(&mysql_base()).await else {
                return;
            };
            let tables: Vec<(String,)> = sqlx::query_as(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
            )
            .bind(format!("{prefix}%"))
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
            let _ = sqlx::query("SET FOREIGN_KEY_CHECKS = 0")
                .execute(&mut conn)
                .await;
            for (table,) in tables {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP TABLE IF EXISTS `{table}`"
                )))
                .execute(&mut conn)
                .await;
            }
        }
        Kind::Redis => {
            let Ok(client) = redis::Client::open(redis_base()) else {
                return;
            };
            let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
                return;
            };
            let mut cursor: u64 = 0;
            loop {
                let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{prefix}*"))
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await
                else {
                    return;
                };
                if !keys.is_empty() {
                    let _: redis::RedisResult<u64> =
                        redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
                }
                if next == 0 {
                    return;
                }
                cursor = next;
            }
        }
    }
}

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
    pub store: TestStore,
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

    pub async fn start_with(config: ServerConfig, store: TestStore) -> Self {
        let server = Server::bind(&config).await.unwrap();
        Self::start_server(server, store)
    }

    pub fn start_server(server: Server, store: TestStore) -> Self {
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
