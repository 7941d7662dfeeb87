//! Helpers shared by the CLI's test files (each includes it with `mod common;`): the servers'
//! URLs with a prefix of each test's own, seeding through the library, reading a whole store
//! back, and cleaning up.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    unreachable_pub
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_memory::{
    AgentSession, ChatMessage, OpenOptions, PageRequest, Scope, ScopeFilter, Stores, TenantId,
    Window,
};
use serde_json::{Value, json};

/// The command under test.
pub fn cli() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("agent-memory").unwrap();
    cmd.env_remove(agent_memory::URL_ENV);
    cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    cmd
}

/// A name no other test (or run) uses: lowercase letters, digits and `_`, starting with a
/// letter, at most 24 characters (a valid table and key prefix once `_` is added).
pub fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tail = format!("{:x}{:x}", nanos & 0xffff_ffff, std::process::id() & 0xffff);
    let tag: String = tag.chars().take(8).collect();
    format!("cli{tag}{tail}")
}

/// The PostgreSQL server of the tests (`AGENT_MEMORY_POSTGRES_URL`, or the local one).
pub fn postgres_base() -> String {
    std::env::var("AGENT_MEMORY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The MariaDB/MySQL server of the tests (`AGENT_MEMORY_MYSQL_URL`, or the local one).
pub fn mysql_base() -> String {
    std::env::var("AGENT_MEMORY_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// The Redis server of the tests (`AGENT_MEMORY_REDIS_URL`, or the local one).
pub fn redis_base() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// `base` with the `prefix` query parameter.
pub fn with_prefix(base: &str, prefix: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}prefix={prefix}")
}

/// A store on one backend, under a prefix of its own; cleaned up when dropped.
pub struct TestStore {
    /// The URL the command is given.
    pub url: String,
    kind: Kind,
    prefix: String,
    _dir: Option<tempfile::TempDir>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
    Mysql,
    Redis,
}

impl TestStore {
    /// A new SQLite file.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path: PathBuf = dir.path().join("memory.db");
        Self {
            url: format!("sqlite://{}", path.display()),
            kind: Kind::Sqlite,
            prefix: String::new(),
            _dir: Some(dir),
        }
    }

    /// Tables of their own on the PostgreSQL server.
    pub fn postgres(tag: &str) -> Self {
        Self::server(Kind::Postgres, &postgres_base(), tag)
    }

    /// Tables of their own on the MariaDB server.
    pub fn mysql(tag: &str) -> Self {
        Self::server(Kind::Mysql, &mysql_base(), tag)
    }

    /// Keys of their own on the Redis server.
    pub fn redis(tag: &str) -> Self {
        Self::server(Kind::Redis, &redis_base(), tag)
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

    /// Every kind of store, the servers under prefixes made from `tag`.
    pub fn every(tag: &str) -> Vec<Self> {
        vec![
            Self::sqlite(),
            Self::postgres(tag),
            Self::mysql(tag),
            Self::redis(tag),
        ]
    }

    /// The backend's name, for assertion messages.
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Mysql => "mariadb",
            Kind::Redis => "redis",
        }
    }

    /// The stores, opened through the library.
    pub async fn open(&self) -> Stores {
        OpenOptions::new()
            .without_window_cache()
            .open(&self.url)
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.name()))
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        let (kind, prefix) = (self.kind, self.prefix.clone());
        if kind == Kind::Sqlite || std::thread::panicking() {
            return;
        }
        // Cleanup on a runtime of its own (the test's may be gone); failures only leave
        // tables or keys behind under a prefix nobody else uses.
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

/// A message with an id, text and metadata of its own.
pub fn message(thread: usize, i: usize) -> ChatMessage {
    let text = format!(
        "thread {thread} message {i}: {}",
        "lorem ipsum ".repeat(i % 5)
    );
    let msg = if i.is_multiple_of(2) {
        ChatMessage::user(text)
    } else {
        ChatMessage::assistant(text)
    };
    msg.with_metadata("n", json!(i))
}

/// Appends `per_thread` messages to each of `scopes` in batches of 1000 (the threads
/// concurrently: token counting runs in parallel), archives the first `archived` of each
/// thread, and saves a session state for each scope.
pub async fn seed(stores: &Stores, scopes: &[Scope], per_thread: usize, archived: u64) {
    const BATCH: usize = 1000;
    let mut tasks = Vec::new();
    for (t, scope) in scopes.iter().enumerate() {
        let (stores, scope) = (stores.clone(), scope.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while i < per_thread {
                let end = (i + BATCH).min(per_thread);
                let batch: Vec<ChatMessage> = (i..end).map(|i| message(t, i)).collect();
                stores.history.append(&scope, &batch).await.unwrap();
                i = end;
            }
            if archived > 0 {
                stores.history.archive(&scope, 1..=archived).await.unwrap();
            }
            let mut session = AgentSession::new(scope.clone());
            session.update_snapshot("note", json!({"thread": t, "facts": ["a", "b"]}));
            let state = session.serialize().unwrap();
            stores.sessions.save(&scope, &state, None).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// One message as compared across stores: seq, tokens, archived, and the message's JSON.
pub type Row = (u64, u32, bool, Value);

/// Everything a store holds for the tenants: each thread's messages (active and archived) and
/// each session's state.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub threads: BTreeMap<String, Vec<Row>>,
    pub sessions: BTreeMap<String, Value>,
}

impl Snapshot {
    /// Messages in every thread.
    pub fn messages(&self) -> usize {
        self.threads.values().map(Vec::len).sum()
    }
}

/// Reads every thread and session of `tenants` through the library.
pub async fn snapshot(stores: &Stores, tenants: &[&str]) -> Snapshot {
    let mut threads = BTreeMap::new();
    let mut sessions = BTreeMap::new();
    for tenant in tenants {
        let filter = ScopeFilter::tenant(TenantId::new(*tenant).unwrap());
        let mut page = PageRequest::first(500);
        loop {
            let listed = stores.history.list_threads(&filter, page).await.unwrap();
            for scope in listed.items {
                let rows: Vec<Row> = stores
                    .history
                    .read(&scope, Window::Everything)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|m| {
                        (
                            m.seq,
                            m.tokens,
                            m.archived,
                            m.message.to_json_value().unwrap(),
                        )
                    })
                    .collect();
                threads.insert(scope.key(), rows);
            }
            match listed.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let mut page = PageRequest::first(500);
        loop {
            let listed = stores.sessions.list(&filter, page).await.unwrap();
            for scope in listed.items {
                let state = stores.sessions.load(&scope).await.unwrap().unwrap().state;
                sessions.insert(scope.key(), state);
            }
            match listed.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
    }
    Snapshot { threads, sessions }
}

/// The command's stdout, parsed as one JSON document.
pub fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
