//! The server against real Python clients, over real sockets: `agent-memory serve` on
//! 127.0.0.1 (a free port, a temporary SQLite file, a configuration with a bearer token), then
//!
//! - schemathesis, fuzzing every operation of `/openapi.json`: no 5xx, and every response
//!   (status, content type, headers, body) as the document describes it;
//! - the official MCP SDK (`mcp`) as a client over stdio (the binary's MCP stdio mode) and over
//!   streamable HTTP (`/mcp`), listing the tools and calling every one (`tests/python/mcp_client.py`);
//! - the plain-Python HTTP example (`examples/python/http_api.py`, standard library only).
//!
//! The interpreter comes from `AGENT_MEMORY_PYTOOLS_PYTHON`, a virtualenv with the pinned
//! `schemathesis` and `mcp` that `cargo xtask test` (or `cargo xtask fetch-pytools`) installs.
//! Without the variable the tests say so and pass, except in CI (`CI=true`), where it is a
//! failure — as memory-mem0's `real_mem0` tests do with `AGENT_MEMORY_MEM0_PYTHON`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// The variable `cargo xtask test` sets to the virtualenv's interpreter.
const PYTHON_ENV: &str = "AGENT_MEMORY_PYTOOLS_PYTHON";
/// The tenant the test token is bound to.
const TENANT: &str = "pytools";

/// The virtualenv's interpreter, or `None` outside CI when it is not configured.
fn pytools_python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) {
        let python = PathBuf::from(python);
        assert!(
            python.is_file(),
            "{PYTHON_ENV} names {}, which is not a file: run `cargo xtask fetch-pytools`",
            python.display()
        );
        return Some(python);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{PYTHON_ENV} must be set in CI: run the tests with `cargo xtask test`, which installs \
         schemathesis and mcp into a virtualenv and sets it"
    );
    eprintln!(
        "{PYTHON_ENV} is not set: skipping the Python client test outside CI; run \
         `cargo xtask test` (or export the path `cargo xtask fetch-pytools` prints)"
    );
    None
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A random token of 64 hex digits.
fn random_token() -> String {
    let seed = format!(
        "{:?}{}{:?}",
        std::time::SystemTime::now(),
        std::process::id(),
        std::thread::current().id()
    );
    hex(&Sha256::digest(seed.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `agent-memory serve` on a free loopback port and a temporary SQLite file; killed on drop.
struct Server {
    child: Child,
    port: u16,
    token: String,
    dir: tempfile::TempDir,
}

impl Server {
    /// Starts the server and waits (at most 60 s) until `/healthz` answers 200.
    fn start() -> Self {
        Self::start_with("")
    }

    /// As [`start`](Self::start), with `extra` TOML appended to the configuration.
    fn start_with(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let token = random_token();
        let config = dir.path().join("server.toml");
        let text = format!("{}{extra}", server_config(dir.path(), port, &token));
        std::fs::write(&config, text).unwrap();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_agent-memory"))
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env_remove("AGENT_MEMORY_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("could not start `agent-memory serve`");
        let mut server = Self {
            child,
            port,
            token,
            dir,
        };
        server.wait_healthy();
        server
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "`agent-memory serve` exited ({status}) before it was healthy; its log:\n{}",
                    self.log()
                );
            }
            if http_get_status(self.port, "/healthz") == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "`agent-memory serve` was not healthy within 60 s; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("server.toml")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The configuration file: the listen address, the SQLite file and the token's digest.
fn server_config(dir: &Path, port: u16, token: &str) -> String {
    let db = dir.join("memory.db");
    let digest = hex(&Sha256::digest(token.as_bytes()));
    format!(
        "listen = \"127.0.0.1:{port}\"\n\
         store_url = \"sqlite://{}\"\n\
         \n\
         [[tokens]]\n\
         sha256 = \"{digest}\"\n\
         tenant = \"{TENANT}\"\n",
        db.display()
    )
}

/// The status of `GET path` on 127.0.0.1:`port`, or `None` when the server does not answer.
fn http_get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0_u8; 32];
    let n = stream.read(&mut head).ok()?;
    let line = std::str::from_utf8(head.get(..n)?).ok()?;
    line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Runs `cmd` (with a time limit) and returns its standard output; the panic message carries
/// both streams and the server's log.
fn run(mut cmd: Command, limit: Duration, server: &Server, what: &str) -> String {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("could not start {what}: {err}"));
    // Drain both pipes on their own threads so a chatty child never blocks.
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not finish within {} s; the server's log:\n{}",
                limit.as_secs(),
                server.log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}\n--- the server's log\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A command running `python` with the environment of a Python tool (no colours, UTF-8, no
/// bytecode written next to the repository's scripts).
fn python_command(python: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.env("NO_COLOR", "1")
        .env("PYTHONUTF8", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH");
    cmd
}

#[test]
fn schemathesis_finds_no_server_error_and_no_schema_mismatch() {
    let Some(python) = pytools_python() else {
        return;
    };
    // With an embedder, the memory search route answers rather than 501 (no embedder).
    let server = Server::start_with("\n[embedder]\nkind = \"hashing\"\ndimensions = 64\n");
    let mut cmd = python_command(&python);
    cmd.current_dir(server.dir.path())
        .args(["-m", "schemathesis.cli", "run"])
        .arg(format!("{}/openapi.json", server.url()))
        .arg("--header")
        .arg(format!("Authorization: Bearer {}", server.token))
        .args([
            "--checks",
            SCHEMATHESIS_CHECKS,
            "--max-examples",
            "50",
            "--seed",
            "20261125",
            // One worker: with two (threads), this machine's CPython 3.11.7 failed a run at random
            // with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905,
            // a race in the interpreter), an error that says nothing about the server.
            "--workers",
            "1",
            "--request-timeout",
            "10",
            "--no-shrink",
            "--suppress-health-check",
            "all",
        ]);
    let stdout = run(cmd, Duration::from_secs(420), &server, "schemathesis");
    // A run that tested nothing would pass too: every operation of the document was tested.
    let selected = summary_number(&stdout, "Selected:");
    let tested = summary_number(&stdout, "Tested:");
    assert!(
        selected >= 13 && tested == selected,
        "schemathesis tested {tested} of {selected} operations:\n{stdout}"
    );
}

/// The checks: no 5xx; every status, content type, header and body as documented; invalid
/// requests refused; required headers (the token) enforced; unknown methods refused with a
/// correct `Allow`; deleted resources gone and created ones there; auth not ignored.
/// `positive_data_acceptance` is left out: the document does not (yet) give the id
/// constraints (`agent_memory::ID_RULE`) of paths and queries, so generated ids outside them
/// are refused with 400 as they should be.
const SCHEMATHESIS_CHECKS: &str = "not_a_server_error,status_code_conformance,\
    content_type_conformance,response_headers_conformance,response_schema_conformance,\
    negative_data_rejection,missing_required_header,unsupported_method,\
    allow_header_conformance,use_after_free,ensure_resource_availability,ignored_auth";

/// The first number after `label` in schemathesis's summary (`Selected: 13/13`, `Tested: 13`).
fn summary_number(stdout: &str, label: &str) -> u32 {
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| {
            rest.trim()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `{label}` line in schemathesis's output:\n{stdout}"))
}

#[test]
fn mcp_sdk_calls_every_tool_over_stdio() {
    let Some(python) = pytools_python() else {
        return;
    };
    // `agent-memory mcp` opens the HTTP server's SQLite file through the same configuration
    // file; the HTTP server only shares it (and its log goes into failure messages).
    let server = Server::start();
    run_mcp_client(&python, &server, "stdio", |cmd| {
        cmd.arg(env!("CARGO_BIN_EXE_agent-memory"))
            .args(["mcp", "--tenant", TENANT, "--config"])
            .arg(server.config_path())
            .env_remove("AGENT_MEMORY_URL");
    });
}

#[test]
fn mcp_sdk_calls_every_tool_over_streamable_http() {
    let Some(python) = pytools_python() else {
        return;
    };
    let server = Server::start();
    run_mcp_client(&python, &server, "http", |cmd| {
        cmd.arg(format!("{}/mcp", server.url()))
            .env("MCP_TOKEN", &server.token);
    });
}

/// Runs `tests/python/mcp_client.py` over `transport` (`stdio` or `http`), its further
/// arguments and environment given by `connect`, and checks it called every tool.
fn run_mcp_client(
    python: &Path,
    server: &Server,
    transport: &str,
    connect: impl FnOnce(&mut Command),
) {
    let mut cmd = python_command(python);
    cmd.current_dir(server.dir.path())
        .arg(mcp_script())
        .arg(transport);
    connect(&mut cmd);
    let stdout = run(
        cmd,
        Duration::from_secs(120),
        server,
        &format!("the MCP client over {transport}"),
    );
    assert!(
        stdout.contains(&format!("mcp client ok: 5 tools called over {transport}")),
        "{stdout}"
    );
}

#[test]
fn python_http_example_runs() {
    // The example needs only the standard library: any Python 3 runs it; the virtualenv's
    // when it is there, else `python3`.
    let python = std::env::var_os(PYTHON_ENV)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let server = Server::start();
    let script = workspace_root().join("examples/python/http_api.py");
    let mut cmd = python_command(&python);
    cmd.current_dir(server.dir.path())
        .arg(&script)
        .env("AGENT_MEMORY_SERVER", server.url())
        .env("AGENT_MEMORY_TOKEN", &server.token);
    let stdout = run(
        cmd,
        Duration::from_secs(60),
        &server,
        "examples/python/http_api.py",
    );
    assert!(stdout.contains("stale write refused: 412"), "{stdout}");
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
}

fn mcp_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py")
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}
