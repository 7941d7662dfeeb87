//! Slow and stalled clients against a real bound server, over raw TCP sockets (issue 29, 2):
//! a partial header, a stalled body, idle connections and many of them are cut by the
//! configured timeouts and bounded by the connection cap; a shutdown completes within its
//! deadline while slow clients hold connections; normal requests are served meanwhile.
//!
//! The timeouts are configured short (a fraction of a second); the waits below are only
//! bounds against a hang, far above them, never timing assertions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use memory_server::config::ServerConfig;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use support::{TestServer, read_response, read_until_closed, start_in_memory};

/// Far above every configured timeout: only a server that never cuts reaches it.
const HANG: Duration = Duration::from_secs(15);
const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(60);

fn short_timeouts(config: &mut ServerConfig) {
    config.http.header_timeout = SHORT;
    config.http.body_timeout = SHORT;
    config.http.idle_timeout = SHORT;
}

/// A complete request for `path` (keep-alive), with the server's own `Host`.
fn get(srv: &TestServer, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", srv.authority())
}

/// The start of a head that never ends (no blank line).
const PARTIAL_HEAD: &[u8] = b"GET /v1/threads HTTP/1.1\r\nHost: x\r\nX-Slow: ";

/// A connection of its own that has sent `bytes` and sends nothing more.
async fn connection_that_sent(srv: &TestServer, bytes: &[u8]) -> TcpStream {
    let mut socket = srv.connect().await;
    socket.write_all(bytes).await.unwrap();
    socket
}

/// A connection that sent an append's whole head (a body of 1000 bytes announced) and the
/// first 12 bytes of its body, then stalls.
async fn stalled_append(srv: &TestServer) -> TcpStream {
    let head = format!(
        "POST /v1/threads/s/messages HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"messages\":",
        srv.authority()
    );
    connection_that_sent(srv, head.as_bytes()).await
}

/// One request on a connection of its own (`Connection: close`); the whole response.
async fn request(srv: &TestServer, method: &str, path: &str, body: Option<&str>) -> String {
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        srv.authority(),
        body.len()
    );
    let mut socket = connection_that_sent(srv, request.as_bytes()).await;
    read_until_closed(&mut socket, HANG).await.unwrap()
}

/// A normal request is answered.
async fn assert_served(srv: &TestServer) {
    let answer = request(srv, "GET", "/v1/threads", None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partial_header_is_cut_after_the_header_timeout() {
    let mut srv = start_in_memory(short_timeouts).await;
    let mut partial = connection_that_sent(&srv, PARTIAL_HEAD).await;
    // A connection that never sends a byte is cut the same way.
    let mut silent = srv.connect().await;
    assert_served(&srv).await;
    let answer = read_until_closed(&mut partial, HANG).await;
    assert!(
        answer.is_some(),
        "a connection with a partial header was still open after {HANG:?}"
    );
    assert!(read_until_closed(&mut silent, HANG).await.is_some());
    assert_served(&srv).await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_body_is_answered_408_and_closed() {
    let mut srv = start_in_memory(short_timeouts).await;
    let mut stalled = stalled_append(&srv).await;
    assert_served(&srv).await;
    let answer = read_until_closed(&mut stalled, HANG)
        .await
        .unwrap_or_else(|| panic!("a stalled body was still open after {HANG:?}"));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    let answer = request(&srv, "GET", "/v1/threads/s/count", None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(r#""active":0"#),
        "nothing of the stalled append is stored: {answer}"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_and_silent_connections_are_closed() {
    let mut srv = start_in_memory(|config| {
        config.http.header_timeout = SHORT;
        config.http.idle_timeout = SHORT;
    })
    .await;
    // A keep-alive connection after its request.
    let mut idle = connection_that_sent(&srv, get(&srv, "/healthz").as_bytes()).await;
    let answer = read_response(&mut idle, HANG).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Fifty connections that never send anything.
    let mut silent = Vec::new();
    for _ in 0..50 {
        silent.push(srv.connect().await);
    }
    assert_served(&srv).await;
    assert!(
        read_until_closed(&mut idle, HANG).await.is_some(),
        "an idle keep-alive connection was still open after {HANG:?}"
    );
    for socket in &mut silent {
        assert!(
            read_until_closed(socket, HANG).await.is_some(),
            "a silent connection was still open after {HANG:?}"
        );
    }
    assert_served(&srv).await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_over_the_cap_wait_until_one_closes() {
    let mut srv = start_in_memory(|config| {
        config.http.header_timeout = LONG;
        config.http.idle_timeout = LONG;
        config.http.max_connections = 3;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut socket = connection_that_sent(&srv, get(&srv, "/healthz").as_bytes()).await;
        let answer = read_response(&mut socket, HANG).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        held.push(socket);
    }
    // The fourth connection is not served while three are open…
    let mut fourth = connection_that_sent(&srv, get(&srv, "/v1/threads").as_bytes()).await;
    assert!(
        read_response(&mut fourth, Duration::from_millis(500))
            .await
            .is_none(),
        "a connection over the cap of 3 was served"
    );
    // …and is as soon as one closes.
    drop(held.pop());
    let answer = read_response(&mut fourth, HANG).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    srv.stop().await;
}

/// A partial head, a stalled body, an idle keep-alive and 50 more silent or half-sent
/// connections: the shutdown still ends within its deadline and closes every one of them.
#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_completes_within_its_deadline_under_slow_clients() {
    let mut srv = start_in_memory(|config| {
        // The clients' own timeouts would not cut them before a minute: the deadline does.
        config.http.header_timeout = LONG;
        config.http.body_timeout = LONG;
        config.http.idle_timeout = LONG;
        config.http.shutdown_timeout = Duration::from_millis(500);
    })
    .await;
    let mut partial = connection_that_sent(&srv, PARTIAL_HEAD).await;
    let mut stalled = stalled_append(&srv).await;
    let mut idle = connection_that_sent(&srv, get(&srv, "/healthz").as_bytes()).await;
    assert!(read_response(&mut idle, HANG).await.is_some());
    // Many connections that sent nothing, or half a head, hold on too.
    let mut many = Vec::new();
    for i in 0..50 {
        let sent: &[u8] = if i % 2 == 1 {
            b"GET /v1/threads HTTP/1.1\r\nHost: x\r\n"
        } else {
            b""
        };
        many.push(connection_that_sent(&srv, sent).await);
    }
    let body = json!({"messages": [{"id": "m1", "role": "user", "text": "served"}]});
    let answer = request(
        &srv,
        "POST",
        "/v1/threads/ok/messages",
        Some(&body.to_string()),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    srv.begin_shutdown();
    assert!(
        srv.stopped_within(HANG).await,
        "the server still ran {HANG:?} after the shutdown began"
    );
    for socket in [&mut partial, &mut stalled, &mut idle]
        .into_iter()
        .chain(many.iter_mut())
    {
        assert!(read_until_closed(socket, HANG).await.is_some());
    }
}
