//! The backend registry: one entry per store backend the benchmark can run on.
//!
//! Adding a backend is one [`Backend`] entry in [`BACKENDS`]: a name, an availability check
//! (does its server answer?) and a `connect` function that opens fresh stores. Every case runs
//! in its own process and calls `connect` once.
//!
//! The SQL backends use tables prefixed `bench_` and the Redis backends keys prefixed `bench:`,
//! so benchmark data never meets the tests' or an application's. Every case also works in a
//! random scope of its own and clears it afterwards.
//!
//! Every backend's history store runs through memory-layers' [`WindowCache`], as
//! `agent_memory::open` gives it, unless the runner was started with `--no-cache`
//! ([`set_window_cache`]): the old path, to compare.
//! [`Stores::direct_history`] is the backend's own history store, never behind the cache: what
//! the `migrate` workload copies into and out of.

use std::future::Future;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memory_core::{
    HistoryStore, InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore, SessionStore,
    VectorStore,
};
use memory_layers::WindowCache;
use memory_redis::RedisStore;
use memory_sql::SqlStore;

use crate::BenchResult;

/// The backend name reported by workloads that use no store (`count_tokens`).
pub(crate) const NO_BACKEND: &str = "none";

/// The table prefix of the SQL backends.
pub(crate) const SQL_TABLE_PREFIX: &str = "bench_";
/// The key prefix of the Redis backends (keys are `bench:{<scope>}:…`).
pub(crate) const REDIS_KEY_PREFIX: &str = "bench";

/// How long a server has to accept a TCP connection to count as available.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The PostgreSQL server's URL variable, and the URL used when it is not set.
pub(crate) const POSTGRES_ENV: &str = "AGENT_MEMORY_POSTGRES_URL";
const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The MySQL / MariaDB server's URL variable, and its default.
pub(crate) const MYSQL_ENV: &str = "AGENT_MEMORY_MYSQL_URL";
const MYSQL_DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";
/// The Redis server's URL variable, and its default.
pub(crate) const REDIS_ENV: &str = "AGENT_MEMORY_REDIS_URL";
const REDIS_DEFAULT: &str = "redis://127.0.0.1:6379";
/// The Redis Cluster's URL variable (`redis+cluster://h1:p1,h2:p2,…`); no default.
pub(crate) const REDIS_CLUSTER_ENV: &str = "AGENT_MEMORY_REDIS_CLUSTER_URL";

/// Whether the history stores run through the window cache (`--no-cache` turns it off).
static WINDOW_CACHE: AtomicBool = AtomicBool::new(true);

/// Sets whether the stores opened from now on put a [`WindowCache`] in front of the history
/// store (the default) or not (`--no-cache`).
pub(crate) fn set_window_cache(on: bool) {
    WINDOW_CACHE.store(on, Ordering::Relaxed);
}

/// Whether the stores opened now run their history store through the window cache.
pub(crate) fn window_cache() -> bool {
    WINDOW_CACHE.load(Ordering::Relaxed)
}

/// The history store the workloads use: `store`, behind the window cache unless it is off.
fn history(store: Arc<dyn HistoryStore>) -> Arc<dyn HistoryStore> {
    if window_cache() {
        Arc::new(WindowCache::new(store))
    } else {
        store
    }
}

/// Where a backend's store calls are counted: each SQL statement or Redis request is one
/// network (or, for SQLite, library) round trip.
#[derive(Debug, Clone)]
enum Counter {
    /// The in-memory stores: no round trips.
    None,
    /// A SQL store's statement counter.
    Sql(SqlStore),
    /// A Redis store's request counter.
    Redis(RedisStore),
}

/// A temporary SQLite database file, deleted (with its `-wal` and `-shm` companions) when
/// dropped.
#[derive(Debug)]
struct TempDb {
    path: PathBuf,
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            // A companion that was never created is not an error.
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The stores a backend provides for one case.
#[derive(Debug)]
pub(crate) struct Stores {
    /// The chat history store (behind the window cache unless `--no-cache`).
    pub(crate) history: Arc<dyn HistoryStore>,
    /// The backend's own history store, never behind the window cache: what a bulk tool such
    /// as `memory_bundle::migrate` writes and reads (the `migrate` workload).
    pub(crate) direct_history: Arc<dyn HistoryStore>,
    /// The session state store.
    pub(crate) sessions: Arc<dyn SessionStore>,
    /// The backend's own vector store (in memory, or in the SQL database or Redis beside the
    /// history): what a user's long-term memory is searched in.
    pub(crate) vectors: Arc<dyn VectorStore>,
    counter: Counter,
    temp_db: Option<TempDb>,
    origin: Origin,
}

impl Stores {
    /// The in-memory stores of memory-core.
    pub(crate) fn in_memory() -> Self {
        let direct: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
        Self {
            history: history(Arc::clone(&direct)),
            direct_history: direct,
            sessions: Arc::new(InMemorySessionStore::new()),
            vectors: Arc::new(InMemoryVectorStore::new()),
            counter: Counter::None,
            temp_db: None,
            origin: Origin::Shared,
        }
    }

    fn sql(store: SqlStore, temp_db: Option<TempDb>, origin: Origin) -> BenchResult<Self> {
        Ok(Self {
            history: history(Arc::new(store.clone())),
            direct_history: Arc::new(store.clone()),
            sessions: Arc::new(store.clone()),
            vectors: Arc::new(store.vector_store()?),
            counter: Counter::Sql(store),
            temp_db,
            origin,
        })
    }

    fn redis(store: RedisStore, origin: Origin) -> Self {
        Self {
            history: history(Arc::new(store.clone())),
            direct_history: Arc::new(store.clone()),
            sessions: Arc::new(store.clone()),
            vectors: Arc::new(store.vector_store()),
            counter: Counter::Redis(store),
            temp_db: None,
            origin,
        }
    }

    /// Round trips (SQL statements, `BEGIN` and `COMMIT` included; Redis requests) the stores
    /// have made since they opened; always 0 for the in-memory stores. Workloads read it before
    /// and after the timed operations.
    pub(crate) fn round_trips(&self) -> u64 {
        match &self.counter {
            Counter::None => 0,
            Counter::Sql(store) => store.round_trips(),
            Counter::Redis(store) => store.round_trips(),
        }
    }

    /// Closes the stores: the SQL pool, then the temporary database file, if any.
    pub(crate) async fn close(self) {
        let Self {
            history,
            direct_history,
            sessions,
            vectors,
            counter,
            temp_db,
            origin,
        } = self;
        drop((history, direct_history, sessions, vectors));
        // A second handle on another's objects leaves their pool open.
        if let (Counter::Sql(store), false) = (counter, matches!(origin, Origin::SameObjects)) {
            store.close().await;
        }
        // Deletes the file, now that no connection holds it.
        drop(temp_db);
    }
}

/// Where a backend's stores came from, so that [`Stores::reopen`] can open a second store
/// object over the same data. Its `Debug` never shows a URL (it may hold a password).
#[derive(Clone)]
enum Origin {
    /// Data that lives in the store object itself (the in-memory stores, `sqlite::memory:`):
    /// a second object is the same object.
    Shared,
    /// The objects of another [`Stores`] ([`reopen`](Stores::reopen) of a `Shared` one):
    /// closing it closes nothing.
    SameObjects,
    /// A SQL database at this URL.
    Sql(String),
    /// A Redis server or cluster at this URL.
    Redis(String),
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Shared => "Shared",
            Origin::SameObjects => "SameObjects",
            Origin::Sql(_) => "Sql(..)",
            Origin::Redis(_) => "Redis(..)",
        })
    }
}

impl Stores {
    /// A second, fresh store object over the same data, with its own connections and its own
    /// round-trip counter: the stores a second process (or a process's first turn) would have.
    /// Where the data lives in the object (in-memory, `sqlite::memory:`), it shares this one's
    /// objects, since a new object would hold no data ([`reopen_kind`](Self::reopen_kind)
    /// says which). Closing it never deletes this one's SQLite file.
    pub(crate) async fn reopen(&self) -> BenchResult<Stores> {
        match &self.origin {
            Origin::Shared | Origin::SameObjects => Ok(Self {
                history: Arc::clone(&self.history),
                direct_history: Arc::clone(&self.direct_history),
                sessions: Arc::clone(&self.sessions),
                vectors: Arc::clone(&self.vectors),
                counter: self.counter.clone(),
                temp_db: None,
                origin: Origin::SameObjects,
            }),
            Origin::Sql(url) => Self::sql(sql_store(url).await?, None, Origin::Sql(url.clone())),
            Origin::Redis(url) => Ok(Self::redis(
                redis_store(url).await?,
                Origin::Redis(url.clone()),
            )),
        }
    }

    /// What [`reopen`](Self::reopen) gives, for the JSON lines: `"new_connection"` or
    /// `"same_object"`.
    pub(crate) fn reopen_kind(&self) -> &'static str {
        match self.origin {
            Origin::Shared | Origin::SameObjects => "same_object",
            Origin::Sql(_) | Origin::Redis(_) => "new_connection",
        }
    }
}

/// What [`Backend::connect`] returns: opening stores is async and may fail (a server is down).
pub(crate) type ConnectFuture = Pin<Box<dyn Future<Output = BenchResult<Stores>> + Send>>;

/// One registered backend.
#[derive(Debug)]
pub(crate) struct Backend {
    /// The name used on the command line and in the JSON lines.
    pub(crate) name: &'static str,
    /// One line for `--list`.
    pub(crate) description: &'static str,
    /// Whether the backend can run here, or why not. Unavailable backends are left out of the
    /// default selection (with a note on stderr); naming one with `--backend` still tries it
    /// (and reports why it fails).
    pub(crate) available: fn() -> Result<(), String>,
    /// Opens the backend's stores. Each case uses a fresh random scope, so stores may be shared
    /// with earlier runs.
    pub(crate) connect: fn() -> ConnectFuture,
}

/// Every backend, in the order the benchmark runs them.
pub(crate) static BACKENDS: &[Backend] = &[
    Backend {
        name: "in-memory",
        description: "InMemoryHistoryStore and InMemorySessionStore (memory-core)",
        available: always,
        connect: in_memory,
    },
    Backend {
        name: "sqlite-file",
        description: "SqlStore on a fresh SQLite file per case (WAL), deleted afterwards",
        available: always,
        connect: sqlite_file,
    },
    Backend {
        name: "sqlite-memory",
        description: "SqlStore on an in-memory SQLite database (sqlite::memory:)",
        available: always,
        connect: sqlite_memory,
    },
    Backend {
        name: "postgres",
        description: "SqlStore on PostgreSQL: $AGENT_MEMORY_POSTGRES_URL, \
                      default postgres://postgres@127.0.0.1:5432/test",
        available: postgres_available,
        connect: postgres,
    },
    Backend {
        name: "mariadb",
        description: "SqlStore on MariaDB / MySQL: $AGENT_MEMORY_MYSQL_URL, \
                      default mysql://root@127.0.0.1:3306/test",
        available: mariadb_available,
        connect: mariadb,
    },
    Backend {
        name: "redis",
        description: "RedisStore on one Redis server: $AGENT_MEMORY_REDIS_URL, \
                      default redis://127.0.0.1:6379",
        available: redis_available,
        connect: redis,
    },
    Backend {
        name: "redis-cluster",
        description: "RedisStore on a Redis Cluster: $AGENT_MEMORY_REDIS_CLUSTER_URL \
                      (redis+cluster://h1:p1,h2:p2,...), only when set",
        available: redis_cluster_available,
        connect: redis_cluster,
    },
];

/// The backend called `name`.
pub(crate) fn find(name: &str) -> BenchResult<&'static Backend> {
    BACKENDS.iter().find(|b| b.name == name).ok_or_else(|| {
        let known: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
        format!(
            "unknown backend {name:?}; known backends: {}",
            known.join(", ")
        )
        .into()
    })
}

/// Every backend that is available now, in registry order; each one left out is named on
/// stderr with the reason.
pub(crate) fn available() -> Vec<&'static Backend> {
    let mut available = Vec::new();
    for backend in BACKENDS {
        match (backend.available)() {
            Ok(()) => available.push(backend),
            Err(why) => eprintln!(
                "note: backend {} left out ({why}); name it with --backend to try it anyway",
                backend.name
            ),
        }
    }
    available
}

/// The backends called `names`, or every available one when `names` is empty.
///
/// # Errors
/// When a name is not a backend's.
pub(crate) fn select(names: &[String]) -> BenchResult<Vec<&'static Backend>> {
    if names.is_empty() {
        Ok(available())
    } else {
        names.iter().map(|name| find(name)).collect()
    }
}

/// An availability check for backends that need nothing outside the process.
fn always() -> Result<(), String> {
    Ok(())
}

/// The URL in the environment variable `env`, or `default` when it is unset or blank.
fn url_from_env(env: &str, default: &str) -> String {
    match std::env::var(env) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
        _ => default.to_owned(),
    }
}

/// The Redis Cluster URL, when set.
fn redis_cluster_url() -> Option<String> {
    std::env::var(REDIS_CLUSTER_ENV)
        .ok()
        .map(|url| url.trim().to_owned())
        .filter(|url| !url.is_empty())
}

/// The `host:port` pairs of a server URL (several for `redis+cluster://h1:p1,h2:p2`), without
/// the user or password; `default_port` where a host names none. `None` for URLs that name no
/// TCP server (`unix://…`, `postgres:///db?host=/run/…`).
fn endpoints(url: &str, default_port: u16) -> Option<Vec<(String, u16)>> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.starts_with("unix") {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    // The user info ends at the last '@' of the authority.
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if hosts.is_empty() {
        return None;
    }
    hosts
        .split(',')
        .map(|host_port| {
            if let Some(v6) = host_port.strip_prefix('[') {
                let (host, after) = v6.split_once(']')?;
                let port = match after.strip_prefix(':') {
                    Some(p) => p.parse().ok()?,
                    None => default_port,
                };
                Some((host.to_owned(), port))
            } else {
                match host_port.rsplit_once(':') {
                    Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
                    None => Some((host_port.to_owned(), default_port)),
                }
            }
        })
        .collect()
}

/// Whether every server of `url` accepts a TCP connection within [`PROBE_TIMEOUT`]; the error
/// names the `host:port` (never the password) and the variable to set.
fn probe(url: &str, default_port: u16, env: &str) -> Result<(), String> {
    let Some(servers) = endpoints(url, default_port) else {
        // Not a TCP server (a Unix socket, say): let `connect` find out.
        return Ok(());
    };
    for (host, port) in servers {
        let addrs: Vec<_> = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}:{port} ({e}); set {env}"))?
            .collect();
        let answered = addrs
            .iter()
            .any(|addr| TcpStream::connect_timeout(addr, PROBE_TIMEOUT).is_ok());
        if !answered {
            return Err(format!(
                "no answer on {host}:{port} within {} s; set {env}",
                PROBE_TIMEOUT.as_secs()
            ));
        }
    }
    Ok(())
}

fn postgres_available() -> Result<(), String> {
    probe(
        &url_from_env(POSTGRES_ENV, POSTGRES_DEFAULT),
        5432,
        POSTGRES_ENV,
    )
}

fn mariadb_available() -> Result<(), String> {
    probe(&url_from_env(MYSQL_ENV, MYSQL_DEFAULT), 3306, MYSQL_ENV)
}

fn redis_available() -> Result<(), String> {
    probe(&url_from_env(REDIS_ENV, REDIS_DEFAULT), 6379, REDIS_ENV)
}

fn redis_cluster_available() -> Result<(), String> {
    let url = redis_cluster_url().ok_or_else(|| format!("{REDIS_CLUSTER_ENV} is not set"))?;
    probe(&url, 6379, REDIS_CLUSTER_ENV)
}

/// The in-memory stores of memory-core.
fn in_memory() -> ConnectFuture {
    Box::pin(async { Ok(Stores::in_memory()) })
}

/// A SQL store at `url` with the benchmark's table prefix.
async fn sql_store(url: &str) -> BenchResult<SqlStore> {
    Ok(SqlStore::builder(url)
        .table_prefix(SQL_TABLE_PREFIX)
        .connect()
        .await?)
}

/// A fresh SQLite file in the temporary directory, deleted when the stores close.
fn sqlite_file() -> ConnectFuture {
    Box::pin(async {
        let path = std::env::temp_dir().join(format!("bench-{}.db", uuid::Uuid::new_v4()));
        // The guard exists before the file does, so a failed open leaves nothing behind.
        let temp_db = TempDb { path };
        let url = format!("sqlite://{}", temp_db.path.display());
        let store = sql_store(&url).await?;
        let origin = Origin::Sql(url);
        Stores::sql(store, Some(temp_db), origin)
    })
}

/// A private in-memory SQLite database.
fn sqlite_memory() -> ConnectFuture {
    Box::pin(async {
        let store = sql_store("sqlite::memory:").await?;
        // A second connection to `sqlite::memory:` would be a database of its own.
        Stores::sql(store, None, Origin::Shared)
    })
}

fn postgres() -> ConnectFuture {
    Box::pin(async {
        let url = url_from_env(POSTGRES_ENV, POSTGRES_DEFAULT);
        Stores::sql(sql_store(&url).await?, None, Origin::Sql(url))
    })
}

fn mariadb() -> ConnectFuture {
    Box::pin(async {
        let url = url_from_env(MYSQL_ENV, MYSQL_DEFAULT).replacen("mariadb:", "mysql:", 1);
        Stores::sql(sql_store(&url).await?, None, Origin::Sql(url))
    })
}

/// A Redis store at `url` with the benchmark's key prefix.
async fn redis_store(url: &str) -> BenchResult<RedisStore> {
    Ok(RedisStore::builder(url)
        .key_prefix(REDIS_KEY_PREFIX)
        .connect()
        .await?)
}

fn redis() -> ConnectFuture {
    Box::pin(async {
        let url = url_from_env(REDIS_ENV, REDIS_DEFAULT);
        Ok(Stores::redis(redis_store(&url).await?, Origin::Redis(url)))
    })
}

fn redis_cluster() -> ConnectFuture {
    Box::pin(async {
        let url = redis_cluster_url().ok_or_else(|| {
            format!(
                "{REDIS_CLUSTER_ENV} is not set (for example \
                 redis+cluster://127.0.0.1:17000,127.0.0.1:17001,127.0.0.1:17002)"
            )
        })?;
        let store = redis_store(&url).await?;
        if !store.is_cluster() {
            return Err(
                format!("{REDIS_CLUSTER_ENV} does not name a cluster (redis+cluster://…)").into(),
            );
        }
        Ok(Stores::redis(store, Origin::Redis(url)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> (String, u16) {
        (host.to_owned(), port)
    }

    #[test]
    fn endpoints_skip_the_user_info_and_default_the_port() {
        assert_eq!(
            endpoints("postgres://postgres@127.0.0.1:5432/test", 1),
            Some(vec![hp("127.0.0.1", 5432)])
        );
        assert_eq!(
            endpoints("mysql://root:p@ss@db.internal/test?ssl=1", 3306),
            Some(vec![hp("db.internal", 3306)])
        );
        assert_eq!(
            endpoints("redis://127.0.0.1", 6379),
            Some(vec![hp("127.0.0.1", 6379)])
        );
        assert_eq!(
            endpoints("redis+cluster://:pw@h1:17000,h2:17001,[::1]:17002", 6379),
            Some(vec![hp("h1", 17000), hp("h2", 17001), hp("::1", 17002)])
        );
        assert_eq!(endpoints("unix:///run/redis.sock", 6379), None);
        assert_eq!(endpoints("postgres:///db?host=/run/postgresql", 5432), None);
        assert_eq!(endpoints("redis://h:notaport", 6379), None);
    }

    #[test]
    fn every_backend_is_registered_once() {
        let mut names: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BACKENDS.len());
        for name in [
            "in-memory",
            "sqlite-file",
            "sqlite-memory",
            "postgres",
            "mariadb",
            "redis",
            "redis-cluster",
        ] {
            assert!(find(name).is_ok(), "{name}");
        }
        assert!(find("nope").is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_sqlite_file_is_deleted_after_the_case() {
        let stores = (find("sqlite-file").unwrap().connect)().await.unwrap();
        let path = stores.temp_db.as_ref().unwrap().path.clone();
        assert!(path.exists());
        let scope = memory_core::Scope::session("bench-file-test").unwrap();
        stores
            .history
            .append(&scope, &[memory_core::ChatMessage::user("hi")])
            .await
            .unwrap();
        assert!(stores.round_trips() > 0);
        stores.close().await;
        assert!(!path.exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_reopened_store_sees_and_writes_the_same_thread() {
        let scope =
            memory_core::Scope::session(format!("bench-reopen-{}", uuid::Uuid::new_v4())).unwrap();
        for (name, kind) in [
            ("in-memory", "same_object"),
            ("sqlite-memory", "same_object"),
            ("sqlite-file", "new_connection"),
        ] {
            let stores = (find(name).unwrap().connect)().await.unwrap();
            let second = stores.reopen().await.unwrap();
            assert_eq!(stores.reopen_kind(), kind, "{name}");
            second
                .history
                .append(&scope, &[memory_core::ChatMessage::user("from the second")])
                .await
                .unwrap();
            let window = stores
                .history
                .read(&scope, memory_core::Window::All)
                .await
                .unwrap();
            assert_eq!(window.len(), 1, "{name}");
            assert_eq!(window[0].message.text(), "from the second", "{name}");
            let path = stores.temp_db.as_ref().map(|db| db.path.clone());
            second.close().await;
            // Closing the second object leaves the first one's data (and SQLite file) alone.
            assert_eq!(
                stores.history.count(&scope).await.unwrap().active,
                1,
                "{name}"
            );
            if let Some(path) = &path {
                assert!(path.exists(), "{name}");
            }
            stores.history.clear(&scope).await.unwrap();
            stores.close().await;
        }
    }
}
