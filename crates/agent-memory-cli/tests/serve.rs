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
use std::process::{Command, Stdio};
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove(agent_memory::URL_ENV)
        .env("AGENT_MEMORY_SERVER_TOKENS", format!("acme:alice={TOKEN}"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();

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

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("stopped"), "{rest}");
    assert!(!format!("{line}{rest}").contains(TOKEN));
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
