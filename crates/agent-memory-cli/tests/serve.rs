//! `agent-memory serve`: the real binary on a real socket, stopped by SIGTERM.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "serve-test-token-7f3a9c";

/// One HTTP/1.1 request over a fresh connection; the status and body.
fn request(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Reads stderr up to the line that says where the server listens; the address and the
/// lines read.
fn listening_address(stderr: &mut impl BufRead) -> (String, String) {
    let mut read = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server said no address: {read}"
        );
        read.push_str(&line);
        if let Some(addr) = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        {
            return (addr.to_owned(), read);
        }
    }
}

/// A running `agent-memory serve`: the process, its stderr, where it listens, and what it
/// said up to that line.
struct Served {
    child: Child,
    stderr: BufReader<ChildStderr>,
    addr: String,
    said: String,
}

/// `agent-memory serve` with `args`.
fn serve(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-memory"));
    command.arg("serve").args(args);
    command
}

/// Starts `command` with stderr piped (stdout dropped) and waits until it says where it
/// listens.
fn start(command: &mut Command) -> Served {
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (addr, said) = listening_address(&mut stderr);
    Served {
        child,
        stderr,
        addr,
        said,
    }
}

impl Served {
    /// Sends the server SIGTERM.
    fn sigterm(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// What the server says on stderr from now until it closes it.
    fn rest_of_stderr(&mut self) -> String {
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        rest
    }
}

/// A temporary directory holding `server.toml`, written with what `contents` gives for the
/// directory; the directory (removed when dropped) and the file's path.
fn config_file(
    contents: impl FnOnce(&std::path::Path) -> String,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, contents(dir.path())).unwrap();
    (dir, config)
}

/// The access log line of `log` (`what` names the case when there is none).
fn access_line<'a>(log: &'a str, what: &str) -> &'a str {
    log.lines()
        .find(|line| line.contains("memory_server::access"))
        .unwrap_or_else(|| panic!("no access line ({what}): {log}"))
}

#[test]
#[cfg(unix)]
fn serve_answers_then_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    let db = dir.path().join("served.db");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nstore_url = \"sqlite://{}\"\n[limits]\nmax_messages_per_append = 10\n",
            db.display()
        ),
    )
    .unwrap();
    let mut served = start(
        serve(&["--config"])
            .arg(&config)
            .env_remove(agent_memory::URL_ENV)
            .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme:alice={TOKEN}")),
    );
    let addr = served.addr.clone();

    let (status, body) = request(
        &addr,
        "POST",
        "/v1/threads/t1/messages",
        Some(r#"{"messages":[{"id":"m1","role":"user","text":"hello"}]}"#),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""inserted":1"#), "{body}");
    let (status, body) = request(&addr, "GET", "/v1/threads/t1/messages", None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hello"), "{body}");
    // The token is bound to alice: bob is refused.
    let (status, body) = request(&addr, "GET", "/v1/threads/t1/messages?user=bob", None);
    assert_eq!(status, 403, "{body}");

    served.sigterm();
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let rest = served.rest_of_stderr();
    assert!(rest.contains("stopped"), "{rest}");
    assert!(!format!("{}{rest}", served.said).contains(TOKEN));
}

#[test]
fn serve_refuses_a_public_address_without_tokens() {
    let output = Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .args(["serve", "--listen", "0.0.0.0:0", "--url", "memory:"])
        .env_remove("AGENT_MEMORY_SERVER_TOKENS")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("loopback"), "{stderr}");
}

/// Issue 29 (5): one token given to two tenants (here a plain token of `acme` whose digest is
/// also the file's token of `beta`) stops `serve` before it listens, with a sentence naming
/// both tenants and never the token; before, it started and wrote in the first tenant.
#[test]
fn serve_refuses_one_token_for_two_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    let digest: String = <sha2::Sha256 as sha2::Digest>::digest(TOKEN.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nstore_url = \"memory:\"\n\
             [[tokens]]\nsha256 = \"{digest}\"\ntenant = \"beta\"\n"
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove(agent_memory::URL_ENV)
        .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme={TOKEN}"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "serve started with a shared token"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("`acme`") && stderr.contains("`beta`"),
        "the refusal names both tenants: {stderr}"
    );
    assert!(!stderr.contains("http://"), "it never listened: {stderr}");
    assert!(
        !stderr.contains(TOKEN) && !stderr.to_lowercase().contains(&digest),
        "the refusal never names the token: {stderr}"
    );
}

/// Issue 29 (15, 10): `serve` logs every request at `info` by default, as JSON lines with
/// `AGENT_MEMORY_LOG_FORMAT=json` (method, route template, status, request id, tenant; never
/// the token or the body), and log text written to a pipe or a file has no colour codes.
#[test]
#[cfg(unix)]
fn serve_logs_each_request_without_secrets_or_colour_codes() {
    for format in ["json", "text"] {
        let dir = tempfile::tempdir().unwrap();
        let mut served = start(
            serve(&["--listen", "127.0.0.1:0", "--url", "memory:"])
                .env_remove("RUST_LOG")
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .env("AGENT_MEMORY_LOG_FORMAT", format)
                .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme:alice={TOKEN}"))
                .current_dir(dir.path()),
        );
        let (status, body) = request(
            &served.addr,
            "POST",
            "/v1/threads/secret-session/messages",
            Some(r#"{"messages":[{"id":"m1","role":"user","text":"body text"}]}"#),
        );
        assert_eq!(status, 200, "{body}");
        served.sigterm();
        assert!(served.child.wait().unwrap().success());
        let log = served.rest_of_stderr();
        assert!(!log.contains('\u{1b}'), "colour codes in a pipe: {log}");
        for secret in [TOKEN, "secret-session", "body text"] {
            assert!(!log.contains(secret), "{secret} in the log: {log}");
        }
        let access = access_line(&log, format);
        if format == "json" {
            let line: serde_json::Value = serde_json::from_str(access).unwrap();
            let fields = &line["fields"];
            assert_eq!(line["level"], "INFO", "{line}");
            assert_eq!(fields["method"], "POST", "{line}");
            assert_eq!(fields["route"], "/v1/threads/{session}/messages", "{line}");
            assert_eq!(fields["status"], 200, "{line}");
            assert_eq!(fields["tenant"], "acme", "{line}");
            assert!(
                fields["request_id"]
                    .as_str()
                    .is_some_and(|id| !id.is_empty()),
                "{line}"
            );
        } else {
            for part in [
                "POST",
                "/v1/threads/{session}/messages",
                "status=200",
                "tenant=acme",
            ] {
                assert!(access.contains(part), "{part} not in {access}");
            }
        }
    }
}

/// Issue 29: `[log] format = "json"` in the configuration file makes `serve` log JSON lines,
/// and `AGENT_MEMORY_LOG_FORMAT` wins over the file.
#[test]
#[cfg(unix)]
fn serve_takes_the_log_format_from_its_configuration() {
    for (variable, json) in [(None, true), (Some("text"), false)] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("server.toml");
        std::fs::write(
            &config,
            "listen = \"127.0.0.1:0\"\nstore_url = \"memory:\"\n[log]\nformat = \"json\"\n",
        )
        .unwrap();
        let mut command = serve(&["--config"]);
        command
            .arg(&config)
            .env_remove("RUST_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove(agent_memory::URL_ENV)
            .env_remove("AGENT_MEMORY_LOG_FORMAT")
            .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme:alice={TOKEN}"))
            .current_dir(dir.path());
        if let Some(format) = variable {
            command.env("AGENT_MEMORY_LOG_FORMAT", format);
        }
        let mut served = start(&mut command);
        let (status, body) = request(&served.addr, "GET", "/v1/threads", None);
        assert_eq!(status, 200, "{body}");
        served.sigterm();
        assert!(served.child.wait().unwrap().success());
        let log = served.rest_of_stderr();
        let access = access_line(&log, &format!("{variable:?}"));
        let parsed = serde_json::from_str::<serde_json::Value>(access);
        if json {
            let line = parsed.unwrap_or_else(|e| panic!("not a JSON line ({e}): {access}"));
            assert_eq!(line["fields"]["route"], "/v1/threads", "{line}");
            assert_eq!(line["fields"]["status"], 200, "{line}");
        } else {
            assert!(parsed.is_err(), "the variable wins over the file: {access}");
            assert!(access.contains("status=200"), "{access}");
        }
    }
}

/// Issue 29 (2): slow clients (a partial header, a stalled body, an idle connection) no longer
/// keep SIGTERM from stopping the server: the shutdown deadline cuts them.
#[test]
#[cfg(unix)]
fn sigterm_stops_the_server_while_slow_clients_hold_connections() {
    let (_dir, config) = config_file(|_| {
        "listen = \"127.0.0.1:0\"\nstore_url = \"memory:\"\n[http]\nheader_timeout_secs = 600\nbody_timeout_secs = 600\nidle_timeout_secs = 600\nshutdown_timeout_secs = 1\n".to_owned()
    });
    let mut served = start(
        serve(&["--config"])
            .arg(&config)
            .env_remove(agent_memory::URL_ENV)
            .env_remove("AGENT_MEMORY_SERVER_TOKENS"),
    );
    let addr = served.addr.clone();
    let mut partial = TcpStream::connect(&addr).unwrap();
    partial
        .write_all(b"GET /v1/threads HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    let mut stalled = TcpStream::connect(&addr).unwrap();
    write!(
        stalled,
        "POST /v1/threads/s/messages HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"messages\":"
    )
    .unwrap();
    let _silent = TcpStream::connect(&addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    served.sigterm();
    // A bound against a hang, far above the configured 1 s deadline.
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > give_up {
            served.child.kill().unwrap();
            panic!("the server still ran 30 s after SIGTERM under slow clients");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let rest = served.rest_of_stderr();
    assert!(rest.contains("stopped"), "{rest}");
}

/// The server's vector memory lives in the store: what a search found before the server was
/// killed with `-9` (SIGKILL: nothing flushed or closed on the way out), it finds after a
/// restart on the same database, session by session and across the user's sessions.
#[test]
#[cfg(unix)]
fn memory_survives_kill_9() {
    let (_dir, config) = config_file(|dir| {
        format!(
            "listen = \"127.0.0.1:0\"\nstore_url = \"sqlite://{}\"\n[embedder]\nkind = \"hashing\"\ndimensions = 256\n",
            dir.join("served.db").display()
        )
    });
    let command = || {
        let mut command = serve(&["--config"]);
        command
            .arg(&config)
            .env_remove(agent_memory::URL_ENV)
            .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme:alice={TOKEN}"));
        command
    };
    let mut served = start(&mut command());
    let facts = r#"{"messages":[{"id":"f1","role":"user","text":"The lighthouse keeper feeds the seagulls at dawn"},{"id":"f2","role":"assistant","text":"Noted: lighthouse, seagulls, dawn"}]}"#;
    let (status, body) = request(
        &served.addr,
        "POST",
        "/v1/memory/monday/messages",
        Some(facts),
    );
    assert_eq!(status, 200, "{body}");
    let filler: Vec<String> = (0..30)
        .map(|i| format!(r#"{{"id":"q{i}","role":"user","text":"several plain words in every filler message"}}"#))
        .collect();
    let filler = format!(r#"{{"messages":[{}]}}"#, filler.join(","));
    let (status, body) = request(
        &served.addr,
        "POST",
        "/v1/memory/monday/messages?token_limit=100",
        Some(&filler),
    );
    assert_eq!(status, 200, "{body}");
    let query = r#"{"query":"where does the lighthouse keeper feed seagulls","top_k":3}"#;
    let searches = ["/v1/memory/monday/search", "/v1/memory/search"];
    let before: Vec<String> = searches
        .iter()
        .map(|path| {
            let (status, body) = request(&served.addr, "POST", path, Some(query));
            assert_eq!(status, 200, "{path}: {body}");
            assert!(body.contains("lighthouse"), "{path}: {body}");
            body
        })
        .collect();

    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let mut restarted = start(&mut command());
    for (path, before) in searches.iter().zip(&before) {
        let (status, after) = request(&restarted.addr, "POST", path, Some(query));
        assert_eq!(status, 200, "{path}: {after}");
        assert_eq!(
            &after, before,
            "{path}: the same results after kill -9 and a restart"
        );
    }
    restarted.sigterm();
    assert!(restarted.child.wait().unwrap().success());
}
