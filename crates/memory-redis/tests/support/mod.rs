//! Test tooling: the machine's Redis, and redis-server processes the tests start themselves (a
//! single server for the fault tests, a three-master cluster shared by all tests of a binary).
//!
//! Servers bind 127.0.0.1 on free ports, keep their data in a temporary directory, and never
//! outlive the test process: each has a watchdog shell that kills it once the test process is
//! gone, and servers left by a crashed earlier run are killed when the tooling first starts.
//! Nothing here is skipped: a server that cannot be reached or started fails the test, in CI
//! and elsewhere.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{LazyLock, OnceLock};
use std::time::{Duration, Instant};

use memory_core::{ChatMessage, MessageId, Scope};
use memory_redis::{Overflow, RedisStore};

/// The machine's Redis, unless `AGENT_MEMORY_REDIS_URL` names another.
pub fn standalone_url() -> String {
    std::env::var("AGENT_MEMORY_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix unique to this test process (`amtest-<hex>`), so concurrent runs on one server
/// never see each other's data, even through `purge_expired`.
pub fn prefix() -> &'static str {
    static PREFIX: LazyLock<String> =
        LazyLock::new(|| format!("amtest-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
    &PREFIX
}

/// How long test data on the machine's Redis lives: it cleans itself up.
pub const TEST_DATA_TTL: Duration = Duration::from_secs(2 * 3600);

/// A store on the machine's Redis, with this process's prefix and a TTL on all its data.
pub async fn standalone_store() -> RedisStore {
    let url = standalone_url();
    RedisStore::builder(&url)
        .key_prefix(prefix())
        .default_ttl(TEST_DATA_TTL)
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the Redis at {url} (AGENT_MEMORY_REDIS_URL) is needed by these tests and \
                 cannot be reached: {e}"
            )
        })
}

/// A scope of its own: a random tenant and session.
pub fn scope() -> Scope {
    Scope::session(format!("s-{}", uuid::Uuid::new_v4().simple()))
        .unwrap()
        .with_tenant(format!("t-{}", uuid::Uuid::new_v4().simple()))
        .unwrap()
}

/// A fresh tenant and `n` sessions of it (`s-0`, `s-1`, …).
pub fn tenant_scopes(n: usize) -> (String, Vec<Scope>) {
    let tenant = format!("t-{}", uuid::Uuid::new_v4().simple());
    let scopes = (0..n)
        .map(|i| {
            Scope::session(format!("s-{i}"))
                .unwrap()
                .with_tenant(tenant.as_str())
                .unwrap()
        })
        .collect();
    (tenant, scopes)
}

/// A user message with the id `id` and the text `text of <id>`.
pub fn message(id: &str) -> ChatMessage {
    ChatMessage::user(format!("text of {id}")).with_id(MessageId::new(id).unwrap())
}

/// A store on the machine's Redis, as [`standalone_store`], that keeps at most `max` messages
/// per thread and handles more by `overflow`.
pub async fn store_with(max: usize, overflow: Overflow) -> RedisStore {
    RedisStore::builder(&standalone_url())
        .key_prefix(prefix())
        .default_ttl(TEST_DATA_TTL)
        .max_messages(max)
        .overflow(overflow)
        .connect()
        .await
        .unwrap()
}

/// A plain connection to the machine's Redis, to read and write keys behind a store's back.
pub async fn raw() -> memory_redis::redis::aio::MultiplexedConnection {
    memory_redis::redis::Client::open(standalone_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The vector store on the machine's Redis under this process's prefix ([`prefix`]): vectors
/// of 4 dimensions, as the testkit's suite writes.
pub async fn standalone_vectors() -> memory_redis::RedisVectorStore {
    standalone_vectors_under(prefix()).await
}

/// A vector store on the machine's Redis under `prefix`, which must start with this process's
/// [`prefix`] (a store fixes one dimension per prefix, so a test with vectors of other
/// dimensions takes a prefix of its own).
///
/// Vector points have no TTL: the prefix is marked alive for [`VECTOR_MARK_TTL`] first, and
/// the first call of a process deletes the data of test prefixes whose mark has expired (their
/// process ended long ago), so the shared server does not collect test data.
pub async fn standalone_vectors_under(prefix: &str) -> memory_redis::RedisVectorStore {
    standalone_store_for_vectors(prefix).await.vector_store()
}

/// The store (no TTL) whose [`vector_store`](RedisStore::vector_store)
/// [`standalone_vectors_under`] returns, for tests that count its round trips.
pub async fn standalone_store_for_vectors(prefix: &str) -> RedisStore {
    assert!(prefix.starts_with(self::prefix()), "{prefix}");
    let mut conn = raw().await;
    let mut mark = redis::cmd("SET");
    mark.arg(vector_mark(prefix))
        .arg(1)
        .arg("EX")
        .arg(VECTOR_MARK_TTL.as_secs());
    let () = mark.query_async(&mut conn).await.unwrap();
    static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SWEPT.swap(true, std::sync::atomic::Ordering::SeqCst) {
        sweep_dead_vector_prefixes(&mut conn).await;
    }
    RedisStore::builder(&standalone_url())
        .key_prefix(prefix)
        .connect()
        .await
        .unwrap()
}

/// A prefix of its own under this process's ([`prefix`]): for a test that fixes another
/// dimension, or that looks at every key it wrote.
pub fn fresh_prefix() -> String {
    format!(
        "{}-{}",
        prefix(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// How long a test prefix's vector data is kept after its process started using it.
pub const VECTOR_MARK_TTL: Duration = Duration::from_secs(3 * 3600);

/// The key that says a test prefix's vector data is in use.
fn vector_mark(prefix: &str) -> String {
    format!("{prefix}:{{|vectors}}:test-alive")
}

/// Deletes every key of the `amtest-` prefixes that hold a vector dimension and whose mark
/// ([`vector_mark`]) has expired.
async fn sweep_dead_vector_prefixes(conn: &mut redis::aio::MultiplexedConnection) {
    let suffix = ":{|vectors}:vdims";
    let dims: Vec<String> = scan_all(conn, &format!("amtest-*{suffix}")).await;
    for key in dims {
        let Some(dead) = key.strip_suffix(suffix) else {
            continue;
        };
        let mut exists = redis::cmd("EXISTS");
        exists.arg(vector_mark(dead));
        let alive: i64 = exists.query_async(conn).await.unwrap();
        if alive > 0 || dead.contains(['*', '?', '[', ']']) {
            continue;
        }
        for chunk in scan_all(conn, &format!("{dead}:*")).await.chunks(500) {
            let mut unlink = redis::cmd("UNLINK");
            unlink.arg(chunk);
            let _: i64 = unlink.query_async(conn).await.unwrap();
        }
    }
}

/// Every key matching `pattern` on the machine's Redis.
pub async fn scan_all(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(10_000);
        let (next, batch): (u64, Vec<String>) = scan.query_async(conn).await.unwrap();
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// The vector store on the test cluster (started on first use) under this process's prefix.
pub async fn cluster_vectors() -> memory_redis::RedisVectorStore {
    cluster_store().await.vector_store()
}

/// A store on the test cluster (started on first use), with the default options.
pub async fn cluster_store() -> RedisStore {
    let cluster = cluster();
    RedisStore::builder(&cluster.url())
        .key_prefix(prefix())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test cluster {}: {e}", cluster.url()))
}

/// The directory of this tooling's pidfiles and server data.
fn base_dir() -> PathBuf {
    std::env::temp_dir().join("memory-redis-tests")
}

/// Kills the servers (and removes the data) of earlier test processes that are gone, once per
/// process.
fn clean_stale() {
    static CLEANED: OnceLock<()> = OnceLock::new();
    CLEANED.get_or_init(|| {
        let Ok(entries) = std::fs::read_dir(base_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".pid") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let mut parts = text.split_whitespace().map(|p| p.parse::<u32>().ok());
                let (server, owner) = (parts.next().flatten(), parts.next().flatten());
                if owner.is_some_and(alive) {
                    continue;
                }
                if let Some(server) = server.filter(|&p| is_redis_server(p)) {
                    let _ = Command::new("kill")
                        .args(["-9", &server.to_string()])
                        .status();
                }
                let _ = std::fs::remove_file(&path);
            } else if let Some(pid) = name.strip_prefix("run-")
                && pid.parse::<u32>().is_ok_and(|p| !alive(p))
            {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    });
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn is_redis_server(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim().starts_with("redis-server"))
}

/// A free TCP port on 127.0.0.1 (free when asked; the server start retries if it is taken).
pub fn free_port() -> u16 {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port on 127.0.0.1")
}

/// A redis-server process this test started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port with `args` (e.g. `["--appendonly", "yes"]`).
    pub fn start(args: &[&str]) -> Self {
        clean_stale();
        let mut last_error = String::new();
        for _attempt in 0..5 {
            let port = free_port();
            let dir = base_dir()
                .join(format!("run-{}", std::process::id()))
                .join(port.to_string());
            let mut server = Self {
                port,
                dir,
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("create {:?}: {e}", self.dir))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("redis.log"))
            .map_err(|e| format!("open the log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--dir", &self.dir.to_string_lossy()])
            .args(["--daemonize", "no", "--save", "", "--protected-mode", "yes"])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let mut child = command
            .spawn()
            .map_err(|e| format!("run redis-server (is it installed?): {e}"))?;
        let pid = child.id();
        let owner = std::process::id();
        let _ = std::fs::write(
            base_dir().join(format!("{}.pid", self.port)),
            format!("{pid} {owner}"),
        );
        // The watchdog: once the test process (or the server) is gone, kill the server.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {owner} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 1; done; \
                 if grep -q redis-server /proc/{pid}/comm 2>/dev/null; then kill -9 {pid}; fi; \
                 rm -f {pidfile}",
                pidfile = base_dir().join(format!("{}.pid", self.port)).display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
                return Err(format!(
                    "redis-server on port {} exited with {status}: {}",
                    self.port,
                    log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                ));
            }
            // Up and done loading: PONG, or NOAUTH from a server with a password.
            if command_reply(self.port, &["PING"])
                .is_some_and(|r| r.starts_with("+PONG") || r.starts_with("-NOAUTH"))
            {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-server on port {} did not answer", self.port));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server with SIGKILL (no shutdown, no save) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, directory and options (after
    /// [`kill`](Self::kill)), and waits until it answers `PING` (its data loaded).
    pub fn restart(&mut self) {
        self.kill();
        let mut last = String::new();
        for _ in 0..50 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "could not restart redis-server on port {}: {last}",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(base_dir().join(format!("{}.pid", self.port)));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends one command to 127.0.0.1:`port` and returns the raw reply (RESP text), or `None` when
/// the server cannot be reached.
pub fn command_reply(port: u16, args: &[&str]) -> Option<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if complete(&reply) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    (!reply.is_empty()).then(|| String::from_utf8_lossy(&reply).into_owned())
}

/// Whether a simple (`+`, `-`, `:`) or bulk (`$`) reply is complete.
fn complete(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    let Some(first_line_end) = text.find("\r\n") else {
        return false;
    };
    match text.as_bytes().first() {
        Some(b'$') => {
            let len: i64 = text[1..first_line_end].parse().unwrap_or(-1);
            len < 0 || reply.len() >= first_line_end + 2 + len as usize + 2
        }
        _ => true,
    }
}

/// The three-master test cluster.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// The seed URLs of every master.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The ports of the masters.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Starts a cluster of three masters of its own (stopped when dropped): for a test that
    /// takes a node down, which would break the other tests on the shared [`cluster`].
    pub fn start() -> Result<Self, String> {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let bus = free_port().to_string();
                RedisServer::start(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    "--cluster-port",
                    &bus,
                    "--appendonly",
                    "no",
                ])
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run redis-cli --cluster create: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            loop {
                let info = command_reply(node.port(), &["CLUSTER", "INFO"]).unwrap_or_default();
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "the cluster node on port {} is not ready: {info}",
                        node.port()
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(Self { nodes })
    }
}

/// The test cluster of this process, started on first use and stopped (by the watchdogs) when
/// the process ends.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(Cluster::start) {
        Ok(cluster) => cluster,
        Err(e) => panic!("the Redis Cluster the tests need could not be started: {e}"),
    }
}

/// A direct connection to the test servers, for the hostile suite's checks of undecodable
/// messages: it writes a stored body as raw bytes, bypassing the store.
#[derive(Clone)]
pub enum RawConn {
    /// The machine's Redis.
    Standalone(redis::aio::MultiplexedConnection),
    /// The test cluster.
    Cluster(redis::cluster_async::ClusterConnection),
}

impl std::fmt::Debug for RawConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RawConn::Standalone(_) => "RawConn::Standalone",
            RawConn::Cluster(_) => "RawConn::Cluster",
        })
    }
}

impl RawConn {
    /// A connection to the machine's Redis.
    pub async fn standalone() -> Self {
        let client = redis::Client::open(standalone_url()).unwrap();
        RawConn::Standalone(client.get_multiplexed_async_connection().await.unwrap())
    }

    /// A connection to the test cluster.
    pub async fn cluster() -> Self {
        let nodes: Vec<String> = cluster()
            .ports()
            .into_iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        let client = redis::cluster::ClusterClient::new(nodes).unwrap();
        RawConn::Cluster(client.get_async_connection().await.unwrap())
    }

    /// Runs `cmd`, returning its integer reply.
    pub async fn run(&self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self.clone() {
            RawConn::Standalone(mut c) => cmd.query_async(&mut c).await,
            RawConn::Cluster(mut c) => cmd.query_async(&mut c).await,
        }
    }
}

/// Overwrites message bodies of `RedisStore` threads (`…:msg`, a hash of seq → JSON) under
/// this process's prefix.
#[derive(Debug, Clone)]
pub struct RedisRaw(pub RawConn);

#[async_trait::async_trait]
impl memory_testkit::hostile::RawWriter for RedisRaw {
    async fn overwrite(&self, scope: &Scope, seq: u64, body: &[u8]) -> memory_core::Result<bool> {
        let key = format!("{}:{{{}}}:msg", prefix(), scope.key());
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key).arg(seq).arg(body);
        let added = self
            .0
            .run(&cmd)
            .await
            .unwrap_or_else(|e| panic!("HSET {key}: {e}"));
        assert_eq!(added, redis::Value::Int(0), "message {seq} existed");
        Ok(true)
    }
}
