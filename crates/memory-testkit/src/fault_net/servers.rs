//! Private database servers a test owns: a PostgreSQL or MariaDB instance in a temporary
//! directory on a free 127.0.0.1 port, which the test may kill with SIGKILL and restart on the
//! same port and data directory.
//!
//! The machine's shared servers are never touched. Each instance runs in its own process group
//! (so a kill takes the whole server, as a crash would), has a watchdog shell that kills it once
//! the test process is gone, and is stopped and its directory removed when the handle drops
//! (also when the test panics).
//!
//! A missing binary is not a test failure on a developer's machine: [`PrivatePostgres::start`]
//! and [`PrivateMariadb::start`] print why and return `None`. Under `CI=true` it fails the test.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to start (or to recover after a kill) before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free TCP port on 127.0.0.1 (free when asked; a start retries if it is taken meanwhile).
pub fn free_port() -> u16 {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port on 127.0.0.1")
}

/// Reports a missing prerequisite: fails under `CI=true`, otherwise prints the reason (the
/// caller then skips its test).
fn missing(what: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "{what} (CI=true: a fault test cannot be skipped in CI)"
    );
    eprintln!("skipped: {what}");
}

/// The first of `candidates` that is an existing file.
fn first_existing(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates.into_iter().find(|p| p.is_file())
}

/// `name` in each directory of `PATH`, then in `extra` directories.
fn on_path(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    first_existing(
        std::env::split_paths(&path)
            .chain(extra.iter().map(PathBuf::from))
            .map(|d| d.join(name)),
    )
}

/// The directory of this process's instances. The first call removes the directories of
/// earlier test processes that are gone (their watchdogs killed their servers).
fn base_dir() -> PathBuf {
    static CLEANED: std::sync::Once = std::sync::Once::new();
    let root = std::env::temp_dir().join("memory-testkit-servers");
    CLEANED.call_once(|| {
        for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("run-")
                && pid.parse::<u32>().is_ok()
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    root.join(format!("run-{}", std::process::id()))
}

/// Whether this process runs as root (PostgreSQL refuses to run as root).
fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The uid and gid of a system user, from `id`.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

/// Kills a process group with SIGKILL (through `kill`, no unsafe code).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Starts a shell that kills process group `pgid` once this process (or the group leader) is
/// gone.
fn watchdog(pgid: u32) {
    let owner = std::process::id();
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {owner} 2>/dev/null && kill -0 {pgid} 2>/dev/null; do sleep 1; done; \
             kill -9 -- -{pgid} 2>/dev/null"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// The last lines of a log file, for error messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(6).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// A process the instance started, in its own process group.
#[derive(Debug)]
pub struct Running {
    child: Child,
}

impl Running {
    fn kill(mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Watches the server that `child` runs until `ready` says it accepts connections, and
/// returns it running. When it exits first (its process group is killed then) or is not ready
/// within [`START_TIMEOUT`] (it is killed), an error names `name`, `port` and the tail of the
/// log at `log`.
fn until_ready(
    mut child: Child,
    name: &str,
    port: u16,
    log: &Path,
    ready: impl Fn() -> bool,
) -> Result<Running, String> {
    watchdog(child.id());
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            kill_group(child.id());
            return Err(format!(
                "{name} on port {port} exited with {status}: {}",
                tail(log)
            ));
        }
        if ready() {
            return Ok(Running { child });
        }
        if Instant::now() > deadline {
            Running { child }.kill();
            return Err(format!(
                "{name} on port {port} did not become ready: {}",
                tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Calls `spawn` (which starts the server `name` on `port` again) until it succeeds, at most
/// 20 times, 200 ms apart, and returns the server running.
///
/// # Panics
/// When it never does.
fn restart_with(
    name: &str,
    port: u16,
    mut spawn: impl FnMut() -> Result<Running, String>,
) -> Running {
    let mut last = String::new();
    for _ in 0..20 {
        match spawn() {
            Ok(running) => return running,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("could not restart {name} on port {port}: {last}");
}

/// What one database engine knows of its private servers: how to initialize a data directory
/// and how to start a server on it. [`PrivateServer`] does the rest (ports, retries, kill,
/// restart, clean-up) the same way for every engine.
pub trait Engine: std::fmt::Debug {
    /// The engine's name in messages, such as `PostgreSQL`.
    const NAME: &'static str;
    /// The start of each instance directory's name (the port follows).
    const DIR_PREFIX: &'static str;
    /// How many free ports a start tries.
    const START_ATTEMPTS: usize;

    /// Initializes a data directory under `dir` (which it creates).
    ///
    /// # Errors
    /// When the engine's tool fails, with its output.
    fn init(&self, dir: &Path) -> Result<(), String>;

    /// Starts a server on the data directory under `dir` listening on `port`, and waits until
    /// it accepts connections.
    ///
    /// # Errors
    /// When it exits or is not ready in time, with the tail of its log.
    fn spawn(&self, dir: &Path, port: u16) -> Result<Running, String>;
}

/// A private server of the engine `E` that the test owns, on a free 127.0.0.1 port with its
/// data in a temporary directory; killed and its directory removed when dropped.
#[derive(Debug)]
pub struct PrivateServer<E: Engine> {
    engine: E,
    dir: PathBuf,
    port: u16,
    running: Option<Running>,
}

impl<E: Engine> PrivateServer<E> {
    /// Initializes and starts a server of `engine` on a free port, trying
    /// [`Engine::START_ATTEMPTS`] ports.
    ///
    /// # Panics
    /// When a data directory cannot be initialized, or no attempt starts the server.
    fn start_with(engine: E) -> Self
    where
        E: Clone,
    {
        let mut last = String::new();
        for _attempt in 0..E::START_ATTEMPTS {
            let port = free_port();
            let mut server = Self {
                engine: engine.clone(),
                dir: base_dir().join(format!("{}-{port}", E::DIR_PREFIX)),
                port,
                running: None,
            };
            if let Err(e) = server.engine.init(&server.dir) {
                panic!("could not initialize a private {}: {e}", E::NAME);
            }
            match server.engine.spawn(&server.dir, port) {
                Ok(running) => {
                    server.running = Some(running);
                    return server;
                }
                Err(e) => last = e,
            }
        }
        panic!("could not start a private {}: {last}", E::NAME);
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills every process of the server with SIGKILL (no shutdown, no checkpoint or flush)
    /// and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.kill();
        }
    }

    /// Starts the server again on the same port and data directory (after
    /// [`kill`](Self::kill)), and waits until it accepts connections (crash recovery done).
    ///
    /// # Panics
    /// When it does not come back.
    pub fn restart(&mut self) {
        self.kill();
        let (engine, dir, port) = (&self.engine, &self.dir, self.port);
        let running = restart_with(E::NAME, port, || engine.spawn(dir, port));
        self.running = Some(running);
    }
}

impl<E: Engine> Drop for PrivateServer<E> {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private PostgreSQL server (trust authentication, `fsync` on) that the test owns.
pub type PrivatePostgres = PrivateServer<Postgres>;

/// PostgreSQL's binaries, and the system user that runs them when this process is root.
#[derive(Debug, Clone)]
pub struct Postgres {
    bin: PathBuf,
    ids: Option<(u32, u32)>,
}

impl PrivateServer<Postgres> {
    /// Initializes a cluster in a new temporary directory and starts it on a free port.
    /// `None` (with the reason printed) when PostgreSQL's binaries are not installed; under
    /// `CI=true` that fails instead. Set `AGENT_MEMORY_PG_BIN` to the directory of `initdb`
    /// and `postgres` to choose an installation.
    ///
    /// # Panics
    /// When the binaries exist but the server cannot be initialized or started.
    pub fn start() -> Option<Self> {
        let Some(bin) = Postgres::find_bin() else {
            missing(
                "PostgreSQL's initdb, postgres and pg_isready were not found (AGENT_MEMORY_PG_BIN, PATH, \
                 /usr/lib/postgresql/*/bin)",
            );
            return None;
        };
        let ids = if running_as_root() {
            match user_ids("postgres") {
                Some(ids) => Some(ids),
                None => {
                    missing("running as root and there is no `postgres` user to run PostgreSQL");
                    return None;
                }
            }
        } else {
            None
        };
        Some(Self::start_with(Postgres { bin, ids }))
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Postgres {
    fn find_bin() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("AGENT_MEMORY_PG_BIN") {
            let dir = PathBuf::from(dir);
            return dir.join("postgres").is_file().then_some(dir);
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let bin = e.path().join("bin");
                ["initdb", "postgres", "pg_isready"]
                    .iter()
                    .all(|p| bin.join(p).is_file())
                    .then_some((v, bin))
            })
            .collect();
        versions.sort();
        if let Some((_, bin)) = versions.pop() {
            return Some(bin);
        }
        if let Some(initdb) = on_path("initdb", &[]) {
            let dir = initdb.parent()?.to_path_buf();
            if dir.join("postgres").is_file() {
                return dir.join("pg_isready").is_file().then_some(dir);
            }
        }
        None
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.ids {
            command.uid(uid).gid(gid);
        }
        command.stdin(Stdio::null());
        command
    }
}

impl Engine for Postgres {
    const NAME: &'static str = "PostgreSQL";
    const DIR_PREFIX: &'static str = "pg";
    const START_ATTEMPTS: usize = 3;

    fn init(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {dir:?}: {e}"))?;
        if let Some((uid, gid)) = self.ids {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {dir:?}: {e}"))?;
        }
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
            .output()
            .map_err(|e| format!("run initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    fn spawn(&self, dir: &Path, port: u16) -> Result<Running, String> {
        let log_path = dir.join("postgres.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("open the log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &port.to_string()])
            .arg("-k")
            .arg(dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on"])
            .args(["-c", "shared_buffers=16MB", "-c", "max_connections=40"])
            .process_group(0)
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("run postgres: {e}"))?;
        until_ready(child, "postgres", port, &log_path, || {
            self.command("pg_isready")
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    }
}

/// A private MariaDB (or MySQL) server that the test owns: `root` without a password (grant
/// tables skipped), InnoDB with `innodb_flush_log_at_trx_commit=1`, and an empty database
/// `test`.
pub type PrivateMariadb = PrivateServer<Mariadb>;

/// MariaDB's (or MySQL's) server and install tool, and whether they run as root.
#[derive(Debug, Clone)]
pub struct Mariadb {
    server: PathBuf,
    install: PathBuf,
    root: bool,
}

impl PrivateServer<Mariadb> {
    /// Initializes a data directory in a new temporary directory and starts a server on a free
    /// port. `None` (with the reason printed) when `mariadbd`/`mariadb-install-db` (or
    /// `mysqld`/`mysql_install_db`) are not installed; under `CI=true` that fails instead.
    ///
    /// # Panics
    /// When the binaries exist but the server cannot be initialized or started.
    pub fn start() -> Option<Self> {
        let sbin = ["/usr/sbin", "/usr/local/sbin", "/usr/libexec"];
        let server = on_path("mariadbd", &sbin).or_else(|| on_path("mysqld", &sbin));
        let install =
            on_path("mariadb-install-db", &[]).or_else(|| on_path("mysql_install_db", &[]));
        let (Some(server), Some(install)) = (server, install) else {
            missing("MariaDB's mariadbd and mariadb-install-db were not found (PATH, /usr/sbin)");
            return None;
        };
        Some(Self::start_with(Mariadb {
            server,
            install,
            root: running_as_root(),
        }))
    }

    /// `mysql://root@127.0.0.1:<port>/test`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }
}

impl Engine for Mariadb {
    const NAME: &'static str = "MariaDB";
    const DIR_PREFIX: &'static str = "mariadb";
    const START_ATTEMPTS: usize = 5;

    fn init(&self, dir: &Path) -> Result<(), String> {
        let install = &self.install;
        std::fs::create_dir_all(dir).map_err(|e| format!("create {dir:?}: {e}"))?;
        let mut command = Command::new(install);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdin(Stdio::null());
        if self.root {
            command.arg("--user=root");
        }
        let out = command
            .output()
            .map_err(|e| format!("run {}: {e}", install.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}{}",
                install.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // A database is a directory of the data directory.
        std::fs::create_dir_all(dir.join("data").join("test"))
            .map_err(|e| format!("create the database `test`: {e}"))?;
        Ok(())
    }

    fn spawn(&self, dir: &Path, port: u16) -> Result<Running, String> {
        let log_path = dir.join("mariadb.log");
        let mut command = Command::new(&self.server);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg(format!("--log-error={}", log_path.display()))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-grant-tables",
                "--skip-name-resolve",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=16M",
                "--innodb-flush-log-at-trx-commit=1",
                "--max-connections=40",
            ])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.root {
            command.arg("--user=root");
        }
        let child = command
            .spawn()
            .map_err(|e| format!("run {}: {e}", self.server.display()))?;
        until_ready(child, "mariadbd", port, &log_path, || greets(port))
    }
}

/// Whether a MySQL-protocol server on `port` sends its handshake (protocol version 10), which
/// it does once it accepts connections.
fn greets(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1000)));
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).is_ok() && head[4] == 10
}
