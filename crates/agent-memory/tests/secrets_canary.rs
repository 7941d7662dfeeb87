//! The secrets canary: every component that takes a secret gets one unique canary string (the
//! passwords in the store URLs, the OpenAI key, the Mem0 key); agents run turns on every
//! backend, sessions are saved, errors are forced (dead ports, refused passwords, HTTP 401 and
//! 500), and every `tracing` event at TRACE level is captured. The canary must appear in none
//! of: serialized sessions, the stored rows and keys (read back raw), error `Display` and
//! `Debug` with their whole source chains, the `Debug` of the configured components, and the
//! log output (`tracing` events and spans, and the records of dependencies that use `log`).
//!
//! The servers of the other backend tests are used for real (PostgreSQL trusts every password,
//! so the canary password connects; MariaDB and Redis get a user whose password is the
//! canary).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::error::Error as StdError;
use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_memory::mem0::{Mem0Client, Mem0Config, Mem0Provider, Mem0Scope, OnError};
use agent_memory::openai::{HttpClientConfig, OpenAiChatModel, OpenAiConfig, OpenAiEmbedder};
use agent_memory::sql::SqlStore;
use agent_memory::{
    Agent, AgentSession, ChatMessage, ChatModel, ChatRequest, Embedder, HistoryStore, Scope,
    SessionStore, Stores, Window,
};
use memory_http::testing::CapturedLogs;
use serde_json::json;
use sqlx::AssertSqlSafe;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The one secret every component gets: passwords and API keys alike.
const CANARY: &str = "canary-7f3a9c4e2b81d6f0";

// ---------------------------------------------------------------------------------------------
// Where the canary must never appear.

/// The records of dependencies that log through the `log` crate rather than `tracing`.
struct LogRecords(CapturedLogs);

impl log::Log for LogRecords {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {} {}\n", record.level(), record.target(), record.args());
        let _ = self.0.clone().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

/// The process-wide capture of every `tracing` event and span of the test binary (at TRACE
/// level, formatted) and of every `log` record, installed once: the stores' pools and the
/// HTTP clients log from their own tasks, so a thread-local subscriber would miss them.
fn logs() -> &'static CapturedLogs {
    static LOGS: OnceLock<CapturedLogs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = CapturedLogs::default();
        log::set_boxed_logger(Box::new(LogRecords(logs.clone()))).expect("install the log capture");
        log::set_max_level(log::LevelFilter::Trace);
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("install the log capture");
        logs
    })
}

/// Asserts that `text` does not hold the canary, in clear or hex-encoded.
fn assert_clean(what: &str, text: &str) {
    let hex: String = CANARY.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        !text.contains(CANARY) && !text.to_lowercase().contains(&hex),
        "the canary leaked through {what}:\n{text}"
    );
}

/// An error's `Display` and `Debug`, and those of every error in its source chain.
fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = format!("{err}\n{err:?}");
    let mut source = err.source();
    while let Some(e) = source {
        out.push_str(&format!("\n{e}\n{e:?}"));
        source = e.source();
    }
    out
}

fn assert_error_clean(what: &str, err: &agent_memory::Error) {
    assert_clean(what, &chain(err));
}

fn assert_logs_clean() {
    assert_clean("the tracing output", &logs().text());
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{nanos}-{:08x}", std::process::id())
}

// ---------------------------------------------------------------------------------------------
// The fakes: an OpenAI-compatible server and Mem0's platform API.

fn completion(text: &str) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_715_900_000,
        "model": "gpt-4o-mini",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
}

/// An error body that echoes the key, as some servers and proxies do.
fn echoing_error(status: u16) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": {
            "message": format!("Incorrect API key provided: {CANARY}. Bearer {CANARY}"),
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_api_key"
        },
        "detail": format!("Token {CANARY} is not valid")
    }))
}

/// An OpenAI fake answering every chat completion with `status` (200: a completion) and every
/// embedding request with the same status.
async fn openai_fake(status: u16) -> MockServer {
    let server = MockServer::start().await;
    let chat = if status == 200 {
        ResponseTemplate::new(200).set_body_json(completion("Noted."))
    } else {
        echoing_error(status)
    };
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(echoing_error(status))
        .mount(&server)
        .await;
    server
}

/// A Mem0 platform fake answering searches and adds with `status` (200: no memories, queued).
async fn mem0_fake(status: u16) -> MockServer {
    let server = MockServer::start().await;
    let (search, add) = if status == 200 {
        (
            ResponseTemplate::new(200).set_body_json(json!({"results": []})),
            ResponseTemplate::new(200)
                .set_body_json(json!({"event_id": "e1", "status": "PENDING"})),
        )
    } else {
        (echoing_error(status), echoing_error(status))
    };
    Mock::given(method("POST"))
        .and(path("/v3/memories/search/"))
        .respond_with(search)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v3/memories/add/"))
        .respond_with(add)
        .mount(&server)
        .await;
    server
}

/// Whether `server` received a request whose `header` holds the canary.
async fn sent_canary(server: &MockServer, header: &str) -> bool {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .any(|request| {
            request
                .headers
                .get(header)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains(CANARY))
        })
}

fn openai_config(server: &MockServer) -> OpenAiConfig {
    OpenAiConfig::new("gpt-4o-mini")
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key(CANARY)
        .with_max_retries(1)
        .with_initial_backoff(Duration::from_millis(5))
        .with_max_backoff(Duration::from_millis(50))
        .with_timeout(Duration::from_secs(5))
}

fn model(server: &MockServer) -> Arc<OpenAiChatModel> {
    let model = OpenAiChatModel::new(openai_config(server)).unwrap();
    assert_clean("the OpenAI chat model's Debug", &format!("{model:?}"));
    Arc::new(model)
}

fn mem0_provider(server: &MockServer, on_error: OnError) -> Arc<Mem0Provider> {
    let config = Mem0Config::platform(CANARY)
        .with_base_url(server.uri())
        .with_max_retries(1)
        .with_initial_backoff(Duration::from_millis(5))
        .with_max_backoff(Duration::from_millis(50))
        .with_timeout(Duration::from_secs(5));
    assert_clean("the Mem0 config's Debug", &format!("{config:?}"));
    let client = Mem0Client::new(config).unwrap();
    assert_clean("the Mem0 client's Debug", &format!("{client:?}"));
    let provider = Mem0Provider::new(client, Mem0Scope::user("alice").unwrap())
        .with_search_scope(Mem0Scope::user("alice").unwrap())
        .with_on_error(on_error);
    assert_clean("the Mem0 provider's Debug", &format!("{provider:?}"));
    Arc::new(provider)
}

fn agent(model: Arc<OpenAiChatModel>, provider: Arc<Mem0Provider>, stores: &Stores) -> Agent {
    let agent = Agent::builder("assistant", model, stores.history.clone())
        .instructions("Be brief.")
        .context_provider(provider)
        .build()
        .unwrap();
    assert_clean("the agent's Debug", &format!("{agent:?}"));
    agent
}

// ---------------------------------------------------------------------------------------------
// One backend's workout: turns that succeed, turns that fail, sessions saved and loaded.

/// Runs turns on `stores` with every secret set to the canary, forces the model's and Mem0's
/// errors, saves the session, and checks every output it touched. Returns the session's scope.
async fn work_out(stores: &Stores, label: &str) -> Scope {
    logs();
    assert_clean(
        &format!("the {label} stores' Debug"),
        &format!("{stores:?}"),
    );
    let openai_ok = openai_fake(200).await;
    let mem0_ok = mem0_fake(200).await;
    let scope = Scope::session(unique("secrets"))
        .unwrap()
        .with_tenant(unique("tenant"))
        .unwrap()
        .with_user("alice")
        .unwrap();
    let mut session = AgentSession::new(scope.clone());

    // Turns that succeed: the keys are sent, the history and the provider state are stored.
    let good = agent(
        model(&openai_ok),
        mem0_provider(&mem0_ok, OnError::Fail),
        stores,
    );
    for text in ["I like green tea.", "And jasmine."] {
        let run = good
            .run(vec![ChatMessage::user(text)], &mut session)
            .await
            .unwrap_or_else(|e| panic!("a {label} turn failed: {e}"));
        assert_clean("a run's output", &format!("{run:?}"));
    }
    assert_eq!(session.turns(), 2);

    // The model answers 401 and 500; Mem0 answers 401 and 500, failing the run or degrading.
    for status in [401, 500] {
        let openai_bad = openai_fake(status).await;
        let mem0_bad = mem0_fake(status).await;
        // The model fails, then Mem0 fails: each run fails with a clean error.
        for (openai, mem0, failing) in [
            (&openai_bad, &mem0_ok, "the model"),
            (&openai_ok, &mem0_bad, "Mem0"),
        ] {
            let failing_agent = agent(model(openai), mem0_provider(mem0, OnError::Fail), stores);
            let Err(err) = failing_agent
                .run(vec![ChatMessage::user("Still there?")], &mut session)
                .await
            else {
                panic!("the {failing} fake fails");
            };
            assert_error_clean(&format!("{failing}'s {status} error"), &err);
        }

        let degrading = agent(
            model(&openai_ok),
            mem0_provider(&mem0_bad, OnError::Degrade),
            stores,
        );
        degrading
            .run(vec![ChatMessage::user("Degrade, then.")], &mut session)
            .await
            .unwrap_or_else(|e| panic!("a degraded {label} turn failed: {e}"));

        let direct = model(&openai_bad)
            .complete(&ChatRequest {
                messages: vec![ChatMessage::user("hi")],
                ..ChatRequest::default()
            })
            .await
            .expect_err("the model fake fails");
        assert_error_clean(&format!("the chat model's {status} error"), &direct);
        let embedder =
            OpenAiEmbedder::new(openai_config(&openai_bad).with_model("text-embedding-3-small"))
                .unwrap();
        assert_clean("the embedder's Debug", &format!("{embedder:?}"));
        let err = embedder
            .embed(&["hello".to_owned()])
            .await
            .expect_err("the embeddings fake fails");
        assert_error_clean(&format!("the embedder's {status} error"), &err);
    }

    // The checks above are not vacuous: the canary was sent as both keys, and the log holds
    // the runs and the degraded provider's warnings.
    assert!(
        sent_canary(&openai_ok, "authorization").await,
        "no OpenAI key sent"
    );
    assert!(
        sent_canary(&mem0_ok, "authorization").await,
        "no Mem0 key sent"
    );
    let log = logs().text();
    assert!(log.contains("agent.run") && log.contains("WARN"), "{log}");

    // The session: serialized, saved, loaded back where it belongs.
    let state = session.serialize().unwrap();
    assert_clean("the serialized session", &state.to_string());
    assert_clean("the session's JSON", &session.to_json().unwrap());
    assert_clean("the session's Debug", &format!("{session:?}"));
    let version = stores.sessions.save(&scope, &state, None).await.unwrap();
    let loaded = stores.sessions.load(&scope).await.unwrap().unwrap();
    assert_eq!(loaded.version, version);
    let restored = AgentSession::deserialize_at(&loaded.state, &scope).unwrap();
    assert_eq!(restored.turns(), session.turns());
    assert_clean("the loaded session", &format!("{loaded:?}"));
    let history = stores.history.read(&scope, Window::All).await.unwrap();
    assert!(history.len() >= 4, "{label}: {history:?}");
    assert_clean("the history read back", &format!("{history:?}"));

    // A stale save is a Conflict, whose error must be clean too.
    let err = stores
        .sessions
        .save(&scope, &state, Some(version + 7))
        .await
        .expect_err("a stale save conflicts");
    assert_error_clean("a session conflict", &err);

    assert_logs_clean();
    scope
}

// ---------------------------------------------------------------------------------------------
// Reading what the backends stored, raw.

const PREFIX: &str = "amcanary_";

async fn sql_store(url: &str) -> Stores {
    let store = SqlStore::builder(url)
        .table_prefix(format!("{PREFIX}v{}_", agent_memory::sql::SCHEMA_VERSION))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("the store did not open: {e}"));
    Stores::new(Arc::new(store.clone()), Arc::new(store))
}

/// Every row of the tables `$tables` lists that `$keep` keeps, each as the text the query
/// `$row` makes of the table and its columns (those `$columns` lists, the table bound)
/// selects; one row a line. `$engine` names the server when nothing was read back. A macro:
/// sqlx's pools and queries are of one type per database.
macro_rules! dump_tables {
    (
        $pool:expr, $engine:literal,
        tables: $tables:expr,
        keep: $keep:expr,
        columns: $columns:expr,
        row: $row:expr $(,)?
    ) => {{
        let pool = $pool;
        let tables: Vec<String> = sqlx::query_scalar($tables).fetch_all(&pool).await.unwrap();
        let keep: fn(&str) -> bool = $keep;
        let row: fn(&str, &[String]) -> String = $row;
        let mut rows: Vec<String> = Vec::new();
        for table in tables.iter().filter(|t| keep(t)) {
            let columns: Vec<String> = sqlx::query_scalar($columns)
                .bind(table)
                .fetch_all(&pool)
                .await
                .unwrap();
            let sql = AssertSqlSafe(row(table, &columns));
            rows.extend(
                sqlx::query_scalar::<_, String>(sql)
                    .fetch_all(&pool)
                    .await
                    .unwrap(),
            );
        }
        let out = rows.join("\n");
        assert!(!out.is_empty(), concat!("no rows read back from ", $engine));
        out
    }};
}

/// Every row of every table this test's prefix names, as text.
async fn dump_postgres(url: &str) -> String {
    dump_tables!(
        sqlx::PgPool::connect(url).await.unwrap(),
        "PostgreSQL",
        tables: "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema()",
        keep: |table| table.starts_with(PREFIX),
        columns: "SELECT column_name::text FROM information_schema.columns \
                  WHERE table_schema = current_schema() AND table_name::text = $1",
        row: |table, _| format!("SELECT row_to_json(t)::text FROM \"{table}\" t"),
    )
}

async fn dump_mysql(url: &str) -> String {
    dump_tables!(
        sqlx::MySqlPool::connect(url).await.unwrap(),
        "MariaDB",
        tables: "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE()",
        keep: |table| table.starts_with(PREFIX),
        columns: "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
                  WHERE table_schema = DATABASE() AND table_name = ?",
        row: |table, columns| {
            let cells: Vec<String> = columns
                .iter()
                .map(|c| format!("COALESCE(CAST(`{c}` AS CHAR), '')"))
                .collect();
            format!(
                "SELECT CONVERT(CONCAT_WS('|', {}) USING utf8mb4) FROM `{table}`",
                cells.join(", ")
            )
        },
    )
}

async fn dump_sqlite(url: &str) -> String {
    dump_tables!(
        sqlx::SqlitePool::connect(url).await.unwrap(),
        "SQLite",
        tables: "SELECT name FROM sqlite_master WHERE type = 'table'",
        keep: |_| true,
        columns: "SELECT name FROM pragma_table_info(?)",
        row: |table, columns| {
            let cells: Vec<String> = columns
                .iter()
                .map(|c| format!("COALESCE(CAST(\"{c}\" AS TEXT), '')"))
                .collect();
            format!("SELECT {} FROM \"{table}\"", cells.join(" || '|' || "))
        },
    )
}

/// Every key of the Redis server and every value, whatever its type.
async fn dump_redis(url: &str) -> String {
    fn text(value: &redis::Value, out: &mut String) {
        match value {
            redis::Value::BulkString(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
            redis::Value::SimpleString(s) => out.push_str(s),
            redis::Value::Int(i) => out.push_str(&i.to_string()),
            redis::Value::Array(items) | redis::Value::Set(items) => {
                items.iter().for_each(|v| text(v, out));
            }
            redis::Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
                text(k, out);
                text(v, out);
            }),
            other => out.push_str(&format!("{other:?}")),
        }
        out.push('|');
    }
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let mut out = String::new();
    for key in &keys {
        out.push_str(&String::from_utf8_lossy(key));
        out.push('=');
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let read = match kind.as_str() {
            "string" => redis::cmd("GET").arg(key).clone(),
            "hash" => redis::cmd("HGETALL").arg(key).clone(),
            "list" => redis::cmd("LRANGE").arg(key).arg(0).arg(-1).clone(),
            "set" => redis::cmd("SMEMBERS").arg(key).clone(),
            "zset" => redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .clone(),
            "stream" => redis::cmd("XRANGE").arg(key).arg("-").arg("+").clone(),
            _ => continue, // expired between SCAN and TYPE
        };
        let value: redis::Value = read.query_async(&mut conn).await.unwrap();
        text(&value, &mut out);
        out.push('\n');
    }
    assert!(!keys.is_empty(), "no keys read back from Redis");
    out
}

// ---------------------------------------------------------------------------------------------
// The backends that connect with the canary as their password.

#[tokio::test]
async fn sqlite_keeps_the_keys_out_of_sessions_rows_errors_and_logs() {
    let path = std::env::temp_dir().join(format!("{}.db", unique("secrets-canary")));
    let url = format!("sqlite://{}", path.display());
    let stores = agent_memory::open(&url).await.unwrap();
    work_out(&stores, "SQLite").await;
    assert_clean("the SQLite rows", &dump_sqlite(&url).await);
    drop(stores);
    let _ = std::fs::remove_file(&path);
    assert_logs_clean();
}

#[tokio::test]
async fn postgres_with_the_canary_password_keeps_it_out_of_everything() {
    // The server trusts local connections: the canary password is sent and ignored.
    let url = format!("postgres://postgres:{CANARY}@127.0.0.1:5432/test");
    let stores = sql_store(&url).await;
    work_out(&stores, "PostgreSQL").await;
    assert_clean(
        "the PostgreSQL rows",
        &dump_postgres("postgres://postgres@127.0.0.1:5432/test").await,
    );
    assert_logs_clean();
}

#[tokio::test]
async fn mariadb_with_the_canary_password_keeps_it_out_of_everything() {
    let root = "mysql://root@127.0.0.1:3306/test";
    let admin = sqlx::MySqlPool::connect(root).await.unwrap();
    // The password goes in as a bound value and a hash: sqlx logs statements, not values.
    let hash: String = sqlx::query_scalar("SELECT CAST(PASSWORD(?) AS CHAR)")
        .bind(CANARY)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(hash.starts_with('*') && hash.len() == 41, "{hash}");
    for statement in [
        format!("CREATE USER IF NOT EXISTS 'amcanary'@'%' IDENTIFIED BY PASSWORD '{hash}'"),
        format!("ALTER USER 'amcanary'@'%' IDENTIFIED BY PASSWORD '{hash}'"),
        "GRANT ALL PRIVILEGES ON test.* TO 'amcanary'@'%'".to_owned(),
    ] {
        sqlx::raw_sql(AssertSqlSafe(statement))
            .execute(&admin)
            .await
            .unwrap();
    }
    let url = format!("mysql://amcanary:{CANARY}@127.0.0.1:3306/test");
    let stores = sql_store(&url).await;
    work_out(&stores, "MariaDB").await;
    // The same user with a wrong password: refused, and the error holds no password.
    let wrong = format!("mariadb://amcanary:{CANARY}-wrong@127.0.0.1:3306/test");
    let err = agent_memory::open(&wrong)
        .await
        .expect_err("a wrong password is refused");
    assert_error_clean("MariaDB's refusal", &err);
    assert_clean("the MariaDB rows", &dump_mysql(root).await);
    assert_logs_clean();
}

#[tokio::test]
async fn redis_with_the_canary_password_keeps_it_out_of_everything() {
    let plain = "redis://127.0.0.1:6379";
    let client = redis::Client::open(plain).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("amcanary")
        .arg("reset")
        .arg("on")
        .arg(format!(">{CANARY}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://amcanary:{CANARY}@127.0.0.1:6379");
    let stores = agent_memory::open(&url).await.unwrap();
    work_out(&stores, "Redis").await;
    // The default user has no password: sending the canary as one is refused.
    let err = agent_memory::open(&format!("redis://:{CANARY}@127.0.0.1:6379"))
        .await
        .expect_err("a password for a user without one is refused");
    assert_error_clean("Redis's refusal", &err);
    assert_clean("the Redis keys and values", &dump_redis(plain).await);
    assert_logs_clean();
}

// ---------------------------------------------------------------------------------------------
// Servers that are not there, and databases that refuse.

#[tokio::test]
async fn dead_servers_and_refusals_keep_the_password_out_of_errors_and_logs() {
    logs();
    let urls = [
        format!("postgres://postgres:{CANARY}@127.0.0.1:1/test"),
        format!("postgresql://user:{CANARY}@127.0.0.1:1/test?sslmode=disable"),
        format!("postgres://postgres:{CANARY}@127.0.0.1:5432/no_such_database_here"),
        format!("mysql://root:{CANARY}@127.0.0.1:1/test"),
        format!("mysql://root:{CANARY}@127.0.0.1:3306/test"),
        format!("mariadb://root:{CANARY}@127.0.0.1:3306/test"),
        format!("redis://:{CANARY}@127.0.0.1:1"),
        format!("redis://user:{CANARY}@127.0.0.1:1/0"),
        format!("rediss://:{CANARY}@127.0.0.1:1"),
        format!("redis+cluster://:{CANARY}@127.0.0.1:1,:{CANARY}@127.0.0.1:2"),
        format!("ftp://user:{CANARY}@127.0.0.1:1"),
    ];
    let mut errors = 0;
    for url in &urls {
        let scheme = url.split(':').next().unwrap_or_default();
        match tokio::time::timeout(Duration::from_secs(60), agent_memory::open(url)).await {
            Err(_) => panic!("opening a {scheme} URL did not finish in 60 s"),
            Ok(Ok(stores)) => {
                assert_clean(&format!("a {scheme} store's Debug"), &format!("{stores:?}"))
            }
            Ok(Err(err)) => {
                errors += 1;
                assert_error_clean(&format!("a {scheme} open error"), &err);
            }
        }
    }
    assert_eq!(errors, urls.len(), "every one of these URLs fails to open");
    assert_logs_clean();
}

/// Passwords holding the URL's own delimiters (`/`, `?`, `#`, `@`), written raw as people do.
/// Each piece between two delimiters is a whole canary of its own (not [`CANARY`], so a leak
/// here cannot fail the other tests through the shared log), so any piece that leaks shows.
///
/// At the time of writing this is the one known leak, and this test fails: `redact_url` cuts
/// the authority at the first `/` (and the query at the first `?`), so such a password is not
/// recognised and the whole URL reaches the open error of every SQL and Redis backend. The
/// `hygiene` branch unifies redaction and fixes it; this test is expected to pass once that is
/// merged. (The sqlx configuration error in the source chain can echo the text after a `?` as
/// an "unknown query parameter" too, so the source chain must be covered by that fix as well.)
#[tokio::test]
async fn passwords_with_url_delimiters_stay_secret() {
    const PIECE: &str = "canary-delim-5e0b7d19c3a2";
    logs();
    let password = format!("{PIECE}/{PIECE}?{PIECE}#{PIECE}@{PIECE}");
    let urls = [
        format!("postgres://postgres:{password}@127.0.0.1:1/test"),
        format!("mysql://root:{password}@127.0.0.1:1/test"),
        format!("mariadb://root:{password}@127.0.0.1:3306/test"),
        format!("redis://:{password}@127.0.0.1:1"),
        format!("redis+cluster://:{password}@127.0.0.1:1,127.0.0.1:2"),
        format!("postgres://postgres:{password}@127.0.0.1:1/test?sslmode=disable"),
    ];
    let mut leaks = Vec::new();
    for url in &urls {
        let scheme = url.split(':').next().unwrap_or_default();
        let text =
            match tokio::time::timeout(Duration::from_secs(60), agent_memory::open(url)).await {
                Err(_) => panic!("opening a {scheme} URL did not finish in 60 s"),
                Ok(Ok(stores)) => format!("{stores:?}"),
                Ok(Err(err)) => chain(&err),
            };
        if text.contains(PIECE) {
            leaks.push(format!("{scheme}: {text}"));
        }
    }
    let log = logs().text();
    if log.contains(PIECE) {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(PIECE)).collect();
        leaks.push(format!("the tracing output: {}", lines.join("\n")));
    }
    assert!(
        leaks.is_empty(),
        "the password leaked:\n{}",
        leaks.join("\n")
    );
}

#[tokio::test]
async fn a_store_whose_server_died_keeps_the_password_out_of_errors() {
    logs();
    // PostgreSQL accepts the canary password.
    let url = format!("postgres://postgres:{CANARY}@127.0.0.1:5432/test");
    let scope = Scope::session(unique("dead")).unwrap();
    // A closed pool is the store of a process whose database went away.
    let store = SqlStore::builder(&url)
        .table_prefix(format!("{PREFIX}v{}_", agent_memory::sql::SCHEMA_VERSION))
        .connect()
        .await
        .unwrap();
    store.close().await;
    let err = store
        .append(&scope, &[ChatMessage::user("hi")])
        .await
        .expect_err("a closed store fails");
    assert_error_clean("a closed PostgreSQL store's error", &err);
    let err = store
        .save(&scope, &json!({}), None)
        .await
        .expect_err("a closed store fails");
    assert_error_clean("a closed PostgreSQL store's error", &err);
    assert_logs_clean();
}
